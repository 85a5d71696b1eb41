"""The Trainer side of a run: `TrainingArguments` from a recipe, a `Trainer` whose AdamW uses the model core's
weight-decay groups, crammed BERT's batch ramp and RaPTr's stagewise lr schedule (`raptr.py` imports this module,
never the other way round)."""

from __future__ import annotations

import math
import os
import shutil
import time
import warnings
from pathlib import Path
from typing import Any

import torch
from transformers import Trainer, TrainerCallback, TrainingArguments
from transformers.trainer import OPTIMIZER_NAME, SCHEDULER_NAME
from transformers.trainer_callback import ExportableState
from transformers.trainer_pt_utils import nested_gather
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, rotate_checkpoints

from modeling_simplified.optimization import parameter_groups

from .presets import TrainingRecipe, UsageError
from .runs import STREAM_STATE, folder_bytes, latest_checkpoint, out_of_space


def training_arguments(recipe: TrainingRecipe, output_dir: str, **overrides: Any) -> TrainingArguments:
    """TrainingArguments of a recipe: AdamW hyper-parameters, clip, schedule with linear warmup over
    `warmup_ratio` of the steps (0.75 gives crammed BERT's triangle), periodic eval, logging and checkpoints, and
    DDP without `find_unused_parameters`."""
    kwargs: dict[str, Any] = dict(
        output_dir=output_dir,
        max_steps=recipe.max_steps if recipe.max_steps is not None else -1,
        num_train_epochs=recipe.num_train_epochs if recipe.num_train_epochs is not None else 1.0,
        per_device_train_batch_size=recipe.per_device_train_batch_size,
        per_device_eval_batch_size=recipe.per_device_eval_batch_size,
        gradient_accumulation_steps=recipe.gradient_accumulation_steps,
        learning_rate=recipe.learning_rate,
        weight_decay=recipe.weight_decay,
        adam_beta1=recipe.adam_beta1,
        adam_beta2=recipe.adam_beta2,
        adam_epsilon=recipe.adam_epsilon,
        max_grad_norm=recipe.max_grad_norm,
        lr_scheduler_type=recipe.lr_scheduler,
        warmup_steps=recipe.warmup_ratio,  # a float < 1 is a fraction of the steps in transformers 5
        eval_strategy="steps",
        eval_steps=recipe.eval_steps,
        logging_strategy="steps",
        logging_steps=recipe.logging_steps,
        logging_first_step=True,
        logging_nan_inf_filter=False,  # a diverged step logs NaN, not the earlier steps' mean: divergence shows
        save_strategy="steps",
        save_steps=recipe.save_steps,
        save_total_limit=recipe.save_total_limit,
        seed=recipe.seed,
        data_seed=recipe.seed,
        report_to="none",
        disable_tqdm=False,
        include_num_input_tokens_seen="all",
        dataloader_num_workers=recipe.dataloader_num_workers,
        bf16=recipe.bf16,
        use_cpu=not torch.cuda.is_available(),
        # every parameter takes part in every forward (RaPTr's bypassed layers too, with weight 0), so DDP needs no
        # extra traversal of the graph to find unused ones
        ddp_find_unused_parameters=False,
    )
    kwargs.update(overrides)
    return TrainingArguments(**kwargs)


def stagewise_lr_lambda(warmup_steps: int, decay_start: int, total_steps: int):
    """RaPTr's learning-rate schedule (Panigrahi et al. §4 "RaPTr setup", App. D.4): linear warmup, then the peak lr
    held constant through every stage but the last, then a linear decay to 0 over the last, full-model stage
    (`decay_start` is its first step). A factor of the peak lr per optimizer step, for `LambdaLR`."""
    decay_start = max(decay_start, warmup_steps)

    def factor(step: int) -> float:
        if step < warmup_steps:
            return step / max(1, warmup_steps)
        if step < decay_start:
            return 1.0
        return max(0.0, (total_steps - step) / max(1, total_steps - decay_start))

    return factor


class BatchRampAdamW(torch.optim.AdamW):
    """AdamW with crammed BERT's batch ramp (Geiping & Goldstein 2023; paper App. D.2).

    Each call of `step()` is one micro-batch (the Trainer's step). Gradients are summed until the micro-batches
    reach the current batch size, then their mean is applied as one AdamW update. The batch size grows linearly
    from one micro-batch to `final_batch` over `ramp_steps` micro-batch steps, in whole micro-batches, exactly
    as in the cramming code base (`schedule_batch_size`). The learning-rate schedule therefore runs over
    micro-batch steps, as in cramming. Differences from cramming: the Trainer clips each micro-batch's gradient
    before it is accumulated (cramming clips the accumulated one)."""

    def __init__(self, params, *, micro_batch: int, final_batch: int, ramp_steps: int, **kwargs):
        super().__init__(params, **kwargs)
        self.micro_batch, self.final_batch, self.ramp_steps = micro_batch, final_batch, max(1, ramp_steps)
        self.micro_steps = 0  # micro-batches seen
        self.accumulated = 0  # micro-batches in the running sum
        self._sums: dict[torch.Tensor, torch.Tensor] = {}

    def batch_size(self, micro_step: int | None = None) -> int:
        """The batch size in force at `micro_step` (default: now), a multiple of the micro-batch."""
        step = self.micro_steps if micro_step is None else micro_step
        per_step = self.final_batch / self.ramp_steps
        return min(int(step * per_step // self.micro_batch + 1) * self.micro_batch, self.final_batch)

    @torch.no_grad()
    def step(self, closure=None):
        target = self.batch_size() // self.micro_batch
        self.micro_steps += 1
        self.accumulated += 1
        if target == 1 and self.accumulated == 1:
            self.accumulated = 0
            return super().step(closure)
        params = [p for group in self.param_groups for p in group["params"] if p.grad is not None]
        for p in params:
            if p in self._sums:
                self._sums[p].add_(p.grad)
            else:
                self._sums[p] = p.grad.detach().clone()
        if self.accumulated < target:
            return None
        for p in params:
            p.grad.copy_(self._sums.pop(p).div_(self.accumulated))
        self._sums.clear()
        self.accumulated = 0
        return super().step(closure)

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        order = [p for group in self.param_groups for p in group["params"]]
        state["batch_ramp"] = {
            "micro_steps": self.micro_steps,
            "accumulated": self.accumulated,
            "sums": {i: self._sums[p] for i, p in enumerate(order) if p in self._sums},
        }
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state_dict = dict(state_dict)
        ramp = state_dict.pop("batch_ramp", None)
        super().load_state_dict(state_dict)
        if ramp is not None:
            order = [p for group in self.param_groups for p in group["params"]]
            self.micro_steps, self.accumulated = ramp["micro_steps"], ramp["accumulated"]
            self._sums = {order[int(i)]: t.to(order[int(i)].device) for i, t in ramp["sums"].items()}

    def updates_until(self, micro_steps: int) -> int:
        """How many AdamW updates the first `micro_steps` micro-batches make."""
        updates, acc = 0, 0
        for step in range(micro_steps):
            acc += 1
            if acc >= self.batch_size(step) // self.micro_batch:
                updates, acc = updates + 1, 0
        return updates


class RunTotals(TrainerCallback, ExportableState):
    """The run-level figures of a run that may be resumed: the sum of the per-step training losses, the training and
    wall time, and the segments (one per process) they split into. Its state goes into each checkpoint's
    `trainer_state.json` (`stateful_callbacks`) and is read back when training resumes from it, so a resumed run
    reports the whole run. Time a process spent after its last checkpoint (redone after the resume) is not counted.

    The losses of the steps since the last log (`pending_loss`, per process, and `last_logged_step`) are saved apart
    from `loss_sum` and handed back to the Trainer on resume (`resume_logging`), so that the first log after a
    checkpoint between two logs averages the same steps as an uninterrupted run's. (Older checkpoints, without
    them, counted those steps in `loss_sum`.)"""

    ATTRIBUTES = ("loss_sum", "train_time_s", "wall_time_s", "segments", "pending_loss", "last_logged_step")

    def __init__(self, process_started: float | None = None, resume_logging=None):
        self.loss_sum = 0.0  # the per-step training losses summed over the logged steps up to the last checkpoint
        self.train_time_s = 0.0  # from the start of training to the last checkpoint, over the earlier processes
        self.wall_time_s = 0.0  # the same, from each process's start
        self.segments: list[dict[str, Any]] = []  # the earlier processes, up to their last checkpoints
        self.pending_loss: list[float] | None = None  # per process: the losses since the last log, not yet logged
        self.last_logged_step: int | None = None
        self.process_started = process_started  # this process's start (default: training's start)
        self.resume_logging = resume_logging  # called with (pending_loss, last_logged_step) on resume
        self._began, self._first_step, self._first_step_s = None, 0, None

    def state(self) -> dict:
        return {"args": {}, "attributes": {name: getattr(self, name) for name in self.ATTRIBUTES}}

    def on_train_begin(self, args, state, control, **kwargs):
        name = type(self).__name__
        saved = state.stateful_callbacks.get(name)
        if state.global_step > 0 and isinstance(saved, dict):  # resumed: the totals up to the checkpoint
            for key, value in saved.get("attributes", {}).items():
                if key in self.ATTRIBUTES:
                    setattr(self, key, value)
            if self.pending_loss is not None and self.resume_logging is not None:
                self.resume_logging(self.pending_loss, self.last_logged_step)
        if not isinstance(saved, dict):
            state.stateful_callbacks[name] = self.state()  # the Trainer updates an existing entry at each save
        self._began = time.time()
        self.process_started = self.process_started or self._began
        self._first_step = state.global_step
        self._before = (self.loss_sum, self.train_time_s, self.wall_time_s, list(self.segments))

    def on_step_end(self, args, state, control, **kwargs):
        if self._first_step_s is None:  # how long this process took to train its first step (a resume's cost)
            self._first_step_s = time.time() - self.process_started

    def totals(self, segment_loss_sum: float, global_step: int) -> dict[str, Any]:
        """The run's figures now, given this process's loss sum so far and the step it reached."""
        loss_sum, train_time, wall_time, segments = self._before
        now = time.time()
        this = {
            "from_step": self._first_step,
            "to_step": global_step,
            "train_time_s": now - self._began,
            "wall_time_s": now - self.process_started,
            "first_step_s": self._first_step_s,
        }
        return {
            "loss_sum": loss_sum + segment_loss_sum,
            "train_time_s": train_time + this["train_time_s"],
            "wall_time_s": wall_time + this["wall_time_s"],
            "segments": [*segments, this],
        }


class SimplifiedTrainer(Trainer):
    """`Trainer` with the model core's AdamW parameter groups (no decay on gains, norms, biases), crammed BERT's
    batch ramp when the recipe asks for it, RaPTr's stagewise lr schedule when given `lr_decay_start`, the
    diagnostics callback's values merged into the train logs, and a streamed dataset resumed where its checkpoint
    stood.

    A stream (an `IterableDataset`) in a one-process run is read through accelerate's data loader over torchdata's
    `StatefulDataLoader`, whose state (each worker's shard and row) goes into every checkpoint (`STREAM_STATE`). A
    resumed run starts its loader there: the finished shards are not read again and no consumed row is tokenised
    again (`datasets` reads the current shard from its start to the saved row). transformers 5.x saves no loader
    state: without the file (an older checkpoint) the Trainer reads and tokenises the consumed stream again to skip
    it, and the run then saves no state (its skipping loader is not the one that would be saved). Not covered:
    multi-process runs (accelerate's dispatcher reads ahead on rank 0, so its state would be off by those batches;
    they skip), and a state saved after the stream restarted (a resumed Trainer counts passes from 0 again and
    `datasets` applies a state only in its own pass: refused with one error)."""

    def __init__(
        self,
        *args,
        recipe: TrainingRecipe,
        diagnostics=None,
        lr_decay_start: int | None = None,
        process_started: float | None = None,
        **kwargs,
    ):
        self.recipe = recipe
        self.diagnostics = diagnostics
        self.lr_decay_start = lr_decay_start  # RaPTr's stagewise schedule: constant until here, then linear to 0
        super().__init__(*args, **kwargs)
        self.add_callback(RunTotals(process_started, resume_logging=self._resume_logging))
        self._staging: Path | None = None  # while a checkpoint is saved: the folder it is written into
        self._stream_state: dict[str, Any] | None = None  # the checkpoint's, for the resumed run's loader
        #: how a resumed stream found its place: "restored" (the checkpoint's state) or "skipped" (read again)
        self.stream_resume: str | None = None
        self._saves_stream = (
            isinstance(self.train_dataset, torch.utils.data.IterableDataset) and self.args.world_size == 1
        )
        if self._saves_stream:
            self.accelerator.dataloader_config.use_stateful_dataloader = True

    def train(self, resume_from_checkpoint: str | bool | None = None, **kwargs):
        if resume_from_checkpoint is True:  # the newest complete one (`runs.checkpoint_problems`)
            found = latest_checkpoint(
                Path(self.args.output_dir), self.args.world_size, tokenizer=self.processing_class is not None
            )
            if found is None:
                raise UsageError(f"resume_from_checkpoint=True: no complete checkpoint in {self.args.output_dir}.")
            resume_from_checkpoint = str(found)
        if self.args.should_save:  # the staging folders of saves that crashed
            for stale in Path(self.args.output_dir).glob(f".{PREFIX_CHECKPOINT_DIR}-*.partial"):
                shutil.rmtree(stale, ignore_errors=True)
        skip = self.args.ignore_data_skip
        if resume_from_checkpoint and isinstance(self.train_dataset, torch.utils.data.IterableDataset):
            saved = Path(resume_from_checkpoint, STREAM_STATE)
            if self._saves_stream and saved.is_file():
                state = torch.load(saved, weights_only=True)
                if state["pass"] > 0:
                    raise UsageError(
                        f"--resume from {resume_from_checkpoint}: the stream had restarted before this checkpoint "
                        f"(pass {state['pass'] + 1}); a stream resumes within its first pass only. Train fewer steps "
                        "than one pass of the data, or use more of it (data.max_train_samples)."
                    )
                self._stream_state, self.stream_resume = state["loader"], "restored"
                self.args.ignore_data_skip = True  # the loader starts where the checkpoint stood: nothing to skip
            else:
                self.stream_resume, self._saves_stream = "skipped", False
        try:
            return super().train(resume_from_checkpoint=resume_from_checkpoint, **kwargs)
        finally:
            self.args.ignore_data_skip = skip  # saved in `training_args.bin`: the user's value

    def get_train_dataloader(self):
        with warnings.catch_warnings():
            # torchdata 0.11's StatefulDataLoader calls torch.set_vital, deprecated in torch 2.13: not the user's concern
            warnings.filterwarnings("ignore", message="'set_vital' is deprecated", category=UserWarning)
            loader = super().get_train_dataloader()
        if self._stream_state is not None:
            loader.load_state_dict(self._stream_state)
        return loader

    def run_totals(self, segment_loss_sum: float | None = None) -> dict[str, Any]:
        """The whole run's loss sum, train and wall time and segments (`RunTotals.totals`), now. After `train()`,
        pass this process's loss sum (its `training_loss` times the steps it ran)."""
        totals = next(cb for cb in self.callback_handler.callbacks if isinstance(cb, RunTotals))
        if segment_loss_sum is None:  # during training: what is logged so far plus what is not yet
            segment_loss_sum = self._total_loss_scalar + float(self._tr_loss.item())
        return totals.totals(segment_loss_sum, self.state.global_step)

    def _resume_logging(self, pending_loss: list[float], last_logged_step: int | None) -> None:
        """Hand the checkpoint's losses of the steps since its last log back to the running sum the Trainer logs
        from (this process's own when the run had as many processes; `RunTotals`)."""
        rank = self.args.process_index
        value = (
            pending_loss[rank] if len(pending_loss) == self.args.world_size else sum(pending_loss) / len(pending_loss)
        )
        self._tr_loss += torch.tensor(value, dtype=self._tr_loss.dtype, device=self._tr_loss.device)
        if last_logged_step is not None:
            self._globalstep_last_logged = last_logged_step

    def _get_output_dir(self, trial) -> str:
        # while a checkpoint is saved, the Trainer writes its `checkpoint-<step>` folder into the staging folder
        return str(self._staging) if self._staging is not None else super()._get_output_dir(trial)

    def _save_checkpoint(self, model, trial) -> None:
        """The Trainer's checkpoint, written so that a crash mid-save cannot leave a `checkpoint-<step>` folder that
        looks complete: every process writes into a hidden staging folder (`.checkpoint-<step>.partial/`, which no
        checkpoint search matches), and once all have, the world process zero renames it into place (a rename of a
        folder is atomic within one filesystem), as the export is staged (`hub_cards/export.py`). The Trainer's own
        `_save_checkpoint` writes the files (weights, tokenizer, optimizer, scheduler, RNG states, trainer state):
        pointing its run folder (`_get_output_dir`) at the staging folder for the save reuses it whole; verifying the
        files after writing them in place would still leave a moment where a half-written folder has the final name.
        The Trainer's rotation of old checkpoints (`save_total_limit`) runs after the rename, so an older checkpoint
        is deleted only once the new one is complete. A save that runs out of disk space removes its partial files
        and raises `OutOfSpace`."""
        run_dir = Path(super()._get_output_dir(trial))
        name = f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        staging, final = run_dir / f".{name}.partial", run_dir / name
        if self.args.should_save:
            shutil.rmtree(staging, ignore_errors=True)  # left by a save that crashed
        self.accelerator.wait_for_everyone()
        totals = next(cb for cb in self.callback_handler.callbacks if isinstance(cb, RunTotals))
        for key, value in self.run_totals(self._total_loss_scalar).items():
            setattr(totals, key, value)  # saved with the trainer state, read back on resume
        # every process's losses since the last log (a collective: every process saves)
        totals.pending_loss = nested_gather(self._tr_loss.detach()[None], self.args.parallel_mode).reshape(-1).tolist()
        totals.last_logged_step = self._globalstep_last_logged
        loader = self.callback_handler.train_dataloader
        self._staging = staging
        try:
            if self._saves_stream and hasattr(loader, "state_dict"):
                (staging / name).mkdir(parents=True, exist_ok=True)
                state = {"loader": loader.state_dict(), "pass": getattr(loader, "iteration", 0)}
                torch.save(state, staging / name / STREAM_STATE)
            super()._save_checkpoint(model, trial)
            self.accelerator.wait_for_everyone()  # every process's files (`rng_state_<rank>.pth`) are written
            if self.args.should_save:
                if final.exists():  # the same step saved before and found incomplete on resume
                    shutil.rmtree(final)
                os.replace(staging / name, final)
                staging.rmdir()
        except BaseException as err:
            shutil.rmtree(staging, ignore_errors=True)
            if not isinstance(err, Exception):
                raise
            full = out_of_space(
                err,
                final,
                self._checkpoint_bytes(run_dir),
                "the earlier checkpoints are intact: free some space, then continue the run with --resume.",
            )
            if full is None:
                raise
            raise full from err
        finally:
            self._staging = None
        if self.args.should_save:
            rotate_checkpoints(
                output_dir=str(run_dir),
                save_total_limit=self.args.save_total_limit,
                best_model_checkpoint=self.state.best_model_checkpoint,
                use_mtime=True,
            )
        self.accelerator.wait_for_everyone()

    def _checkpoint_bytes(self, run_dir: Path) -> int:
        """About what a checkpoint takes: the newest one's size, at least the model's and the optimizer's tensors."""
        optimizer = getattr(self.optimizer, "optimizer", self.optimizer)
        tensors = [*self.model.state_dict().values()]
        tensors += [v for state in optimizer.state.values() for v in state.values() if torch.is_tensor(v)]
        estimate = sum(t.numel() * t.element_size() for t in tensors)
        newest = max(run_dir.glob(f"{PREFIX_CHECKPOINT_DIR}-*"), key=lambda p: p.stat().st_mtime, default=None)
        return max(estimate, folder_bytes(newest) if newest is not None else 0)

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        """The Trainer goes on with a fresh optimizer and lr schedule when a checkpoint lacks their states: refused,
        a resumed run is the run it continues or nothing."""
        if checkpoint is not None and not (self.is_deepspeed_enabled or self.is_fsdp_enabled):
            missing = [name for name in (OPTIMIZER_NAME, SCHEDULER_NAME) if not Path(checkpoint, name).is_file()]
            if missing:
                raise UsageError(
                    f"resuming from {checkpoint}: {' and '.join(missing)} missing, the run would go on with a fresh "
                    "optimizer or lr schedule; resume from a complete checkpoint."
                )
        super()._load_optimizer_and_scheduler(checkpoint)

    def _issue_warnings_after_load(self, load_result: Any) -> None:
        """A checkpoint of a tied model holds no copy of the tied weights (`lm_head.weight`): not worth a warning."""
        tied = set(getattr(self.model, "all_tied_weights_keys", None) or {})
        if tied and set(load_result.missing_keys) & tied:
            missing = [key for key in load_result.missing_keys if key not in tied]
            load_result = (
                load_result._replace(missing_keys=missing) if hasattr(load_result, "_replace") else load_result
            )
            if not missing:
                self.model.tie_weights()
        super()._issue_warnings_after_load(load_result)

    def create_scheduler(self, num_training_steps: int, optimizer: torch.optim.Optimizer | None = None):
        if self.lr_scheduler is None and self.lr_decay_start is not None:
            factor = stagewise_lr_lambda(
                self.args.get_warmup_steps(num_training_steps), self.lr_decay_start, num_training_steps
            )
            self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer or self.optimizer, factor)
        return super().create_scheduler(num_training_steps, optimizer)

    def create_optimizer(self, model=None) -> torch.optim.Optimizer:
        if self.optimizer is None:
            groups = parameter_groups(self.model if model is None else model, self.args.weight_decay)
            kwargs = dict(
                lr=self.args.learning_rate,
                betas=(self.args.adam_beta1, self.args.adam_beta2),
                eps=self.args.adam_epsilon,
            )
            if self.recipe.batch_ramp_to:
                steps = self.args.max_steps if self.args.max_steps > 0 else self.recipe.max_steps or 1
                self.optimizer = BatchRampAdamW(
                    groups,
                    micro_batch=self.args.per_device_train_batch_size,
                    final_batch=self.recipe.batch_ramp_to,
                    ramp_steps=math.ceil(self.recipe.batch_ramp_fraction * steps),
                    **kwargs,
                )
            else:
                self.optimizer = torch.optim.AdamW(groups, **kwargs)
        return self.optimizer

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if self.diagnostics is not None and "loss" in logs:
            logs.update(self.diagnostics.record(self.state.global_step, self.model))
        ramp = getattr(self.optimizer, "optimizer", self.optimizer)  # accelerate wraps the optimizer
        if isinstance(ramp, BatchRampAdamW) and "loss" in logs:
            logs["batch_size"] = ramp.batch_size()
        if "train_runtime" in logs and "train_loss" in logs:  # the final line's: the mean over this process's steps
            resumed = getattr(self, "_initial_global_step", 0) > 0
            logs["train_loss_mean_since_resume" if resumed else "train_loss_mean"] = logs.pop("train_loss")
        super().log(logs, start_time)
