"""`compile`: the `train` comparison under `torch.compile(model)` (what the Trainer's `torch_compile=True` does), for
`pre_ln`, `sas`, `sas_p` and `GPT2LMHeadModel`; one more warm-up round for the compilation."""

from __future__ import annotations

from benchmarks.common import Context

from . import train

ON_CUDA = True
BF16 = True
COMPILE_GROUP = ("gpt2", "pre_ln", "sas_p", "sas")


def run(ctx: Context) -> dict:
    return train.run_groups(ctx, (COMPILE_GROUP,), compiled=True)


def table(result: dict) -> str:
    return train.render(result, "Training step under torch.compile (inductor)")
