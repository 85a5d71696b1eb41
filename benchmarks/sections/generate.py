"""`generate`: cached greedy `generate()` tokens/s of `GPT2LMHeadModel`, `pre_ln` and `sas_p` (prompt 32, 128 new
tokens; 16 with `--quick`; batch 1 and 8), round-robin in this process; ratios to `GPT2LMHeadModel`, beside the
weight-bytes bound: a decoding step reads every GEMM weight once, so where that limits it the ratio is at most
GPT-2's GEMM weights over the model's."""

from __future__ import annotations

from collections.abc import Callable

import torch

from benchmarks.common import Context, format_ratio, gemm_weights, ratios, round_robin
from modeling_simplified import SimplifiedForCausalLM

ON_CUDA = True
BF16 = True
NAMES = ("gpt2", "pre_ln", "sas_p")
PROMPT = 32
BATCHES = (1, 8)


def new_tokens(ctx: Context) -> int:
    return 16 if ctx.quick else 128


def greedy(ctx: Context, batch_size: int, **generate_kwargs) -> Callable[[str, torch.nn.Module], None]:
    """A `round_robin` call: cached greedy `generate()` of exactly `new_tokens` after a fixed prompt of `PROMPT`
    tokens per row, `batch_size` rows (`generate_kwargs` added, e.g. the static cache)."""
    prompt = ctx.ids(vocab_low=1, batch=batch_size, seq=PROMPT, seed=1)
    count = new_tokens(ctx)
    kw = dict(
        attention_mask=torch.ones_like(prompt),
        max_new_tokens=count,
        min_new_tokens=count,
        do_sample=False,
        eos_token_id=None,
        pad_token_id=0,
        **generate_kwargs,
    )

    def generate(name: str, model: torch.nn.Module) -> None:
        with torch.no_grad():
            produced = model.generate(prompt, **kw)
        assert produced.shape == (batch_size, PROMPT + count)

    return generate


#: the inductor options of the compiled decoding recipe (the model's, applied to GPT-2 alike)
DECODING_OPTIONS = SimplifiedForCausalLM.decoding_compile_options


def compile_for_decoding(model: torch.nn.Module) -> torch.nn.Module:
    """docs/inference.md's compiled decoding recipe, in place: `SimplifiedForCausalLM.compile_for_decoding` (`forward`
    compiled whole by inductor with `DECODING_OPTIONS`, and `train()` refused afterwards), GPT-2's `forward` compiled
    alike; call `generate` with `cache_implementation="static"` (`STATIC`), so that every decoding step has the same
    shapes. It compiles on the first call (once for the prompt, once for a step)."""
    if isinstance(model, SimplifiedForCausalLM):
        return model.compile_for_decoding()
    model.forward = torch.compile(model.forward, fullgraph=True, options=dict(DECODING_OPTIONS))
    return model


#: the `generate` arguments of the compiled recipe
STATIC = {"cache_implementation": "static"}


def run(ctx: Context) -> dict:
    return run_models(ctx, compiled=False)


def run_models(ctx: Context, compiled: bool) -> dict:
    """The round-robin comparison at each batch size, eager or by the compiled recipe (one compiled model per batch
    size: its static cache fixes the shapes; the untimed warm-up round compiles it)."""
    models, weights, out = {}, {}, {}
    for batch_size in BATCHES:
        if compiled or not models:  # eager models serve every batch size; compiled ones one each
            if compiled:
                torch._dynamo.reset()
            torch.manual_seed(0)
            models = {name: ctx.inference_model(name) for name in NAMES}
            weights = weights or {name: gemm_weights(model) for name, model in models.items()}
            if compiled:
                models = {name: compile_for_decoding(model) for name, model in models.items()}
        results = round_robin(models, ctx.timed(greedy(ctx, batch_size, **(STATIC if compiled else {}))), ctx.rounds)
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


def table(result: dict, title: str = "Cached generate(): tokens/s (prompt 32, 128 new tokens, greedy)") -> str:
    lines = [
        f"## {title}",
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
