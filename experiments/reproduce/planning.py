"""The reproduction's arguments and the runs they make: every variant (block type or ablation) at every lr of its
sweep, the other seeds at its chosen lr and at Pre-LN's, and pre_ln with RaPTr; each run one `TrainPlan`."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from pathlib import Path
from typing import Any

from modeling_simplified import SimplifiedConfig
from modeling_simplified.configuration_simplified import BLOCKS
from modeling_simplified.training.plan import RaptrOptions, TrainPlan
from modeling_simplified.training.presets import (
    Preset,
    UsageError,
    add_set_option,
    apply_override,
    available_presets,
    load_preset,
)
from modeling_simplified.training.raptr import RaptrCallback, parse_sizes

from .finetune import PRESET as FINETUNE_PRESET
from .finetune import TASKS as FINETUNE_TASKS
from .finetune import finetune_plan, prepare
from .finetune import steps as finetune_steps

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
#: the variants a task trains by default: every causal variant; on the masked-LM side Fig. 7's blocks with
#: normalisation less V-SkipInit (Pre-LN, parallel, SAS, SAS-P), and SAS-P without norms
DEFAULT_VARIANTS = {
    "causal-lm": tuple(VARIANTS),
    "masked-lm": ("pre_ln", "parallel", "sas", "sas_p", "simplest"),
}
#: the depth family's variants (Fig. 6): Pre-LN, the simplified blocks with normalisation, and V-SkipInit
DEPTH_VARIANTS = ("pre_ln", "sas", "sas_p", "value_skipinit")
#: the maximum learning rates every sweep starts from (a logarithmic grid, §4: "tuned on training loss, using a
#: logarithmic grid"); a sweep grows by `--lr-factor` past whichever end holds its best lr
LR_GRID = (1e-3, 2e-3, 4e-3)
#: the fields each run's plan sets (its lr, seed, length and the cadence the curves are read at): `--set` may not
#: override them
OWNED_FIELDS = (
    "training.learning_rate",
    "training.seed",
    "training.max_steps",
    "training.num_train_epochs",
    "training.eval_steps",
    "training.logging_steps",
    "training.save_steps",
    "training.save_total_limit",
)
#: evaluations: every 5% of the steps (the loss-vs-time curves interpolate between them)
EVALUATIONS = 20


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Train every block type of a preset family on the same data, seeds and steps, each at the best "
        "lr of a sweep that brackets it and at Pre-LN's; measure each block's step time; write the tables, plots, "
        "diagnostics and the paper's claims checked against them.",
        epilog="examples:\n"
        f"  {PROG}                                   # CPU miniature of the CodeParrot runs (embedded code)\n"
        f"  {PROG} --preset crammed-bert-tiny        # CPU miniature of the crammed-BERT runs (embedded prose)\n"
        f"  {PROG} --seeds 0 1 --jobs 2 --raptr recommended   # the committed causal results\n"
        f"  {PROG} --preset codeparrot               # paper scale (GPU), real CodeParrot data",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--preset",
        default="codeparrot-tiny",
        help="preset family: <family>-<block>.json must exist for every block trained (default: codeparrot-tiny; "
        "crammed-bert-tiny for the masked-LM side)",
    )
    parser.add_argument(
        "--blocks",
        nargs="+",
        choices=list(VARIANTS),
        metavar="BLOCK",
        help=f"variants to train (default: causal families {', '.join(DEFAULT_VARIANTS['causal-lm'])}; "
        f"masked-LM families {', '.join(DEFAULT_VARIANTS['masked-lm'])})",
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1], help="seeds (default: 0 1)")
    parser.add_argument(
        "--steps", type=int, help=f"optimizer steps, a multiple of {EVALUATIONS} (default: the preset's)"
    )
    parser.add_argument(
        "--lr-grid",
        nargs="+",
        type=float,
        default=list(LR_GRID),
        metavar="LR",
        help=f"maximum learning rates every sweep starts from (default: {' '.join(map(str, LR_GRID))})",
    )
    parser.add_argument(
        "--lr-factor",
        type=float,
        default=2.0,
        help="a sweep whose best lr is its smallest (largest) adds that lr divided (multiplied) by this (default: 2)",
    )
    parser.add_argument(
        "--max-lrs",
        type=int,
        default=8,
        help="at most this many lrs per variant: a sweep that reaches it unbracketed is reported so (default: 8)",
    )
    parser.add_argument("--no-sweep", action="store_true", help="no lr sweep: every block at its preset's lr")
    parser.add_argument(
        "--raptr",
        metavar="SPEC",
        help="causal families: also train pre_ln with RaPTr (e.g. recommended) at its chosen lr, every seed, at "
        "equal steps and at equal FLOPs, and the full model with RaPTr's lr schedule (the RaPTr paper's App. D.4)",
    )
    parser.add_argument(
        "--finetune",
        choices=[*FINETUNE_TASKS, "none"],
        help="masked-LM families: fine-tune every variant's pretrained runs at its lr, every seed, on this labelled "
        "task as the paper's Table 1 fine-tunes on GLUE (App. D.2's recipe; mr: Pang & Lee's sentence polarity, "
        "fetched with pip), against pre_ln fine-tuned from scratch (default: mr; none skips it)",
    )
    parser.add_argument("--queue", help=argparse.SUPPRESS)  # a --jobs child: train the runs listed in this file
    parser.add_argument("--shard", help=argparse.SUPPRESS)  # "i/N": every N-th run of the queue from the i-th
    parser.add_argument("--layers", type=int, help="blocks (default: the preset's)")
    parser.add_argument(
        "--depths",
        nargs=2,
        type=int,
        metavar=("SHALLOW", "DEEP"),
        help="the depth family (Fig. 6): every variant swept at SHALLOW blocks, then at DEEP blocks around its "
        f"shallow lr, every seed at each depth's chosen lr (default variants: {', '.join(DEPTH_VARIANTS)})",
    )
    parser.add_argument("--hidden-size", type=int, help="width d; the MLP keeps the preset's ratio (default: preset)")
    parser.add_argument("--heads", type=int, help="attention heads (default: the preset's)")
    parser.add_argument("--seq-len", type=int, help="sequence length (default: the preset's)")
    parser.add_argument("--dataset", help="dataset (default: the preset's; the tiny families' is embedded)")
    add_set_option(parser, "extra override for every block, as in simplified-train")
    parser.add_argument(
        "--timing-rounds",
        type=int,
        default=7,
        help="timed rounds of the step-time measurement after the training (default: 7; 0 skips it)",
    )
    parser.add_argument("--output-dir", help="tables, JSON and plots (default: docs/reproduction/<family>)")
    parser.add_argument(
        "--runs-dir",
        default="runs/reproduction",
        help="the training runs, checkpoints included, under <runs-dir>/<family>/ (default: runs/reproduction)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="train each batch of runs in this many processes at once, torch threads split between them (default: 1)",
    )
    parser.add_argument(
        "--retrain",
        action="store_true",
        help="train every run again, even where <runs-dir> holds a finished run with the same plan",
    )
    return parser


def task_of(args: argparse.Namespace) -> str:
    """The task of the family's pre_ln preset (the family's task)."""
    return load_preset(f"{args.preset}-pre_ln").task


def check(args: argparse.Namespace) -> None:
    """Every argument checked, with one message naming the option and what it allows; fills the defaults that
    depend on the family (`blocks`, `output_dir`)."""
    names = set(available_presets())
    if f"{args.preset}-pre_ln" not in names:
        families = sorted({n.rsplit("-", 1)[0] for n in names if n.endswith("-pre_ln")})
        raise UsageError(
            f"--preset {args.preset!r}: no such family with a pre_ln preset; families: {', '.join(families)}."
        )
    task = task_of(args)
    if task not in DEFAULT_VARIANTS:
        raise UsageError(
            f"--preset {args.preset!r}: its presets are {task} presets; the reproduction pre-trains language models "
            f"({', '.join(DEFAULT_VARIANTS)})."
        )
    if args.depths:
        check_depths(args, task)
    args.blocks = list(args.blocks or (DEPTH_VARIANTS if args.depths else DEFAULT_VARIANTS[task]))
    for name in args.blocks:
        preset = preset_name(args, name)
        if preset not in names:
            raise UsageError(f"--preset {args.preset!r}: no preset {preset!r} for block {name!r}.")
    if "pre_ln" not in args.blocks:
        raise UsageError("--blocks must include pre_ln: every comparison (and the shared lr) is against it.")
    if args.output_dir is None:
        args.output_dir = str(Path("docs/reproduction") / args.preset)
    steps = final_steps(args)
    if steps < EVALUATIONS or steps % EVALUATIONS:
        raise UsageError(f"--steps must be a positive multiple of {EVALUATIONS} (an evaluation every 5%), got {steps}.")
    owned = [a for a in args.overrides if a.split("=", 1)[0].strip() in OWNED_FIELDS]
    if owned:
        raise UsageError(
            f"--set {owned[0]}: the reproduction sets {', '.join(OWNED_FIELDS)} itself (--lr-grid, --seeds, --steps; an evaluation every 5%)."
        )
    if len(set(args.seeds)) != len(args.seeds):
        raise UsageError(f"--seeds must be distinct, got {args.seeds}.")
    if not all(math.isfinite(lr) and lr > 0 for lr in args.lr_grid) or len(set(args.lr_grid)) != len(args.lr_grid):
        raise UsageError(f"--lr-grid must be distinct positive learning rates, got {args.lr_grid}.")
    if not (math.isfinite(args.lr_factor) and args.lr_factor > 1):
        raise UsageError(f"--lr-factor must be greater than 1, got {args.lr_factor}.")
    if args.max_lrs < len(args.lr_grid):
        raise UsageError(f"--max-lrs must be at least the --lr-grid's {len(args.lr_grid)} lrs, got {args.max_lrs}.")
    if args.raptr and task != "causal-lm":
        raise UsageError(f"--raptr: the reproduction compares RaPTr on causal families, not {task} ({args.preset}).")
    if args.finetune is None:
        args.finetune = "mr" if task == "masked-lm" else "none"
    if args.finetune != "none" and task != "masked-lm":
        raise UsageError(f"--finetune: the reproduction fine-tunes masked-LM families, not {task} ({args.preset}).")
    args.finetune = None if args.finetune == "none" else args.finetune
    if args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}.")
    if args.timing_rounds < 0:
        raise UsageError(f"--timing-rounds must be 0 or more, got {args.timing_rounds}.")


def check_depths(args: argparse.Namespace, task: str) -> None:
    """The depth family's own arguments: two depths, the deeper strictly deeper; no option it does not combine with."""
    shallow, deep = args.depths
    if not 0 < shallow < deep:
        raise UsageError(f"--depths must be two depths SHALLOW DEEP with 0 < SHALLOW < DEEP, got {shallow} {deep}.")
    if task != "causal-lm":
        raise UsageError(f"--depths: the depth family is causal (Fig. 6), not {task} ({args.preset}).")
    clash = [
        opt
        for opt, given in (("--layers", args.layers), ("--raptr", args.raptr), ("--no-sweep", args.no_sweep))
        if given
    ]
    if clash:
        raise UsageError(f"--depths sets every run's depth and sweeps its lr: it does not combine with {clash[0]}.")


def preset_name(args: argparse.Namespace, name: str) -> str:
    return f"{args.preset}-{VARIANTS[name].block_type}"


def preset_lr(args: argparse.Namespace, name: str) -> float:
    return load_preset(preset_name(args, name)).training.learning_rate


def final_steps(args: argparse.Namespace) -> int:
    return args.steps if args.steps is not None else load_preset(f"{args.preset}-pre_ln").training.max_steps


def round_lr(lr: float) -> float:
    """An lr as the grid names it (6 significant digits), so that 1e-3·2·2 and 4e-3 are one point."""
    return float(f"{lr:.6g}")


def variant_preset(args: argparse.Namespace, name: str, layers: int | None = None) -> Preset:
    """A variant's preset with the shape options, the variant's model fields and the `--set` overrides applied
    (the overrides last: they may change anything). `layers`: a depth-family run's depth, with βFF's init scaled
    as 1/sqrt(depth) from the preset's (App. D.1: 0.2 at the 18 layers of Fig. 6, 0.1 at 72)."""
    preset = load_preset(preset_name(args, name), check=False)
    model = preset.model
    if args.hidden_size:
        model["intermediate_size"] = model["intermediate_size"] * args.hidden_size // model["hidden_size"]
        model["hidden_size"] = args.hidden_size
    if args.layers:
        model["num_hidden_layers"] = args.layers
    if layers:
        if "beta_ff_init" in model:
            model["beta_ff_init"] = round(model["beta_ff_init"] * math.sqrt(model["num_hidden_layers"] / layers), 6)
        model["num_hidden_layers"] = layers
    if args.heads:
        model["num_attention_heads"] = args.heads
    if args.seq_len:
        preset.data.seq_len = args.seq_len
    model.update(VARIANTS[name].model)
    for assignment in args.overrides:
        apply_override(preset, assignment)
    return preset


def train_plan(args: argparse.Namespace, run: Run) -> TrainPlan:
    """The plan of one run: its variant's preset at the run's seed, lr and steps (with the shape options and
    overrides), evaluations every 5%, one checkpoint at the end, 60 training logs, the diagnostics, no export."""
    preset = variant_preset(args, run.name, run.layers)
    recipe = preset.training
    recipe.seed, recipe.learning_rate = run.seed, run.lr
    recipe.eval_steps, recipe.save_steps, recipe.save_total_limit = run.steps // EVALUATIONS, run.steps, 1
    recipe.logging_steps = max(1, run.steps // 60)
    recipe.max_steps, recipe.num_train_epochs = run.steps, None
    if args.dataset:
        preset.data.dataset = args.dataset
    return TrainPlan(
        preset=preset,
        output_dir=run.run_dir,
        overwrite=True,
        diagnostics=True,
        export=False,
        raptr=RaptrOptions(spec=run.raptr) if run.raptr else None,
    )


def plan_key(plan: TrainPlan) -> dict[str, Any]:
    """What makes two plans train the same run (as JSON): the preset's every setting (not its free-text paper
    note) and the RaPTr options."""
    settings = {k: v for k, v in plan.preset.to_dict().items() if k != "paper"}
    key = {
        "preset": plan.preset.name,
        **settings,
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
    raptr: str | None = None  # a RaPTr schedule (with the paper's stagewise lr schedule)
    # RaPTr: "equal_steps", "equal_flops" or "full_model_same_schedule"; fine-tuning: "pretrained" or "from_scratch"
    setting: str | None = None
    finetune: str | None = None  # a fine-tuning task (`finetune.TASKS`); `lr` is then the pretrained run's
    pretrained: Path | None = None  # the pretrained run it fine-tunes (from scratch: whose tokenizer it uses)
    layers: int | None = None  # a depth-family run's depth (`--depths`); None: the preset's or `--layers`

    def plan(self, args: argparse.Namespace) -> TrainPlan:
        if self.finetune is None:
            return train_plan(args, self)
        model = variant_preset(args, self.name).model
        data = finetune_data(args, self.finetune)
        return finetune_plan(self.run_dir, self.seed, data, self.pretrained, self.setting == "from_scratch", model)

    def describe(self) -> str:
        if self.finetune is None:
            depth = f", {self.layers} blocks" if self.layers else ""
            return f"{self.name}{depth}, seed {self.seed}, lr {self.lr:g}, {self.steps} steps"
        start = "from scratch" if self.setting == "from_scratch" else f"pretrained at lr {self.lr:g}"
        return f"{self.name} fine-tuned on {self.finetune} ({start}), seed {self.seed}, {self.steps} steps"

    def to_json(self) -> dict[str, Any]:
        row = dataclasses.asdict(self)
        return {**row, "run_dir": str(self.run_dir), "pretrained": self.pretrained and str(self.pretrained)}

    @classmethod
    def from_json(cls, row: dict[str, Any]) -> Run:
        pretrained = row.get("pretrained")
        return cls(**{**row, "run_dir": Path(row["run_dir"]), "pretrained": pretrained and Path(pretrained)})


def family_dir(args: argparse.Namespace) -> Path:
    return Path(args.runs_dir) / args.preset


def run_at(args: argparse.Namespace, name: str, seed: int, lr: float, layers: int | None = None) -> Run:
    """A variant at one seed and lr, the final number of steps: `<runs-dir>/<family>/lr<lr>/seed<k>/<variant>`; at
    a depth of the depth family, under `<runs-dir>/<family>/L<layers>/`."""
    lr = round_lr(lr)
    root = family_dir(args) / (f"L{layers}" if layers else "")
    return Run(name, seed, lr, final_steps(args), root / f"lr{lr:g}" / f"seed{seed}" / name, layers=layers)


def raptr_relative_flops(args: argparse.Namespace, layers: int, steps: int) -> float:
    """RaPTr's expected relative layer FLOPs for pre_ln's depth over `steps` steps (the schedule's own figure)."""
    config = SimplifiedConfig(num_hidden_layers=layers, hidden_size=8, num_attention_heads=1, vocab_size=8)
    return RaptrCallback(args.raptr).build(config, steps).expected_relative_flops()


def raptr_runs(args: argparse.Namespace, lr: float) -> list[Run]:
    """pre_ln with RaPTr at its lr, every seed: as many steps as the full model (equal steps), and that many divided
    by the expected relative FLOPs, rounded down to a multiple of 4 (equal FLOPs); and the full model with RaPTr's
    lr schedule (every stage the whole depth, so the same stage boundaries), at equal steps."""
    steps = final_steps(args)
    layers = args.layers or load_preset(f"{args.preset}-pre_ln").model["num_hidden_layers"]
    longer = int(steps / raptr_relative_flops(args, layers, steps)) // 4 * 4
    full_depth = "-".join([str(layers)] * len(parse_sizes(args.raptr, layers)))
    root = family_dir(args) / f"lr{round_lr(lr):g}"
    return [
        Run("pre_ln", seed, round_lr(lr), n, root / f"seed{seed}" / f"pre_ln-raptr-{setting}", spec, setting)
        for setting, n, spec in (
            ("equal_steps", steps, args.raptr),
            ("equal_flops", longer, args.raptr),
            ("full_model_same_schedule", steps, full_depth),
        )
        for seed in args.seeds
    ]


def finetune_data(args: argparse.Namespace, task: str) -> Path:
    """The fine-tuning task's data set folder, prepared once per family (`finetune.prepare`)."""
    return prepare(task, family_dir(args))


def finetune_runs(args: argparse.Namespace, lrs: dict[str, float]) -> list[Run]:
    """Every variant's pretrained run at its lr, every seed, fine-tuned on `--finetune` with the same seed; and, as
    the control, pre_ln's architecture fine-tuned from a random initialisation (with its tokenizer)."""
    data = finetune_data(args, args.finetune)
    steps = finetune_steps(data, load_preset(FINETUNE_PRESET).training.per_device_train_batch_size)[1]
    runs = []
    for seed in args.seeds:
        for name in args.blocks:
            pretrained = run_at(args, name, seed, lrs[name])
            where = pretrained.run_dir.with_name(f"{name}-finetune-{args.finetune}")
            runs.append(
                Run(name, seed, pretrained.lr, steps, where, None, "pretrained", args.finetune, pretrained.run_dir)
            )
        pretrained = run_at(args, "pre_ln", seed, lrs["pre_ln"])
        where = family_dir(args) / "from_scratch" / f"seed{seed}" / f"pre_ln-finetune-{args.finetune}"
        runs.append(
            Run("pre_ln", seed, pretrained.lr, steps, where, None, "from_scratch", args.finetune, pretrained.run_dir)
        )
    return runs
