"""Training the reproduction's runs: one `train(plan)` per run, whose record (eval curve, timing, diagnostics) is
kept in the run's folder and reused by a later command with the same plan; `--jobs N` trains a phase's unfinished
runs in N child processes."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

from modeling_simplified.training.api import train

from .analysis import GAIN_KEYS
from .planning import PROG, Run, plan_key

RECORD = "record.json"
#: the folder that holds the `experiments` package: a child process imports it from there
ROOT = Path(__file__).resolve().parents[2]


class RunFailed(Exception):
    """A child process (`--jobs`) failed; the message names its phase, share and log."""


def finished_record(args: argparse.Namespace, run: Run, reuse: bool | None = None) -> dict[str, Any] | None:
    """The record a finished run left in its directory, if it was trained with the plan this command would use
    (and reuse is allowed: by default unless `--retrain`)."""
    path = run.run_dir / RECORD
    if not (not args.retrain if reuse is None else reuse) or not path.is_file():
        return None
    saved = json.loads(path.read_text())
    return saved["record"] if saved.get("plan") == plan_key(run.plan(args)) else None


def run_one(args: argparse.Namespace, run: Run) -> dict[str, Any]:
    """Train one run; returns its record (eval curve, timing, diagnostics), which is also written to
    `run_dir/record.json` with the run's plan."""
    plan = run.plan(args)
    (run.run_dir / RECORD).unlink(missing_ok=True)
    result = train(plan)
    metrics = result.metrics
    trajectories: dict[str, list[list[float]]] = {}
    for step, layers in result.layer_history:
        for i, row in enumerate(layers):
            for key, value in row.items():
                if key in GAIN_KEYS:
                    trajectories.setdefault(f"L{i}/{key}", []).append([step, value])
    evals = result.eval_losses
    record = {
        "block": run.name,
        "block_type": metrics["block_type"],
        "seed": run.seed,
        "steps": result.steps,
        "learning_rate": metrics["learning_rate"],
        "parameters": metrics["parameters"],
        "tokens_per_second": metrics["tokens_per_second"],
        "train_time_s": metrics["train_time_s"],
        "seconds_per_step": metrics["train_time_s"] / max(result.steps, 1),
        "eval_loss": {str(s): evals[s] for s in sorted(evals)},
        "train_loss": [[step, loss] for step, loss in result.train_losses],
        "gains": trajectories,
        "kurtosis": [row["kurtosis"] for row in result.layers if "kurtosis" in row],
        "signal_propagation": {
            when: [row[f"token_cosine_{when}"] for row in result.layers if f"token_cosine_{when}" in row]
            for when in ("init", "end")
        },
        "raptr": None if run.raptr is None else {"setting": run.setting, "spec": run.raptr, **metrics["raptr"]},
        "torch_threads": torch.get_num_threads(),
    }
    (run.run_dir / RECORD).write_text(json.dumps({"plan": plan_key(plan), "record": record}, indent=1) + "\n")
    return record


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
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "OMP_NUM_THREADS": str(max(1, torch.get_num_threads() // max(jobs, 1))), "PYTHONPATH": path}
    children = []
    for i in range(jobs):
        log = Path(args.runs_dir) / f"{phase}-{i}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        print(f"{PROG}: {phase} runs, share {i + 1}/{jobs}, log {log}", file=sys.stderr, flush=True)
        cmd = [sys.executable, "-m", "experiments.reproduce", *child_argv(args, phase, f"{i}/{jobs}")]
        with log.open("w") as handle:
            children.append((i, log, subprocess.Popen(cmd, stdout=handle, stderr=subprocess.STDOUT, env=env)))
    failed = [f"{phase} share {i + 1} (exit {p.returncode}, log {log})" for i, log, p in children if p.wait() != 0]
    if failed:
        raise RunFailed("training failed for " + "; ".join(failed))


def train_phase(args: argparse.Namespace, phase: str, runs: list[Run]) -> list[dict[str, Any]]:
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
            f"{PROG}: {phase} {run.name}, seed {run.seed}, lr {run.lr:g}, {run.steps} steps"
            + (f" (reusing {run.run_dir / RECORD})" if record else ""),
            file=sys.stderr,
            flush=True,
        )
        records.append(record or run_one(args, run))
    return records
