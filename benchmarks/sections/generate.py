"""`generate`: cached greedy `generate()` tokens/s of `GPT2LMHeadModel`, `pre_ln` and `sas_p` (prompt 32, 128 new
tokens; 16 with `--quick`; batch 1 and 8), round-robin in this process; ratios to `GPT2LMHeadModel`, beside the
weight-bytes bound: a decoding step reads every GEMM weight once, so where that limits it the ratio is at most
GPT-2's GEMM weights over the model's."""

from __future__ import annotations

from collections.abc import Callable

import torch

from benchmarks.common import Context, format_ratio, gemm_weights, ratios, round_robin

ON_CUDA = True
BF16 = True
NAMES = ("gpt2", "pre_ln", "sas_p")
PROMPT = 32
BATCHES = (1, 8)


def new_tokens(ctx: Context) -> int:
    return 16 if ctx.quick else 128


def greedy(ctx: Context, batch_size: int) -> Callable[[str, torch.nn.Module], None]:
    """A `round_robin` call: cached greedy `generate()` of exactly `new_tokens` after a fixed prompt of `PROMPT`
    tokens per row, `batch_size` rows."""
    prompt = ctx.ids(vocab_low=1, batch=batch_size, seq=PROMPT, seed=1)
    count = new_tokens(ctx)
    kw = dict(
        attention_mask=torch.ones_like(prompt),
        max_new_tokens=count,
        min_new_tokens=count,
        do_sample=False,
        eos_token_id=None,
        pad_token_id=0,
    )

    def generate(name: str, model: torch.nn.Module) -> None:
        with torch.no_grad():
            produced = model.generate(prompt, **kw)
        assert produced.shape == (batch_size, PROMPT + count)

    return generate


def run(ctx: Context) -> dict:
    torch.manual_seed(0)
    models = {name: ctx.inference_model(name) for name in NAMES}
    weights = {name: gemm_weights(model) for name, model in models.items()}
    out = {}
    for batch_size in BATCHES:
        results = round_robin(models, ctx.timed(greedy(ctx, batch_size)), ctx.rounds)
        vs = ratios(results, "gpt2")
        out[f"batch_{batch_size}"] = {
            name: {
                **r,
                "tokens_per_s": batch_size * new_tokens(ctx) / r["median_s"],
                "vs_gpt2": vs[name],
                "gemm_weights": weights[name],
                "weight_bound_vs_gpt2": weights["gpt2"] / weights[name],
            }
            for name, r in results.items()
        }
    return out


def table(result: dict) -> str:
    lines = [
        "## Cached generate(): tokens/s (prompt 32, 128 new tokens, greedy)",
        "| batch | model | median s | tokens/s | vs GPT2LMHeadModel: median (range, of mins) | weight-bytes bound |",
        "|---|---|---|---|---|---|",
    ]
    for batch, rows in result.items():
        for name, r in rows.items():
            lines.append(
                f"| {batch.removeprefix('batch_')} | {name} | {r['median_s']:.2f} | {r['tokens_per_s']:.1f} | "
                f"{format_ratio(r['vs_gpt2'])} | {r.get('weight_bound_vs_gpt2', float('nan')):.3f} |"
            )
    return "\n".join(lines)
