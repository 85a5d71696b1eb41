"""`simplified-reproduce`: the paper's CodeParrot comparison (He & Hofmann, ICLR 2024, Figs. 2, 5, 23) in miniature.

Trains every causal block type — pre_ln, parallel, value_skipinit, sas, sas_p, simplest — and one ablation,
`sas_softmax` (the skipless SAS block with plain softmax attention instead of shaped attention, Fig. 2), with the
same data order, seeds and steps, through the `simplified-train` machinery (presets, data, trainer, diagnostics
callback). Nothing is tuned per block beyond what the paper prescribes:

- each block's preset learning rate: one lr for Pre-LN, parallel, SAS, SAS-P and the ablation (the paper tunes
  one lr for Pre-LN, SAS and SAS-P, App. D.1), a lower one for V-SkipInit (its preset's, App. D.1), and for
  `simplest` (no normalisation) 2/3 of the preset's when it is above the paper's CodeParrot lr 1e-3, as the
  paper lowers its aggressive BERT lr for its norm-free block (3e-3 → 2e-3, App. D.2);
- βFF as the preset family encodes the paper's guidance (0.1 for the 768-wide models, 0.2 for narrower ones,
  App. D.1).

The output folder (default `docs/reproduction/`) gets `results.json`, `results.md` (the table, the claims
verdicts computed from the table, the diagnostics), `loss_vs_step.png`, `loss_vs_time.png`, `gains.png`
(shaped-attention α, β, γ per layer, mean over heads, and βFF, against the step) and `kurtosis.png` (activation
kurtosis per layer at the end). The runs themselves go to `<runs-dir>/seed<k>/<block>/`; a finished run leaves
its record there (`record.json`, with its `simplified-train` arguments), and a later command whose arguments for
that run are the same reuses it instead of training again (`--retrain` refuses reuse). So an interrupted
reproduction resumes at the run it stopped in, and seeds trained by separate processes are summarised together.
`--jobs N` does that itself: the seeds still to train run in N child processes (one seed each at a time, torch
threads split between them, logs in `<runs-dir>/seed<k>/log.txt`), then this process summarises every seed. On a
small CPU that beats one process using every core: the miniature's GEMMs are too small to scale across threads.

Paper scale on a GPU: `simplified-reproduce --preset codeparrot --preset-shape` (the `codeparrot-<block>` presets:
18x768, their steps and batch, the real CodeParrot data `huggingface-course/codeparrot-ds-train` / `-valid`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
from pathlib import Path
from typing import Any

from .presets import UsageError, add_set_option, available_presets, load_preset
from .runs import latest_checkpoint

# name -> (block type of the preset, model overrides, lr factor)
BLOCKS: dict[str, tuple[str, dict[str, Any], float]] = {
    "pre_ln": ("pre_ln", {}, 1.0),
    "parallel": ("parallel", {}, 1.0),
    "value_skipinit": ("value_skipinit", {}, 1.0),
    "sas": ("sas", {}, 1.0),
    "sas_p": ("sas_p", {}, 1.0),
    "simplest": ("simplest", {}, 2 / 3),  # no norms: the paper's lower lr (App. D.2, 3e-3 -> 2e-3)
    "sas_softmax": ("sas", {"attention_type": "softmax"}, 1.0),  # ablation: skipless without shaping (Fig. 2)
}
#: the paper's CodeParrot lr (App. D.1), tuned for Pre-LN, SAS and SAS-P alike: kept for `simplest` too
PAPER_CODEPARROT_LR = 1e-3
#: preset families with a causal-LM preset for every block type
CAUSAL_FAMILIES = ("codeparrot", "codeparrot-tiny")
FRACTIONS = (0.25, 0.5, 0.75, 1.0)
GAIN_KEYS = ("alpha_mean", "beta_mean", "gamma_mean", "beta_ff")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="simplified-reproduce",
        description="Train every causal block type and the skipless-softmax ablation on the same data, seeds and "
        "steps; write the table, plots, diagnostics and the paper's claims checked against the table.",
        epilog="examples:\n"
        "  simplified-reproduce                          # CPU miniature, embedded code corpus\n"
        "  simplified-reproduce --seeds 0 1 --jobs 2     # two seeds, one process each (the committed results)\n"
        "  simplified-reproduce --preset codeparrot --preset-shape   # paper scale (GPU), real CodeParrot data",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--preset",
        default="codeparrot-tiny",
        help="preset family: <family>-<block>.json must exist for every block type (default: codeparrot-tiny)",
    )
    parser.add_argument(
        "--blocks",
        nargs="+",
        default=list(BLOCKS),
        choices=list(BLOCKS),
        metavar="BLOCK",
        help=f"block types to train (default: all of {', '.join(BLOCKS)})",
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[0], help="seeds (default: 0)")
    parser.add_argument("--steps", type=int, default=400, help="optimizer steps, a multiple of 4 (default: 400)")
    parser.add_argument("--layers", type=int, default=6, help="blocks (default: 6)")
    parser.add_argument("--hidden-size", type=int, default=256, help="width d; the MLP is 4d (default: 256)")
    parser.add_argument("--heads", type=int, default=4, help="attention heads (default: 4)")
    parser.add_argument("--seq-len", type=int, default=128, help="sequence length (default: 128)")
    parser.add_argument(
        "--preset-shape",
        action="store_true",
        help="keep the presets' shape, sequence length "
        "and steps (paper scale); ignores --steps/--layers/--hidden-size/--heads/--seq-len",
    )
    parser.add_argument(
        "--dataset",
        help="dataset (default: the preset's: the embedded code corpus for codeparrot-tiny, CodeParrot for codeparrot)",
    )
    add_set_option(parser, "extra override for every block, as in simplified-train")
    parser.add_argument(
        "--output-dir", default="docs/reproduction", help="table, JSON and plots (default: docs/reproduction)"
    )
    parser.add_argument(
        "--runs-dir",
        default="runs/reproduction",
        help="the training runs, checkpoints included (default: runs/reproduction)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="train the seeds in this many processes at once, torch threads split between them (default: 1)",
    )
    parser.add_argument(
        "--retrain",
        action="store_true",
        help="train every run again, even where <runs-dir> holds a finished run with the same arguments",
    )
    return parser


def train_argv(args: argparse.Namespace, name: str, seed: int, run_dir: Path) -> list[str]:
    """The `simplified-train` arguments of one block type and seed."""
    block, model_overrides, lr_factor = BLOCKS[name]
    preset = f"{args.preset}-{block}"
    recipe = load_preset(preset).training
    lr = recipe.learning_rate
    lr *= lr_factor if lr > PAPER_CODEPARROT_LR else 1.0  # the paper lowers only its aggressive 3e-3 (App. D.2)
    steps = recipe.max_steps if args.preset_shape or args.steps is None else args.steps
    argv = [
        "--preset",
        preset,
        "--output-dir",
        str(run_dir),
        "--overwrite",
        "--no-export",
        "--diagnostics",
        "--max-steps",
        str(steps),
    ]
    sets = [
        f"training.seed={seed}",
        f"training.learning_rate={lr!r}",
        f"training.eval_steps={steps // 4}",
        f"training.save_steps={steps}",
        "training.save_total_limit=1",
        f"training.logging_steps={max(1, steps // 40)}",
    ]
    if not args.preset_shape:
        sets += [
            f"hidden_size={args.hidden_size}",
            f"intermediate_size={4 * args.hidden_size}",
            f"num_hidden_layers={args.layers}",
            f"num_attention_heads={args.heads}",
            f"data.seq_len={args.seq_len}",
        ]
    sets += [f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in model_overrides.items()]
    sets += args.overrides
    if args.dataset:
        argv += ["--dataset", args.dataset]
    for s in sets:
        argv += ["--set", s]
    return argv


def check(args: argparse.Namespace) -> None:
    if args.steps < 4 or args.steps % 4:
        raise UsageError(f"--steps must be a positive multiple of 4 (evaluations at 25/50/75/100%), got {args.steps}.")
    names = set(available_presets())
    for name in args.blocks:
        preset = f"{args.preset}-{BLOCKS[name][0]}"
        if preset not in names:
            raise UsageError(
                f"--preset {args.preset!r}: no preset {preset!r} for block {name!r}; families with "
                f"every block: {', '.join(CAUSAL_FAMILIES)}."
            )
        task = load_preset(preset).task
        if task != "causal-lm":
            raise UsageError(
                f"--preset {args.preset!r}: preset {preset!r} is a {task} preset; simplified-reproduce trains "
                f"causal LMs (the paper's CodeParrot runs): families {', '.join(CAUSAL_FAMILIES)}."
            )
    if len(set(args.seeds)) != len(args.seeds):
        raise UsageError(f"--seeds must be distinct, got {args.seeds}.")
    if args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}.")


# -- one run ---------------------------------------------------------------------------------------------------
RECORD = "record.json"


def finished_record(args: argparse.Namespace, name: str, seed: int, run_dir: Path) -> dict[str, Any] | None:
    """The record a finished run left in `run_dir`, if it was trained with the arguments this command would use."""
    path = run_dir / RECORD
    if args.retrain or not path.is_file():
        return None
    saved = json.loads(path.read_text())
    return saved["record"] if saved.get("argv") == train_argv(args, name, seed, run_dir) else None


def run_one(args: argparse.Namespace, name: str, seed: int, run_dir: Path) -> dict[str, Any]:
    """Train one block type with one seed; returns its record (eval curve, timing, diagnostics), which is also
    written to `run_dir/record.json` with the training arguments."""
    import torch

    from . import cli

    argv = train_argv(args, name, seed, run_dir)
    (run_dir / RECORD).unlink(missing_ok=True)
    plan = cli.plan_run(cli.build_parser().parse_args(argv))
    metrics = cli.run(plan, diagnostics=True, export=False)
    state = latest_checkpoint(run_dir) / "trainer_state.json"
    history = json.loads(state.read_text())["log_history"]
    steps = metrics["steps"]
    seconds_per_step = metrics["train_time_s"] / max(steps, 1)
    evals = {int(e["step"]): e["eval_loss"] for e in history if "eval_loss" in e}
    train_logs = [e for e in history if "loss" in e]
    trajectories: dict[str, list[list[float]]] = {}
    for e in train_logs:
        for k, v in e.items():
            if k.startswith("diag/L") and k.rsplit("/", 1)[1] in GAIN_KEYS:
                trajectories.setdefault(k.removeprefix("diag/"), []).append([e["step"], v])
    final = metrics.get("diagnostics", {})
    kurtosis = [final[f"diag/L{i}/kurtosis"] for i in range(64) if f"diag/L{i}/kurtosis" in final]
    record = {
        "block": name,
        "block_type": metrics["block_type"],
        "seed": seed,
        "steps": steps,
        "learning_rate": metrics["learning_rate"],
        "parameters": metrics["parameters"],
        "tokens_per_second": metrics["tokens_per_second"],
        "train_time_s": metrics["train_time_s"],
        "seconds_per_step": seconds_per_step,
        "eval_loss": {str(s): evals[s] for s in sorted(evals)},
        "train_loss": [[e["step"], e["loss"]] for e in train_logs],
        "gains": trajectories,
        "kurtosis": kurtosis,
        "torch_threads": torch.get_num_threads(),
    }
    (run_dir / RECORD).write_text(json.dumps({"argv": argv, "record": record}, indent=1) + "\n")
    return record


# -- the summary -----------------------------------------------------------------------------------------------
def _mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def summarise(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per block type: eval loss at 25/50/75/100% of the steps (mean, std over seeds), tokens/s, parameters."""
    table: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(r["block"] for r in records):
        runs = [r for r in records if r["block"] == name]
        steps = runs[0]["steps"]
        row: dict[str, Any] = {
            "block_type": runs[0]["block_type"],
            "learning_rate": runs[0]["learning_rate"],
            "parameters": runs[0]["parameters"],
            "steps": steps,
            "seeds": [r["seed"] for r in runs],
        }
        for f in FRACTIONS:
            step = str(round(f * steps))
            row[f"eval_loss@{int(f * 100)}%"] = _mean_std([r["eval_loss"][step] for r in runs])
        row["tokens_per_second"] = _mean_std([r["tokens_per_second"] for r in runs])
        row["train_time_s"] = _mean_std([r["train_time_s"] for r in runs])
        table[name] = row
    return table


def loss_at_time(records: list[dict[str, Any]], name: str, seconds: float) -> float:
    """Mean over seeds of the eval loss at `seconds` of training, interpolated linearly between evaluations
    (an evaluation's time is its step times the run's mean seconds per step)."""
    values = []
    for r in (r for r in records if r["block"] == name):
        points = [(int(s) * r["seconds_per_step"], v) for s, v in r["eval_loss"].items()]
        points.sort()
        t = min(seconds, points[-1][0])
        for (t0, v0), (t1, v1) in zip(points, points[1:]):
            if t0 <= t <= t1:
                values.append(v0 + (v1 - v0) * (t - t0) / max(t1 - t0, 1e-12))
                break
    return statistics.fmean(values)


def claims(table: dict[str, dict[str, Any]], records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The paper's qualitative claims, checked against the measured table (final eval loss, mean over seeds)."""
    final = {name: row["eval_loss@100%"][0] for name, row in table.items()}
    out: list[dict[str, Any]] = []

    def rel(a: str, b: str) -> float:
        return (final[a] - final[b]) / final[b]

    def add(claim: str, needs: tuple[str, ...], test, detail) -> None:
        if all(n in final for n in needs):
            held, numbers = test(), detail()
            out.append({"claim": claim, "held": bool(held), "numbers": numbers})
        else:
            out.append({"claim": claim, "held": None, "numbers": f"not run (needs {', '.join(needs)})"})

    for name in ("sas", "sas_p"):
        add(
            f"{name.upper().replace('_', '-')} within 2% of Pre-LN eval loss at equal steps (Fig. 23)",
            (name, "pre_ln"),
            lambda n=name: abs(rel(n, "pre_ln")) <= 0.02,
            lambda n=name: f"{final[n]:.4f} vs {final['pre_ln']:.4f} ({100 * rel(n, 'pre_ln'):+.2f}%)",
        )

    def time_test() -> tuple[bool, str]:
        t = min(table["pre_ln"]["train_time_s"][0], table["sas_p"]["train_time_s"][0])
        a, b = loss_at_time(records, "sas_p", t), loss_at_time(records, "pre_ln", t)
        speed = table["sas_p"]["tokens_per_second"][0] / table["pre_ln"]["tokens_per_second"][0]
        return a < b, (f"at {t:.0f} s: SAS-P {a:.4f} vs Pre-LN {b:.4f}; throughput SAS-P/Pre-LN {speed:.3f}x")

    add(
        "SAS-P ahead of Pre-LN at equal wall-clock time (Fig. 5)",
        ("sas_p", "pre_ln"),
        lambda: time_test()[0],
        lambda: time_test()[1],
    )
    add(
        "V-SkipInit behind Pre-LN per step (Fig. 5/23)",
        ("value_skipinit", "pre_ln"),
        lambda: final["value_skipinit"] > final["pre_ln"],
        lambda: (
            f"{final['value_skipinit']:.4f} vs {final['pre_ln']:.4f} ({100 * rel('value_skipinit', 'pre_ln'):+.2f}%)"
        ),
    )
    add(
        "no norms (simplest) slightly behind SAS-P per step: 0 < gap <= 5% (Fig. 23)",
        ("simplest", "sas_p"),
        lambda: 0 < rel("simplest", "sas_p") <= 0.05,
        lambda: f"{final['simplest']:.4f} vs {final['sas_p']:.4f} ({100 * rel('simplest', 'sas_p'):+.2f}%)",
    )
    add(
        "skipless without shaped attention clearly worse than SAS: gap > 5% (Fig. 2)",
        ("sas_softmax", "sas"),
        lambda: rel("sas_softmax", "sas") > 0.05,
        lambda: f"{final['sas_softmax']:.4f} vs {final['sas']:.4f} ({100 * rel('sas_softmax', 'sas'):+.2f}%)",
    )
    return out


def _fmt(pair: tuple[float, float], digits: int = 4) -> str:
    mean, std = pair
    return f"{mean:.{digits}f}" + (f" ± {std:.{digits}f}" if std else "")


def markdown(table, verdicts, records, command: str) -> str:
    cols = [f"eval loss @{int(f * 100)}%" for f in FRACTIONS]
    lines = [
        f"Command: `{command}`",
        "",
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
        verdict = {True: "held", False: "did NOT hold", None: "not checked"}[v["held"]]
        lines.append(f"- {v['claim']}: **{verdict}** — {v['numbers']}")
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
    lines += [
        "",
        "Plots: `loss_vs_step.png`, `loss_vs_time.png`, `gains.png` (shaped-attention α, β, γ per layer, "
        "mean over heads, and βFF), `kurtosis.png`.",
        "",
    ]
    return "\n".join(lines)


# -- plots -----------------------------------------------------------------------------------------------------
def _figure(width: float = 7.0, height: float = 4.5):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

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


class RunFailed(Exception):
    """A child process (`--jobs`) failed; the message names its seed and log."""


def seed_argv(args: argparse.Namespace, seed: int) -> list[str]:
    """This command's arguments for one seed alone, in one process (what a `--jobs` child runs)."""
    argv = ["--preset", args.preset, "--blocks", *args.blocks, "--seeds", str(seed), "--runs-dir", args.runs_dir]
    argv += ["--output-dir", str(Path(args.runs_dir) / f"seed{seed}" / "summary")]
    if args.preset_shape:
        argv.append("--preset-shape")
    else:
        argv += ["--steps", str(args.steps), "--layers", str(args.layers), "--hidden-size", str(args.hidden_size)]
        argv += ["--heads", str(args.heads), "--seq-len", str(args.seq_len)]
    if args.dataset:
        argv += ["--dataset", args.dataset]
    for s in args.overrides:
        argv += ["--set", s]
    return argv + (["--retrain"] if args.retrain else [])


def train_in_parallel(args: argparse.Namespace) -> None:
    """Train the seeds that have a run left to do in `args.jobs` child processes, torch threads split evenly."""
    import subprocess

    import torch

    todo = [
        seed
        for seed in args.seeds
        if args.retrain
        or any(
            finished_record(args, name, seed, Path(args.runs_dir) / f"seed{seed}" / name) is None
            for name in args.blocks
        )
    ]
    env = {**os.environ, "OMP_NUM_THREADS": str(max(1, torch.get_num_threads() // args.jobs))}
    running: list[tuple[int, Path, subprocess.Popen]] = []
    failed = []
    while todo or running:
        while todo and len(running) < args.jobs:
            seed = todo.pop(0)
            log = Path(args.runs_dir) / f"seed{seed}" / "log.txt"
            log.parent.mkdir(parents=True, exist_ok=True)
            print(f"simplified-reproduce: seed {seed} in a child process, log {log}", file=sys.stderr, flush=True)
            with log.open("w") as handle:
                cmd = [sys.executable, "-m", "modeling_simplified.training.reproduce", *seed_argv(args, seed)]
                running.append((seed, log, subprocess.Popen(cmd, stdout=handle, stderr=subprocess.STDOUT, env=env)))
        seed, log, proc = running.pop(0)
        if proc.wait() != 0:
            failed.append(f"seed {seed} (exit {proc.returncode}, log {log})")
    if failed:
        raise RunFailed("training failed for " + "; ".join(failed))
    args.retrain = False  # the children retrained what was asked; summarise their records


def reproduce(args: argparse.Namespace, command: str) -> dict[str, Any]:
    check(args)
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    if args.jobs > 1 and len(args.seeds) > 1:
        train_in_parallel(args)
    records = []
    for seed in args.seeds:
        for name in args.blocks:
            run_dir = Path(args.runs_dir) / f"seed{seed}" / name
            record = finished_record(args, name, seed, run_dir)
            print(
                f"simplified-reproduce: {name}, seed {seed}" + (f" (reusing {run_dir / RECORD})" if record else ""),
                file=sys.stderr,
                flush=True,
            )
            records.append(record or run_one(args, name, seed, run_dir))
    table = summarise(records)
    verdicts = claims(table, records)
    result = {"command": command, "table": table, "claims": verdicts, "runs": records}
    (out / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "results.md").write_text(markdown(table, verdicts, records, command))
    plot_losses(records, out, per_time=False)
    plot_losses(records, out, per_time=True)
    plot_gains(records, out)
    plot_kurtosis(records, out)
    return result


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    command = "simplified-reproduce " + " ".join(sys.argv[1:] if argv is None else argv)
    try:
        result = reproduce(args, command.strip())
    except UsageError as err:
        print(f"simplified-reproduce: error: {err}", file=sys.stderr)
        return 2
    except RunFailed as err:
        print(f"simplified-reproduce: error: {err}", file=sys.stderr)
        return 1
    print((Path(args.output_dir) / "results.md").read_text())
    return 0 if all(math.isfinite(r["eval_loss@100%"][0]) for r in result["table"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
