"""`profile`: where one training step's time goes (`torch.profiler`, self CPU time, after the warm-up steps), eager
and under `torch.compile`, for `pre_ln`, `sas` and `sas_p`, in the run's precision: the top operators, the time in
GEMMs, in the attention kernel and in the rest, and the operators on which a shaped block spends more than pre_ln:
the time that matmul FLOPs do not count. Then sas_p's batch-1 decoding by the compiled recipe of docs/inference.md
with float32 and with bf16 weights, by kernel (inductor's kernels named in the profile): the time per token in the
compiled graph's own kernels and its GEMMs, which read the weights, and the weight bytes per second that implies."""

from __future__ import annotations

import re
import time

import torch
from torch.profiler import ProfilerActivity, profile

from benchmarks.common import DTYPES, TRAIN_WARMUP, Context, gemm_weights, ids, optimizer_for, train_step

from . import generate

ON_CUDA = False
BF16 = True
NAMES = ("pre_ln", "sas", "sas_p")
TOP = 12
#: the model whose compiled decoding is profiled, in both precisions
DECODE_NAME = "sas_p"
#: the operators counted as GEMMs (dense matmuls of weights, activations and attention's eager products)
GEMM_OPS = frozenset({"aten::mm", "aten::addmm", "aten::addmm_", "aten::bmm", "aten::baddbmm", "aten::matmul"})


def op_name(key: str) -> str:
    """The profiler's key without a compiled graph's hash or region number, so that models' graphs compare."""
    return re.sub(r"(CompiledFxGraph) \w+|(Compiled Region): [\d/]+", r"\1\2", key)


def category(op: str) -> str:
    if op in GEMM_OPS or op.startswith(("mkldnn::", "onednn::", "mkl::")):  # compiled graphs' prepacked linears
        return "gemm"
    if "scaled_dot_product" in op or "flash_attention" in op:
        return "attention kernel"
    return "rest"


def profile_step(ctx: Context, name: str, compiled: bool) -> dict:
    """Self CPU time per operator of one training step of `name`, after `TRAIN_WARMUP` steps (one more compiled)."""
    batch = ids(ctx.shape)
    torch.manual_seed(0)
    model = ctx.build(name).train()
    optimizer = optimizer_for(model)
    runner = torch.compile(model) if compiled else model
    for _ in range(TRAIN_WARMUP + compiled):
        train_step(runner, optimizer, batch, dtype=ctx.dtype)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        train_step(runner, optimizer, batch, dtype=ctx.dtype)
    ops: dict[str, tuple[int, float]] = {}
    for e in prof.key_averages():
        calls, ms = ops.get(op_name(e.key), (0, 0.0))
        ops[op_name(e.key)] = (calls + e.count, ms + e.self_cpu_time_total / 1e3)
    total = sum(ms for _, ms in ops.values())
    by_category: dict[str, float] = {}
    for op, (_, ms) in ops.items():
        by_category[category(op)] = by_category.get(category(op), 0.0) + ms
    ranked = sorted(ops.items(), key=lambda item: item[1][1], reverse=True)
    return {
        "total_self_ms": total,
        "categories_ms": by_category,
        "top": [{"op": op, "calls": calls, "self_ms": ms} for op, (calls, ms) in ranked[:TOP]],
        "ops": {op: {"calls": calls, "self_ms": ms} for op, (calls, ms) in ops.items()},
    }


def excess_over(profile_: dict, base: dict, top: int = 8) -> list[dict]:
    """The operators on which `profile_` spends the most self time beyond `base` (same operator name)."""
    rows = []
    for op, row in profile_["ops"].items():
        base_row = base["ops"].get(op, {"calls": 0, "self_ms": 0.0})
        rows.append(
            {
                "op": op,
                "calls": row["calls"],
                "base_calls": base_row["calls"],
                "self_ms": row["self_ms"],
                "excess_ms": row["self_ms"] - base_row["self_ms"],
            }
        )
    return sorted(rows, key=lambda r: r["excess_ms"], reverse=True)[:top]


def profile_decoding(ctx: Context, dtype: str) -> dict:
    """One profiled batch-1 `generate` of `DECODE_NAME` with `dtype` weights by the compiled recipe, compiled with
    inductor's kernel profiling (each generated kernel a profiler event), its first call (compiling) and a warm
    call timed, then profiled: per token, the time in the graph's generated kernels (`graph_…`) and GEMMs (float32's
    prepacked ones are extern), and the GEMM weight bytes over that time."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = ctx.build(DECODE_NAME).eval().to(DTYPES[dtype])
    call = generate.greedy(ctx, 1, **generate.STATIC)
    with torch._inductor.config.patch({"cpp.enable_kernel_profile": True}):
        generate.compile_for_decoding(model)
        walls = []
        for _ in range(2):  # the first compiles (the prompt's graph and a step's); the second is a warm call
            start = time.perf_counter()
            call(DECODE_NAME, model)
            walls.append(time.perf_counter() - start)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        call(DECODE_NAME, model)
    tokens = generate.new_tokens(ctx)
    kernels = [e for e in prof.key_averages() if e.key.startswith("graph_") or category(e.key) == "gemm"]
    kernel_ms = sum(e.self_cpu_time_total for e in kernels) / 1e3
    total_ms = sum(e.self_cpu_time_total for e in prof.key_averages()) / 1e3
    weight_bytes = gemm_weights(model) * DTYPES[dtype].itemsize
    top = sorted(kernels, key=lambda e: e.self_cpu_time_total, reverse=True)[:4]
    return {
        "tokens": tokens,
        "first_call_s": walls[0],
        "warm_call_s": walls[1],
        "weight_bytes": weight_bytes,
        "ms_per_token": total_ms / tokens,
        "kernel_ms_per_token": kernel_ms / tokens,
        "kernel_weight_GBps": weight_bytes * tokens / kernel_ms / 1e6,
        "top_kernels": [
            {"kernel": e.key[:120], "calls": e.count, "ms_per_token": e.self_cpu_time_total / 1e3 / tokens} for e in top
        ],
    }


def run(ctx: Context) -> dict:
    out: dict[str, dict] = {}
    for mode in ("eager", "compiled"):
        profiles = {name: profile_step(ctx, name, compiled=mode == "compiled") for name in NAMES}
        for name, p in profiles.items():
            if name != "pre_ln":
                p["excess_over_pre_ln"] = excess_over(p, profiles["pre_ln"])
        out[mode] = profiles
    out["decode"] = {dtype: profile_decoding(ctx, dtype) for dtype in DTYPES}
    return out


def table(result: dict) -> str:
    blocks = []
    decode = result.get("decode", {})
    for mode, profiles in result.items():
        if mode == "decode":
            continue
        lines = [
            f"## Profile of one {mode} training step (self CPU time, all threads; ms)",
            "| model | total | GEMMs | attention kernel | rest | vs pre_ln: total, GEMMs, attention, rest |",
            "|---|---|---|---|---|---|",
        ]
        base = profiles["pre_ln"]
        for name, p in profiles.items():
            c, b = p["categories_ms"], base["categories_ms"]
            parts = ("gemm", "attention kernel", "rest")
            deltas = ", ".join(f"{c.get(k, 0.0) - b.get(k, 0.0):+.0f}" for k in parts)
            lines.append(
                f"| {name} | {p['total_self_ms']:.0f} | "
                + " | ".join(f"{c.get(k, 0.0):.0f}" for k in parts)
                + f" | {p['total_self_ms'] - base['total_self_ms']:+.0f}, {deltas} |"
            )
        blocks.append("\n".join(lines))
        for name, p in profiles.items():
            lines = [f"### {mode}, {name}: top operators", "| op | calls | self ms | share |", "|---|---|---|---|"]
            for e in p["top"]:
                lines.append(
                    f"| {e['op']} | {e['calls']} | {e['self_ms']:.1f} | {e['self_ms'] / p['total_self_ms']:.1%} |"
                )
            if "excess_over_pre_ln" in p:
                lines += [
                    "",
                    f"{name} beyond pre_ln, by operator: "
                    + "; ".join(
                        f"{e['op']} {e['excess_ms']:+.1f} ms ({e['calls']} calls against {e['base_calls']})"
                        for e in p["excess_over_pre_ln"]
                    ),
                ]
            blocks.append("\n".join(lines))
    if decode:
        lines = [
            f"## Compiled batch-1 decoding of {DECODE_NAME} by kernel (per token, profiled; ms)",
            "| weights | all events | the graph's kernels and GEMMs | weight MB | weight GB/s in those | first call "
            "(compiles) s | warm call s |",
            "|---|---|---|---|---|---|---|",
        ]
        for dtype, d in decode.items():
            lines.append(
                f"| {dtype} | {d['ms_per_token']:.2f} | {d['kernel_ms_per_token']:.2f} | {d['weight_bytes'] / 1e6:.0f} | "
                f"{d['kernel_weight_GBps']:.1f} | {d['first_call_s']:.1f} | {d['warm_call_s']:.2f} |"
            )
        for dtype, d in decode.items():
            lines.append(
                f"\n{dtype}, top kernels: "
                + "; ".join(f"{k['kernel']} ({k['calls']} calls) {k['ms_per_token']:.2f} ms" for k in d["top_kernels"])
            )
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)
