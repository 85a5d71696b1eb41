"""`simplified-train`: train a simplified-transformer model from a preset with the Hugging Face Trainer.

A run writes into its output directory: Trainer checkpoints (`checkpoint-<step>/`), `preset.json` (the resolved
preset), `metrics.json`, `loss_curve.png` and a Hub-ready export (`export/`). Bad input (unknown preset or field,
unreachable dataset, an output directory holding another run) prints one message and exits with status 2
before anything in the output directory is written.

Under `torchrun` / `accelerate launch` every rank trains (the Trainer's DDP); only the world process zero writes the
run's files (the Trainer's checkpoints, `preset.json`, the plot, the export and `metrics.json`), after every rank has
checked its input.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from transformers import AutoTokenizer, DataCollatorWithPadding, set_seed

from modeling_simplified import SimplifiedForCausalLM, SimplifiedForMaskedLM, SimplifiedForSequenceClassification
from modeling_simplified.configuration_simplified import BLOCK_TYPES
from modeling_simplified.hub_cards.export import export_model

from .callbacks import DiagnosticsCallback
from .data import PackingCollator, ResumableMaskingCollator, build_task_data
from .plotting import plot_loss_curve
from .presets import (
    EMBEDDED,
    Preset,
    UsageError,
    add_set_option,
    apply_override,
    available_presets,
    build_config,
    load_preset,
    parse_preset,
    switch_block_type,
    validate,
)
from .raptr import RaptrCallback, RaptrSpecError
from .runs import latest_checkpoint, pretrained_dir
from .trainer import SimplifiedTrainer, training_arguments

EPILOG = """examples:
  simplified-train --preset codeparrot-tiny-sas_p                  # minutes on a laptop CPU, embedded data
  simplified-train --preset codeparrot-sas --output-dir runs/sas   # the paper's CodeParrot setting
  simplified-train --preset codeparrot-tiny-sas_p --block-type pre_ln --max-steps 100 --set beta_ff_init=0.2
  simplified-train --preset crammed-bert-tiny-sas_p --set training.learning_rate=2e-3 --diagnostics
  simplified-train --preset glue-finetune --init-from runs/crammed-bert-sas_p --dataset-config sst2
  simplified-train --output-dir runs/x --resume                   # continue from the last checkpoint

--set takes a model field (any SimplifiedConfig field, e.g. hidden_size=256) or training.<field> /
data.<field> of the preset; values are JSON (numbers, true/false/null) or plain strings.
presets: """


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="simplified-train",
        description="Train a simplified transformer (He & Hofmann, ICLR 2024) from a preset with the HF Trainer.",
        epilog=EPILOG + ", ".join(available_presets()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--preset",
        help="preset name (configuration/<name>.json) or path to a preset .json; "
        "with --resume, defaults to the run's saved preset",
    )
    parser.add_argument(
        "--block-type", choices=BLOCK_TYPES, help="switch the block type (the family's sibling preset if there is one)"
    )
    parser.add_argument("--max-steps", type=int, help="optimizer steps (overrides the preset's length)")
    parser.add_argument("--output-dir", help="run directory (default: runs/<preset>)")
    parser.add_argument(
        "--dataset",
        help=f"'{EMBEDDED}' (offline corpus shipped with Python), a Hugging Face "
        "dataset id, or a local dataset folder (data files or save_to_disk)",
    )
    parser.add_argument("--dataset-config", help="dataset config name, e.g. the GLUE task (sst2, cola, mnli, ...)")
    parser.add_argument("--init-from", help="start from a pretrained run (its output dir, export or checkpoint)")
    parser.add_argument(
        "--resume", action="store_true", help="continue the run in --output-dir from its last complete checkpoint"
    )
    parser.add_argument("--overwrite", action="store_true", help="replace a previous run in --output-dir")
    add_set_option(parser, "override a model field, training.<field> or data.<field> (repeatable)")
    parser.add_argument(
        "--packing",
        action="store_true",
        help="padding-free batches (DataCollatorWithFlattening; causal-lm and masked-lm): texts cut into windows "
        "of at most data.seq_len tokens, each batch one row (same as --set data.packing=true)",
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
    parser.add_argument("--list-presets", action="store_true", help="print the presets and exit")
    return parser


# -- resolving the run -----------------------------------------------------------------------------------------
@dataclasses.dataclass
class RunPlan:
    preset: Preset
    output_dir: Path
    resume_from: Path | None
    explicit_dataset: bool
    init_from: Path | None


def _first_line(err: BaseException) -> str:
    """What a CLI prints of an error: the first line of its message (load reports and tracebacks stay out)."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def plan_run(args: argparse.Namespace) -> RunPlan:
    """Resolve preset, overrides and output directory; raises UsageError before anything is written."""
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
    for assignment in args.overrides:
        apply_override(preset, assignment)
    if args.max_steps is not None:
        if args.max_steps < 1:
            raise UsageError(f"--max-steps must be >= 1, got {args.max_steps}.")
        preset.training.max_steps, preset.training.num_train_epochs = args.max_steps, None
    if args.dataset:
        preset.data.dataset = args.dataset
    if args.dataset_config:
        preset.data.dataset_config = args.dataset_config
    if args.init_from:
        preset.training.init_from = args.init_from
    if args.packing:
        preset.data.packing = True
    validate(preset)  # the one validation of the run: after the block type, the overrides and the options
    init_from = pretrained_dir(preset.training.init_from) if preset.training.init_from else None

    resume_from = None
    if args.resume:
        resume_from = latest_checkpoint(output_dir)
        if resume_from is None:
            raise UsageError(f"--resume: no complete checkpoint in {output_dir}.")
        if saved.is_file():
            before = json.loads(saved.read_text())
            now = json.loads(json.dumps(preset.to_dict()))
            changed = sorted(
                f"{section}.{key}"
                for section in ("model", "training", "data")
                for key in set(before.get(section, {})) | set(now[section])
                if before.get(section, {}).get(key) != now[section].get(key)
            )
            if changed:
                raise UsageError(
                    f"--resume: the settings differ from the run in {output_dir} "
                    f"({', '.join(changed)}); resume with the same preset and overrides."
                )
    elif output_dir.exists() and (not output_dir.is_dir() or any(output_dir.iterdir())) and not args.overwrite:
        raise UsageError(
            f"output directory {output_dir} is not empty; pass --resume to continue its run, "
            "--overwrite to replace it, or choose another --output-dir."
        )
    return RunPlan(
        preset=preset,
        output_dir=output_dir,
        resume_from=resume_from,
        explicit_dataset=bool(args.dataset),
        init_from=init_from,
    )


# -- the run ---------------------------------------------------------------------------------------------------
def _model_and_tokenizer(plan: RunPlan):
    """Data first (it may fail with a UsageError), then the model built for its tokenizer and labels."""
    preset = plan.preset
    tokenizer = None
    if plan.init_from is not None:
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(plan.init_from))
        except Exception as err:  # noqa: BLE001
            raise UsageError(f"--init-from {plan.init_from}: no tokenizer there ({_first_line(err)}).") from None
    vocab = preset.model.get("vocab_size", 50257)
    data = build_task_data(preset.task, preset.data, vocab, plan.explicit_dataset, tokenizer)
    tokenizer = data.tokenizer
    cls = {
        "causal-lm": SimplifiedForCausalLM,
        "masked-lm": SimplifiedForMaskedLM,
        "sequence-classification": SimplifiedForSequenceClassification,
    }[preset.task]
    extra: dict[str, Any] = {}
    if data.num_labels:
        extra = dict(
            num_labels=data.num_labels,
            id2label=dict(enumerate(data.label_names)),
            label2id={name: i for i, name in enumerate(data.label_names)},
        )
    set_seed(preset.training.seed)
    if plan.init_from is not None:
        fine_tune = {k: v for k, v in preset.model.items() if k.endswith("dropout")}
        try:
            model = cls.from_pretrained(str(plan.init_from), **fine_tune, **extra)
        except Exception as err:  # noqa: BLE001
            raise UsageError(f"--init-from {plan.init_from}: cannot load a model there ({_first_line(err)}).") from None
    else:
        first = lambda *ids: next((i for i in ids if i is not None), None)  # noqa: E731
        specials = dict(
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=first(tokenizer.bos_token_id, tokenizer.cls_token_id),
            eos_token_id=first(tokenizer.eos_token_id, tokenizer.sep_token_id),
        )
        fields = {**preset.model, "vocab_size": len(tokenizer), **specials, **extra}
        model = cls(build_config(fields, where=f"preset {preset.name!r} model"))
    return model, data


def _compute_metrics(eval_pred) -> dict[str, float]:
    logits, labels = eval_pred.predictions, eval_pred.label_ids
    logits = logits[0] if isinstance(logits, tuple) else logits
    if logits.ndim == 2 and logits.shape[-1] == 1:  # regression (STS-B)
        return {"pearson": float(np.corrcoef(logits[:, 0], labels)[0, 1])}
    return {"accuracy": float((logits.argmax(-1) == labels).mean())}


def _export(model, tokenizer, export_dir: Path, run_info: dict[str, Any]) -> Path:
    """The Hub-ready export (`hub_cards/export.py`, installed with the package)."""
    return Path(export_model(model, export_dir, tokenizer=tokenizer, run_info=run_info))


def run(plan: RunPlan, diagnostics: bool = False, export: bool = True, raptr: dict | None = None) -> dict[str, Any]:
    """Train as planned (with `raptr`, the options of a `RaptrCallback`); returns the metrics written to
    `metrics.json`."""
    started = time.time()
    preset, out = plan.preset, plan.output_dir
    if raptr and preset.training.batch_ramp_to:
        raise UsageError(
            f"--raptr cannot be combined with the batch ramp of preset {preset.name!r} "
            f"(training.batch_ramp_to={preset.training.batch_ramp_to}): its optimizer makes every Trainer step one "
            "micro-batch, so RaPTr would draw a new subnetwork per micro-batch instead of per optimizer update. "
            "Pass --set training.batch_ramp_to=null to train with RaPTr and a fixed batch."
        )
    raptr = dict(raptr or {})
    lr_schedule = raptr.pop("lr_schedule", "stagewise")
    raptr_cb = _raptr_callback(raptr) if raptr else None
    # under torchrun / accelerate launch this joins the process group (no file is written)
    args = training_arguments(preset.training, str(out), eval_on_start=plan.resume_from is None)
    main_process = args.process_index == 0
    model, data = _model_and_tokenizer(plan)
    lr_decay_start = None
    if raptr_cb is not None:
        steps = _planned_steps(args, data.train)
        _check_raptr_schedule(raptr_cb, model, steps)
        if lr_schedule == "stagewise":
            if steps is None:
                raise UsageError(
                    "--raptr-lr-schedule stagewise needs the run's number of optimizer steps, which a dataset "
                    "without length does not give: pass --max-steps, or --raptr-lr-schedule preset."
                )
            lr_decay_start = raptr_cb.build(model.config, steps).stages[-1].start

    # everything that can fail on user input has been checked (on every rank: plan_run read the output directory,
    # hence the barrier): from here on the world process zero writes the output directory
    _wait_for_everyone(args)
    if main_process:
        out.mkdir(parents=True, exist_ok=True)
        if plan.resume_from is None:
            for stale in [*out.glob("checkpoint-*"), out / "export"]:
                shutil.rmtree(stale, ignore_errors=True)
            for stale in ("metrics.json", "loss_curve.png"):
                (out / stale).unlink(missing_ok=True)
        # the name too, so that `--resume` without `--preset` reports the run under it (not the folder's name)
        (out / "preset.json").write_text(json.dumps({"name": preset.name, **preset.to_dict()}, indent=2) + "\n")
    _wait_for_everyone(args)

    if preset.task == "sequence-classification":
        collator = DataCollatorWithPadding(data.tokenizer)
    else:
        collator = ResumableMaskingCollator(
            data.tokenizer,
            mlm=preset.task == "masked-lm",
            mlm_probability=preset.data.mlm_probability,
            seed=preset.training.seed,
        )
        if preset.data.packing:
            collator = PackingCollator(collator if preset.task == "masked-lm" else None)
    diag = DiagnosticsCallback(model) if diagnostics else None
    if diag is not None and data.eval is not None and len(data.eval) and preset.task != "sequence-classification":
        # the signal-propagation probe's batch: the first evaluation examples, padded (no collator: no randomness)
        examples = [{"input_ids": data.eval[i]["input_ids"]} for i in range(min(8, len(data.eval)))]
        diag.probe_batch = dict(data.tokenizer.pad(examples, return_tensors="pt"))
    trainer = SimplifiedTrainer(
        model=model,
        args=args,
        train_dataset=data.train,
        eval_dataset=data.eval,
        data_collator=collator,
        processing_class=data.tokenizer,
        recipe=preset.training,
        diagnostics=diag,
        lr_decay_start=lr_decay_start,
        callbacks=[cb for cb in (diag, raptr_cb) if cb] or None,
        compute_metrics=_compute_metrics if preset.task == "sequence-classification" else None,
        process_started=started,
    )
    first_step = 0
    if plan.resume_from is not None:
        first_step = json.loads((plan.resume_from / "trainer_state.json").read_text()).get("global_step", 0)
    result = trainer.train(resume_from_checkpoint=str(plan.resume_from) if plan.resume_from else None)
    # the whole run's figures, a resumed run's earlier processes included (up to the checkpoint it resumed from)
    totals = trainer.run_totals(result.training_loss * (trainer.state.global_step - first_step))
    train_time = totals["train_time_s"]
    history = trainer.state.log_history
    final_eval = (
        next((e for e in reversed(history) if "eval_loss" in e and e.get("step") == trainer.state.global_step), None)
        or trainer.evaluate()
    )
    train_losses = [e["loss"] for e in history if "loss" in e]
    tokens = int(trainer.state.num_input_tokens_seen)
    metrics: dict[str, Any] = {
        "preset": preset.name,
        "task": preset.task,
        "block_type": model.config.block_type,
        "dataset": data.source,
        "parameters": sum(p.numel() for p in model.parameters()),
        "trainable_parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
        "steps": trainer.state.global_step,
        "tokens_seen": tokens,
        "tokens_per_second": tokens / max(train_time, 1e-9),
        "train_loss": train_losses[-1] if train_losses else None,
        "train_loss_mean": totals["loss_sum"] / max(trainer.state.global_step, 1),
        "eval_loss": final_eval["eval_loss"],
        "learning_rate": preset.training.learning_rate,
        "train_time_s": train_time,
        "resumed_from": str(plan.resume_from) if plan.resume_from else None,
        # one entry per process: the steps it ran (up to its last checkpoint, for an interrupted one) and its time
        "segments": totals["segments"],
    }
    if preset.task == "sequence-classification":
        labels = list(data.eval["label"])
        metrics["eval_accuracy"] = final_eval.get("eval_accuracy")
        metrics["majority_baseline"] = max(labels.count(v) for v in set(labels)) / len(labels)
    else:
        metrics["perplexity"] = math.exp(min(final_eval["eval_loss"], 700.0))
    if diag is not None:
        metrics["diagnostics"] = diag.collect(model)
    if raptr_cb is not None:  # the Trainer may have replaced it by one restored from the checkpoint
        metrics["raptr"] = next(cb for cb in trainer.callback_handler.callbacks if type(cb) is type(raptr_cb)).report
        metrics["raptr"] = {**metrics["raptr"], "lr_schedule": lr_schedule, "lr_decay_start": lr_decay_start}
    wall_before = totals["wall_time_s"] - totals["segments"][-1]["wall_time_s"]  # the earlier processes'
    if not trainer.is_world_process_zero():
        metrics["segments"][-1]["wall_time_s"] = time.time() - started
        metrics["wall_time_s"] = wall_before + metrics["segments"][-1]["wall_time_s"]
        return metrics  # the world process zero writes the plot, the export and metrics.json

    curve = plot_loss_curve(
        history, out / "loss_curve.png", title=f"{preset.name} ({model.config.block_type}) on {data.source}"
    )
    if export:
        run_info = {
            "dataset": data.source,
            "steps": metrics["steps"],
            "tokens_seen": tokens,
            "learning_rate": preset.training.learning_rate,
            "train_loss": metrics["train_loss"],
            "eval_loss": metrics["eval_loss"],
            "perplexity": metrics.get("perplexity"),
            "loss_curve": str(curve),
            "license": "apache-2.0",
        }
        hub_id = preset.data.dataset
        if not data.source.startswith(EMBEDDED) and "/" in hub_id and not Path(hub_id).exists():
            run_info["datasets"] = [hub_id]  # Hub ids only: card metadata
        metrics["wall_time_s"] = wall_before + time.time() - started
        run_info["wall_time_s"] = metrics["wall_time_s"]
        if len(totals["segments"]) > 1:
            run_info["wall_time_split"] = _time_split(totals["segments"], metrics["wall_time_s"] - wall_before)
        metrics["export"] = str(
            _export(trainer.model, data.tokenizer, out / "export", {k: v for k, v in run_info.items() if v is not None})
        )
    metrics["segments"][-1]["wall_time_s"] = time.time() - started  # this process's, to the end
    metrics["wall_time_s"] = wall_before + metrics["segments"][-1]["wall_time_s"]
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    return metrics


def _time_split(segments: list[dict[str, Any]], last_wall_s: float) -> str:
    """The wall time of each process of a resumed run, for the model card."""
    parts = [
        f"steps {seg['from_step']}-{seg['to_step']}: {last_wall_s if i == len(segments) - 1 else seg['wall_time_s']:.0f} s"
        for i, seg in enumerate(segments)
    ]
    return f"{len(segments)} processes (resumed): " + "; ".join(parts)


def _raptr_options(args: argparse.Namespace) -> dict | None:
    """The `--raptr*` flags as `RaptrCallback` options (None without `--raptr`)."""
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
    return dict(
        spec=args.raptr,
        lengths=lengths,
        full_model_steps=args.raptr_full_steps,
        scaling=args.raptr_scaling,
        variant=args.raptr_variant,
        lr_schedule=args.raptr_lr_schedule,
    )


def _planned_steps(args, train_dataset) -> int | None:
    """The optimizer steps the Trainer will run: `max_steps`, or for an epoch-based preset the epochs times the
    updates per epoch, computed as the Trainer does (per-process batches over the world size, gradient accumulation,
    a last partial update); None when the dataset has no length."""
    if args.max_steps > 0:
        return args.max_steps
    try:
        samples = len(train_dataset)
    except TypeError:
        return None
    per_step = args.per_device_train_batch_size * args.world_size
    batches = samples // per_step if args.dataloader_drop_last else math.ceil(samples / per_step)
    accumulation = args.gradient_accumulation_steps
    updates = max(batches // accumulation + int(batches % accumulation > 0), 1)
    return math.ceil(args.num_train_epochs * updates)


def _raptr_callback(options: dict):
    """A `RaptrCallback` from the `--raptr*` options (bad options: UsageError)."""
    try:
        return RaptrCallback(**options)
    except RaptrSpecError as err:
        raise UsageError(f"--raptr: {err}") from None


def _check_raptr_schedule(callback, model, steps: int | None) -> None:
    """Build the callback's schedule now (before anything is written) for the model and the run's optimizer steps;
    with a dataset without length (steps None) the callback checks it when training starts."""
    if steps is None:
        return
    try:
        callback.build(model.config, steps)
    except RaptrSpecError as err:
        raise UsageError(f"--raptr: {str(err).rstrip('.')} (the run has {steps} optimizer steps).") from None


def _wait_for_everyone(args) -> None:
    """A barrier across the ranks of a distributed run (nothing otherwise)."""
    state = getattr(args, "distributed_state", None)
    if state is not None:
        state.wait_for_everyone()


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns the exit status (0, or 2 for bad input)."""
    args = build_parser().parse_args(argv)
    if args.list_presets:
        for name in available_presets():
            preset = load_preset(name, check=False)
            print(f"{name:34s} {preset.task:24s} {preset.paper}")
        return 0
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        plan = plan_run(args)
        metrics = run(plan, diagnostics=args.diagnostics, export=not args.no_export, raptr=_raptr_options(args))
    except UsageError as err:
        print(f"simplified-train: error: {_first_line(err)}", file=sys.stderr)
        return 2
    summary = {
        k: round(metrics[k], 4) if isinstance(metrics[k], float) else metrics[k]
        for k in (
            "steps",
            "tokens_seen",
            "train_loss",
            "eval_loss",
            "perplexity",
            "eval_accuracy",
            "majority_baseline",
            "wall_time_s",
        )
        if k in metrics
    }
    if int(os.environ.get("RANK", "0")) != 0:
        return 0
    print(f"simplified-train: done in {plan.output_dir}: " + json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
