"""The training core: a `TrainPlan` (`plan.py`) in, a `TrainResult` out. `train(plan)` builds the model, the data
and the `SimplifiedTrainer`, runs it and writes the run's folder; `simplified-train` (`cli.py`) parses argv into a
plan and calls it, and the tools outside the library (the demo, the reproduction) build plans directly.

A run writes into its output directory: Trainer checkpoints (`checkpoint-<step>/`), `preset.json` (the resolved
preset), `metrics.json`, `loss_curve.png` and a Hub-ready export (`export/`). Bad input (a bad preset field,
a dataset that cannot be loaded, an output directory holding another run) raises `UsageError` before anything in
the output directory is written. Resuming a finished run (its last checkpoint at the planned steps) writes nothing
and returns the run's own result; a larger `training.max_steps` trains it further.

Under `torchrun` / `accelerate launch` every rank trains (the Trainer's DDP); only the world process zero writes the
run's files (the Trainer's checkpoints, `preset.json`, the plot, the export and `metrics.json`), after every rank has
checked its input.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import tqdm
from transformers import AutoTokenizer, DataCollatorWithPadding, set_seed

from modeling_simplified import SimplifiedForCausalLM, SimplifiedForMaskedLM, SimplifiedForSequenceClassification
from modeling_simplified.hub_cards.export import export_model

from .callbacks import DiagnosticsCallback, LayerStats
from .data import PackingCollator, ResumableMaskingCollator, build_task_data
from .metrics import compute_metrics_for, constant_baseline, metric_names
from .plan import RaptrOptions, TrainPlan
from .plotting import plot_loss_curve
from .preemption import RunInterrupted, StopOnSignal
from .presets import EMBEDDED, DataSpec, Preset, TrainingRecipe, UsageError, build_config, first_line, validate
from .raptr import RaptrCallback, RaptrSpecError
from .runs import STREAM_STATE, out_of_space, pretrained_dir, resume_checkpoint
from .trainer import SimplifiedTrainer, training_arguments

#: the figures `simplified-train` prints when a run ends (those of the task; floats rounded to 4 digits): metrics.json
#: key → the name printed. The training loss twice, each named for what it is: metrics.json's `train_loss` (the last
#: logged value) as `train_loss_final`, and `train_loss_mean` over every step (the Trainer's final log line, which
#: `SimplifiedTrainer.log` names so too).
SUMMARY_KEYS = {
    "steps": "steps",
    "tokens_seen": "tokens_seen",
    "train_loss": "train_loss_final",
    "train_loss_mean": "train_loss_mean",
    "eval_loss": "eval_loss",
    "perplexity": "perplexity",
    "eval_accuracy": "eval_accuracy",
    "eval_f1": "eval_f1",
    "eval_matthews_correlation": "eval_matthews_correlation",
    "eval_pearson": "eval_pearson",
    "eval_spearman": "eval_spearman",
    "eval_mismatched_accuracy": "eval_mismatched_accuracy",
    "majority_baseline": "majority_baseline",
    "training_precision": "training_precision",
    "wall_time_s": "wall_time_s",
}
#: metrics.json's `training_precision` (and the model card's row) by `training.bf16`
TRAINING_PRECISION = {False: "float32", True: "bf16 mixed precision (bf16 autocast, float32 weights)"}


@dataclasses.dataclass
class TrainResult:
    """What a run reports: `metrics` (the content of `metrics.json`: steps, tokens, losses, timings, the RaPTr
    report), this process's Trainer log history, and with `plan.diagnostics` the per-layer diagnostics by name."""

    output_dir: Path
    metrics: dict[str, Any]
    log_history: list[dict[str, Any]]
    #: per layer, the diagnostics at the end (`LayerStats`: "beta_ff", "alpha_mean", "kurtosis", ...)
    layers: list[LayerStats] = dataclasses.field(default_factory=list)
    #: (step, per-layer diagnostics) at every step that logged the training loss
    layer_history: list[tuple[int, list[LayerStats]]] = dataclasses.field(default_factory=list)
    #: `resume` found the run finished (its last checkpoint at the planned steps): nothing was trained or written,
    #: `metrics` and `log_history` are the run's own
    finished_before: bool = False

    @property
    def steps(self) -> int:
        return self.metrics["steps"]

    @property
    def train_loss(self) -> float | None:
        return self.metrics["train_loss"]

    @property
    def eval_loss(self) -> float:
        return self.metrics["eval_loss"]

    @property
    def wall_time_s(self) -> float:
        return self.metrics["wall_time_s"]

    @property
    def eval_losses(self) -> dict[int, float]:
        """The eval loss at every evaluation of this process, by step."""
        return {int(e["step"]): e["eval_loss"] for e in self.log_history if "eval_loss" in e}

    @property
    def train_losses(self) -> list[tuple[int, float]]:
        """(step, training loss) at every step that logged it."""
        return [(e["step"], e["loss"]) for e in self.log_history if "loss" in e]

    def summary(self) -> dict[str, Any]:
        """The headline figures (`SUMMARY_KEYS` present for the task), floats rounded to 4 digits."""
        return {
            name: round(self.metrics[k], 4) if isinstance(self.metrics[k], float) else self.metrics[k]
            for k, name in SUMMARY_KEYS.items()
            if k in self.metrics
        }


# -- checking a plan -------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class CheckedPlan:
    """The folders a checked plan reads: the checkpoint it resumes from, the pretrained model it starts from; and
    whether that checkpoint already reached the planned steps (a finished run: nothing to train)."""

    resume_from: Path | None
    init_from: Path | None
    finished: bool = False


#: The fields that set a run's length: `--resume` with `--max-steps` may change them (to train a run further).
LENGTH_FIELDS = ("training.max_steps", "training.num_train_epochs")


def check_plan(plan: TrainPlan) -> CheckedPlan:
    """Validate the preset (the run's one validation) and resolve the folders the plan reads; raises `UsageError`
    before anything is written."""
    preset, output_dir = plan.preset, plan.output_dir
    if plan.resume and plan.overwrite:
        raise UsageError("--resume and --overwrite exclude each other.")
    validate(preset)
    init_from = pretrained_dir(preset.training.init_from) if preset.training.init_from else None

    resume_from, finished = None, False
    saved = output_dir / "preset.json"
    if plan.resume:
        world = int(os.environ.get("WORLD_SIZE", "1"))  # torchrun's: the RNG states the resume reads
        resume_from = resume_checkpoint(output_dir, world, warn=int(os.environ.get("RANK", "0")) == 0)
        if saved.is_file():
            before = json.loads(saved.read_text())
            now = json.loads(json.dumps(preset.to_dict()))
            # a field added since the run was saved is unchanged when it holds its default
            defaults = {"training": _defaults(TrainingRecipe), "data": _defaults(DataSpec)}
            changed = sorted(
                f"{section}.{key}"
                for section in ("model", "training", "data")
                for key in set(before.get(section, {})) | set(now[section])
                if before.get(section, {}).get(key, defaults.get(section, {}).get(key)) != now[section].get(key)
            )
            if preset.training.max_steps is not None:  # a new length in steps: the run trained further
                changed = [name for name in changed if name not in LENGTH_FIELDS]
            if changed:
                raise UsageError(
                    f"--resume: the settings differ from the run in {output_dir} "
                    f"({', '.join(changed)}); resume with the same preset and overrides (--max-steps may differ)."
                )
        state = json.loads((resume_from / "trainer_state.json").read_text())
        # an epoch-based run's length is the one the Trainer computed and saved (its epochs cannot change on resume)
        planned = preset.training.max_steps or state.get("max_steps") or 0
        finished = 0 < planned <= state.get("global_step", 0)
        if finished and not (output_dir / "metrics.json").is_file():
            raise UsageError(
                f"--resume: the run in {output_dir} reached its last step ({resume_from.name}) but stopped before "
                f"writing metrics.json; export that checkpoint with simplified-export {resume_from} <folder>, or "
                "pass --resume with a larger --max-steps to train further."
            )
    elif output_dir.exists() and (not output_dir.is_dir() or any(output_dir.iterdir())) and not plan.overwrite:
        raise UsageError(
            f"output directory {output_dir} is not empty; pass --resume to continue its run, "
            "--overwrite to replace it, or choose another --output-dir."
        )
    if plan.raptr is not None and preset.training.batch_ramp_to:
        raise UsageError(
            f"--raptr cannot be combined with the batch ramp of preset {preset.name!r} "
            f"(training.batch_ramp_to={preset.training.batch_ramp_to}): its optimizer makes every Trainer step one "
            "micro-batch, so RaPTr would draw a new subnetwork per micro-batch instead of per optimizer update. "
            "Pass --set training.batch_ramp_to=null to train with RaPTr and a fixed batch."
        )
    return CheckedPlan(resume_from=resume_from, init_from=init_from, finished=finished)


def _defaults(cls) -> dict[str, Any]:
    return {f.name: f.default for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}


# -- the run ---------------------------------------------------------------------------------------------------
def train(plan: TrainPlan) -> TrainResult:
    """Train as planned; returns the run's result, whose `metrics` the world process zero also writes to
    `metrics.json`. Bad input raises `UsageError` before anything is written.

    SIGTERM, SIGINT or SIGUSR1 during training stop the run at the end of its optimizer step with a complete
    checkpoint and raise `RunInterrupted` (`preemption.py`; a second signal raises `RunAborted` at once); the
    previous signal handlers are restored when `train` returns. A save or the export that finds the disk full raises
    `runs.OutOfSpace`, what was written before intact."""
    stopper = StopOnSignal()
    with stopper.installed():
        try:
            return _train(plan, stopper)
        except BaseException:
            # a run stopped at once or by a full disk leaves the Trainer's (or the datasets') progress bar open: close
            # it, so that the error printed next starts on a line of its own
            for bar in list(getattr(tqdm.tqdm, "_instances", ())):
                bar.close()
            raise


def _train(plan: TrainPlan, stopper: StopOnSignal) -> TrainResult:
    started = time.time()
    checked = check_plan(plan)
    if checked.finished:
        return _finished_result(plan.output_dir, checked.resume_from)
    raptr_cb = _raptr_callback(plan.raptr) if plan.raptr is not None else None
    # under torchrun / accelerate launch this joins the process group (no file is written)
    args = training_arguments(plan.preset.training, str(plan.output_dir), eval_on_start=checked.resume_from is None)
    model, data = _model_and_data(plan.preset, checked.init_from, checked.resume_from)
    lr_decay_start = _stagewise_decay_start(plan.raptr, raptr_cb, model, args, data.train)
    _start_output_dir(plan, args, checked)
    trainer = _build_trainer(plan, args, model, data, [raptr_cb, stopper], lr_decay_start, started)
    totals = _train_to_the_end(trainer, checked.resume_from, stopper, plan.output_dir)
    result = _result(plan, trainer, model, data, checked, totals)
    if raptr_cb is not None:  # the Trainer may have replaced it by one restored from the checkpoint
        report = next(cb for cb in trainer.callback_handler.callbacks if type(cb) is type(raptr_cb)).report
        result.metrics["raptr"] = {**report, "lr_schedule": plan.raptr.lr_schedule, "lr_decay_start": lr_decay_start}
    wall_before = totals["wall_time_s"] - totals["segments"][-1]["wall_time_s"]  # the earlier processes'
    if trainer.is_world_process_zero():  # it alone writes the plot, the export and metrics.json
        _write_run_files(plan, trainer, model, data, result.metrics, totals, wall_before, started)
    result.metrics["segments"][-1]["wall_time_s"] = time.time() - started  # this process's, to the end
    result.metrics["wall_time_s"] = wall_before + result.metrics["segments"][-1]["wall_time_s"]
    if trainer.is_world_process_zero():
        (plan.output_dir / "metrics.json").write_text(json.dumps(result.metrics, indent=2) + "\n")
    return result


def _stagewise_decay_start(raptr: RaptrOptions | None, callback, model, args, train_dataset) -> int | None:
    """RaPTr's schedule checked for the model and the run's optimizer steps (before anything is written); with the
    stagewise lr schedule, the step where the lr starts to decay (the last stage's start). None without RaPTr."""
    if callback is None:
        return None
    steps = planned_steps(args, train_dataset)
    _check_raptr_schedule(callback, model, steps)
    if raptr.lr_schedule != "stagewise":
        return None
    if steps is None:
        raise UsageError(
            "--raptr-lr-schedule stagewise needs the run's number of optimizer steps, which a dataset "
            "without length does not give: pass --max-steps, or --raptr-lr-schedule preset."
        )
    return callback.build(model.config, steps).stages[-1].start


def _start_output_dir(plan: TrainPlan, args, checked: CheckedPlan) -> None:
    """Everything that can fail on user input has been checked (on every rank: check_plan read the output directory,
    hence the barrier): from here on the world process zero writes the output directory. A new run clears a previous
    run's files; the preset goes to `preset.json`."""
    out, preset = plan.output_dir, plan.preset
    _wait_for_everyone(args)
    if args.process_index == 0:
        out.mkdir(parents=True, exist_ok=True)
        if checked.resume_from is None:
            for stale in [*out.glob("checkpoint-*"), out / "export"]:
                shutil.rmtree(stale, ignore_errors=True)
            for stale in ("metrics.json", "loss_curve.png"):
                (out / stale).unlink(missing_ok=True)
        # the name too, so that `--resume` without `--preset` reports the run under it (not the folder's name)
        (out / "preset.json").write_text(json.dumps({"name": preset.name, **preset.to_dict()}, indent=2) + "\n")
    _wait_for_everyone(args)


def _build_trainer(plan: TrainPlan, args, model, data, callbacks: list, lr_decay_start, started: float):
    """The `SimplifiedTrainer` of the run: the task's collator (padding, masking, packing), the diagnostics callback
    with its probe batch (`plan.diagnostics`), the given callbacks (None ones left out)."""
    preset = plan.preset
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
    diag = DiagnosticsCallback(model) if plan.diagnostics else None
    if diag is not None and data.eval is not None and len(data.eval) and preset.task != "sequence-classification":
        # the signal-propagation probe's batch: the first evaluation examples, padded (no collator: no randomness)
        examples = [{"input_ids": data.eval[i]["input_ids"]} for i in range(min(8, len(data.eval)))]
        diag.probe_batch = dict(data.tokenizer.pad(examples, return_tensors="pt"))
    return SimplifiedTrainer(
        model=model,
        args=args,
        train_dataset=data.train,
        eval_dataset=data.eval,
        data_collator=collator,
        processing_class=data.tokenizer,
        recipe=preset.training,
        diagnostics=diag,
        lr_decay_start=lr_decay_start,
        callbacks=[cb for cb in (diag, *callbacks) if cb],
        compute_metrics=compute_metrics_for(data.glue_task, data.num_labels)
        if preset.task == "sequence-classification"
        else None,
        process_started=started,
    )


def _train_to_the_end(trainer: SimplifiedTrainer, resume_from: Path | None, stopper: StopOnSignal, out: Path):
    """Train (from `resume_from`'s checkpoint if given); a signal stops the run after its step's checkpoint
    (`RunInterrupted`). Returns the whole run's totals (`run_totals`), a resumed run's earlier processes included
    (up to the checkpoint it resumed from)."""
    first_step = 0
    if resume_from is not None:
        first_step = json.loads((resume_from / "trainer_state.json").read_text()).get("global_step", 0)
    output = trainer.train(resume_from_checkpoint=str(resume_from) if resume_from else None)
    if stopper.stopped_at is not None:  # a signal: the checkpoint of this step is saved, the run is not finished
        raise RunInterrupted(stopper.signum, stopper.stopped_at, out)
    totals = trainer.run_totals(output.training_loss * (trainer.state.global_step - first_step))
    if trainer.stream_resume is not None:
        totals["segments"][-1]["stream"] = trainer.stream_resume
    return totals


def _result(plan: TrainPlan, trainer: SimplifiedTrainer, model, data, checked: CheckedPlan, totals) -> TrainResult:
    """The run's figures (`metrics`, what `metrics.json` holds but the wall times and the export) from the trained
    Trainer: the final evaluation (the last logged one at the last step, or a new one), the task's metrics, the
    diagnostics (`plan.diagnostics`)."""
    preset, history = plan.preset, trainer.state.log_history
    train_time = totals["train_time_s"]
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
        # the set the eval figures are of (`--eval-dataset`, else `dataset`'s own) and its split
        "eval_dataset": data.eval_source,
        "eval_split": data.eval_split,
        "parameters": sum(p.numel() for p in model.parameters()),
        "trainable_parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
        "steps": trainer.state.global_step,
        "tokens_seen": tokens,
        "tokens_per_second": tokens / max(train_time, 1e-9),
        "train_loss": train_losses[-1] if train_losses else None,
        "train_loss_mean": totals["loss_sum"] / max(trainer.state.global_step, 1),
        "eval_loss": final_eval["eval_loss"],
        "learning_rate": preset.training.learning_rate,
        "training_precision": TRAINING_PRECISION[preset.training.bf16],
        "train_time_s": train_time,
        "resumed_from": str(checked.resume_from) if checked.resume_from else None,
        # one entry per process: the steps it ran (up to its last checkpoint, for an interrupted one) and its time
        "segments": totals["segments"],
    }
    if preset.task == "sequence-classification":
        metrics.update(_classification_metrics(trainer, data, final_eval))
    else:
        metrics["perplexity"] = math.exp(min(final_eval["eval_loss"], 700.0))
    result = TrainResult(output_dir=plan.output_dir, metrics=metrics, log_history=history)
    diag = trainer.diagnostics
    if diag is not None:
        result.layers, result.layer_history = diag.layers(model), diag.history
        metrics["diagnostics"] = diag.collect(model)
    return result


def _write_run_files(plan: TrainPlan, trainer, model, data, metrics: dict[str, Any], totals, wall_before, started):
    """The world process zero's files: the loss curve and, unless `--no-export`, the Hub-ready export, whose card
    takes the run's figures (`metrics` gets the export's path)."""
    preset, out = plan.preset, plan.output_dir
    curve = plot_loss_curve(
        trainer.state.log_history,
        out / "loss_curve.png",
        title=f"{preset.name} ({model.config.block_type}) on {data.source}",
    )
    if not plan.export:
        return
    run_info = {
        "dataset": data.source,
        "eval_dataset": data.eval_source,
        "eval_split": data.eval_split,
        "steps": metrics["steps"],
        "tokens_seen": metrics["tokens_seen"],
        "learning_rate": preset.training.learning_rate,
        "training_precision": TRAINING_PRECISION[preset.training.bf16],
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
    run_info = {k: v for k, v in run_info.items() if v is not None}
    metrics["export"] = str(_export(trainer, out, data.tokenizer, run_info))


def _export(trainer: SimplifiedTrainer, out: Path, tokenizer, run_info: dict[str, Any]) -> Path:
    """The run's export (`out/export`, staged by `export_model`: a failed one leaves the previous export as it was);
    a full disk raises `OutOfSpace` naming the space it needs (about the weights and tokenizer files of the last
    checkpoint) and the command that exports that checkpoint once there is room."""
    try:
        return Path(export_model(trainer.model, out / "export", tokenizer=tokenizer, run_info=run_info))
    except Exception as err:
        last = out / f"checkpoint-{trainer.state.global_step}"
        state_files = ("optimizer.pt", "scheduler.pt", "trainer_state.json", "training_args.bin", STREAM_STATE)
        needed = sum(
            p.stat().st_size
            for p in last.glob("*")
            if p.is_file() and not p.name.startswith(("rng_state", *state_files))
        )
        full = out_of_space(
            err,
            out / "export",
            needed,
            f"the checkpoints are intact: free some space, then export the last one with simplified-export {last} "
            f"{out / 'export'}.",
        )
        if full is None:
            raise
        raise full from err


def _finished_result(out: Path, checkpoint: Path) -> TrainResult:
    """A finished run's result as it wrote it (`metrics.json`, the last checkpoint's log history), read without
    changing anything: transformers' Trainer, resumed at its last step, would train one more (at lr 0), save a
    checkpoint and rotate out an older one."""
    metrics = json.loads((out / "metrics.json").read_text())
    history = json.loads((checkpoint / "trainer_state.json").read_text()).get("log_history", [])
    return TrainResult(output_dir=out, metrics=metrics, log_history=history, finished_before=True)


def _model_and_data(preset: Preset, init_from: Path | None, resume_from: Path | None = None):
    """Data first (it may fail with a UsageError), then the model built for its tokenizer and labels. The tokenizer
    is the checkpoint's when resuming (a tokenizer trained again may differ: WordPiece training is not deterministic,
    and a stream would be read again for it), the pretrained model's with `init_from`."""
    tokenizer = None
    for option, folder in (("--resume", resume_from), ("--init-from", init_from)):
        if folder is not None:
            try:
                tokenizer = AutoTokenizer.from_pretrained(str(folder))
            except Exception as err:  # noqa: BLE001
                raise UsageError(f"{option} {folder}: no tokenizer there ({first_line(err)}).") from None
            break
    vocab = preset.model.get("vocab_size", 50257)
    data = build_task_data(preset.task, preset.data, vocab, tokenizer)
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
    if init_from is not None:
        fine_tune = {k: v for k, v in preset.model.items() if k.endswith("dropout")}
        try:
            model = _load_for_fine_tuning(cls, init_from, **fine_tune, **extra)
        except Exception as err:  # noqa: BLE001
            raise UsageError(f"--init-from {init_from}: cannot load a model there ({first_line(err)}).") from None
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


def _load_for_fine_tuning(cls, folder: Path, **kwargs):
    """`cls.from_pretrained(folder)`, with transformers' load report replaced by one line when it lists only what
    fine-tuning for another head expects: the trunk loaded whole, the new head's weights missing (so randomly
    initialised), the checkpoint's own head unused. Any other difference (a trunk weight missing or unused, a shape
    mismatch) keeps transformers' report."""
    held: list[logging.LogRecord] = []

    def hold_the_report(record: logging.LogRecord) -> bool:
        if "LOAD REPORT" in str(record.msg):
            held.append(record)
            return False
        return True

    reporter = logging.getLogger("transformers.modeling_utils")
    reporter.addFilter(hold_the_report)
    try:
        model, info = cls.from_pretrained(str(folder), output_loading_info=True, **kwargs)
    finally:
        reporter.removeFilter(hold_the_report)
    trunk = f"{model.base_model_prefix}."
    new, unused = sorted(info["missing_keys"]), sorted(info["unexpected_keys"])
    if info["mismatched_keys"] or any(key.startswith(trunk) for key in (*new, *unused)):
        for record in held:
            reporter.handle(record)
    elif new or unused:
        print(
            f"--init-from {folder}: the pretrained trunk is loaded whole; the new head's "
            f"{', '.join(new) or 'weights'} start from random weights and the checkpoint's head "
            f"({', '.join(unused) or 'none'}) is not used, as fine-tuning for another task expects.",
            file=sys.stderr,
        )
    return model


def _classification_metrics(trainer: SimplifiedTrainer, data, final_eval: dict[str, float]) -> dict[str, Any]:
    """A classifier's figures for `metrics.json`: the task's metrics (`metrics.py`) on every evaluation split by
    name (`eval_metrics`; MNLI's mismatched split evaluated here), the primary split's also flat (`eval_<metric>`,
    as the Trainer logs them) and the other splits' as `eval_<split without "validation_">_<metric>`; and the
    constant prediction's metrics (`baseline`; for classes, `majority_baseline`: its main metric on the primary
    split)."""
    names = metric_names(data.glue_task, data.num_labels)
    splits = {data.eval_split: {name: final_eval[f"eval_{name}"] for name in names}}
    flat = {f"eval_{name}": value for name, value in splits[data.eval_split].items()}
    for split, dataset in data.extra_eval.items():
        prefix = "eval_" + split.removeprefix("validation_")
        scores = trainer.evaluate(eval_dataset=dataset, metric_key_prefix=prefix)
        splits[split] = {name: scores[f"{prefix}_{name}"] for name in names}
        flat.update({f"{prefix}_{name}": value for name, value in splits[split].items()})
    train_labels = data.train["label"]
    baseline = {}
    for split, dataset in {data.eval_split: data.eval, **data.extra_eval}.items():
        predicts, baseline[split] = constant_baseline(data.glue_task, data.num_labels, train_labels, dataset["label"])
    figures = {
        "glue_task": data.glue_task,
        "eval_metrics": splits,
        **flat,
        "baseline": {"predicts": predicts, **baseline},
    }
    if data.num_labels > 1:  # a majority class exists (a regression's constant is in `baseline` alone)
        figures["majority_baseline"] = baseline[data.eval_split][names[0]]
    return figures


def _time_split(segments: list[dict[str, Any]], last_wall_s: float) -> str:
    """The wall time of each process of a resumed run, for the model card."""
    parts = [
        f"steps {seg['from_step']}-{seg['to_step']}: {last_wall_s if i == len(segments) - 1 else seg['wall_time_s']:.0f} s"
        for i, seg in enumerate(segments)
    ]
    return f"{len(segments)} processes (resumed): " + "; ".join(parts)


def planned_steps(args, train_dataset) -> int | None:
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


def _raptr_callback(options: RaptrOptions) -> RaptrCallback:
    """A `RaptrCallback` from the options (bad options: UsageError)."""
    try:
        return RaptrCallback(
            spec=options.spec,
            lengths=options.lengths,
            full_model_steps=options.full_model_steps,
            scaling=options.scaling,
            variant=options.variant,
        )
    except RaptrSpecError as err:
        raise UsageError(f"--raptr: {err}") from None


def _check_raptr_schedule(callback: RaptrCallback, model, steps: int | None) -> None:
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
