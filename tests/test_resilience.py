"""Long runs survive what long runs meet. A signal (SIGTERM, SIGINT, SIGUSR1) stops a run at the end of its optimizer
step with a complete checkpoint, exit status 75 and one line saying how to resume; `--resume` then ends bit-identical
to an uninterrupted run (causal, packed, streamed, masked-LM, two processes). A second signal stops at once, without
a traceback. A checkpoint with a truncated weight file, a missing optimizer state or a missing trainer state is
skipped for the newest complete one (one warning line) or, with none complete, refused (one error line); never
resumed with a fresh optimizer. A full disk during a save or the export is one error naming the folder and the
space needed (exit status 74), every earlier checkpoint and the export intact. Each test fails without the
protection it covers."""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import MASKED, tiny_config
from safetensors import SafetensorError
from safetensors.torch import load_file

from modeling_simplified import SimplifiedForCausalLM
from modeling_simplified.training import preemption
from modeling_simplified.training.api import check_plan
from modeling_simplified.training.cli import EXIT_NO_SPACE, build_parser, main, plan_from_args
from modeling_simplified.training.plan import TrainPlan
from modeling_simplified.training.preemption import EXIT_INTERRUPTED, SIGNALS, RunAborted, StopOnSignal
from modeling_simplified.training.presets import UsageError, load_preset
from modeling_simplified.training.runs import checkpoint_problems, latest_checkpoint, safetensors_problem
from modeling_simplified.training.trainer import SimplifiedTrainer, training_arguments

REPO = Path(__file__).resolve().parents[1]
#: a small, quick causal run (2 layers of width 64 on the embedded corpus)
CAUSAL = [
    "--preset",
    "codeparrot-tiny-sas_p",
    *("--set", "data.max_train_samples=40"),
    *("--set", "data.tokenizer_train_samples=40"),
    *("--set", "data.max_eval_samples=8"),
    *("--set", "training.per_device_train_batch_size=4"),
    *("--set", "training.logging_steps=2"),
    *("--set", "num_hidden_layers=2"),
    *("--set", "hidden_size=64"),
    *("--set", "intermediate_size=128"),
    *("--set", "vocab_size=512"),
]


def _args(base: list[str], steps: int, save_steps: int, *extra: str) -> list[str]:
    return [
        *base,
        "--max-steps",
        str(steps),
        *("--set", f"training.save_steps={save_steps}"),
        *("--set", f"training.eval_steps={steps}"),
        *extra,
    ]


def _losses(checkpoint: Path) -> list[tuple]:
    """Every logged training loss of a run up to `checkpoint`, with its step, gradient norm and lr."""
    history = json.loads((checkpoint / "trainer_state.json").read_text())["log_history"]
    return [(e["step"], e["loss"], e["grad_norm"], e["learning_rate"]) for e in history if "loss" in e]


def _assert_same_run(straight: Path, resumed: Path, steps: int) -> None:
    """The resumed run ended where the uninterrupted one did: the same weights bit for bit, the same logged losses,
    the same final figures."""
    a, b = (load_file(run / f"checkpoint-{steps}" / "model.safetensors") for run in (straight, resumed))
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a), [k for k in a if not torch.equal(a[k], b[k])]
    assert _losses(straight / f"checkpoint-{steps}") == _losses(resumed / f"checkpoint-{steps}")
    ma, mb = (json.loads((run / "metrics.json").read_text()) for run in (straight, resumed))
    assert mb["resumed_from"] is not None and ma["steps"] == mb["steps"] == steps
    for key in ("train_loss", "eval_loss", "tokens_seen"):
        assert ma[key] == mb[key], key
    assert mb["train_loss_mean"] == pytest.approx(ma["train_loss_mean"], rel=1e-12, abs=0)


def _one_line(err: str) -> str:
    """The CLI's own line on stderr (progress bars aside): exactly one, and no traceback."""
    lines = [line for line in err.splitlines() if line.startswith("simplified-train:")]
    assert len(lines) == 1 and "Traceback" not in err, err[-3000:]
    return lines[0]


def _signal_at_step(monkeypatch, step: int, *signums: int, pause: float = 0.0) -> None:
    """Send this process `signums` from inside the training step after optimizer step `step` (mid-run: during the
    forward and backward of the next step), `pause` seconds apart."""
    train_step = SimplifiedTrainer.training_step

    def training_step(self, *args, **kwargs):
        if self.state.global_step == step and not getattr(self, "_signalled", False):
            self._signalled = True
            for i, signum in enumerate(signums):
                time.sleep(pause if i else 0.0)
                os.kill(os.getpid(), signum)
        return train_step(self, *args, **kwargs)

    monkeypatch.setattr(SimplifiedTrainer, "training_step", training_step)


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A finished 4-step causal run with checkpoints at steps 2 and 4 and its export."""
    run = tmp_path_factory.mktemp("finished") / "run"
    assert main([*_args(CAUSAL, 4, 2), "--output-dir", str(run)]) == 0
    assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]
    return run


# -- signals ---------------------------------------------------------------------------------------------------
def test_a_signal_mid_run_saves_a_complete_checkpoint_and_resume_ends_bit_identical(
    finished, tmp_path, monkeypatch, capsys
):
    """SIGUSR1 during step 3 (logs every 2 steps, checkpoints every 2): the run finishes the step, saves
    checkpoint-3 (complete), exits 75 with one line naming `--resume`, and leaves the signal handlers as it found
    them; resumed, it ends with the uninterrupted run's weights and logged losses (checkpoint-3 falls between two
    logs: the loss of step 3 is carried over to the log of step 4)."""
    run = tmp_path / "run"
    mine = {signum: (lambda *a: None) for signum in SIGNALS}
    before = {signum: signal.signal(signum, handler) for signum, handler in mine.items()}
    try:
        _signal_at_step(monkeypatch, 2, signal.SIGUSR1)
        capsys.readouterr()
        assert main([*_args(CAUSAL, 4, 2), "--output-dir", str(run)]) == EXIT_INTERRUPTED == 75
        assert all(signal.getsignal(signum) is handler for signum, handler in mine.items())  # restored
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
    line = _one_line(capsys.readouterr().err)
    assert line == (
        f"simplified-train: stopped by SIGUSR1 at step 3, its checkpoint saved ({run / 'checkpoint-3'}); "
        f"resume with: simplified-train --output-dir {run} --resume"
    )
    # no report, no export: the run is not finished
    assert sorted(p.name for p in run.iterdir()) == ["checkpoint-2", "checkpoint-3", "preset.json"]
    assert checkpoint_problems(run / "checkpoint-3") == []
    monkeypatch.undo()
    assert main([*_args(CAUSAL, 4, 2), "--output-dir", str(run), "--resume"]) == 0
    _assert_same_run(finished, run, 4)
    metrics = json.loads((run / "metrics.json").read_text())
    assert [(s["from_step"], s["to_step"]) for s in metrics["segments"]] == [(0, 3), (3, 4)]


def test_a_second_signal_stops_at_once_with_one_line(tmp_path, monkeypatch, capsys):
    """A second signal, after the first has been taken (`REPEAT_WINDOW_S`), ends the run at once: no checkpoint of
    the step, no partial folder, status 128 + SIGINT, one line, the handlers restored."""
    run = tmp_path / "run"
    handler = signal.getsignal(signal.SIGINT)
    _signal_at_step(monkeypatch, 2, signal.SIGINT, signal.SIGINT, pause=preemption.REPEAT_WINDOW_S + 0.2)
    capsys.readouterr()
    assert main([*_args(CAUSAL, 4, 2), "--output-dir", str(run)]) == 128 + signal.SIGINT
    assert signal.getsignal(signal.SIGINT) is handler
    line = _one_line(capsys.readouterr().err)
    assert line.startswith("simplified-train: stopped at once by SIGINT") and "--resume" in line
    assert sorted(p.name for p in run.iterdir()) == ["checkpoint-2", "preset.json"]


@pytest.mark.parametrize(
    "ending, status, left",
    [
        ("finished", 0, True),
        ("stopped with a checkpoint", EXIT_INTERRUPTED, True),
        ("stopped at once", 128 + signal.SIGTERM, False),
    ],
)
def test_the_cli_leaves_the_process_group_where_every_rank_ends_together(
    tmp_path, monkeypatch, capsys, ending, status, left
):
    """A torchrun rank that exits with gloo's process group alive can abort in its C++ teardown (SIGABRT): the CLI
    destroys the group after a finished run and after a signal-stop whose checkpoint every rank saved, and leaves it
    after a stop at once, where a peer may still be in a collective."""
    import modeling_simplified.training.api as api

    def train(plan):
        if ending == "finished":
            return api.TrainResult(tmp_path, {"steps": 4}, [], finished_before=True)
        raise preemption.RunInterrupted(signal.SIGTERM, 2, tmp_path) if left else RunAborted(signal.SIGTERM)

    monkeypatch.setattr(api, "train", train)
    torch.distributed.init_process_group("gloo", store=torch.distributed.HashStore(), rank=0, world_size=1)
    try:
        assert main([*CAUSAL, "--output-dir", str(tmp_path / "run")]) == status
        assert torch.distributed.is_initialized() is not left
    finally:
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


@pytest.mark.slow
def test_a_signal_during_an_evaluation_saves_at_that_step(finished, tmp_path, monkeypatch, capsys):
    """A signal that comes while the run evaluates after step 2 stops it at step 2 (the callback's `on_evaluate`),
    not one step later; resumed, the run ends as the uninterrupted one."""
    run = tmp_path / "run"
    evaluate = SimplifiedTrainer.evaluate

    def evaluate_and_signal(self, *args, **kwargs):
        if self.state.global_step == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return evaluate(self, *args, **kwargs)

    monkeypatch.setattr(SimplifiedTrainer, "evaluate", evaluate_and_signal)
    args = [*_args(CAUSAL, 4, 100), "--set", "training.eval_steps=2", "--no-export"]
    straight = tmp_path / "straight"
    capsys.readouterr()
    assert main([*args, "--output-dir", str(run)]) == 75
    assert "stopped by SIGTERM at step 2" in _one_line(capsys.readouterr().err)
    assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-2"]
    monkeypatch.undo()
    assert main([*args, "--output-dir", str(run), "--resume"]) == 0
    assert main([*args, "--output-dir", str(straight)]) == 0
    _assert_same_run(straight, run, 4)


def test_the_signal_handler_takes_one_signal_while_training_and_stops_at_once_otherwise(monkeypatch):
    """Before training starts there is nothing to save: a signal stops at once. While training, the first is taken
    and a repeat within the window is the same signal forwarded (torchrun's agent, scancel); later it stops at
    once. A forked data-loader worker ignores it (its main process stops it)."""
    stopper = StopOnSignal()
    with pytest.raises(RunAborted) as aborted:
        stopper._handle(signal.SIGTERM, None)
    assert aborted.value.exit_code == 128 + signal.SIGTERM and stopper.signum is None
    stopper.on_train_begin(None, None, None)
    stopper._handle(signal.SIGTERM, None)
    stopper._handle(signal.SIGINT, None)  # within the window
    assert stopper.signum == signal.SIGTERM
    monkeypatch.setattr(preemption, "REPEAT_WINDOW_S", 0.0)
    monkeypatch.setattr(stopper, "_pid", os.getpid() + 1)  # as in a forked worker
    stopper._handle(signal.SIGINT, None)
    monkeypatch.setattr(stopper, "_pid", os.getpid())
    with pytest.raises(RunAborted):
        stopper._handle(signal.SIGINT, None)


# -- damaged checkpoints ---------------------------------------------------------------------------------------
def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


DAMAGE = {
    "truncated weights": (lambda c: _truncate(c / "model.safetensors"), "model.safetensors truncated"),
    "no optimizer state": (lambda c: (c / "optimizer.pt").unlink(), "optimizer.pt missing"),
    "no trainer state": (lambda c: (c / "trainer_state.json").unlink(), "trainer_state.json missing"),
}


def _plan(run: Path) -> TrainPlan:
    return plan_from_args(build_parser().parse_args([*_args(CAUSAL, 4, 2), "--output-dir", str(run), "--resume"]))


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_last_checkpoint_is_skipped_for_the_newest_complete_one(finished, tmp_path, damage, caplog):
    """A crash or an unflushed write damaged checkpoint-4: `--resume` names what is missing in one warning line and
    resumes from checkpoint-2 (the resumed run itself: the slow test below)."""
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    harm, problem = DAMAGE[damage]
    harm(run / "checkpoint-4")
    assert problem in checkpoint_problems(run / "checkpoint-4")[0]
    with caplog.at_level(logging.WARNING, logger="modeling_simplified.training.runs"):
        checked = check_plan(_plan(run))
    assert checked.resume_from == run / "checkpoint-2" and not checked.finished
    warned = [r.getMessage() for r in caplog.records if r.name == "modeling_simplified.training.runs"]
    assert len(warned) == 1 and warned[0].startswith(f"--resume: skipping incomplete checkpoint-4: {problem}")
    assert warned[0].endswith("; resuming from checkpoint-2."), warned


@pytest.mark.slow
@pytest.mark.parametrize("damage", DAMAGE)
def test_a_run_resumed_past_a_damaged_checkpoint_ends_as_the_undamaged_one(finished, tmp_path, damage, caplog):
    """Resumed from checkpoint-2 (with its optimizer state), the run saves checkpoint-4 again, whole, and ends with
    the undamaged run's weights and losses."""
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    DAMAGE[damage][0](run / "checkpoint-4")
    assert main([*_args(CAUSAL, 4, 2), "--output-dir", str(run), "--resume"]) == 0
    assert json.loads((run / "metrics.json").read_text())["resumed_from"] == str(run / "checkpoint-2")
    assert checkpoint_problems(run / "checkpoint-4") == []
    _assert_same_run(finished, run, 4)


def _snapshot(run: Path) -> dict[str, str]:
    return {
        p.relative_to(run).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in run.rglob("*") if p.is_file()
    }


def test_no_complete_checkpoint_is_one_error_naming_the_folder_and_the_fix(finished, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    (run / "checkpoint-4" / "optimizer.pt").unlink()
    _truncate(run / "checkpoint-2" / "model.safetensors")
    files = _snapshot(run)
    capsys.readouterr()
    assert main([*_args(CAUSAL, 4, 2), "--output-dir", str(run), "--resume"]) == 2
    line = _one_line(capsys.readouterr().err)
    with pytest.raises(UsageError):
        check_plan(_plan(run))
    assert line.startswith(f"simplified-train: error: --resume: no complete checkpoint in {run} (checkpoint-4: ")
    assert "optimizer.pt missing" in line and "checkpoint-2: model.safetensors truncated" in line
    assert "--overwrite" in line
    assert _snapshot(run) == files


def test_the_trainer_refuses_to_resume_with_a_fresh_optimizer(finished, tmp_path):
    """Resumed directly (the API's `SimplifiedTrainer`), a checkpoint without its optimizer or scheduler state is
    refused: transformers' Trainer would go on with fresh ones."""
    checkpoint = tmp_path / "checkpoint-4"
    shutil.copytree(finished / "checkpoint-4", checkpoint)
    (checkpoint / "scheduler.pt").unlink()
    recipe = load_preset("codeparrot-tiny-sas_p").training
    trainer = SimplifiedTrainer(
        model=SimplifiedForCausalLM(tiny_config()),
        args=training_arguments(recipe, str(tmp_path / "out"), eval_strategy="no"),
        recipe=recipe,
    )
    with pytest.raises(UsageError, match="scheduler.pt missing, the run would go on with a fresh optimizer"):
        trainer._load_optimizer_and_scheduler(str(checkpoint))


def test_safetensors_check_reads_the_header_and_the_size(finished, tmp_path):
    weights = tmp_path / "model.safetensors"
    shutil.copyfile(finished / "checkpoint-4" / "model.safetensors", weights)
    assert safetensors_problem(weights) is None
    with weights.open("ab") as f:
        f.write(b"\0")
    assert "truncated" in safetensors_problem(weights)  # its tensors end before the file does
    weights.write_bytes(b"\xff" * 16)
    assert "shorter than its header" in safetensors_problem(weights)
    weights.write_bytes((8).to_bytes(8, "little") + b"not json")
    assert "no valid safetensors header" in safetensors_problem(weights)


# -- a full disk -----------------------------------------------------------------------------------------------
def test_a_full_disk_during_a_save_is_one_error_and_the_earlier_checkpoint_stays(
    finished, tmp_path, monkeypatch, capsys
):
    """The save of checkpoint-4 finds the disk full: one error naming the checkpoint and the space it needs, status
    74, no partial folder; checkpoint-2 is complete and loads (the uninterrupted run's weights)."""
    run = tmp_path / "run"
    save = torch.save

    def full_disk(obj, f, *args, **kwargs):
        if ".checkpoint-4.partial" in str(f):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(f))
        return save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", full_disk)
    capsys.readouterr()
    assert main([*_args(CAUSAL, 4, 2), "--output-dir", str(run)]) == EXIT_NO_SPACE == 74
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(
        f"simplified-train: error: no space left on device for {run / 'checkpoint-4'}: it needs about "
    )
    assert "MB" in line and "free there; the earlier checkpoints are intact" in line and "--resume" in line
    assert sorted(p.name for p in run.iterdir()) == ["checkpoint-2", "preset.json"]
    assert checkpoint_problems(run / "checkpoint-2") == []
    SimplifiedForCausalLM.from_pretrained(run / "checkpoint-2")
    a, b = (load_file(r / "checkpoint-2" / "model.safetensors") for r in (finished, run))
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.slow
def test_a_full_disk_during_the_export_leaves_the_previous_export_and_the_checkpoints(
    finished, tmp_path, monkeypatch, capsys
):
    """Trained further (`--resume --max-steps 6`), the run's new export finds the disk full (as safetensors reports
    it: no errno): one error naming the export, the space it needs and the command that exports the last
    checkpoint; the previous export is untouched and loads, the checkpoints are complete."""
    import transformers.modeling_utils

    run = tmp_path / "run"
    shutil.copytree(finished, run)
    export = _snapshot(run / "export")
    write = transformers.modeling_utils.safe_save_file

    def full_disk(tensors, filename, *args, **kwargs):
        if ".export.partial-" in str(filename):
            raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")
        return write(tensors, filename, *args, **kwargs)

    monkeypatch.setattr(transformers.modeling_utils, "safe_save_file", full_disk)
    capsys.readouterr()
    assert main([*_args(CAUSAL, 4, 2), "--max-steps", "6", "--output-dir", str(run), "--resume"]) == 74
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(f"simplified-train: error: no space left on device for {run / 'export'}: it needs about ")
    assert line.endswith(f"simplified-export {run / 'checkpoint-6'} {run / 'export'}.")
    assert _snapshot(run / "export") == export
    assert not list(run.glob(".export.partial-*"))
    SimplifiedForCausalLM.from_pretrained(run / "export")
    assert all(checkpoint_problems(c) == [] for c in run.glob("checkpoint-*"))
    assert latest_checkpoint(run) == run / "checkpoint-6"


def _can_mount_tmpfs() -> bool:
    if not shutil.which("unshare"):
        return False
    probe = "d=$(mktemp -d) && mount -t tmpfs -o size=1m tmpfs $d"
    return subprocess.run(["unshare", "-rm", "sh", "-c", probe], capture_output=True).returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(not _can_mount_tmpfs(), reason="needs unshare -rm and a tmpfs mount (user namespaces)")
def test_a_real_full_disk_keeps_the_first_checkpoint(tmp_path):
    """On a 2 MB tmpfs (room for one 1.2 MB checkpoint of this run, not two): the second save fails for real (torch.save
    reports only that its write failed), one error, status 74; the first checkpoint is complete and loads."""
    inside, kept = tmp_path / "disk", tmp_path / "kept"
    inside.mkdir()
    run = inside / "run"
    command = [sys.executable, "-m", "modeling_simplified.training.cli", *_args(CAUSAL, 4, 2), "--no-export"]
    script = (
        f"mount -t tmpfs -o size=2m tmpfs {inside} && "
        f"{' '.join(command)} --output-dir {run}; status=$?; cp -a {inside}/. {kept}/; exit $status"
    )
    done = subprocess.run(["unshare", "-rm", "sh", "-c", script], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 74, done.stderr[-3000:]
    line = _one_line(done.stderr)
    assert f"no space left on device for {run / 'checkpoint-4'}" in line
    kept_run = kept / "run"
    assert sorted(p.name for p in kept_run.glob("*checkpoint*")) == ["checkpoint-2"]
    assert checkpoint_problems(kept_run / "checkpoint-2") == []
    SimplifiedForCausalLM.from_pretrained(kept_run / "checkpoint-2")


# -- signals to processes: every family, and two processes -----------------------------------------------------
def _stream_folder(root: Path) -> Path:
    """A local dataset folder in the CodeParrot layout, streamed by `data.streaming=true`."""
    from modeling_simplified.training import corpus

    folder = root / "codeparrot-like"
    folder.mkdir()
    for split, n in (("train", 60), ("validation", 6)):
        corpus.code_dataset(split, n).to_json(folder / f"{split}.jsonl")
    return folder


FAMILIES = {
    "causal": (CAUSAL, signal.SIGTERM),
    "packed": ([*CAUSAL, "--packing"], signal.SIGINT),
    "streamed": ([*CAUSAL, "--set", "data.streaming=true"], signal.SIGUSR1),
    "masked": (MASKED, signal.SIGTERM),
}


def _signals_as_a_shell_leaves_them() -> None:
    """In the child before exec: no signal blocked and SIGINT at its default, as a shell starts a command. A test
    worker's process may carry another state (a library that blocked or ignored SIGINT around its own child), which
    exec would pass on and which would swallow the Ctrl-C these tests send."""
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Launched:
    """A process whose stdout and stderr go to files (no pipe to fill while the test waits for a line)."""

    def __init__(self, command: list[str], folder: Path, **env: str):
        folder.mkdir(parents=True, exist_ok=True)
        self.out, self.err = folder / "stdout", folder / "stderr"
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "CUDA_VISIBLE_DEVICES": "", **env}  # the in-process threads
        with self.out.open("w") as out, self.err.open("w") as err:
            self.proc = subprocess.Popen(
                command, cwd=REPO, env=env, stdout=out, stderr=err, preexec_fn=_signals_as_a_shell_leaves_them
            )

    def wait_for(self, text: str, where: str = "out", timeout: float = 600) -> None:
        """Until `text` is in the process's stdout (or stderr); it must still be running."""
        path = self.out if where == "out" else self.err
        deadline = time.time() + timeout
        while text not in path.read_text(errors="replace"):
            assert self.proc.poll() is None and time.time() < deadline, self.stderr()[-3000:]
            time.sleep(0.02)

    def finish(self, timeout: float = 600) -> int:
        return self.proc.wait(timeout=timeout)

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")


def _children(pid: int) -> list[int]:
    """Every descendant of a process (Linux /proc)."""
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == parent:
                found.append(int(stat.parent.name))
                frontier.append(int(stat.parent.name))
    return found


def _rank(pid: int) -> int | None:
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    return next((int(v.split(b"=")[1]) for v in env if v.startswith(b"RANK=")), None)


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_a_signalled_process_resumes_bit_identical(tmp_path, family):
    """`simplified-train` in its own process, signalled once it has logged (no periodic checkpoint), exits 75 with a
    complete checkpoint (a streamed run's place in its stream included) and one line; `--resume` in another process
    ends with the uninterrupted run's weights and logged losses."""
    base, signum = FAMILIES[family]
    steps = 16
    extra = ["--dataset", str(_stream_folder(tmp_path))] if family == "streamed" else []
    args = [*_args(base, steps, 100), *extra, "--no-export"]
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    assert main([*args, "--output-dir", str(straight)]) == 0
    cli = [sys.executable, "-m", "modeling_simplified.training.cli", *args, "--output-dir", str(stopped)]
    run = Launched(cli, tmp_path / "first")
    run.wait_for("'loss'")
    run.proc.send_signal(signum)
    assert run.finish() == 75, run.stderr()[-3000:]
    line = _one_line(run.stderr())
    at = latest_checkpoint(stopped)
    assert at is not None and f"stopped by {signal.Signals(signum).name} at step {at.name.split('-')[1]}" in line
    assert line.endswith(f"resume with: simplified-train --output-dir {stopped} --resume")
    assert int(at.name.split("-")[1]) < steps and not (stopped / "metrics.json").exists()
    assert (at / "stream_state.pt").is_file() == (family == "streamed")
    resumed = Launched([*cli, "--resume"], tmp_path / "second")
    assert resumed.finish() == 0, resumed.stderr()[-3000:]
    _assert_same_run(straight, stopped, steps)
    if family == "streamed":
        assert json.loads((stopped / "metrics.json").read_text())["segments"][-1]["stream"] == "restored"


@pytest.mark.slow
def test_a_signal_before_training_stops_at_once_without_a_traceback(tmp_path):
    """Ctrl-C while the data is prepared (nothing to save yet): status 130, one line, no KeyboardInterrupt wall."""
    cli = [sys.executable, "-m", "modeling_simplified.training.cli", *CAUSAL, "--output-dir", str(tmp_path / "run")]
    # its own HF_HOME: the data is tokenised afresh (the session's cache would skip it), the bar the test waits for
    run = Launched([*cli, "--max-steps", "50"], tmp_path / "logs", HF_HOME=str(tmp_path / "home"))
    run.wait_for("tokenising", where="err")
    run.proc.send_signal(signal.SIGINT)
    assert run.finish() == 130, run.stderr()[-3000:]
    assert _one_line(run.stderr()).startswith("simplified-train: stopped at once by SIGINT")


@pytest.mark.parametrize("moment", ["importing torch", "importing the package"])
def test_ctrl_c_while_the_command_starts_is_one_line(tmp_path, moment):
    """Ctrl-C before `simplified-train` has even imported its modules (the console script's seconds of torch and
    transformers imports): status 130 and one line, no KeyboardInterrupt traceback (`modeling_simplified/commands.py`)."""
    script = Path(sys.executable).parent / "simplified-train"
    run = Launched([str(script), *CAUSAL, "--output-dir", str(tmp_path / "run")], tmp_path / "logs")
    # a shared library the process has mapped: torch's (early in `import torch`), safetensors' (later: the package)
    loaded = "libtorch_cpu" if moment == "importing torch" else "_safetensors_rust"
    deadline = time.time() + 300
    while loaded not in Path(f"/proc/{run.proc.pid}/maps").read_text():
        assert run.proc.poll() is None and time.time() < deadline, run.stderr()[-3000:]
        time.sleep(0.01)
    run.proc.send_signal(signal.SIGINT)
    assert run.finish() == 130, run.stderr()[-3000:]
    assert _one_line(run.stderr()).startswith("simplified-train: ")
    assert not (tmp_path / "run").exists()


def _torchrun(*args: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m"] + [
        "modeling_simplified.training.cli",
        *args,
    ]


@pytest.mark.slow
def test_two_processes_stop_together_and_resume_bit_identical(tmp_path):
    """Under torchrun (2 gloo CPU ranks), SIGTERM to rank 1 alone stops both ranks at the same step: the checkpoint
    is saved collectively (both ranks' RNG states), both exit 75, the world process zero prints the line, and a
    2-process `--resume` ends with the weights and logged losses of an uninterrupted 2-process run."""
    steps = 12
    args = [*_args(CAUSAL, steps, 100), "--no-export"]
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    done = Launched(_torchrun(*args, "--output-dir", str(straight)), tmp_path / "straight-logs")
    assert done.finish() == 0, done.stderr()[-3000:]

    run = Launched(_torchrun(*args, "--output-dir", str(stopped)), tmp_path / "stopped-logs")
    run.wait_for("'loss'")
    (rank_1,) = [pid for pid in _children(run.proc.pid) if _rank(pid) == 1]
    os.kill(rank_1, signal.SIGTERM)
    assert run.finish() != 0  # torchrun's own status: its workers failed
    err = run.stderr()
    assert "exitcode  : 75" in err, err[-3000:]  # torchrun's report of its workers
    at = latest_checkpoint(stopped, world_size=2)
    assert at is not None and int(at.name.split("-")[1]) < steps, err[-3000:]
    assert sorted(p.name for p in at.glob("rng_state*")) == ["rng_state_0.pth", "rng_state_1.pth"]
    assert err.count("simplified-train: stopped by SIGTERM") == 1  # the world process zero's line
    resumed = Launched(_torchrun(*args, "--output-dir", str(stopped), "--resume"), tmp_path / "resumed-logs")
    assert resumed.finish() == 0, resumed.stderr()[-3000:]
    _assert_same_run(straight, stopped, steps)
