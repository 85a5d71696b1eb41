"""RaPTr tools outside the library: `bench` times a training step on half the layers against a full step, and
`compare_runs` plots several `simplified-train` runs' loss curves together. The schedule and the Trainer callback are
in `modeling_simplified/training/raptr.py`.

    python -m benchmarks.raptr --bench
    python -m benchmarks.raptr --compare full=runs/full raptr=runs/raptr --plot raptr_vs_full.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from benchmarks.common import Shape, build, optimizer_for, round_robin, timed, train_step
from modeling_simplified.modeling_simplified import LayerPlan
from modeling_simplified.training.plotting import loss_points
from modeling_simplified.training.raptr import sqrt_scales
from modeling_simplified.training.runs import latest_checkpoint


def bench(
    num_layers: int = 12,
    hidden_size: int = 256,
    seq_len: int = 128,
    batch: int = 8,
    vocab: int = 4096,
    repeats: int = 7,
    block_type: str = "pre_ln",
) -> dict[str, float]:
    """A training step (`common.train_step`) of the full model against one on a (p, I)-subnetwork of half the
    layers (first and last kept, App. J scales), the same model timed round-robin (`common.round_robin`, one warm-up
    round); returns the min and median times and their ratios."""
    shape = Shape(num_layers, hidden_size, max(1, hidden_size // 64), vocab, seq_len, batch)
    torch.manual_seed(0)
    model = build(block_type, shape).train()
    optimizer, ids = optimizer_for(model), torch.randint(0, vocab, (batch, seq_len))
    keep = [i % 2 == 0 or i == num_layers - 1 for i in range(num_layers)]
    keep[num_layers - 2] = False if num_layers > 2 else keep[num_layers - 2]  # exactly L/2 layers, I = {1, L} kept
    plans = {"full": None, "half": LayerPlan(tuple(sqrt_scales(keep)))}

    def step(_name, plan):
        model.model.layer_plan = plan
        train_step(model, optimizer, ids)

    try:
        times = round_robin(plans, timed(step), repeats)
    finally:
        model.model.layer_plan = None
    result = {"layers_kept": sum(keep), "num_layers": num_layers}
    for stat in ("min", "median"):
        for name in plans:
            result[f"{name}_{stat}_s"] = times[name][f"{stat}_s"]
        result[f"half_over_full_{stat}"] = result[f"half_{stat}_s"] / result[f"full_{stat}_s"]
    return result


def compare_runs(runs: dict[str, str], path: str) -> dict[str, dict]:
    """One PNG of the train and eval loss curves of several `simplified-train` runs (label -> run directory) and their
    summaries from `metrics.json` (eval loss, train time, RaPTr FLOPs: expected / realised as counted by the variant's
    `flops_scope`, and the FLOPs really computed)."""
    fig = Figure(figsize=(7.0, 4.2), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    summary = {}
    for (label, run), color in zip(runs.items(), ("tab:blue", "tab:red", "tab:green", "tab:purple")):
        run = Path(run)
        history = json.loads((latest_checkpoint(run) / "trainer_state.json").read_text())["log_history"]
        train, evaluation = loss_points(history)
        ax.plot(*zip(*train), color=color, linewidth=1.0, alpha=0.6, label=f"{label}: train")
        ax.plot(*zip(*evaluation), "o-", color=color, linewidth=1.4, markersize=4, label=f"{label}: eval")
        metrics = json.loads((run / "metrics.json").read_text())
        raptr = metrics.get("raptr", {})
        summary[label] = {
            "eval_loss": metrics["eval_loss"],
            "train_time_s": metrics["train_time_s"],
            "expected_relative_flops": raptr.get("expected_relative_flops", 1.0),
            "realised_relative_flops": raptr.get("realised_relative_flops", 1.0),
            "computed_relative_flops": raptr.get("computed_relative_flops", 1.0),
            "flops_scope": raptr.get("flops_scope"),
        }
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy loss")
    ax.set_ylim(top=min(ax.get_ylim()[1], 8.5))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, format="png")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.raptr",
        description="RaPTr tools: `--bench` times a half-layers step against a full one; "
        "`--compare LABEL=RUN ... --plot PNG` plots runs' loss curves together.",
    )
    parser.add_argument("--bench", action="store_true", help="time a step on half the layers against a full step")
    parser.add_argument("--compare", nargs="+", metavar="LABEL=RUN_DIR", help="simplified-train runs to compare")
    parser.add_argument("--plot", default="raptr_comparison.png", help="the comparison PNG (with --compare)")
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden-size", type=int, default=256)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--block-type", default="pre_ln")
    args = parser.parse_args(argv)
    if args.compare:
        summary = compare_runs(dict(item.split("=", 1) for item in args.compare), args.plot)
        print(json.dumps(summary, indent=2))
        return 0
    if not args.bench:
        parser.print_help()
        return 0
    r = bench(args.layers, args.hidden_size, args.seq_len, args.batch, repeats=args.repeats, block_type=args.block_type)
    print(
        f"RaPTr step on {r['layers_kept']}/{r['num_layers']} layers vs full step ({args.block_type}, "
        f"d={args.hidden_size}, batch {args.batch}x{args.seq_len}, {args.repeats} interleaved repeats):"
    )
    for stat in ("min", "median"):
        print(
            f"  {stat:6s} full {r[f'full_{stat}_s'] * 1e3:8.1f} ms   half {r[f'half_{stat}_s'] * 1e3:8.1f} ms   "
            f"half/full = {r[f'half_over_full_{stat}']:.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
