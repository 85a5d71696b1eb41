"""`simplified-reproduce`: the paper's CodeParrot comparison (He & Hofmann, ICLR 2024, Figs. 2, 5, 23) in miniature.

Trains every causal block type — pre_ln, post_ln, parallel, normformer, value_skipinit, sas, sas_p, simplest — and
one ablation, `sas_softmax` (the skipless SAS block with plain softmax attention instead of shaped attention), with
the same data order, seeds and steps, through the `simplified-train` machinery (presets, data, trainer, diagnostics
callback). As the paper does (§4: "we tune the maximum learning rate ... on a logarithmic grid"; App. D.1), each
block type gets its own maximum learning rate:

1. **sweep**: every block at every lr of `--lr-grid` (default 1e-3, 2e-3, 4e-3), the first seed, `--sweep-steps`
   steps (default half of `--steps`); the lr with the lowest final eval loss is the block's (a diverged run counts
   as worst; `results.json` → `lr_sweep` records the grid, the loss at each lr and the choice);
2. **final**: every block at its chosen lr, every seed, `--steps` steps: the table, the claims and the plots.

`--no-sweep` trains every block at its preset's lr instead. βFF is as the preset family encodes the paper's
guidance (0.1 for the 768-wide models, 0.2 for narrower ones, App. D.1).

The output folder (default `docs/reproduction/`) gets `results.json`, `results.md` (the table, the claims
verdicts computed from the table, the diagnostics), `loss_vs_step.png`, `loss_vs_time.png`, `gains.png`
(shaped-attention α, β, γ per layer, mean over heads, and βFF, against the step) and `kurtosis.png` (activation
kurtosis per layer at the end). The runs themselves go to `<runs-dir>/sweep/lr<lr>/<block>/` and `<runs-dir>/seed<k>/<block>/`; a finished run leaves
its record there (`record.json`, with its `simplified-train` arguments), and a later command whose arguments for
that run are the same reuses it instead of training again (`--retrain` refuses reuse). So an interrupted
reproduction resumes at the run it stopped in, and runs trained by separate processes are summarised together.
`--jobs N` trains each phase's unfinished runs in N child processes (every N-th run each, torch threads split
between them, logs in `<runs-dir>/<phase>-<i>.log`), then this process summarises. On a small CPU that beats one
process using every core: the miniature's GEMMs are too small to scale across threads.

Paper scale on a GPU: `simplified-reproduce --preset codeparrot --preset-shape` (the `codeparrot-<block>` presets:
18x768, their steps and batch, the real CodeParrot data `huggingface-course/codeparrot-ds-train` / `-valid`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from modeling_simplified import SimplifiedConfig

from . import cli
from .presets import UsageError, add_set_option, available_presets, load_preset
from .raptr import RaptrCallback
from .runs import latest_checkpoint

# name -> (block type of the preset, model overrides)
BLOCKS: dict[str, tuple[str, dict[str, Any]]] = {
    "pre_ln": ("pre_ln", {}),
    "post_ln": ("post_ln", {}),
    "parallel": ("parallel", {}),
    "normformer": ("normformer", {}),
    "value_skipinit": ("value_skipinit", {}),
    "sas": ("sas", {}),
    "sas_p": ("sas_p", {}),
    "simplest": ("simplest", {}),
    "sas_softmax": ("sas", {"attention_type": "softmax"}),  # ablation: skipless without shaped attention (§4.1)
}
#: the maximum learning rates tried per block type (a logarithmic grid, §4 / App. D.1)
LR_GRID = (1e-3, 2e-3, 4e-3)
PHASES = ("sweep", "final")
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
    parser.add_argument(
        "--lr-grid",
        nargs="+",
        type=float,
        default=list(LR_GRID),
        metavar="LR",
        help=f"maximum learning rates swept per block type, first seed (default: {' '.join(map(str, LR_GRID))})",
    )
    parser.add_argument(
        "--sweep-steps", type=int, help="optimizer steps of a sweep run (default: half of --steps, a multiple of 4)"
    )
    parser.add_argument("--no-sweep", action="store_true", help="no lr sweep: every block at its preset's lr")
    parser.add_argument(
        "--raptr",
        metavar="SPEC",
        help="also train pre_ln with RaPTr (e.g. recommended) at its chosen lr, every seed: at equal steps "
        "(Table 1's setting) and at equal FLOPs (steps / expected relative FLOPs, Table 7's), against its final runs",
    )
    parser.add_argument("--phase", choices=PHASES, help=argparse.SUPPRESS)  # a --jobs child: train one phase's share
    parser.add_argument("--shard", help=argparse.SUPPRESS)  # "i/N": every N-th run of the phase from the i-th
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


def preset_lr(args: argparse.Namespace, name: str) -> float:
    return load_preset(f"{args.preset}-{BLOCKS[name][0]}").training.learning_rate


def final_steps(args: argparse.Namespace, name: str) -> int:
    recipe = load_preset(f"{args.preset}-{BLOCKS[name][0]}").training
    return recipe.max_steps if args.preset_shape or args.steps is None else args.steps


def sweep_steps(args: argparse.Namespace, name: str) -> int:
    return args.sweep_steps or max(4, final_steps(args, name) // 8 * 4)


def train_argv(
    args: argparse.Namespace, name: str, seed: int, run_dir: Path, lr: float | None = None, steps: int | None = None
) -> list[str]:
    """The `simplified-train` arguments of one block type and seed (default: its preset's lr, the final steps)."""
    block, model_overrides = BLOCKS[name]
    preset = f"{args.preset}-{block}"
    lr = preset_lr(args, name) if lr is None else lr
    steps = final_steps(args, name) if steps is None else steps
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
    if not all(math.isfinite(lr) and lr > 0 for lr in args.lr_grid) or len(set(args.lr_grid)) != len(args.lr_grid):
        raise UsageError(f"--lr-grid must be distinct positive learning rates, got {args.lr_grid}.")
    if args.sweep_steps is not None and (args.sweep_steps < 4 or args.sweep_steps % 4):
        raise UsageError(f"--sweep-steps must be a positive multiple of 4, got {args.sweep_steps}.")
    if args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}.")


# -- one run ---------------------------------------------------------------------------------------------------
RECORD = "record.json"


@dataclass(frozen=True)
class Run:
    """One training run: a block type at one seed, lr and length, in its own directory."""

    name: str
    seed: int
    lr: float
    steps: int
    run_dir: Path
    raptr: str | None = None  # a RaPTr schedule (the paper's stagewise lr schedule with it)
    setting: str | None = None  # RaPTr: "equal_steps" or "equal_flops"

    def argv(self, args: argparse.Namespace) -> list[str]:
        argv = train_argv(args, self.name, self.seed, self.run_dir, self.lr, self.steps)
        return argv + (["--raptr", self.raptr] if self.raptr else [])


def sweep_runs(args: argparse.Namespace) -> list[Run]:
    """Every block type at every lr of the grid, the first seed, `--sweep-steps` steps."""
    root = Path(args.runs_dir) / "sweep"
    return [
        Run(name, args.seeds[0], lr, sweep_steps(args, name), root / f"lr{lr:g}" / name)
        for lr in args.lr_grid
        for name in args.blocks
    ]


def final_runs(args: argparse.Namespace, lrs: dict[str, float]) -> list[Run]:
    """Every block type at its lr, every seed, the final number of steps."""
    return [
        Run(name, seed, lrs[name], final_steps(args, name), Path(args.runs_dir) / f"seed{seed}" / name)
        for seed in args.seeds
        for name in args.blocks
    ]


def raptr_relative_flops(args: argparse.Namespace, steps: int) -> float:
    """RaPTr's expected relative layer FLOPs for pre_ln's depth over `steps` steps (the schedule's own figure)."""
    layers = load_preset(f"{args.preset}-pre_ln").model.get("num_hidden_layers") if args.preset_shape else args.layers
    config = SimplifiedConfig(num_hidden_layers=layers, hidden_size=8, num_attention_heads=1, vocab_size=8)
    return RaptrCallback(args.raptr).build(config, steps).expected_relative_flops()


def raptr_runs(args: argparse.Namespace, lr: float) -> list[Run]:
    """pre_ln with RaPTr at its lr, every seed: as many steps as the full model (equal steps), and that many divided
    by the expected relative FLOPs, rounded down to a multiple of 4 (equal FLOPs)."""
    steps = final_steps(args, "pre_ln")
    longer = int(steps / raptr_relative_flops(args, steps)) // 4 * 4
    return [
        Run("pre_ln", seed, lr, n, Path(args.runs_dir) / f"seed{seed}" / f"pre_ln-raptr-{setting}", args.raptr, setting)
        for setting, n in (("equal_steps", steps), ("equal_flops", longer))
        for seed in args.seeds
    ]


def finished_record(args: argparse.Namespace, run: Run, reuse: bool | None = None) -> dict[str, Any] | None:
    """The record a finished run left in its directory, if it was trained with the arguments this command would use
    (and reuse is allowed: by default unless `--retrain`)."""
    path = run.run_dir / RECORD
    if not (not args.retrain if reuse is None else reuse) or not path.is_file():
        return None
    saved = json.loads(path.read_text())
    return saved["record"] if saved.get("argv") == run.argv(args) else None


def run_one(args: argparse.Namespace, run: Run) -> dict[str, Any]:
    """Train one run; returns its record (eval curve, timing, diagnostics), which is also written to
    `run_dir/record.json` with the training arguments."""
    name, seed, run_dir = run.name, run.seed, run.run_dir
    argv = run.argv(args)
    (run_dir / RECORD).unlink(missing_ok=True)
    parsed = cli.build_parser().parse_args(argv)
    metrics = cli.run(cli.plan_run(parsed), diagnostics=True, export=False, raptr=cli._raptr_options(parsed))
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
    cosine = {
        when: [final[f"diag/L{i}/token_cosine_{when}"] for i in range(64) if f"diag/L{i}/token_cosine_{when}" in final]
        for when in ("init", "end")
    }
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
        "signal_propagation": cosine,
        "raptr": None if run.raptr is None else {"setting": run.setting, "spec": run.raptr, **metrics["raptr"]},
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


#: the RaPTr paper's results, quoted (Panigrahi et al. 2024)
RAPTR_PAPER = {
    "equal_steps": 'Table 1 (BERT-Base, 675K steps, equal peak learning rate): "RaPTr achieves similar loss as '
    'baseline at 1.33× reduced FLOPs"',
    "equal_flops": 'Table 7 (BERT-Base and BERT-Large, peak lr tuned per method): "RaPTr achieves better loss '
    'compared to baseline at all FLOP measures" (for BERT-Base)',
}


def raptr_comparison(full: list[dict[str, Any]], raptr: list[dict[str, Any]]) -> dict[str, Any]:
    """Per setting: the full model's and RaPTr's final eval loss per seed, RaPTr − full per seed (mean, range), the
    realised relative layer FLOPs and training times, and a verdict: `inconclusive` when the per-seed differences
    do not share a sign or their mean is inside the seed spread (the larger max − min of either's final losses)."""
    baseline = {r["seed"]: r for r in full if r["block"] == "pre_ln"}
    out: dict[str, Any] = {}
    for setting in ("equal_steps", "equal_flops"):
        runs = {r["seed"]: r for r in raptr if r["raptr"]["setting"] == setting}
        seeds = sorted(set(runs) & set(baseline))
        if not seeds:
            continue
        diff = [_final_loss(runs[s]) - _final_loss(baseline[s]) for s in seeds]
        signs = {d > 0 for d in diff}
        losses = {kind: [_final_loss(r[s]) for s in seeds] for kind, r in (("full", baseline), ("raptr", runs))}
        noise = max(max(v) - min(v) for v in losses.values())
        out[setting] = {
            "paper": RAPTR_PAPER[setting],
            "seeds": seeds,
            "steps": {"full": baseline[seeds[0]]["steps"], "raptr": runs[seeds[0]]["steps"]},
            "full_loss": losses["full"],
            "raptr_loss": losses["raptr"],
            "seed_spread": noise,
            "raptr_minus_full": diff,
            "raptr_minus_full_mean": statistics.fmean(diff),
            "realised_relative_flops": [runs[s]["raptr"].get("realised_relative_flops") for s in seeds],
            "train_time_s": {
                "full": [baseline[s]["train_time_s"] for s in seeds],
                "raptr": [runs[s]["train_time_s"] for s in seeds],
            },
            "verdict": "inconclusive"
            if len(signs) > 1 or abs(statistics.fmean(diff)) <= noise
            else ("RaPTr behind the full model" if signs == {True} else "RaPTr ahead of the full model"),
        }
    return out


def signal_propagation(records: list[dict[str, Any]]) -> dict[str, dict[str, list[float]]]:
    """Per block type, the mean over seeds of the token representations' mean cosine similarity after each block,
    at initialisation and at the end of training."""
    out = {}
    for name in dict.fromkeys(r["block"] for r in records):
        runs = [r["signal_propagation"] for r in records if r["block"] == name and r.get("signal_propagation")]
        if runs and runs[0]["init"]:
            out[name] = {
                when: [statistics.fmean(run[when][i] for run in runs) for i in range(len(runs[0][when]))]
                for when in ("init", "end")
            }
    return out


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
    """The paper's claims, each checked on the seed means and on every seed alone: it `held` (True/False) when
    every seed agrees with the means, and is inconclusive (`held` None, `verdict` "inconclusive") when seeds
    disagree, or, for a claim that one block is behind another, when the gap between their mean losses is inside
    the seed spread (the larger of the two blocks' max − min final loss over seeds). `numbers` gives the means and
    the per-seed values."""
    seeds = sorted({r["seed"] for r in records})
    mean = {name: row["eval_loss@100%"][0] for name, row in table.items()}
    per_seed = [{r["block"]: r["eval_loss"][str(r["steps"])] for r in records if r["seed"] == seed} for seed in seeds]
    out: list[dict[str, Any]] = []

    def gap(final: dict[str, float], a: str, b: str) -> float:
        return (final[a] - final[b]) / final[b]

    def spread(name: str) -> float:
        finals = [final[name] for final in per_seed if name in final]
        return max(finals) - min(finals)

    def add(claim: str, a: str, b: str, test, ordering: bool = False) -> None:
        if a not in mean or b not in mean:
            out.append({"claim": claim, "held": None, "verdict": "not run", "numbers": f"not run (needs {a}, {b})"})
            return
        held = bool(test(mean, a, b))
        seed_verdicts = [bool(test(final, a, b)) for final in per_seed]
        noise = max(spread(a), spread(b))
        agree = all(v == held for v in seed_verdicts) and not (ordering and abs(mean[a] - mean[b]) <= noise)
        numbers = f"mean {mean[a]:.4f} vs {mean[b]:.4f} ({100 * gap(mean, a, b):+.2f}%)"
        if len(seeds) > 1:
            numbers += "; per seed " + ", ".join(
                f"{s}: {100 * gap(f, a, b):+.2f}% ({'held' if v else 'not'})"
                for s, f, v in zip(seeds, per_seed, seed_verdicts)
            )
            numbers += f"; seed spread {noise:.4f}"
        verdict = ("held" if held else "did NOT hold") if agree else "inconclusive"
        out.append({"claim": claim, "held": held if agree else None, "verdict": verdict, "numbers": numbers})

    for name in ("sas", "sas_p"):
        add(
            f"{name.upper().replace('_', '-')} within 2% of Pre-LN eval loss at equal steps (Fig. 23)",
            name,
            "pre_ln",
            lambda f, a, b: abs(gap(f, a, b)) <= 0.02,
        )
    if "sas_p" in mean and "pre_ln" in mean:
        t = min(table["pre_ln"]["train_time_s"][0], table["sas_p"]["train_time_s"][0])
        at_time = {name: loss_at_time(records, name, t) for name in ("sas_p", "pre_ln")}
        held = at_time["sas_p"] < at_time["pre_ln"]
        per_seed_at_time = [
            {name: loss_at_time([r for r in records if r["seed"] == seed], name, t) for name in ("sas_p", "pre_ln")}
            for seed in seeds
        ]
        seed_verdicts = [f["sas_p"] < f["pre_ln"] for f in per_seed_at_time]
        agree = all(v == held for v in seed_verdicts)
        speed = table["sas_p"]["tokens_per_second"][0] / table["pre_ln"]["tokens_per_second"][0]
        numbers = f"seed means at {t:.0f} s: SAS-P {at_time['sas_p']:.4f} vs Pre-LN {at_time['pre_ln']:.4f}"
        if len(seeds) > 1:
            numbers += "; per seed " + ", ".join(
                f"{s}: {f['sas_p']:.4f} vs {f['pre_ln']:.4f} ({'held' if v else 'not'})"
                for s, f, v in zip(seeds, per_seed_at_time, seed_verdicts)
            )
        out.append(
            {
                "claim": "SAS-P ahead of Pre-LN at equal wall-clock time (Fig. 5)",
                "held": held if agree else None,
                "verdict": ("held" if held else "did NOT hold") if agree else "inconclusive",
                "numbers": numbers + f"; throughput SAS-P/Pre-LN {speed:.3f}x (1-thread runs side by side on a "
                "shared CPU)",
            }
        )
    add(
        "V-SkipInit behind Pre-LN per step (Figs. 2, 3, 6, 7)",
        "value_skipinit",
        "pre_ln",
        lambda f, a, b: f[a] > f[b],
        ordering=True,
    )
    add(
        "no norms (simplest) slightly behind SAS-P per step: 0 < gap <= 5% (Fig. 23)",
        "simplest",
        "sas_p",
        lambda f, a, b: 0 < gap(f, a, b) <= 0.05,
        ordering=True,
    )
    add(
        "skipless softmax attention (no shaping) clearly worse than SAS: gap > 5% (§4.1, citing Dong et al. 2021 "
        "and Noci et al. 2022: naive removal of the attention skip causes rank collapse and poor trainability)",
        "sas_softmax",
        "sas",
        lambda f, a, b: gap(f, a, b) > 0.05,
        ordering=True,
    )
    return out


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


# -- plots -----------------------------------------------------------------------------------------------------
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


class RunFailed(Exception):
    """A child process (`--jobs`) failed; the message names its phase, share and log."""


def child_argv(args: argparse.Namespace, phase: str, shard: str) -> list[str]:
    """This command's arguments for one share of one phase's runs, in one process (what a `--jobs` child runs)."""
    argv = ["--preset", args.preset, "--blocks", *args.blocks, "--seeds", *map(str, args.seeds)]
    argv += ["--runs-dir", args.runs_dir, "--phase", phase, "--shard", shard, "--lr-grid", *map(repr, args.lr_grid)]
    argv += ["--no-sweep"] if args.no_sweep else []
    argv += ["--sweep-steps", str(args.sweep_steps)] if args.sweep_steps else []
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


def train_in_parallel(args: argparse.Namespace, phase: str, runs: list[Run]) -> None:
    """Train a phase's unfinished runs in `args.jobs` child processes (child i takes every N-th run from the i-th),
    torch threads split evenly."""
    jobs = min(args.jobs, sum(finished_record(args, run) is None for run in runs))
    env = {**os.environ, "OMP_NUM_THREADS": str(max(1, torch.get_num_threads() // max(jobs, 1)))}
    children = []
    for i in range(jobs):
        log = Path(args.runs_dir) / f"{phase}-{i}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        print(f"simplified-reproduce: {phase} runs, share {i + 1}/{jobs}, log {log}", file=sys.stderr, flush=True)
        cmd = [sys.executable, "-m", "modeling_simplified.training.reproduce", *child_argv(args, phase, f"{i}/{jobs}")]
        with log.open("w") as handle:
            children.append((i, log, subprocess.Popen(cmd, stdout=handle, stderr=subprocess.STDOUT, env=env)))
    failed = [f"{phase} share {i + 1} (exit {p.returncode}, log {log})" for i, log, p in children if p.wait() != 0]
    if failed:
        raise RunFailed("training failed for " + "; ".join(failed))


def train(args: argparse.Namespace, phase: str, runs: list[Run]) -> list[dict[str, Any]]:
    """The records of a phase's runs: reused where finished, trained (in `--jobs` children, or here) where not."""
    in_children = args.jobs > 1 and not args.phase and sum(finished_record(args, run) is None for run in runs) > 1
    if in_children:
        train_in_parallel(args, phase, runs)
    if args.shard:
        index, count = map(int, args.shard.split("/"))
        runs = runs[index::count]
    records = []
    for run in runs:
        record = finished_record(args, run, reuse=True if in_children else None)  # the children's, retrained or not
        print(
            f"simplified-reproduce: {phase} {run.name}, seed {run.seed}, lr {run.lr:g}, {run.steps} steps"
            + (f" (reusing {run.run_dir / RECORD})" if record else ""),
            file=sys.stderr,
            flush=True,
        )
        records.append(record or run_one(args, run))
    return records


def _final_loss(record: dict[str, Any]) -> float:
    loss = record["eval_loss"][str(record["steps"])]
    return loss if math.isfinite(loss) else math.inf


def choose_lrs(args: argparse.Namespace, records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per block type: the grid, the final eval loss at each lr, and the lr with the lowest (ties: the smaller lr;
    a non-finite loss is the worst); `at_edge` when that is the grid's smallest or largest lr."""
    sweep = {}
    for name in args.blocks:
        runs = [r for r in records if r["block"] == name]
        losses = {r["learning_rate"]: _final_loss(r) for r in runs}
        grid = sorted(losses)
        chosen = min(grid, key=lambda lr: (losses[lr], lr))
        sweep[name] = {
            "grid": grid,
            "loss": {f"{lr:g}": losses[lr] for lr in grid},
            "steps": runs[0]["steps"],
            "seed": args.seeds[0],
            "chosen": chosen,
            "at_edge": len(grid) > 1 and chosen in (grid[0], grid[-1]),
        }
    return sweep


def reproduce(args: argparse.Namespace, command: str) -> dict[str, Any] | None:
    check(args)
    lr_sweep: dict[str, dict[str, Any]] = {}
    if args.no_sweep:
        lrs = {name: preset_lr(args, name) for name in args.blocks}
    else:
        if args.phase != "final":
            train(args, "sweep", sweep_runs(args))
        if args.phase == "sweep":
            return None
        sweep_records = [finished_record(args, run, reuse=True) for run in sweep_runs(args)]
        if None in sweep_records:  # (only a --jobs child of the final phase can get here without the sweep)
            raise RunFailed("the lr sweep's records are missing: run the sweep phase first")
        lr_sweep = choose_lrs(args, sweep_records)
        lrs = {name: row["chosen"] for name, row in lr_sweep.items()}
    finals = final_runs(args, lrs)
    if args.raptr and "pre_ln" in args.blocks:
        finals += raptr_runs(args, lrs["pre_ln"])
    records = train(args, "final", finals)
    if args.phase == "final":
        return None
    raptr_records = [r for r in records if r.get("raptr")]
    records = [r for r in records if not r.get("raptr")]
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    table = summarise(records)
    verdicts = claims(table, records)
    signal = signal_propagation(records)
    result = {"command": command, "lr_sweep": lr_sweep, "table": table, "claims": verdicts}
    raptr = raptr_comparison(records, raptr_records) if raptr_records else {}
    result |= {"signal_propagation": signal, "raptr": raptr, "runs": records, "raptr_runs": raptr_records}
    (out / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "results.md").write_text(markdown(table, verdicts, records, command, lr_sweep, signal, raptr))
    plot_signal_propagation(signal, out)
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
        if result is None:  # a --jobs child: its share of the runs is trained and recorded
            return 0
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
