"""The depth family (`python -m experiments.reproduce --depths SHALLOW DEEP`, Fig. 6): its runs (depths, βFF per
depth, the deep sweep from each shallow best and its neighbours, the seeds at each depth's choice), its claims on
synthetic records (held, did not hold, inconclusive), and the signal propagation at initialisation it reports."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from experiments import depth_speed
from experiments.reproduce import depth, planning, report
from experiments.reproduce import run as run_module
from modeling_simplified import SimplifiedConfig, SimplifiedForCausalLM
from modeling_simplified.training.callbacks import DiagnosticsCallback, effective_rank
from modeling_simplified.training.presets import UsageError

FAMILY = ["--preset", "codeparrot-depth", "--depths", "12", "48"]
COMMITTED = Path(__file__).resolve().parents[1] / "docs" / "reproduction" / "codeparrot-depth"


def _args(*extra):
    args = planning.build_parser().parse_args([*FAMILY, *extra])
    planning.check(args)
    return args


def test_the_depth_family_trains_figure_6s_blocks_at_both_depths_with_bff_scaled_by_depth(tmp_path):
    args = _args("--runs-dir", str(tmp_path))
    assert args.blocks == ["pre_ln", "sas", "sas_p", "value_skipinit"]
    assert args.output_dir == "docs/reproduction/codeparrot-depth"
    for layers, beta_ff in ((12, 0.2), (48, 0.1)):  # App. D.1: 0.2 at Fig. 6's 18 layers, 0.1 at 72
        run = planning.run_at(args, "sas", 1, 4e-3, layers)
        assert run.run_dir == tmp_path / "codeparrot-depth" / f"L{layers}" / "lr0.004" / "seed1" / "sas"
        model = run.plan(args).preset.model
        assert (model["num_hidden_layers"], model["beta_ff_init"]) == (layers, beta_ff)
        assert model["intermediate_size"] == 2 * model["hidden_size"]  # Fig. 6's MLP 2d
        assert planning.Run.from_json(run.to_json()) == run  # a --jobs child trains the same run
        assert "beta_ff_init" not in planning.run_at(args, "pre_ln", 0, 4e-3, layers).plan(args).preset.model
    assert depth.deep_start({"pre_ln": 4e-3, "sas": 1.6e-2}, 2.0) == {
        "pre_ln": [2e-3, 4e-3, 8e-3],
        "sas": [8e-3, 1.6e-2, 3.2e-2],
    }


@pytest.mark.parametrize(
    "extra, field",
    [
        (["--depths", "48", "12"], "--depths"),
        (["--depths", "0", "12"], "--depths"),
        (["--layers", "4"], "--layers"),
        (["--no-sweep"], "--no-sweep"),
        (["--preset", "crammed-bert-tiny"], "--depths"),
        (["--blocks", "pre_ln", "parallel"], "--preset"),  # no codeparrot-depth-parallel preset
    ],
)
def test_bad_depth_arguments_name_the_option(extra, field):
    args = planning.build_parser().parse_args([*FAMILY, *extra])
    with pytest.raises(UsageError, match=field):
        planning.check(args)


#: synthetic losses: each variant's best lr per depth (sas's shallow best above the grid: the sweep grows; V-SkipInit's
#: deep best below its shallow one, as in App. D.1), and its loss there
BEST = {12: {"pre_ln": 4e-3, "sas": 1.6e-2, "sas_p": 8e-3, "value_skipinit": 4e-3}, 48: {"value_skipinit": 1e-3}}
BASE = {12: {"pre_ln": 5.0, "sas": 5.02, "sas_p": 5.04, "value_skipinit": 5.2}, 48: {"value_skipinit": 5.6}}


def _fake_record(run):
    best = BEST.get(run.layers, {}).get(run.name, BEST[12][run.name])
    base = BASE.get(run.layers, {}).get(run.name, BASE[12][run.name] - 0.3)  # deeper is better but for V-SkipInit
    loss = base + 0.05 * math.log2(run.lr / best) ** 2 + 0.01 * run.seed
    return {
        "block": run.name,
        "block_type": planning.VARIANTS[run.name].block_type,
        "seed": run.seed,
        "steps": run.steps,
        "learning_rate": run.lr,
        "parameters": 1000 * run.layers,
        "tokens_seen": 640 * run.steps,
        "epochs": 0.01 * run.steps,
        "eval_loss": {"0": 8.0, str(run.steps): loss + 0.1},
        "train_loss": [[run.steps, loss]],
        "train_time_s": 2.0,
        "torch_threads": 1,
        "layers": run.layers,
        "signal_propagation": {"init": [0.1] * run.layers, "end": [0.2] * run.layers},
        "effective_rank": {"init": [0.8] * run.layers, "end": [0.7] * run.layers},
    }


def test_the_shallow_sweep_brackets_then_the_deep_one_starts_at_each_best_and_its_neighbours(monkeypatch, tmp_path):
    """The runs the command asks for, in order, on synthetic training: the shallow sweep from --lr-grid grows to
    bracket sas; the deep one starts from each shallow best ± one grid step and grows down for V-SkipInit; every
    seed runs at each depth's choice; the results and the report are written, and the report is what the JSON
    alone gives."""
    asked = []

    def train_runs(args, label, runs):
        asked.append((label, runs))
        return [_fake_record(run) for run in runs]

    monkeypatch.setattr(run_module, "train_runs", train_runs)
    monkeypatch.setattr(run_module, "reference_levels", lambda args: {"chance": 8.3, "unigram": 6.1})
    out = tmp_path / "out"
    argv = [*FAMILY, "--steps", "20", "--output-dir", str(out), "--runs-dir", str(tmp_path / "runs")]
    assert run_module.main(argv) == 0
    tried = {}
    for label, runs in asked:
        for run in runs:
            if "sweep" in label:
                assert run.seed == 0 and label.startswith(f"L{run.layers}-")
                tried.setdefault(run.layers, {}).setdefault(run.name, []).append(run.lr)
    assert tried[12]["sas"] == [1e-3, 2e-3, 4e-3, 8e-3, 1.6e-2, 3.2e-2]
    assert tried[12]["pre_ln"] == [1e-3, 2e-3, 4e-3, 8e-3]
    assert tried[48]["pre_ln"] == [2e-3, 4e-3, 8e-3] and tried[48]["sas"] == [8e-3, 1.6e-2, 3.2e-2]
    assert tried[48]["value_skipinit"] == [2e-3, 4e-3, 8e-3, 1e-3, 5e-4]
    labels = [label for label, _ in asked]
    assert labels.index("L12-seeds") < labels.index("L48-sweep1")  # the deep sweep needs the shallow choice
    seeds = {label: {(r.name, r.seed, r.lr) for r in runs} for label, runs in asked if label.endswith("seeds")}
    for layers in (12, 48):
        chosen = {**BEST[12], **BEST.get(layers, {})}
        # seed 0 at the chosen lr is the sweep's run, reused; seed 1 is new
        assert seeds[f"L{layers}-seeds"] == {(n, 1, lr) for n, lr in chosen.items()}
    result = json.loads((out / "results.json").read_text())
    assert result["per_depth"]["48"]["lrs"]["value_skipinit"] == 1e-3
    assert all(result["per_depth"][k]["lr_sweep"][n]["bracketed"] for k in ("12", "48") for n in BEST[12])
    verdicts = {c["claim"]: c["verdict"] for c in result["claims"]}
    assert verdicts["pre_ln better at 48 than at 12 blocks"] == "held"
    assert verdicts["value_skipinit worse at 48 than at 12 blocks"] == "held"
    assert result["run_time"]["runs"] == len(result["runs"]) and result["run_time"]["training_s"] == 2.0 * len(
        result["runs"]
    )
    assert result["run_time"]["jobs"] == 1  # recorded, not re-parsed from the command
    written = (out / "results.md").read_text()
    for name in ("loss_vs_step.png", "lr_sweep.png", "init_signal_propagation.png"):
        assert (out / name).stat().st_size > 0
    assert report.main([str(out)]) == 0 and (out / "results.md").read_text() == written


def test_the_committed_report_is_regenerated_from_its_results_json(tmp_path):
    """`docs/reproduction/codeparrot-depth/results.json` alone gives the committed `results.md` and the plots."""
    (tmp_path / "results.json").write_text((COMMITTED / "results.json").read_text())
    assert report.main([str(tmp_path)]) == 0
    assert (tmp_path / "results.md").read_text() == (COMMITTED / "results.md").read_text()
    for name in ("loss_vs_step.png", "lr_sweep.png", "init_signal_propagation.png"):
        assert (tmp_path / name).stat().st_size > 0 and (COMMITTED / name).is_file(), name


def _records(losses):
    """Records from {depth: {variant: [final eval loss per seed]}}."""
    return {
        layers: [
            {
                "block": name,
                "block_type": name,
                "seed": seed,
                "steps": 20,
                "learning_rate": 1e-3,
                "parameters": 1000 * layers,
                "tokens_seen": 20_000,
                "epochs": 0.5,
                "eval_loss": {"0": 9.0, "20": loss},
                "train_loss": [[20, loss]],
            }
            for name, values in by_name.items()
            for seed, loss in enumerate(values)
        ]
        for layers, by_name in losses.items()
    }


def test_depth_claims_held_did_not_hold_and_inconclusive():
    records = _records(
        {
            12: {"pre_ln": [5.0, 5.02], "sas": [5.0, 5.02], "sas_p": [5.0, 5.02], "value_skipinit": [5.1, 5.12]},
            48: {"pre_ln": [4.8, 4.82], "sas": [4.7, 5.1], "sas_p": [5.2, 5.22], "value_skipinit": [5.3, 5.32]},
        }
    )
    claims = {c["claim"]: c for c in depth.claims([12, 48], records, ["pre_ln", "sas", "sas_p", "value_skipinit"])}
    assert claims["pre_ln better at 48 than at 12 blocks"]["verdict"] == "held"
    assert claims["pre_ln better at 48 than at 12 blocks"]["change_pct"] == pytest.approx(
        [-4.0, 100 * (4.82 / 5.02 - 1)]
    )
    assert claims["sas better at 48 than at 12 blocks"]["verdict"] == "inconclusive (seeds disagree)"
    assert claims["sas_p better at 48 than at 12 blocks"]["verdict"] == "did NOT hold"
    assert claims["value_skipinit worse at 48 than at 12 blocks"]["verdict"] == "held"
    assert claims["sas within 2% of Pre-LN at equal steps at 12 blocks"]["verdict"] == "held"
    assert claims["sas_p within 2% of Pre-LN at equal steps at 48 blocks"]["verdict"] == "did NOT hold"  # +8.3%
    grows = claims["V-SkipInit's gap to the others (pre_ln, sas, sas_p) larger at 48 than at 12 blocks"]
    assert grows["gap_pct"]["12"] == pytest.approx([2.0, 100 * (5.12 / 5.02 - 1)])
    assert grows["verdict"] == "held"
    assert all(c["source"].startswith("Fig. 6") for c in claims.values())
    # every claim carries its setting; V-SkipInit's say whom it was ahead of or behind, per depth and seed
    assert claims["pre_ln better at 48 than at 12 blocks"]["regime"] == {
        "steps": 20,
        "tokens": 20_000,
        "epochs": 0.5,
        "tokens_per_parameter": {"12": [20_000 / 12_000] * 2, "48": [20_000 / 48_000] * 2},
    }
    assert list(claims["sas within 2% of Pre-LN at equal steps at 12 blocks"]["regime"]["tokens_per_parameter"]) == [
        "12"
    ]
    assert grows["versus"]["48"]["1"]["sas"] == pytest.approx(100 * (5.32 / 5.1 - 1))
    assert "versus" not in claims["sas better at 48 than at 12 blocks"]


def test_when_the_pre_ln_control_does_not_gain_from_depth_the_depth_claims_are_untestable():
    records = _records(
        {
            12: {"pre_ln": [5.0, 5.02], "sas": [5.0, 5.02], "value_skipinit": [4.9, 4.92]},
            48: {"pre_ln": [5.2, 5.22], "sas": [4.9, 4.92], "value_skipinit": [5.3, 5.32]},
        }
    )
    claims = {c["claim"]: c for c in depth.claims([12, 48], records, ["pre_ln", "sas", "value_skipinit"])}
    control = claims["pre_ln better at 48 than at 12 blocks"]
    assert control["verdict"] == "untestable in this setting (the Pre-LN control did not improve with depth)"
    assert control["verdict_in_setting"] == "did NOT hold" and control["held"] is None
    sas = claims["sas better at 48 than at 12 blocks"]
    assert sas["verdict"].startswith("untestable") and sas["verdict_in_setting"] == "held"  # held, but says nothing
    assert claims["value_skipinit worse at 48 than at 12 blocks"]["verdict"].startswith("untestable")
    assert claims["sas within 2% of Pre-LN at equal steps at 12 blocks"]["verdict"] == "held"  # one depth: stands
    versus = claims["value_skipinit worse at 48 than at 12 blocks"]["versus"]
    assert versus["12"]["0"]["pre_ln"] < 0 < versus["48"]["0"]["pre_ln"]  # ahead of Pre-LN at 12, behind at 48


def test_an_ordering_whose_seed_ranges_overlap_or_has_one_seed_is_inconclusive():
    assert depth.verdict([True, True], True, ranges_overlap=True) == (None, "inconclusive (seed ranges overlap)")
    assert depth.verdict([True], True, ranges_overlap=False) == (None, "inconclusive (1 seed)")
    assert depth.verdict([True, False], False, ranges_overlap=False) == (None, "inconclusive (seeds disagree)")
    assert depth.verdict([False, False], False, ranges_overlap=False) == (False, "did NOT hold")
    records = _records({12: {"pre_ln": [5.0, 5.3]}, 48: {"pre_ln": [4.9, 5.2]}})  # better on both, ranges overlap
    (row,) = depth.claims([12, 48], records, ["pre_ln"])
    assert row["verdict_in_setting"] == "inconclusive (seed ranges overlap)"
    assert row["verdict"] == "untestable in this setting (the Pre-LN control was inconclusive across depths)"


def test_the_reference_levels_are_the_uniform_and_the_smoothed_unigram_cross_entropies():
    levels = depth.reference_levels([[0, 0, 1], [0, 2]], [[1, 0, 2], [2, 0]], vocab_size=4)
    counts = np.array([3, 1, 1, 0]) + 1  # add-one smoothed training counts
    scored = [0, 2, 0]  # every evaluation row's tokens but its first
    assert levels["chance"] == pytest.approx(math.log(4))
    assert levels["unigram"] == pytest.approx(-np.mean(np.log(counts[scored] / counts.sum())))


def test_effective_rank_is_one_for_orthogonal_tokens_and_one_over_n_for_identical_ones():
    assert effective_rank(torch.eye(8)[None]) == pytest.approx(1.0)
    assert effective_rank(torch.ones(2, 8, 16)) == pytest.approx(1 / 8)
    hidden = torch.cat([torch.eye(4), torch.ones(2, 4)])[None]
    mask = torch.tensor([[1, 1, 1, 1, 0, 0]])  # the padded tokens do not count
    assert effective_rank(hidden, mask) == pytest.approx(1.0)
    assert math.isnan(effective_rank(torch.full((1, 4, 4), math.nan)))  # a diverged run's probe: NaN, no SVD error


def test_at_init_softmax_without_skips_collapses_rank_with_depth_and_the_others_do_not():
    """The mechanism Fig. 6 argues from (§4.1, Dong et al. 2021), at initialisation: 48 skipless blocks of plain
    softmax attention leave every token the same (effective rank 1/n); Pre-LN keeps a rank well above it, and
    shaped attention (SAS) and V-SkipInit keep the embedding's rank through every block."""
    ids = torch.randint(0, 256, (2, 32), generator=torch.Generator().manual_seed(0))
    last = {}
    for name, block in {
        "pre_ln": {"block_type": "pre_ln"},
        "sas": {"block_type": "sas"},
        "value_skipinit": {"block_type": "value_skipinit"},
        "sas_softmax": {"block_type": "sas", "attention_type": "softmax"},
    }.items():
        torch.manual_seed(0)
        config = SimplifiedConfig(
            vocab_size=256, hidden_size=32, num_hidden_layers=48, num_attention_heads=2, intermediate_size=64, **block
        )
        model = SimplifiedForCausalLM(config)
        diag = DiagnosticsCallback(model)
        diag.probe_batch = {"input_ids": ids}
        diag.probe(model, "init")
        rank = [diag.rank["init"][i] for i in range(48)]
        last[name] = (rank[0], rank[-1], diag.cosine["init"][47])
    assert last["sas_softmax"][1] < 1.5 / 32 and last["sas_softmax"][2] > 0.99
    assert last["pre_ln"][1] > 0.3 and last["pre_ln"][2] < 0.9
    for name in ("sas", "value_skipinit"):
        assert last[name][1] == pytest.approx(last[name][0], abs=0.02) and abs(last[name][2]) < 0.1


@pytest.mark.slow
def test_the_depth_family_trains_end_to_end_in_miniature(tmp_path):
    """Real training at 1 and 4 blocks of width 32, 20 steps, two seeds: every record carries its depth and one
    init probe per block, the deep runs live under L4/, and the claims and the report are written."""
    runs, out = tmp_path / "runs", tmp_path / "out"
    tiny = ["--steps", "20", "--hidden-size", "32", "--heads", "2", "--seq-len", "32", "--lr-grid", "1e-3"]
    tiny += ["--set", "data.max_train_samples=100", "--set", "data.max_eval_samples=32"]
    argv = ["--preset", "codeparrot-depth", "--depths", "1", "4", *tiny, "--max-lrs", "1"]
    assert run_module.main([*argv, "--output-dir", str(out), "--runs-dir", str(runs)]) == 0
    result = json.loads((out / "results.json").read_text())
    assert {r["layers"] for r in result["runs"]} == {1, 4}
    for record in result["runs"]:
        for probe in ("signal_propagation", "effective_rank"):
            assert len(record[probe]["init"]) == record["layers"] == len(record[probe]["end"])
    assert result["per_depth"]["4"]["lr_sweep"]["sas"]["points"][0]["lr"] == 5e-4  # the shallow best ÷ 2
    lr = result["per_depth"]["4"]["lrs"]["value_skipinit"]
    assert (runs / "codeparrot-depth" / "L4" / f"lr{lr:g}" / "seed1" / "value_skipinit" / "record.json").is_file()
    assert len(result["claims"]) == 9 and (out / "init_signal_propagation.png").stat().st_size > 0
    levels = result["levels"]
    assert levels["chance"] == pytest.approx(math.log(4096)) and 0 < levels["unigram"] < levels["chance"]


def test_the_depth_speed_probe_times_training_steps_of_the_family_preset():
    out = depth_speed.steps_per_second(
        layers=1, batch=2, bf16=False, compiled=False, steps=1, rounds=2, barrier=lambda: None
    )
    assert len(out["tokens_per_s"]) == 2 and all(t > 0 for t in out["tokens_per_s"]) and out["warmup_s"] > 0


def test_the_depth_speed_probe_times_two_processes_together():
    """Two workers time their rounds once both are warm (a worker still importing would slow the other's rounds):
    the host's figure is the two processes' sum, and the compile's time comes back with it."""
    config = {"threads": 1, "layers": 1, "batch": 2, "bf16": False, "compiled": False, "steps": 1, "rounds": 2}
    tokens_per_s, warmup_s = depth_speed.measure([config], processes=2)
    assert tokens_per_s > 0 and warmup_s > 0
