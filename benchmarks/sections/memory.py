"""`memory`: peak memory growth of forward + backward at sequence 512, 1024, 2048 (64, 128 with `--quick`; batch 1,
4 blocks of the shape's width, vocab 1024) for shaped attention through sdpa (no T×T tensor) against the eager
reference, which materialises the T×T matrices; each measurement in a fresh process whose peak RSS is reset first
(Linux `/proc/self/clear_refs`)."""

from __future__ import annotations

from dataclasses import asdict

from benchmarks.common import Context

ON_CUDA = False
BF16 = False
SEQS = (512, 1024, 2048)
QUICK_SEQS = (64, 128)
#: one malloc arena: the peak is the model's, not that of per-thread arenas
ENV = {"MALLOC_ARENA_MAX": "1"}


def run(ctx: Context) -> dict:
    out = {}
    for seq in QUICK_SEQS if ctx.quick else SEQS:
        row = {}
        for attn in ("sdpa", "eager"):
            job = {"kind": "attention_memory", "attn": attn, "seq": seq, "shape": asdict(ctx.shape)}
            row[f"{attn}_MiB"] = ctx.measure(job, ENV) / 1024
        row["eager_over_sdpa"] = row["eager_MiB"] / max(row["sdpa_MiB"], 1e-9)
        out[str(seq)] = row
    return out


def table(result: dict) -> str:
    lines = [
        "## Peak memory growth of forward + backward, sas_p (4 blocks, batch 1)",
        "| seq | sdpa (ours) MiB | eager T×T reference MiB | eager / sdpa |",
        "|---|---|---|---|",
    ]
    for seq, r in result.items():
        lines.append(f"| {seq} | {r['sdpa_MiB']:.0f} | {r['eager_MiB']:.0f} | {r['eager_over_sdpa']:.1f}× |")
    return "\n".join(lines)
