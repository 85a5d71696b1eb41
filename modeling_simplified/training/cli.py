"""`simplified-train`: train a simplified-transformer model from a preset with the Hugging Face Trainer.

`main` parses argv into a `TrainPlan`, runs it with `train` (`api.py`, which says what a run writes) and prints
the run's headline figures. Bad input (a bad option, unknown preset or field, unreachable dataset, an output
directory holding another run) prints one message and exits with status 2 before anything in the output directory
is written. `--help` and bad options are answered before the training stack (Trainer, datasets, matplotlib) loads.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
from pathlib import Path

from modeling_simplified.fields_simplified import BLOCK_TYPES

from .plan import RaptrOptions, TrainPlan
from .presets import (
    EMBEDDED,
    UsageError,
    add_set_option,
    apply_override,
    available_presets,
    first_line,
    load_preset,
    parse_preset,
    replace_dataset,
    switch_block_type,
)

EPILOG = """examples:
  simplified-train --preset codeparrot-tiny-sas_p                  # embedded data; ~half an hour on 2 busy cores
  simplified-train --preset codeparrot-sas --output-dir runs/sas   # the paper's CodeParrot setting
  simplified-train --preset codeparrot-tiny-sas_p --block-type pre_ln --max-steps 100 --set beta_ff_init=0.2
  simplified-train --preset crammed-bert-tiny-sas_p --set training.learning_rate=2e-3 --diagnostics
  simplified-train --preset glue-finetune --init-from runs/crammed-bert-sas_p --dataset-config sst2
  simplified-train --output-dir runs/x --resume                   # continue from the last checkpoint
  simplified-train --output-dir runs/x --resume --max-steps 600   # train a finished 300-step run to 600 steps

--set takes a model field (any SimplifiedConfig field, e.g. hidden_size=256) or training.<field> /
data.<field> of the preset; values are JSON (numbers, true/false/null) or plain strings.
presets: """


#: the exit status of a run that found the disk full (sysexits.h's EX_IOERR); what it wrote before is intact
EXIT_NO_SPACE = 74


class _Parser(argparse.ArgumentParser):
    """argparse with its errors on one line, as every other error of the CLI (no usage block)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see --help).\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="simplified-train",
        description="Train a simplified transformer (He & Hofmann, ICLR 2024) from a preset with the HF Trainer.",
        epilog=EPILOG + ", ".join(available_presets()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--preset",
        help="preset name (--list-presets; each is a row of a family's table in configuration/<family>.json) or "
        "path to a preset .json; with --resume, defaults to the run's saved preset",
    )
    parser.add_argument(
        "--block-type", choices=BLOCK_TYPES, help="switch the block type (the family's sibling preset if there is one)"
    )
    parser.add_argument(
        "--max-steps",
        type=int,
        help="optimizer steps (overrides the preset's length); with --resume, a larger value trains the run further",
    )
    parser.add_argument("--output-dir", help="run directory (default: runs/<preset>)")
    parser.add_argument(
        "--dataset",
        help=f"'{EMBEDDED}' (offline corpus shipped with Python), a Hugging Face dataset id, or a local folder "
        "(train.jsonl and validation.jsonl, or save_to_disk: docs/training.md); replaces the preset's eval set too "
        "(its validation split)",
    )
    parser.add_argument(
        "--eval-dataset",
        help="the evaluation set when it is not --dataset's validation split: a Hugging Face dataset id or a local "
        "folder (its data.eval_split, default validation)",
    )
    parser.add_argument("--dataset-config", help="dataset config name, e.g. the GLUE task (sst2, cola, mnli, ...)")
    parser.add_argument("--init-from", help="start from a pretrained run (its output dir, export or checkpoint)")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --output-dir from its last complete checkpoint; a finished run is left as it "
        "is (add a larger --max-steps to train it further: the lr schedule is recomputed for the new length)",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace a previous run in --output-dir")
    add_set_option(parser, "override a model field, training.<field> or data.<field> (repeatable)")
    parser.add_argument(
        "--packing",
        action="store_true",
        help="padding-free batches (DataCollatorWithFlattening; causal-lm and masked-lm): texts cut into windows "
        "of at most data.seq_len tokens, each batch one row (same as --set data.packing=true)",
    )
    parser.add_argument(
        "--bf16",
        action="store_true",
        help="bf16 mixed precision (the Trainer's bf16=True: bf16 autocast, float32 weights and optimizer; same as "
        "--set training.bf16=true)",
    )
    parser.add_argument("--diagnostics", action="store_true", help="log per-layer gains and activation kurtosis")
    parser.add_argument("--no-export", action="store_true", help="skip the Hub-ready export")
    raptr = parser.add_argument_group("RaPTr progressive subnetworks (modeling_simplified/training/raptr.py)")
    raptr.add_argument(
        "--raptr",
        metavar="SCHEDULE",
        help="train random subnetworks in stages: average sizes like "
        "'6-8-10-12', or 'recommended' (L/2, +L/6 per stage, full model last)",
    )
    raptr.add_argument(
        "--raptr-lengths",
        default="equal",
        metavar="equal|proportional|STEP,STEP,...",
        help="stage lengths: equal, proportional, or the steps where stages 2..k start",
    )
    raptr.add_argument(
        "--raptr-full-steps",
        type=int,
        default=0,
        metavar="N",
        help="an initial full-model phase of N steps (taken from the last stage)",
    )
    raptr.add_argument(
        "--raptr-scaling",
        help="kept layers' update scale (depth only): sqrt (App. J, default), inverse (1/p), none",
    )
    raptr.add_argument(
        "--raptr-lr-schedule",
        choices=("stagewise", "preset"),
        default="stagewise",
        help="stagewise (default, the paper's, §4 and App. D.4): warmup, the peak lr constant through every stage "
        "but the last, a linear decay to 0 over the last (full-model) stage; preset: the preset's schedule",
    )
    raptr.add_argument(
        "--raptr-variant",
        default="depth",
        help="random subnetworks of layers (depth), of each "
        "MLP's 4 sub-MLPs (mlp) or of each layer's attention heads (attention); sizes count those units, "
        "e.g. --raptr 2-3-4 --raptr-variant mlp",
    )
    parser.add_argument("--list-presets", action="store_true", help="print the presets (name, task, dataset) and exit")
    parser.add_argument("--show", metavar="PRESET", help="print a preset's setting and every field, and exit")
    return parser


# -- argv to a plan --------------------------------------------------------------------------------------------
def plan_from_args(args: argparse.Namespace) -> TrainPlan:
    """The plan of the parsed flags: the preset (or the run's saved one with `--resume`), its block type switched,
    the overrides applied; raises UsageError. `train` validates it and checks the output directory."""
    if args.resume and args.overwrite:
        raise UsageError("--resume and --overwrite exclude each other.")
    if args.preset is None and not (args.resume and args.output_dir):
        raise UsageError(
            f"--preset is required (or --resume with --output-dir); available presets: "
            f"{', '.join(available_presets())}."
        )
    output_dir = Path(args.output_dir or Path("runs") / Path(args.preset).stem)
    saved = output_dir / "preset.json"
    if args.preset is None:
        if not saved.is_file():
            raise UsageError(f"--resume: {output_dir} holds no run (no preset.json); pass --preset.")
        raw = json.loads(saved.read_text())
        name = raw.pop("name", None) if isinstance(raw, dict) else None  # older runs saved no name
        preset = parse_preset(raw, name=name if isinstance(name, str) else output_dir.name, check=False)
    else:
        preset = load_preset(args.preset, check=False)
    if args.block_type:
        preset = switch_block_type(preset, args.block_type, check=False)
    if args.dataset:  # before --set, so that a --set data.<field> of the new dataset stays
        replace_dataset(preset.data, args.dataset)
    if args.eval_dataset:
        preset.data.eval_dataset = args.eval_dataset
    for assignment in args.overrides:
        apply_override(preset, assignment)
    if args.max_steps is not None:
        if args.max_steps < 1:
            raise UsageError(f"--max-steps must be >= 1, got {args.max_steps}.")
        preset.training.max_steps, preset.training.num_train_epochs = args.max_steps, None
    if args.dataset_config:
        preset.data.dataset_config = args.dataset_config
    if args.init_from:
        preset.training.init_from = args.init_from
    if args.packing:
        preset.data.packing = True
    if args.bf16:
        preset.training.bf16 = True
    return TrainPlan(
        preset=preset,
        output_dir=output_dir,
        resume=args.resume,
        overwrite=args.overwrite,
        diagnostics=args.diagnostics,
        export=not args.no_export,
        raptr=raptr_options(args),
    )


def raptr_options(args: argparse.Namespace) -> RaptrOptions | None:
    """The `--raptr*` flags (None without `--raptr`)."""
    if args.raptr is None:
        return None
    lengths = args.raptr_lengths
    if lengths not in ("equal", "proportional"):
        try:
            lengths = [int(x) for x in lengths.split(",")]
        except ValueError:
            raise UsageError(
                f"--raptr-lengths {args.raptr_lengths!r}: allowed values are equal, proportional or "
                "comma-separated step boundaries like 100,200,300."
            ) from None
    return RaptrOptions(
        spec=args.raptr,
        lengths=lengths,
        full_model_steps=args.raptr_full_steps,
        scaling=args.raptr_scaling,
        variant=args.raptr_variant,
        lr_schedule=args.raptr_lr_schedule,
    )


# -- the presets ------------------------------------------------------------------------------------------------
def print_presets(name: str | None = None) -> int:
    """`--list-presets`: one row per preset (name, task, dataset); `--show NAME`: its setting and every field. A
    reader that stops early (`| head`) ends the output quietly, as Python's docs recommend (exit status 1)."""
    try:
        if name is None:
            names = available_presets()
            width = max(map(len, names))
            for preset in (load_preset(n, check=False) for n in names):
                config = f" ({preset.data.dataset_config})" if preset.data.dataset_config else ""
                print(f"{preset.name:{width}s}  {preset.task:23s}  {preset.data.dataset}{config}")
        else:
            preset = load_preset(name, check=False)
            print(f"{preset.name}: {preset.task}\n\n{preset.paper}\n")
            print(json.dumps({k: v for k, v in preset.to_dict().items() if k != "paper"}, indent=2))
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's exit flush would fail again
        return 1
    return 0


# -- bf16 on a CPU ---------------------------------------------------------------------------------------------
#: The widest model (hidden_size) whose training step `benchmarks/bf16_crossover.py` measured slower under bf16
#: autocast than in float32 on one CPU thread; every narrower one measured slower too (docs/benchmark/bf16_crossover.json,
#: docs/training.md, "bf16"). Wider ones were not measured there.
BF16_CPU_SLOWER_UP_TO = 768


def bf16_warning(preset) -> str | None:
    """One line when `--bf16` asks for a CPU run at a width measured slower in bf16 (`BF16_CPU_SLOWER_UP_TO`)."""
    import torch  # here, not at the top: --help, --list-presets and --show answer without importing torch

    width = preset.model.get("hidden_size", 768)
    if not preset.training.bf16 or width > BF16_CPU_SLOWER_UP_TO or torch.cuda.is_available():
        return None
    return (
        f"--bf16 at hidden_size {width} on a CPU: a training step measured slower in bf16 than in float32 at every "
        f"hidden_size up to {BF16_CPU_SLOWER_UP_TO} (docs/training.md, bf16); training goes on in bf16."
    )


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns the exit status: 0, 2 for bad input, 75 for a run a signal stopped after its
    checkpoint (`--resume` continues it), 128 + the signal's number for one stopped at once, 74 for a full disk."""
    args = build_parser().parse_args(argv)  # --help and bad options exit here, before the training stack loads
    if args.list_presets or args.show:
        try:
            return print_presets(args.show)
        except UsageError as err:
            print(f"simplified-train: error: {first_line(err)}", file=sys.stderr)
            return 2
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        plan = plan_from_args(args)
        warning = bf16_warning(plan.preset)
        if warning:
            print(f"simplified-train: warning: {warning}", file=sys.stderr)
        from .api import train  # the Trainer, datasets and matplotlib: only for a run

        result = train(plan)
    except UsageError as err:
        print(f"simplified-train: error: {first_line(err)}", file=sys.stderr)
        return 2
    except (Exception, KeyboardInterrupt) as err:
        # a run stopped by a signal (75 with its checkpoint, 128 + the signal at once: `preemption.py`) or by a full
        # disk (74, sysexits.h's EX_IOERR: `runs.OutOfSpace`): one line and that status, no traceback
        disk_full = isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT)
        status = EXIT_NO_SPACE if disk_full else getattr(err, "exit_code", None)
        if status is None:
            raise
        if getattr(err, "every_rank_stopped", False):  # a signal-stop's checkpoint, saved together: the group is idle
            leave_process_group()
        if int(os.environ.get("RANK", "0")) == 0:
            print(f"simplified-train: {'error: ' * disk_full}{first_line(err)}", file=sys.stderr)
        return status
    leave_process_group()
    if int(os.environ.get("RANK", "0")) != 0:
        return 0
    if result.finished_before:
        print(
            f"simplified-train: the run in {plan.output_dir} is finished ({result.steps} steps); nothing was trained "
            f"or written. To train it further, pass --resume with --max-steps above {result.steps}."
        )
        return 0
    print(f"simplified-train: done in {plan.output_dir}: " + json.dumps(result.summary()))
    return 0


def leave_process_group() -> None:
    """Destroy the torchrun process group the Trainer joined, at a point every rank reaches. Left to interpreter
    exit, gloo's worker threads are torn down after Python and the process aborts (SIGABRT, "terminate called without
    an active exception": pytorch/pytorch#190489). Not after a failure: a rank still in a collective would hang it."""
    import torch  # loaded by the run already; here so that the command's quick answers never import it

    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
