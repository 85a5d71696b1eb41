"""`step_memory`: peak resident growth of a training step after the first (forward, backward, AdamW; its state
already allocated) for `GPT2LMHeadModel`, `pre_ln` and `sas_p`, each in a fresh process with glibc returning freed
memory to the kernel (`MALLOC_TRIM_THRESHOLD_=0`, one arena), so the peak is what the step holds at once, not what
the allocator kept; ratios to GPT-2 in the same run."""

from __future__ import annotations

from dataclasses import asdict

from benchmarks.common import Context

ON_CUDA = False
BF16 = False
NAMES = ("gpt2", "pre_ln", "sas_p")
ENV = {"MALLOC_ARENA_MAX": "1", "MALLOC_TRIM_THRESHOLD_": "0"}


def run(ctx: Context) -> dict:
    out = {}
    for name in NAMES:
        job = {"kind": "train_memory", "name": name, "shape": asdict(ctx.shape), "fused": None}
        out[name] = {"peak_growth_MiB": ctx.measure(job, ENV) / 1024}
    for row in out.values():
        row["vs_gpt2"] = row["peak_growth_MiB"] / out["gpt2"]["peak_growth_MiB"]
    return out


def table(result: dict) -> str:
    lines = [
        "## Peak resident growth of a training step, glibc trimming freed memory (MALLOC_TRIM_THRESHOLD_=0)",
        "| model | MiB | vs GPT2LMHeadModel |",
        "|---|---|---|",
    ]
    for name, r in result.items():
        lines.append(f"| {name} | {r['peak_growth_MiB']:.0f} | {r['vs_gpt2']:.2f}× |")
    return "\n".join(lines)
