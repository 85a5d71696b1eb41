"""The depth family in miniature (He & Hofmann, ICLR 2024, §5 "Depth Scaling", Fig. 6; App. D.1): Pre-LN, SAS,
SAS-P and V-SkipInit at a shallow and a deep depth (`--depths`), MLP 2d as in Fig. 6.

`run.reproduce_depth` trains the runs: at the shallow depth, each variant's lr sweep from `--lr-grid` (grown until
bracketed, `analysis.extend`); at the deep depth, each variant's sweep from its shallow best lr and its two
neighbours (`deep_start`; it grows the same way when the best is at an end), since the paper re-tunes at 72 blocks
(App. D.1: V-SkipInit "needed a lower learning rate for the depth scaling experiments"); then every seed at each
depth's chosen lr. This module turns those runs into the depth claims (`claims`), the signal propagation at
initialisation per depth (`init_diagnostics`); `report.write_depth_report` writes them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from typing import Any

import numpy as np

from . import analysis

FIG6 = (
    'Fig. 6, §5: "scaling depth from 18 to 72 blocks leads to an increase in performance in our models as well as '
    'the Pre-LN transformer"'
)
FIG6_MATCH = (
    'Fig. 6, §5: "the per-update trajectories of our simplified blocks and Pre-LN are near-indistinguishable '
    'across depths, when using normalisation"'
)
FIG6_VSKIP = (
    'Fig. 6, §5: "Value-SkipInit (He et al., 2023) actually trains slower per update at depth 72 compared to 18 '
    'despite the increase in capacity and parameter count"'
)
FIG6_GAP = (
    'Fig. 6, §5: "the gap in performance between Value-SkipInit and the other models increases with larger depth"'
)
#: "near-indistinguishable": final eval losses within 2% of each other, the threshold of the causal family's
#: "essentially match" claims (Fig. 23), about the spread of its seeds at the chosen lr
MATCH = 0.02
MATCH_CLAIM = f"within {100 * MATCH:g}% of Pre-LN at equal steps"


def deep_start(chosen: dict[str, float], factor: float) -> dict[str, list[float]]:
    """Each variant's deep sweep to start from: its shallow best lr and the two neighbours on the sweep's grid."""
    return {name: [lr / factor, lr, lr * factor] for name, lr in chosen.items()}


def _within(a: float, b: float) -> bool:
    return abs(a - b) / b <= MATCH


def verdict(per_seed: list[bool], on_means: bool, ranges_overlap: bool) -> tuple[bool | None, str]:
    """`held`, and its word: inconclusive with one seed, when the seeds disagree with each other or with the means,
    or (an ordering) when the two sides' per-seed ranges overlap; else held / did NOT hold."""
    why = None
    if len(per_seed) < 2:
        why = "1 seed"
    elif any(v != on_means for v in per_seed):
        why = "seeds disagree"
    elif ranges_overlap:
        why = "seed ranges overlap"
    if why:
        return None, f"inconclusive ({why})"
    return on_means, "held" if on_means else "did NOT hold"


def _loss(records: list[dict[str, Any]], name: str, seeds: list[int]) -> list[float]:
    by_seed = {r["seed"]: r for r in records if r["block"] == name}
    return [analysis.final_eval_loss(by_seed[s]) for s in seeds]


def _pct(x: float) -> str:
    return f"{x:+.2f}%"


def depth_ordering(
    claim: str, source: str, name: str, shallow: int, deep: int, records: dict[int, list[dict[str, Any]]], deeper: bool
) -> dict[str, Any]:
    """`name`'s final eval loss at `deep` blocks against `shallow` blocks, seed by seed: held when lower (`deeper`:
    the paper says it improves) or higher (it says it trains slower) on the means and on every seed."""
    seeds = sorted({r["seed"] for r in records[shallow] if r["block"] == name})
    low, high = _loss(records[shallow], name, seeds), _loss(records[deep], name, seeds)
    change = [100 * (d / s - 1) for s, d in zip(low, high)]
    test = (lambda s, d: d < s) if deeper else (lambda s, d: d > s)  # noqa: E731
    mean_s, mean_d = statistics.fmean(low), statistics.fmean(high)
    held, word = verdict([test(s, d) for s, d in zip(low, high)], test(mean_s, mean_d), analysis.overlap(low, high))
    return {
        "claim": claim,
        "source": source,
        "verdict": word,
        "held": held,
        "seeds": seeds,
        "loss": {str(shallow): low, str(deep): high},
        "change_pct": change,
        "change_pct_mean": 100 * (mean_d / mean_s - 1),
        "numbers": f"final eval loss {shallow} blocks {mean_s:.4f} (seeds {', '.join(f'{v:.4f}' for v in low)}), "
        f"{deep} blocks {mean_d:.4f} (seeds {', '.join(f'{v:.4f}' for v in high)}): {_pct(100 * (mean_d / mean_s - 1))}"
        f", per seed {', '.join(map(_pct, change))}; seed ranges {'overlap' if analysis.overlap(low, high) else 'apart'}",
    }


def vskip_gap(records: list[dict[str, Any]], seeds: list[int], others: list[str]) -> list[float]:
    """Per seed, V-SkipInit's final eval loss over the mean of the other variants' at that seed, −1, in %."""
    vskip = _loss(records, "value_skipinit", seeds)
    rest = [_loss(records, name, seeds) for name in others]
    return [100 * (v / statistics.fmean(col) - 1) for v, col in zip(vskip, zip(*rest))]


def gap_grows(shallow: int, deep: int, records: dict[int, list[dict[str, Any]]], blocks: list[str]) -> dict[str, Any]:
    """Fig. 6's V-SkipInit gap: larger at `deep` than at `shallow` on the means and on every seed, the per-seed
    gaps of the two depths apart."""
    others = [n for n in blocks if n != "value_skipinit"]
    seeds = sorted({r["seed"] for r in records[shallow] if r["block"] == "value_skipinit"})
    low, high = vskip_gap(records[shallow], seeds, others), vskip_gap(records[deep], seeds, others)
    held, word = verdict(
        [d > s for s, d in zip(low, high)], statistics.fmean(high) > statistics.fmean(low), analysis.overlap(low, high)
    )
    return {
        "claim": f"V-SkipInit's gap to the others ({', '.join(others)}) larger at {deep} than at {shallow} blocks",
        "source": FIG6_GAP,
        "verdict": word,
        "held": held,
        "seeds": seeds,
        "gap_pct": {str(shallow): low, str(deep): high},
        "numbers": f"V-SkipInit's final eval loss over the others' mean: {shallow} blocks "
        f"{_pct(statistics.fmean(low))} (seeds {', '.join(map(_pct, low))}), {deep} blocks "
        f"{_pct(statistics.fmean(high))} (seeds {', '.join(map(_pct, high))}); seed ranges "
        f"{'overlap' if analysis.overlap(low, high) else 'apart'}",
    }


def regime(records: dict[int, list[dict[str, Any]]], names: list[str]) -> dict[str, Any]:
    """The setting a claim was tested in, from its runs (`records` by depth, the variants `names`): steps, tokens
    seen and epochs of a run, and per depth the tokens per parameter (min, max over the variants)."""
    runs = [r for at in records.values() for r in at if r["block"] in names]
    return {
        "steps": runs[0]["steps"],
        "tokens": runs[0]["tokens_seen"],
        "epochs": runs[0]["epochs"],
        "tokens_per_parameter": {
            str(layers): [f(r["tokens_seen"] / r["parameters"] for r in at if r["block"] in names) for f in (min, max)]
            for layers, at in records.items()
        },
    }


def regime_text(regime: dict[str, Any]) -> str:
    """`regime` as the pages print it: '1,500 steps, 3.07M tokens (0.34 epochs); tokens per parameter 3.9 at 2
    blocks, 1.9–2.0 at 8 blocks' (one figure where a depth's min and max print the same)."""
    spans = {layers: [f"{v:.1f}" for v in values] for layers, values in regime["tokens_per_parameter"].items()}
    per_depth = ", ".join(f"{lo if lo == hi else f'{lo}–{hi}'} at {k} blocks" for k, (lo, hi) in spans.items())
    return (
        f"{regime['steps']:,} steps, {regime['tokens'] / 1e6:.2f}M tokens ({regime['epochs']:.2f} epochs); tokens per "
        f"parameter {per_depth}"
    )


def versus(records: list[dict[str, Any]], seeds: list[int], others: list[str]) -> dict[str, dict[str, float]]:
    """Per seed, V-SkipInit's final eval loss against each other variant's at that seed, % (negative: ahead)."""
    vskip = _loss(records, "value_skipinit", seeds)
    rest = {name: _loss(records, name, seeds) for name in others}
    return {
        str(s): {name: 100 * (v / rest[name][i] - 1) for name in others} for i, (s, v) in enumerate(zip(seeds, vskip))
    }


#: the verdict of a claim about depth when the Pre-LN control did not gain from depth (Fig. 6 compares against it)
UNTESTABLE = "untestable in this setting"


def gate_on_control(rows: list[dict[str, Any]]) -> None:
    """Fig. 6's claims about depth presuppose that the Pre-LN control improves with depth. Where it did not (its
    own claim did not hold or was inconclusive), every claim across depths, the control's included, reads
    `UNTESTABLE`, the verdict it would have had kept as `verdict_in_setting`; the claims at one depth stand."""
    control = next((r for r in rows if r["claim"].startswith("pre_ln better")), None)
    if control is None or control["held"] is True:
        return
    why = "did not improve with depth" if control["held"] is False else "was inconclusive across depths"
    for row in rows:
        if "change_pct" in row or "gap_pct" in row:
            row["verdict_in_setting"], row["held"] = row["verdict"], None
            row["verdict"] = f"{UNTESTABLE} (the Pre-LN control {why})"


def claims(depths: list[int], records: dict[int, list[dict[str, Any]]], blocks: list[str]) -> list[dict[str, Any]]:
    """Fig. 6's claims on the runs at each depth's chosen lr (`records` by depth): each variant against itself
    across depths, SAS and SAS-P against Pre-LN at each depth (`MATCH`), and V-SkipInit's gap across depths, each
    with the `regime` it was tested in and gated on the Pre-LN control (`gate_on_control`); V-SkipInit's claims
    say, per seed and depth, which variants it was ahead of or behind (`versus`). A claim whose variants were not
    trained is left out."""
    shallow, deep = depths
    both = {layers: records[layers] for layers in depths}
    others = [n for n in blocks if n != "value_skipinit"]
    out = []
    for name in ("pre_ln", "sas", "sas_p"):
        if name in blocks:
            row = depth_ordering(
                f"{name} better at {deep} than at {shallow} blocks", FIG6, name, shallow, deep, records, True
            )
            out.append({**row, "regime": regime(both, [name])})
    if "value_skipinit" in blocks:
        row = depth_ordering(
            f"value_skipinit worse at {deep} than at {shallow} blocks",
            FIG6_VSKIP,
            "value_skipinit",
            shallow,
            deep,
            records,
            False,
        )
        out.append({**row, "regime": regime(both, ["value_skipinit"])})
    for layers in depths:
        table = analysis.summarise(records[layers])
        for name in ("sas", "sas_p"):
            if name in blocks:
                c = analysis.Claim(f"{name} {MATCH_CLAIM} at {layers} blocks", name, "pre_ln", _within, FIG6_MATCH)
                row = analysis.check_claim(c, table, records[layers], None)
                out.append({**row, "regime": regime({layers: records[layers]}, [name, "pre_ln"])})
    if "value_skipinit" in blocks and others:
        out.append({**gap_grows(shallow, deep, records, blocks), "regime": regime(both, blocks)})
    for row in out:
        if row["claim"].startswith("value_skipinit") or "gap_pct" in row:
            row["versus"] = {str(k): versus(records[k], row["seeds"], others) for k in depths} if others else {}
    gate_on_control(out)
    return out


def reference_levels(
    train_ids: Iterable[list[int]], eval_ids: Iterable[list[int]], vocab_size: int
) -> dict[str, float]:
    """The eval losses of two models that learn nothing about context, the floor a run must beat to have learnt
    anything from it: `chance`, the uniform distribution (ln V), and `unigram`, each token's frequency in the
    training tokens (add-one smoothed), scored on the evaluation rows' predicted tokens (all but the first)."""
    counts = np.ones(vocab_size)
    for row in train_ids:
        counts += np.bincount(np.asarray(row), minlength=vocab_size)
    log_p = np.log(counts / counts.sum())
    scored = np.concatenate([np.asarray(row[1:]) for row in eval_ids])
    return {"chance": math.log(vocab_size), "unigram": float(-log_p[scored].mean())}


def chosen_records(result: dict[str, Any]) -> dict[int, list[dict[str, Any]]]:
    """A depth-family result's runs at each depth's chosen lrs, by depth: the records its claims read."""
    return {
        int(layers): [
            r for r in result["runs"] if r["layers"] == int(layers) and r["learning_rate"] == at["lrs"][r["block"]]
        ]
        for layers, at in result["per_depth"].items()
    }


def reanalyse(result: dict[str, Any]) -> dict[str, Any]:
    """`result` with its claims computed anew from its own runs (the analysis changed, the training did not)."""
    blocks = list(next(iter(result["per_depth"].values()))["lrs"])
    return {**result, "claims": claims(result["depths"], chosen_records(result), blocks)}


def init_diagnostics(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per variant, the probe at initialisation (first evaluation batch) after each block: the tokens' mean
    cosine similarity and normalised effective rank, mean over seeds, and the last block's per seed."""
    out = {}
    for name in dict.fromkeys(r["block"] for r in records):
        runs = sorted((r for r in records if r["block"] == name), key=lambda r: r["seed"])
        row: dict[str, Any] = {"seeds": [r["seed"] for r in runs]}
        for key, source in (("token_cosine", "signal_propagation"), ("effective_rank", "effective_rank")):
            per_seed = [r[source]["init"] for r in runs]
            row[key] = [statistics.fmean(values) for values in zip(*per_seed)]
            row[f"{key}_last_per_seed"] = [values[-1] for values in per_seed]
        out[name] = row
    return out
