"""RaPTr (modeling_simplified/training/raptr.py and the model's layer plan): schedules and their FLOPs, exact
subnetworks (bypassed = identity, App. J scales), p = 1 is plain training, reproducible sampling, zero gradients and
AdamW's rules for bypassed layers, the full model outside training steps, and a 2-process DDP run."""

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
from modeling_simplified.modeling_simplified import LayerPlan
from modeling_simplified.training.raptr import (
    RaptrCallback,
    RaptrSpecError,
    build_schedule,
    layer_scales,
    sqrt_scales,
)

REPO = Path(__file__).resolve().parents[1]


def _ids(seed: int = 0, batch: int = 2, seq_len: int = 8) -> torch.Tensor:
    return torch.randint(0, 97, (batch, seq_len), generator=torch.Generator().manual_seed(seed))


def _train(model, tmp_path, callbacks=(), steps: int = 4, **kw) -> Trainer:
    data = [{"input_ids": ids, "labels": ids} for ids in _ids(0, 32, 8)]
    args = TrainingArguments(
        str(tmp_path),
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
        **kw,
    )
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=list(callbacks))
    trainer.train()
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
    mask = create_causal_mask(
        config=model.config,
        inputs_embeds=x,
        attention_mask=None,
        past_key_values=None,
        position_ids=torch.arange(8)[None],
    )
    h = x
    for s, layer in zip(scales, base.layers):
        if s:
            out = layer(h, attention_mask=mask, position_embeddings=pe, past_key_values=None, key_padding_mask=None)
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
    ref = _train(SimplifiedForCausalLM(tiny_config("sas_p", num_hidden_layers=3)), tmp_path / "a").model
    cb = RaptrCallback("3", scaling="sqrt")
    got = _train(SimplifiedForCausalLM(tiny_config("sas_p", num_hidden_layers=3)), tmp_path / "b", [cb]).model
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


# ---------------------------------------------------------------------------------------------- CLI
def test_cli_raptr_writes_its_report_to_metrics_and_rejects_bad_schedules(tmp_path, capsys):
    from modeling_simplified.training.cli import main

    base = [
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
        "training.eval_steps=4",
        "--max-steps",
        "8",
        "--no-export",
        "--set",
        "num_hidden_layers=4",
    ]
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


# ---------------------------------------------------------------------------------------------- width variants
@pytest.mark.parametrize("variant", ["mlp", "attention"])
def test_width_masks_are_exact_subnetworks_with_zero_grads(variant):
    from modeling_simplified.training.raptr import WidthMasks

    config = tiny_config("pre_ln", num_hidden_layers=2)
    model = perturb_(SimplifiedForCausalLM(config)).train()
    ref = SimplifiedForCausalLM(config).train()
    ref.load_state_dict(model.state_dict())
    masks = WidthMasks(model.model, variant)
    units = masks.units
    keep = [True] * (2 * units)
    keep[1] = keep[units + 2] = keep[units + 3] = False  # layer 0 drops unit 1, layer 1 drops units 2 and 3
    masks.set(keep)
    with torch.no_grad():  # the same subnetwork by zeroing the weights that read the dropped units
        for layer, dropped in zip(ref.model.layers, ([1], [2, 3])):
            for u in dropped:
                cols = slice(u * masks.repeat, (u + 1) * masks.repeat)
                (layer.mlp.fc_out if variant == "mlp" else layer.attn.o_proj).weight[:, cols] = 0
    ids = _ids()
    out = model(ids, labels=ids)
    torch.testing.assert_close(out.logits, ref(ids).logits, rtol=1e-5, atol=1e-6)
    out.loss.backward()
    w = (model.model.layers[0].mlp.fc_out if variant == "mlp" else model.model.layers[0].attn.o_proj).weight.grad
    assert not w[:, masks.repeat : 2 * masks.repeat].any() and w[:, : masks.repeat].any()
    model.eval()
    masks.set(None)
    full = model(ids).logits
    masks.set(keep)
    assert torch.equal(model(ids).logits, full)  # eval ignores the masks: it is the full model
    masks.remove()
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def test_width_callback_through_trainer(tmp_path):
    model = SimplifiedForCausalLM(tiny_config(num_hidden_layers=2))
    cb = RaptrCallback("2-3-4", variant="mlp")
    _train(model, tmp_path, [cb], steps=6)
    assert cb.report["variant"] == "mlp" and cb.report["expected_relative_flops"] == 0.75
    assert cb.report["stages"][-1]["mean_layers"] == 4
    assert all(not m._forward_hooks for m in model.modules())
    with pytest.raises(RaptrSpecError, match="variant"):
        RaptrCallback(variant="depthwise")
