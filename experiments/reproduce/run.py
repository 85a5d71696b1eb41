"""`python -m experiments.reproduce`: the sweep, the final runs (and RaPTr's), then the analysis and the report."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from modeling_simplified.training.presets import UsageError

from .analysis import choose_lrs, claims, raptr_comparison, signal_propagation, summarise
from .jobs import RunFailed, finished_record, train_phase
from .planning import PROG, build_parser, check, final_runs, preset_lr, raptr_runs, sweep_runs
from .report import write_report


def reproduce(args: argparse.Namespace, command: str) -> dict[str, Any] | None:
    """Train (or reuse) every run and write the results; None for a `--jobs` child, which only trains its share."""
    check(args)
    lr_sweep: dict[str, dict[str, Any]] = {}
    if args.no_sweep:
        lrs = {name: preset_lr(args, name) for name in args.blocks}
    else:
        if args.phase != "final":
            train_phase(args, "sweep", sweep_runs(args))
        if args.phase == "sweep":
            return None
        sweep_records = [finished_record(args, run, reuse=True) for run in sweep_runs(args)]
        if None in sweep_records:  # (only a --jobs child of the final phase can get here without the sweep)
            raise RunFailed("the lr sweep's records are missing: run the sweep phase first")
        lr_sweep = choose_lrs(args.blocks, args.seeds[0], sweep_records)
        lrs = {name: row["chosen"] for name, row in lr_sweep.items()}
    finals = final_runs(args, lrs)
    if args.raptr and "pre_ln" in args.blocks:
        finals += raptr_runs(args, lrs["pre_ln"])
    records = train_phase(args, "final", finals)
    if args.phase == "final":
        return None
    raptr_records = [r for r in records if r.get("raptr")]
    records = [r for r in records if not r.get("raptr")]
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    table = summarise(records)
    result = {"command": command, "lr_sweep": lr_sweep, "table": table, "claims": claims(table, records)}
    result |= {
        "signal_propagation": signal_propagation(records),
        "raptr": raptr_comparison(records, raptr_records) if raptr_records else {},
        "runs": records,
        "raptr_runs": raptr_records,
    }
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
    return 0 if all(math.isfinite(r["eval_loss@100%"][0]) for r in result["table"].values()) else 1
