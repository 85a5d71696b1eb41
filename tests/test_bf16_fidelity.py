"""experiments/bf16_fidelity.py: the comparison of bf16 and float32 runs, on synthetic records."""

import argparse

import pytest

from experiments import bf16_fidelity as fidelity


def _record(block, seed, final, lr=0.004):
    losses = [[s, final + (300 - s) / 100] for s in range(5, 301, 5)]
    return {
        "block": block,
        "seed": seed,
        "learning_rate": lr,
        "steps": 300,
        "train_loss": losses,
        "eval_loss": {"300": final},
    }


def test_bf16_is_within_float32_spread_when_each_paired_difference_is_smaller_than_the_seed_range():
    runs = {
        "float32": [
            _record("sas", 0, 4.00),
            _record("sas", 1, 4.10),
            _record("pre_ln", 0, 4.0),
            _record("pre_ln", 1, 4.02),
        ],
        "bf16": [
            _record("sas", 0, 4.05),
            _record("sas", 1, 4.05),
            _record("pre_ln", 0, 4.03),
            _record("pre_ln", 1, 4.02),
        ],
    }
    table = fidelity.compare([("sas", 0.004), ("pre_ln", 0.004)], runs)
    sas = table["sas @ 0.004"]["final_eval_loss"]
    assert sas["float32"] == [4.00, 4.10] and sas["bf16"] == [4.05, 4.05]
    assert sas["difference"] == pytest.approx([0.05, -0.05]) and sas["float32_range"] == pytest.approx(0.10)
    assert sas["within_float32_spread"] is True
    pre_ln = table["pre_ln @ 0.004"]["final_eval_loss"]  # seed 0 moved by 0.03, more than the seeds differ (0.02)
    assert pre_ln["within_float32_spread"] is False
    assert table["pre_ln @ 0.004"]["end_train_loss"]["within_float32_spread"] is False


def test_float32_reruns_are_compared_with_every_logged_loss_of_the_committed_record():
    reference = {"runs": [_record("sas", 0, 4.0), _record("sas", 1, 4.1)]}
    changed = _record("sas", 1, 4.1)
    changed["train_loss"][3][1] += 1e-7
    reruns = [_record("sas", 0, 4.0), changed, _record("pre_ln", 0, 4.0)]
    assert fidelity.against_committed(reruns, reference) == {
        "sas seed 0": "equal",
        "sas seed 1": "different",
        "pre_ln seed 0": "absent",
    }


def test_the_runs_are_the_reproductions_with_training_bf16_in_their_own_folders(tmp_path):
    args = argparse.Namespace(blocks=["pre_ln", "sas_p"], seeds=[0, 1], jobs=1, runs_dir=str(tmp_path), steps=None)
    lrs = [("pre_ln", 0.004), ("sas_p", 0.008)]
    (f32_args, f32), (bf16_args, bf16) = (fidelity.planned(args, dtype, lrs) for dtype in ("float32", "bf16"))
    assert [(r.name, r.seed, r.lr, r.steps) for r in bf16] == [
        ("pre_ln", 0, 0.004, 300),
        ("sas_p", 0, 0.008, 300),
        ("pre_ln", 1, 0.004, 300),
        ("sas_p", 1, 0.008, 300),
    ]
    assert f32[1].plan(f32_args).preset.training.bf16 is False and bf16[1].plan(bf16_args).preset.training.bf16
    assert {r.run_dir.parents[3].name for r in f32} == {"float32"} and bf16[0].run_dir.parents[3].name == "bf16"
    assert f32[1].plan(f32_args).preset.training.learning_rate == 0.008
    args.also = ["sas_p=4e-3"]
    assert fidelity.parse_also(args) == [("sas_p", 0.004)]
    args.also = ["sas=0.004"]  # not a block of --blocks
    with pytest.raises(SystemExit, match="expected BLOCK=LR"):
        fidelity.parse_also(args)
