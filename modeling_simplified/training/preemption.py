"""Preemption: SIGTERM, SIGINT (Ctrl-C) and SIGUSR1 stop a run at the end of its current optimizer step, with a
complete checkpoint, instead of killing it where it stands.

A cluster scheduler (SLURM, Kubernetes, spot instances) sends one of these and waits a grace period before SIGKILL;
Lightning's `SLURMEnvironment` and submitit save on the scheduler's signal the same way. `StopOnSignal` is a
Trainer callback: the signal only sets a flag, and at the next step end (or after an evaluation running when the
signal came) the callback sets the Trainer's own `control.should_save` and `control.should_training_stop`, so the
Trainer saves its checkpoint (weights, optimizer, scheduler, RNG and stream states) and leaves its loop as at the
last step. In a multi-process run the ranks agree at each step end (one all-reduce of a flag): a signal to any rank
stops every rank at the same step, and the checkpoint is saved collectively.

`train` (`api.py`) installs the handlers for the whole run and restores the previous ones when it returns. It then
raises `RunInterrupted` (exit status `EXIT_INTERRUPTED`, 75) with the line that resumes the run. Before the first
step and after the last there is nothing to save: a signal there, or a second signal, stops at once with
`RunAborted` (a `KeyboardInterrupt`; exit status 128 + the signal's number, the shell's for a process a signal
ended). A repeat within `REPEAT_WINDOW_S` of the first signal is the same stop: launchers forward the signal the job
already got (torchrun's agent passes Ctrl-C's SIGINT on to workers that had it from the terminal; `scancel` signals
every process of a step).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

import torch
from transformers import TrainerCallback

#: The exit status of a run stopped by a signal after saving a complete checkpoint: sysexits.h's EX_TEMPFAIL ("a
#: temporary failure ... the user is invited to retry the operation later"), here `--resume`. Not 128 + signal: that
#: is what the shell reports for a process the signal killed, without a checkpoint (`RunAborted`).
EXIT_INTERRUPTED = 75
#: The signals that stop a run: a scheduler's (SIGTERM; SIGUSR1 with SLURM's --signal, as Lightning uses it) and Ctrl-C
SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGUSR1") if hasattr(signal, name))
#: seconds during which a repeated signal is taken as the first one forwarded again, not as a second one
REPEAT_WINDOW_S = 1.0


class RunInterrupted(Exception):
    """A signal stopped the run after its checkpoint at `step` was saved; resuming continues it exactly."""

    exit_code = EXIT_INTERRUPTED
    #: every rank of a distributed run stopped at this step, after saving the checkpoint together
    every_rank_stopped = True

    def __init__(self, signum: int, step: int, output_dir: Path):
        self.signum, self.step, self.output_dir = signum, step, Path(output_dir)
        super().__init__(
            f"stopped by {signal.Signals(signum).name} at step {step}, its checkpoint saved "
            f"({self.output_dir / f'checkpoint-{step}'}); resume with: simplified-train --output-dir "
            f"{self.output_dir} --resume"
        )


class RunAborted(KeyboardInterrupt):
    """A signal with nothing to save (before the first step, after the last) or a second one: the run stopped at
    once. A `KeyboardInterrupt`: no `except Exception` on its way out holds it up, and a notebook takes it as
    Ctrl-C."""

    def __init__(self, signum: int):
        self.signum = signum
        self.exit_code = 128 + signum
        super().__init__(
            f"stopped at once by {signal.Signals(signum).name}; `--resume` continues from the last complete checkpoint"
        )


class StopOnSignal(TrainerCallback):
    """Stop training on `SIGNALS` at the end of the current optimizer step with a checkpoint (the module docstring).
    `installed()` holds the handlers; `stopped_at` is the step the signal stopped training at (None if it did not)."""

    def __init__(self):
        self.signum: int | None = None  # the first signal received while training
        self.stopped_at: int | None = None
        self._training = False
        self._first_at = 0.0
        self._pid = os.getpid()

    @contextlib.contextmanager
    def installed(self):
        """Handle `SIGNALS` inside the block, then restore the handlers that were there. Outside the main thread
        Python delivers no signal to handlers: nothing is installed."""
        previous = {}
        try:
            for signum in SIGNALS:
                previous[signum] = signal.signal(signum, self._handle)
        except ValueError:  # not the main thread
            pass
        try:
            yield self
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _handle(self, signum: int, frame) -> None:
        if os.getpid() != self._pid:  # a forked data-loader worker: its main process stops it
            return
        if self._training and self.signum is None:
            self.signum, self._first_at = signum, time.monotonic()
            return
        if self.signum is not None and time.monotonic() - self._first_at < REPEAT_WINDOW_S:
            return  # the first signal, forwarded again by a launcher
        raise RunAborted(signum)

    def _stop_here(self, args, state, control):
        signum = self.signum or 0
        if args.world_size > 1 and torch.distributed.is_initialized():  # every rank stops at the same step
            flag = torch.tensor([signum], device=args.device)
            torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
            signum = int(flag.item())
            self.signum = self.signum or signum or None  # another rank's: the one this rank reports
        if signum and state.global_step < state.max_steps:  # at the last step the run ends as planned
            control.should_save = control.should_training_stop = True
            self.stopped_at = state.global_step
        return control

    def on_train_begin(self, args, state, control, **kwargs):
        self._training = True

    def on_step_end(self, args, state, control, **kwargs):
        return self._stop_here(args, state, control)

    def on_evaluate(self, args, state, control, **kwargs):
        # a signal during an evaluation between steps: save now rather than after one more step (every rank
        # evaluates, so the ranks agree here too)
        if self._training and self.stopped_at is None and state.global_step > 0:
            return self._stop_here(args, state, control)
        return control

    def on_train_end(self, args, state, control, **kwargs):
        self._training = False
