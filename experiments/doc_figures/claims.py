"""The reproduction's committed claims and runs as several pages state them: which block ended ahead and by how
much, the verdicts in prose, RaPTr's standing, steps and training hours. Shared, so that no page's module needs
another's."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

from .data import reproduction
from .text import common, num, verdict_word

#: the reproduction's two settings: each variant at its own best lr, every variant at Pre-LN's
SETTINGS = ("best_lr", "shared_lr")
#: the blocks as the claims name them
CLAIM_LABELS = {
    "pre_ln": "Pre-LN",
    "post_ln": "Post-LN",
    "parallel": "the parallel block",
    "value_skipinit": "V-SkipInit",
    "sas": "SAS",
    "sas_p": "SAS-P",
    "simplest": "simplest",
    "normformer": "NormFormer",
    "sas_softmax": "skipless softmax",
}


def claim(result: dict[str, Any], setting: str, name: str) -> dict[str, Any]:
    """The committed claim of `setting` whose name starts with `name`."""
    (row,) = [c for c in result["settings"][setting]["claims"] if c["claim"].startswith(name)]
    return row


def claim_gaps(row: dict[str, Any]) -> tuple[float, list[float]]:
    """The first block's loss against the second's at the compared point, %: on the seed means, and per seed."""
    a, b = row["loss"].values()
    return 100 * (statistics.fmean(a) / statistics.fmean(b) - 1), [100 * (x / y - 1) for x, y in zip(a, b)]


def matched(verdicts: Iterable[str], mark: str = "") -> str:
    """How the prose says whether blocks are matched with their baseline, from their within-2% claims' verdicts:
    "not matched" where every one did not hold, "matched" where every one held, else "NEITHER matched nor not";
    `mark` around the word ("*" for emphasis)."""
    found, word = set(verdicts), f"{mark}matched{mark}"
    return f"not {word}" if found == {"did NOT hold"} else word if found == {"held"} else f"NEITHER {word} nor not"


def way(gap: float) -> str:
    """Where a gap (%, the first block's loss over the second's) puts the first block, at the printed precision."""
    return "level with" if f"{abs(gap):.1f}" == "0.0" else "ahead of" if gap < 0 else "behind"


def which_way(row: dict[str, Any]) -> str:
    """Which block of a claim ended ahead and by how much, on the seed means and per seed: "SAS ahead of Pre-LN by
    11.2% (seeds 9.9%, 12.5%)", each seed's way named where it is not the means' way."""
    first, second = (CLAIM_LABELS.get(block, block) for block in row["loss"])
    mean, seeds = claim_gaps(row)
    mean_way = way(mean)
    text = f"{first} {mean_way} {second}" + ("" if mean_way == "level with" else f" by {abs(mean):.1f}%")
    if mean_way != "level with" and all(way(g) == mean_way for g in seeds):
        return f"{text} (seeds {', '.join(f'{abs(g):.1f}%' for g in seeds)})"
    each = [
        f"seed {s} level" if way(g) == "level with" else f"seed {s} {way(g).split()[0]} by {abs(g):.1f}%"
        for s, g in zip(row["seeds"], seeds)
    ]
    return f"{text} ({', '.join(each)})"


def in_both(result: dict[str, Any], name: str) -> str:
    """A claim's verdicts in prose: "held in both settings", "did not hold in either setting", or each setting's."""
    best, shared = (verdict_word(claim(result, s, name)["verdict"]) for s in SETTINGS)
    if best != shared:
        return f"{best} at the blocks' own best lrs, {shared} at Pre-LN's"
    return "did not hold in either setting" if best == "did not hold" else f"{best} in both settings"


def ahead_by(result: dict[str, Any], setting: str, name: str) -> tuple[str, list[str]]:
    """How far the first block of an equal-steps or equal-time claim is ahead: on the seed means, and per seed (%)."""
    mean, seeds = claim_gaps(claim(result, setting, name))
    return num(-mean, 1), [num(-g, 1) for g in seeds]


def bracketed(result: dict[str, Any]) -> str:
    """Whether every sweep of a family bracketed its best lr, in prose."""
    every = all(row["bracketed"] for row in result["lr_sweep"].values())
    return "bracketed" if every else "did not all bracket"


def raptr_lead() -> str:
    """RaPTr's standing in prose, from the comparisons' committed verdicts."""
    verdicts = {row["verdict"] for row in reproduction("codeparrot-tiny")["raptr"].values()}
    return "RaPTr ended ahead" if verdicts == {"RaPTr ahead of the full model"} else "RaPTr did not end ahead"


def family_steps(result: dict[str, Any]) -> int:
    """The steps every run of a family trained."""
    return common([run["steps"] for run in result["runs"]])


def training_hours(*results: dict[str, Any]) -> float:
    """The sum of the training times of every run of `results` (pre-training, RaPTr, fine-tuning), in hours."""
    kinds = ("runs", "raptr_runs", "finetune_runs")
    return sum(run["train_time_s"] for r in results for kind in kinds for run in r.get(kind, [])) / 3600
