"""Run folders of `simplified-train`: which checkpoint a run resumes from (the newest complete one, verified), the
pretrained folder inside a run, and the one error a full disk gives."""

from __future__ import annotations

import errno
import json
import logging
import shutil
import zipfile
from pathlib import Path

import torch
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from modeling_simplified.configuration_simplified import SimplifiedConfig

from .presets import UsageError, first_line

logger = logging.getLogger(__name__)

#: what a resume reads from a checkpoint besides its weights and RNG states: the Trainer's state, optimizer and lr
#: schedule, the model's config (and the run's tokenizer, `tokenizer=True`)
RESUME_FILES = ("config.json", "trainer_state.json", "optimizer.pt", "scheduler.pt")
TOKENIZER_FILE = "tokenizer_config.json"
#: a streamed one-process run's place in its stream, in each of its checkpoints (`trainer.SimplifiedTrainer`): the
#: loader's `state_dict` and the pass over the stream it was in. Optional on resume (without it the stream is read
#: again to skip), but a damaged one would stop the resume
STREAM_STATE = "stream_state.pt"


def checkpoints(output_dir: Path) -> list[Path]:
    """The `checkpoint-<step>` folders of a run, newest (highest step) first."""
    found = [p for p in Path(output_dir).glob(f"{PREFIX_CHECKPOINT_DIR}-*") if p.name.split("-", 1)[1].isdigit()]
    return sorted((p for p in found if p.is_dir()), key=lambda p: int(p.name.split("-", 1)[1]), reverse=True)


def checkpoint_problems(folder: Path, world_size: int = 1, tokenizer: bool = True) -> list[str]:
    """What keeps `folder` from resuming a run exactly, one short phrase each ([] when nothing does): a file a resume
    reads that is missing, a safetensors file whose header does not parse or does not cover the file's size (a
    truncated write), an optimizer, scheduler or stream state that does not load, the RNG states of another number
    of processes (the Trainer would go on without them, no longer exact)."""
    folder = Path(folder)
    problems = _weights_problems(folder)
    names = [*RESUME_FILES, *((TOKENIZER_FILE,) if tokenizer else ())]
    problems += [f"{name} missing" for name in names if not (folder / name).is_file()]
    for name in ("config.json", "trainer_state.json", TOKENIZER_FILE):
        if (folder / name).is_file() and name in names:
            try:
                json.loads((folder / name).read_text())
            except (OSError, UnicodeDecodeError, json.JSONDecodeError):
                problems.append(f"{name} not valid JSON")
    for name in ("optimizer.pt", "scheduler.pt", STREAM_STATE):
        path = folder / name
        if path.is_file():
            try:  # mmap: the archive and its pickle are read, the tensors' bytes are not
                torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            except Exception:  # noqa: BLE001 - torch's load errors have no common base; any means "cannot load"
                problems.append(f"{name} does not load")
    problems += _rng_problems(folder, world_size)
    return problems


def _weights_problems(folder: Path) -> list[str]:
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, AttributeError):
            return [f"{index.name} not valid"]
    else:
        shards = ["model.safetensors"]
    return [problem for shard in shards if (problem := safetensors_problem(folder / shard))]


def safetensors_problem(path: Path) -> str | None:
    """Why a safetensors file cannot be what was written (None when its header parses and its tensors' byte
    ranges end exactly at the end of the file): missing, truncated, or a header that does not parse."""
    if not path.is_file():
        return f"{path.name} missing"
    size = path.stat().st_size
    try:
        with path.open("rb") as f:
            head = f.read(8)
            length = int.from_bytes(head, "little") if len(head) == 8 else None
            if length is None or 8 + length > size:
                return f"{path.name} truncated ({size} bytes, shorter than its header)"
            header = json.loads(f.read(length))
        end = max((int(t["data_offsets"][1]) for k, t in header.items() if k != "__metadata__"), default=0)
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError, IndexError):
        return f"{path.name} has no valid safetensors header"
    if 8 + length + end != size:
        return f"{path.name} truncated ({size} of {8 + length + end} bytes)"
    return None


def _rng_problems(folder: Path, world_size: int) -> list[str]:
    saved = sorted(p.name for p in folder.glob("rng_state*.pth"))
    wanted = ["rng_state.pth"] if world_size <= 1 else [f"rng_state_{i}.pth" for i in range(world_size)]
    missing = [name for name in wanted if name not in saved]
    if missing:
        processes = len([n for n in saved if n != "rng_state.pth"]) or 1
        other = f" (saved by {processes} process{'es' * (processes > 1)}: resume with as many)" if saved else ""
        return [f"{', '.join(missing)} missing{other}"]
    problems = []
    for name in wanted:
        try:
            with zipfile.ZipFile(folder / name) as archive:  # its index is at the end: a truncated file has none
                archive.namelist()
        except (OSError, zipfile.BadZipFile):
            problems.append(f"{name} does not load")
    return problems


def find_checkpoint(
    output_dir: Path, world_size: int = 1, tokenizer: bool = True
) -> tuple[Path | None, list[tuple[Path, list[str]]]]:
    """The newest complete checkpoint of a run (None if there is none) and the newer ones it skipped with their
    problems (`checkpoint_problems`)."""
    skipped = []
    for folder in checkpoints(output_dir):
        problems = checkpoint_problems(folder, world_size, tokenizer)
        if not problems:
            return folder, skipped
        skipped.append((folder, problems))
    return None, skipped


def latest_checkpoint(output_dir: Path, world_size: int = 1, tokenizer: bool = True) -> Path | None:
    """The newest complete checkpoint of a run (`find_checkpoint`), None if there is none."""
    return find_checkpoint(output_dir, world_size, tokenizer)[0]


def resume_checkpoint(output_dir: Path, world_size: int = 1, option: str = "--resume", warn: bool = True) -> Path:
    """The checkpoint `--resume` continues from: the newest complete one, after one warning line naming what is
    missing from any newer one; none complete is one `UsageError` naming the folder and the way out. Never a
    checkpoint whose optimizer or scheduler state is missing (the Trainer would go on with fresh ones)."""
    found, skipped = find_checkpoint(output_dir, world_size)
    damage = "; ".join(f"{folder.name}: {', '.join(problems)}" for folder, problems in skipped)
    if found is None:
        what = f"({damage})" if skipped else "(none was saved)"
        raise UsageError(
            f"{option}: no complete checkpoint in {output_dir} {what}; restore the missing files, or start the run "
            "over with --overwrite."
        )
    if skipped and warn:
        logger.warning(f"{option}: skipping incomplete {damage}; resuming from {found.name}.")
    return found


# -- a full disk -----------------------------------------------------------------------------------------------
class OutOfSpace(OSError):
    """A save or an export that ran out of disk space: the message names the folder, the space it needs and the
    space free; what was written before is intact (the save was staged and its partial files removed)."""

    def __init__(self, path: Path, needed: int, free: int, advice: str):
        self.needed, self.free = needed, free
        super().__init__(
            errno.ENOSPC,
            f"no space left on device for {path}: it needs about {_size(needed)}, {_size(free)} free there; {advice}",
        )
        self.filename = str(path)

    def __str__(self) -> str:
        return self.strerror


def is_out_of_space(err: BaseException) -> bool:
    """An error of a write that found the disk (or the quota) full: an `OSError` with ENOSPC or EDQUOT, or one of
    the writers that lose the errno (safetensors says "No space left on device"; torch.save only that its write
    failed, hence `out_of_space` also compares the space free with the space needed)."""
    if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return "No space left on device" in str(err) or "Disk quota exceeded" in str(err)


def out_of_space(err: BaseException, path: Path, needed: int, advice: str) -> OutOfSpace | None:
    """`OutOfSpace` for a failed write of about `needed` bytes into `path` when the disk is the cause (the error
    says so, or less than `needed` is free there once the partial files are gone); None otherwise."""
    existing = next((p for p in (Path(path), *Path(path).parents) if p.exists()), Path("."))
    free = shutil.disk_usage(existing).free
    if is_out_of_space(err) or free < needed:
        return OutOfSpace(Path(path), needed, free, advice)
    return None


def folder_bytes(folder: Path) -> int:
    """The bytes of the files in `folder` (0 if there is none)."""
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file()) if Path(folder).is_dir() else 0


def _size(n: int) -> str:
    for exponent, unit in ((30, "GB"), (20, "MB"), (10, "KB")):
        if n >= 2**exponent:
            return f"{n / 2**exponent:.1f} {unit}"
    return f"{n} bytes"


def pretrained_dir(path: str) -> Path:
    """A folder with `config.json` and weights inside a run (`export/`), an export, or a checkpoint."""
    root = Path(path)
    for candidate in (root / "export", root):
        if (candidate / "config.json").is_file():
            return _checked_pretrained(candidate)
    checkpoint = _latest_weights(root) if root.is_dir() else None
    if checkpoint is not None:
        return _checked_pretrained(checkpoint)
    raise UsageError(
        f"--init-from {path!r}: no pretrained model there (expected a run directory, an export or a "
        "checkpoint folder with config.json)."
    )


def _latest_weights(output_dir: Path) -> Path | None:
    """The newest checkpoint whose config and weights are whole (a model to start from needs no optimizer)."""
    return next(
        (c for c in checkpoints(output_dir) if (c / "config.json").is_file() and not _weights_problems(c)), None
    )


def _checked_pretrained(folder: Path) -> Path:
    """`folder`, once its config.json is a JSON object of this model family with valid fields (named in the error if
    not): checked while planning, before any data is loaded or tokenised for the run."""
    config_file = folder / "config.json"
    try:
        config = json.loads(config_file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UsageError(f"--init-from: {config_file} is not valid JSON: {err}.") from None
    if not isinstance(config, dict):
        raise UsageError(f"--init-from: {config_file} must hold a JSON object, got a {type(config).__name__}.")
    if config.get("model_type") != "simplified":
        raise UsageError(
            f"--init-from: {config_file} is a checkpoint of model_type {config.get('model_type')!r}, not of this "
            "family ('simplified'); convert it first (simplified-convert)."
        )
    try:
        SimplifiedConfig.from_dict(config)
    except (ValueError, TypeError) as err:
        raise UsageError(f"--init-from: {config_file}: {first_line(err)}") from None
    return folder
