"""`generate_compiled`: the `generate` comparison (GPT2LMHeadModel, pre_ln, sas_p at batch 1 and 8) by the compiled
decoding recipe of docs/inference.md (`generate.compile_for_decoding`: inductor with `freezing`, a static cache), in
the run's precision. The untimed warm-up round compiles each model."""

from __future__ import annotations

from benchmarks.common import Context

from . import generate

ON_CUDA = True
BF16 = True


def run(ctx: Context) -> dict:
    return generate.run_models(ctx, compiled=True)


def table(result: dict) -> str:
    return generate.table(result, "Compiled generate() (inductor, freezing, static cache): tokens/s")
