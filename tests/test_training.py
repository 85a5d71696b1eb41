"""Training through the CLI on the embedded corpora: causal and masked runs learn and write their outputs, a
SIGKILLed run resumes to exactly the weights of an uninterrupted one, fine-tuning beats the majority class, the
Trainer's optimizer uses the model core's weight-decay groups, and bad input fails cleanly."""

import copy
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import MASKED, assert_no_warnings, kill_after_first_checkpoint, tiny_config
from safetensors.torch import load_file
from transformers import TrainerCallback

from modeling_simplified import BLOCK_TYPES, SimplifiedForCausalLM, parameter_groups
from modeling_simplified.training.cli import main
from modeling_simplified.training.presets import (
    TrainingRecipe,
    UsageError,
    apply_override,
    available_presets,
    load_preset,
)
from modeling_simplified.training.runs import latest_checkpoint
from modeling_simplified.training.trainer import BatchRampAdamW, SimplifiedTrainer, training_arguments

REPO = Path(__file__).resolve().parents[1]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# small and quick: few files, short runs, small batches (the presets' recipes otherwise)
CAUSAL = [
    "--preset",
    "codeparrot-tiny-sas_p",
    "--set",
    "data.max_train_samples=40",
    "--set",
    "data.tokenizer_train_samples=40",
    "--set",
    "data.max_eval_samples=32",
    "--set",
    "training.per_device_train_batch_size=8",
    "--set",
    "training.logging_steps=2",
]


def _history(run: Path) -> list[dict]:
    state = json.loads((latest_checkpoint(run) / "trainer_state.json").read_text())
    return state["log_history"]


def _check_png(path: Path):
    import matplotlib.image

    assert path.read_bytes()[:8] == PNG_MAGIC
    image = matplotlib.image.imread(path)
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100


def _check_run(run: Path, task: str) -> dict:
    metrics = json.loads((run / "metrics.json").read_text())
    for key, kind in [
        ("parameters", int),
        ("tokens_seen", int),
        ("tokens_per_second", float),
        ("steps", int),
        ("train_loss", float),
        ("eval_loss", float),
        ("wall_time_s", float),
    ]:
        assert isinstance(metrics[key], kind) and metrics[key] > 0, key
    assert math.isfinite(metrics["eval_loss"])
    if task != "sequence-classification":
        assert metrics["perplexity"] == pytest.approx(math.exp(metrics["eval_loss"]))
        assert metrics["tokens_seen"] == metrics["steps"] * 8 * 128  # full 128-token windows, batch 8
    _check_png(run / "loss_curve.png")
    assert latest_checkpoint(run) is not None
    export = run / "export"
    assert (export / "config.json").is_file() and (export / "model.safetensors").is_file()
    assert (export / "tokenizer.json").is_file()
    return metrics


@pytest.fixture(scope="module")
def causal_run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("causal") / "run"
    assert (
        main(
            [*CAUSAL, "--max-steps", "20", "--set", "training.eval_steps=10", "--output-dir", str(run), "--diagnostics"]
        )
        == 0
    )
    return run


@pytest.fixture(scope="module")
def masked_run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("masked") / "run"
    assert main([*MASKED, "--max-steps", "24", "--set", "training.eval_steps=12", "--output-dir", str(run)]) == 0
    return run


def test_causal_run_learns_and_writes_its_outputs(causal_run):
    metrics = _check_run(causal_run, "causal-lm")
    history = _history(causal_run)
    train = [e["loss"] for e in history if "loss" in e]
    evals = [e["eval_loss"] for e in history if "eval_loss" in e]
    assert len(evals) >= 2 and evals[-1] < evals[0] - 0.5  # evaluated at the start and periodically
    assert sum(train[-3:]) / 3 < train[0] - 0.5
    assert metrics["steps"] == 20 and metrics["block_type"] == "sas_p" and metrics["dataset"].startswith("embedded")
    export = causal_run / "export"
    assert (export / "README.md").is_file()  # the model card
    assert (export / "loss_curve.png").read_bytes() == (causal_run / "loss_curve.png").read_bytes()
    assert json.loads((export / "config.json").read_text())["auto_map"]["AutoModelForCausalLM"]


def test_diagnostics_reach_the_trainer_logs(causal_run):
    logged = [e for e in _history(causal_run) if "loss" in e]
    last = logged[-1]
    for key in (
        "diag/L0/beta_ff",
        "diag/L3/beta_sa",
        "diag/L1/alpha_mean",
        "diag/L1/gamma_std",
        "diag/L0/value_alpha",
        "diag/L0/value_beta",
        "diag/L2/kurtosis",
    ):
        assert key in last, key
    # the gains move away from their init (βFF 0.2, shaped-attention gains 1) and kurtosis is >= 1 by definition
    assert last["diag/L0/beta_ff"] != logged[0]["diag/L0/beta_ff"]
    assert last["diag/L1/alpha_std"] > 0
    assert all(last[f"diag/L{i}/kurtosis"] >= 1.0 for i in range(4))


def test_masked_run_learns_with_the_batch_ramp(masked_run):
    metrics = _check_run(masked_run, "masked-lm")
    history = _history(masked_run)
    evals = [e["eval_loss"] for e in history if "eval_loss" in e]
    assert evals[-1] < evals[0] - 0.5
    batches = [e["batch_size"] for e in history if "batch_size" in e]
    assert batches[0] == 8 and batches[-1] == 16  # ramped from the micro-batch to batch_ramp_to
    assert metrics["task"] == "masked-lm"


def test_fine_tuning_on_the_offline_task_beats_the_majority_class(masked_run, tmp_path, capfd, caplog):
    """...and transformers' load report (the new classifier missing, the masked-LM head unused) is one line saying
    that fine-tuning expects exactly that."""
    run = tmp_path / "glue"
    status = main(
        [
            "--preset",
            "glue-tiny",
            "--init-from",
            str(masked_run),
            "--max-steps",
            "40",
            "--set",
            "training.per_device_train_batch_size=16",
            "--set",
            "data.seq_len=64",
            "--set",
            "training.eval_steps=40",
            "--set",
            "training.learning_rate=1e-3",
            "--output-dir",
            str(run),
            "--no-export",
        ]
    )
    assert status == 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert 0.5 <= metrics["majority_baseline"] < 0.6
    assert metrics["eval_accuracy"] > metrics["majority_baseline"] + 0.05, metrics
    err = capfd.readouterr().err
    assert "LOAD REPORT" not in err + caplog.text  # transformers' logger writes to stderr, or to pytest's log capture
    assert (
        f"--init-from {masked_run / 'export'}: the pretrained trunk is loaded whole; the new head's score.bias, " in err
    )


def test_a_load_that_fine_tuning_does_not_expect_keeps_transformers_report(tmp_path, capfd, caplog):
    """A trunk weight the checkpoint lacks is no fine-tuning's head change: transformers' report stays."""
    from safetensors.torch import save_file

    from modeling_simplified import SimplifiedForMaskedLM, SimplifiedForSequenceClassification
    from modeling_simplified.training.api import _load_for_fine_tuning

    SimplifiedForMaskedLM(tiny_config("sas_p")).save_pretrained(tmp_path / "mlm")
    _load_for_fine_tuning(SimplifiedForSequenceClassification, tmp_path / "mlm", num_labels=2)
    err = capfd.readouterr().err
    assert "LOAD REPORT" not in err + caplog.text
    assert "the new head's score.bias, score.weight start from random weights" in err
    weights = load_file(tmp_path / "mlm" / "model.safetensors")
    del weights["model.norm.weight"]
    save_file(weights, tmp_path / "mlm" / "model.safetensors", metadata={"format": "pt"})
    _load_for_fine_tuning(SimplifiedForSequenceClassification, tmp_path / "mlm", num_labels=2)
    err = capfd.readouterr().err
    report = err + caplog.text  # transformers' logger writes to stderr, or to pytest's log capture
    assert "LOAD REPORT" in report and "model.norm.weight" in report and "as fine-tuning" not in err


def test_dataset_loading_code_streams_a_dataset_in_the_codeparrot_layout(tmp_path):
    """The non-embedded path (load_dataset, streaming, course-style chunking of `content`) on a local dataset
    folder with train/validation files, as the CodeParrot repos provide them."""
    from modeling_simplified.training import corpus

    folder = tmp_path / "codeparrot-like"
    folder.mkdir()
    for split, n in (("train", 30), ("validation", 6)):
        corpus.code_dataset(split, n).to_json(folder / f"{split}.jsonl")
    run = tmp_path / "run"
    status = main(
        [
            *CAUSAL,
            "--dataset",
            str(folder),
            "--set",
            "data.streaming=true",
            "--max-steps",
            "6",
            "--set",
            "training.eval_steps=6",
            "--output-dir",
            str(run),
            "--no-export",
        ]
    )
    assert status == 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["dataset"] == str(folder) and metrics["tokens_seen"] == 6 * 8 * 128
    assert (metrics["eval_dataset"], metrics["eval_split"]) == (str(folder), "validation")  # its own validation split


def _cli(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "modeling_simplified.training.cli", *args],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=dict(os.environ),
    )


def _kill_and_resume_matches_straight_run(tmp_path: Path, base: list[str], steps: int, save_steps: int):
    common = [
        *base,
        "--max-steps",
        str(steps),
        "--set",
        f"training.save_steps={save_steps}",
        "--set",
        f"training.eval_steps={steps}",
        "--no-export",
    ]
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    assert main([*common, "--output-dir", str(straight)]) == 0

    interrupted_at = kill_after_first_checkpoint(_cli(*common, "--output-dir", str(killed)), killed)
    assert interrupted_at is not None and not (killed / "metrics.json").exists()

    # without --preset: the run's saved preset (the same --set and --max-steps are checked against it)
    resumed = _cli(*common[2:], "--output-dir", str(killed), "--resume")
    _, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err.decode()[-2000:]
    # a tied head's checkpoint holds no lm_head.weight: a correct load, no warning
    assert "missing keys" not in err.decode(), err.decode()[-2000:]
    a, b = (json.loads((run / "metrics.json").read_text()) for run in (straight, killed))
    at = int(interrupted_at.name.split("-")[1])
    assert b["resumed_from"] is not None and at < steps
    assert a["steps"] == b["steps"] == steps
    assert a["train_loss"] == b["train_loss"] and a["eval_loss"] == b["eval_loss"]
    # the run-level figures cover the whole run, not the resumed tail
    assert a["preset"] == b["preset"] == base[1]
    assert b["train_loss_mean"] == pytest.approx(a["train_loss_mean"], rel=1e-6, abs=0)
    assert a["tokens_seen"] == b["tokens_seen"]
    assert [(s["from_step"], s["to_step"]) for s in a["segments"]] == [(0, steps)]
    assert [(s["from_step"], s["to_step"]) for s in b["segments"]] == [(0, at), (at, steps)]
    for m in (a, b):
        assert m["train_time_s"] == pytest.approx(sum(s["train_time_s"] for s in m["segments"]))
        assert m["wall_time_s"] == pytest.approx(sum(s["wall_time_s"] for s in m["segments"]))
        assert m["tokens_per_second"] == pytest.approx(m["tokens_seen"] / m["train_time_s"])
        assert all(0 < s["train_time_s"] < s["wall_time_s"] for s in m["segments"])
    wa = load_file(latest_checkpoint(straight) / "model.safetensors")
    wb = load_file(latest_checkpoint(killed) / "model.safetensors")
    assert wa.keys() == wb.keys()
    for name in wa:
        assert torch.equal(wa[name], wb[name]), name


def test_killed_run_resumes_to_exactly_the_uninterrupted_result(tmp_path):
    _kill_and_resume_matches_straight_run(tmp_path, CAUSAL, steps=16, save_steps=8)


def _snapshot(run: Path) -> dict[str, tuple[int, str]]:
    """Every file of a run folder: its modification time and content hash."""
    return {
        p.relative_to(run).as_posix(): (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in sorted(run.rglob("*"))
        if p.is_file()
    }


def test_resuming_a_finished_run_changes_nothing_and_a_larger_max_steps_trains_it_further(tmp_path, capsys):
    """transformers' Trainer, resumed at its last step, trains one more (at lr 0), saves checkpoint-5, rotates out
    checkpoint-2 and rewrites the run's report, plot and export: the CLI says the run is finished and writes nothing.
    `--resume --max-steps 6` continues it, the lr schedule recomputed for 6 steps."""
    run = tmp_path / "run"
    common = [*CAUSAL[2:], "--set", "training.save_steps=2", "--set", "training.save_total_limit=2"]
    assert main(["--preset", CAUSAL[1], *common, "--max-steps", "4", "--output-dir", str(run)]) == 0
    capsys.readouterr()
    before = _snapshot(run)
    assert {"checkpoint-2/trainer_state.json", "checkpoint-4/trainer_state.json", "export/tokenizer.json"} <= set(
        before
    )
    time.sleep(0.01)  # a rewrite would show in the modification times

    for extra in ([], ["--max-steps", "4"], ["--max-steps", "3"]):  # with or without the preset named
        assert main([*common, *extra, "--output-dir", str(run), "--resume"]) == 0
        out = capsys.readouterr().out
        assert f"the run in {run} is finished (4 steps); nothing was trained or written" in out
        assert "--max-steps above 4" in out
        assert _snapshot(run) == before
    assert main(["--preset", CAUSAL[1], *common, "--max-steps", "4", "--output-dir", str(run), "--resume"]) == 0
    assert _snapshot(run) == before
    # killed after its last checkpoint, before its report: refused with the way out, nothing written
    cut = tmp_path / "cut"
    shutil.copytree(run, cut)
    (cut / "metrics.json").unlink()
    cut_files = _snapshot(cut)
    capsys.readouterr()
    assert main([*common, "--output-dir", str(cut), "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "reached its last step (checkpoint-4)" in err[0], err
    assert f"simplified-export {cut / 'checkpoint-4'}" in err[0] and "a larger --max-steps" in err[0]
    assert _snapshot(cut) == cut_files

    # a larger --max-steps is the explicit way on: the run trains to 6, its report covers all 6 steps
    assert main([*common, "--max-steps", "6", "--output-dir", str(run), "--resume"]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["steps"] == 6 and metrics["resumed_from"] == str(run / "checkpoint-4")
    assert [(s["from_step"], s["to_step"]) for s in metrics["segments"]] == [(0, 4), (4, 6)]
    assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-4", "checkpoint-6"]
    rates = {e["step"]: e["learning_rate"] for e in _history(run) if "learning_rate" in e}
    # the lr of each logged step: the 4-step linear decay would run any further step at 0, the 6-step one does not
    assert 0 < rates[6] < rates[4]
    assert json.loads((run / "preset.json").read_text())["training"]["max_steps"] == 6
    capsys.readouterr()
    assert main([*common, "--output-dir", str(run), "--resume"]) == 0  # now finished at 6
    assert "is finished (6 steps)" in capsys.readouterr().out


@pytest.mark.slow
def test_killed_masked_run_with_batch_ramp_resumes_exactly(tmp_path):
    """Masks are seeded by batch content and the ramp's gradient accumulator is checkpointed: a checkpoint at
    micro-step 9 falls inside an accumulation."""
    _kill_and_resume_matches_straight_run(tmp_path, MASKED, steps=24, save_steps=9)


def test_trainer_optimizer_uses_the_model_core_groups(tmp_path):
    model = SimplifiedForCausalLM(tiny_config("sas_p"))
    from modeling_simplified.training.presets import load_preset

    recipe = load_preset("codeparrot-tiny-sas_p").training
    args = training_arguments(recipe, str(tmp_path), eval_strategy="no")
    trainer = SimplifiedTrainer(model=model, args=args, recipe=recipe)
    optimizer = trainer.create_optimizer()
    expected = parameter_groups(model, recipe.weight_decay)
    assert isinstance(optimizer, torch.optim.AdamW)
    assert len(optimizer.param_groups) == len(expected)
    for got, want in zip(optimizer.param_groups, expected):
        assert [id(p) for p in got["params"]] == [id(p) for p in want["params"]]
        assert got["weight_decay"] == want["weight_decay"]
        assert got["betas"] == (recipe.adam_beta1, recipe.adam_beta2) and got["eps"] == recipe.adam_epsilon
    no_decay = {id(p) for p in optimizer.param_groups[1]["params"]}
    gains = [layer.mlp_gain.weight for layer in model.model.layers] + [model.model.layers[0].attn.mixing.alpha.weight]
    assert all(id(g) in no_decay for g in gains)


def test_batch_ramp_accumulates_to_the_ramped_batch_and_matches_adamw():
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(3, 3))
    ramp = BatchRampAdamW([w], micro_batch=8, final_batch=32, ramp_steps=12, lr=0.1)
    assert [ramp.batch_size(s) for s in (0, 2, 3, 6, 9, 12, 50)] == [8, 8, 16, 24, 32, 32, 32]
    ref_w = torch.nn.Parameter(w.detach().clone())
    ref = torch.optim.AdamW([ref_w], lr=0.1)
    grads = [torch.randn(3, 3) for _ in range(7)]
    # micro-steps 0, 1, 2 update alone (batch 8); micro-steps 3 and 4 accumulate into one update (batch 16)
    for g in grads[:3]:
        w.grad, ref_w.grad = g.clone(), g.clone()
        ramp.step()
        ref.step()
    w.grad = grads[3].clone()
    ramp.step()
    assert torch.equal(w, ref_w)  # no update yet: gradients are accumulating
    state = ramp.state_dict()
    fresh = BatchRampAdamW(
        [torch.nn.Parameter(w.detach().clone())], micro_batch=8, final_batch=32, ramp_steps=12, lr=0.1
    )
    fresh.load_state_dict(state)
    assert fresh.micro_steps == 4 and fresh.accumulated == 1
    w.grad = grads[4].clone()
    ramp.step()
    ref_w.grad = (grads[3] + grads[4]) / 2
    ref.step()
    assert torch.allclose(w, ref_w, atol=1e-7)
    assert ramp.updates_until(5) == 4


def test_classification_data_uses_the_tokenizer_the_preset_names(wordpiece_tokenizer, tmp_path):
    """`data.tokenizer` holds for classification as for language modelling: a run trained from scratch can share a
    pretrained run's vocabulary (the reproduction's fine-tuning control)."""
    from modeling_simplified.training.data import build_task_data
    from modeling_simplified.training.presets import DataSpec

    wordpiece_tokenizer.save_pretrained(tmp_path / "tokenizer")
    spec = DataSpec(tokenizer=str(tmp_path / "tokenizer"), seq_len=32, max_train_samples=8, max_eval_samples=8)
    data = build_task_data("sequence-classification", spec, vocab_size=4096)
    assert len(data.tokenizer) == len(wordpiece_tokenizer) == 400
    assert data.tokenizer.get_vocab() == wordpiece_tokenizer.get_vocab()
    assert max(max(ids) for ids in data.train["input_ids"]) < 400


# -- packing -----------------------------------------------------------------------------------------------------
def test_packing_data_keeps_short_windows_and_masks_the_flattened_row(wordpiece_tokenizer):
    """With packing, a text's short last window is kept (nothing is padded); the masked-LM packing collator gives
    one row, positions restarting at each sequence, labels only where it masked, never on special tokens."""
    from modeling_simplified.training.data import PackingCollator, ResumableMaskingCollator, chunk_causal

    texts = {"text": ["def f(x):\n    return x + 1\n" * 20, "import os\n"]}
    full = chunk_causal(texts, wordpiece_tokenizer, "text", 16)["input_ids"]
    packed = chunk_causal(texts, wordpiece_tokenizer, "text", 16, packing=True)["input_ids"]
    assert {len(w) for w in full} == {16} and len(packed) > len(full) and min(len(w) for w in packed) < 16
    masker = ResumableMaskingCollator(wordpiece_tokenizer, mlm=True, mlm_probability=0.5, seed=0)
    features = [{"input_ids": w} for w in packed]
    batch = PackingCollator(masker)(features)
    originals = torch.tensor([i for w in packed for i in w])[None]
    assert batch["input_ids"].shape == originals.shape and "attention_mask" not in batch
    assert torch.equal(batch["position_ids"][0], torch.cat([torch.arange(len(w)) for w in packed]))
    labelled = batch["labels"] != -100
    assert labelled.any() and torch.equal(batch["labels"][labelled], originals[labelled])
    special = torch.isin(originals, torch.tensor(wordpiece_tokenizer.all_special_ids))
    assert not (labelled & special).any()
    assert torch.equal(batch["input_ids"][~labelled], originals[~labelled])  # unmasked tokens stay as they were
    causal = PackingCollator()(features)
    assert causal["labels"][0, 0] == -100 and torch.equal(causal["input_ids"], originals)


@pytest.mark.slow
@pytest.mark.parametrize("args", [CAUSAL, MASKED], ids=["causal-lm", "masked-lm"])
def test_packing_trains_on_padding_free_batches(tmp_path, args):
    """`--packing`: every batch the Trainer sees is one row of windows of at most `data.seq_len` tokens, positions
    restarting at 0 in each (rows longer than the model's positions, never padded); a few steps train and evaluate
    to a finite loss."""
    from modeling_simplified.training import data

    seen = []

    collate = data.PackingCollator.__call__

    def spy(self, features):
        batch = collate(self, features)
        seen.append((batch, [len(f["input_ids"]) for f in features]))
        return batch

    data.PackingCollator.__call__ = spy
    try:
        run = tmp_path / "run"
        common = ["--max-steps", "3", "--set", "training.eval_steps=3", "--no-export", "--output-dir", str(run)]
        assert main([*args, "--packing", *common]) == 0
    finally:
        data.PackingCollator.__call__ = collate
    metrics = json.loads((run / "metrics.json").read_text())
    assert math.isfinite(metrics["eval_loss"]) and metrics["steps"] == 3
    assert json.loads((run / "preset.json").read_text())["data"]["packing"] is True
    assert max(n for _, sizes in seen for n in sizes) <= 128  # windows of at most data.seq_len
    for batch, sizes in seen:
        assert batch["input_ids"].shape == (1, sum(sizes)) and "attention_mask" not in batch
        expected = torch.cat([torch.arange(n) for n in sizes])
        assert torch.equal(batch["position_ids"][0], expected)
        assert (batch["labels"] != -100).any()
    assert any(batch["input_ids"].shape[1] > 128 for batch, _ in seen)  # rows longer than the learned positions


# -- bad input ---------------------------------------------------------------------------------------------------
def _existing_run(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    run = tmp_path / "run"
    (run / "checkpoint-5").mkdir(parents=True)
    files = {"metrics.json": b'{"eval_loss": 1.0}', "checkpoint-5/trainer_state.json": b"{}", "notes.txt": b"mine"}
    for name, content in files.items():
        (run / name).write_bytes(content)
    return run, files


@pytest.mark.parametrize(
    "args, message",
    [
        (["--preset", "nope"], "unknown preset 'nope'; available presets: "),
        (["--preset", "codeparrot-tiny-sas_p", "--set", "foo=1"], "unknown config field 'foo'"),
        (["--preset", "codeparrot-tiny-sas_p", "--set", "hidden_act=tanh"], "hidden_act='tanh' is not valid"),
        (
            ["--preset", "codeparrot-tiny-sas_p", "--dataset", "no-such-org/no-such-dataset"],
            "cannot load dataset 'no-such-org/no-such-dataset'",
        ),
        (["--preset", "glue-tiny", "--dataset", "nyu-mll/glue", "--dataset-config", "sst3"], "not a GLUE task"),
        (["--preset", "glue-tiny", "--packing"], "data.packing (--packing) is for the causal-lm and masked-lm tasks"),
    ],
)
def test_bad_input_gives_one_clear_message_and_touches_nothing(tmp_path, capsys, args, message):
    run, files = _existing_run(tmp_path)
    status = main([*args, "--output-dir", str(run), "--overwrite"])
    err = capsys.readouterr().err
    assert status == 2
    assert message in err and "Traceback" not in err
    assert err.count("simplified-train: error:") == 1
    assert sorted(p.relative_to(run).as_posix() for p in run.rglob("*")) == sorted([*files, "checkpoint-5"])
    assert all((run / name).read_bytes() == content for name, content in files.items())


def test_a_non_empty_output_dir_needs_resume_or_overwrite(tmp_path, capsys):
    run, files = _existing_run(tmp_path)
    assert main(["--preset", "codeparrot-tiny-sas_p", "--output-dir", str(run)]) == 2
    assert "is not empty; pass --resume" in capsys.readouterr().err
    assert main(["--preset", "codeparrot-tiny-sas_p", "--output-dir", str(tmp_path / "empty"), "--resume"]) == 2
    assert "no complete checkpoint" in capsys.readouterr().err
    assert all((run / name).read_bytes() == content for name, content in files.items())


def test_console_script_exits_non_zero_without_traceback():
    proc = subprocess.run(
        [sys.executable, "-m", "modeling_simplified.training.cli", "--preset", "nope"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "unknown preset 'nope'" in proc.stderr and "Traceback" not in proc.stderr
    help_text = subprocess.run(
        [sys.executable, "-m", "modeling_simplified.training.cli", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert help_text.returncode == 0
    for flag in (
        "--preset",
        "--block-type",
        "--max-steps",
        "--output-dir",
        "--dataset",
        "--resume",
        "--set",
        "--diagnostics",
        "codeparrot-tiny-sas_p",
    ):
        assert flag in help_text.stdout


#: runs `simplified-train` with argv in this process, then prints which of the training stack's modules it imported
_CLI_IMPORTS = """
import json, sys
from modeling_simplified.training.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps([m for m in ("transformers.trainer", "datasets", "matplotlib") if m in sys.modules]))
"""


@pytest.mark.parametrize(
    "args, message",
    [
        (["--help"], None),
        (
            ["--preset", "codeparrot-tiny-sas_p", "--block-type", "sasp"],
            "argument --block-type: invalid choice: 'sasp' (choose from "
            + ", ".join(f"'{b}'" for b in BLOCK_TYPES)
            + ")",
        ),
        # a fresh interpreter each (~5 s): two in the default suite, the others slow
        pytest.param(["--max-steps", "ten"], "argument --max-steps: invalid int value: 'ten'", marks=pytest.mark.slow),
        pytest.param(
            ["--preset", "codeparrot-tiny-sas_p", "--bogus"], "unrecognized arguments: --bogus", marks=pytest.mark.slow
        ),
    ],
    ids=["help", "block-type", "max-steps", "unknown-option"],
)
def test_help_and_bad_options_answer_without_loading_the_training_stack(args, message):
    """`--help` and argparse's errors come before the Trainer, datasets and matplotlib are imported (seconds), and an
    error is one line like every other of the CLI, not argparse's usage block."""
    proc = subprocess.run(
        [sys.executable, "-c", _CLI_IMPORTS, *args], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    *printed, loaded = proc.stdout.strip().splitlines()
    assert json.loads(loaded) == [], proc.stderr[-2000:]
    if message is None:
        assert "--resume" in "\n".join(printed) and proc.stderr == ""
    else:
        assert proc.stderr.splitlines() == [f"simplified-train: error: {message} (see --help)."]
        assert "usage:" not in proc.stdout + proc.stderr


def test_list_presets_names_every_preset_with_its_task(capsys):
    assert main(["--list-presets"]) == 0
    rows = [line.split()[:2] for line in capsys.readouterr().out.splitlines()]
    assert [name for name, _ in rows] == available_presets()
    assert dict(rows)["glue-tiny"] == "sequence-classification"


def test_demo_trains_exports_reloads_with_remote_code_and_generates(tmp_path, capsys):
    """`make demo` in miniature; it logs no warning (transformers', datasets', ours) and raises no Python warning."""
    from examples import demo

    with assert_no_warnings():
        status = demo.main(
            [
                "--output-dir",
                str(tmp_path / "demo"),
                "--max-steps",
                "4",
                "--new-tokens",
                "8",
                "--set",
                "data.max_train_samples=40",
                "--set",
                "data.tokenizer_train_samples=40",
                "--set",
                "data.max_eval_samples=16",
                "--set",
                "training.per_device_train_batch_size=8",
            ]
        )
    out = capsys.readouterr().out
    assert status == 0
    assert "reloaded" in out and "trust_remote_code=True" in out
    completion = out.split("greedy completion:\n", 1)[1]
    assert completion.startswith(demo.PROMPT) and len(completion) > len(demo.PROMPT)
    # the class was loaded from the export's own code, not from this package
    assert "transformers_modules" in out


def test_a_missing_local_dataset_folder_is_named_not_the_network(tmp_path, capsys, monkeypatch):
    """`--dataset /nonexistent` said "the dataset host is unreachable" on a machine without network."""
    import datasets

    from modeling_simplified.training import data

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(data, "_host_reachable", lambda timeout=3.0: False)  # no network either
    missing = tmp_path / "nonexistent"
    run = tmp_path / "run"
    assert main(["--preset", "codeparrot-tiny-sas_p", "--dataset", str(missing), "--output-dir", str(run)]) == 2
    err = capsys.readouterr().err
    assert f"no such folder: {missing}" in err and "Check the path" in err, err
    assert "unreachable" not in err and "connection" not in err
    assert not run.exists()


# ----------------------------------------------------------------------------------------------------------------
# bf16 (the Trainer's autocast) for every block type
# ----------------------------------------------------------------------------------------------------------------
def _left_padded(features: list[dict]) -> dict[str, torch.Tensor]:
    length = max(len(f["input_ids"]) for f in features)
    ids = torch.zeros(len(features), length, dtype=torch.long)
    for row, f in enumerate(features):
        ids[row, length - len(f["input_ids"]) :] = torch.tensor(f["input_ids"])
    mask = (ids != 0).long()
    return {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)}


class _FirstStep(TrainerCallback):
    """The gradients of the first optimizer step, and whether the blocks' matmuls ran in bf16."""

    def __init__(self, model):
        self.grads, self.dtypes, self.residual = None, set(), set()
        model.model.layers[0].mlp.fc_in.register_forward_hook(lambda m, a, out: self.dtypes.add(out.dtype))
        for layer in model.model.layers:
            layer.register_forward_hook(lambda m, a, out: self.residual.add(out.dtype))

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        if self.grads is None:
            self.grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("layout", ["padded", "packed"])
def test_trainer_bf16_trains_every_block_type(block_type, layout, tmp_path):
    """`TrainingArguments(bf16=True)`: autocast over float32 master weights, with the fused head + loss, on left-padded
    and on packed (padding-free, `DataCollatorWithFlattening`) batches. The matmuls run in bf16; the weights, their
    gradients and the residual stream (every block's output) stay float32; the first step's gradient is float32's to
    bf16 precision (cosine ≥ 0.99 over all parameters), and a few steps lower the loss."""
    from transformers import DataCollatorWithFlattening, Trainer, TrainingArguments

    torch.manual_seed(0)
    model = SimplifiedForCausalLM(tiny_config(block_type, pad_token_id=0)).train()
    reference = copy.deepcopy(model)
    gen = torch.Generator().manual_seed(0)
    features = [{"input_ids": torch.randint(1, 97, (n,), generator=gen).tolist()} for n in (9, 14, 6, 12)]
    collator = DataCollatorWithFlattening(return_tensors="pt") if layout == "packed" else _left_padded
    args = TrainingArguments(
        output_dir=str(tmp_path),
        bf16=True,
        use_cpu=True,
        max_steps=5,
        per_device_train_batch_size=4,
        learning_rate=1e-2,
        lr_scheduler_type="constant",
        max_grad_norm=0.0,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
    )
    first = _FirstStep(model)
    trainer = Trainer(model=model, args=args, train_dataset=features, data_collator=collator, callbacks=[first])
    trainer.train()

    assert first.dtypes == {torch.bfloat16} and first.residual == {torch.float32}
    assert all(p.dtype == torch.float32 for p in model.parameters())
    batch = collator(features)
    if layout == "packed":
        assert "attention_mask" not in batch and batch["input_ids"].shape[0] == 1
    reference(**batch).loss.backward()
    expected = {n: p.grad for n, p in reference.named_parameters() if p.grad is not None}
    assert first.grads.keys() == expected.keys()
    assert all(g.dtype == torch.float32 and torch.isfinite(g).all() for g in first.grads.values())
    ours, theirs = (torch.cat([g[n].flatten() for n in sorted(expected)]) for g in (first.grads, expected))
    assert torch.nn.functional.cosine_similarity(ours, theirs, dim=0) >= 0.99
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 5 and losses[-1] < losses[0]


def test_bf16_recipe_field_is_the_trainers_bf16(tmp_path):
    """`training.bf16` becomes `TrainingArguments.bf16` (default off); `--set` accepts only a boolean."""
    assert training_arguments(TrainingRecipe(learning_rate=1e-3), str(tmp_path)).bf16 is False
    assert training_arguments(TrainingRecipe(learning_rate=1e-3, bf16=True), str(tmp_path)).bf16 is True
    preset = load_preset("codeparrot-tiny-sas_p")
    apply_override(preset, "training.bf16=true")
    assert preset.training.bf16 is True
    with pytest.raises(UsageError, match="training.bf16"):
        apply_override(preset, "training.bf16=bfloat16")


@pytest.mark.slow
def test_bf16_option_trains_under_bf16_autocast(tmp_path, monkeypatch):
    """`--bf16` (`training.bf16`): the Trainer's `bf16=True`, recorded in the run's preset. The blocks' matmuls run
    in bf16 while the weights stay float32 (the export is float32), and the training loss differs from float32's."""
    from modeling_simplified.modeling_simplified import SimplifiedMLP

    dtypes = set()
    forward = SimplifiedMLP.forward

    def spy(self, x):
        out = forward(self, x)
        dtypes.add(out.dtype)
        return out

    monkeypatch.setattr(SimplifiedMLP, "forward", spy)
    losses = {}
    for name, extra in (("float32", []), ("bf16", ["--bf16"])):
        run = tmp_path / name
        common = ["--max-steps", "2", "--set", "training.eval_steps=2", "--output-dir", str(run)]
        assert main([*CAUSAL, *extra, *common]) == 0
        # the last training loss: a bf16 forward's (two steps barely move AdamW's sign-like first updates, so the
        # float32 eval loss of the two runs' weights can round alike)
        losses[name] = json.loads((run / "metrics.json").read_text())["train_loss"]
        assert json.loads((run / "preset.json").read_text())["training"]["bf16"] is bool(extra)
        assert json.loads((run / "export" / "config.json").read_text())["dtype"] == "float32"
        precision = json.loads((run / "metrics.json").read_text())["training_precision"]
        assert precision == ("bf16 mixed precision (bf16 autocast, float32 weights)" if extra else "float32")
        assert f"| training precision | {precision} |" in (run / "export" / "README.md").read_text()
    assert dtypes == {torch.float32, torch.bfloat16}
    assert losses["bf16"] != losses["float32"] and abs(losses["bf16"] - losses["float32"]) < 0.05
