"""bf16 mixed precision against float32 on the causal miniature: does the Trainer's `bf16=True` train the blocks as
float32 does?

Trains `codeparrot-tiny`'s pre_ln, sas and sas_p (default) at the lr the float32 reproduction chose for each
(`docs/reproduction/codeparrot-tiny/results.json`, `lrs.best_lr`), every seed, once in float32 and once with
`training.bf16` (bf16 autocast over float32 master weights and AdamW state), with the same data order, through the
reproduction's own runs (`experiments.reproduce`: `run_at`, `train_runs`; `--jobs` children, finished runs reused).

For both criteria (the reproduction's end-of-run training loss and the final eval loss) each seed's paired
difference (same seed, same batches: bf16 − float32) is set against the float32 seeds' own range: bf16 is *within
float32's seed spread* when every paired difference is smaller than that range (a precision change that moves a
run by less than a change of seed does).

The float32 runs: `--float32 rerun` trains them all; `--float32 committed` trains the first block's first seed
only and, if its every logged loss equals the committed reproduction's record of that run (same plan, same
batches), takes the committed records of the others (the command fails otherwise). Either way each float32 run
trained is compared with its committed record.

Output (default `docs/reproduction/bf16-fidelity/`): `results.json` (every run's record, the comparison),
`results.md` and `loss_curves.png` (training loss per step, both dtypes, every seed).

    python -m experiments.bf16_fidelity --jobs 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

from experiments.reproduce.analysis import CRITERION, end_train_loss, final_eval_loss
from experiments.reproduce.jobs import train_runs
from experiments.reproduce.planning import Run, check, round_lr, run_at
from experiments.reproduce.planning import build_parser as reproduce_parser
from experiments.reproduce.run import environment

PROG = "python -m experiments.bf16_fidelity"
PRESET = "codeparrot-tiny"
BLOCKS = ("pre_ln", "sas", "sas_p")
DTYPES = {"float32": [], "bf16": ["--set", "training.bf16=true"]}
CRITERIA = {"end_train_loss": end_train_loss, "final_eval_loss": final_eval_loss}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", nargs="+", default=list(BLOCKS), help="variants (default: pre_ln sas sas_p)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1], help="seeds (default: 0 1)")
    parser.add_argument(
        "--reference",
        default=f"docs/reproduction/{PRESET}/results.json",
        help="the float32 reproduction whose chosen lrs the runs use and whose records the float32 reruns are "
        "compared with",
    )
    parser.add_argument(
        "--float32",
        choices=("rerun", "committed"),
        default="rerun",
        help="train every float32 run (rerun), or one, checked equal to its committed record, and take the "
        "reference's records for the others (committed) (default: rerun)",
    )
    parser.add_argument(
        "--also",
        action="append",
        default=[],
        metavar="BLOCK=LR",
        help="also train BLOCK at LR in both precisions (repeatable; e.g. sas=0.004, Pre-LN's lr)",
    )
    parser.add_argument("--steps", type=int, help="optimizer steps, a multiple of 20 (default: the preset's)")
    parser.add_argument("--jobs", type=int, default=1, help="child processes, torch threads split (default: 1)")
    parser.add_argument("--runs-dir", default="runs/bf16-fidelity", help="the runs, one folder per dtype")
    parser.add_argument("--output-dir", default="docs/reproduction/bf16-fidelity", help="results, table, plot")
    return parser


def parse_also(args: argparse.Namespace) -> list[tuple[str, float]]:
    """The `--also BLOCK=LR` points, each of a block in `--blocks`."""
    points = []
    for text in args.also:
        name, _, lr = text.partition("=")
        try:
            value = float(lr)
        except ValueError:
            value = float("nan")
        if name not in args.blocks or not value > 0:
            raise SystemExit(f"{PROG}: error: --also {text!r}: expected BLOCK=LR with BLOCK one of {args.blocks}.")
        points.append((name, round_lr(value)))
    return points


def reproduction_args(args: argparse.Namespace, dtype: str) -> argparse.Namespace:
    """The reproduction's arguments for one dtype: the miniature's preset, these blocks and seeds, no timing."""
    argv = ["--preset", PRESET, "--blocks", *args.blocks, "--seeds", *map(str, args.seeds), "--jobs", str(args.jobs)]
    argv += ["--runs-dir", str(Path(args.runs_dir) / dtype), "--timing-rounds", "0", *DTYPES[dtype]]
    argv += ["--steps", str(args.steps)] if args.steps else []
    parsed = reproduce_parser().parse_args(argv)
    check(parsed)
    return parsed


def _key(record: dict[str, Any]) -> tuple[str, int, float]:
    return record["block"], record["seed"], record["learning_rate"]


def label(name: str, lr: float) -> str:
    return f"{name} @ {lr:g}"


def compare(points: list[tuple[str, float]], runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per (block, lr) and criterion: each dtype's per-seed losses, bf16 − float32 per seed, and whether every such
    difference is smaller than the float32 seeds' range."""
    table: dict[str, Any] = {}
    for name, lr in points:
        row: dict[str, Any] = {}
        for criterion, measure in CRITERIA.items():
            seeds = {
                dtype: {r["seed"]: measure(r) for r in records if (r["block"], r["learning_rate"]) == (name, lr)}
                for dtype, records in runs.items()
            }
            f32, bf16 = seeds["float32"], seeds["bf16"]
            spread = max(f32.values()) - min(f32.values())
            differences = [bf16[s] - f32[s] for s in sorted(f32)]
            row[criterion] = {
                "float32": [f32[s] for s in sorted(f32)],
                "bf16": [bf16[s] for s in sorted(f32)],
                "difference": differences,
                "float32_range": spread,
                "within_float32_spread": all(abs(d) < spread for d in differences),
            }
        table[label(name, lr)] = row
    return table


def against_committed(reruns: list[dict[str, Any]], reference: dict[str, Any]) -> dict[str, str]:
    """Whether each float32 rerun's losses (every logged training loss, every eval) equal the committed record's."""
    committed = {_key(r): r for r in reference["runs"]}
    rows = {}
    for r in reruns:
        old = committed.get(_key(r))
        same = old is not None and old["train_loss"] == r["train_loss"] and old["eval_loss"] == r["eval_loss"]
        rows[f"{r['block']} seed {r['seed']}"] = "equal" if same else ("absent" if old is None else "different")
    return rows


def planned(
    args: argparse.Namespace, dtype: str, points: list[tuple[str, float]]
) -> tuple[argparse.Namespace, list[Run]]:
    """One dtype's reproduction arguments and its runs: every seed of every (block, lr)."""
    parsed = reproduction_args(args, dtype)
    return parsed, [run_at(parsed, name, seed, lr) for seed in args.seeds for name, lr in points]


def float32_runs(args, points, reference: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The float32 records (trained, or with `--float32 committed` one trained and the rest the reference's) and
    each trained run's comparison with its committed record."""
    parsed, plan = planned(args, "float32", points)
    if args.float32 == "rerun":
        records = train_runs(parsed, "float32", plan)
        return records, against_committed(records, reference)
    checked = train_runs(parsed, "float32", plan[:1])
    verdict = against_committed(checked, reference)
    if set(verdict.values()) != {"equal"}:
        raise SystemExit(
            f"{PROG}: error: the float32 rerun of {', '.join(verdict)} differs from its committed record; "
            "use --float32 rerun."
        )
    committed = {_key(r): r for r in reference["runs"]}
    return checked + [committed[(run.name, run.seed, run.lr)] for run in plan[1:]], verdict


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "# bf16 mixed precision against float32 (codeparrot-tiny)",
        "",
        f"Command: `{result['command']}`. Each block at the float32 reproduction's chosen lr (and the `--also` "
        f"points), seeds "
        f"{', '.join(map(str, result['seeds']))}, in float32 and with `training.bf16` (bf16 autocast, float32 "
        f"master weights). Criteria: {CRITERION}; and the eval loss at the last step.",
        "",
        "| block @ lr | criterion | float32 (per seed) | bf16 (per seed) | bf16 − float32 (per seed) | float32 "
        "seed range | bf16 within it |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, row in result["comparison"].items():
        for criterion, c in row.items():
            seeds = lambda xs: " / ".join(f"{x:.4f}" for x in xs)  # noqa: E731
            diffs = " / ".join(f"{x:+.4f}" for x in c["difference"])
            lines.append(
                f"| {name} | {criterion.replace('_', ' ')} | {seeds(c['float32'])} | "
                f"{seeds(c['bf16'])} | {diffs} | {c['float32_range']:.4f} | "
                f"{'yes' if c['within_float32_spread'] else 'no'} |"
            )
    taken = "the reference's records but the first" if result["float32"] == "committed" else "every one trained"
    lines += ["", f"float32 runs: {taken}; trained ones against the committed records (every logged loss):", ""]
    lines += [f"- {run}: {verdict}" for run, verdict in result["float32_vs_committed"].items()]
    lines += ["", "Mean seconds per step (train time / steps, one thread per run):", ""]
    for name, per_dtype in result["seconds_per_step"].items():
        lines.append(f"- {name}: " + ", ".join(f"{dtype} {s:.3f}" for dtype, s in per_dtype.items()))
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = [(p["block"], p["lr"]) for p in result["points"]]
    fig, axes = plt.subplots(1, len(points), figsize=(4.2 * len(points), 3.8), squeeze=False)
    for ax, (name, lr) in zip(axes[0], points):
        for dtype, colour in (("float32", "tab:blue"), ("bf16", "tab:red")):
            for r in (r for r in result["runs"][dtype] if (r["block"], r["learning_rate"]) == (name, lr)):
                steps, losses = zip(*r["train_loss"])
                style = "-" if r["seed"] == result["seeds"][0] else "--"
                ax.plot(steps, losses, style, color=colour, lw=1, label=f"{dtype}, seed {r['seed']}")
        ax.set_title(f"{name} (lr {lr:g})")
        ax.set_xlabel("step")
        ax.set_ylim(top=6.0)  # (the first steps' plateau, above 6, would flatten the rest)
    axes[0][0].set_ylabel("training loss")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    path = out / "loss_curves.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    reference = json.loads(Path(args.reference).read_text())
    points = [(name, reference["lrs"]["best_lr"][name]) for name in args.blocks] + parse_also(args)
    runs: dict[str, list[dict[str, Any]]] = {}
    runs["float32"], checked = float32_runs(args, points, reference)  # first: a failed check fails at once
    parsed, plan = planned(args, "bf16", points)
    runs["bf16"] = train_runs(parsed, "bf16", plan)
    result = {
        "command": f"{PROG} " + " ".join(sys.argv[1:] if argv is None else argv),
        "environment": environment(),
        "preset": PRESET,
        "seeds": args.seeds,
        "points": [{"block": name, "lr": lr} for name, lr in points],
        "comparison": compare(points, runs),
        "float32": args.float32,
        "float32_vs_committed": checked,
        "seconds_per_step": {
            label(name, lr): {
                dtype: statistics.fmean(
                    r["seconds_per_step"] for r in records if (r["block"], r["learning_rate"]) == (name, lr)
                )
                for dtype, records in runs.items()
            }
            for name, lr in points
        },
        # the records without their per-layer gain trajectories (each run's record.json keeps them)
        "runs": {dtype: [{k: v for k, v in r.items() if k != "gains"} for r in rs] for dtype, rs in runs.items()},
    }
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "results.md").write_text(markdown(result))
    plot(result, out)
    print((out / "results.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
