"""Run folders of `simplified-train`: the latest complete checkpoint, and the pretrained folder inside a run."""

from __future__ import annotations

import json
from pathlib import Path

from modeling_simplified.configuration_simplified import SimplifiedConfig

from .presets import UsageError, first_line


def latest_checkpoint(output_dir: Path) -> Path | None:
    """The highest-numbered `checkpoint-<n>` whose `trainer_state.json` was written completely (it is written
    last, so a run killed while saving leaves an incomplete folder that is skipped)."""
    best = None
    for path in output_dir.glob("checkpoint-*"):
        suffix = path.name.removeprefix("checkpoint-")
        state = path / "trainer_state.json"
        if not (suffix.isdigit() and state.is_file()):
            continue
        try:
            json.loads(state.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if best is None or int(suffix) > int(best.name.removeprefix("checkpoint-")):
            best = path
    return best


def pretrained_dir(path: str) -> Path:
    """A folder with `config.json` and weights inside a run (`export/`), an export, or a checkpoint."""
    root = Path(path)
    for candidate in (root / "export", root):
        if (candidate / "config.json").is_file():
            return _checked_pretrained(candidate)
    checkpoint = latest_checkpoint(root) if root.is_dir() else None
    if checkpoint is not None:
        return _checked_pretrained(checkpoint)
    raise UsageError(
        f"--init-from {path!r}: no pretrained model there (expected a run directory, an export or a "
        "checkpoint folder with config.json)."
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
