"""The docs' figures from the committed JSON: `docs/reproduction/<family>/results.json` (`make reproduce`), the
`make bench` runs in `docs/benchmark/` and the presets, and the check of every page (README.md, CHANGELOG.md,
docs/*.md) against them.

- **Generated blocks.** A table between `<!-- generated:NAME -->` and `<!-- /generated:NAME -->` is
  `BLOCKS[NAME]` rendered from the JSON; this tool rewrites every such block.
- **Checked facts.** A number, verdict or comparison in hand-written prose is a `Fact`: the page and the text as it
  must appear there (wrapped anywhere), formatted from the JSON at the precision the page prints. A changed result
  changes the text, which the page then no longer contains.
- **Everything else** is checked by `experiments.doc_check`: a number outside a block and a fact must be exempt by
  one of its named rules (`EXEMPT`: code, links, quoted paper text, references, dates and versions, settings, names,
  seed indices), and a verdict word must be inside a fact.

    python -m experiments.doc_figures              # rewrite every generated block
    python -m experiments.doc_figures --check      # exit 1 naming every problem
    python -m experiments.doc_figures --mutations  # change each checked number, verdict and comparison word in
                                                   # turn: exit 1 if the check misses one
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import targets
from benchmarks.common import DTYPES, per_round
from experiments import doc_check
from experiments.authors_parity import results as authors_parity
from experiments.reproduce import depth
from experiments.reproduce.analysis import Z
from modeling_simplified import SimplifiedConfig
from modeling_simplified.hub_cards.card import count_parameters
from modeling_simplified.training.glue import render_table
from modeling_simplified.training.presets import load_preset, validate

REPO = Path(__file__).resolve().parents[1]
REPRODUCTION = REPO / "docs" / "reproduction"
BENCHMARK = REPO / "docs" / "benchmark"
#: the full `make bench` runs of the current model code, and its two `generate` / `score` runs
CURRENT_RUNS = ("run13", "run14", "run15", "run16")
DECODE_RUNS = ("decode1", "decode2")
#: full runs of earlier code on a host with a 430 GFLOP/s GEMM peak: the evidence that the anchors' ratios depend on it
FAST_HOST_RUNS = ("run9", "run10", "run11", "run12")
#: the `--dtype bf16` runs (the bf16 targets, `python -m benchmarks.targets --dtype bf16`)
BF16_RUNS = ("bf16run1",)
#: the current code's `--dtype bf16` runs, pooled by the bf16 targets table (all on hosts whose bf16 GEMM peak is below
#: the float32 one): the `precision` section alone, the other sections, two full runs, then the compiled decoding
#: and `precision` sections of the current recipe, and the `mfu` section
BF16_CURRENT_RUNS = ("bf16precision1", "bf16run2", "bf16run3", "bf16run4", "bf16decode1", "bf16run5")
#: current runs whose compiled-decoding rows timed an earlier recipe (before `one_row_16bit`, or before the recipe's
#: `realize_opcount_threshold`): left out of the compiled-decoding targets' pool
BF16_EARLIER_RECIPE = ("bf16precision1", "bf16run3", "bf16run4")
#: the runs the bf16 targets table shows: bf16run1 (earlier code, a host whose bf16 GEMMs are the faster) and the
#: current ones
BF16_TARGET_RUNS = ("bf16run1", *BF16_CURRENT_RUNS)
#: the reproduction's two settings: each variant at its own best lr, every variant at Pre-LN's
SETTINGS = ("best_lr", "shared_lr")
#: He & Hofmann's Table 1: micro-batch steps per 24 hours against Pre-LN's (2080Ti), a quoted constant
PAPER_TABLE1_SPEED = {"pre_ln": "1", "parallel": "1.05", "sas": "1.09", "sas_p": "1.16", "simplest": "1.20"}


# -- the data ------------------------------------------------------------------------------------------------------
@functools.cache
def reproduction(family: str) -> dict[str, Any]:
    return json.loads((REPRODUCTION / family / "results.json").read_text())


@functools.cache
def run(name: str) -> dict[str, Any]:
    return json.loads((BENCHMARK / f"{name}.json").read_text())


# -- formatting at the printed precision ---------------------------------------------------------------------------
def num(x: float, digits: int = 3) -> str:
    """`x` with `digits` decimals, a negative one with the typographic minus the docs use."""
    return f"{x:.{digits}f}".replace("-", "−")


def signed(x: float, digits: int = 3) -> str:
    return ("+" if x >= 0 else "") + num(x, digits)


def span(values: list[float], digits: int = 3) -> str:
    """min–max of `values` at `digits` decimals, one figure where both print the same."""
    low, high = num(min(values), digits), num(max(values), digits)
    return low if low == high else f"{low}–{high}"


def lr_text(lr: float) -> str:
    """0.004 → 4e-3, 0.016 → 1.6e-2 (how the docs write lrs)."""
    mantissa, exponent = f"{lr:e}".split("e")
    return f"{float(mantissa):g}e{int(exponent)}"


def verdict_word(verdict: str) -> str:
    """The committed verdict as the docs say it: held, did not hold, inconclusive (its reason dropped), not run."""
    return verdict.replace("did NOT hold", "did not hold").split(" (")[0]


# -- the reproduction ----------------------------------------------------------------------------------------------
def claim(result: dict[str, Any], setting: str, name: str) -> dict[str, Any]:
    """The committed claim of `setting` whose name starts with `name`."""
    (row,) = [c for c in result["settings"][setting]["claims"] if c["claim"].startswith(name)]
    return row


def claim_gaps(row: dict[str, Any]) -> tuple[float, list[float]]:
    """The first block's loss against the second's at the compared point, %: on the seed means, and per seed."""
    a, b = row["loss"].values()
    return 100 * (statistics.fmean(a) / statistics.fmean(b) - 1), [100 * (x / y - 1) for x, y in zip(a, b)]


def _pct(x: float) -> str:
    return signed(x, 1) + "%"


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


def _way(gap: float) -> str:
    """Where a gap (%, the first block's loss over the second's) puts the first block, at the printed precision."""
    return "level with" if f"{abs(gap):.1f}" == "0.0" else "ahead of" if gap < 0 else "behind"


def which_way(row: dict[str, Any]) -> str:
    """Which block of a claim ended ahead and by how much, on the seed means and per seed: "SAS ahead of Pre-LN by
    11.2% (seeds 9.9%, 12.5%)", each seed's way named where it is not the means' way."""
    first, second = (CLAIM_LABELS.get(block, block) for block in row["loss"])
    mean, seeds = claim_gaps(row)
    way = _way(mean)
    text = f"{first} {way} {second}" + ("" if way == "level with" else f" by {abs(mean):.1f}%")
    if way != "level with" and all(_way(g) == way for g in seeds):
        return f"{text} (seeds {', '.join(f'{abs(g):.1f}%' for g in seeds)})"
    each = [
        f"seed {s} level" if _way(g) == "level with" else f"seed {s} {_way(g).split()[0]} by {abs(g):.1f}%"
        for s, g in zip(row["seeds"], seeds)
    ]
    return f"{text} ({', '.join(each)})"


def _claim_cell(row: dict[str, Any]) -> str:
    """A claim's verdict and which way it went: "**did not hold**: SAS ahead of Pre-LN by 11.2% (seeds 9.9%,
    12.5%), not matched" (a claim of a match that did not hold says so)."""
    if row["verdict"] == "not run":
        return "not run"
    word = row["verdict"].replace("did NOT hold", "did not hold")
    unmatched = ", not matched" if word == "did not hold" and " within " in row["claim"] else ""
    word = f"**{word}**" if word in ("held", "did not hold") else word
    return f"{word}: {which_way(row)}{unmatched}"


def claims_table(family: str) -> str:
    result = reproduction(family)
    lines = ["| claim (where the paper makes it: its sentence) | its best lr | Pre-LN's lr |", "|---|---|---|"]
    for best in result["settings"]["best_lr"]["claims"]:
        shared = claim(result, "shared_lr", best["claim"])
        lines.append(f"| {best['claim']} ({best['source']}) | {_claim_cell(best)} | {_claim_cell(shared)} |")
    return "\n".join(lines)


def _sweep_cell(lr: float, loss: float) -> str:
    return f"{lr_text(lr)} ({'diverged' if loss == float('inf') else num(loss)})"


def _sweep_cells(row: dict[str, Any]) -> list[str]:
    """A variant's chosen lr and the lrs either side of it, with the training loss at the end (criterion seed)."""
    seed = str(row["criterion_seed"])
    loss = {p["lr"]: p["train_loss_end"][seed] for p in row["points"] if p["swept"]}
    below = [lr for lr in sorted(loss) if lr < row["chosen"]]
    above = [lr for lr in sorted(loss) if lr > row["chosen"]]
    sides = ", ".join(_sweep_cell(lr, loss[lr]) for lr in (below[-1:] + above[:1]))
    return [_sweep_cell(row["chosen"], loss[row["chosen"]]), sides if row["bracketed"] else "NOT bracketed"]


def sweep_table(family: str) -> str:
    """Each variant's chosen lr and the lrs either side of it, with the training loss at the end (seed 0)."""
    lines = ["| variant | chosen lr | bracketed by (training loss at the end) |", "|---|---|---|"]
    for name, row in reproduction(family)["lr_sweep"].items():
        lines.append(f"| {name} | {' | '.join(_sweep_cells(row))} |")
    return "\n".join(lines)


# -- the depth family ----------------------------------------------------------------------------------------------
DEPTH = "codeparrot-depth"


def depth_sweep_table() -> str:
    """Per depth and variant: the lrs swept, the chosen one and its neighbours, the final eval loss [per seed]."""
    result = reproduction(DEPTH)
    lines = [
        "| blocks | variant | lrs swept | chosen lr | bracketed by (training loss at the end) | final eval loss [per seed] |",
        "|---|---|---|---|---|---|",
    ]
    for layers, at in result["per_depth"].items():
        for name, row in at["lr_sweep"].items():
            swept = ", ".join(lr_text(p["lr"]) for p in row["points"] if p["swept"])
            cells = [layers, name, swept, *_sweep_cells(row), _final(at["table"], name)]
            lines.append(f"| {' | '.join(cells)} |")
    return "\n".join(lines)


def _seed_pcts(values: list[float]) -> str:
    return f"seeds {', '.join(_pct(v) for v in values)}"


def depth_claim_cell(row: dict[str, Any]) -> str:
    """A depth claim's verdict, its figure on the seed means and per seed (%): the change with depth, the gap to
    Pre-LN, or V-SkipInit's gap to the others at each depth; V-SkipInit's rows then name, per depth and seed, the
    variants it was ahead of and behind."""
    if "change_pct" not in row and "gap_pct" not in row:
        return _claim_cell(row)
    word = verdict_word(row["verdict"])
    word = f"**{word}**" if word in ("held", "did not hold") else word
    if "change_pct" in row:
        shallow, deep = row["loss"]
        mean = row["change_pct_mean"]
        figure = (
            f"{abs(mean):.1f}% {'lower' if mean < 0 else 'higher'} at {deep} blocks than at {shallow} "
            f"({_seed_pcts(row['change_pct'])})"
        )
    else:
        (low, a), (high, b) = row["gap_pct"].items()
        gap = lambda k, v: f"{_pct(statistics.fmean(v))} at {k} blocks ({_seed_pcts(v)})"  # noqa: E731
        figure = f"V-SkipInit's loss over the others' mean {gap(low, a)} → {gap(high, b)}"
    if "untestable" in word:
        figure += f"; in this setting: {verdict_word(row['verdict_in_setting'])}"
    return f"{word}: {figure}{_versus_text(row.get('versus', {}))}"


def _versus_text(versus: dict[str, dict[str, dict[str, float]]]) -> str:
    """'; V-SkipInit at 2 blocks, seed 0: ahead of pre_ln (−1.2%), behind sas (+0.3%); …' (ahead: a lower loss)."""
    parts = []
    for layers, by_seed in versus.items():
        for seed, gaps in by_seed.items():
            ahead = [f"{n} ({_pct(g)})" for n, g in gaps.items() if g < 0]
            behind = [f"{n} ({_pct(g)})" for n, g in gaps.items() if g >= 0]
            side = [f"ahead of {', '.join(ahead)}"] * bool(ahead) + [f"behind {', '.join(behind)}"] * bool(behind)
            parts.append(f"V-SkipInit at {layers} blocks, seed {seed}: {', '.join(side)}")
    return "".join(f"; {p}" for p in parts)


def depth_claims_table() -> str:
    lines = ["| claim | verdict: mean (per seed) | setting | the paper |", "|---|---|---|---|"]
    for row in reproduction(DEPTH)["claims"]:
        setting = depth.regime_text(row["regime"]) if "regime" in row else "not recorded"
        lines.append(f"| {row['claim']} | {depth_claim_cell(row)} | {setting} | {row['source']} |")
    return "\n".join(lines)


def depth_init_table() -> str:
    """After the first block and the last, at initialisation: the tokens' cosine similarity and effective rank."""
    result = reproduction(DEPTH)
    lines = [
        "| blocks | variant | cosine after block 1 | cosine after the last [per seed] | effective rank after block 1 | "
        "effective rank after the last [per seed] |",
        "|---|---|---|---|---|---|",
    ]
    for layers, at in result["init_diagnostics"].items():
        for name, row in at.items():
            cells = [layers, name]
            for key in ("token_cosine", "effective_rank"):
                last = f"{num(row[key][-1])} [{', '.join(num(v) for v in row[f'{key}_last_per_seed'])}]"
                cells += [num(row[key][0]), last]
            lines.append(f"| {' | '.join(cells)} |")
    return "\n".join(lines)


def _final(table: dict[str, Any], name: str) -> str:
    row = table[name]
    return f"{num(row['eval_loss@100%'][0])} [{', '.join(num(v) for v in row['eval_loss_per_seed'])}]"


def eval_table(family: str) -> str:
    """Final eval loss, mean [per seed], at each variant's best lr and at Pre-LN's; the causal side adds the
    generalisation gap, the masked side the measured speed beside Table 1's."""
    result = reproduction(family)
    best, shared = (result["settings"][s]["table"] for s in SETTINGS)
    causal = result["task"] == "causal-lm"
    shared_lr = lr_text(result["lrs"]["shared_lr"])
    head = f"| variant | at its best lr | at Pre-LN's lr ({shared_lr}) | "
    head += "gap at its best lr |" if causal else "speed vs pre_ln | Table 1's speed |"
    lines = [head, "|---|---|---|---|" + ("" if causal else "---|")]
    for name in best:
        same = best[name]["learning_rate"] == result["lrs"]["shared_lr"]
        cells = [_final(best, name), "(the same runs)" if same else _final(shared, name)]
        if causal:
            cells.append(num(best[name]["generalisation_gap"][0], 2))
        else:
            speed = result["timing"]["variants"][name]["speed_vs_pre_ln"]
            low_high = span([speed["ratio_low"], speed["ratio_high"]])
            cells.append("1" if name == "pre_ln" else f"{num(speed['ratio_median'])} ({low_high})")
            cells.append(PAPER_TABLE1_SPEED[name])
        lines.append(f"| {name} | {' | '.join(cells)} |")
    return "\n".join(lines)


#: the RaPTr comparisons as the tables name them
RAPTR_SETTINGS = {
    "equal_steps": "equal steps",
    "equal_flops": "equal layer FLOPs",
    "same_schedule": "equal steps, the full model on RaPTr's stagewise lr schedule too",
}


def raptr_table() -> str:
    lines = [
        "| setting | the paper | full → RaPTr, final eval loss (seed 0; seed 1) | RaPTr − full: mean (per seed) |",
        "|---|---|---|---|",
    ]
    for key, row in reproduction("codeparrot-tiny")["raptr"].items():
        steps = row["steps"]
        flops = ", ".join(num(x) for x in row["realised_relative_flops"])
        setting = (
            f"{RAPTR_SETTINGS[key]}, {steps['full']} full / {steps['raptr']} RaPTr steps (realised layer FLOPs {flops})"
        )
        paper = row["paper"].split(". Not as in the paper")[0]
        losses = "; ".join(f"{num(f)} → {num(r)}" for f, r in zip(row["full_loss"], row["raptr_loss"]))
        gaps = f"{num(row['raptr_minus_full_mean'])} ({', '.join(num(d) for d in row['raptr_minus_full'])})"
        lines.append(f"| {setting} | {paper} | {losses} | {gaps} |")
    return "\n".join(lines)


def finetune_table() -> str:
    lines = [
        "| variant | accuracy %, mean [seed 0, seed 1] | final eval loss (seed 0, seed 1) |",
        "|---|---|---|",
    ]
    for name, row in reproduction("crammed-bert-tiny")["finetune"]["table"].items():
        label = "pre_ln from scratch (the control)" if name == "pre_ln_from_scratch" else name
        accuracy = f"{num(row['accuracy'][0], 2)} [{', '.join(num(a, 2) for a in row['accuracy_per_seed'])}]"
        lines.append(f"| {label} | {accuracy} | {', '.join(num(v, 2) for v in row['eval_loss_per_seed'])} |")
    return "\n".join(lines)


# -- the benchmark runs --------------------------------------------------------------------------------------------
def ratio(section: dict[str, Any], model: str, base: str) -> dict[str, float]:
    """`model`'s speed over `base` in one section of a run: the median of the per-round ratios, their range, the
    ratio of the minimum times. In `train` and `compile` each group of models takes turns with a pre_ln of its own
    and the run keeps only the first group's pre_ln times: against pre_ln, a model's stored `vs_pre_ln` is used."""
    if base == "pre_ln" and "vs_pre_ln" in section[model]:
        stored = section[model]["vs_pre_ln"]
        return {k: stored[f"ratio_{k}"] for k in ("median", "low", "high", "of_min")}
    rounds = per_round(section[base], section[model])
    return {
        "median": statistics.median(rounds),
        "low": min(rounds),
        "high": max(rounds),
        "of_min": section[base]["min_s"] / section[model]["min_s"],
    }


def _ratio_cell(r: dict[str, float], of_min: bool = True) -> str:
    inner = f"{num(r['low'])}–{num(r['high'])}" + (f"; {num(r['of_min'])}" if of_min else "")
    return f"{num(r['median'])} ({inner})"


def _run_label(name: str) -> str:
    return name.replace("run", "run ") if name.startswith("run") else name


#: (label, section, model, base, the bound's key in the model's row or None for 1.000)
TRAIN_ROWS = (
    ("our pre_ln / `GPT2LMHeadModel`", "train", "pre_ln", "gpt2", None),
    ("`pre_ln_llama` / `LlamaForCausalLM`", "train", "pre_ln_llama", "llama", None),
    *((f"{m} / pre_ln", "train", m, "pre_ln", "flop_bound_vs_pre_ln") for m in ("sas_p", "sas", "simplest")),
    *(
        (f"{m} / pre_ln", "train", m, "pre_ln", "flop_bound_vs_pre_ln")
        for m in ("parallel", "value_skipinit", "post_ln", "normformer")
    ),
    ("compiled sas_p / compiled pre_ln", "compile", "sas_p", "pre_ln", "flop_bound_vs_pre_ln"),
    ("compiled pre_ln / compiled GPT-2", "compile", "pre_ln", "gpt2", None),
)


def speed_train_table() -> str:
    runs = {name: run(name) for name in CURRENT_RUNS}
    head = "| ratio | bound | " + " | ".join(_run_label(n) for n in runs) + " |"
    lines = [head, "|---|---|" + "---|" * len(runs)]
    for label, section, model, base, bound_key in TRAIN_ROWS:
        first = runs[CURRENT_RUNS[0]][section][model]
        bound = first[bound_key] if bound_key else 1.0
        compiled = section == "compile"
        figures = [ratio(r[section], model, base) for r in runs.values()]
        cells = [num(f["median"]) if compiled else _ratio_cell(f) for f in figures]
        lines.append(f"| {label} | {num(bound)} | {' | '.join(cells)} |")
    return "\n".join(lines)


def speed_other_table() -> str:
    runs = {name: run(name) for name in CURRENT_RUNS}

    def row(label: str, cell: Callable[[dict[str, Any]], str]) -> str:
        return f"| {label} | " + " | ".join(cell(r) for r in runs.values()) + " |"

    lines = [
        "| other sections | " + " | ".join(_run_label(n) for n in runs) + " |",
        "|---|" + "---|" * len(runs),
        row(
            "`loss`: step time, logits path / fused head + loss (pre_ln; sas_p)",
            lambda r: "; ".join(num(r["loss"][m]["fused_speedup"]["ratio_median"]) for m in ("pre_ln", "sas_p")),
        ),
        row(
            "`packing`: real tokens/s, one padding-free row / padded batch of 8 sequences of 16–128 tokens "
            "(pre_ln; sas_p)",
            lambda r: "; ".join(
                num(r["packing"][m]["packed_over_padded"]["ratio_median"], 2) for m in ("pre_ln", "sas_p")
            ),
        ),
        row(
            "`raptr`: pre_ln step on 9 of 18 layers / full step (embedding, head, AdamW not skipped)",
            lambda r: num(r["raptr"]["half_over_full_median"]),
        ),
        row(
            "`allocator`: step time, glibc defaults / freed memory kept (GPT-2; pre_ln; sas_p)",
            lambda r: "; ".join(
                num(r["allocator"][m]["keep_speedup"]["ratio_median"]) for m in ("gpt2", "pre_ln", "sas_p")
            ),
        ),
    ]
    return "\n".join(lines)


def speed_decode_table() -> str:
    runs = {name: run(name) for name in (*CURRENT_RUNS, *DECODE_RUNS)}
    lines = [
        "| batch | ratio | bound | " + " | ".join(_run_label(n) for n in runs) + " |",
        "|---|---|---|" + "---|" * len(runs),
    ]
    for batch in (1, 8):
        for model in ("pre_ln", "sas_p"):
            group = f"batch_{batch}"
            bound = run(CURRENT_RUNS[0])["generate"][group][model]["weight_bound_vs_gpt2"]
            cells = [_ratio_cell(ratio(r["generate"][group], model, "gpt2"), of_min=False) for r in runs.values()]
            lines.append(f"| {batch} | {model} / GPT-2 | {num(bound)} | {' | '.join(cells)} |")
    return "\n".join(lines)


def speed_score_table() -> str:
    runs = {name: run(name) for name in (*CURRENT_RUNS, *DECODE_RUNS)}
    names = [_run_label(n) for n in runs]
    lines = [
        f"| batch × seq | ratio | bound | {names[0]}: ratio (share of bound) | " + " | ".join(names[1:]) + " |",
        "|---|---|---|" + "---|" * len(runs),
    ]
    for shape in ("8x128", "1x1024"):
        for model in ("sas", "sas_p"):
            bound = run(CURRENT_RUNS[0])["score"][shape][model]["flop_bound_vs_pre_ln"]
            cells = []
            for r in runs.values():
                median = ratio(r["score"][shape], model, "pre_ln")["median"]
                cells.append(f"{num(median)} ({num(median / bound)})")
            lines.append(f"| {shape.replace('x', ' × ')} | {model} / pre_ln | {num(bound)} | {' | '.join(cells)} |")
    for shape in ("8x128", "1x1024"):
        cells = [num(ratio(r["score"][shape], "pre_ln", "gpt2")["median"]) for r in runs.values()]
        lines.append(f"| {shape.replace('x', ' × ')} | pre_ln / GPT-2 | 1.000 | {' | '.join(cells)} |")
    return "\n".join(lines)


def target(label: str, among: tuple[targets.Target, ...] = targets.TARGETS) -> targets.Target:
    """The target of `among` (`benchmarks.targets`' float32 targets by default) whose label starts with `label`."""
    (found,) = [t for t in among if t.label.startswith(label)]
    return found


SAS_P_TRAIN, SAS_TRAIN = target("training: sas_p /"), target("training: sas /")
GPT2_TRAIN, LLAMA_TRAIN = target("training: our pre_ln /"), target("training: `pre_ln_llama`")


def pooled(t: targets.Target) -> dict[str, Any]:
    """`benchmarks.targets`' figures for `t` over the current runs (those that hold its rows)."""
    return targets.evaluate(t, {name: run(name) for name in (*CURRENT_RUNS, *DECODE_RUNS)})


def by_run(t: targets.Target, names: tuple[str, ...] = CURRENT_RUNS) -> list[float]:
    """A target's per-run medians over `names` (excluded runs included)."""
    result = targets.evaluate(t, {name: run(name) for name in names})
    return [cell["ratio"] for cell in result["runs"].values() if cell is not None]


def peaks(names: tuple[str, ...]) -> list[float]:
    return [targets.peak_gflops(run(name)) for name in names]


def speed_targets_table() -> str:
    lines = [
        "| target | pooled median (range; rounds) | bound | pooled / bound | met |",
        "|---|---|---|---|---|",
    ]
    for t in targets.TARGETS:
        p = pooled(t)["pooled"]
        if p is None:
            why = f"not counted: GEMM peaks {span(peaks(CURRENT_RUNS), 0)} GFLOP/s (by run {span(by_run(t))})"
            lines.append(f"| {t.label} | {why} | - | - | - |")
            continue
        figure = f"{num(p['ratio'])} ({num(p['low'])}–{num(p['high'])}; {p['rounds']})"
        weight_bounds = {cell["weight_bound"] for cell in pooled(t)["runs"].values() if cell and cell["weight_bound"]}
        label = t.label
        if len(weight_bounds) == 1:
            label = label.replace("weight-bytes bound beside", f"bytes bound {num(*weight_bounds)}")
        met = "yes" if p["met"] else "NO"
        lines.append(f"| {label} | {figure} | {num(p['bound'])} | {num(p['share_of_bound'])} | {met} |")
    return "\n".join(lines)


def readme_speed_table() -> str:
    def figure(t: targets.Target) -> str:
        p = pooled(t)["pooled"]
        return f"{num(p['ratio'])} ({num(p['low'])}–{num(p['high'])})"

    def median(label: str) -> str:
        return num(pooled(target(label))["pooled"]["ratio"])

    gpt2 = (
        f"{span(by_run(GPT2_TRAIN))} by run on these {span(peaks(CURRENT_RUNS), 0)} GFLOP/s hosts; "
        f"{span(by_run(GPT2_TRAIN, FAST_HOST_RUNS))} on {span(peaks(FAST_HOST_RUNS), 0)} GFLOP/s hosts (runs 9–12)"
    )
    decode = run(CURRENT_RUNS[0])["generate"]
    lines = [
        "| × faster than (the first over the second; above 1: the first is faster) | bound | pooled median "
        "(per-round range) |",
        "|---|---|---|",
        f"| training: sas_p × faster than pre_ln | {num(pooled(SAS_P_TRAIN)['pooled']['bound'])} | "
        f"{figure(SAS_P_TRAIN)} |",
        f"| training: sas × faster than pre_ln | {num(pooled(SAS_TRAIN)['pooled']['bound'])} | {figure(SAS_TRAIN)} |",
        f"| training: our pre_ln × faster than `GPT2LMHeadModel` | 1.000 | {gpt2} |",
        f"| training: `pre_ln_llama` × faster than `LlamaForCausalLM` | 1.000 | {figure(LLAMA_TRAIN)}; by run "
        f"{span(by_run(LLAMA_TRAIN))} |",
    ]
    for batch in (1, 8):
        bound = decode[f"batch_{batch}"]["sas_p"]["weight_bound_vs_gpt2"]
        lines.append(
            f"| `generate`, batch {batch}: sas_p / pre_ln × faster than GPT-2 | {num(bound)} / 1.000 | "
            f"{median(f'generate batch {batch}: sas_p')} / {median(f'generate batch {batch}: pre_ln')} |"
        )
    score_bound = num(pooled(target("scoring 8x128: sas /"))["pooled"]["bound"])
    lines.append(
        f"| scoring 8 × 128: sas / sas_p × faster than pre_ln | {score_bound} | "
        f"{median('scoring 8x128: sas /')} / {median('scoring 8x128: sas_p')} |"
    )
    return "\n".join(lines)


# -- bf16 ------------------------------------------------------------------------------------------------------------
def bf16_fidelity() -> dict[str, Any]:
    return reproduction("bf16-fidelity")


def bf16_fidelity_table() -> str:
    """Each block's final losses per seed in float32 and bf16, the paired differences and the float32 seed range."""
    result = bf16_fidelity()
    lines = [
        "| block (lr) | criterion | float32, seeds 0 / 1 | bf16, seeds 0 / 1 | bf16 − float32 per seed | float32 seed "
        "range | bf16 within it |",
        "|---|---|---|---|---|---|---|",
    ]
    labels = {"end_train_loss": "training loss, last 10%", "final_eval_loss": "eval loss, last step"}
    for point in result["points"]:
        row = result["comparison"][f"{point['block']} @ {point['lr']:g}"]
        for criterion, c in row.items():
            lines.append(
                f"| {point['block']} ({lr_text(point['lr'])}) | {labels[criterion]} | "
                f"{' / '.join(num(v, 4) for v in c['float32'])} | {' / '.join(num(v, 4) for v in c['bf16'])} | "
                f"{' / '.join(signed(v, 4) for v in c['difference'])} | {num(c['float32_range'], 4)} | "
                f"{'yes' if c['within_float32_spread'] else 'no'} |"
            )
    return "\n".join(lines)


def bf16_pooled(t: targets.Target) -> dict:
    """`t` over the current code's bf16 runs (without those that timed an earlier decoding recipe, for a
    compiled-decoding target)."""
    compiled_decoding = "generate" in t.label and "compiled" in t.label
    names = [n for n in BF16_CURRENT_RUNS if not (compiled_decoding and n in BF16_EARLIER_RECIPE)]
    return targets.evaluate(t, {name: run(name) for name in names})


def bf16_speed_table() -> str:
    """The bf16 targets over the `--dtype bf16` runs (`benchmarks.targets.BF16_TARGETS`): each run's median and
    range, and the current code's runs pooled (each round against its own host's bound)."""
    runs = {name: run(name) for name in BF16_TARGET_RUNS}
    lines = [
        "| target | "
        + " | ".join(_run_label(n) for n in runs)
        + " | pooled, current code: median (range; rounds) | pooled / bound | met |",
        "|---|" + "---|" * (len(runs) + 3),
    ]
    for t in targets.BF16_TARGETS:
        result = targets.evaluate(t, runs)
        cells = []
        for cell in result["runs"].values():
            text = "-" if cell is None else f"{num(cell['ratio'])} ({num(cell['low'])}–{num(cell['high'])})"
            cells.append(text + (" ✓" if cell and cell["met"] else ""))
        p = bf16_pooled(t)["pooled"]
        if p is None:
            pooled = "- | - | not measured"
        else:
            pooled = (
                f"{num(p['ratio'])} ({num(p['low'])}–{num(p['high'])}; {p['rounds']}) | {num(p['share_of_bound'])} | "
                + ("yes" if p["met"] else "NO")
            )
        lines.append(f"| {t.label} | {' | '.join(cells)} | {pooled} |")
    mfu = [", ".join(f"{m} {num(100 * v, 1)}%" for m, v in targets.bf16_mfu(r).items()) or "-" for r in runs.values()]
    mfu = [
        cell + (" (peak a float32 GEMM's: not counted)" if targets.mfu_excluded(r) and "mfu" in r else "")
        for cell, r in zip(mfu, runs.values())
    ]
    pooled_mfu = targets.pooled_bf16_mfu({name: run(name) for name in BF16_CURRENT_RUNS})
    models = [m for m in pooled_mfu if m != "gpt2"]
    figure = ", ".join(
        f"{m} {num(100 * p['median'], 1)}% ({num(100 * p['low'], 1)}–{num(100 * p['high'], 1)}; {p['runs']} runs)"
        for m, p in pooled_mfu.items()
    )
    met = "yes" if models and all(pooled_mfu[m]["met"] for m in models) else "NO"
    lines.append(
        f"| bf16 MFU ≥ {targets.BF16_MFU:.0%} of the bf16 GEMM peak, pre_ln and sas_p | {' | '.join(mfu)} | "
        f"{figure or '-'} | - | {met} |"
    )
    cells = [
        _ratio_cell(ratio(r["compile"], "pre_ln", "gpt2"), of_min=False) if "compile" in r else "-"
        for r in runs.values()
    ]
    lines.append(f"| (no target) compiled, bf16: pre_ln / GPT-2 | {' | '.join(cells)} | - | - | - |")
    return "\n".join(lines)


def readme_bf16_table() -> str:
    """The README's bf16 rows: every bf16 target pooled over the current code's runs (`bf16_pooled`), its share of
    the bound and whether it is met, beside the float32 target of the same ratio pooled over the float32 runs."""
    lines = [
        "| target (bf16) | bf16, pooled: median (range) | pooled / bound | met | float32, pooled |",
        "|---|---|---|---|---|",
    ]
    float32 = {t.label: t for t in targets.TARGETS}
    for t in targets.BF16_TARGETS:
        p = bf16_pooled(t)["pooled"]
        if p is None:
            continue
        twin = float32.get(t.label.removeprefix("bf16 "))
        f32 = pooled(twin)["pooled"] if twin else None
        lines.append(
            f"| {t.label.removeprefix('bf16 ')} | {num(p['ratio'])} ({num(p['low'])}–{num(p['high'])}) | "
            f"{num(p['share_of_bound'])} | {'yes' if p['met'] else 'NO'} | "
            + (f"{num(f32['ratio'])} ({num(f32['low'])}–{num(f32['high'])})" if f32 else "-")
            + " |"
        )
    for m, p in targets.pooled_bf16_mfu({name: run(name) for name in BF16_CURRENT_RUNS}).items():
        if m != "gpt2":
            lines.append(
                f"| MFU ≥ {targets.BF16_MFU:.0%}: {m} | {num(100 * p['median'], 1)}% ({num(100 * p['low'], 1)}–"
                f"{num(100 * p['high'], 1)}%) | - | {'yes' if p['met'] else 'NO'} | - |"
            )
    return "\n".join(lines)


#: the parity runs against the authors' code (`python -m experiments.authors_parity`)
AUTHORS = "authors-parity"


#: every generated block: its name in the markers → its table
BLOCKS: dict[str, Callable[[], str]] = {
    "reproduction-authors-exact": lambda: authors_parity.exact_table(reproduction(AUTHORS)),
    "reproduction-authors-init": lambda: authors_parity.init_table(reproduction(AUTHORS)),
    "reproduction-authors-lead": lambda: authors_parity.lead_table(reproduction(AUTHORS)),
    "reproduction-causal-sweep": lambda: sweep_table("codeparrot-tiny"),
    "reproduction-causal-eval": lambda: eval_table("codeparrot-tiny"),
    "reproduction-causal-claims": lambda: claims_table("codeparrot-tiny"),
    "reproduction-raptr": raptr_table,
    "reproduction-mlm-sweep": lambda: sweep_table("crammed-bert-tiny"),
    "reproduction-mlm-eval": lambda: eval_table("crammed-bert-tiny"),
    "reproduction-mlm-claims": lambda: claims_table("crammed-bert-tiny"),
    "reproduction-finetune": finetune_table,
    "reproduction-depth-sweep": depth_sweep_table,
    "reproduction-depth-claims": depth_claims_table,
    "reproduction-depth-init": depth_init_table,
    "speed-train": speed_train_table,
    "speed-other": speed_other_table,
    "speed-decode": speed_decode_table,
    "speed-score": speed_score_table,
    "speed-targets": speed_targets_table,
    "readme-speed": readme_speed_table,
    "training-bf16-fidelity": bf16_fidelity_table,
    "speed-bf16": bf16_speed_table,
    "readme-speed-bf16": readme_bf16_table,
}

#: every page the check reads: README.md, CHANGELOG.md and docs/*.md
PAGES = tuple(doc_check.pages())

_BLOCK = re.compile(r"<!-- generated:(?P<name>[\w-]+) -->\n(?P<body>.*?)<!-- /generated:(?P=name) -->", re.DOTALL)


def regenerate(text: str) -> str:
    """`text` with every generated block rendered anew; an unknown block name is an error."""

    def render(match: re.Match) -> str:
        name = match["name"]
        if name not in BLOCKS:
            raise KeyError(f"unknown generated block {name!r}; known: {', '.join(BLOCKS)}")
        return f"<!-- generated:{name} -->\n{BLOCKS[name]()}\n<!-- /generated:{name} -->"

    return _BLOCK.sub(render, text)


def blocks_in(text: str) -> list[str]:
    return [m["name"] for m in _BLOCK.finditer(text)]


# -- the checked facts ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Fact:
    """`text` must appear in `page` (wrapped anywhere)."""

    page: str
    text: str


#: the verdict words of the pages that are not a verdict (a definition, an English use), checked as facts
NOT_VERDICTS = (
    "A verdict is **inconclusive** with one seed",
    "the peak lr held constant",
    'a claim across depths reads "untestable in this setting" where',
)


class Check:
    """The check of every page against the committed JSON, computed once: the facts per page and each generated
    block as it renders now. `problems(page, text)` checks one page's text (the committed one, or a mutation)."""

    def __init__(self) -> None:
        self.facts: dict[str, list[str]] = {page: [] for page in PAGES}
        for fact in facts():
            self.facts[fact.page].append(fact.text)
        self.rendered = {name: render() for name, render in BLOCKS.items()}

    def page(self, page: str, text: str | None = None) -> doc_check.Page:
        text = (REPO / page).read_text() if text is None else text
        found = [t for t in NOT_VERDICTS if doc_check.loose(t).search(text)]
        return doc_check.Page.read(page, text, [*self.facts[page], *found], _BLOCK)

    def stale_blocks(self, text: str) -> list[str]:
        return [m["name"] for m in _BLOCK.finditer(text) if m["body"] != self.rendered.get(m["name"], "") + "\n"]

    def problems(self, page: str, text: str | None = None) -> list[doc_check.Problem]:
        """Everything wrong with `page` (or `text` as that page)."""
        read = self.page(page, text)
        return [
            *(doc_check.Problem("a stale generated block", page, 0, name, "") for name in self.stale_blocks(read.text)),
            *(doc_check.Problem("a fact the page lacks", page, 0, fact, "") for fact in read.missing),
            *read.unchecked_verdicts(),
            *read.unchecked_numbers(),
        ]

    def misses(self, page: str, text: str | None = None, number_every: int = 1) -> tuple[int, list[doc_check.Mutation]]:
        """How many mutations of `page` (or of `text` as that page) there are, and those the check misses: a
        mutation is caught when the check of the mutated page finds a problem the unmutated one does not have.
        `number_every`: only every n-th mutation that is a number's (all verdict and comparison ones)."""
        read, before = self.page(page, text), set(self.problems(page, text))
        total, missed = 0, []
        for i, mutation in enumerate(doc_check.mutations(read)):
            if mutation.kind == "number" and i % number_every:
                continue
            total += 1
            if not set(self.problems(page, doc_check.apply(read, mutation))) - before:
                missed.append(mutation)
        return total, missed

    def mutations(self, number_every: int = 1) -> tuple[int, list[doc_check.Mutation]]:
        """`misses` over every page: how many mutations there are, and those the check misses."""
        counts = [self.misses(page, number_every=number_every) for page in PAGES]
        return sum(n for n, _ in counts), [m for _, missed in counts for m in missed]


def missing_facts() -> list[Fact]:
    check = Check()
    return [Fact(page, fact) for page in PAGES for fact in check.page(page).missing]


def unchecked_verdicts() -> list[str]:
    check = Check()
    return [str(p) for page in PAGES for p in check.page(page).unchecked_verdicts()]


def unchecked_numbers() -> list[str]:
    check = Check()
    return [str(p) for page in PAGES for p in check.page(page).unchecked_numbers()]


def facts() -> list[Fact]:
    """Every number and verdict of hand-written prose on `PAGES` that the committed JSON determines."""
    return [
        *reproduction_facts(),
        *depth_facts(),
        *depth_speed_facts(),
        *raptr_facts(),
        *speed_facts(),
        *bf16_facts(),
        *bf16_speed_facts(),
        *bf16_cpu_facts(),
        *bf16_centring_facts(),
        *bf16_profile_facts(),
        *authors_facts(),
        *config_facts(),
        *speed_page_facts(),
        *architecture_facts(),
        *fine_tuning_facts(),
        *raptr_page_facts(),
        *bf16_fidelity_facts(),
        *training_facts(),
        *reproduction_page_facts(),
        *reproduction_direction_facts(),
        *reproduction_depth_setting_facts(),
        *readme_facts(),
    ]


def bf16_centring_facts() -> list[Fact]:
    """docs/training.md's figures of the bf16 centring gradient: `benchmarks.before_after --dtype bf16`'s run."""
    cases = run("bf16_centring_before_after")["cases"]
    sas_p, pre_ln = cases["train sas_p 8x128"], cases["train pre_ln 8x128"]
    page = "docs/training.md"
    return [
        Fact(page, f"It made sas_p's bf16 step at the paper's shape {num(sas_p['ratio_median'])}× faster"),
        Fact(page, f"(per-round range {num(sas_p['ratio_low'])}–{num(sas_p['ratio_high'])}) and left"),
        Fact(page, f"pre_ln's unchanged ({num(pre_ln['ratio_median'])})"),
        Fact(
            "docs/speed.md", f"sas_p's bf16 step is {num(sas_p['ratio_median'])}× faster against the code of that run"
        ),
        *bf16_decoding_facts(),
    ]


#: the attention kernel's forward in the profiler (the backward is `..._backward`)
SDPA_FORWARD = "aten::_scaled_dot_product_flash_attention_for_cpu"


def bf16_profile_facts() -> list[Fact]:
    """docs/training.md's account of where a bf16 shaped step's time goes: `bf16profile1`, one profiled step per
    model, eager and compiled. The zero-query call's cost is sas_p's attention-forward time beyond pre_ln's (twice the
    calls)."""
    r = run("bf16profile1")
    profiles, page = r["profile"], "docs/training.md"
    eager = profiles["eager"]
    pre_ln, sas_p = eager["pre_ln"], eager["sas_p"]
    forward = {m: eager[m]["ops"][SDPA_FORWARD] for m in ("pre_ln", "sas_p")}
    zero_query = forward["sas_p"]["self_ms"] - forward["pre_ln"]["self_ms"]
    gemm = {mode: {m: p["categories_ms"]["gemm"] for m, p in profiles[mode].items()} for mode in profiles}
    rest = {
        mode: {m: p["categories_ms"]["rest"] - profiles[mode]["pre_ln"]["categories_ms"]["rest"] for m, p in ps.items()}
        for mode, ps in profiles.items()
    }
    return [
        Fact(page, f"`{r['meta']['command']}`"),
        Fact(
            page,
            f"sas_p's attention kernel ran forward {forward['sas_p']['calls']} times in {num(forward['sas_p']['self_ms'], 1)}"
            f" ms against pre_ln's {forward['pre_ln']['calls']} in {num(forward['pre_ln']['self_ms'], 1)} ms",
        ),
        Fact(
            page,
            f"the zero-query call costs {num(zero_query, 1)} ms, {num(100 * zero_query / sas_p['total_self_ms'], 1)}% "
            f"of sas_p's {sas_p['total_self_ms']:.0f} ms",
        ),
        Fact(
            page,
            f"GEMMs take {pre_ln['categories_ms']['gemm']:.0f} ms in pre_ln and {gemm['eager']['sas_p']:.0f} ms in sas_p "
            f"({num(gemm['eager']['pre_ln'] / gemm['eager']['sas_p'])}; {gemm['eager']['sas']:.0f} ms in sas, "
            f"{num(gemm['eager']['pre_ln'] / gemm['eager']['sas'])}) eager, "
            f"{num(gemm['compiled']['pre_ln'] / gemm['compiled']['sas_p'])} and "
            f"{num(gemm['compiled']['pre_ln'] / gemm['compiled']['sas'])} compiled, against the FLOP bound "
            f"{num(run('bf16run2')['train']['sas_p']['flop_bound_vs_pre_ln'])}",
        ),
        Fact(
            page,
            f"rest of the step is {signed(rest['eager']['sas_p'], 0)} ms (sas_p) and {signed(rest['eager']['sas'], 0)}"
            f" ms (sas) beyond pre_ln's eager, {signed(rest['compiled']['sas_p'], 0)} and "
            f"{signed(rest['compiled']['sas'], 0)} ms compiled",
        ),
    ]


def bf16_decoding_facts() -> list[Fact]:
    """docs/inference.md's compiled-recipe figures: `bf16decode1`'s batch-1 decoding rows of sas_p and its host, and
    the recipe's first call (it compiles) from `bf16run5`'s decoding profile."""
    r = run("bf16decode1")
    precision, peaks = r["precision"], r["meta"]["gemm_peak_gflops"]
    eager, compiled = precision["generate_batch_1"]["sas_p"], precision["generate_batch_1_compiled"]["sas_p"]
    decode = run("bf16run5")["profile"]["decode"]
    page = "docs/inference.md"
    return [
        Fact(page, f"decoded sas_p in {num(compiled['bf16']['median_s'])} s with bf16 weights and"),
        Fact(
            page,
            f"{num(compiled['float32']['median_s'])} s with float32 weights, against {num(eager['float32']['median_s'])} s",
        ),
        Fact(page, f"for eager float32 and {num(eager['bf16']['median_s'])} s for eager bf16"),
        Fact(
            page,
            "On that host the bf16 GEMM peak is "
            + ("below" if peaks["bf16"] < peaks["float32"] else "NOT below")
            + " the float32 one",
        ),
        Fact(
            page,
            f"its first call took {num(decode['bf16']['first_call_s'], 1)} s with bf16 weights and "
            f"{num(decode['float32']['first_call_s'], 1)} s with float32 ones, where a warm call took "
            f"{num(decode['bf16']['warm_call_s'], 2)} and {num(decode['float32']['warm_call_s'], 2)} s",
        ),
    ]


def bf16_cpu_facts() -> list[Fact]:
    """docs/training.md's bf16-on-a-CPU paragraph: `benchmarks/bf16_crossover.py`'s one-thread rows."""
    rows = run("bf16_crossover")["rows"]
    narrow = [r for r in rows if r["batch"] == 8]
    ratio = {b: span([r["bf16_over_float32"] for r in narrow if r["block_type"] == b], 2) for b in ("pre_ln", "sas_p")}
    (demo,) = [r for r in rows if r["batch"] == 32]
    widths = sorted({r["hidden_size"] for r in narrow})
    slower = "every width" if all(r["bf16_over_float32"] > 1 for r in narrow) else "SOME widths"
    top = run("bf16_crossover")["bf16_slower_up_to_hidden_size"]
    page = "docs/training.md"
    return [
        Fact(page, f"hidden_size {widths[0]} to {widths[-1]} on ONE thread"),
        Fact(page, f"bf16 was slower at {slower}: its step took {ratio['pre_ln']}× float32's for pre_ln and "),
        Fact(page, f"{ratio['sas_p']}× for sas_p (medians"),
        Fact(page, f"and {num(demo['bf16_over_float32'], 2)}× at the demo's shape"),
        Fact(page, f"only above hidden_size {top} (not measured here"),
        Fact(page, f"at hidden_size ≤ {top} prints one"),
        Fact("README.md", f"up to hidden_size {top}, a bf16 training step measured slower than float32's"),
    ]


def _largest_difference(label: str) -> float:
    return max(abs(d) for c in bf16_fidelity()["comparison"][label].values() for d in c["difference"])


def _seed_ranges(*labels: str) -> list[float]:
    rows = bf16_fidelity()["comparison"]
    return [c["float32_range"] for label in labels for c in rows[label].values()]


def _within(*labels: str) -> str:
    rows = bf16_fidelity()["comparison"]
    return "both" if all(c["within_float32_spread"] for label in labels for c in rows[label].values()) else "NOT"


def bf16_speed_facts() -> list[Fact]:
    """The prose of docs/speed.md's bf16 limits: the `--dtype bf16` run and the bf16 GEMV rates."""
    (name,) = BF16_RUNS
    r = run(name)
    peaks = r["meta"]["gemm_peak_gflops"]
    precision = r["precision"]
    speedup = {
        k: {m: precision[k][m]["bf16_vs_float32"]["ratio_median"] for m in ("pre_ln", "sas_p")}
        for k in precision
        if k in ("train", "generate_batch_1")
    }
    mfu = r["mfu"]["pre_ln"]
    rows = json.loads((BENCHMARK / "gemv_bf16.json").read_text())["rows"]
    gemv = {"bf16": [row["linear_GBps"] for row in rows], "float32": [row["float32_linear_GBps"] for row in rows]}
    return [
        Fact(
            "docs/speed.md",
            f"pre_ln's bf16 MFU is {num(100 * mfu['mfu'], 1)}% (GEMM-time share {num(100 * mfu['gemm_time_share'], 1)}%)",
        ),
        Fact(
            "docs/speed.md",
            f"a step gains {num(speedup['train']['pre_ln'])}× (pre_ln) where the GEMM peaks differ "
            f"{num(peaks['bf16'] / peaks['float32'], 2)}× ({peaks['float32']:.0f} against {peaks['bf16']:.0f} GFLOP/s)",
        ),
        Fact("docs/speed.md", f"sas_p gained less in that run, {num(speedup['train']['sas_p'])}×"),
        Fact(
            "docs/speed.md",
            f"sas_p / pre_ln was {num(ratio(r['train'], 'sas_p', 'pre_ln')['median'])} in bf16 against its bound of "
            f"{num(r['train']['sas_p']['flop_bound_vs_pre_ln'])}",
        ),
        Fact(
            "docs/speed.md",
            f"Decoding with bf16 weights gains {num(speedup['generate_batch_1']['pre_ln'])}× and "
            f"{num(speedup['generate_batch_1']['sas_p'])}× (pre_ln, sas_p; batch 1)",
        ),
        Fact(
            "docs/speed.md",
            f"streams bf16 weights at {span(gemv['bf16'], 1)} GB/s where the float32 rule streams float32 ones at "
            f"{span(gemv['float32'], 1)}",
        ),
    ]


def bf16_facts() -> list[Fact]:
    """The prose of docs/training.md's bf16 section: the fidelity runs."""
    page = "docs/training.md"
    return [
        Fact(
            page,
            f"pre_ln and sas_p are within it on {_within('pre_ln @ 0.004', 'sas_p @ 0.008')} criteria: bf16 moves their final losses by at most {num(_largest_difference('pre_ln @ 0.004'), 4)} and "
            f"{num(_largest_difference('sas_p @ 0.008'), 4)}, where their float32 seeds differ by "
            f"{span(_seed_ranges('pre_ln @ 0.004', 'sas_p @ 0.008'), 4)}",
        ),
        Fact(
            page,
            f"at Pre-LN's lr, 4e-3, sas in bf16 is within its float32 spread ({_within('sas @ 0.004')} criteria, "
            f"differences at most {num(_largest_difference('sas @ 0.004'), 4)} against a seed range of "
            f"{span(_seed_ranges('sas @ 0.004'), 4)})",
        ),
    ]


#: counts as the prose spells them
COUNTS = dict(enumerate(("none", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")))


def bracketed(result: dict[str, Any]) -> str:
    """Whether every sweep of a family bracketed its best lr, in prose."""
    every = all(row["bracketed"] for row in result["lr_sweep"].values())
    return "bracketed" if every else "did not all bracket"


def in_both(result: dict[str, Any], name: str) -> str:
    """A claim's verdicts in prose: "held in both settings", "did not hold in either setting", or each setting's."""
    best, shared = (verdict_word(claim(result, s, name)["verdict"]) for s in SETTINGS)
    if best != shared:
        return f"{best} at the blocks' own best lrs, {shared} at Pre-LN's"
    return "did not hold in either setting" if best == "did not hold" else f"{best} in both settings"


def _ahead(result: dict[str, Any], setting: str, name: str) -> tuple[str, list[str]]:
    """How far the first block of an equal-steps or equal-time claim is ahead: on the seed means, and per seed (%)."""
    mean, seeds = claim_gaps(claim(result, setting, name))
    return num(-mean, 1), [num(-g, 1) for g in seeds]


def _common(values: list[Any]) -> Any:
    """The one value that all of `values` print as, where the prose states one figure for several runs or blocks."""
    if len(set(values)) != 1:
        raise ValueError(f"the prose states one figure where the JSON gives {sorted(set(values))}: reword it")
    return values[0]


def raptr_lead() -> str:
    """RaPTr's standing in prose, from the comparisons' committed verdicts."""
    verdicts = {row["verdict"] for row in reproduction("codeparrot-tiny")["raptr"].values()}
    return "RaPTr ended ahead" if verdicts == {"RaPTr ahead of the full model"} else "RaPTr did not end ahead"


def reproduction_facts() -> list[Fact]:
    cp, mlm = reproduction("codeparrot-tiny"), reproduction("crammed-bert-tiny")
    best = cp["settings"]["best_lr"]["table"]
    lrs, shared_lr = cp["lrs"]["best_lr"], cp["lrs"]["shared_lr"]
    timing = cp["timing"]
    speed = {n: v["speed_vs_pre_ln"] for n, v in timing["variants"].items()}
    sweep_sizes = [len(row["points"]) for r in (cp, mlm) for row in r["lr_sweep"].values()]
    gap = {n: row["generalisation_gap"][0] for n, row in best.items()}
    simplified = ("sas", "sas_p", "simplest")
    sas_sweep = {p["lr"]: p["train_loss_end"] for p in cp["lr_sweep"]["sas"]["points"]}
    within = {s: [_ahead(cp, s, f"{b} within 2% of Pre-LN") for b in ("SAS", "SAS-P")] for s in SETTINGS}
    init = cp["signal_propagation"]["sas_softmax"]["init"]
    raptr = cp["raptr"]
    mlm_gaps = [g for s in SETTINGS for row in mlm["settings"][s]["table"].values() for g in row["gap_per_seed"]]
    mlm_lr_ratio = _common([f"{mlm['lrs']['best_lr'][n] / mlm['lrs']['shared_lr']:g}" for n in simplified])
    mlm_ahead = {s: [_ahead(mlm, s, f"{b} within 2%")[0] for b in ("SAS", "SAS-P")] for s in SETTINGS}
    finetune = mlm["finetune"]
    helped = finetune["pretraining_helped"]
    tuned = finetune["table"]
    pretrained_losses = [v for n, row in tuned.items() if n != "pre_ln_from_scratch" for v in row["eval_loss_per_seed"]]
    behind = [-d for c in finetune["claims"] for d in c["difference_per_seed"]]
    significant = sum(
        abs(d) > Z * e for c in finetune["claims"] for d, e in zip(c["difference_per_seed"], c["standard_error"])
    )
    page = "docs/reproduction.md"
    return [
        Fact(page, f"All {COUNTS[len(cp['lr_sweep'])]} variants"),
        Fact(page, f"ablation) {bracketed(cp)} their best lr"),
        Fact(page, f"Every sweep {bracketed(mlm)} its best lr"),
        Fact(page, f"{timing['warmup']} warm-up and {timing['rounds']} timed steps"),
        Fact(
            page,
            f"{cp['runs'][0]['steps']} steps of {timing['batch']} × {timing['seq']} tokens "
            f"({cp['runs'][0]['tokens_seen'] / 1e6:.1f}M tokens)",
        ),
        Fact(page, f"Every causal run sees {_common([num(r['epochs'], 2) for r in cp['runs']])} epochs"),
        Fact(
            page,
            f"the final eval loss sits {span(list(gap.values()), 2)} nats above the training loss at the end "
            f"({num(gap['pre_ln'], 2)} for Pre-LN, {span([gap[n] for n in simplified], 2)} for SAS, SAS-P and "
            "simplest;",
        ),
        Fact(page, f"(each variant had {min(sweep_sizes)} to {max(sweep_sizes)} lrs to choose from)"),
        Fact(page, f"the validation split ({_common([row['eval_examples'] for row in tuned.values()])})"),
        Fact(
            page,
            "App. D.1's finding that SAS and SAS-P share Pre-LN's best lr "
            f"**{'held' if lrs['sas'] == lrs['sas_p'] == shared_lr else 'did not hold'} here**",
        ),
        Fact(
            page,
            f"their best lrs are {lrs['sas'] / shared_lr:g}× and {lrs['sas_p'] / shared_lr:g}× Pre-LN's, "
            f"and at Pre-LN's {lr_text(shared_lr)} both seeds of each lie above their best (SAS "
            f"{num(sas_sweep[shared_lr]['0'])} / {num(sas_sweep[shared_lr]['1'])} against "
            f"{num(sas_sweep[lrs['sas']]['0'])} / {num(sas_sweep[lrs['sas']]['1'])})",
        ),
        Fact(
            page,
            f"(training loss {num(best['simplest']['train_loss_end'][0])} against "
            f"{num(best['sas_p']['train_loss_end'][0])}, eval loss {num(best['simplest']['eval_loss@100%'][0])} "
            f"against {num(best['sas_p']['eval_loss@100%'][0])})",
        ),
        Fact(
            page,
            f"median of {timing['rounds']} rounds (range): sas {num(speed['sas']['ratio_median'])} "
            f"({span([speed['sas']['ratio_low'], speed['sas']['ratio_high']])}), sas_p "
            f"{num(speed['sas_p']['ratio_median'])} ({span([speed['sas_p']['ratio_low'], speed['sas_p']['ratio_high']])}), "
            f"simplest {num(speed['simplest']['ratio_median'])}, parallel {num(speed['parallel']['ratio_median'])}, "
            f"normformer {num(speed['normformer']['ratio_median'])}; the per-variant spread over rounds is "
            f"{span([100 * v['spread'] for v in timing['variants'].values()], 0)}%",
        ),
        Fact(
            page,
            f"by {span([float(m.replace('−', '-')) for m, _ in within['shared_lr']], 1)}% on the seed means at Pre-LN's lr "
            f"({span([float(g.replace('−', '-')) for _, gs in within['shared_lr'] for g in gs], 1)}% per seed) and by "
            f"{span([float(m.replace('−', '-')) for m, _ in within['best_lr']], 1)}% at their own best lrs "
            f"({span([float(g.replace('−', '-')) for _, gs in within['best_lr'] for g in gs], 1)}% per seed)",
        ),
        Fact(
            page,
            f"the gap is {num(gap['pre_ln'], 2)} nats for Pre-LN and {span([gap[n] for n in simplified], 2)} "
            "for the simplified blocks",
        ),
        Fact(
            page,
            f"(mean cosine similarity {num(init[0], 2)} after the first block, {num(init[-1], 2)} after the "
            f"fourth, against {span(cp['signal_propagation']['sas']['init'])} for SAS",
        ),
        Fact(page, f"{raptr_lead()} of the full model in every setting and seed"),
        Fact(page, f"the lead shrinks to {num(raptr['same_schedule']['raptr_minus_full'][0])} in seed 0"),
        Fact(
            page,
            f"The two full-model seeds differ by {num(abs(raptr['equal_steps']['full_loss'][1] - raptr['equal_steps']['full_loss'][0]), 2)}",
        ),
        Fact(page, f"the simplified blocks' best lr is {mlm_lr_ratio}× Pre-LN's"),
        Fact(
            page,
            f"every run passes over it {_common([num(r['epochs'], 2) for r in mlm['runs']])} times, and the final "
            f"MLM eval loss sits within {num(max(map(abs, mlm_gaps)), 2)} nats of the training loss at the end "
            f"({num(min(mlm_gaps), 2)} to {signed(max(mlm_gaps), 2)})",
        ),
        Fact(
            page,
            f"(SAS {mlm_ahead['best_lr'][0]}%, SAS-P {mlm_ahead['best_lr'][1]}% on the seed means); at Pre-LN's "
            f"lr they are {mlm_ahead['shared_lr'][0]}% and {mlm_ahead['shared_lr'][1]}% ahead and the verdicts are "
            + _common([verdict_word(claim(mlm, "shared_lr", f"{b} within 2%")["verdict"]) for b in ("SAS", "SAS-P")]),
        ),
        Fact(page, f"the measured step speed against pre_ln (median of {mlm['timing']['rounds']} rounds, range)"),
        Fact(
            page,
            f"validation accuracy ({_common([row['eval_examples'] for row in tuned.values()])} sentences, majority "
            f"class {_common([row['majority_baseline'] for row in tuned.values()]):.0f}%)",
        ),
        Fact(
            page,
            "scratch ("
            + " and ".join(
                f"{num(d, 2)} ± {Z * e:.1f}"
                for d, e in zip(helped["pre_ln_minus_from_scratch"], helped["standard_error"])
            )
            + f" points at {Z:g} standard errors)",
        ),
        Fact(page, f"Pre-training did {'not ' if not helped['on_every_seed'] else ''}help accuracy"),
        Fact(
            page,
            f"at an eval loss of {span(pretrained_losses, 2)}, the control at "
            f"{span(tuned['pre_ln_from_scratch']['eval_loss_per_seed'], 2)}",
        ),
        Fact(
            page,
            f"is **{_common([verdict_word(c['verdict']) for c in finetune['claims']])}** here for both: SAS and "
            f"SAS-P end {span(behind, 1)} points below pre_ln (significant on {COUNTS[significant]} of the four seed "
            "pairs)",
        ),
        *readme_reproduction_facts(),
    ]


def readme_reproduction_facts() -> list[Fact]:
    cp, mlm = reproduction("codeparrot-tiny"), reproduction("crammed-bert-tiny")
    lrs, shared_lr = cp["lrs"]["best_lr"], cp["lrs"]["shared_lr"]
    gaps = [row["generalisation_gap"][0] for row in cp["settings"]["best_lr"]["table"].values()]
    softmax = [claim_gaps(claim(cp, s, "skipless softmax"))[0] for s in SETTINGS]
    ahead = {s: [_ahead(cp, s, f"{b} within 2% of Pre-LN")[0] for b in ("SAS", "SAS-P")] for s in SETTINGS}
    mlm_ahead = [_ahead(mlm, "best_lr", f"{b} within 2%")[0] for b in ("SAS", "SAS-P")]
    mlm_shared = _common([verdict_word(claim(mlm, "shared_lr", f"{b} within 2%")["verdict"]) for b in ("SAS", "SAS-P")])
    finetune = _common([verdict_word(c["verdict"]) for c in mlm["finetune"]["claims"]])
    fig5 = "SAS and SAS-P ahead of Pre-LN at equal measured time (Fig. 5) " + _common(
        [in_both(cp, f"{b} ahead of Pre-LN") for b in ("SAS", "SAS-P")]
    )
    # the README's few sentences, and docs/reproduction.md's "In short", the README's paragraph of before
    readme = [Fact("README.md", fig5), Fact("README.md", f"a {span(gaps, 2)}-nat generalisation gap")]
    page = "docs/reproduction.md"
    return readme + [
        Fact(page, f"On next-token prediction every sweep {bracketed(cp)} its optimum"),
        Fact(
            page,
            "SAS and SAS-P within 2% of Pre-LN per step (Fig. 23) "
            + _common([in_both(cp, f"{b} within 2% of Pre-LN") for b in ("SAS", "SAS-P")]),
        ),
        Fact(
            page,
            f"by {ahead['best_lr'][0]}% and {ahead['best_lr'][1]}% on the seed means at their own best lrs "
            f"({lrs['sas'] / shared_lr:g}× and {lrs['sas_p'] / shared_lr:g}× Pre-LN's",
        ),
        Fact(page, f"by {ahead['shared_lr'][0]}% and {ahead['shared_lr'][1]}% at Pre-LN's"),
        Fact(page, fig5),
        Fact(
            page,
            f"SAS-P ahead of SAS at equal time {in_both(cp, 'SAS-P ahead of SAS')}"
            + (
                " (SAS-P ended behind)"
                if all(claim_gaps(claim(cp, s, "SAS-P ahead of SAS"))[0] > 0 for s in SETTINGS)
                else ""
            ),
        ),
        Fact(page, f"trails SAS by {span(softmax, 0)}% (§4.1)"),
        Fact(
            page,
            f"(SAS {mlm_ahead[0]}%, SAS-P {mlm_ahead[1]}% ahead of Pre-LN at equal time); at Pre-LN's lr the "
            f"verdicts are {mlm_shared}",
        ),
        Fact(page, f"fine-tuning on MR is {finetune}"),
        Fact(page, f"a {span(gaps, 2)}-nat generalisation gap"),
    ]


def _depth_claim(result: dict[str, Any], start: str) -> dict[str, Any]:
    (row,) = [c for c in result["claims"] if c["claim"].startswith(start)]
    return row


def _higher(values: list[float]) -> str:
    return _common(["higher" if v > 0 else "lower" for v in values])


def _sci(x: float) -> str:
    return authors_parity._sci(x)


def _lead_pct(at_lr: dict[str, Any], code: str, block: str) -> str:
    d = at_lr[code]["lead"][block]
    pct = authors_parity._pct
    return f"{pct(d['mean'])} ({', '.join(pct(x) for x in d['per_seed'])})"


def authors_facts() -> list[Fact]:
    """The parity runs against the authors' code (`docs/reproduction.md`, "Training parity with the authors' code")."""
    r, page = reproduction(AUTHORS), "docs/reproduction.md"
    exact = r["exact"]
    simplified = [b for b in exact if b != "pre_ln"]
    hf = [row["their_adamw_hf_vs_torch"]["max_abs"] for row in exact.values()]
    steps = _common([row["ours_vs_theirs_torch_adamw"]["steps"] for row in exact.values()])
    facts = [
        Fact(
            page,
            f"agree to within {_sci(max(row['float64']['max_abs'] for row in exact.values()))} nats for "
            f"{_common([row['float64']['steps'] for row in exact.values()])} steps in every block",
        ),
        Fact(
            page,
            f"after {steps} steps the simplified blocks differ by at most "
            f"{_sci(max(exact[b]['ours_vs_theirs_torch_adamw']['max_abs'] for b in simplified))} and Pre-LN by "
            f"{_sci(exact['pre_ln']['ours_vs_theirs_torch_adamw']['max_abs'])}",
        ),
        Fact(page, f"moves their own float32 curves by {_sci(min(hf))}–{_sci(max(hf))} within {steps} steps"),
    ]
    for at_lr in r["init_parity"]:
        lr = f"{at_lr['learning_rate']:.0e}".replace("e-0", "e-")
        for block in at_lr["blocks"]:
            if block != "pre_ln":
                facts.append(
                    Fact(
                        page,
                        f"at {lr}, {block}: {_lead_pct(at_lr, 'theirs', block)} in their code, "
                        f"{_lead_pct(at_lr, 'ours', block)} in ours",
                    )
                )
    return facts


#: docs/config.md's parameter counts: presets built on the meta device, and the model class each family trains
COUNTED_PRESETS = {
    "codeparrot-pre_ln": "SimplifiedForCausalLM",
    "codeparrot-sas": "SimplifiedForCausalLM",
    "codeparrot-normformer": "SimplifiedForCausalLM",
    "crammed-bert-pre_ln": "SimplifiedForMaskedLM",
    "crammed-bert-sas": "SimplifiedForMaskedLM",
    "crammed-bert-sas_p": "SimplifiedForMaskedLM",
}


@functools.cache
def preset_parameters(preset: str) -> int:
    """The parameters of the model `preset` builds (the model card's count, on the meta device)."""
    return count_parameters(validate(load_preset(preset)), COUNTED_PRESETS[preset])


def config_facts() -> list[Fact]:
    """docs/config.md: the parameters of the paper-scale presets, from the committed presets and model code."""
    millions = {preset: f"{preset_parameters(preset) / 1e6:.2f}M" for preset in COUNTED_PRESETS}
    page = "docs/config.md"
    return [
        Fact(
            page,
            f"`codeparrot-pre_ln` has {millions['codeparrot-pre_ln']}, `codeparrot-sas` {millions['codeparrot-sas']} "
            f"and `codeparrot-normformer` {millions['codeparrot-normformer']}",
        ),
        Fact(
            page,
            f"`crammed-bert-pre_ln` has {millions['crammed-bert-pre_ln']}, `crammed-bert-sas` "
            f"{millions['crammed-bert-sas']} and `crammed-bert-sas_p` {millions['crammed-bert-sas_p']}",
        ),
    ]


def _run_numbers(names: tuple[str, ...]) -> str:
    """`("run13", "run14", "run15", "run16")` → "13–16", as the prose names a span of consecutive runs."""
    numbers = [int(name.removeprefix("run")) for name in names]
    if numbers != list(range(numbers[0], numbers[-1] + 1)):
        raise ValueError(f"not consecutive runs: {names}")
    return f"{numbers[0]}–{numbers[-1]}"


def speed_page_facts() -> list[Fact]:
    """docs/speed.md's protocol and host (the runs' `meta`), its counts of runs, the targets' thresholds
    (`benchmarks.targets`) and the bf16 precision-only run's host."""
    runs = [run(name) for name in (*CURRENT_RUNS, *DECODE_RUNS)]
    meta = [r["meta"] for r in runs]
    shape = json.loads(_common([json.dumps(m["shape"], sort_keys=True) for m in meta]))
    machine = _common([", ".join(m["machine"].split(", ")[:2]) for m in meta]).split(", ")
    every_met = all(p["met"] for t in targets.TARGETS if (p := pooled(t)["pooled"]) is not None)
    bf16_flop = _common([t.fraction for t in targets.BF16_TARGETS if "FLOP bound" in t.label])
    bf16_gpt2 = _common([t.bound({}) for t in targets.BF16_TARGETS if "sas_p / GPT-2" in t.label])
    precision = run("bf16precision1")["meta"]
    peaks = precision["gemm_peak_gflops"]
    flags = set(precision["cpu_flags"])
    compiled = [ratio(run(name)["compile"], "sas_p", "pre_ln")["median"] for name in CURRENT_RUNS]
    threshold = SAS_P_TRAIN.fraction * run(CURRENT_RUNS[0])["train"]["sas_p"]["flop_bound_vs_pre_ln"]
    decode = {m: pooled(target(f"generate batch 1: {m}"))["pooled"]["ratio"] for m in ("sas_p", "pre_ln")}
    byte_bound = run(CURRENT_RUNS[0])["generate"]["batch_1"]["sas_p"]["weight_bound_vs_gpt2"]
    before_after = run("attention_interface_before_after")["cases"]
    trained = [c["ratio_median"] for k, c in before_after.items() if k.startswith("train")]
    page = "docs/speed.md"
    return [
        Fact(
            page,
            f"in runs {_run_numbers(CURRENT_RUNS)}, "
            + (
                "not above the threshold in every run either"
                if min(compiled) < threshold
                else "above the threshold in every run"
            ),
        ),
        Fact(
            page,
            "sas_p stays "
            + ("below" if decode["sas_p"] / decode["pre_ln"] < byte_bound else "NOT below")
            + f" its {num(byte_bound)} bound over pre_ln at batch 1 (pooled medians {num(decode['sas_p'])} and "
            f"{num(decode['pre_ln'])} over GPT-2)",
        ),
        Fact(page, f"its speed, training {span(trained, 2)}×;"),
        Fact(
            page,
            f"{shape['layers']} blocks, d = {shape['width']}, {shape['heads']} heads, MLP 3072, sequence "
            f"{shape['seq']}, with GPT-2's vocab {shape['vocab']} (the paper's vocab is 50000) and batch "
            f"{shape['batch']}, float32",
        ),
        Fact(
            page,
            f"The host: {machine[1].split()[0]} cores shared with other tenants, {machine[0]}, torch "
            f"{_common([m['torch'] for m in meta])}, transformers {_common([m['transformers'] for m in meta])}, "
            f"{_common([m['torch_threads'] for m in meta])} threads",
        ),
        Fact(
            page,
            f"Runs {_run_numbers(CURRENT_RUNS)}, {COUNTS[len(CURRENT_RUNS)]} full runs of the current model code",
        ),
        Fact(page, f"Runs {_run_numbers(CURRENT_RUNS)} (full), and {COUNTS[len(DECODE_RUNS)]} runs of `make bench"),
        Fact(
            page,
            f"Every counted target {'is met' if every_met else 'is NOT met'} by the pooled median of "
            f"{COUNTS[len(CURRENT_RUNS)]} full runs ({COUNTS[len(runs)]} for decoding and scoring)",
        ),
        Fact(
            page,
            f"the bf16 step ≥ {targets.BF16_STEP_SHARE} × the ratio of the two GEMM peaks over the float32 step "
            f"(matmul bound), bf16 MFU ≥ {targets.BF16_MFU:.0%}, sas_p and sas ≥ {bf16_flop} × their FLOP bound over "
            f"pre_ln, eager and compiled, bf16 decoding at batch 1, eager and by the compiled recipe "
            f"([inference.md](inference.md)), ≥ {targets.BF16_DECODE}× float32 weights",
        ),
        Fact(page, f"and sas_p ≥ {bf16_gpt2:.2f}× GPT-2 at batch 1 and batch 8"),
        Fact(page, f"Run `bf16run1` (`{run('bf16run1')['meta']['command']}`;"),
        Fact(page, f"Run `bf16precision1` (`{precision['command']}`;"),
        *bf16run2_facts(),
        *bf16_full_runs_facts(),
        *bf16_limits_facts(),
        Fact(
            page,
            f"host whose bf16 GEMM peak is {num(peaks['bf16'] / peaks['float32'], 2)} of its float32 one "
            f"({peaks['bf16']:.0f} against {peaks['float32']:.0f} GFLOP/s; "
            + ("`avx512_bf16` among its flags" if "avx512_bf16" in flags else "NO `avx512_bf16`")
            + (", no `amx_bf16`)" if "amx_bf16" not in flags else ", `amx_bf16` too)"),
        ),
        Fact(
            page,
            "host whose bf16 GEMM peak is "
            + ("below" if peaks["bf16"] < peaks["float32"] else "NOT below")
            + " its float32 one (the table above)",
        ),
    ]


def _gemm_speed(peaks: dict[str, float]) -> str:
    """How a host's bf16 GEMMs compare with its float32 ones, by the run's measured peaks."""
    return "slower" if peaks["bf16"] < peaks["float32"] else "faster"


def bf16run2_facts() -> list[Fact]:
    """docs/speed.md on `bf16run2`: the current code's bf16 sections other than `precision`, its host's peaks and its
    eager training ratios against their bound."""
    r = run("bf16run2")
    meta, page = r["meta"], "docs/speed.md"
    peaks = meta["gemm_peak_gflops"]
    sections = meta["command"].split("--sections ")[1].split()[0].split(",")
    train = {m: num(ratio(r["train"], m, "pre_ln")["median"]) for m in ("sas_p", "sas")}
    bound = _common([num(r["train"][m]["flop_bound_vs_pre_ln"]) for m in ("sas_p", "sas")])
    return [
        Fact(page, f"Run `bf16run2` (`{meta['command']}`;"),
        Fact(
            page,
            f"measured the current code's {', '.join(f'`{x}`' for x in sections[:-1])} and `{sections[-1]}` sections "
            f"on a host whose bf16 GEMM peak is {num(peaks['bf16'] / peaks['float32'], 2)} of its float32 one "
            f"({peaks['bf16']:.0f} against {peaks['float32']:.0f} GFLOP/s)",
        ),
        Fact(
            page,
            f"On `bf16run2`'s host sas_p / pre_ln is {train['sas_p']} in bf16 and sas / pre_ln {train['sas']} (eager; "
            f"bound {bound}), where bf16 GEMMs are {_gemm_speed(peaks)} than float32 ones; no run of the current code "
            f"comes from a host like `bf16run1`'s, where they are {_gemm_speed(run('bf16run1')['meta']['gemm_peak_gflops'])}",
        ),
    ]


def bf16_limits_facts() -> list[Fact]:
    """docs/speed.md's account of the bf16 targets the current code misses: the pooled training ratios, and the
    compiled recipe's weight-read rates (GEMM weights × bytes per weight × the call's tokens/s, `bf16decode1`)."""
    page = "docs/speed.md"
    pooled = {
        label: bf16_pooled(target(label, targets.BF16_TARGETS))["pooled"]
        for label in (
            "bf16 training: sas_p /",
            "bf16 training: sas /",
            "bf16 training, compiled: sas_p /",
            "bf16 training, compiled: sas /",
            "bf16 generate batch 1, compiled: pre_ln bf16",
            "bf16 generate batch 1, compiled: sas_p bf16",
        )
    }
    r = run("bf16decode1")
    rates = {}
    for m in ("pre_ln", "sas_p"):
        weights = r["generate_compiled"]["batch_1"][m]["gemm_weights"]
        tokens_per_s = r["precision"]["generate_batch_1_compiled"][m]["tokens_per_s"]
        rates[m] = {d: weights * dtype.itemsize * tokens_per_s[d] / 1e9 for d, dtype in DTYPES.items()}
    cell = lambda p: f"{num(p['ratio'])} ({num(p['share_of_bound'])} of the bound)"  # noqa: E731
    return [
        Fact(
            page,
            f"eager, sas_p / pre_ln pools to {cell(pooled['bf16 training: sas_p /'])} and sas / pre_ln to "
            f"{cell(pooled['bf16 training: sas /'])}; compiled, {cell(pooled['bf16 training, compiled: sas_p /'])} "
            f"and {cell(pooled['bf16 training, compiled: sas /'])}",
        ),
        Fact(
            page,
            f"bf16 / float32 weights pool to {num(pooled['bf16 generate batch 1, compiled: pre_ln bf16']['ratio'])} (pre_ln) "
            f"and {num(pooled['bf16 generate batch 1, compiled: sas_p bf16']['ratio'])} (sas_p)",
        ),
        Fact(
            page,
            f"reads sas_p's bf16 weights at {num(rates['sas_p']['bf16'], 1)} GB/s and its float32 weights at "
            f"{num(rates['sas_p']['float32'], 1)} GB/s (pre_ln: {num(rates['pre_ln']['bf16'], 1)} and "
            f"{num(rates['pre_ln']['float32'], 1)})",
        ),
    ]


def bf16_full_runs_facts() -> list[Fact]:
    """docs/speed.md on the current code's full bf16 runs (`bf16run3`, `bf16run4`): their command and hosts."""
    names = ("bf16run3", "bf16run4")
    commands = {run(n)["meta"]["command"].replace(n, "bf16runN") for n in names}
    (command,) = commands  # one command, the run's name apart
    sections = command.split("--sections ")[1].split()[0].split(",")
    ratios = [run(n)["meta"]["gemm_peak_gflops"]["bf16"] / run(n)["meta"]["gemm_peak_gflops"]["float32"] for n in names]
    return [
        Fact(
            "docs/speed.md",
            f"Runs {' and '.join(f'`{n}`' for n in names)} (`{command.replace('bf16runN', names[0])}`, and the same "
            f"for `{names[1]}`;",
        ),
        Fact(
            "docs/speed.md",
            f"measured the current code's {', '.join(f'`{x}`' for x in sections[:-1])} and `{sections[-1]}` sections on "
            f"hosts whose bf16 GEMM peak is {span(ratios, 2)} of their float32 one",
        ),
    ]


def architecture_facts() -> list[Fact]:
    """docs/architecture.md's parameter counts of the paper-scale presets, as the presets build them."""
    pre_ln, sas = (preset_parameters(f"codeparrot-{b}") / 1e6 for b in ("pre_ln", "sas"))
    return [
        Fact(
            "docs/architecture.md",
            f"the paper-scale presets (vocab 50000, sinusoidal positions) build {pre_ln:.2f}M → {sas:.2f}M",
        ),
    ]


# -- docs/fine_tuning.md, docs/training.md, docs/raptr.md -------------------------------------------------------------
GLUE_TINY = REPRODUCTION / "crammed-bert-tiny-glue" / "glue.json"


def _seeds_text(seeds: list[str]) -> str:
    """["0", "1"] → "0 and 1"."""
    return " and ".join([", ".join(seeds[:-1]), seeds[-1]] if len(seeds) > 1 else seeds)


def fine_tuning_facts() -> list[Fact]:
    """docs/fine_tuning.md: the tiny crammed BERTs' GLUE-like table (`python -m experiments.glue_tiny`'s glue.json),
    the seeds that finished and how the blocks stand on each task."""
    rows = json.loads(GLUE_TINY.read_text())["blocks"]
    page = "docs/fine_tuning.md"
    seeds = _common(
        [" ".join(sorted(task["seeds"], key=int)) for glue in rows.values() for task in glue["tasks"].values()]
    )
    accuracy = {
        name: {t: task["summary"]["validation"]["accuracy"] for t, task in glue["tasks"].items()}
        for name, glue in rows.items()
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
        Fact(page, render_table(rows)),
        Fact(page, f"Fine-tuning seeds {_seeds_text(seeds.split())} of each block finished"),
        Fact(
            page,
            f"On stdlib-topic the {COUNTS[len(rows)]} blocks' seed ranges "
            f"{'overlap' if overlap['stdlib-topic'] else 'do NOT all overlap'}; on MR Pre-LN is {side['SAS']} SAS by "
            f"{num(abs(lead['SAS']), 1)} points and {then} SAS-P by "
            f"{num(abs(lead['SAS-P']), 1)}, with {'no' if apart else 'SOME'} overlap of the seed ranges",
        ),
    ]


def raptr_page_facts() -> list[Fact]:
    """docs/raptr.md's RaPTr comparison: the seeds run, the seed that chose the lr and the seed with the larger gaps
    (`docs/reproduction/codeparrot-tiny/results.json`, `raptr`)."""
    cp = reproduction("codeparrot-tiny")
    raptr = cp["raptr"]
    seeds = list(_common([tuple(row["seeds"]) for row in raptr.values()]))
    gaps = [[abs(g) for g in row["raptr_minus_full"]] for row in raptr.values()]
    larger = _common([seeds[max(range(len(g)), key=g.__getitem__)] for g in gaps])
    return [
        Fact("docs/raptr.md", f"with the stagewise lr schedule, seeds {_seeds_text([str(x) for x in seeds])}."),
        Fact(
            "docs/raptr.md",
            f"(seed {cp['lr_sweep']['pre_ln']['criterion_seed']} also chose the lr), which makes seed {larger}'s gaps "
            "the larger",
        ),
    ]


def _against_range(difference: float, seed: int, spread: float, what: str = "") -> str:
    """A paired bf16 − float32 difference against the float32 seed range: +0.0510 in seed 0 (more than 0.0340)."""
    side = "more" if abs(difference) > spread else "less"
    return f"{signed(difference, 4)} in seed {seed} ({side} than {num(spread, 4)}{what})"


def bf16_fidelity_facts() -> list[Fact]:
    """docs/training.md's account of the bf16 fidelity runs: the code each side ran, the rerun, and the one point
    outside float32's seed spread, per seed (`docs/reproduction/bf16-fidelity/results.json`)."""
    result, page = bf16_fidelity(), "docs/training.md"
    reference = reproduction("codeparrot-tiny")["environment"]["commit"][:7]
    commit, changes, _ = result["environment"]["commit"].partition("+changes")
    reruns = result["float32_vs_committed"]
    others = sorted({p["block"] for p in result["points"]} - {name.split(" seed ")[0] for name in reruns})
    steps = _common([r["steps"] for runs in result["runs"].values() for r in runs])
    rows = result["comparison"]
    labels = [f"{point['block']} @ {point['lr']:g}" for point in result["points"]]
    (edge,) = [label for label in labels if not all(c["within_float32_spread"] for c in rows[label].values())]
    block, lr = edge.split(" @ ")
    lr = lr_text(float(lr))
    train_range, eval_range = (rows[edge][c]["float32_range"] for c in ("end_train_loss", "final_eval_loss"))
    train = [
        _against_range(
            rows[edge]["end_train_loss"]["difference"][i], seed, train_range, "" if i else ", the float32 seeds' range"
        )
        for i, seed in enumerate(result["seeds"])
    ]
    evaluation = [
        _against_range(rows[edge]["final_eval_loss"]["difference"][i], seed, eval_range)
        for i, seed in enumerate(result["seeds"])
    ]
    both_ways = all(min(c["difference"]) < 0 < max(c["difference"]) for c in rows[edge].values())
    largest = max(labels, key=_largest_difference) == edge
    narrowest = all(min(labels, key=lambda x: rows[x][c]["float32_range"]) == edge for c in rows[edge])
    rerun = "; ".join(name.replace(" seed ", ", seed ") for name in reruns)
    reproduced = "reproduced" if set(reruns.values()) == {"equal"} else "did NOT reproduce"
    return [
        Fact(page, f"seeds {_seeds_text([str(x) for x in result['seeds']])}, {steps} steps, and compares them"),
        Fact(
            page,
            f"The float32 records were trained at commit {reference}; the bf16 runs ran at commit {commit[:7]}"
            f"{' with uncommitted changes' if changes else ''}, and {COUNTS[len(reruns)]} float32 run was trained "
            f"again there: {rerun}, which {reproduced} its committed record's every logged loss",
        ),
        Fact(page, f"It does not show it for {' and '.join(others)}: their float32 records were not rerun"),
        Fact(page, f"`git log {reference}..{commit[:7]} -- modeling_simplified/`"),
        Fact(
            page,
            f"{block} at its own lr, {lr}, is not: bf16 − float32 on the training loss is {' and '.join(train)}; on the "
            f"eval loss {' and '.join(evaluation)}. The differences there go {'both ways' if both_ways else 'ONE way'}",
        ),
        Fact(
            page,
            f"Of the {COUNTS[len(labels)]} points, {block} at {lr} has {'the' if largest else 'NOT the'} largest "
            f"bf16 − float32 differences and {'the' if narrowest else 'NOT the'} narrowest float32 seed ranges on "
            "both criteria",
        ),
    ]


def training_facts() -> list[Fact]:
    """docs/training.md besides bf16: the demo model's size (the reproduction's sas_p runs of the same preset), the
    stream resume timing (`benchmarks.stream_resume`), the offline task's constant baseline (glue_tiny's glue.json)
    and the packing section's batch and runs (the current `make bench` runs)."""
    page = "docs/training.md"
    parameters = _common([r["parameters"] for r in reproduction("codeparrot-tiny")["runs"] if r["block"] == "sas_p"])
    stream = json.loads((BENCHMARK / "stream_resume.json").read_text())
    times = {
        kind: f"{stream[kind]['median_s']:.2f} s ({span([stream[kind]['min_s'], stream[kind]['max_s']], 2)})"
        for kind in ("restored", "skipped")
    }
    glue = json.loads(GLUE_TINY.read_text())
    baseline = _common(
        [g["tasks"]["stdlib-topic"]["baseline"]["validation"]["accuracy"] for g in glue["blocks"].values()]
    )
    runs = [run(name) for name in CURRENT_RUNS]
    shape = _common([json.dumps(r["meta"]["shape"], sort_keys=True) for r in runs])
    cpus = _common([r["meta"]["machine"].split(", ")[1].split()[0] for r in runs])
    return [
        Fact(page, f"(SAS-P, 4 blocks, d=128, {parameters / 1e6:.1f}M parameters"),
        Fact(
            page,
            f"from step {stream['setup']['checkpoint_step']} of a local stream of {stream['setup']['documents']:,} "
            f"documents (crammed-bert-tiny-sas_p, {COUNTS[stream['setup']['rounds']]} rounds",
        ),
        Fact(
            page,
            f"the first step came after {times['restored']} restored and {times['skipped']} skipped, "
            f"{num(stream['skipped_over_restored'], 2)}× as long",
        ),
        Fact(
            page,
            f"with Python {glue['environment']['python']}'s, a constant prediction of the most frequent training class "
            f"scores {100 * baseline:.1f}% on the validation split",
        ),
        Fact(
            page,
            f"({_common([r['packing']['tokens'] for r in runs])} real tokens, "
            f"{_common([r['packing']['padded_tokens'] for r in runs]):,} when padded to the longest)",
        ),
        Fact(
            page,
            "at the paper's CodeParrot shape ({layers}×{width})".format(**json.loads(shape))
            + f" on this project's host of {cpus} CPUs. In the {COUNTS[len(runs)]} current runs (runs "
            f"{_run_numbers(CURRENT_RUNS)},",
        ),
    ]


def _training_hours(*results: dict[str, Any]) -> float:
    """The sum of the training times of every run of `results` (pre-training, RaPTr, fine-tuning), in hours."""
    kinds = ("runs", "raptr_runs", "finetune_runs")
    return sum(run["train_time_s"] for r in results for kind in kinds for run in r.get(kind, [])) / 3600


def _steps(result: dict[str, Any]) -> int:
    return _common([run["steps"] for run in result["runs"]])


def _seed_ways(result: dict[str, Any], name: str) -> str:
    """Which way each seed of a claim went, where it reads the same in both settings: "V-SkipInit behind by 1.6% in
    seed 0, ahead by 3.1% in seed 1"."""

    def ways(setting: str) -> str:
        row = claim(result, setting, name)
        first = CLAIM_LABELS[next(iter(row["loss"]))]
        _, gaps = claim_gaps(row)
        return f"{first} " + ", ".join(
            f"{_way(g).split()[0]} by {abs(g):.1f}% in seed {s}" for s, g in zip(row["seeds"], gaps)
        )

    return _common([ways(s) for s in SETTINGS])


def reproduction_page_facts() -> list[Fact]:
    """docs/reproduction.md's settings as the committed records hold them, the verdicts' directions in its prose and
    the parity section's figures of the first steps."""
    cp, mlm, authors = reproduction("codeparrot-tiny"), reproduction("crammed-bert-tiny"), reproduction(AUTHORS)
    steps, mlm_steps, shared_lr = _steps(cp), _steps(mlm), cp["lrs"]["shared_lr"]
    params = {name: [run["parameters"] / 1e6 for run in r["runs"]] for name, r in (("causal", cp), ("masked", mlm))}
    nearly = [g for s in SETTINGS for g in claim_gaps(claim(cp, s, "no norms (simplest) slightly"))[1]]
    mlm_shared = [_ahead(mlm, "shared_lr", f"{b} within 2%")[0] for b in ("SAS", "SAS-P")]
    behind = [-d for c in mlm["finetune"]["claims"] for d in c["difference_per_seed"]]
    (sentences,) = re.findall(r"([\d,]+) sentences", mlm["finetune"]["data"])
    tuned_seeds = _common([len(c["seeds"]) for c in mlm["finetune"]["claims"]])
    within_shared = [-claim_gaps(claim(cp, "shared_lr", f"{b} within 2% of Pre-LN"))[0] for b in ("SAS", "SAS-P")]
    setting, exact = authors["setting"], authors["exact"]
    # the float32 rounding of 1/k, k up to the sequence length: the centring matrix's entries as their code casts them
    rounding = max(abs(float(np.float32(1 / k)) - 1 / k) * k for k in range(1, setting["seq_len"] + 1))
    page = "docs/reproduction.md"
    return [
        Fact(
            page,
            f"d=128, {steps} steps, embedded data; resumable; its runs' training times sum to "
            f"{_training_hours(cp, mlm):.1f} hours",
        ),
        Fact(page, f"{span(params['causal'], 2)}M parameters on the causal side"),
        Fact(page, f"{span(params['masked'], 2)}M on the masked side"),
        Fact(page, f"{mlm_steps} micro-batch steps on the masked side"),
        Fact(page, f"at d = 128 and {steps} steps unit-amplitude sinusoids"),
        Fact(page, f"the sentences SST-2 was built from: {sentences} of them"),
        Fact(page, f"One task and {tuned_seeds} seeds"),
        Fact(page, f"Final eval loss after {steps} steps"),
        Fact(page, f"at the Pre-LN lr used here, {lr_text(shared_lr)}:"),
        Fact(
            page,
            f"V-SkipInit behind Pre-LN per step ({in_both(cp, 'V-SkipInit behind Pre-LN')}: {_seed_ways(cp, 'V-SkipInit behind Pre-LN')})",
        ),
        Fact(
            page,
            f"slightly behind SAS-P per step ({in_both(cp, 'no norms (simplest) slightly')}: within "
            f"{max(map(abs, nearly)):.1f}% of SAS-P in every seed)",
        ),
        Fact(
            page,
            f"the verdicts are {_common([verdict_word(claim(mlm, 'shared_lr', f'{b} within 2%')['verdict']) for b in ('SAS', 'SAS-P')])}, "
            f"with SAS and SAS-P {mlm_shared[0]}% and {mlm_shared[1]}% ahead",
        ),
        Fact(
            page,
            f"fine-tuning on MR is {_common([verdict_word(c['verdict']) for c in mlm['finetune']['claims']])} (SAS and "
            f"SAS-P end {span(behind, 1)} points below pre_ln in accuracy)",
        ),
        Fact(page, f"SAS and SAS-P lead by {span(within_shared, 1)}% on the seed means"),
        Fact(page, f"{mlm_steps} micro-batch steps, the batch ramped"),
        Fact(page, f"Final MLM eval loss after {mlm_steps} steps"),
        Fact(page, f"{mlm_steps} steps of masked-LM on Python's docstrings"),
        Fact(
            page,
            f"seq {setting['seq_len']}, batch {setting['batch']}, {setting['steps']} steps, on the reproduction's data "
            f"(the embedded stdlib code, a byte-level BPE of vocab {setting['vocab_size']})",
        ),
        Fact(page, f"{setting['steps']} steps instead of an epoch"),
        Fact(page, f"(`1/k` off by up to {rounding:.0e} relative)".replace("e-0", "e-")),
        Fact(
            page,
            f"they start up to {_sci(max(row['float64']['first_step_abs'] for row in exact.values()))} apart at the "
            "first step",
        ),
        Fact(
            page,
            "the differences of up to "
            f"{_sci(max(row['ours_vs_theirs_torch_adamw']['first_step_abs'] for row in exact.values()))} at the first "
            "step",
        ),
    ]


def _every_seed_way(result: dict[str, Any], names: list[str], settings: tuple[str, ...] = SETTINGS) -> str:
    """ "ahead" where the first block of every named claim is ahead in every seed and setting, "behind" where it is
    behind in all, else "NEITHER ahead nor behind"."""
    gaps = [g for s in settings for name in names for g in claim_gaps(claim(result, s, name))[1]]
    return "ahead" if all(g < 0 for g in gaps) else "behind" if all(g > 0 for g in gaps) else "NEITHER ahead nor behind"


def reproduction_direction_facts() -> list[Fact]:
    """The words of docs/reproduction.md that say which way a checked figure points, from the committed records."""
    cp, mlm, authors = reproduction("codeparrot-tiny"), reproduction("crammed-bert-tiny"), reproduction(AUTHORS)
    within = [f"{b} within 2% of Pre-LN" for b in ("SAS", "SAS-P")]
    best = [_ahead(cp, "best_lr", name)[0] for name in within]
    mlm_best = [_ahead(mlm, "best_lr", f"{b} within 2%")[0] for b in ("SAS", "SAS-P")]
    exact = authors["exact"]
    simplified = [b for b in exact if b != "pre_ln"]
    steps = _common([row["ours_vs_theirs_torch_adamw"]["steps"] for row in exact.values()])
    more = all(
        exact[b]["their_adamw_hf_vs_torch"]["max_abs"] > exact[b]["ours_vs_theirs_torch_adamw"]["max_abs"]
        for b in simplified
    )
    (low,) = [at for at in authors["init_parity"] if at["learning_rate"] == authors["setting"]["learning_rate"]]
    lead = {code: low[code]["lead"] for code in ("theirs", "ours")}
    shaped = [lead[code][b]["per_seed"] for code in lead for b in ("sas", "sas_p")]
    shaped_way = "behind" if all(x > 0 for xs in shaped for x in xs) else "NOT behind"
    further = all(lead["theirs"][b]["mean"] > lead["ours"][b]["mean"] for b in ("sas", "sas_p"))
    vsk = {code: lead[code]["value_skipinit"]["mean"] for code in lead}
    tuned = mlm["finetune"]["table"]
    pretrained = [v for n, row in tuned.items() if n != "pre_ln_from_scratch" for v in row["eval_loss_per_seed"]]
    lowered = max(pretrained) < min(tuned["pre_ln_from_scratch"]["eval_loss_per_seed"])
    page = "docs/reproduction.md"
    return [
        Fact(
            page,
            f"they are {_every_seed_way(cp, within)} of it in both seeds, by {best[0]}% and {best[1]}% on the seed "
            "means",
        ),
        Fact(
            page,
            f"the simplified blocks are {_every_seed_way(mlm, [f'{b} within 2%' for b in ('SAS', 'SAS-P')], ('best_lr',))} "
            f"at their own best lrs too (SAS {mlm_best[0]}%, SAS-P {mlm_best[1]}%",
        ),
        Fact(page, f"they are {_every_seed_way(cp, within)} of it in every seed, by"),
        Fact(
            page,
            f"within {steps} steps, {'more' if more else 'NOT more'} than the two codes' float32 rounding in every "
            "simplified block",
        ),
        Fact(
            page,
            f"SAS and SAS-P end {shaped_way} Pre-LN in both codes and both seeds, "
            f"{'further behind in theirs' if further else 'NOT further behind in theirs'}",
        ),
        Fact(
            page,
            f"ends slightly {'ahead of' if vsk['theirs'] < 0 else 'behind'} their Pre-LN, this project's slightly "
            f"{'ahead' if vsk['ours'] < 0 else 'behind'}",
        ),
        Fact(page, f"It did {'lower' if lowered else 'NOT lower'} the loss: every pretrained run ends"),
    ]


def reproduction_depth_setting_facts() -> list[Fact]:
    """The depth family's shape, steps, tokens, epochs, βFF and match threshold where the prose states them."""
    result = reproduction(DEPTH)
    shallow, deep = result["depths"]
    shape, steps = result["shape"], result["steps"]
    tokens = _common([f"{run['tokens_seen'] / 1e3:.0f}K" for run in result["runs"]])
    beta = {int(k): v for k, v in result["beta_ff_init"].items()}
    base = load_preset(f"{DEPTH}-sas")
    epochs = _common([num(c["regime"]["epochs"], 2) for c in result["claims"]])
    threshold = f"{100 * result['match_threshold']:g}%"
    mlp = "2d" if shape["intermediate_size"] == 2 * shape["hidden_size"] else str(shape["intermediate_size"])
    page = "docs/reproduction.md"
    return [
        Fact(
            page,
            f"at {shallow} and {deep} blocks (d={shape['hidden_size']}, MLP {mlp}, {steps} steps), the lr swept at "
            f"{shallow} blocks and re-checked at {deep} around each best",
        ),
        Fact(
            page,
            f"at {shallow} and {deep} blocks ({deep / shallow:g}× deeper), d = {shape['hidden_size']}, "
            f"{shape['heads']} heads, ReLU MLP {shape['intermediate_size']} = {mlp}",
        ),
        Fact(page, f"sequence {shape['seq_len']}, batch {shape['batch']}, {steps} steps ({tokens} tokens)"),
        Fact(page, f"(`max_train_samples={base.data.max_train_samples}`: {epochs} epochs"),
        Fact(page, f"βFF starts at {beta[shallow]:.3g} at {shallow} blocks and {beta[deep]:.3g} at {deep}:"),
        Fact(
            page,
            f"from the preset's {base.model['beta_ff_init']:g} at {base.model['num_hidden_layers']} blocks",
        ),
        Fact(page, f"within {threshold} of Pre-LN's: the paper gives no number, and {threshold} is the threshold"),
        Fact(page, f"so {threshold} can only be met where the seeds agree"),
        Fact(page, f"{tokens} tokens is a small part of the data Fig. 6's models train on"),
        Fact(page, f"their first {steps} updates"),
        Fact(
            page,
            f"{shallow} and {deep} blocks of width {shape['hidden_size']}, against 18 blocks and 72 blocks of width "
            f"768; {steps} steps of batch {shape['batch']}, seq {shape['seq_len']}",
        ),
    ]


#: the README's block-types table: He & Hofmann's CodeParrot shape (§4.2) with GPT-2's vocabulary, the config defaults
PAPER_SHAPE = dict(
    num_hidden_layers=18, hidden_size=768, num_attention_heads=12, intermediate_size=3072, vocab_size=50257
)


@functools.cache
def paper_scale_parameters(block_type: str) -> int:
    """`SimplifiedForCausalLM`'s parameters at `PAPER_SHAPE` (the model card's count, on the meta device)."""
    return count_parameters(SimplifiedConfig(block_type=block_type, **PAPER_SHAPE), "SimplifiedForCausalLM")


def readme_facts() -> list[Fact]:
    """The README's parameter counts, and its paragraph on what the miniature can and cannot show."""
    cp, mlm, depth = reproduction("codeparrot-tiny"), reproduction("crammed-bert-tiny"), reproduction(DEPTH)
    steps = _common([_steps(cp), _steps(mlm)])
    seeds = COUNTS[_common([len({run["seed"] for run in r["runs"]}) for r in (cp, mlm)])]
    counts = {block: paper_scale_parameters(block) / 1e6 for block in CLAIM_LABELS if block != "sas_softmax"}
    miniature = [run["parameters"] / 1e6 for r in (cp, mlm) for run in r["runs"]]
    shallow, deep = depth["depths"]
    page = "README.md"
    return [
        *(Fact(page, f"| `{block}` | {n:.2f}M |") for block, n in counts.items()),
        Fact(
            page,
            f"4 blocks of width 128, {steps} steps on the embedded corpora (resumable; the two comparisons' runs train "
            f"for {_training_hours(cp, mlm):.1f} hours in all",
        ),
        Fact(page, f"an lr sweep per block, {seeds} seeds,"),
        Fact(page, f"Fig. 6's depth scaling at {shallow} and {deep} blocks"),
        Fact(
            page,
            f"Its models hold {span(miniature, 1)}M parameters and train for {steps} steps on a CPU; the paper's hold "
            f"{span(list(counts.values()), 0)}M (the table above)",
        ),
        Fact(page, f"and {seeds} seeds settle only large differences"),
    ]


def _control(row: dict[str, Any]) -> str:
    """What the Pre-LN control's depth claim means for the family's claims across depths."""
    if row["held"] is True:
        return "The Pre-LN control improved with depth (held), so the claims across depths are tested here"
    reason = row["verdict"].split(" (", 1)[1].rstrip(")")
    return (
        f"{reason[0].upper()}{reason[1:]}, so this setting cannot test Fig. 6's claims across depths: each reads "
        f"{verdict_word(row['verdict'])}"
    )


def _vskip_standing(versus: dict[str, dict[str, dict[str, float]]]) -> str:
    """Whom V-SkipInit was ahead of or behind in every seed at every depth: "It is ahead of pre_ln and behind sas,
    sas_p in every seed at both depths" (a variant it was on both sides of is named as mixed)."""
    others = list(next(iter(next(iter(versus.values())).values())))
    gaps = {n: [g[n] for by_seed in versus.values() for g in by_seed.values()] for n in others}
    ahead = [n for n, v in gaps.items() if all(g < 0 for g in v)]
    behind = [n for n, v in gaps.items() if all(g >= 0 for g in v)]
    mixed = [n for n in others if n not in ahead and n not in behind]
    parts = [f"ahead of {', '.join(ahead)}"] * bool(ahead) + [f"behind {', '.join(behind)}"] * bool(behind)
    text = f"It is {' and '.join(parts)} in every seed at both depths" if parts else "It is"
    return text + (f"; on both sides of {', '.join(mixed)}" if mixed else "")


def depth_speed_facts() -> list[Fact]:
    """How fast the depth family's runs can train on this host (`experiments.depth_speed`'s committed JSON)."""
    speed = json.loads((REPRODUCTION / DEPTH / "speed.json").read_text())
    family = reproduction(DEPTH)
    shallow, deep = map(str, family["depths"])

    def ratios(name: str, at: str) -> str:
        return span(speed[at][name]["ratio"], 2)

    threads = "threads: 2 processes x 1 thread / 1 process x 2 threads"
    compile_s = [t for at in (shallow, deep) for t in speed[at]["compiled / eager"]["compile_s"]]
    peaks = speed["gemm_peak_gflops"]
    # the family's own layout (two single-thread runs at a time) against each change it did not make
    layout = "the faster" if min(r for at in (shallow, deep) for r in speed[at][threads]["ratio"]) > 1 else "not the"
    changes = {"batch 32 / batch 16": "batch 32", "bf16 / float32": "bf16", "compiled / eager": "`torch.compile`"}
    faster = [
        (label, at) for name, label in changes.items() for at in (shallow, deep) if min(speed[at][name]["ratio"]) > 1
    ]
    if faster != [("`torch.compile`", deep)]:
        raise ValueError(f"the prose names `torch.compile` at {deep} blocks as the one faster change, not {faster}")
    eager_s = statistics.fmean(r["train_time_s"] for r in family["runs"] if r["layers"] == int(deep))
    compiled = speed[deep]["compiled / eager"]
    compiled_s = eager_s / statistics.median(compiled["ratio"]) + statistics.fmean(compiled["compile_s"])
    return [
        Fact("docs/reproduction.md", f"`{speed['command']}`"),
        Fact(
            "docs/reproduction.md",
            f"So two runs at a time is {layout} layout here, and of the changes only `torch.compile` at {deep} blocks "
            f"measured faster in every repeat: the committed runs are eager, and a compiled {deep}-block run would "
            f"take about {num(100 * (1 - compiled_s / eager_s), 0)}% less time, its compile included",
        ),
        Fact(
            "docs/reproduction.md",
            f"two processes of one thread make {ratios(threads, shallow)}× (at {shallow} blocks) and "
            f"{ratios(threads, deep)}× (at {deep}) the tokens per second of one process of two threads; batch 32 "
            f"{ratios('batch 32 / batch 16', shallow)}× and {ratios('batch 32 / batch 16', deep)}× batch 16's; bf16 "
            f"autocast {ratios('bf16 / float32', shallow)}× and {ratios('bf16 / float32', deep)}× float32's (this "
            f"host's bf16 GEMM peak is {num(peaks['bf16'] / peaks['float32'], 2)} of its float32 one); "
            f"`torch.compile` {ratios('compiled / eager', shallow)}× and {ratios('compiled / eager', deep)}× eager, "
            f"after {span(compile_s, 0)} s of compiling",
        ),
    ]


def depth_facts() -> list[Fact]:
    """The depth family's prose: run time, seed spread, the claims' figures and words, the init diagnostics."""
    result = reproduction(DEPTH)
    command = Fact("docs/reproduction.md", f"the committed results: `{result['command']}`")
    shallow, deep = map(str, result["depths"])
    runs, minutes = result["run_time"]["runs"], num(result["run_time"]["training_s"] / 60, 0)
    spread = [
        100 * abs(a - b) / statistics.fmean((a, b))
        for at in result["per_depth"].values()
        for row in at["table"].values()
        for a, b in [row["eval_loss_per_seed"]]
    ]
    better = [_depth_claim(result, f"{n} better at") for n in ("pre_ln", "sas", "sas_p")]
    means, per_seed = [c["change_pct_mean"] for c in better], [g for c in better for g in c["change_pct"]]
    direction = _higher(means + per_seed)  # one sign throughout, else the sentence needs rewording
    magnitude = [abs(m) for m in means]
    paid = (
        "Depth paid in both seeds for Pre-LN, SAS and SAS-P: they end"
        if direction == "lower"
        else "Pre-LN, SAS and SAS-P end"
    )
    per_block = [result["per_depth"][k]["table"] for k in (shallow, deep)]
    apart = all(
        max(per_block[1][n]["eval_loss_per_seed"]) < min(per_block[0][n]["eval_loss_per_seed"])
        for n in ("pre_ln", "sas", "sas_p")
    )
    vskip = _depth_claim(result, "value_skipinit worse at")
    grows = _depth_claim(result, "V-SkipInit's gap")
    gap_low, gap_high = (statistics.fmean(v) for v in grows["gap_pct"].values())
    across = [*better, vskip, grows]
    match = [
        _depth_claim(result, f"{n} within 2% of Pre-LN at equal steps at {k}")
        for k in (shallow, deep)
        for n in ("sas", "sas_p")
    ]
    ahead = [claim_gaps(c) for c in match]
    ratio = [
        result["per_depth"][shallow]["lrs"][n] / result["per_depth"][deep]["lrs"][n]
        for n in result["per_depth"][deep]["lrs"]
    ]
    spread_at = [[abs(a - b) for row in table.values() for a, b in [row["eval_loss_per_seed"]]] for table in per_block]
    wider = all(d > s for s, d in zip(*spread_at, strict=True))
    seed_1_above = all(b > a for row in per_block[1].values() for a, b in [row["eval_loss_per_seed"]])
    init = result["init_diagnostics"]
    pre_ln = {k: init[k]["pre_ln"] for k in (shallow, deep)}
    others = [init[k][n] for k in (shallow, deep) for n in ("sas", "sas_p", "value_skipinit")]
    jobs = result["run_time"]["jobs"]
    page = "docs/reproduction.md"
    return [
        command,
        Fact(page, f"its {runs} runs took {minutes} minutes of training (the sum of the runs' training times"),
        Fact(page, f"the two seeds of one block end up to {num(max(spread), 1)}% of their mean apart at its chosen lr"),
        Fact(
            page,
            f"{paid} {', '.join(num(m, 1) + '%' for m in magnitude[:2])} and {num(magnitude[2], 1)}% {direction} "
            f"at {deep} blocks than at {shallow} on the seed means ({span([abs(g) for g in per_seed], 1)}% per seed)"
            + f", each seed at {deep} blocks below both seeds at {shallow}" * apart
            + f". {_control(better[0])}",
        ),
        Fact(
            page,
            f"V-SkipInit ends {num(vskip['change_pct_mean'], 1)}% {_higher([vskip['change_pct_mean']])} at {deep} "
            f'blocks ({span(vskip["change_pct"], 1)}% per seed; "trains slower per update" when deeper: '
            f"{verdict_word(vskip['verdict'])}), and its gap to the other three grows from {signed(gap_low, 1)}% to "
            f"{signed(gap_high, 1)}% ({verdict_word(grows['verdict'])}). {_vskip_standing(vskip['versus'])}",
        ),
        Fact(
            page,
            "So Fig. 6's contrast "
            + ("holds in miniature" if all(c["held"] is True for c in across) else "does not hold in miniature")
            + ": the normalised Pre-LN and the shaped blocks gain from depth, V-SkipInit loses",
        ),
        Fact(
            page,
            f"SAS and SAS-P are ahead of Pre-LN by {span([-m for m, _ in ahead], 1)}% on the seed means "
            f"({span([-g for _, seeds in ahead for g in seeds], 1)}% per seed) at both depths, so within 2% "
            f"{_common([verdict_word(c['verdict']) for c in match])} at either depth",
        ),
        Fact(page, f"every variant's chosen lr is {span(ratio, 0)}× lower at {deep} blocks than at {shallow}"),
        Fact(
            page,
            f"The seeds differ {'more' if wider else 'not always more'} at {deep} blocks than at {shallow}"
            + ": seed 1 ends above seed 0 for every block there" * seed_1_above,
        ),
        Fact(
            page,
            f"Pre-LN's mean cosine similarity after the last block is {num(pre_ln[shallow]['token_cosine'][-1])} at "
            f"{shallow} blocks and {num(pre_ln[deep]['token_cosine'][-1])} at {deep}, and its effective rank falls "
            f"to {num(pre_ln[shallow]['effective_rank'][-1])} and {num(pre_ln[deep]['effective_rank'][-1])}",
        ),
        Fact(
            page,
            f"cosine {span([o['token_cosine'][-1] for o in others])}, effective rank "
            f"{span([o['effective_rank'][-1] for o in others])} after the last block at both depths",
        ),
        Fact(
            page,
            f"{runs} runs, {minutes} minutes of training, {'two' if jobs == 2 else jobs} runs at a time on "
            f"{result['environment']['cpu_count']} cores",
        ),
    ]


def raptr_facts() -> list[Fact]:
    raptr = reproduction("codeparrot-tiny")["raptr"]

    def gaps(key: str, sep: str) -> str:
        row = raptr[key]
        return f"{num(row['raptr_minus_full_mean'])}{sep}{' / '.join(num(d) for d in row['raptr_minus_full'])}"

    half = [run(name)["raptr"]["half_over_full_median"] for name in CURRENT_RUNS]
    shared_lr = lr_text(reproduction("codeparrot-tiny")["lrs"]["shared_lr"])
    seed0 = [num(raptr[k]["raptr_minus_full"][0]) for k in ("equal_steps", "same_schedule")]
    full = raptr["equal_steps"]["full_loss"]
    return [
        Fact("README.md", f"(pre_ln, 4×128, lr {shared_lr}, seeds 0 and 1) {raptr_lead()} of the full model"),
        Fact("README.md", f"at equal steps ({gaps('equal_steps', ' eval loss, per seed ')};"),
        Fact("README.md", f"at equal layer FLOPs ({gaps('equal_flops', '; ')};"),
        Fact("README.md", f"RaPTr's lr schedule ({gaps('same_schedule', '; ')};"),
        Fact("docs/raptr.md", f"a full step of the same model: {span(half)}× by run"),
        Fact("docs/raptr.md", f"at its swept lr ({shared_lr})"),
        Fact("docs/raptr.md", f"{raptr_lead()} in every setting and both seeds"),
        Fact("docs/raptr.md", f"RaPTr's lead in seed 0 shrinks from {seed0[0]} to {seed0[1]}"),
        Fact("docs/raptr.md", f"The two full-model seeds differ by {num(abs(full[1] - full[0]), 2)}"),
    ]


def speed_facts() -> list[Fact]:
    runs = [run(name) for name in CURRENT_RUNS]
    every = [*runs, *(run(name) for name in DECODE_RUNS)]
    run12, run14, run16 = run("run12"), run("run14"), run("run16")
    sas_p_bound = run16["train"]["sas_p"]["flop_bound_vs_pre_ln"]
    weights = run16["generate"]["batch_1"]
    byte_bound = weights["sas_p"]["weight_bound_vs_gpt2"]
    mfu = {m: [r["mfu"][m] for r in runs] for m in ("gpt2", "pre_ln", "sas_p")}
    loss = {m: [r["loss"][m] for r in runs] for m in ("pre_ln", "sas_p")}
    step = {m: [r["step_memory"][m]["peak_growth_MiB"] for r in runs] for m in ("gpt2", "pre_ln", "sas_p")}
    long = [r["memory"]["2048"] for r in runs]
    kv = {r["kv_cache"][m]["bytes_per_token"] / 1024 for r in runs for m in r["kv_cache"]}
    fused_saving = [
        100 * (1 - row["fused"]["peak_MiB"] / row["logits"]["peak_MiB"]) for rows in loss.values() for row in rows
    ]
    gemv = {(row["out"], row["in"]): row for row in json.loads((BENCHMARK / "gemv.json").read_text())["rows"]}
    rate = {
        name: gemv[shape]["linear_GBps"] / gemv[shape]["f_linear_GBps"]
        for name, shape in (
            ("QKV", (2304, 768)),
            ("MLP-in", (3072, 768)),
            ("head", (50257, 768)),
            ("MLP-out", (768, 3072)),
        )
    }
    before_after = json.loads((BENCHMARK / "attention_interface_before_after.json").read_text())["cases"]
    sas_p_train = by_run(SAS_P_TRAIN)
    llama = by_run(LLAMA_TRAIN)
    decode8 = [ratio(r["generate"]["batch_8"], "sas_p", "gpt2")["median"] / byte_bound for r in every]

    def profile(row: dict[str, Any]) -> tuple[float, float, int]:
        """A profile's matmul time (`mm` + `addmm_`), the rest, and the calls of `aten::mul`."""
        ops = {e["op"]: e for e in row["top"]}
        matmul = ops["aten::mm"]["self_ms"] + ops["aten::addmm_"]["self_ms"]
        return matmul, row["total_self_ms"] - matmul, ops["aten::mul"]["calls"]

    pre_ln_profile, sas_p_profile = profile(run12["profile"]["pre_ln"]), profile(run12["profile"]["sas_p"])

    def gemm_alone(row: dict[str, Any]) -> str:
        return (
            f"{num(row['gemm_gflop'], 1)} GFLOP in {num(row['gemm_time_alone_s'])} s "
            f"({row['gemm_gflop'] / row['gemm_time_alone_s']:.0f} GFLOP/s; peak {num(row['peak_gflops'], 1)}) of a "
            f"{num(row['step_median_s'])} s step"
        )

    page = "docs/speed.md"
    return [
        Fact(
            page,
            f"runs 9–12 had a GEMM peak of {span(peaks(FAST_HOST_RUNS), 0)} GFLOP/s, runs 13–16 (the current "
            f"figures) {span(peaks(CURRENT_RUNS), 0)} (`mfu`)",
        ),
        Fact(page, f"give sas_p / pre_ln {', '.join(num(x) for x in by_run(SAS_P_TRAIN, FAST_HOST_RUNS))}"),
        Fact(
            page,
            f"{num(run16['train']['gpt2']['matmul_flops_per_token'] / 1e6, 1)} MFLOP a token for GPT-2, Llama and "
            f"every block with values and projections, {num(run16['train']['sas_p']['matmul_flops_per_token'] / 1e6, 1)} "
            f"for sas, sas_p and simplest (`run16.json`); the bound is **1.000** or **{num(sas_p_bound)}**",
        ),
        Fact(
            page,
            f"{num(weights['gpt2']['gemm_weights'] / 1e6, 1)}M for GPT-2 and pre_ln, "
            f"{num(weights['sas_p']['gemm_weights'] / 1e6, 1)}M for sas_p",
        ),
        Fact(page, f"**1.000** for pre_ln / GPT-2 and **{num(byte_bound)}** for sas_p / GPT-2"),
        Fact(page, f"on hosts with a GEMM peak of {span(peaks(CURRENT_RUNS), 0)} GFLOP/s (`mfu`)"),
        Fact(page, f"Runs 13 and 14 ran at commit {runs[0]['meta']['commit']}"),
        Fact(page, f"runs 15 and 16 at {_common([r['meta']['commit'] for r in runs[2:]])}"),
        Fact(
            page,
            "pre_ln's step: "
            + ", ".join(num(r["train"]["pre_ln"]["median_s"]) for r in runs[:-1])
            + f" and {num(runs[-1]['train']['pre_ln']['median_s'])} s "
            f"({span([r['train']['pre_ln']['tokens_per_s'] for r in runs], 0)} tokens/s), about twice run 12's "
            f"{num(run12['train']['pre_ln']['median_s'])} s",
        ),
        Fact(
            page,
            f"GPT-2 {span([100 * x['mfu'] for x in mfu['gpt2']], 1)}%, pre_ln "
            f"{span([100 * x['mfu'] for x in mfu['pre_ln']], 1)}%, sas_p {span([100 * x['mfu'] for x in mfu['sas_p']], 1)}% "
            "(GEMM-time shares "
            + ", ".join(f"{span([100 * x['gemm_time_share'] for x in mfu[m]], 0)}%" for m in mfu)
            + ")",
        ),
        Fact(
            page,
            f"(pre_ln / GPT-2 {span(by_run(GPT2_TRAIN, FAST_HOST_RUNS))} there, {span(by_run(GPT2_TRAIN))} here; `pre_ln_llama` / "
            f"Llama {span(by_run(LLAMA_TRAIN, FAST_HOST_RUNS))} there, {span(llama)} here)",
        ),
        Fact(
            page,
            f"peaks at {_common([num(r['fused']['peak_MiB'], 0) for r in loss['pre_ln']])} MiB (pre_ln) and "
            f"{_common([num(r['fused']['peak_MiB'], 0) for r in loss['sas_p']])} MiB (sas_p) with the fused LM head + "
            f"loss, −{_common([f'{x:.0f}' for x in fused_saving])}% against the logits path of the same runs "
            f"({_common([num(r['logits']['peak_MiB'], 0) for r in loss['pre_ln']])}, "
            f"{_common([num(r['logits']['peak_MiB'], 0) for r in loss['sas_p']])} MiB)",
        ),
        Fact(
            page,
            f"a step grows the resident set by {span(step['pre_ln'], 0)} MiB (pre_ln) and "
            f"{span(step['sas_p'], 0)} MiB (sas_p) against {span(step['gpt2'], 0)} MiB for `GPT2LMHeadModel` in the "
            f"same run ({span([r['step_memory']['pre_ln']['vs_gpt2'] for r in runs], 2)}×)",
        ),
        Fact(page, f"Decoding keeps {num(_common(list(kv)), 1)} KiB of KV cache per token for every block type"),
        Fact(
            page,
            f"grows by {span([x['sdpa_MiB'] for x in long], 0)} MiB through sdpa against "
            f"{span([x['eager_MiB'] for x in long], 0)} MiB for an eager T×T reference "
            f"({span([x['eager_over_sdpa'] for x in long], 1)}×)",
        ),
        Fact(
            page,
            f"at commit {_common([run(n)['meta']['commit'] for n in DECODE_RUNS])}, whose model code is that of "
            f"{runs[0]['meta']['commit']}",
        ),
        Fact(
            page,
            f"({span([r['generate']['batch_1']['gpt2']['tokens_per_s'] for r in every], 1)} tokens/s at batch 1, "
            f"{span([r['generate']['batch_8']['gpt2']['tokens_per_s'] for r in every], 1)} at batch 8)",
        ),
        Fact(
            page,
            f"streams the weights at {span([r['linear_GBps'] for r in gemv.values()], 0)} GB/s where the "
            f"matrix-vector product `F.linear` takes gets {span([r['f_linear_GBps'] for r in gemv.values()], 0)}",
        ),
        Fact(
            page,
            f"{num(rate['QKV'], 1)}× for the QKV matrix, {num(rate['MLP-in'], 1)}× for MLP-in, "
            f"{num(rate['head'], 1)}× for the tied head, {num(rate['MLP-out'], 1)}× for MLP-out",
        ),
        Fact(page, f"sas_p's ratio sits at {span(decode8, 2)}× its bound by the runs' medians"),
        Fact(
            page,
            f"sas_p gains less than its {100 * (1 - weights['sas_p']['gemm_weights'] / weights['gpt2']['gemm_weights']):.0f}% "
            "fewer weight bytes",
        ),
        Fact(
            page,
            f"had cost `generate` {span([c['ratio_median'] for k, c in before_after.items() if k.startswith('generate')], 2)}× "
            "its speed",
        ),
        Fact(
            page,
            f"`pre_ln_llama` / Llama is below 1.0 in runs 13 and 14 ({num(llama[0])}, {num(llama[1])}) and above "
            f"in 15 and 16 ({num(llama[2])}, {num(llama[3])}); sas_p / pre_ln at {num(sas_p_train[1])} in run 14 is "
            f"{num(sas_p_train[1] / sas_p_bound, 2)} of its bound",
        ),
        Fact(page, f"({span(by_run(GPT2_TRAIN, FAST_HOST_RUNS))} in runs 9–12 on such a host"),
        Fact(page, f"{gemm_alone(run14['mfu']['pre_ln'])} on run 14's host"),
        Fact(
            page,
            gemm_alone(run12["mfu"]["pre_ln"]).replace(f"{num(run12['mfu']['pre_ln']['gemm_gflop'], 1)} GFLOP in ", "")
            + " on run 12's",
        ),
        Fact(
            page,
            f"`mm` + `addmm_` take {pre_ln_profile[0]:.0f} ms in pre_ln and {sas_p_profile[0]:.0f} ms in sas_p "
            f"({num(pre_ln_profile[0] / sas_p_profile[0])}), the other ops {pre_ln_profile[1]:.0f} against "
            f"{sas_p_profile[1]:.0f} ms ({num(pre_ln_profile[1] / sas_p_profile[1])})",
        ),
        Fact(page, f"`aten::mul` {sas_p_profile[2]} calls against {pre_ln_profile[2]}"),
        Fact(
            page,
            f"The counted threshold, {SAS_P_TRAIN.fraction:g} × {num(sas_p_bound)} = "
            f"{num(SAS_P_TRAIN.fraction * sas_p_bound)}, lies inside one run's noise (run 14's "
            f"{num(sas_p_train[1])} is below it, the pooled median meets it)",
        ),
        Fact(
            page,
            f"`torch.compile`, which fuses it, gives {span([ratio(r['compile'], 'sas_p', 'pre_ln')['median'] for r in runs])} "
            "in runs 13–16",
        ),
        Fact(
            page,
            f"(bound 1.000; {' and '.join(num(x) for x in by_run(GPT2_TRAIN, FAST_HOST_RUNS)[2:])} in runs 11–12, "
            f"{span(by_run(GPT2_TRAIN))} in runs 13–16)",
        ),
        Fact(
            page,
            f"GPT-2 spends {num(run12['mfu']['gpt2']['step_median_s'] - run12['mfu']['gpt2']['gemm_time_alone_s'], 2)} s "
            f"of its {num(run12['mfu']['gpt2']['step_median_s'])} s step outside its GEMMs "
            f"({num(run12['mfu']['gpt2']['gemm_time_alone_s'])} s timed alone), pre_ln "
            f"{num(run12['mfu']['pre_ln']['step_median_s'] - run12['mfu']['pre_ln']['gemm_time_alone_s'], 2)} s",
        ),
        Fact(
            page,
            f"({span([r['fused_speedup']['ratio_median'] for r in loss['pre_ln']])}× on our own pre_ln in runs "
            "13–16, `loss`)",
        ),
        Fact(
            page,
            f"at batch 1 reads every GEMM weight once per token, at {span([r['linear_GBps'] for r in gemv.values()], 0)} GB/s",
        ),
        Fact(page, f"**sas_p against {num(sas_p_bound)}.**"),
        Fact(
            page,
            f"Our pre_ln / GPT-2 ≥ {GPT2_TRAIN.bound({}):g} is counted only on a host with a GEMM peak of "
            f"{targets.FAST_HOST_GFLOPS:.0f} GFLOP/s or more",
        ),
        Fact(
            page,
            f"Runs 13 and 14 ran at commit {runs[0]['meta']['commit']} ({runs[0]['meta']['date'][:10]}/"
            f"{runs[1]['meta']['finished'][8:10]}), runs 15 and 16 at {runs[2]['meta']['commit']} "
            f"({_common([r['meta']['date'][:10] for r in runs[2:]])})",
        ),
        Fact(
            "README.md",
            "of the same shape ({layers}×{width}, vocab {vocab}, batch {batch} × {seq}, float32, ".format(
                **json.loads(_common([json.dumps(r["meta"]["shape"], sort_keys=True) for r in runs]))
            )
            + f"{_common([r['meta']['machine'].split(', ')[1].split()[0] for r in runs])} shared CPU cores)",
        ),
        Fact("README.md", f"Pooled over the {COUNTS[len(runs)]} full runs of the current code"),
        Fact(
            "README.md",
            f"The fused LM head + loss takes {_common([f'{x:.0f}' for x in fused_saving])}% off a training "
            f"step's peak memory ({_common([num(r['fused']['peak_MiB'], 0) for r in loss['pre_ln']])} against "
            f"{_common([num(r['logits']['peak_MiB'], 0) for r in loss['pre_ln']])} MiB for pre_ln)",
        ),
        Fact(
            "README.md",
            f"a step grows the resident set by {span([r['step_memory']['pre_ln']['vs_gpt2'] for r in runs], 2)}× "
            "GPT-2's",
        ),
        Fact("README.md", f"the KV cache is {_common(list(kv)):.0f} KiB per token for every block type"),
        Fact(
            "docs/training.md",
            "real tokens/s of the packed row over the padded batch, by run: "
            f"{span([r['packing']['pre_ln']['packed_over_padded']['ratio_median'] for r in runs], 2)}× for pre_ln, "
            f"{span([r['packing']['sas_p']['packed_over_padded']['ratio_median'] for r in runs], 2)}× for sas_p",
        ),
        Fact(
            "docs/training.md",
            f"the padded batch wastes "
            f"{100 * (1 - run16['packing']['tokens'] / run16['packing']['padded_tokens']):.0f}% of its tokens",
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.doc_figures", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 naming every problem")
    parser.add_argument(
        "--mutations",
        action="store_true",
        help="change each checked number, verdict and comparison word in turn; exit 1 if the check misses one",
    )
    args = parser.parse_args(argv)
    if not args.check and not args.mutations:
        for page in PAGES:
            path = REPO / page
            text = path.read_text()
            if regenerate(text) != text:
                path.write_text(regenerate(text))
                print(f"{page}: generated blocks rewritten")
    check = Check()
    problems = [problem for page in PAGES for problem in check.problems(page)]
    print("\n".join(map(str, problems)))
    if args.mutations:
        total, missed = check.mutations()
        for m in missed:
            print(f"{m.page}: the check misses {m.kind} {m.old!r} → {m.new!r} at …{m.context}…")
        print(f"mutations caught: {total - len(missed)} of {total}")
        return 1 if problems or missed else 0
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
