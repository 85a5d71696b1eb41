"""`profile`: the top operators by self CPU time of one eager training step (`torch.profiler`, after `TRAIN_WARMUP`
steps) of `pre_ln` and `sas_p`: where the time goes that matmul FLOPs do not count."""

from __future__ import annotations

import torch
from torch.profiler import ProfilerActivity, profile

from benchmarks.common import TRAIN_WARMUP, Context, ids, optimizer_for, train_step

ON_CUDA = False
BF16 = False
NAMES = ("pre_ln", "sas_p")
TOP = 12


def run(ctx: Context) -> dict:
    batch = ids(ctx.shape)
    out = {}
    for name in NAMES:
        torch.manual_seed(0)
        model = ctx.build(name).train()
        optimizer = optimizer_for(model)
        for _ in range(TRAIN_WARMUP):
            train_step(model, optimizer, batch)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            train_step(model, optimizer, batch)
        events = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
        total_ms = sum(e.self_cpu_time_total for e in events) / 1e3
        out[name] = {
            "total_self_ms": total_ms,
            "top": [{"op": e.key, "calls": e.count, "self_ms": e.self_cpu_time_total / 1e3} for e in events[:TOP]],
        }
        del model, optimizer
    return out


def table(result: dict) -> str:
    blocks = []
    for name, r in result.items():
        lines = [
            f"## Profile of one eager training step, {name} (self CPU time, all threads: {r['total_self_ms']:.0f} ms)",
            "| op | calls | self ms | share |",
            "|---|---|---|---|",
        ]
        for e in r["top"]:
            lines.append(f"| {e['op']} | {e['calls']} | {e['self_ms']:.1f} | {e['self_ms'] / r['total_self_ms']:.1%} |")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)
