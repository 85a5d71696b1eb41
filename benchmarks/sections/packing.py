"""`packing`: tokens/s of a training step on variable-length sequences (lengths uniform in [seq/8, seq], seq at least
128, batch at least 8), padded to the longest of the batch (2-D mask, ignored labels) against one padding-free row
(`DataCollatorWithFlattening`, `simplified-train --packing`), for `pre_ln` and `sas_p`; round-robin on the same model
in this process, tokens counted without padding."""

from __future__ import annotations

from dataclasses import replace

import torch
from transformers import DataCollatorWithFlattening

from benchmarks.common import Context, optimizer_for, ratios, round_robin

ON_CUDA = False
BF16 = False
NAMES = ("pre_ln", "sas_p")


def run(ctx: Context) -> dict:
    shape = ctx.shape
    seq, batch = max(shape.seq, 128), max(shape.batch, 8)
    gen = torch.Generator().manual_seed(0)
    lengths = torch.randint(seq // 8, seq + 1, (batch,), generator=gen).tolist()
    seqs = [torch.randint(0, shape.vocab, (n,), generator=gen) for n in lengths]
    ids = torch.zeros(batch, max(lengths), dtype=torch.long)
    mask, labels = torch.zeros_like(ids), torch.full_like(ids, -100)
    for i, s in enumerate(seqs):
        ids[i, : len(s)], mask[i, : len(s)], labels[i, : len(s)] = s, 1, s
    batches = {
        "padded": dict(input_ids=ids, attention_mask=mask, labels=labels),
        "packed": DataCollatorWithFlattening(return_position_ids=True)([{"input_ids": s.tolist()} for s in seqs]),
    }
    tokens = sum(lengths)
    out = {"seq": seq, "batch": batch, "tokens": tokens, "padded_tokens": int(ids.numel())}
    for name in NAMES:
        model = ctx.build(name, replace(shape, seq=seq, batch=batch))
        optimizer = optimizer_for(model)

        def step(kind, model, optimizer=optimizer):
            model(**batches[kind]).loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        timed_steps = round_robin({"padded": model, "packed": model}, ctx.timed(step), ctx.rounds)
        out[name] = {kind: {**r, "tokens_per_s": tokens / r["min_s"]} for kind, r in timed_steps.items()}
        out[name]["packed_over_padded"] = ratios(timed_steps, "padded")["packed"]
    return out


def table(result: dict) -> str:
    lines = [
        f"## Packing: {result['batch']} sequences of {result['seq'] // 8}..{result['seq']} tokens "
        f"({result['tokens']} real tokens, {result['padded_tokens']} padded)",
        "| model | padded tok/s | packed tok/s | packed / padded (median, min..max) |",
        "|---|---|---|---|",
    ]
    for name, row in result.items():
        if isinstance(row, dict):
            q = row["packed_over_padded"]
            lines.append(
                f"| {name} | {row['padded']['tokens_per_s']:.0f} | {row['packed']['tokens_per_s']:.0f} | "
                f"{q['ratio_median']:.2f} ({q['ratio_low']:.2f}..{q['ratio_high']:.2f}) |"
            )
    return "\n".join(lines)
