"""Training parity with the authors' code (`experiments/authors_parity/`): the vendored source and its CPU patch, the
parameter groups mapped through the conversion (from the committed record of their Trainer's groups), the result
helpers and file; and, where the authors' venv has been set up, a few training steps of both codes compared."""

import json
import subprocess
from pathlib import Path

import pytest
import torch

from experiments.authors_parity import results as res
from experiments.authors_parity import venv
from experiments.authors_parity.settings import BLOCKS, Miniature

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "docs" / "reproduction" / "authors-parity" / "results.json"


@pytest.fixture(scope="module")
def result():
    return json.loads(RESULTS.read_text())


def test_the_vendored_source_is_theirs_and_the_patch_removes_only_the_cuda_calls(tmp_path):
    src = venv.prepare_source(tmp_path)
    patched = (src / "simplified_transformers" / "model_utils.py").read_text()
    original = (venv.UPSTREAM / "simplified_transformers" / "model_utils.py").read_text()
    assert ".cuda()" in original and ".cuda()" not in patched
    changed = [(a, b) for a, b in zip(original.split("\n"), patched.split("\n")) if a != b]
    assert len(changed) == len(venv.CPU_PATCH) == 3
    assert all(b == a.replace(".cuda()", "") for a, b in changed)
    assert (src / "simplified_transformers" / "train_utils.py").read_text() == (
        venv.UPSTREAM / "simplified_transformers" / "train_utils.py"
    ).read_text()


def test_a_changed_vendored_file_is_refused(tmp_path, monkeypatch):
    upstream = tmp_path / "upstream"
    import shutil

    shutil.copytree(venv.UPSTREAM, upstream)
    (upstream / "simplified_transformers" / "train_utils.py").write_text("# not theirs\n")
    monkeypatch.setattr(venv, "UPSTREAM", upstream)
    with pytest.raises(venv.SetupError, match="train_utils.py: missing or not the file of"):
        venv.prepare_source(tmp_path / "build")


def test_a_patch_line_that_is_not_found_is_an_error():
    with pytest.raises(venv.SetupError, match="occurs 0 times"):
        venv.patch_text("simplified_transformers/model_utils.py", "nothing to patch here\n")


@pytest.mark.parametrize("block", BLOCKS)
def test_our_parameter_groups_match_their_trainers_groups(result, block):
    """Their `MyTrainer` groups, recorded per parameter, against `parameter_groups` on the converted model: every
    trainable parameter of theirs maps to one of ours, with the same weight decay, and nothing else trains here."""
    groups = result["parameter_groups"][block]
    comparison = res.compare_groups(groups["their_config"], groups["their_parameters"], 0.1)
    assert comparison == groups["comparison"]
    assert comparison["differ"] == [] and comparison["trainable_only_theirs"] == []
    assert comparison["trainable_only_ours"] == []
    assert comparison["decayed_theirs"], "their matrices take weight decay"


def test_the_group_comparison_sees_a_gain_that_takes_weight_decay(result, monkeypatch):
    """Were the scalar gains decayed here (all trainable parameters in one decayed group), the comparison says so."""

    def decay_everything(model, weight_decay):
        return [{"params": [p for p in model.parameters() if p.requires_grad], "weight_decay": weight_decay}]

    monkeypatch.setattr(res, "parameter_groups", decay_everything)
    groups = result["parameter_groups"]["sas"]
    differ = res.compare_groups(groups["their_config"], groups["their_parameters"], 0.1)["differ"]
    assert differ and all(row["their_weight_decay"] == 0.0 and row["our_weight_decay"] == 0.1 for row in differ)
    assert any("gain" in row["theirs"] for row in differ)


def test_result_helpers():
    diff = res.max_difference([1.0, 2.0, 3.0], [1.0, 2.5, 3.1])
    assert diff["max_abs"] == pytest.approx(0.5) and diff["at_step"] == 2 and diff["steps"] == 3
    assert res.tail_loss(list(range(20)), 0.1) == pytest.approx(18.5)
    lead = res.lead({"pre_ln": [[2.0] * 10, [4.0] * 10], "sas": [[1.8] * 10, [4.4] * 10]}, "sas")
    assert lead["per_seed"] == pytest.approx([-0.1, 0.1]) and lead["mean"] == pytest.approx(0.0)


def test_the_committed_result_has_exact_parity_for_at_least_100_steps(result):
    assert set(result["exact"]) == set(BLOCKS)
    for block, row in result["exact"].items():
        assert row["float64"]["steps"] >= 100, block
        assert row["float64"]["max_abs"] <= result["tolerance"], block
        assert row["lr_max_abs_difference"] == 0.0, block
        same = row["ours_vs_theirs_torch_adamw"]
        assert len(row["curves"]["ours"]) == same["steps"] >= 100
    assert result["authors"]["commit"] == venv.COMMIT
    assert res.exact_table(result).count("\n") == len(BLOCKS) + 1
    assert res.lead_table(result).count("\n") == sum(len(at["blocks"]) for at in result["init_parity"]) + 1


@pytest.mark.slow
def test_both_codes_train_equal_steps(tmp_path):
    """Five steps of their SAS (their venv, their Trainer, torch AdamW) and of ours from its converted initial
    weights, both in float64: the per-step losses agree to `TOLERANCE`. Needs `build/authors-parity/venv` (`python -m experiments.authors_parity` sets it up)."""
    python = venv.venv_python(REPO / "build" / "authors-parity")
    if not python.is_file():
        pytest.skip(f"the authors' venv is not set up ({python} missing): make authors-venv (make test-slow builds it)")
    from experiments.authors_parity import our_side
    from experiments.authors_parity.__main__ import their_job
    from experiments.authors_parity.settings import build_batches

    setting = Miniature(n_layer=2, n_embd=64, n_head=2, seq_len=32, vocab_size=512, batch=4, steps=5, train_files=20)
    data = build_batches(setting, tmp_path / "data.pt")
    src = venv.prepare_source(tmp_path / "build")
    job = {
        **their_job(setting, data, src),
        "name": "sas",
        "data": str(tmp_path / "data.pt"),
        "overrides": setting.their_overrides("sas"),
        "seed": 0,
        "optims": ["adamw_torch"],
        "save_init": True,
        "dtype": "float64",
        "out": str(tmp_path / "theirs"),
    }
    (tmp_path / "job.json").write_text(json.dumps(job))
    their_side = REPO / "experiments" / "authors_parity" / "their_side.py"
    done = subprocess.run([str(python), str(their_side), str(tmp_path / "job.json")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    theirs = json.loads((tmp_path / "theirs" / "adamw_torch.json").read_text())
    torch.manual_seed(0)
    model = our_side.converted_model(tmp_path / "theirs" / "init", tmp_path / "converted", torch.float64)
    ours = our_side.train(model, data, setting, 0)
    assert len(ours["train_loss"]) == len(theirs["train_loss"]) == 5
    assert max(abs(a - b) for a, b in zip(ours["train_loss"], theirs["train_loss"])) <= res.TOLERANCE
    assert ours["lr"] == theirs["lr"]
