"""The presets' datasets as users download and stream them from the Hub: through olah, a real Hub mirror
(tests/olah_hub.py), in the layouts the Hub holds them, by `simplified-train` processes that know only the endpoint.

Each paper-scale preset trains on the dataset it names (never on the embedded corpus), a dataset that cannot be
loaded is one clear error, and a streamed run is resumable mid-stream, exactly."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from olah_hub import CODE_SHARDS, CODEPARROT_TRAIN, CODEPARROT_VALID, GLUE, PILE, PILE_SHARDS, ROWS, pile_rows
from safetensors.torch import load_file

from modeling_simplified.training.presets import available_presets, load_preset
from modeling_simplified.training.runs import latest_checkpoint

REPO = Path(__file__).resolve().parents[1]
SHRINK = [
    "num_hidden_layers=2",
    "hidden_size=64",
    "num_attention_heads=4",
    "intermediate_size=64",
    "vocab_size=512",
    "data.tokenizer_train_samples=60",
    "data.max_eval_samples=8",
    "training.per_device_train_batch_size=4",
    "training.per_device_eval_batch_size=8",
    "training.gradient_accumulation_steps=1",
]
PAPER_PRESETS = [p for p in available_presets() if load_preset(p).data.dataset != "embedded"]
#: one paper-scale preset per family in the default suite; the others are slow
QUICK = ("codeparrot-sas_p", "crammed-bert-sas_p", "glue-finetune")


def shrink(preset: str) -> list[str]:
    """`--set` arguments that shrink a paper-scale preset to seconds (no batch ramp, which needs many steps)."""
    extra = ["training.batch_ramp_to=null"] if load_preset(preset).training.batch_ramp_to else []
    return [arg for assignment in [*SHRINK, *extra] for arg in ("--set", assignment)]


def simplified_train(hub, home: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`simplified-train` in a fresh process that reaches the Hub only through the mirror."""
    return subprocess.run(
        [sys.executable, "-m", "modeling_simplified.training.cli", *args],
        cwd=REPO,
        env=hub.env(home),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def requested(hub, since: int = 0) -> str:
    """The requests olah logged (after byte `since` of its log)."""
    return (hub.root / "olah.log").read_text(errors="replace")[since:]


def _log_size(hub) -> int:
    return len((hub.root / "olah.log").read_text(errors="replace"))


@pytest.mark.parametrize(
    "preset", [p if p in QUICK else pytest.param(p, marks=pytest.mark.slow) for p in PAPER_PRESETS]
)
def test_every_paper_preset_trains_on_the_dataset_it_names(olah_hub, tmp_path, preset):
    data = load_preset(preset).data
    before = _log_size(olah_hub)
    run = tmp_path / "run"
    done = simplified_train(
        olah_hub, tmp_path / "home", "--preset", preset, "--max-steps", "2", "--output-dir", str(run), *shrink(preset)
    )
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = json.loads((run / "metrics.json").read_text())
    source = f"{data.dataset}/{data.dataset_config}" if data.dataset_config else data.dataset
    assert metrics["dataset"] == source and metrics["steps"] == 2
    card = (run / "export" / "README.md").read_text()
    assert f"- {data.dataset}" in card  # the card's `datasets:` metadata names the Hub id
    log = requested(olah_hub, before)
    if data.dataset == PILE:
        # trained on the train shards, evaluated on the Pile's own validation file, never its test file
        assert "train/00.jsonl.zst" in log and "val.jsonl.zst" in log and "test.jsonl.zst" not in log
    elif data.dataset == CODEPARROT_TRAIN:
        assert CODEPARROT_VALID in log and "validation-00000-of-00001.jsonl" in log
    else:
        assert f"{data.dataset_config}/train-00000-of-00001.parquet" in log
        assert f"{data.dataset_config}/validation-00000-of-00001.parquet" in log


def test_a_split_the_dataset_does_not_have_is_one_clear_error_and_nothing_is_written(olah_hub, tmp_path):
    """The Pile's repository has only a `train` split: the evaluation split is its `val.jsonl.zst` by
    `data.eval_data_files`; without it the run stops before writing, naming the id, the split, the splits that exist
    and the fix (it once trained on the embedded corpus instead)."""
    run = tmp_path / "run"
    args = ["--preset", "crammed-bert-sas_p", "--max-steps", "2", "--output-dir", str(run), *shrink("crammed-bert-sas_p")]
    done = simplified_train(olah_hub, tmp_path / "home", *args, "--set", "data.eval_data_files=null")
    assert done.returncode != 0
    error = done.stderr.strip().splitlines()
    assert len(error) == 1, done.stderr
    assert error[0].startswith("simplified-train: error: cannot load dataset 'monology/pile-uncopyrighted'")
    assert "split 'validation'" in error[0] and "has the splits train" in error[0]
    assert "data.eval_split" in error[0] and "data.eval_data_files" in error[0]
    assert "embedded" not in done.stderr.replace("--dataset embedded", "")
    assert not run.exists()


@pytest.mark.parametrize("offline", [False, True], ids=["unreachable", "offline"])
def test_a_hub_preset_without_the_hub_is_one_clear_error(tmp_path, offline):
    """No Hub (a closed port, or HF_HUB_OFFLINE=1 with nothing cached): one error line naming the dataset, in seconds;
    never a run on other data."""
    run = tmp_path / "run"
    env = {**os.environ, "HF_HOME": str(tmp_path / "home"), "HF_ENDPOINT": "http://127.0.0.1:9"}
    env["HF_HUB_OFFLINE"] = env["HF_DATASETS_OFFLINE"] = "1" if offline else "0"
    started = time.time()
    done = subprocess.run(
        [sys.executable, "-m", "modeling_simplified.training.cli", "--preset", "codeparrot-sas_p", "--output-dir", str(run)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0 and time.time() - started < 60
    error = done.stderr.strip().splitlines()
    assert len(error) == 1, done.stderr
    assert error[0].startswith(f"simplified-train: error: cannot load dataset '{CODEPARROT_TRAIN}', split 'train'")
    assert "HF_ENDPOINT" in error[0] and "--dataset embedded" in error[0]
    assert ("unreachable" in error[0]) != offline
    assert not run.exists()
