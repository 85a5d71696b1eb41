"""`score`: forward-only throughput (no autograd, the logits of every position, as in scoring or prefill) of
`GPT2LMHeadModel`, `pre_ln`, `sas` and `sas_p` at batch 8 × 128 and 1 × 1024 tokens (2 × 32 and 1 × 64 with
`--quick`), round-robin in this process; ratios to `pre_ln` and to GPT-2 beside the forward matmul-FLOP bound
(`common.forward_matmul_flops_per_token`)."""

from __future__ import annotations

from dataclasses import replace

import torch

from benchmarks.common import Context, format_ratio, forward_matmul_flops_per_token, ratios, round_robin

ON_CUDA = True
BF16 = True
NAMES = ("gpt2", "pre_ln", "sas", "sas_p")
SHAPES = ((8, 128), (1, 1024))
QUICK_SHAPES = ((2, 32), (1, 64))


def run(ctx: Context) -> dict:
    torch.manual_seed(0)
    out = {}
    for batch, seq in QUICK_SHAPES if ctx.quick else SHAPES:
        shape = replace(ctx.shape, batch=batch, seq=seq)
        models = {name: ctx.inference_model(name, shape) for name in NAMES}
        flops = {name: forward_matmul_flops_per_token(model, shape) for name, model in models.items()}
        tokens = ctx.ids(batch=batch, seq=seq, seed=1)

        def score(name, model, tokens=tokens):
            with torch.no_grad():
                model(input_ids=tokens)

        results = round_robin(models, ctx.timed(score), ctx.rounds)
        vs_pre_ln, vs_gpt2 = ratios(results, "pre_ln"), ratios(results, "gpt2")
        out[f"{batch}x{seq}"] = {
            name: {
                **r,
                "tokens_per_s": batch * seq / r["median_s"],
                "forward_flops_per_token": flops[name],
                "vs_pre_ln": vs_pre_ln[name],
                "flop_bound_vs_pre_ln": flops["pre_ln"] / flops[name],
                "vs_gpt2": vs_gpt2[name],
                "flop_bound_vs_gpt2": flops["gpt2"] / flops[name],
            }
            for name, r in results.items()
        }
        del models
    return out


def table(result: dict) -> str:
    lines = [
        "## Scoring (forward only, every position's logits): tokens/s",
        "| batch × seq | model | median s | tokens/s | vs pre_ln: median (range, of mins) | FLOP bound vs pre_ln "
        "| share of bound | vs GPT2LMHeadModel | FLOP bound vs GPT-2 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for shape, rows in result.items():
        for name, r in rows.items():
            share = r["vs_pre_ln"]["ratio_median"] / r["flop_bound_vs_pre_ln"]
            lines.append(
                f"| {shape} | {name} | {r['median_s']:.3f} | {r['tokens_per_s']:.0f} | {format_ratio(r['vs_pre_ln'])} "
                f"| {r['flop_bound_vs_pre_ln']:.3f} | {share:.3f} | {format_ratio(r['vs_gpt2'])} "
                f"| {r['flop_bound_vs_gpt2']:.3f} |"
            )
    return "\n".join(lines)
