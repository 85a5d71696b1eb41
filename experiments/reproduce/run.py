"""`python -m experiments.reproduce`: the lr sweep (grown until it brackets every variant's best lr), the other
seeds at each variant's lr and at Pre-LN's (and RaPTr's runs), the step-time measurement, then the analysis and the
report."""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch
import transformers

from modeling_simplified.training.data import build_task_data
from modeling_simplified.training.presets import UsageError

from . import analysis, depth, finetune
from .jobs import ROOT, RunFailed, train_queue, train_runs
from .planning import (
    PROG,
    Run,
    build_parser,
    check,
    final_steps,
    finetune_data,
    finetune_runs,
    preset_lr,
    raptr_runs,
    round_lr,
    run_at,
    task_of,
    variant_preset,
)
from .report import write_report
from .timing import measure


def environment() -> dict[str, Any]:
    """Where the results were computed: the code's commit (with `+changes` if the tree differs from it), the
    interpreter (whose stdlib is the embedded corpus), the library versions and the CPU."""

    def git(*argv: str) -> str | None:
        done = subprocess.run(["git", "-C", str(ROOT), *argv], capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit and git("status", "--porcelain", "--untracked-files=no", "--", "experiments", "modeling_simplified"):
        commit += "+changes"
    cpu = next((line.split(":", 1)[1].strip() for line in _cpuinfo() if line.startswith("model name")), None)
    return {
        "commit": commit,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "cpu": cpu or platform.processor() or None,
        "cpu_count": os.cpu_count(),
    }


def _cpuinfo() -> list[str]:
    try:
        return Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return []


class Trainer:
    """The runs trained (or reused) so far by this command, by run; `batch` trains the ones it has not seen."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.done: dict[Run, dict[str, Any]] = {}

    def batch(self, label: str, runs: list[Run]) -> list[dict[str, Any]]:
        runs = list(dict.fromkeys(runs))
        new = [run for run in runs if run not in self.done]
        self.done.update(zip(new, train_runs(self.args, label, new)))
        return [self.done[run] for run in runs]

    def at_depth(self, layers: int) -> list[dict[str, Any]]:
        """The records of the depth family's runs at `layers` blocks."""
        return [record for run, record in self.done.items() if run.layers == layers]


def lr_sweep(
    args: argparse.Namespace, trainer: Trainer, start: dict[str, list[float]] | None = None, layers: int | None = None
) -> dict[str, list[float]]:
    """Every variant at every lr of `start` (default: `--lr-grid`; first seed; at depth `layers` for the depth
    family); then, round by round, the next lrs past the end that holds a variant's best (`analysis.extend`), until
    every best is bracketed or has `--max-lrs` lrs. Returns the lrs swept per variant."""
    first = args.seeds[0]
    start = start or {name: args.lr_grid for name in args.blocks}
    grid = {name: [round_lr(lr) for lr in start[name]] for name in args.blocks}
    label = f"L{layers}-sweep" if layers else "sweep"
    for round_ in itertools.count(1):
        runs = [run_at(args, name, first, lr, layers) for name in args.blocks for lr in grid[name]]
        records = trainer.batch(f"{label}{round_}", runs)
        more = analysis.extend(analysis.sweep(args.blocks, first, records, grid), args.lr_factor, args.max_lrs)
        new = {name: [lr for lr in map(round_lr, lrs) if lr not in grid[name]] for name, lrs in more.items()}
        if not any(new.values()):  # bracketed, at --max-lrs, or nothing new to try
            return grid
        for name, lrs in new.items():
            grid[name] += lrs


def reference_levels(args: argparse.Namespace) -> dict[str, float]:
    """The chance and unigram eval losses of the family's data (`depth.reference_levels`), on the runs' tokens."""
    preset = variant_preset(args, "pre_ln")
    data = build_task_data(task_of(args), preset.data, preset.model["vocab_size"])
    return depth.reference_levels(data.train["input_ids"], data.eval["input_ids"], preset.model["vocab_size"])


def reproduce_depth(args: argparse.Namespace, command: str) -> dict[str, Any]:
    """The depth family (`depth`): per depth, shallow first, each variant's lr sweep (at the deep depth from its
    shallow best lr and that lr's two neighbours) and every seed at its chosen lr; then the claims, the init
    diagnostics and the report."""
    trainer = Trainer(args)
    per_depth, chosen_records, start = {}, {}, None
    for layers in args.depths:
        swept = lr_sweep(args, trainer, start, layers)
        chosen = analysis.sweep(args.blocks, args.seeds[0], trainer.at_depth(layers), swept)
        lrs = {name: row["chosen"] for name, row in chosen.items()}
        runs = [run_at(args, name, seed, lrs[name], layers) for seed in args.seeds for name in args.blocks]
        chosen_records[layers] = trainer.batch(f"L{layers}-seeds", runs)
        per_depth[str(layers)] = {
            "lrs": lrs,
            # every run at this depth, its seeds too; the choice among the swept lrs is the same as above
            "lr_sweep": analysis.sweep(args.blocks, args.seeds[0], trainer.at_depth(layers), swept),
            "table": analysis.summarise(chosen_records[layers]),
        }
        start = depth.deep_start(lrs, args.lr_factor)
    every = list(trainer.done.values())
    preset = variant_preset(args, "pre_ln")
    model = preset.model
    result = {
        "family": "depth",
        "command": command,
        "environment": environment(),
        "preset": args.preset,
        "task": task_of(args),
        "criterion": analysis.CRITERION,
        "depths": args.depths,
        "seeds": args.seeds,
        "steps": final_steps(args),
        "shape": {
            "hidden_size": model["hidden_size"],
            "heads": model["num_attention_heads"],
            "intermediate_size": model["intermediate_size"],
            "seq_len": preset.data.seq_len,
            "batch": preset.training.per_device_train_batch_size,
        },
        "beta_ff_init": {
            str(layers): variant_preset(args, "sas", layers).model.get("beta_ff_init")
            for layers in args.depths
            if "sas" in args.blocks
        },
        "match_threshold": depth.MATCH,
        "levels": reference_levels(args),
        "per_depth": per_depth,
        "claims": depth.claims(args.depths, chosen_records, args.blocks),
        "init_diagnostics": {str(k): depth.init_diagnostics(v) for k, v in chosen_records.items()},
        "run_time": {
            "runs": len(every),
            "training_s": sum(r["train_time_s"] for r in every),
            "torch_threads": sorted({r["torch_threads"] for r in every}),
            "jobs": args.jobs,  # runs trained at a time (what docs/reproduction.md says of the run's time)
        },
        # without the per-layer gain trajectories (48 blocks × 4 gains × every log: megabytes the report does not
        # use); each run's own record.json keeps them
        "runs": [{key: value for key, value in r.items() if key != "gains"} for r in every],
    }
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    write_report(result, out)
    return result


def reproduce(args: argparse.Namespace, command: str) -> dict[str, Any] | None:
    """Train (or reuse) every run and write the results; None for a `--jobs` child, which only trains its share."""
    check(args)
    if args.queue:
        train_queue(args)
        return None
    task = task_of(args)
    if args.depths:
        return reproduce_depth(args, command)
    if args.finetune:  # its data first: a download that fails should fail before hours of pre-training
        finetune_data(args, args.finetune)
    trainer = Trainer(args)
    swept = None
    if args.no_sweep:
        lrs = {name: round_lr(preset_lr(args, name)) for name in args.blocks}
    else:
        swept = lr_sweep(args, trainer)
        chosen = analysis.sweep(args.blocks, args.seeds[0], list(trainer.done.values()), swept)
        lrs = {name: row["chosen"] for name, row in chosen.items()}
    shared = lrs["pre_ln"]
    best_runs = [run_at(args, name, seed, lrs[name]) for seed in args.seeds for name in args.blocks]
    shared_runs = [run_at(args, name, seed, shared) for seed in args.seeds for name in args.blocks]
    extra = raptr_runs(args, shared) if args.raptr else []
    trainer.batch("seeds", best_runs + shared_runs + extra)
    tuned = trainer.batch("finetune", finetune_runs(args, lrs)) if args.finetune else []
    every = [record for run, record in trainer.done.items() if not (run.raptr or run.finetune)]
    # every run of every variant, its seeds too; the choice among the swept lrs is the same as above
    sweep = {} if swept is None else analysis.sweep(args.blocks, args.seeds[0], every, swept)
    timing = None
    if args.timing_rounds:
        print(f"{PROG}: measuring every variant's step time ({args.timing_rounds} rounds)", file=sys.stderr)
        timing = measure(args, {name: run_at(args, name, args.seeds[0], lrs[name]) for name in args.blocks})
    settings = {}
    for setting, runs in (("best_lr", best_runs), ("shared_lr", shared_runs)):
        records = [trainer.done[run] for run in runs]
        table = analysis.summarise(records, timing)
        settings[setting] = {"table": table, "claims": analysis.claims(table, records, task, timing)}
    best = [trainer.done[run] for run in best_runs]
    raptr = [trainer.done[run] for run in extra]
    result = {
        "command": command,
        "environment": environment(),
        "preset": args.preset,
        "task": task,
        "criterion": analysis.CRITERION,
        "lrs": {"best_lr": lrs, "shared_lr": shared, "from": "preset" if args.no_sweep else "sweep"},
        "lr_sweep": sweep,
        "settings": settings,
        "timing": timing,
        "signal_propagation": analysis.signal_propagation(best),
        "raptr": analysis.raptr_comparison(best, raptr) if raptr else {},
        "runs": every,
        "raptr_runs": raptr,
        "finetune": {
            "task": args.finetune,
            "data": finetune.TASKS[args.finetune].description,
            "recipe": finetune.RECIPE,
            **analysis.finetune_comparison(tuned),
        }
        if tuned
        else {},
        "finetune_runs": tuned,
    }
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    write_report(result, out)
    return result


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    command = f"{PROG} " + " ".join(sys.argv[1:] if argv is None else argv)
    try:
        result = reproduce(args, command.strip())
        if result is None:  # a --jobs child: its share of the runs is trained and recorded
            return 0
    except UsageError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 2
    except RunFailed as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 1
    print((Path(args.output_dir) / "results.md").read_text())
    if result.get("family") == "depth":
        return 0
    table = result["settings"]["best_lr"]["table"]
    diverged = [name for name, row in table.items() if not math.isfinite(row["eval_loss@100%"][0])]
    if diverged:  # reported in the table; the results are still written and the command goes on
        print(f"{PROG}: note: diverged at their chosen lr: {', '.join(diverged)}", file=sys.stderr)
    return 0
