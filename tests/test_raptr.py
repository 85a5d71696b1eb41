"""RaPTr (modeling_simplified/training/raptr.py and the model's layer plan): schedules and their FLOPs, exact
subnetworks (bypassed = identity, App. J scales), p = 1 is plain training, reproducible sampling, zero gradients and
AdamW's rules for bypassed layers, the full model outside training steps, resumed tallies, the width variants (a
dropped shaped-attention head is the identity), 2-process DDP runs (the Trainer directly, and the CLI under torchrun:
slow), the CLI and the benchmark / comparison tools."""

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from conftest import perturb_, tiny_config
from transformers import Trainer, TrainingArguments
from transformers.masking_utils import create_causal_mask

from modeling_simplified import SimplifiedForCausalLM
from modeling_simplified.compat_simplified import CACHE_FIELD
from modeling_simplified.modeling_simplified import LayerPlan
from modeling_simplified.training.raptr import (
    RaptrCallback,
    RaptrSpecError,
    WidthMasks,
    build_schedule,
    layer_scales,
    sqrt_scales,
)

REPO = Path(__file__).resolve().parents[1]


def _ids(seed: int = 0, batch: int = 2, seq_len: int = 8) -> torch.Tensor:
    return torch.randint(0, 97, (batch, seq_len), generator=torch.Generator().manual_seed(seed))


def _train(model, tmp_path, callbacks=(), steps: int = 4, resume_from=None, **kw) -> Trainer:
    data = [{"input_ids": ids, "labels": ids} for ids in _ids(0, 32, 8)]
    options = dict(
        max_steps=steps,
        per_device_train_batch_size=4,
        learning_rate=1e-2,
        weight_decay=0.1,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        seed=0,
        logging_steps=1,
        disable_tqdm=True,
    )
    args = TrainingArguments(str(tmp_path), **{**options, **kw})
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=list(callbacks))
    trainer.train(resume_from_checkpoint=resume_from)
    return trainer


# ---------------------------------------------------------------------------------------------- schedules
def test_6_8_10_12_equal_on_12_layers_is_three_quarters_of_the_flops():
    schedule = build_schedule("6-8-10-12", num_layers=12, max_steps=400)
    assert [(s.start, s.end) for s in schedule.stages] == [(0, 100), (100, 200), (200, 300), (300, 400)]
    assert [s.p for s in schedule.stages] == [0.4, 0.6, 0.8, 1.0]  # (n - |I|) / (L - |I|), I = {1, L}
    assert schedule.expected_relative_flops() == 0.75


def test_recommended_proportional_boundaries_and_full_model_phase():
    rec = build_schedule("recommended", num_layers=12, max_steps=100)
    assert [s.size for s in rec.stages] == [6.0, 8.0, 10.0, 12.0]
    prop = build_schedule("12-16-20-24", num_layers=24, max_steps=400_000, lengths="proportional")
    assert [s.end - s.start for s in prop.stages] == [40_000, 80_000, 120_000, 160_000]  # App. E
    assert prop.expected_relative_flops() == pytest.approx(20 / 24)  # average subnetwork length 20 (App. E)
    explicit = build_schedule("6-12", num_layers=12, max_steps=10, lengths=[3], full_model_steps=2)
    assert [(s.size, s.start, s.end) for s in explicit.stages] == [(12, 0, 2), (6, 2, 5), (12, 5, 10)]
    for bad in (
        dict(spec="6-x"),
        dict(spec="1-12"),
        dict(spec="8-6"),
        dict(spec="6-12", lengths="linear"),
        dict(spec="6-12", lengths=[3, 4]),
        dict(spec="6-12", full_model_steps=9),
        dict(spec="6-12", scaling="linear"),
    ):
        with pytest.raises(RaptrSpecError, match="RaPTr"):
            build_schedule(num_layers=12, max_steps=10, **{"lengths": "equal", **bad})


def test_sampling_is_a_function_of_seed_and_step_and_keeps_I():
    a = build_schedule("6-12", num_layers=12, max_steps=2000, seed=3)
    b = build_schedule("6-12", num_layers=12, max_steps=2000, seed=3)
    c = build_schedule("6-12", num_layers=12, max_steps=2000, seed=4)
    draws = [a.sample(t) for t in range(1000)]
    assert draws == [b.sample(t) for t in range(1000)]
    assert draws != [c.sample(t) for t in range(1000)]
    assert all(z[0] and z[11] for z in draws)
    mean_kept = sum(sum(z[1:11]) for z in draws) / (1000 * 10)
    assert abs(mean_kept - 0.4) < 0.03  # p = (6 - 2) / 10
    assert all(a.plan(t) is None for t in range(1000, 2000))  # p = 1: the full model


def test_sqrt_scales_match_app_j_by_hand():
    # L = 6, ζ = (1, 0, 1, 0, 0, 1): layer 1 stands for layers 1-2 (√2), layer 3 for 3-5 (√3), layer 6 for itself
    assert sqrt_scales([1, 0, 1, 0, 0, 1]) == [math.sqrt(2), 0.0, math.sqrt(3), 0.0, 0.0, 1.0]
    # Σ of squared scales before each kept layer k is k - 1 (its full-model input norm), and L after the last
    keep = [1, 1, 0, 0, 1, 0, 1, 0]
    s = sqrt_scales(keep)
    for k in range(len(keep)):
        if keep[k]:
            assert sum(x * x for x in s[:k]) == pytest.approx(k)
    assert sum(x * x for x in s) == pytest.approx(len(keep))
    assert sqrt_scales([1] * 5) == [1.0] * 5
    assert layer_scales([1, 0, 1, 1], 0.5, (0, 3), "inverse") == [1.0, 0.0, 2.0, 1.0]
    assert layer_scales([1, 0, 1, 1], 0.5, (0, 3), "none") == [1.0, 0.0, 1.0, 1.0]


# ---------------------------------------------------------------------------------------------- the layer plan
@pytest.mark.parametrize("block_type", ["pre_ln", "sas", "sas_p", "simplest", "post_ln"])
def test_plan_is_exact_subnetwork(block_type):
    """Bypassed = identity (skipless blocks too); kept layer i gives `x + s_i (layer(x) - x)`."""
    model = perturb_(SimplifiedForCausalLM(tiny_config(block_type, num_hidden_layers=4))).train()
    ids = _ids()
    scales = (math.sqrt(2), 0.0, 1.0, 1.0)
    base = model.model
    x = base.embed_dropout(base.embed_norm(base.embed_positions(base.embed_tokens(ids), torch.arange(8)[None])[0]))
    pe = base.embed_positions(base.embed_tokens(ids), torch.arange(8)[None])[1]
    mask = create_causal_mask(config=model.config, inputs_embeds=x, attention_mask=None, **{CACHE_FIELD: None})
    h = x
    for s, layer in zip(scales, base.layers):
        if s:
            out = layer(h, attention_mask=mask, position_embeddings=pe, running_mean=None)
            h = h + s * (out - h)
    expected = base.norm(h)
    base.layer_plan = LayerPlan(scales)
    got = base(input_ids=ids, use_cache=False).last_hidden_state
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    got.pow(2).sum().backward()
    bypassed = list(base.layers[1].parameters())
    assert bypassed and all(p.grad is not None and not p.grad.any() for p in bypassed)
    assert all(p.grad is not None and p.grad.any() for p in base.layers[0].parameters() if p.requires_grad)


def test_plan_is_ignored_in_eval_generate_and_never_saved(tmp_path):
    model = perturb_(SimplifiedForCausalLM(tiny_config(num_hidden_layers=4)))
    ids = _ids()
    model.eval()
    full = model(ids).logits
    full_gen = model.generate(ids, max_new_tokens=4, do_sample=False)
    model.model.layer_plan = LayerPlan((1.0, 0.0, 0.0, 2.0))
    assert torch.equal(model(ids).logits, full)
    assert torch.equal(model.generate(ids, max_new_tokens=4, do_sample=False), full_gen)
    model.train()
    assert not torch.equal(model(ids).logits, full)  # the plan acts in training mode only
    model.save_pretrained(tmp_path)
    assert "layer_plan" not in (tmp_path / "config.json").read_text()
    loaded = SimplifiedForCausalLM.from_pretrained(tmp_path)
    assert loaded.model.layer_plan is None
    assert torch.equal(loaded.eval()(ids).logits, full)


def test_callback_clears_plan_after_each_step_and_reports(tmp_path):
    model = SimplifiedForCausalLM(tiny_config(num_hidden_layers=12))
    seen = []
    hook = model.model.layers[5].register_forward_pre_hook(lambda m, a: seen.append(model.model.layer_plan))
    cb = RaptrCallback("6-8-10-12")
    _train(model, tmp_path, [cb], steps=8)
    hook.remove()
    assert model.model.layer_plan is None
    assert cb.report["expected_relative_flops"] == 0.75
    stages = cb.report["stages"]
    assert [s["steps"] for s in stages] == [2, 2, 2, 2]
    assert stages[-1]["mean_layers"] == 12
    kept = sum(s["layers"] for s in stages)
    assert cb.report["realised_relative_flops"] == kept / (12 * 8)
    assert all(s["wall_time_s"] > 0 for s in stages)
    # layer 5 ran only in steps that kept it, and never with a plan outside a step
    assert all(p is None or p.scales[5] > 0 for p in seen)


def test_p_equal_one_is_bit_identical_to_plain_training(tmp_path):
    def fresh():  # the same initial weights for both runs, whatever ran before
        torch.manual_seed(0)
        return SimplifiedForCausalLM(tiny_config("sas_p", num_hidden_layers=3))

    ref = _train(fresh(), tmp_path / "a").model
    cb = RaptrCallback("3", scaling="sqrt")
    got = _train(fresh(), tmp_path / "b", [cb]).model
    for (name, a), b in zip(ref.state_dict().items(), got.state_dict().values()):
        assert torch.equal(a, b), name
    # and an explicit all-ones plan takes the same path as no plan
    model = perturb_(SimplifiedForCausalLM(tiny_config(num_hidden_layers=3))).train()
    plain = model(_ids()).logits
    model.model.layer_plan = LayerPlan((1.0, 1.0, 1.0))
    assert torch.equal(model(_ids()).logits, plain)


def test_bypassed_layer_under_adamw_gets_zero_grad_and_only_adamw_rules():
    """A bypassed layer's gradient is exactly 0 (not None), so torch AdamW applies its rules for a zero gradient: on
    fresh state (m = v = 0) the update is 0 and only the decoupled decay `θ(1 − lr·λ)` moves decayed weights;
    no-decay parameters (gains, norms) stay put."""
    from modeling_simplified import parameter_groups

    model = perturb_(SimplifiedForCausalLM(tiny_config("sas", num_hidden_layers=3))).train()
    lr, wd = 1e-2, 0.1
    groups = parameter_groups(model, weight_decay=wd)
    opt = torch.optim.AdamW(groups, lr=lr, weight_decay=wd)
    decayed = {id(p) for g in groups if g["weight_decay"] > 0 for p in g["params"]}
    layer = model.model.layers[1]
    before = {n: p.detach().clone() for n, p in layer.named_parameters()}
    model.model.layer_plan = LayerPlan((1.0, 0.0, 1.0))
    ids = _ids()
    model(ids, labels=ids).loss.backward()
    opt.step()
    assert any(id(p) in decayed for p in layer.parameters()) and any(id(p) not in decayed for p in layer.parameters())
    for name, p in layer.named_parameters():
        assert p.grad is not None and not p.grad.any(), name
        expected = before[name] * (1 - lr * wd) if id(p) in decayed else before[name]
        assert torch.equal(p.detach(), expected), name


def test_bypassed_layer_with_momentum_follows_adamw_closed_form_for_a_zero_gradient():
    """One step with the layer kept (it gets a gradient g and AdamW state), then one step with it bypassed: its
    gradient is exactly 0, and each parameter moves exactly as AdamW prescribes for a zero gradient: decoupled decay
    `θ(1 − lr·λ)`, `m ← β1·m`, `v ← β2·v`, and the update `lr·m̂/(√v̂ + ε)` from the momentum of the first step."""
    from modeling_simplified import parameter_groups

    model = perturb_(SimplifiedForCausalLM(tiny_config("pre_ln", num_hidden_layers=3))).train()
    lr, wd, (b1, b2), eps = 1e-2, 0.1, (0.9, 0.999), 1e-8
    groups = parameter_groups(model, weight_decay=wd)
    opt = torch.optim.AdamW(groups, lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd)
    decay = {id(p): g["weight_decay"] for g in groups for p in g["params"]}
    layer = model.model.layers[1]
    params = dict(layer.named_parameters())
    assert {decay[id(p)] for p in params.values()} == {0.0, wd}  # decayed matrices and undecayed gains/norms
    ids = _ids()

    model(ids, labels=ids).loss.backward()  # step 1: the full model
    theta0 = {n: p.detach().clone().double() for n, p in params.items()}
    g1 = {n: p.grad.detach().clone().double() for n, p in params.items()}
    assert all(g.any() for g in g1.values())
    opt.step()
    theta1 = {n: p.detach().clone().double() for n, p in params.items()}
    opt.zero_grad()

    model.model.layer_plan = LayerPlan((1.0, 0.0, 1.0))  # step 2: layer 1 bypassed
    model(ids, labels=ids).loss.backward()
    opt.step()
    for name, p in params.items():
        assert p.grad is not None and not p.grad.any(), name
        lam = decay[id(p)]
        m1, v1 = (1 - b1) * g1[name], (1 - b2) * g1[name] ** 2
        expected1 = theta0[name] * (1 - lr * lam) - lr * (m1 / (1 - b1)) / ((v1 / (1 - b2)).sqrt() + eps)
        torch.testing.assert_close(theta1[name], expected1, rtol=1e-5, atol=1e-7)
        m2, v2 = b1 * m1, b2 * v1  # the zero gradient only decays the moments
        update = lr * (m2 / (1 - b1**2)) / ((v2 / (1 - b2**2)).sqrt() + eps)
        expected2 = theta1[name] * (1 - lr * lam) - update
        torch.testing.assert_close(p.detach().double(), expected2, rtol=1e-5, atol=1e-7)
        state = opt.state[p]
        torch.testing.assert_close(state["exp_avg"].double(), m2, rtol=1e-5, atol=1e-9)
        torch.testing.assert_close(state["exp_avg_sq"].double(), v2, rtol=1e-5, atol=1e-12)
        assert not torch.equal(p.detach().double(), theta1[name])  # momentum still moves a bypassed layer


def test_resumed_run_restores_the_stage_tallies(tmp_path):
    """The per-stage tallies are saved with each checkpoint's trainer state and restored on resume: a run resumed
    half-way reports the same stages, steps and realised FLOPs as the uninterrupted run."""
    config = tiny_config(num_hidden_layers=12)
    save = dict(save_strategy="steps", save_steps=4)
    whole = RaptrCallback("6-8-10-12")
    _train(SimplifiedForCausalLM(config), tmp_path / "a", [whole], steps=8, **save)
    saved = json.loads((tmp_path / "a" / "checkpoint-4" / "trainer_state.json").read_text())
    tallies = saved["stateful_callbacks"]["RaptrCallback"]["attributes"]["saved_tallies"]
    assert [t["steps"] for t in tallies] == [2, 2, 0, 0]

    resumed = RaptrCallback("6-8-10-12")
    _train(
        SimplifiedForCausalLM(config),
        tmp_path / "a",
        [resumed],
        steps=8,
        resume_from=str(tmp_path / "a" / "checkpoint-4"),
        **save,
    )
    got, ref = resumed.report, whole.report
    assert got["steps"] == 8 and [s["steps"] for s in got["stages"]] == [2, 2, 2, 2]
    assert [s["layers"] for s in got["stages"]] == [s["layers"] for s in ref["stages"]]
    assert got["realised_relative_flops"] == ref["realised_relative_flops"]
    assert all(s["wall_time_s"] > 0 for s in got["stages"])
    final = json.loads((tmp_path / "a" / "checkpoint-8" / "trainer_state.json").read_text())
    assert [t["steps"] for t in final["stateful_callbacks"]["RaptrCallback"]["attributes"]["saved_tallies"]] == [2] * 4


def test_callback_refuses_the_batch_ramp_optimizer(tmp_path):
    from transformers import TrainerControl, TrainerState

    from modeling_simplified.training.trainer import BatchRampAdamW

    model = SimplifiedForCausalLM(tiny_config())
    opt = BatchRampAdamW(model.parameters(), micro_batch=4, final_batch=8, ramp_steps=2, lr=1e-3)
    args = TrainingArguments(str(tmp_path), max_steps=4, use_cpu=True, report_to="none")
    with pytest.raises(RaptrSpecError, match="batch-ramp.*micro-batch"):
        RaptrCallback("1-2").on_train_begin(
            args, TrainerState(max_steps=4), TrainerControl(), model=model, optimizer=opt
        )


# ---------------------------------------------------------------------------------------------- DDP
DDP_SCRIPT = textwrap.dedent(
    """
    import os, sys, torch
    from transformers import Trainer, TrainingArguments
    from modeling_simplified import SimplifiedConfig, SimplifiedForCausalLM
    from modeling_simplified.training.raptr import RaptrCallback

    torch.set_num_threads(1)
    out = sys.argv[1]
    config = SimplifiedConfig(block_type="pre_ln", vocab_size=97, hidden_size=32, num_hidden_layers=6,
                              num_attention_heads=4, intermediate_size=64, max_position_embeddings=64)
    torch.manual_seed(0)
    model = SimplifiedForCausalLM(config)
    g = torch.Generator().manual_seed(0)
    data = [{"input_ids": x, "labels": x} for x in torch.randint(0, 97, (64, 8), generator=g)]
    args = TrainingArguments(out, max_steps=6, per_device_train_batch_size=4, learning_rate=1e-2, weight_decay=0.1,
                             report_to="none", save_strategy="no", use_cpu=True, ddp_backend="gloo",
                             ddp_find_unused_parameters=False, seed=0, disable_tqdm=True)
    cb = RaptrCallback("2-4-6", scaling="sqrt")
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[cb])
    trainer.train()
    rank = int(os.environ["RANK"])
    torch.save({k: v.clone() for k, v in trainer.model.state_dict().items()}, f"{out}/rank{rank}.pt")
    torch.save([cb.schedule.sample(t) for t in range(6)], f"{out}/plans{rank}.pt")
    torch.distributed.destroy_process_group()  # left to exit, gloo's threads can abort the process
    """
)


def test_ddp_two_ranks_gloo_end_bit_identical(tmp_path):
    script = tmp_path / "ddp_raptr.py"
    script.write_text(DDP_SCRIPT)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--standalone",
        str(script),
        str(tmp_path),
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    a, b = torch.load(tmp_path / "rank0.pt"), torch.load(tmp_path / "rank1.pt")
    for name in a:
        assert torch.equal(a[name], b[name]), name
    plans = torch.load(tmp_path / "plans0.pt")
    assert plans == torch.load(tmp_path / "plans1.pt")
    assert any(not all(z) for z in plans)  # some steps really trained a subnetwork
    assert "RaPTr" in proc.stderr


@pytest.mark.slow
def test_cli_under_torchrun_two_ranks_writes_once(tmp_path):
    """The README's multi-GPU command on 2 gloo CPU ranks: every rank trains, only the world process zero writes
    preset.json, the plot, the export and metrics.json (all ranks writing the export crashed rank 1)."""
    run = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        "-m",
        "modeling_simplified.training.cli",
        *CLI_BASE,
        "--set",
        "training.eval_steps=4",
        "--max-steps",
        "6",
        "--raptr",
        "2-3-4",
        "--output-dir",
        str(run),
    ]
    proc = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.count("simplified-train: done") == 1
    assert "find_unused_parameters=True" not in proc.stderr
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["steps"] == 6 and metrics["raptr"]["steps"] == 6
    assert metrics["raptr"]["expected_relative_flops"] == 0.75
    for path in ("preset.json", "loss_curve.png", "export/config.json", "export/model.safetensors", "checkpoint-6"):
        assert (run / path).exists(), path


# ---------------------------------------------------------------------------------------------- CLI
CLI_BASE = [
    "--preset",
    "codeparrot-tiny-pre_ln",
    "--set",
    "data.max_train_samples=40",
    "--set",
    "data.tokenizer_train_samples=40",
    "--set",
    "data.max_eval_samples=16",
    "--set",
    "training.per_device_train_batch_size=4",
    "--set",
    "num_hidden_layers=4",
]


def test_cli_raptr_writes_its_report_to_metrics_and_rejects_bad_schedules(tmp_path, capsys):
    from benchmarks.raptr import compare_runs
    from modeling_simplified.training.cli import main

    base = [*CLI_BASE, "--set", "training.eval_steps=4", "--max-steps", "8", "--no-export"]
    bad = tmp_path / "bad"
    assert main([*base, "--output-dir", str(bad), "--raptr", "1-4"]) == 2
    assert "--raptr" in capsys.readouterr().err and not bad.exists()
    assert main([*base, "--output-dir", str(bad), "--raptr", "2-4", "--raptr-lengths", "x"]) == 2
    run = tmp_path / "run"
    assert main([*base, "--output-dir", str(run), "--raptr", "2-3-4", "--raptr-lengths", "2,5"]) == 0
    report = json.loads((run / "metrics.json").read_text())["raptr"]
    assert [(s["start"], s["end"], s["steps"]) for s in report["stages"]] == [(0, 2, 2), (2, 5, 3), (5, 8, 3)]
    assert report["expected_relative_flops"] == (2 * 2 + 3 * 3 + 3 * 4) / (4 * 8)
    assert report["stages"][0]["mean_layers"] == 2  # p = 0: only I = {first, last}
    assert report["computed_relative_flops"] == report["realised_relative_flops"]  # bypassed layers: not computed
    # the comparison tool reads the runs' checkpoints and metrics
    summary = compare_runs({"a": str(run), "b": str(run)}, str(tmp_path / "cmp.png"))
    assert (tmp_path / "cmp.png").stat().st_size > 0
    assert summary["a"]["realised_relative_flops"] == report["realised_relative_flops"]
    assert summary["b"]["eval_loss"] == json.loads((run / "metrics.json").read_text())["eval_loss"]


@pytest.mark.parametrize(
    "spec, variant, expected",
    [("recommended", "depth", 0.75), ("2-3-4", "mlp", 0.75), ("2-4", "attention", 0.75)],
)
def test_cli_raptr_recommended_and_width_variants(tmp_path, spec, variant, expected):
    from modeling_simplified.training.cli import main

    run = tmp_path / "run"
    argv = [*CLI_BASE, "--set", "training.eval_steps=100", "--max-steps", "4", "--no-export"]
    assert main([*argv, "--output-dir", str(run), "--raptr", spec, "--raptr-variant", variant]) == 0
    report = json.loads((run / "metrics.json").read_text())["raptr"]
    assert report["variant"] == variant and report["steps"] == 4
    assert report["expected_relative_flops"] == pytest.approx(expected)
    if variant == "depth":  # 4 layers: 2, 2.67, 3.33, 4 (L/2, +L/6 per stage)
        assert [s["size"] for s in report["stages"]] == pytest.approx([2, 8 / 3, 10 / 3, 4])
        assert report["computed_relative_flops"] == report["realised_relative_flops"]
    else:
        assert report["computed_relative_flops"] == 1.0
        assert ("MLP FLOPs only" if variant == "mlp" else "attention FLOPs only") in report["flops_scope"]
        assert report["stages"][-1]["mean_layers"] == 4  # every sub-MLP / head in the last stage


def test_cli_raptr_refusals_name_the_options(tmp_path, capsys):
    """Batch ramp + RaPTr, depth options on a width variant and sizes out of a width variant's range are refused
    before anything is written; an epoch-based preset's schedule is checked against its real step count."""
    from modeling_simplified.training.cli import main

    cases = [
        (["--preset", "crammed-bert-tiny-pre_ln", "--raptr", "2-4"], ["--raptr", "batch_ramp_to"]),
        ([*CLI_BASE, "--raptr", "2-4", "--raptr-variant", "mlp", "--raptr-scaling", "sqrt"], ["scaling"]),
        ([*CLI_BASE, "--raptr", "6-8-10-12", "--raptr-variant", "mlp"], ["sub-MLPs per layer", "[0, 4]"]),
        (
            # an epoch-based run of 40 files' chunks, batch 4: far fewer than 1000 optimizer steps
            [
                *CLI_BASE,
                "--set",
                "training.max_steps=null",
                "--set",
                "training.num_train_epochs=1",
                "--raptr",
                "2-4",
                "--raptr-lengths",
                "999",
            ],
            ["--raptr", "non-decreasing steps in [0, ", "optimizer steps)"],
        ),
    ]
    for i, (argv, needles) in enumerate(cases):
        out = tmp_path / f"run{i}"
        assert main([*argv, "--output-dir", str(out)]) == 2, argv
        err = capsys.readouterr().err
        assert all(n in err for n in needles), err
        assert not out.exists()
    steps = int(err.split("the run has ")[1].split()[0])  # the last case: the real count, checked against the data
    assert 1 <= steps < 999 and f"[0, {steps}]" in err


def test_planned_steps_match_the_trainer(tmp_path):
    from modeling_simplified.training.api import planned_steps

    data = [{"input_ids": ids, "labels": ids} for ids in _ids(0, 50, 8)]
    for epochs, batch, accumulation, drop_last in [(2.0, 4, 1, False), (2.5, 4, 3, False), (1.0, 8, 2, True)]:
        args = TrainingArguments(
            str(tmp_path),
            num_train_epochs=epochs,
            per_device_train_batch_size=batch,
            gradient_accumulation_steps=accumulation,
            dataloader_drop_last=drop_last,
            use_cpu=True,
            report_to="none",
        )
        trainer = Trainer(model=SimplifiedForCausalLM(tiny_config()), args=args, train_dataset=data)
        real = trainer.set_initial_training_values(args, trainer.get_train_dataloader())[-1]
        assert planned_steps(args, data) == real, (epochs, batch, accumulation, drop_last)


def test_ddp_needs_no_find_unused_parameters_for_any_preset():
    """The CLI passes `ddp_find_unused_parameters=False`: every trainable parameter of every preset's model gets a
    gradient in a training step (RaPTr's bypassed layers too: weight 0 in the graph)."""
    from modeling_simplified import SimplifiedConfig, SimplifiedForMaskedLM, SimplifiedForSequenceClassification
    from modeling_simplified.training.presets import TrainingRecipe, available_presets, load_preset
    from modeling_simplified.training.trainer import training_arguments

    assert (
        training_arguments(TrainingRecipe(learning_rate=1e-3, max_steps=1), "unused").ddp_find_unused_parameters
        is False
    )
    classes = {
        "causal-lm": SimplifiedForCausalLM,
        "masked-lm": SimplifiedForMaskedLM,
        "sequence-classification": SimplifiedForSequenceClassification,
    }
    for name in available_presets():
        preset = load_preset(name)
        fields = {**preset.model, **{k: v for k, v in TINY_FIELDS.items()}, "num_hidden_layers": 3}
        extra = {"num_labels": 2} if preset.task == "sequence-classification" else {}
        model = classes[preset.task](SimplifiedConfig(**fields, **extra)).train()
        model.model.layer_plan = LayerPlan((1.0, 0.0, 1.0))
        ids = _ids()
        labels = torch.tensor([0, 1]) if extra else ids
        model(ids, labels=labels).loss.backward()
        unused = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
        assert not unused, (name, unused)


TINY_FIELDS = dict(
    vocab_size=97, hidden_size=32, num_attention_heads=4, intermediate_size=64, max_position_embeddings=64
)


# ---------------------------------------------------------------------------------------------- width variants
WIDTH_BLOCKS = ["pre_ln", "sas", "sas_p", "simplest", "normformer", "value_skipinit"]


def _drop_in_reference(ref, variant: str, repeat: int, dropped_per_layer) -> None:
    """The same subnetwork without hooks: zero what reads a dropped sub-MLP (W_out columns), a dropped softmax head
    (W^O columns) or, for shaped attention, a dropped head's β and γ (leaving its identity part α·X_h)."""
    with torch.no_grad():
        for layer, dropped in zip(ref.model.layers, dropped_per_layer):
            for u in dropped:
                if variant == "mlp":
                    layer.mlp.fc_out.weight[:, u * repeat : (u + 1) * repeat] = 0
                elif hasattr(layer.attn.mixing, "alpha"):
                    for gain in (layer.attn.mixing.beta, layer.attn.mixing.gamma):
                        if gain is not None:
                            gain.weight[u] = 0
                else:
                    layer.attn.o_proj.weight[:, u * repeat : (u + 1) * repeat] = 0


@pytest.mark.parametrize("block_type", WIDTH_BLOCKS)
@pytest.mark.parametrize("variant", ["mlp", "attention"])
def test_width_masks_are_exact_subnetworks_with_zero_grads(variant, block_type):
    config = tiny_config(block_type, num_hidden_layers=2)
    model = perturb_(SimplifiedForCausalLM(config)).train()
    ref = SimplifiedForCausalLM(config).train()
    ref.load_state_dict(model.state_dict())
    masks = WidthMasks(model.model, variant)
    units = masks.units
    keep = [True] * (2 * units)
    keep[1] = keep[units + 2] = keep[units + 3] = False  # layer 0 drops unit 1, layer 1 drops units 2 and 3
    masks.set(keep)
    _drop_in_reference(ref, variant, masks.repeat, ([1], [2, 3]))
    ids = _ids()
    out = model(ids, labels=ids, skip_logits=False)
    torch.testing.assert_close(out.logits, ref(ids).logits, rtol=1e-5, atol=1e-6)
    out.loss.backward()
    layer = model.model.layers[0]
    shaped = hasattr(layer.attn.mixing, "alpha")
    if variant == "mlp":
        w = layer.mlp.fc_out.weight.grad
        assert not w[:, masks.repeat : 2 * masks.repeat].any() and w[:, : masks.repeat].any()
    elif shaped:  # the dropped head's attention part gets no gradient; its identity gain α still does
        beta = layer.attn.mixing.beta.weight.grad
        assert beta[1] == 0 and beta[0] != 0
        assert layer.attn.mixing.alpha.weight.grad[1] != 0
    else:
        w = layer.attn.o_proj.weight.grad
        assert not w[:, masks.repeat : 2 * masks.repeat].any() and w[:, : masks.repeat].any()
    model.eval()
    masks.set(None)
    full = model(ids).logits
    masks.set(keep)
    assert torch.equal(model(ids).logits, full)  # eval ignores the masks: it is the full model
    masks.remove()
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


@pytest.mark.parametrize("block_type", ["pre_ln", "sas", "sas_p", "simplest", "value_skipinit"])
def test_attention_raptr_dropped_heads_are_identity_for_shaped_attention(block_type):
    """With every head dropped, each layer's attention mixing outputs 0 (softmax) or α·X (shaped attention: the
    identity part only). For the skipless blocks (identity values and W^O from layer 1 on) the whole attention
    module is then α·X: dropped heads pass the residual stream on instead of zeroing its channel slices."""
    config = tiny_config(block_type, num_hidden_layers=2)
    model = perturb_(SimplifiedForCausalLM(config)).train()
    masks = WidthMasks(model.model, "attention")
    masks.set([False] * (2 * masks.units))
    seen = {}
    attn = model.model.layers[1].attn
    handles = [
        attn.mixing.register_forward_hook(
            lambda m, a, kw, o: seen.update(values=kw["current_values"], mixed=o[0]), with_kwargs=True
        ),
        attn.register_forward_hook(
            lambda m, a, kw, o: seen.update(x=a[0] if a else kw["hidden_states"], out=o[0]), with_kwargs=True
        ),
    ]
    model(_ids())
    for h in handles:
        h.remove()
    mixed = seen["mixed"]
    if not hasattr(attn.mixing, "alpha"):
        assert not mixed.any()
        return
    assert seen["values"].abs().amax(dim=(0, 2, 3)).min() > 0  # layer 0 passed every head's channels on
    alpha = attn.mixing.alpha.weight.detach()[:, None]  # (H, 1) on (B, T, H, D)
    torch.testing.assert_close(mixed, alpha * seen["values"].transpose(1, 2), rtol=0, atol=0)
    if config.value_mode == "identity" and config.projection_mode == "identity":
        b, t, d = seen["x"].shape
        expected = (alpha * seen["x"].view(b, t, masks.units, -1)).view(b, t, d)
        torch.testing.assert_close(seen["out"], expected, rtol=1e-6, atol=1e-7)
    masks.remove()


def test_width_callback_through_trainer(tmp_path):
    model = SimplifiedForCausalLM(tiny_config(num_hidden_layers=2))
    cb = RaptrCallback("2-3-4", variant="mlp")
    _train(model, tmp_path, [cb], steps=6)
    report = cb.report
    assert report["variant"] == "mlp" and report["expected_relative_flops"] == 0.75
    assert report["computed_relative_flops"] == 1.0 and "MLP FLOPs only" in report["flops_scope"]
    assert report["stages"][-1]["mean_layers"] == 4
    assert all(not m._forward_hooks for m in model.modules())
    with pytest.raises(RaptrSpecError, match="variant"):
        RaptrCallback(variant="depthwise")


def test_width_variants_refuse_depth_options_and_name_their_units():
    for variant in ("mlp", "attention"):
        with pytest.raises(RaptrSpecError, match="fixed"):
            RaptrCallback("1-2", variant=variant, fixed=[0])
        for scaling in ("sqrt", "inverse"):
            with pytest.raises(RaptrSpecError, match="scaling"):
                RaptrCallback("1-2", variant=variant, scaling=scaling)
        RaptrCallback("1-2", variant=variant, scaling="none", fixed=())  # what they do anyway: accepted
    config = tiny_config(num_hidden_layers=12)
    with pytest.raises(RaptrSpecError, match=r"sub-MLPs per layer .* \[0, 4\]"):
        RaptrCallback("6-8-10-12", variant="mlp").build(config, 100)
    with pytest.raises(RaptrSpecError, match=r"attention heads per layer .* \[0, 4\]"):
        RaptrCallback("2-6", variant="attention").build(config, 100)
    with pytest.raises(RaptrSpecError, match=r"layers .* \[2, 12\]"):
        RaptrCallback("1-12").build(config, 100)
    assert RaptrCallback("6-8-10-12").build(config, 100).expected_relative_flops() == 0.75


# ---------------------------------------------------------------------------------------------- tools
def test_bench_smoke(capsys):
    from benchmarks.raptr import bench, main

    r = bench(num_layers=4, hidden_size=32, seq_len=8, batch=2, vocab=97, repeats=1)
    assert r["layers_kept"] == 2 and r["num_layers"] == 4
    for stat in ("min", "median"):
        assert r[f"full_{stat}_s"] > 0 and r[f"half_{stat}_s"] > 0
        assert r[f"half_over_full_{stat}"] == r[f"half_{stat}_s"] / r[f"full_{stat}_s"]
    argv = ["--bench", "--layers", "4", "--hidden-size", "64", "--seq-len", "8", "--batch", "2", "--repeats", "1"]
    assert main(argv) == 0
    assert "half/full = " in capsys.readouterr().out


def test_stagewise_lr_is_constant_within_stages_and_decays_over_the_last():
    from modeling_simplified.training.raptr import stagewise_lr_lambda

    factor = stagewise_lr_lambda(warmup_steps=2, decay_start=5, total_steps=8)
    assert [factor(s) for s in range(8)] == pytest.approx([0, 0.5, 1, 1, 1, 1, 2 / 3, 1 / 3])
    # a warmup longer than the early stages: the decay starts after it
    assert [stagewise_lr_lambda(4, 2, 8)(s) for s in range(8)] == pytest.approx(
        [0, 0.25, 0.5, 0.75, 1, 0.75, 0.5, 0.25]
    )


@pytest.mark.parametrize("schedule", ["stagewise", "preset"])
def test_cli_raptr_lr_schedule(tmp_path, schedule):
    """The CLI's default for RaPTr runs is the paper's schedule: after the warmup the lr stays at its peak through
    the stages before the last and decays linearly to 0 over the last; `preset` keeps the preset's (linear decay
    over the whole run). The learning rates are read back from the Trainer's logs, one per step."""
    from modeling_simplified.training.cli import main

    run = tmp_path / "run"
    argv = [*CLI_BASE, "--set", "training.eval_steps=100", "--set", "training.logging_steps=1", "--max-steps", "12"]
    argv += ["--set", "training.save_steps=12"]
    argv += ["--no-export", "--output-dir", str(run), "--raptr", "2-3-4", "--raptr-lengths", "4,8"]
    assert main([*argv, "--raptr-lr-schedule", schedule]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["raptr"]["lr_schedule"] == schedule
    assert metrics["raptr"]["lr_decay_start"] == (8 if schedule == "stagewise" else None)
    state = json.loads(next(run.glob("checkpoint-*/trainer_state.json")).read_text())
    lrs = {e["step"]: e["learning_rate"] for e in state["log_history"] if "learning_rate" in e and "loss" in e}
    peak = metrics["learning_rate"]
    # the lr logged at step s is the one step s used: warmup (5% of 12 steps: one step) at step 1
    assert lrs[1] == 0.0
    early = [lrs[s] for s in range(2, 10)]
    if schedule == "stagewise":
        assert early == pytest.approx([peak] * 8)  # steps 1..8: constant through the first two stages
        assert [lrs[s] for s in range(10, 13)] == pytest.approx([peak * (13 - s) / 4 for s in range(10, 13)])
    else:
        assert all(a > b for a, b in zip(early, early[1:]))  # linear decay from the first step on
