"""The reproduction's report, from `results.json` alone: `results.md` (the lr sweep, the table, the claims, kurtosis,
signal propagation, RaPTr) and the plots. `python -m experiments.reproduce.report docs/reproduction/<family>`
rewrites them from the folder's `results.json`."""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from . import analysis, depth
from .analysis import FRACTIONS, GAIN_KEYS

#: the two comparisons of every table and claim: each variant at its own best lr, and every variant at Pre-LN's
SETTINGS = ("best_lr", "shared_lr")
SETTING_TITLES = {
    "best_lr": lambda result: (
        "each variant at its preset's lr (no sweep)"
        if result["lrs"].get("from") == "preset"
        else "each variant at its best lr (its sweep's choice)"
    ),
    "shared_lr": lambda result: (
        f"every variant at Pre-LN's lr, {result['lrs']['shared_lr']:g} (App. D.1 found the best lr of SAS and SAS-P "
        "equal to Pre-LN's)"
    ),
}


def setting_records(result: dict[str, Any], setting: str) -> list[dict[str, Any]]:
    """The runs of one setting: each variant at its lr in that setting, in the table's order."""
    lrs = result["lrs"][setting]
    table = result["settings"][setting]["table"]
    lr_of = lambda name: lrs[name] if isinstance(lrs, dict) else lrs  # noqa: E731
    return [r for name in table for r in result["runs"] if r["block"] == name and r["learning_rate"] == lr_of(name)]


def _fmt(pair: tuple[float, float], digits: int = 4) -> str:
    mean, std = pair
    return f"{mean:.{digits}f}" + (f" ± {std:.{digits}f}" if std else "")


def _seeds(values: list[float], digits: int = 4) -> str:
    return ", ".join(f"{v:.{digits}f}" for v in values)


def _sweep_lines(result: dict[str, Any]) -> list[str]:
    sweep = result["lr_sweep"]
    if not sweep:
        return []
    grid = sorted({p["lr"] for row in sweep.values() for p in row["points"]})
    seed = next(iter(sweep.values()))["criterion_seed"]
    lines = [
        f"## Learning-rate sweep (selection: {result['criterion']})",
        "",
        f"Training loss at the end, seed {seed}, per maximum lr (**bold**: the chosen lr; `-`: not tried; in "
        "parentheses: a run at Pre-LN's lr outside the variant's sweep, not a candidate). A sweep grows past "
        "whichever end holds its best lr until a smaller and a larger lr are both no better (bracketed).",
        "",
        "| variant | " + " | ".join(f"lr {lr:g}" for lr in grid) + " | chosen | bracketed |",
        "|---|" + "---|" * (len(grid) + 2),
    ]
    for name, row in sweep.items():
        points = {p["lr"]: p for p in row["points"]}
        cells = []
        for lr in grid:
            value = points[lr]["train_loss_end"].get(str(seed)) if lr in points else None
            cell = "-" if value is None else ("diverged" if not math.isfinite(value) else f"{value:.4f}")
            if value is not None and not points[lr]["swept"]:
                cell = f"({cell})"
            cells.append(f"**{cell}**" if lr == row["chosen"] else cell)
        lines.append(
            f"| {name} | " + " | ".join(cells) + f" | {row['chosen']:g} | {'yes' if row['bracketed'] else 'NO'} |"
        )
    multi = [
        f"{name} at {p['lr']:g}: "
        + ", ".join(f"seed {k} {v:.4f} / {p['eval_loss'][k]:.4f}" for k, v in p["train_loss_end"].items())
        for name, row in sweep.items()
        for p in row["points"]
        if len(p["train_loss_end"]) > 1
    ]
    if multi:
        lines += ["", "Points with several seeds (training loss at the end / final eval loss):", ""]
        lines += [f"- {line}" for line in multi]
    return lines + [""]


def _timing_lines(result: dict[str, Any]) -> list[str]:
    timing = result.get("timing")
    if not timing:
        return ["## Step time", "", "Not measured (`--timing-rounds 0`): no claim at equal time is checked.", ""]
    lines = [
        "## Step time, measured (the time axis)",
        "",
        f"Each variant's training step (forward, backward, clipping, fused AdamW; no data loading, no evaluation) at "
        f"this shape, batch {timing['batch']} × {timing['seq']}: every model in its own process, {timing['warmup']} "
        f"warm-up steps, then {timing['rounds']} rounds of one step each, round-robin with the order rotating, "
        f"{timing['threads']} torch threads, nothing else training (as `make bench` times the paper shape). The "
        "loss-vs-time curves and the claims at equal time put each evaluation at its step × the median step time.",
        "",
        "| variant | parameters | median step s | min s | spread | speed vs pre_ln: median (range) |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in timing["variants"].items():
        v = r["speed_vs_pre_ln"]
        lines.append(
            f"| {name} | {r['params']:,} | {r['seconds_per_step']:.4f} | {r['min_s']:.4f} | {100 * r['spread']:.0f}% "
            f"| {v['ratio_median']:.3f} ({v['ratio_low']:.3f}-{v['ratio_high']:.3f}) |"
        )
    return lines + [""]


def _span(low: float, high: float) -> str:
    return f"{low:.2f}" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}–{high:.2f}"


def _epochs_sentence(records: list[dict[str, Any]]) -> str:
    epochs = [r["epochs"] for r in records if "epochs" in r]
    if not epochs:
        return ""
    return (
        f" Each run passes over its training data {_span(min(epochs), max(epochs))} times (the paper's runs: "
        'once, "a single epoch regime with minimal generalisation gap", §4).'
    )


def _setting_lines(result: dict[str, Any], setting: str) -> list[str]:
    table = result["settings"][setting]["table"]
    loss = "eval loss" if result["task"] == "causal-lm" else "MLM eval loss"
    cols = [f"{loss} @{int(f * 100)}%" for f in FRACTIONS]
    lines = [
        f"## {SETTING_TITLES[setting](result)[0].upper()}{SETTING_TITLES[setting](result)[1:]}",
        "",
        f"Seeds: {sorted({s for row in table.values() for s in row['seeds']})} (mean ± sample std over seeds; the "
        "final eval loss of each seed in brackets). Training loss at the end: the selection criterion. Gap: final "
        "eval loss − training loss at the end (the generalisation gap), mean and per seed."
        + _epochs_sentence(setting_records(result, setting)),
        "",
        "| variant | lr | parameters | " + " | ".join(cols) + " | training loss at the end | gap (per seed) |",
        "|---|---|---|" + "---|" * len(cols) + "---|---|",
    ]
    for name, row in table.items():
        losses = [_fmt(row[f"eval_loss@{int(f * 100)}%"]) for f in FRACTIONS]
        losses[-1] += f" [{_seeds(row['eval_loss_per_seed'])}]"
        lines.append(
            f"| {name} | {row['learning_rate']:g} | {row['parameters']:,} | {' | '.join(losses)} | "
            f"{_fmt(row['train_loss_end'])} | {_fmt(row['generalisation_gap'], 3)} ({_seeds(row['gap_per_seed'], 3)}) |"
        )
    lines += ["", "Claims (computed from this table; the paper's sentence after each):", ""]
    for v in result["settings"][setting]["claims"]:
        lines.append(f"- {v['claim']}: **{v['verdict']}** — {v['numbers']}. Paper: {v['source']}")
    return lines + [""]


def markdown(result: dict[str, Any]) -> str:
    lines = [f"Command: `{result['command']}`", "", f"Preset family `{result['preset']}` ({result['task']}).", ""]
    env = result.get("environment")
    if env:
        lines += [
            f"Computed at commit `{env['commit']}` with Python {env['python']} (whose stdlib is the embedded corpus), "
            f"torch {env['torch']}, transformers {env['transformers']}, on {env['cpu']} ({env['cpu_count']} CPUs).",
            "",
        ]
    lines += _sweep_lines(result)
    lines += _timing_lines(result)
    for setting in SETTINGS:
        lines += _setting_lines(result, setting)
    records = setting_records(result, "best_lr")
    layers = max(len(r["kurtosis"]) for r in records)
    lines += [
        "## Activation kurtosis per layer at the end (best lr, seed mean)",
        "",
        "| variant | " + " | ".join(f"L{i}" for i in range(layers)) + " |",
        "|---|" + "---|" * layers,
    ]
    for name in result["settings"]["best_lr"]["table"]:
        ks = [r["kurtosis"] for r in records if r["block"] == name]
        lines.append(
            f"| {name} | " + " | ".join(f"{statistics.fmean(k[i] for k in ks):.2f}" for i in range(len(ks[0]))) + " |"
        )
    signal = result["signal_propagation"]
    if signal:
        layers = max(len(row["init"]) for row in signal.values())
        lines += [
            "",
            "## Signal propagation: mean cosine similarity of the token representations per layer (best lr, seed mean)",
            "",
            "Near 1: every token carries the same representation (rank collapse). First evaluation batch; at "
            "initialisation / at the end of training.",
            "",
            "| variant | " + " | ".join(f"L{i}" for i in range(layers)) + " |",
            "|---|" + "---|" * layers,
        ]
        for name, row in signal.items():
            cells = " | ".join(f"{a:.3f} / {b:.3f}" for a, b in zip(row["init"], row["end"]))
            lines.append(f"| {name} | {cells} |")
    if result["raptr"]:
        lines += ["", "## RaPTr against the full model (pre_ln, Pre-LN's lr; final eval loss per seed)", ""]
        for comparison, row in result["raptr"].items():
            pairs = ", ".join(
                f"seed {s}: {f:.4f} → {r:.4f} ({d:+.4f})"
                for s, f, r, d in zip(row["seeds"], row["full_loss"], row["raptr_loss"], row["raptr_minus_full"])
            )
            flops = ", ".join(f"{x:.3f}" for x in row["realised_relative_flops"] if x is not None)
            lines.append(
                f"- {comparison.replace('_', ' ')} ({row['steps']['full']} full-model steps, {row['steps']['raptr']} "
                f"RaPTr steps; realised relative layer FLOPs {flops}): the paper, {row['paper']}. Measured, full → "
                f"RaPTr: {pairs}; mean {row['raptr_minus_full_mean']:+.4f}: **{row['verdict']}**."
            )
    lines += _finetune_lines(result.get("finetune") or {})
    lines += [
        "",
        "Plots: `lr_sweep.png`, `loss_vs_step.png`, `loss_vs_time.png` (both settings), `gains.png` (shaped-attention "
        "α, β, γ per layer, mean over heads, and βFF), `kurtosis.png`, `signal_propagation.png`.",
        "",
    ]
    return "\n".join(lines)


def _finetune_lines(finetune: dict[str, Any]) -> list[str]:
    if not finetune:
        return []
    examples = next(iter(finetune["table"].values()))["eval_examples"]
    lines = [
        "",
        f"## Fine-tuning on {finetune['task'].upper()} (a real labelled data set, not GLUE)",
        "",
        f"Data: {finetune['data']}. Recipe: {finetune['recipe']}. Every variant's pretrained runs at its best lr, "
        "each seed fine-tuned with the same seed; `pre_ln_from_scratch` is the control: pre_ln's architecture and "
        f"tokenizer, no pre-training, the same recipe. Validation accuracy ({examples} sentences) after the last "
        "epoch, mean ± sample std [per seed].",
        "",
        "| variant | accuracy % | final eval loss (per seed) |",
        "|---|---|---|",
    ]
    for name, row in finetune["table"].items():
        lines.append(
            f"| {name} | {_fmt(row['accuracy'], 2)} [{_seeds(row['accuracy_per_seed'], 2)}] | "
            f"{_seeds(row['eval_loss_per_seed'])} |"
        )
    majority = next(iter(finetune["table"].values()))["majority_baseline"]
    lines += ["", f"Majority class: {majority:.2f}%."]
    helped = finetune["pretraining_helped"]
    if helped:
        gains = ", ".join(
            f"seed {s}: {g:+.2f} ± {analysis.Z * e:.2f}"
            for s, g, e in zip(helped["seeds"], helped["pre_ln_minus_from_scratch"], helped["standard_error"])
        )
        lines.append(
            f"Pre-training {'beat' if helped['on_every_seed'] else 'did not beat'} the control significantly on "
            f"every seed (pre_ln − control, accuracy points ± {analysis.Z:g} standard errors: {gains})."
        )
    lines += [
        "",
        f"Claims (a difference is significant beyond ± {analysis.Z:g} standard errors of two accuracies on "
        f"{examples} sentences, taken as independent: conservative, as both models see the same sentences):",
        "",
    ]
    for c in finetune["claims"]:
        lines.append(f"- {c['claim']}: **{c['verdict']}** — {c['numbers']}. Paper: {c['source']}")
    return lines


def _figure(width: float = 7.0, height: float = 4.5):
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def plot_losses(result: dict[str, Any], out: Path, per_time: bool) -> Path:
    """Eval loss (mean over seeds, band = min..max) of every variant against the step or the measured training
    time (step × the measured median step time), at each variant's best lr (left) and at Pre-LN's (right)."""
    fig = _figure(13.0, 4.5)
    timing = (result.get("timing") or {}).get("variants", {})
    for col, setting in enumerate(SETTINGS):
        ax = fig.add_subplot(1, 2, col + 1)
        records = setting_records(result, setting)
        for i, name in enumerate(dict.fromkeys(r["block"] for r in records)):
            runs = [r for r in records if r["block"] == name]
            steps = sorted(int(s) for s in runs[0]["eval_loss"])
            if per_time and name not in timing:
                continue
            scale = timing[name]["seconds_per_step"] if per_time else 1.0
            xs = [s * scale for s in steps]
            values = [[r["eval_loss"][str(s)] for r in runs] for s in steps]
            color = f"C{i}"
            ax.plot(xs, [statistics.fmean(v) for v in values], "o-", color=color, label=name, markersize=2)
            if len(runs) > 1:
                ax.fill_between(xs, [min(v) for v in values], [max(v) for v in values], color=color, alpha=0.2)
        ax.set_xlabel("training time (s): step × measured step time" if per_time else "step")
        ax.set_ylabel("eval loss" if result["task"] == "causal-lm" else "MLM eval loss")
        ax.set_title(SETTING_TITLES[setting](result), fontsize=9)
        # cut the first evaluations' plateau, but keep every variant's final losses in view (the ablation's too)
        finite = [v for r in records for v in r["eval_loss"].values() if math.isfinite(v)]
        finals = [analysis.final_eval_loss(r) for r in records]
        finals = [v for v in finals if math.isfinite(v)] or finite
        ax.set_ylim(top=min(ax.get_ylim()[1], max(1.3 * min(finite) + 1.0, max(finals) + 0.5)))
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=7)
    fig.tight_layout()
    path = out / ("loss_vs_time.png" if per_time else "loss_vs_step.png")
    fig.savefig(path, format="png")
    return path


def plot_sweep(result: dict[str, Any], out: Path) -> Path:
    """Training loss at the end (the selection criterion, first seed) against the lr, per variant; the chosen lr
    marked."""
    fig = _figure()
    ax = fig.add_subplot()
    for i, (name, row) in enumerate(result["lr_sweep"].items()):
        seed = str(row["criterion_seed"])
        points = [(p["lr"], p["train_loss_end"][seed]) for p in row["points"] if seed in p["train_loss_end"]]
        xs = [lr for lr, v in points if math.isfinite(v)]
        ys = [v for lr, v in points if math.isfinite(v)]
        ax.plot(xs, ys, "o-", color=f"C{i}", label=name, markersize=3)
        chosen = dict(points)[row["chosen"]]
        if math.isfinite(chosen):
            ax.plot([row["chosen"]], [chosen], "*", color=f"C{i}", markersize=12)
    ax.set_xscale("log")
    ax.set_xlabel("maximum learning rate")
    seed = next(iter(result["lr_sweep"].values()))["criterion_seed"]
    ax.set_ylabel(f"training loss at the end (seed {seed})")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = out / "lr_sweep.png"
    fig.savefig(path, format="png")
    return path


def plot_gains(records, out: Path) -> Path:
    """Seed-0 (first seed) trajectories of α, β, γ (mean over heads) and βFF per layer, one row per block type."""
    first = {}
    for r in records:
        first.setdefault(r["block"], r)
    rows = [r for r in first.values() if r["gains"]]
    fig = _figure(12.0, 2.4 * max(1, len(rows)))
    for row, r in enumerate(rows):
        for col, key in enumerate(GAIN_KEYS):
            ax = fig.add_subplot(max(1, len(rows)), len(GAIN_KEYS), row * len(GAIN_KEYS) + col + 1)
            for name, points in sorted(r["gains"].items()):
                if name.endswith("/" + key):
                    ax.plot(*zip(*points), label=name.split("/")[0], linewidth=1)
            ax.set_title(f"{r['block']}: {key.removesuffix('_mean')}", fontsize=8)
            ax.tick_params(labelsize=7)
            if ax.lines and row == 0 and col == 0:
                ax.legend(fontsize=6)
    fig.tight_layout()
    path = out / "gains.png"
    fig.savefig(path, format="png")
    return path


def plot_signal_propagation(signal: dict[str, dict[str, list[float]]], out: Path) -> Path:
    """Mean cosine similarity of the token representations per layer, at initialisation and at the end."""
    fig = _figure(10.0, 4.0)
    for col, when in enumerate(("init", "end")):
        ax = fig.add_subplot(1, 2, col + 1)
        for i, (name, row) in enumerate(signal.items()):
            ax.plot(range(len(row[when])), row[when], "o-", color=f"C{i}", label=name, markersize=3)
        ax.set_title("at initialisation" if when == "init" else "at the end of training", fontsize=9)
        ax.set_xlabel("layer")
        ax.set_ylabel("mean cosine similarity of tokens")
        ax.set_ylim(-0.05, 1.05)
        ax.grid(alpha=0.3)
        if col == 0:
            ax.legend(fontsize=7)
    fig.tight_layout()
    path = out / "signal_propagation.png"
    fig.savefig(path, format="png")
    return path


def plot_kurtosis(records, out: Path) -> Path:
    fig = _figure()
    ax = fig.add_subplot()
    for i, name in enumerate(dict.fromkeys(r["block"] for r in records)):
        ks = [r["kurtosis"] for r in records if r["block"] == name]
        ax.plot(
            range(len(ks[0])),
            [statistics.fmean(k[j] for k in ks) for j in range(len(ks[0]))],
            "o-",
            color=f"C{i}",
            label=name,
        )
    ax.set_xlabel("layer")
    ax.set_ylabel("activation kurtosis (end of training)")
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = out / "kurtosis.png"
    fig.savefig(path, format="png")
    return path


def write_report(result: dict[str, Any], out: Path) -> None:
    """`results.md` and the plots of a result (what `results.json` holds) into `out`."""
    if result.get("family") == "depth":
        write_depth_report(result, out)
        return
    (out / "results.md").write_text(markdown(result))
    best = setting_records(result, "best_lr")
    if result["signal_propagation"]:
        plot_signal_propagation(result["signal_propagation"], out)
    if result["lr_sweep"]:
        plot_sweep(result, out)
    plot_losses(result, out, per_time=False)
    plot_losses(result, out, per_time=True)
    plot_gains(best, out)
    plot_kurtosis(best, out)


# -- the depth family ------------------------------------------------------------------------------------------------------
def depth_markdown(result: dict[str, Any]) -> str:
    shape = result["shape"]
    env = result["environment"]
    lines = [
        f"Command: `{result['command']}`",
        "",
        f"Preset family `{result['preset']}`: depths {' and '.join(map(str, result['depths']))}, d={shape['hidden_size']}, "
        f"{shape['heads']} heads, MLP {shape['intermediate_size']} (2d), seq {shape['seq_len']}, batch {shape['batch']}, "
        f"{result['steps']} steps, seeds {result['seeds']}; βFF init "
        + ", ".join(f"{v:g} at {k} blocks" for k, v in result["beta_ff_init"].items())
        + ".",
        "",
        f"Computed at commit `{env['commit']}` with Python {env['python']}, torch {env['torch']}, transformers "
        f"{env['transformers']}, on {env['cpu']} ({env['cpu_count']} CPUs), {', '.join(map(str, result['run_time']['torch_threads']))} "
        f"torch thread(s). Training time of all {result['run_time']['runs']} runs: "
        f"{result['run_time']['training_s'] / 60:.1f} min (the sum of the runs' training time, evaluations included).",
        "",
    ]
    for layers, at in result["per_depth"].items():
        sweep = _sweep_lines({"lr_sweep": at["lr_sweep"], "criterion": result["criterion"]})
        lines += [f"# {layers} blocks", "", *(("#" + line) if line.startswith("## ") else line for line in sweep)]
        lines += [
            "| variant | lr | parameters | final eval loss (per seed) |",
            "|---|---|---|---|",
        ]
        for name, row in at["table"].items():
            mean, std = row["eval_loss@100%"]
            seeds = ", ".join(f"{v:.4f}" for v in row["eval_loss_per_seed"])
            lines.append(
                f"| {name} | {row['learning_rate']:g} | {row['parameters']:,} | {mean:.4f} ± {std:.4f} ({seeds}) |"
            )
        lines.append("")
    lines += ["# Claims", "", f"Near-indistinguishable: final eval losses within {100 * depth.MATCH:g}%."]
    if "levels" in result:
        lines.append(
            "Eval loss of a model that learns nothing of context: chance (uniform) "
            f"{result['levels']['chance']:.3f}, unigram {result['levels']['unigram']:.3f}."
        )
    lines.append("")
    for c in result["claims"]:
        setting = f" Setting: {depth.regime_text(c['regime'])}." if "regime" in c else ""
        lines.append(f"- {c['claim']}: **{c['verdict']}** — {c['numbers']}.{setting} Paper: {c['source']}")
    lines += [
        "",
        "# Signal propagation at initialisation",
        "",
        "After the last block, on the first evaluation batch: the tokens' mean cosine similarity (1: rank collapse) "
        "and normalised effective rank (1/min(n, d): rank collapse); mean over seeds (per seed).",
        "",
        "| variant | "
        + " | ".join(f"{k} blocks: cosine | {k} blocks: eff. rank" for k in result["init_diagnostics"])
        + " |",
        "|---|" + "---|---|" * len(result["init_diagnostics"]),
    ]
    names = list(next(iter(result["init_diagnostics"].values())))
    for name in names:
        cells = []
        for at in result["init_diagnostics"].values():
            row = at[name]
            for key in ("token_cosine", "effective_rank"):
                cells.append(f"{row[key][-1]:.3f} ({', '.join(f'{v:.3f}' for v in row[f'{key}_last_per_seed'])})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "Plots: `loss_vs_step.png`, `lr_sweep.png`, `init_signal_propagation.png`.", ""]
    return "\n".join(lines)


def plot_depth_losses(result: dict[str, Any], out: Path) -> Path:
    """Eval loss (mean over seeds) against the step at each depth's chosen lr: solid shallow, dashed deep (Fig. 6)."""
    fig = _figure()
    ax = fig.add_subplot()
    names = list(next(iter(result["per_depth"].values()))["table"])
    for k, (layers, at) in enumerate(result["per_depth"].items()):
        for i, name in enumerate(names):
            runs = [r for r in result["runs"] if r["block"] == name and r["layers"] == int(layers)]
            runs = [r for r in runs if r["learning_rate"] == at["table"][name]["learning_rate"]]
            steps = sorted(int(s) for s in runs[0]["eval_loss"])
            ys = [statistics.fmean(r["eval_loss"][str(s)] for r in runs) for s in steps]
            style = "-" if k == 0 else "--"
            ax.plot(steps, ys, style, color=f"C{i}", label=f"{name}, {layers} blocks")
    finals = [
        v for at in result["per_depth"].values() for row in at["table"].values() for v in row["eval_loss_per_seed"]
    ]
    finite = [v for v in finals if math.isfinite(v)]
    levels = result.get("levels", {})
    for (name, level), style in zip(levels.items(), (":", "-.")):
        ax.axhline(level, color="grey", linestyle=style, linewidth=1, label=f"{name} level ({level:.2f})")
    if finite:
        ax.set_ylim(min(finite) - 0.3, max([*finite, *levels.values()]) + 0.5)
    ax.set_xlabel("step")
    ax.set_ylabel("eval loss (mean over seeds)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    path = out / "loss_vs_step.png"
    fig.savefig(path, format="png")
    return path


def plot_depth_sweeps(result: dict[str, Any], out: Path) -> Path:
    """Training loss at the end (first seed) against the lr, per variant, one panel per depth; the chosen lr starred."""
    fig = _figure(11.0, 4.0)
    for k, (layers, at) in enumerate(result["per_depth"].items()):
        ax = fig.add_subplot(1, len(result["per_depth"]), k + 1)
        for i, (name, row) in enumerate(at["lr_sweep"].items()):
            seed = str(row["criterion_seed"])
            points = [(p["lr"], p["train_loss_end"][seed]) for p in row["points"] if p["swept"]]
            finite = [(lr, v) for lr, v in points if math.isfinite(v)]
            ax.plot([lr for lr, _ in finite], [v for _, v in finite], "o-", color=f"C{i}", label=name, markersize=3)
            chosen = dict(points)[row["chosen"]]
            if math.isfinite(chosen):
                ax.plot([row["chosen"]], [chosen], "*", color=f"C{i}", markersize=12)
        ax.set_xscale("log")
        ax.set_xlabel("maximum learning rate")
        ax.set_ylabel("training loss at the end (first seed)")
        ax.set_title(f"{layers} blocks", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = out / "lr_sweep.png"
    fig.savefig(path, format="png")
    return path


def plot_init(result: dict[str, Any], out: Path) -> Path:
    """Cosine similarity and effective rank of the tokens after each block at initialisation, against the relative
    depth (block / depth): solid shallow, dashed deep."""
    fig = _figure(11.0, 4.0)
    for col, (key, label) in enumerate(
        (("token_cosine", "mean token cosine similarity"), ("effective_rank", "normalised effective rank"))
    ):
        ax = fig.add_subplot(1, 2, col + 1)
        for k, (layers, at) in enumerate(result["init_diagnostics"].items()):
            for i, (name, row) in enumerate(at.items()):
                xs = [(j + 1) / int(layers) for j in range(len(row[key]))]
                ax.plot(xs, row[key], "-" if k == 0 else "--", color=f"C{i}", label=f"{name}, {layers} blocks")
        ax.set_xlabel("block / depth")
        ax.set_ylabel(f"{label} at init")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    path = out / "init_signal_propagation.png"
    fig.savefig(path, format="png")
    return path


def write_depth_report(result: dict[str, Any], out: Path) -> None:
    """`results.md` and the plots of a depth-family result into `out`."""
    (out / "results.md").write_text(depth_markdown(result))
    plot_depth_losses(result, out)
    plot_depth_sweeps(result, out)
    plot_init(result, out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.reproduce.report", description="Rewrite results.md and the plots of a folder."
    )
    parser.add_argument("folder", help="holds results.json (e.g. docs/reproduction/codeparrot-tiny)")
    parser.add_argument(
        "--reanalyse",
        action="store_true",
        help="depth family: compute the claims anew from the runs in results.json and rewrite it",
    )
    args = parser.parse_args(argv)
    folder = Path(args.folder)
    result = json.loads((folder / "results.json").read_text())
    if args.reanalyse:
        if result.get("family") != "depth":
            raise SystemExit(f"{folder}: --reanalyse applies to the depth family's results only")
        result = depth.reanalyse(result)
        (folder / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    write_report(result, folder)
    print(f"wrote {folder / 'results.md'} and the plots")
    return 0


if __name__ == "__main__":
    sys.exit(main())
