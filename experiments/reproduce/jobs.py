"""Training the reproduction's runs: one `train(plan)` per run, whose record (eval and training curves, timing,
diagnostics) is kept in the run's folder and reused by a later command with the same plan; `--jobs N` trains a
batch's unfinished runs in N child processes, each taking every N-th run of a queue file."""

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
from .finetune import validation_size
from .planning import PROG, Run, family_dir, finetune_data, plan_key

RECORD = "record.json"
#: the folder that holds the `experiments` package: a child process imports it from there
ROOT = Path(__file__).resolve().parents[2]


class RunFailed(Exception):
    """A child process (`--jobs`) failed; the message names its batch, share and log."""


def run_key(args: argparse.Namespace, run: Run) -> dict[str, Any]:
    """What a finished run must have been trained with to be reused: its plan, and for a fine-tuning run also the
    plan its pretrained run was trained with (a retrained model is fine-tuned again)."""
    key = plan_key(run.plan(args))
    if run.pretrained is not None:
        saved = run.pretrained / RECORD
        key["pretrained_plan"] = json.loads(saved.read_text())["plan"] if saved.is_file() else None
    return key


def finished_record(args: argparse.Namespace, run: Run, reuse: bool | None = None) -> dict[str, Any] | None:
    """The record a finished run left in its directory, if it was trained as this command would train it
    (`run_key`; and reuse is allowed: by default unless `--retrain`)."""
    path = run.run_dir / RECORD
    if not (not args.retrain if reuse is None else reuse) or not path.is_file():
        return None
    saved = json.loads(path.read_text())
    return saved["record"] if saved.get("plan") == run_key(args, run) else None


def run_one(args: argparse.Namespace, run: Run) -> dict[str, Any]:
    """Train one run; returns its record (eval and training curves, timing, diagnostics), which is also written to
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
        "task": plan.preset.task,
        "seed": run.seed,
        "steps": result.steps,
        "learning_rate": metrics["learning_rate"],
        "parameters": metrics["parameters"],
        "tokens_per_second": metrics["tokens_per_second"],
        "tokens_seen": metrics["tokens_seen"],
        # passes over the training set (the Trainer's epoch count at the last log): the paper's runs take one
        "epochs": max((e.get("epoch", 0.0) for e in result.log_history), default=0.0),
        "train_time_s": metrics["train_time_s"],
        "seconds_per_step": metrics["train_time_s"] / max(result.steps, 1),
        "eval_loss": {str(s): evals[s] for s in sorted(evals)},
        "train_loss": [[step, loss] for step, loss in result.train_losses],
        "gains": trajectories,
        "kurtosis": [row["kurtosis"] for row in result.layers if "kurtosis" in row],
        "layers": plan.preset.model.get("num_hidden_layers"),
        "signal_propagation": {
            when: [row[f"token_cosine_{when}"] for row in result.layers if f"token_cosine_{when}" in row]
            for when in ("init", "end")
        },
        "effective_rank": {
            when: [row[f"token_rank_{when}"] for row in result.layers if f"token_rank_{when}" in row]
            for when in ("init", "end")
        },
        "raptr": None if run.raptr is None else {"setting": run.setting, "spec": run.raptr, **metrics["raptr"]},
        "finetune": None
        if run.finetune is None
        else {
            "task": run.finetune,
            "setting": run.setting,
            "pretrained": str(run.pretrained),
            "accuracy": metrics["eval_accuracy"],
            "majority_baseline": metrics["majority_baseline"],
            "eval_examples": validation_size(finetune_data(args, run.finetune)),
            "accuracy_per_epoch": {
                str(e["step"]): e["eval_accuracy"] for e in result.log_history if "eval_accuracy" in e
            },
        },
        "torch_threads": torch.get_num_threads(),
    }
    partial = run.run_dir / (RECORD + ".partial")  # renamed when complete: a record is whole or absent
    partial.write_text(json.dumps({"plan": run_key(args, run), "record": record}, indent=1) + "\n")
    partial.replace(run.run_dir / RECORD)
    return record


def child_argv(args: argparse.Namespace, queue: Path, shard: str) -> list[str]:
    """This command's arguments for one share of a queue of runs, in one process (what a `--jobs` child runs)."""
    argv = ["--preset", args.preset, "--blocks", *args.blocks, "--seeds", *map(str, args.seeds)]
    argv += ["--runs-dir", args.runs_dir, "--queue", str(queue), "--shard", shard]
    for option in ("steps", "layers", "hidden_size", "heads", "seq_len", "dataset"):
        value = getattr(args, option)
        if value is not None:
            argv += ["--" + option.replace("_", "-"), str(value)]
    for s in args.overrides:
        argv += ["--set", s]
    return argv + (["--retrain"] if args.retrain else [])


def train_in_children(args: argparse.Namespace, label: str, runs: list[Run]) -> None:
    """Train `runs` in up to `args.jobs` child processes (child i takes every N-th run from the i-th of a queue
    file), each with the torch threads divided by `--jobs`."""
    jobs = min(args.jobs, len(runs))
    root = family_dir(args)
    root.mkdir(parents=True, exist_ok=True)
    queue = root / f"queue-{label}.json"
    queue.write_text(json.dumps([run.to_json() for run in runs], indent=1) + "\n")
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    threads = max(1, torch.get_num_threads() // args.jobs)  # by --jobs, not by this batch's size: every run alike
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": path}
    children = []
    for i in range(jobs):
        log = root / f"{label}-{i}.log"
        print(f"{PROG}: {label} runs, share {i + 1}/{jobs}, log {log}", file=sys.stderr, flush=True)
        cmd = [sys.executable, "-m", "experiments.reproduce", *child_argv(args, queue, f"{i}/{jobs}")]
        with log.open("w") as handle:
            children.append((i, log, subprocess.Popen(cmd, stdout=handle, stderr=subprocess.STDOUT, env=env)))
    failed = [f"{label} share {i + 1} (exit {p.returncode}, log {log})" for i, log, p in children if p.wait() != 0]
    if failed:
        raise RunFailed("training failed for " + "; ".join(failed))


def train_queue(args: argparse.Namespace) -> None:
    """A `--jobs` child: train its share (`--shard i/N`) of the runs in the `--queue` file."""
    index, count = map(int, args.shard.split("/"))
    runs = [Run.from_json(row) for row in json.loads(Path(args.queue).read_text())]
    for run in runs[index::count]:
        print(f"{PROG}: {run.describe()}", file=sys.stderr, flush=True)
        run_one(args, run)


def train_runs(args: argparse.Namespace, label: str, runs: list[Run]) -> list[dict[str, Any]]:
    """The records of `runs`: reused where finished, trained (in `--jobs` children, or here) where not."""
    unfinished = [run for run in runs if finished_record(args, run) is None]
    in_children = args.jobs > 1 and bool(unfinished)  # even one run: every run then has the same torch threads
    if in_children:
        train_in_children(args, label, unfinished)
    records = []
    for run in runs:
        record = finished_record(args, run, reuse=True if in_children else None)  # the children's, retrained or not
        print(
            f"{PROG}: {label} {run.describe()}" + (f" (reusing {run.run_dir / RECORD})" if record else ""),
            file=sys.stderr,
            flush=True,
        )
        records.append(record or run_one(args, run))
    return records
