"""Table 2 in miniature: the masked-LM reproduction's pretrained Pre-LN, SAS and SAS-P crammed BERTs
(`python -m experiments.reproduce --preset crammed-bert-tiny`, 4 blocks of width 128, 300 steps on the embedded
prose) scored with `simplified-glue` on the labelled data this project has offline, as GLUE-like tasks: MR (Pang &
Lee's sentence polarity, SST-2's source sentences; `experiments/reproduce/finetune.py`) and the embedded
`stdlib-topic` task (does a stdlib docstring document a GUI or an internet module?). Both score by accuracy.

1. The pretrained runs: each block at the lr the reproduction chose for it (`results.json`'s `lrs.best_lr`), the
   pretraining seed, planned and trained by the reproduction's own code (`planning.run_at`, `jobs.train_runs`): a run
   the reproduction already trained (its `record.json` with the same plan) is reused, else it is trained here.
2. `simplified-glue --init-from <run> --tasks mr=<folder> stdlib-topic=embedded --seeds ...` per block, in `--jobs`
   child processes (one torch thread each); each block's benchmark in `<runs-dir>/glue-tiny/<block>/`, resumable.
3. `docs/reproduction/crammed-bert-tiny-glue/`: `glue.json` (every block's glue.json, the pretrained runs, the
   environment) and `results.md` (the table with per-seed ranges beside the paper's Table 2).

`python -m experiments.glue_tiny` (`make reproduce-glue`); `--seeds 0 1 2` is the paper's 3 seeds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from experiments.reproduce.finetune import TASKS as FINETUNE_SOURCES
from experiments.reproduce.finetune import prepare
from experiments.reproduce.jobs import ROOT, train_runs
from experiments.reproduce.planning import build_parser as reproduce_parser
from experiments.reproduce.planning import check, family_dir, run_at
from experiments.reproduce.run import environment
from modeling_simplified.training.glue import render_table
from modeling_simplified.training.presets import UsageError, first_line

FAMILY = "crammed-bert-tiny"
BLOCKS = ("pre_ln", "sas", "sas_p")
NAMES = {"pre_ln": "Pre-LN", "sas": "SAS", "sas_p": "SAS-P"}
RESULTS = ROOT / "docs" / "reproduction" / FAMILY / "results.json"
OUTPUT = ROOT / "docs" / "reproduction" / f"{FAMILY}-glue"
#: He & Hofmann (2024), Table 2 (App. C): GLUE, MNLI m/mm, SST-2, STS-B, RTE, QNLI, QQP, MRPC, CoLA; 3 seeds
TABLE2 = {
    "Pre-LN": ("78.9±.7", "81.2/81.6", "89.9", "87.6", "56.3", "88.9", "87.1", "88.3", "49.4"),
    "SAS": ("78.4±.8", "79.7/80.1", "90.3", "84.7", "58.4", "87.5", "86.8", "87.5", "50.6"),
    "SAS-P": ("78.3±.4", "79.5/79.4", "90.8", "85.2", "59.1", "87.5", "86.5", "86.0", "50.5"),
}
TABLE2_HEAD = ("GLUE", "MNLI (m/mm)", "SST-2", "STS-B", "RTE", "QNLI", "QQP", "MRPC", "CoLA")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m experiments.glue_tiny", description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", nargs="+", choices=BLOCKS, default=list(BLOCKS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2], help="fine-tuning seeds (default: 0 1 2)")
    parser.add_argument("--pretrain-seed", type=int, default=0, help="the pretrained runs' seed (default: 0)")
    parser.add_argument("--runs-dir", default="runs/reproduction", help="the reproduction's runs (default: its own)")
    parser.add_argument("--jobs", type=int, default=1, help="blocks fine-tuned at once, one thread each (default: 1)")
    parser.add_argument("--output-dir", default=str(OUTPUT), help=f"glue.json and results.md (default: {OUTPUT})")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="train nothing: write glue.json and results.md from the runs finished so far (a benchmark still running "
        "writes its glue.json after each run)",
    )
    return parser


def pretrained_runs(args: argparse.Namespace) -> dict[str, Path]:
    """Each block's pretrained run at its chosen lr, reused or trained by the reproduction's code."""
    lrs = json.loads(RESULTS.read_text())["lrs"]["best_lr"]
    blocks = list(dict.fromkeys(["pre_ln", *args.blocks]))  # the reproduction's check wants its baseline named
    argv = ["--preset", FAMILY, "--blocks", *blocks, "--seeds", str(args.pretrain_seed)]
    reproduce = reproduce_parser().parse_args([*argv, "--runs-dir", args.runs_dir, "--finetune", "none"])
    check(reproduce)
    runs = [run_at(reproduce, block, args.pretrain_seed, lrs[block]) for block in args.blocks]
    train_runs(reproduce, "glue-pretrain", runs)
    return {run.name: run.run_dir for run in runs}


def glue_command(block: str, run_dir: Path, mr: Path, args: argparse.Namespace) -> list[str]:
    out = Path(args.runs_dir) / "glue-tiny" / block
    tasks = [f"mr={mr}", "stdlib-topic=embedded"]
    seeds = [str(s) for s in args.seeds]
    return [
        sys.executable, "-m", "modeling_simplified.training.glue_cli", "--init-from", str(run_dir),
        "--tasks", *tasks, "--seeds", *seeds, "--output", str(out), "--name", NAMES[block],
    ]  # fmt: skip


def fine_tune(args: argparse.Namespace, runs: dict[str, Path], mr: Path) -> None:
    """`simplified-glue` per block, `--jobs` at a time, each child's output in its benchmark folder's log."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false"}
    pending = list(runs.items())
    while pending:
        batch, pending = pending[: args.jobs], pending[args.jobs :]
        children = []
        for block, run_dir in batch:
            log = Path(args.runs_dir) / "glue-tiny" / f"{block}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            print(f"glue_tiny: {block}: simplified-glue, log {log}", file=sys.stderr, flush=True)
            with log.open("a") as handle:
                cmd = glue_command(block, run_dir, mr, args)
                children.append((block, log, subprocess.Popen(cmd, stdout=handle, stderr=subprocess.STDOUT, env=env)))
        failed = [f"{block} (exit {p.returncode}, log {log})" for block, log, p in children if p.wait() != 0]
        if failed:
            raise UsageError("simplified-glue failed for " + "; ".join(failed))


def report(args: argparse.Namespace, runs: dict[str, Path]) -> dict[str, Any]:
    """glue.json (every block's, with its pretrained run's record) and results.md, from the benchmarks' glue.json."""
    out = Path(args.output_dir)
    rows = {}
    for block, run_dir in runs.items():
        glue = json.loads((Path(args.runs_dir) / "glue-tiny" / block / "glue.json").read_text())
        record = json.loads((run_dir / "record.json").read_text())["record"]
        glue["pretraining"] = {
            k: record[k] for k in ("block", "seed", "steps", "learning_rate", "parameters", "tokens_seen")
        }
        glue["pretraining"]["eval_loss"] = record["eval_loss"][str(record["steps"])]
        rows[NAMES[block]] = glue
    summary = {
        "command": "python -m experiments.glue_tiny " + " ".join(a for a in sys.argv[1:] if a != "--report-only"),
        "environment": environment(),
        "pretrained": f"{FAMILY} (python -m experiments.reproduce --preset {FAMILY}), each block at its chosen lr",
        "tasks": {
            "mr": FINETUNE_SOURCES["mr"].description,
            "stdlib-topic": "embedded: stdlib docstrings, internet vs gui",
        },
        "paper_table2": {"columns": TABLE2_HEAD, "rows": TABLE2},
        "blocks": rows,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "glue.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out / "results.md").write_text(results_md(summary))
    return summary


def finished(rows: dict[str, dict[str, Any]]) -> str:
    """The finished fine-tuning seeds of each block and task, e.g. "Pre-LN: mr 0 1, stdlib-topic 0"."""
    return "; ".join(
        f"{name}: "
        + ", ".join(f"{task} seed {' '.join(entry['seeds']) or 'none'}" for task, entry in glue["tasks"].items())
        for name, glue in rows.items()
    )


def results_md(summary: dict[str, Any]) -> str:
    """The miniature's table (with per-seed ranges) beside Table 2, and what differs."""
    rows = summary["blocks"]
    seeds = sorted({s for glue in rows.values() for t in glue["tasks"].values() for s in t["seeds"]}, key=int)
    complete = all(glue["complete"] for glue in rows.values())
    first = next(iter(rows.values()))
    baseline = {name: t.get("baseline") for name, t in first["tasks"].items()}
    lines = [
        "# GLUE-like scores of the tiny crammed BERTs (Table 2 in miniature)",
        "",
        f"Generated by `{summary['command']}` from `glue.json` (commit {summary['environment']['commit']}).",
        "",
        "Each block's pretrained run of the masked-LM reproduction (4 blocks, width 128, 300 steps on the embedded "
        "prose; the lr the reproduction chose for the block) fine-tuned by `simplified-glue` with the `glue-finetune` "
        "preset (App. D.2 / cramming: 5 epochs, batch 32, lr 1.5e-4, cosine decay, dropout 0.1) on two GLUE-like "
        "tasks, accuracy ×100 on their validation splits; mean over the fine-tuning seeds "
        f"{', '.join(seeds)} (min–max in brackets); Score is the mean of the two accuracies, mean ± standard deviation "
        "over the seeds."
        + ("" if complete else f" **Not every seed of every block finished** (finished: {finished(rows)})."),
        "",
        render_table(rows),
        "Tasks: " + "; ".join(f"`{name}`: {text}" for name, text in summary["tasks"].items()) + ".",
        "Pretrained runs (seed "
        + ", ".join(sorted({str(g["pretraining"]["seed"]) for g in rows.values()}))
        + "; masked-LM eval loss at the end): "
        + "; ".join(
            f"{name} lr {g['pretraining']['learning_rate']:g}, loss {g['pretraining']['eval_loss']:.2f}"
            for name, g in rows.items()
        )
        + ".",
        "Constant prediction (most frequent training class): "
        + "; ".join(f"{name} {100 * b['validation']['accuracy']:.1f}" for name, b in baseline.items() if b)
        + ".",
        "",
        "## The paper's Table 2 (He & Hofmann 2024, App. C; crammed BERT, 3 seeds)",
        "",
        "|  | " + " | ".join(summary["paper_table2"]["columns"]) + " |",
        "|" + "---|" * (len(summary["paper_table2"]["columns"]) + 1),
        *("| " + name + " | " + " | ".join(cells) + " |" for name, cells in summary["paper_table2"]["rows"].items()),
        "",
        "## What differs",
        "",
        "- Tasks: MR and stdlib-topic, not GLUE's eight (GLUE's host is not reachable here); both are binary and "
        "scored by accuracy, so Score is the mean of two accuracies, not cramming's GLUE score over nine "
        "numbers (`simplified-glue` computes that one when pointed at `nyu-mll/glue`).",
        "- Scale: a 4-block, width-128 model pretrained for 300 steps (about 1.2M tokens) on a CPU, against the "
        "paper's 16-block, width-768 crammed BERT pretrained for 24 hours on the Pile; the fine-tuning recipe is the "
        "same.",
        "- Seeds: the paper fine-tunes 3 seeds; this table has the seeds listed above, from one pretrained run per "
        "block."
        + ("" if complete else " The remaining runs: `make reproduce-glue` (resumable: the finished runs are reused)."),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.report_only:
            lrs = json.loads(RESULTS.read_text())["lrs"]["best_lr"]
            reproduce = reproduce_parser().parse_args(["--preset", FAMILY, "--runs-dir", args.runs_dir])
            runs = {b: run_at(reproduce, b, args.pretrain_seed, lrs[b]).run_dir for b in args.blocks}
        else:
            runs = pretrained_runs(args)
            mr = prepare(
                "mr", family_dir(reproduce_parser().parse_args(["--runs-dir", args.runs_dir, "--preset", FAMILY]))
            )
            fine_tune(args, runs, mr)
        report(args, runs)
    except UsageError as err:
        print(f"glue_tiny: error: {first_line(err)}", file=sys.stderr)
        return 2
    print(f"glue_tiny: wrote {Path(args.output_dir) / 'results.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
