"""A run as planned: the `TrainPlan` that `simplified-train` parses argv into and `api.train` runs. Light to import
(no Trainer, datasets or matplotlib), so that the CLI answers `--help` and bad arguments before loading them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from .presets import Preset


@dataclasses.dataclass
class RaptrOptions:
    """RaPTr progressive subnetworks (Panigrahi et al. 2024; `raptr.py`): the `RaptrCallback` arguments and the lr
    schedule (`stagewise`, the paper's §4 / App. D.4: the peak lr constant through every stage but the last, then a
    linear decay to 0; `preset`: the preset's own schedule)."""

    spec: str = "recommended"
    lengths: str | list[int] = "equal"
    full_model_steps: int = 0
    scaling: str | None = None
    variant: str = "depth"
    lr_schedule: str = "stagewise"


@dataclasses.dataclass
class TrainPlan:
    """One run: the preset as it is to be trained (model fields, `TrainingRecipe`, `DataSpec`, after any block
    switch and overrides; `train` validates it) and what to do with it."""

    preset: Preset
    output_dir: Path  # a str is taken as a path
    #: continue the run in `output_dir` from its last complete checkpoint (with the same preset; a larger
    #: `training.max_steps` trains it further); a run that already reached its steps is left as it is
    resume: bool = False
    #: replace a previous run in `output_dir` (without it, a non-empty `output_dir` is refused)
    overwrite: bool = False
    #: per-layer gains, activation kurtosis and signal propagation (`callbacks.py`), logged and returned
    diagnostics: bool = False
    #: write the Hub-ready export (`output_dir/export`)
    export: bool = True
    raptr: RaptrOptions | None = None

    def __post_init__(self) -> None:
        self.output_dir = Path(self.output_dir)
