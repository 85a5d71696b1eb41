"""`precision`: bf16 against float32 on this host, whatever `--dtype` is: the two GEMM peaks (`common.gemm_peaks`)
and the CPU's flags; the training step of `pre_ln` and `sas_p` under bf16 autocast (the Trainer's `bf16=True`,
float32 master weights) against float32, round-robin, each model and precision in a process of its own; and cached
greedy `generate()` at batch 1 (prompt 32, 128 new tokens) with bf16 weights against float32 weights, round-robin
in this process, eager and by the compiled recipe (`generate.compile_for_decoding`, each precision compiled). Ratios are float32 time / bf16 time per round, beside two bounds: the GEMM-peak ratio (training
is matmul-bound) and 2, the ratio of the weight bytes a batch-1 decoding step reads."""

from __future__ import annotations

import torch

from benchmarks.common import (
    DTYPES,
    Context,
    cpu_flags,
    format_ratio,
    gemm_peaks,
    ratios,
    round_robin,
    round_robin_processes,
)

from . import generate

ON_CUDA = True
BF16 = True
NAMES = ("pre_ln", "sas_p")


def run(ctx: Context) -> dict:
    peaks = gemm_peaks(ctx.device)
    out: dict = {"cpu_flags": cpu_flags(), "gemm_peak_gflops": peaks, "peak_ratio": peaks["bf16"] / peaks["float32"]}
    workers = {
        f"{name} {dtype}": ctx.train_process(name, dtype=dtype, wait=False) for name in NAMES for dtype in DTYPES
    }
    steps = round_robin_processes(workers, ctx.rounds)
    out["train"] = {
        name: {dtype: steps[f"{name} {dtype}"] for dtype in DTYPES}
        | {"bf16_vs_float32": ratios({d: steps[f"{name} {d}"] for d in DTYPES}, "float32")["bf16"]}
        for name in NAMES
    }
    torch.manual_seed(0)
    models = {
        f"{name} {dtype}": ctx.build(name).eval().to(torch_dtype)
        for name in NAMES
        for dtype, torch_dtype in DTYPES.items()
    }
    out["generate_batch_1"] = _decoding(ctx, models, {})
    torch._dynamo.reset()
    torch.manual_seed(0)
    models = {
        f"{name} {dtype}": generate.compile_for_decoding(ctx.build(name).eval().to(torch_dtype))
        for name in NAMES
        for dtype, torch_dtype in DTYPES.items()
    }
    out["generate_batch_1_compiled"] = _decoding(ctx, models, generate.STATIC)
    return out


def _decoding(ctx: Context, models: dict, generate_kwargs: dict) -> dict:
    """Batch-1 greedy decoding of each model in both precisions, round-robin: times and bf16's speed-up."""
    decoded = round_robin(models, ctx.timed(generate.greedy(ctx, 1, **generate_kwargs)), ctx.rounds)
    return {
        name: {dtype: decoded[f"{name} {dtype}"] for dtype in DTYPES}
        | {"tokens_per_s": {d: generate.new_tokens(ctx) / decoded[f"{name} {d}"]["median_s"] for d in DTYPES}}
        | {"bf16_vs_float32": ratios({d: decoded[f"{name} {d}"] for d in DTYPES}, "float32")["bf16"]}
        for name in NAMES
    }


def table(result: dict) -> str:
    peaks = result["gemm_peak_gflops"]
    lines = [
        f"## bf16 against float32: GEMM peak {peaks['float32']:.0f} GFLOP/s float32, {peaks['bf16']:.0f} GFLOP/s "
        f"bf16 ({result['peak_ratio']:.2f}x); CPU flags {' '.join(result['cpu_flags']) or '-'}",
        "| measurement | model | float32 median s | bf16 median s | bf16 speed-up: median (range, of mins) | bound |",
        "|---|---|---|---|---|---|",
    ]
    for kind, bound in (
        ("train", f"{result['peak_ratio']:.2f} (GEMM peaks)"),
        ("generate_batch_1", "2 (weight bytes)"),
        ("generate_batch_1_compiled", "2 (weight bytes)"),
    ):
        for name, r in result.get(kind, {}).items():
            lines.append(
                f"| {kind.replace('_', ' ')} | {name} | {r['float32']['median_s']:.3f} | {r['bf16']['median_s']:.3f} | "
                f"{format_ratio(r['bf16_vs_float32'])} | {bound} |"
            )
    return "\n".join(lines)
