"""`quantization`: cached greedy `generate()` of `sas_p` (prompt 32, 128 new tokens; batch 1 and 8) with float32, bf16
and torchao int8 weight-only weights (`Int8WeightOnlyConfig`, every matrix: eq. 6's W^V folded and the tied head
quantized, as `from_pretrained(..., quantization_config=TorchAoConfig(Int8WeightOnlyConfig(),
include_input_output_embeddings=True))` leaves them: `quantization_simplified`), round-robin in this process; the
speed-up over float32 beside each precision's weight-bytes bound (float32's GEMM weight bytes over its own: what a
step reads where reading the weights limits it), with the host's GEMM peaks and CPU flags, the rate at which this
host reads memory and at which float32 batch-1 decoding reads its weights (their ratio: how bandwidth-bound float32
decoding is), int8's and bf16's largest logit error against float32, and where a batch-1 int8 decoding step's time
goes (torch's profiler, self CPU time: torchao's CPU linear converts the int8 matrix to the activations' dtype at
every call, then multiplies in float). Needs torchao (`pip install -e '.[clients]'`); without it the section
records why it did not run."""

from __future__ import annotations

import copy
import importlib.util
import time

import torch
from torch.profiler import ProfilerActivity, profile

from benchmarks.common import Context, cpu_flags, format_ratio, gemm_peaks, ratios, round_robin
from modeling_simplified.modeling_simplified import ReparamLinear
from modeling_simplified.quantization_simplified import fold_reparameterised

from . import generate

ON_CUDA = False
BF16 = False  # measures float32, bf16 and int8 itself
NAME = "sas_p"
PRECISIONS = ("float32", "bf16", "int8")
#: the operators of an int8 step that convert weights (torchao's per-call int8 → float copy) and that multiply
CONVERSION_OPS = frozenset({"aten::_to_copy", "aten::copy_", "aten::to"})
GEMM_OPS = frozenset({"aten::mm", "aten::addmm", "aten::matmul", "aten::bmm"})
#: bytes read by the memory-rate measurement: more than any cache
READ_BYTES = 512 * 2**20


def int8_weight_only(model: torch.nn.Module) -> torch.nn.Module:
    """`model` with every matrix quantized by torchao's `Int8WeightOnlyConfig`, in place: eq. 6's matrices folded
    first, then every linear layer (the tied head too, which then has its own quantized weight) - what
    `from_pretrained` with `include_input_output_embeddings=True` gives (tests/test_clients.py checks they agree)."""
    from torchao.quantization import Int8WeightOnlyConfig, quantize_

    fold_reparameterised(model, ReparamLinear)
    quantize_(model, Int8WeightOnlyConfig())
    return model


def tensor_bytes(t: torch.Tensor) -> int:
    """The bytes a tensor stores: a torchao tensor subclass's inner tensors (int8 data, scales) summed."""
    if type(t) in (torch.Tensor, torch.nn.Parameter):
        return t.numel() * t.element_size()
    inner, _ = t.__tensor_flatten__()
    return sum(tensor_bytes(getattr(t, name)) for name in inner)


def gemm_weight_bytes(model: torch.nn.Module) -> int:
    """The bytes of every matrix a decoding step multiplies by: linear layers (the head included) and eq. 6's
    matrices (which read W_init and ΔW)."""
    total = 0
    for module in model.modules():
        if isinstance(module, ReparamLinear):
            total += tensor_bytes(module.weight_init) + tensor_bytes(module.delta)
        elif isinstance(module, torch.nn.Linear):
            total += tensor_bytes(module.weight)
    return total


def memory_read_GBps(repeats: int = 5) -> float:
    """GB/s of a sum over `READ_BYTES` of float32 (best of `repeats` after one untimed): how fast this host streams
    memory into the cores, the rate a bandwidth-bound decoding step reads its weights at."""
    data = torch.ones(READ_BYTES // 4)
    best = float("inf")
    for r in range(repeats + 1):
        start = time.perf_counter()
        data.sum()
        if r:
            best = min(best, time.perf_counter() - start)
    return READ_BYTES / best / 1e9


def where_time_goes(ctx: Context, model: torch.nn.Module) -> dict:
    """Self CPU time of one batch-1 greedy `generate()` by operator: the conversion and GEMM shares, the top 8."""
    call = generate.greedy(ctx, 1)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        call("int8", model)
    ops = {}
    for e in prof.key_averages():
        ops[e.key] = ops.get(e.key, 0.0) + e.self_cpu_time_total / 1e3
    total = sum(ops.values())
    top = sorted(ops.items(), key=lambda item: -item[1])[:8]
    return {
        "total_self_ms": total,
        "conversion_share": sum(ms for op, ms in ops.items() if op in CONVERSION_OPS) / total,
        "gemm_share": sum(ms for op, ms in ops.items() if op in GEMM_OPS) / total,
        "top": [{"op": op, "self_ms": ms} for op, ms in top],
    }


def run(ctx: Context) -> dict:
    if importlib.util.find_spec("torchao") is None:
        return {"skipped": "torchao is not installed: pip install -e '.[clients]'"}
    import torchao

    peaks = gemm_peaks(ctx.device)
    out: dict = {"torchao": torchao.__version__, "cpu_flags": cpu_flags(), "gemm_peak_gflops": peaks}
    torch.manual_seed(0)
    float32 = ctx.build(NAME).eval()
    models = {
        "float32": float32,
        "bf16": copy.deepcopy(float32).to(torch.bfloat16),
        "int8": int8_weight_only(copy.deepcopy(float32)),
    }
    weights = {name: gemm_weight_bytes(model) for name, model in models.items()}
    out["gemm_weight_bytes"] = weights
    out["weight_bound_vs_float32"] = {name: weights["float32"] / weights[name] for name in models}
    batch = ctx.ids(batch=2, seq=generate.PROMPT)
    with torch.no_grad():
        reference = float32(batch).logits
        out["max_logit_error_vs_float32"] = {
            name: (model(batch).logits.float() - reference).abs().max().item() for name, model in models.items()
        }
    out["max_abs_logit_float32"] = reference.abs().max().item()
    out["memory_read_GBps"] = memory_read_GBps()
    for batch_size in generate.BATCHES:
        timed = round_robin(models, ctx.timed(generate.greedy(ctx, batch_size)), ctx.rounds)
        vs = ratios(timed, "float32")
        out[f"batch_{batch_size}"] = {
            name: {
                **r,
                "tokens_per_s": batch_size * generate.new_tokens(ctx) / r["median_s"],
                "vs_float32": vs[name],
                "weight_bound_vs_float32": out["weight_bound_vs_float32"][name],
            }
            for name, r in timed.items()
        }
    # float32 batch-1 decoding's weight reads per second: `generate` runs one forward per new token (the first over
    # the prompt), each reading every matrix once
    forwards = generate.new_tokens(ctx)
    out["float32_batch_1_weight_read_GBps"] = (
        weights["float32"] * forwards / out["batch_1"]["float32"]["median_s"] / 1e9
    )
    out["float32_read_share_of_memory_rate"] = out["float32_batch_1_weight_read_GBps"] / out["memory_read_GBps"]
    out["int8_profile_batch_1"] = where_time_goes(ctx, models["int8"])
    return out


def table(result: dict) -> str:
    if "skipped" in result:
        return f"## Quantized decoding: skipped ({result['skipped']})"
    peaks, profiled = result["gemm_peak_gflops"], result["int8_profile_batch_1"]
    lines = [
        f"## Quantized decoding of {NAME} (torchao {result['torchao']} int8 weight-only, every matrix): GEMM peak "
        f"{peaks['float32']:.0f} GFLOP/s float32, {peaks['bf16']:.0f} GFLOP/s bf16; CPU flags "
        f"{' '.join(result['cpu_flags']) or '-'}; memory read {result['memory_read_GBps']:.1f} GB/s, float32 batch-1 "
        f"decoding reads its weights at {result['float32_read_share_of_memory_rate']:.2f} of it",
        "| batch | weights | median s | tokens/s | vs float32: median (range, of mins) | weight-bytes bound | "
        "max logit error vs float32 |",
        "|---|---|---|---|---|---|---|",
    ]
    for batch in (k for k in result if k.startswith("batch_")):
        for name, r in result[batch].items():
            lines.append(
                f"| {batch.removeprefix('batch_')} | {name} | {r['median_s']:.2f} | {r['tokens_per_s']:.1f} | "
                f"{format_ratio(r['vs_float32'])} | {r['weight_bound_vs_float32']:.2f} | "
                f"{result['max_logit_error_vs_float32'][name]:.2e} |"
            )
    lines.append(
        f"int8 batch-1 step, self CPU time: {profiled['conversion_share']:.0%} converting weights "
        f"({', '.join(sorted(CONVERSION_OPS))}), {profiled['gemm_share']:.0%} in GEMMs"
    )
    return "\n".join(lines)
