"""The reproduction's arguments and the runs they make: every variant (block type or ablation) at every lr of the
sweep, then at its chosen lr for every seed, and pre_ln with RaPTr; each run one `TrainPlan`."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from pathlib import Path
from typing import Any

from modeling_simplified import SimplifiedConfig
from modeling_simplified.configuration_simplified import BLOCKS
from modeling_simplified.training.api import RaptrOptions, TrainPlan
from modeling_simplified.training.presets import (
    UsageError,
    add_set_option,
    apply_override,
    available_presets,
    load_preset,
)
from modeling_simplified.training.raptr import RaptrCallback

PROG = "python -m experiments.reproduce"


@dataclasses.dataclass(frozen=True)
class Variant:
    """What one row of the table trains: the preset family's preset of `block_type`, with `model` overrides."""

    block_type: str
    model: dict[str, Any] = dataclasses.field(default_factory=dict)


#: every block type, and the ablation: skipless SAS without shaped attention (§4.1)
VARIANTS: dict[str, Variant] = {name: Variant(name) for name in BLOCKS} | {
    "sas_softmax": Variant("sas", {"attention_type": "softmax"}),
}
#: the maximum learning rates tried per block type (a logarithmic grid, §4 / App. D.1)
LR_GRID = (1e-3, 2e-3, 4e-3)
PHASES = ("sweep", "final")
#: preset families with a causal-LM preset for every block type
CAUSAL_FAMILIES = ("codeparrot", "codeparrot-tiny")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Train every causal block type and the skipless-softmax ablation on the same data, seeds and "
        "steps; write the table, plots, diagnostics and the paper's claims checked against the table.",
        epilog="examples:\n"
        f"  {PROG}                          # CPU miniature, embedded code corpus\n"
        f"  {PROG} --seeds 0 1 --jobs 2     # two seeds, one process each (the committed results)\n"
        f"  {PROG} --preset codeparrot --preset-shape   # paper scale (GPU), real CodeParrot data",
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
        default=list(VARIANTS),
        choices=list(VARIANTS),
        metavar="BLOCK",
        help=f"block types to train (default: all of {', '.join(VARIANTS)})",
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
        help="train every run again, even where <runs-dir> holds a finished run with the same plan",
    )
    return parser


def check(args: argparse.Namespace) -> None:
    if args.steps < 4 or args.steps % 4:
        raise UsageError(f"--steps must be a positive multiple of 4 (evaluations at 25/50/75/100%), got {args.steps}.")
    names = set(available_presets())
    for name in args.blocks:
        preset = f"{args.preset}-{VARIANTS[name].block_type}"
        if preset not in names:
            raise UsageError(
                f"--preset {args.preset!r}: no preset {preset!r} for block {name!r}; families with "
                f"every block: {', '.join(CAUSAL_FAMILIES)}."
            )
        task = load_preset(preset).task
        if task != "causal-lm":
            raise UsageError(
                f"--preset {args.preset!r}: preset {preset!r} is a {task} preset; the reproduction trains "
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


def preset_name(args: argparse.Namespace, name: str) -> str:
    return f"{args.preset}-{VARIANTS[name].block_type}"


def preset_lr(args: argparse.Namespace, name: str) -> float:
    return load_preset(preset_name(args, name)).training.learning_rate


def final_steps(args: argparse.Namespace, name: str) -> int:
    recipe = load_preset(preset_name(args, name)).training
    return recipe.max_steps if args.preset_shape or args.steps is None else args.steps


def sweep_steps(args: argparse.Namespace, name: str) -> int:
    return args.sweep_steps or max(4, final_steps(args, name) // 8 * 4)


def train_plan(
    args: argparse.Namespace,
    name: str,
    seed: int,
    run_dir: Path,
    lr: float | None = None,
    steps: int | None = None,
    raptr: str | None = None,
) -> TrainPlan:
    """The plan of one variant and seed (default: its preset's lr, the final steps): evaluations at 25/50/75/100%,
    one checkpoint at the end, 40 training logs, the diagnostics, no export."""
    variant = VARIANTS[name]
    preset = load_preset(preset_name(args, name), check=False)
    steps = final_steps(args, name) if steps is None else steps
    recipe = preset.training
    recipe.seed = seed
    recipe.learning_rate = preset_lr(args, name) if lr is None else lr
    recipe.eval_steps, recipe.save_steps, recipe.save_total_limit = steps // 4, steps, 1
    recipe.logging_steps = max(1, steps // 40)
    if not args.preset_shape:
        preset.model.update(
            hidden_size=args.hidden_size,
            intermediate_size=4 * args.hidden_size,
            num_hidden_layers=args.layers,
            num_attention_heads=args.heads,
        )
        preset.data.seq_len = args.seq_len
    preset.model.update(variant.model)
    for assignment in args.overrides:
        apply_override(preset, assignment)
    recipe.max_steps, recipe.num_train_epochs = steps, None  # the run's length, whatever the overrides say
    if args.dataset:
        preset.data.dataset = args.dataset
    return TrainPlan(
        preset=preset,
        output_dir=run_dir,
        overwrite=True,
        explicit_dataset=bool(args.dataset),
        diagnostics=True,
        export=False,
        raptr=RaptrOptions(spec=raptr) if raptr else None,
    )


def plan_key(plan: TrainPlan) -> dict[str, Any]:
    """What makes two plans train the same run (as JSON): the preset's every setting and the RaPTr options."""
    key = {
        "preset": plan.preset.name,
        **plan.preset.to_dict(),
        "explicit_dataset": plan.explicit_dataset,
        "raptr": dataclasses.asdict(plan.raptr) if plan.raptr else None,
    }
    return json.loads(json.dumps(key))


@dataclasses.dataclass(frozen=True)
class Run:
    """One training run: a variant at one seed, lr and length, in its own directory."""

    name: str
    seed: int
    lr: float
    steps: int
    run_dir: Path
    raptr: str | None = None  # a RaPTr schedule (the paper's stagewise lr schedule with it)
    setting: str | None = None  # RaPTr: "equal_steps" or "equal_flops"

    def plan(self, args: argparse.Namespace) -> TrainPlan:
        return train_plan(args, self.name, self.seed, self.run_dir, self.lr, self.steps, self.raptr)


def sweep_runs(args: argparse.Namespace) -> list[Run]:
    """Every variant at every lr of the grid, the first seed, `--sweep-steps` steps."""
    root = Path(args.runs_dir) / "sweep"
    return [
        Run(name, args.seeds[0], lr, sweep_steps(args, name), root / f"lr{lr:g}" / name)
        for lr in args.lr_grid
        for name in args.blocks
    ]


def final_runs(args: argparse.Namespace, lrs: dict[str, float]) -> list[Run]:
    """Every variant at its lr, every seed, the final number of steps."""
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
