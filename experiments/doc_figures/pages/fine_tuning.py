"""docs/fine_tuning.md's GLUE-like table of the tiny crammed BERTs (`python -m experiments.glue_tiny`'s glue.json),
and docs/raptr.md's RaPTr comparison (`docs/reproduction/codeparrot-tiny/results.json`, `raptr`)."""

from __future__ import annotations

from modeling_simplified.training.glue import render_table
from modeling_simplified.training.raptr import parse_sizes

from ..benchruns import CURRENT_RUNS
from ..claims import raptr_lead
from ..data import glue_tiny, reproduction, run
from ..registry import facts
from ..text import COUNTS, ORDINALS, common, fraction, lr_text, num, seeds_text, span


@facts("docs/fine_tuning.md")
def glue() -> list[str]:
    """The table, the seeds that finished and how the blocks stand on each task."""
    rows = glue_tiny()["blocks"]
    seeds = common([" ".join(sorted(task["seeds"], key=int)) for g in rows.values() for task in g["tasks"].values()])
    accuracy = {
        name: {t: task["summary"]["validation"]["accuracy"] for t, task in g["tasks"].items()}
        for name, g in rows.items()
    }
    overlap = {  # each task: do all blocks' seed ranges share a point?
        t: max(a[t]["min"] for a in accuracy.values()) <= min(a[t]["max"] for a in accuracy.values())
        for t in next(iter(accuracy.values()))
    }
    mr = {name: a["mr"] for name, a in accuracy.items()}
    lead = {name: 100 * (mr["Pre-LN"]["mean"] - mr[name]["mean"]) for name in ("SAS", "SAS-P")}
    apart = all(mr["Pre-LN"]["min"] > mr[name]["max"] or mr["Pre-LN"]["max"] < mr[name]["min"] for name in lead)
    side = {name: "ahead of" if d > 0 else "behind" for name, d in lead.items()}
    then = "of" if side["SAS-P"] == "ahead of" else "behind"  # "ahead of SAS by 6.6 points and of SAS-P by 5.0"
    return [
        render_table(rows),
        f"Fine-tuning seeds {seeds_text(seeds.split())} of each block finished",
        f"On stdlib-topic the {COUNTS[len(rows)]} blocks' seed ranges "
        f"{'overlap' if overlap['stdlib-topic'] else 'do NOT all overlap'}; on MR Pre-LN is {side['SAS']} SAS by "
        f"{num(abs(lead['SAS']), 1)} points and {then} SAS-P by "
        f"{num(abs(lead['SAS-P']), 1)}, with {'no' if apart else 'SOME'} overlap of the seed ranges: at this scale "
        f"the miniature {'does not show' if apart else 'shows'} Table 1's match on MR",
        f"on the {COUNTS[len(overlap)]} labelled tasks available offline",
    ]


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
