"""docs/fine_tuning.md's GLUE-like table of the tiny crammed BERTs and its control (`python -m experiments.glue_tiny`'s
glue.json of each setting, `..glue_miniature`),
and docs/raptr.md's RaPTr comparison (`docs/reproduction/codeparrot-tiny/results.json`, `raptr`)."""

from __future__ import annotations

from modeling_simplified.training.glue import render_table
from modeling_simplified.training.raptr import parse_sizes

from .. import glue_miniature
from ..benchruns import CURRENT_RUNS
from ..claims import raptr_lead
from ..data import glue_tiny, reproduction, run
from ..registry import block, facts
from ..text import COUNTS, ORDINALS, common, fraction, lr_text, num, seeds_text, span


@block("glue-tiny-control")
def glue_control() -> str:
    return glue_miniature.control_table()


@block("glue-tiny-table2")
def glue_table2() -> str:
    return glue_miniature.table2_table()


@block("glue-tiny-settings")
def glue_settings() -> str:
    return glue_miniature.settings_list()


@facts("docs/fine_tuning.md")
def glue() -> list[str]:
    """The default setting's table (each block pretrained, then from scratch) and the miniature's statements, which
    docs/reproduction.md makes too."""
    default = glue_tiny()
    rows = {**default["blocks"], **{f"{name} from scratch": g for name, g in default["controls"].items()}}
    return [render_table(rows), *glue_miniature.statements()]


@facts("docs/raptr.md")
def raptr() -> list[str]:
    """The comparison's seeds, the seed that chose the lr, the seed with the larger gaps, the gaps and the step time
    of half the layers (the current `make bench` runs' `raptr` section)."""
    cp = reproduction("codeparrot-tiny")
    comparisons = cp["raptr"]
    seeds = list(common([tuple(row["seeds"]) for row in comparisons.values()]))
    gaps = [[abs(g) for g in row["raptr_minus_full"]] for row in comparisons.values()]
    larger = common([seeds[max(range(len(g)), key=g.__getitem__)] for g in gaps])
    bench = [run(name)["raptr"] for name in CURRENT_RUNS]
    half = [r["half_over_full_median"] for r in bench]
    kept = common([r["layers_kept"] / r["num_layers"] for r in bench])
    layers = common([r["num_layers"] for r in bench])
    sizes = parse_sizes("recommended", 1)  # the plan's subnetwork sizes as fractions of the depth
    order = list(comparisons)
    same = order.index("same_schedule")
    lead0 = [comparisons[k]["raptr_minus_full"][0] for k in ("equal_steps", "same_schedule")]
    full = comparisons["equal_steps"]["full_loss"]
    return [
        f"with the stagewise lr schedule, seeds {seeds_text([str(x) for x in seeds])}.",
        f"(seed {cp['lr_sweep']['pre_ln']['criterion_seed']} also chose the lr), which makes seed {larger}'s gaps "
        "the larger",
        f"times a pre_ln training step on {fraction(kept)} of its {layers} layers against a full step of the same "
        f"model: {span(half)}× by run in the {COUNTS[len(CURRENT_RUNS)]} current runs",
        f"`docs/benchmark/{CURRENT_RUNS[0]}.json` to `{CURRENT_RUNS[-1]}.json`; embedding, LM head and optimizer are not "
        f"skipped, hence {'more' if min(half) > kept else 'NOT more'} than {fraction(kept)})",
        f"`--raptr recommended` (from {fraction(sizes[0])} the layers to {'all' if sizes[-1] == 1 else 'NOT all'} "
        f"of them in {COUNTS[len(sizes)]} equal stages",
        f"and in the first {COUNTS[same]} rows the full model keeps its preset's schedule (linear decay after warmup) "
        f"where we read RaPTr's App. D.4 as giving both one schedule (the {ORDINALS[same + 1]} row)",
        f"at its swept lr ({lr_text(cp['lrs']['shared_lr'])})",
        f"{raptr_lead()} in every setting and {COUNTS[len(seeds)].replace('two', 'both')} seeds. With the same "
        f"schedule for both (the {ORDINALS[same + 1]} row) RaPTr's lead in seed 0 "
        f"{'shrinks' if abs(lead0[1]) < abs(lead0[0]) else 'grows'} from {num(lead0[0])} to {num(lead0[1])}",
        f"The two full-model seeds differ by {num(abs(full[1] - full[0]), 2)}",
    ]
