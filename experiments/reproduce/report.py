"""The reproduction's report, from `results.json` alone: `results.md` (the lr sweep, the table, the claims, kurtosis,
signal propagation, RaPTr) and the plots. `python -m experiments.reproduce.report docs/reproduction` rewrites them
from the folder's `results.json`."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from .analysis import FRACTIONS, GAIN_KEYS


def _fmt(pair: tuple[float, float], digits: int = 4) -> str:
    mean, std = pair
    return f"{mean:.{digits}f}" + (f" ± {std:.{digits}f}" if std else "")


def markdown(table, verdicts, records, command: str, lr_sweep=None, signal=None, raptr=None) -> str:
    cols = [f"eval loss @{int(f * 100)}%" for f in FRACTIONS]
    lines = [f"Command: `{command}`", ""]
    if lr_sweep:
        grid = sorted({lr for row in lr_sweep.values() for lr in row["grid"]})
        first = next(iter(lr_sweep.values()))
        lines += [
            f"## Learning-rate sweep (seed {first['seed']}, {first['steps']} steps; final eval loss)",
            "",
            "| block | " + " | ".join(f"lr {lr:g}" for lr in grid) + " | chosen |",
            "|---|" + "---|" * (len(grid) + 1),
        ]
        for name, row in lr_sweep.items():
            cells = " | ".join(f"{row['loss'][f'{lr:g}']:.4f}" if f"{lr:g}" in row["loss"] else "-" for lr in grid)
            edge = " (grid edge)" if row["at_edge"] else ""
            lines.append(f"| {name} | {cells} | {row['chosen']:g}{edge} |")
        lines += ["", "## Final runs at each block's chosen lr", ""]
    lines += [
        f"Seeds: {sorted({r['seed'] for r in records})} (mean ± sample std over seeds). tokens/s counts the "
        "training tokens over the training time including the periodic evaluations; torch threads per run: "
        f"{sorted({r.get('torch_threads', 0) for r in records})}.",
        "",
        "| block | lr | parameters | " + " | ".join(cols) + " | tokens/s | train time (s) |",
        "|---|---|---|" + "---|" * len(cols) + "---|---|",
    ]
    for name, row in table.items():
        losses = " | ".join(_fmt(row[f"eval_loss@{int(f * 100)}%"]) for f in FRACTIONS)
        lines.append(
            f"| {name} | {row['learning_rate']:.3g} | {row['parameters']:,} | {losses} | "
            f"{_fmt(row['tokens_per_second'], 0)} | {_fmt(row['train_time_s'], 1)} |"
        )
    lines += ["", "## Claims (computed from the table)", ""]
    for v in verdicts:
        lines.append(f"- {v['claim']}: **{v['verdict']}** — {v['numbers']}")
    lines += [
        "",
        "## Activation kurtosis per layer at the end (seed mean)",
        "",
        "| block | " + " | ".join(f"L{i}" for i in range(max(len(r["kurtosis"]) for r in records))) + " |",
        "|---|" + "---|" * max(len(r["kurtosis"]) for r in records),
    ]
    for name in table:
        ks = [r["kurtosis"] for r in records if r["block"] == name]
        lines.append(
            f"| {name} | " + " | ".join(f"{statistics.fmean(k[i] for k in ks):.2f}" for i in range(len(ks[0]))) + " |"
        )
    if signal:
        layers = max(len(row["init"]) for row in signal.values())
        lines += [
            "",
            "## Signal propagation: mean cosine similarity of the token representations per layer (seed mean)",
            "",
            "Near 1: every token carries the same representation (rank collapse). First evaluation batch; at "
            "initialisation / at the end of training.",
            "",
            "| block | " + " | ".join(f"L{i}" for i in range(layers)) + " |",
            "|---|" + "---|" * layers,
        ]
        for name, row in signal.items():
            cells = " | ".join(f"{a:.3f} / {b:.3f}" for a, b in zip(row["init"], row["end"]))
            lines.append(f"| {name} | {cells} |")
    if raptr:
        lines += ["", "## RaPTr against the full model (pre_ln, its chosen lr; final eval loss per seed)", ""]
        for setting, row in raptr.items():
            pairs = ", ".join(
                f"seed {s}: {f:.4f} → {r:.4f} ({d:+.4f})"
                for s, f, r, d in zip(row["seeds"], row["full_loss"], row["raptr_loss"], row["raptr_minus_full"])
            )
            flops = ", ".join(f"{x:.3f}" for x in row["realised_relative_flops"] if x is not None)
            lines.append(
                f"- {setting.replace('_', ' ')} ({row['steps']['full']} full-model steps, {row['steps']['raptr']} "
                f"RaPTr steps; realised relative layer FLOPs {flops}): the paper, {row['paper']}. Measured, full → "
                f"RaPTr: {pairs}; mean {row['raptr_minus_full_mean']:+.4f}: **{row['verdict']}**."
            )
    lines += [
        "",
        "Plots: `loss_vs_step.png`, `loss_vs_time.png`, `gains.png` (shaped-attention α, β, γ per layer, "
        "mean over heads, and βFF), `kurtosis.png`, `signal_propagation.png`.",
        "",
    ]
    return "\n".join(lines)


def _figure(width: float = 7.0, height: float = 4.5):
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def plot_losses(records, out: Path, per_time: bool) -> Path:
    """Eval loss (mean over seeds, band = min..max) of every block type against the step or the training time."""
    fig = _figure()
    ax = fig.add_subplot()
    for i, name in enumerate(dict.fromkeys(r["block"] for r in records)):
        runs = [r for r in records if r["block"] == name]
        steps = sorted(int(s) for s in runs[0]["eval_loss"])
        scale = statistics.fmean(r["seconds_per_step"] for r in runs) if per_time else 1.0
        xs = [s * scale for s in steps]
        values = [[r["eval_loss"][str(s)] for r in runs] for s in steps]
        color = f"C{i}"
        ax.plot(xs, [statistics.fmean(v) for v in values], "o-", color=color, label=name, markersize=3)
        if len(runs) > 1:
            ax.fill_between(xs, [min(v) for v in values], [max(v) for v in values], color=color, alpha=0.2)
    ax.set_xlabel("training time (s)" if per_time else "step")
    ax.set_ylabel("eval loss")
    # cut the first evaluations' plateau, but keep every block type's final losses in view (the ablation's too)
    lowest = min(min(r["eval_loss"].values()) for r in records)
    highest_final = max(r["eval_loss"][str(max(int(s) for s in r["eval_loss"]))] for r in records)
    ax.set_ylim(top=min(ax.get_ylim()[1], max(1.3 * lowest + 1.0, highest_final + 0.5)))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = out / ("loss_vs_time.png" if per_time else "loss_vs_step.png")
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
    records = result["runs"]
    markdown_text = markdown(
        result["table"],
        result["claims"],
        records,
        result["command"],
        result["lr_sweep"],
        result["signal_propagation"],
        result["raptr"],
    )
    (out / "results.md").write_text(markdown_text)
    plot_signal_propagation(result["signal_propagation"], out)
    plot_losses(records, out, per_time=False)
    plot_losses(records, out, per_time=True)
    plot_gains(records, out)
    plot_kurtosis(records, out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.reproduce.report", description="Rewrite results.md and the plots of a folder."
    )
    parser.add_argument("folder", nargs="?", default="docs/reproduction", help="holds results.json")
    folder = Path(parser.parse_args(argv).folder)
    write_report(json.loads((folder / "results.json").read_text()), folder)
    print(f"wrote {folder / 'results.md'} and the plots")
    return 0


if __name__ == "__main__":
    sys.exit(main())
