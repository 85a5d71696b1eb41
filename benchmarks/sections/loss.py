"""`loss`: the fused LM head + cross-entropy of a training step (`skip_logits`, the default in training mode) against
the unfused head (`skip_logits=False`: the `(tokens, vocab)` logits, their log-softmax and gradient), for `pre_ln`
and `sas_p`: step time round-robin on the same model in two processes (one per head), and the peak memory growth of
a training step after the first (forward, backward, AdamW; its state already allocated) in a fresh process per model
and head."""

from __future__ import annotations

from dataclasses import asdict

from benchmarks.common import Context, format_ratio, ratios, round_robin_processes

ON_CUDA = True
BF16 = False
NAMES = ("pre_ln", "sas_p")
HEADS = ("logits", "fused")
#: one malloc arena, and every allocation over 64 KiB mapped on its own: freed tensors leave the resident set, so
#: the peak is theirs
ENV = {"MALLOC_ARENA_MAX": "1", "MALLOC_MMAP_THRESHOLD_": "65536"}


def run(ctx: Context) -> dict:
    out = {}
    for name in NAMES:
        workers = {head: ctx.train_process(name, wait=False, skip_logits=head == "fused") for head in HEADS}
        timed_steps = round_robin_processes(workers, ctx.rounds)
        row = {head: dict(r) for head, r in timed_steps.items()}
        row["fused_speedup"] = ratios(timed_steps, "logits")["fused"]
        for head in HEADS:
            job = {"kind": "train_memory", "name": name, "shape": asdict(ctx.shape), "fused": head == "fused"}
            row[head]["peak_MiB"] = ctx.measure(job, ENV) / 1024
        row["memory_saving"] = 1 - row["fused"]["peak_MiB"] / row["logits"]["peak_MiB"]
        out[name] = row
    return out


def table(result: dict) -> str:
    lines = [
        "## Fused LM head + cross-entropy vs the logits path (training step)",
        "| model | logits s (median) | fused s (median) | speed-up (median, min-max, of min) | peak MiB logits → fused |",
        "|---|---|---|---|---|",
    ]
    for name, r in result.items():
        lines.append(
            f"| {name} | {r['logits']['median_s']:.3f} | {r['fused']['median_s']:.3f} | "
            f"{format_ratio(r['fused_speedup'])} | {r['logits']['peak_MiB']:.0f} → {r['fused']['peak_MiB']:.0f} "
            f"({-r['memory_saving']:+.0%}) |"
        )
    return "\n".join(lines)
