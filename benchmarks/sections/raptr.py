"""`raptr`: RaPTr's saving: a `pre_ln` training step on a subnetwork of half the layers (first and last kept, App. J
scales) against a full step of the same model, round-robin (`benchmarks.raptr.bench`; at least 4 layers)."""

from __future__ import annotations

from benchmarks import raptr
from benchmarks.common import Context

ON_CUDA = False
BF16 = False


def run(ctx: Context) -> dict:
    shape = ctx.shape
    layers = max(4, shape.layers)
    return raptr.bench(layers, shape.width, shape.seq, shape.batch, vocab=shape.vocab, repeats=ctx.rounds)


def table(result: dict) -> str:
    lines = [
        f"## RaPTr: a training step on {result['layers_kept']}/{result['num_layers']} layers vs a full step (pre_ln)",
        "| statistic | full step s | half step s | half / full |",
        "|---|---|---|---|",
    ]
    for stat in ("median", "min"):
        lines.append(
            f"| {stat} | {result[f'full_{stat}_s']:.3f} | {result[f'half_{stat}_s']:.3f} | "
            f"{result[f'half_over_full_{stat}']:.3f} |"
        )
    return "\n".join(lines)
