"""The model heads for every block type: forward/backward, gradients, save/load round trips, Auto classes, padding."""

import pytest
import torch
from conftest import TINY, assert_no_warnings, perturb_, tiny_config
from torch import nn
from transformers import AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM, AutoModelForSequenceClassification

from modeling_simplified import (
    BLOCK_TYPES,
    SimplifiedConfig,
    SimplifiedForCausalLM,
    SimplifiedForMaskedLM,
    SimplifiedForSequenceClassification,
    SimplifiedModel,
)
from modeling_simplified.modeling_simplified import Linear, ReparamLinear, _init_linear

HEADS = {
    "causal": (SimplifiedForCausalLM, AutoModelForCausalLM),
    "masked": (SimplifiedForMaskedLM, AutoModelForMaskedLM),
}
SHAPED = ("value_skipinit", "sas", "sas_p", "simplest")


def _batch(seed: int = 0, batch: int = 3, seq_len: int = 9):
    """Token ids and a 2-D mask with one unpadded, one left-padded and one right-padded row."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, TINY["vocab_size"], (batch, seq_len), generator=gen)
    mask = torch.ones(batch, seq_len, dtype=torch.long)
    mask[1, :3] = 0
    mask[2, -2:] = 0
    return ids, mask


def _perturb_buffers_(model: torch.nn.Module, seed: int = 1) -> torch.nn.Module:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for b in model.buffers():
            if b.is_floating_point():
                b.add_(torch.randn(b.shape, generator=gen) * 0.1)
    return model


def _assert_state_equal(a: torch.nn.Module, b: torch.nn.Module):
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for name in sa:
        assert torch.equal(sa[name], sb[name]), f"{name} changed on reload"


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("skip_logits", [False, True], ids=["logits", "fused-loss"])
def test_forward_backward_every_parameter_gets_gradient(block_type, head, skip_logits):
    torch.manual_seed(0)
    model = perturb_(HEADS[head][0](tiny_config(block_type)))
    ids, mask = _batch()
    labels = ids.masked_fill(mask == 0, -100)
    out = model(input_ids=ids, attention_mask=mask, labels=labels, skip_logits=skip_logits)
    assert torch.isfinite(out.loss)
    if not skip_logits:
        assert out.logits.shape == (*ids.shape, TINY["vocab_size"])
        assert torch.isfinite(out.logits).all()
    out.loss.backward()
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    assert trainable
    for name, param in trainable:
        assert param.grad is not None, f"{name} got no gradient"
        assert torch.isfinite(param.grad).all(), name
        assert param.grad.abs().sum() > 0, f"{name} got an all-zero gradient"


@pytest.mark.parametrize("head", HEADS)
def test_save_load_round_trip_is_exact(block_type, head, tmp_path):
    cls, auto = HEADS[head]
    torch.manual_seed(0)
    model = _perturb_buffers_(perturb_(cls(tiny_config(block_type)))).eval()
    model.save_pretrained(tmp_path)
    reloaded = auto.from_pretrained(tmp_path).eval()
    assert type(reloaded) is cls
    _assert_state_equal(model, reloaded)
    assert reloaded.get_output_embeddings().weight is reloaded.get_input_embeddings().weight  # still tied
    ids, mask = _batch()
    with torch.no_grad():
        expected = model(input_ids=ids, attention_mask=mask).logits
        got = reloaded(input_ids=ids, attention_mask=mask).logits
    assert torch.equal(expected, got)


@pytest.mark.parametrize("cls", [SimplifiedForCausalLM, SimplifiedForMaskedLM, SimplifiedModel])
def test_fixed_parameters_stay_fixed_after_reloading(cls, tmp_path):
    """Config-fixed parameters (gains with `*_trainable=False`, `frozen_biases`) are not trainable after
    `from_pretrained` (which re-creates every loaded parameter as trainable) or an Auto class."""
    config = tiny_config(
        "sas_p",
        shaped_gains_trainable=False,
        reparam_gains_trainable=False,
        block_gains_trainable=False,
        attention_bias=True,
        mlp_bias=True,
        frozen_biases=True,
    )
    model = cls(config)
    fixed = {name for name, param in model.named_parameters() if not param.requires_grad}
    assert (
        any("alpha" in n for n in fixed) and any("fc_in.bias" in n for n in fixed) and any("gain" in n for n in fixed)
    )
    model.save_pretrained(tmp_path)
    frozen = lambda m: {name for name, param in m.named_parameters() if not param.requires_grad}  # noqa: E731
    assert frozen(cls.from_pretrained(tmp_path)) == fixed
    in_base = {name.removeprefix("model.") for name in fixed if cls is SimplifiedModel or name.startswith("model.")}
    assert frozen(AutoModel.from_pretrained(tmp_path)) == in_base


@pytest.mark.parametrize(
    "overrides",
    [
        dict(block_type="sas", reparam_init="orthogonal"),
        dict(block_type="sas_p", reparam_init="normal", reparam_gains_trainable=False),
        dict(value_mode="reparam", projection_mode="reparam", reparam_init="orthogonal", reparam_tie="all_blocks"),
        dict(value_mode="reparam", projection_mode="reparam", reparam_init="orthogonal", reparam_tie="last_block"),
    ],
    ids=["sas-orthogonal", "sas_p-normal-fixed-gains", "tie-all_blocks", "tie-last_block"],
)
def test_loading_never_reinitialises_eq6_buffers(overrides, tmp_path):
    """Eq. 6's fixed W_init is a saved buffer: a perturbed one reloads to exactly the perturbed values."""
    model = SimplifiedForCausalLM(tiny_config(**overrides))
    reparams = [m for m in model.modules() if isinstance(m, ReparamLinear)]
    assert reparams
    original = [m.weight_init.clone() for m in reparams]
    _perturb_buffers_(perturb_(model))
    assert not any(torch.equal(o, m.weight_init) for o, m in zip(original, reparams))
    model.save_pretrained(tmp_path)
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    _assert_state_equal(model, reloaded)


def test_reparam_ties_make_products_identity():
    """`all_blocks`: W^P_init = (W^V_init)^T per block; `last_block`: the product over all blocks is I."""
    eye = torch.eye(TINY["hidden_size"])
    kw = dict(value_mode="reparam", projection_mode="reparam", reparam_init="orthogonal", num_hidden_layers=3)
    model = SimplifiedModel(tiny_config(reparam_tie="all_blocks", **kw))
    for layer in model.layers:
        v, p = layer.attn.qkv.value.weight_init, layer.attn.o_proj.weight_init
        torch.testing.assert_close(p @ v, eye, atol=1e-5, rtol=0)
        assert not torch.allclose(v, eye, atol=1e-2)
    model = SimplifiedModel(tiny_config(reparam_tie="last_block", **kw))
    product = eye
    for layer in model.layers:
        product = layer.attn.o_proj.weight_init @ layer.attn.qkv.value.weight_init @ product
    torch.testing.assert_close(product, eye, atol=1e-5, rtol=0)


def test_sequence_classification_grads_and_round_trip(tmp_path):
    torch.manual_seed(0)
    config = tiny_config("sas_p", num_labels=3, pad_token_id=0)
    model = perturb_(SimplifiedForSequenceClassification(config))
    ids, mask = _batch()
    labels = torch.tensor([0, 2, 1])
    out = model(input_ids=ids, attention_mask=mask, labels=labels)
    assert out.logits.shape == (3, 3) and torch.isfinite(out.loss)
    out.loss.backward()
    for name, param in model.named_parameters():
        if param.requires_grad:
            assert param.grad is not None and param.grad.abs().sum() > 0, name
    model.eval().save_pretrained(tmp_path)
    reloaded = AutoModelForSequenceClassification.from_pretrained(tmp_path).eval()
    assert type(reloaded) is SimplifiedForSequenceClassification
    _assert_state_equal(model, reloaded)
    with torch.no_grad():
        assert torch.equal(
            model(input_ids=ids, attention_mask=mask).logits, reloaded(input_ids=ids, attention_mask=mask).logits
        )


def test_auto_from_config():
    config = SimplifiedConfig(block_type="sas_p", **TINY)
    causal = AutoModelForCausalLM.from_config(config)
    assert type(causal) is SimplifiedForCausalLM and causal.config.block_type == "sas_p"
    assert causal.model.config.is_causal is True
    masked = AutoModelForMaskedLM.from_config(SimplifiedConfig(block_type="sas_p", **TINY))
    assert type(masked) is SimplifiedForMaskedLM and masked.config.is_causal is False
    assert type(AutoModel.from_config(SimplifiedConfig(block_type="sas", **TINY))) is SimplifiedModel
    assert (
        type(AutoModelForSequenceClassification.from_config(tiny_config("sas"))) is SimplifiedForSequenceClassification
    )


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "bidirectional"])
def test_padding_never_changes_real_positions(block_type, causal):
    """Outputs at real tokens equal those of the unpadded sequence, with left and right padding."""
    torch.manual_seed(0)
    model = perturb_(SimplifiedModel(tiny_config(block_type, is_causal=causal))).eval()
    gen = torch.Generator().manual_seed(3)
    real = torch.randint(0, TINY["vocab_size"], (1, 6), generator=gen)
    with torch.no_grad():
        expected = model(input_ids=real).last_hidden_state[0]
        for side in ("left", "right"):
            pad = torch.full((1, 3), 5)
            ids = torch.cat((pad, real), 1) if side == "left" else torch.cat((real, pad), 1)
            mask = (torch.arange(9) >= 3) if side == "left" else (torch.arange(9) < 6)
            mask = mask.long()[None]
            position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
            out = model(input_ids=ids, attention_mask=mask, position_ids=position_ids).last_hidden_state[0]
            assert torch.isfinite(out).all(), side
            torch.testing.assert_close(out[mask[0].bool()], expected, atol=1e-5, rtol=0, msg=side)


@pytest.mark.parametrize("block_type", SHAPED)
def test_simplified_init(block_type):
    """W^Q = 0, shaped gains and βFF at their config values, identity values/projections cost no parameters."""
    config = tiny_config(block_type, num_hidden_layers=3)
    model = SimplifiedModel(config)
    d = config.hidden_size
    for i, layer in enumerate(model.layers):
        attn = layer.attn
        assert torch.count_nonzero(attn.qkv.proj.weight[:d]) == 0, f"layer {i}: W^Q must start at 0"
        assert torch.all(attn.mixing.alpha.weight == config.shaped_alpha_init)
        assert torch.all(attn.mixing.beta.weight == config.shaped_beta_init)
        assert torch.all(layer.mlp_gain.weight == config.beta_ff_init)
        if block_type == "value_skipinit":
            assert attn.mixing.gamma is None
            value = attn.qkv.proj.weight[2 * d :]
            torch.testing.assert_close(value @ value.T, torch.eye(d), atol=1e-5, rtol=0)
            continue
        assert torch.all(attn.mixing.gamma.weight == config.shaped_gamma_init)
        attn_params = {n: p.shape for n, p in attn.named_parameters() if p.dim() == 2}
        if i == 0:
            assert torch.equal(attn.qkv.value.weight, torch.eye(d))  # αV·I + βV·0
            assert attn_params == {"qkv.proj.weight": (2 * d, d), "qkv.value.delta": (d, d)}
        else:
            assert attn_params == {"qkv.proj.weight": (2 * d, d)}


def test_pre_ln_init_std():
    shape = dict(block_type="pre_ln", vocab_size=512, hidden_size=256, num_attention_heads=4)
    model = SimplifiedForCausalLM(SimplifiedConfig(num_hidden_layers=1, **shape))
    for name, param in model.named_parameters():
        if param.dim() == 2:
            assert abs(param.std().item() - 0.02) < 0.002, name
    gpt2 = SimplifiedModel(SimplifiedConfig(init_scheme="gpt2", num_hidden_layers=2, **shape))
    expected = 0.02 / 2.0  # 0.02 / sqrt(2 L)
    assert abs(gpt2.layers[0].mlp.fc_out.weight.std().item() - expected) < expected * 0.1
    assert abs(gpt2.layers[0].mlp.fc_in.weight.std().item() - 0.02) < 0.002


def test_linear_init_choices_are_declared_by_the_class():
    """`_init_linear` reads the init a `Linear` declares in its constructor: a misspelt choice is a TypeError, not a
    silent fall-back to the default init; a plain `nn.Linear` gets `Linear`'s defaults."""
    with pytest.raises(TypeError, match="init_sdt"):
        Linear(4, 4, init_sdt=0.5)
    torch.manual_seed(0)
    scaled, orthogonal, plain = (
        Linear(256, 256, init_std=0.5),
        Linear(64, 64, orthogonal_init=True),
        nn.Linear(256, 256),
    )
    fused = Linear(8, 24, query_init_std=0.0, value_orthogonal=True)  # W^Q = 0, orthogonal value rows
    with torch.no_grad():  # as `_init_weights` runs it
        for module in (scaled, orthogonal, plain, fused):
            _init_linear(module, 0.02)
    assert abs(scaled.weight.std().item() - 0.5) < 0.05 and abs(plain.weight.std().item() - 0.02) < 0.002
    assert torch.allclose(orthogonal.weight @ orthogonal.weight.T, torch.eye(64), atol=1e-5)
    assert torch.all(fused.weight[:8] == 0) and torch.allclose(
        fused.weight[16:] @ fused.weight[16:].T, torch.eye(8), atol=1e-5
    )


def test_vocab_padding_never_predicts_padded_logits():
    model = SimplifiedForCausalLM(tiny_config("sas", pad_vocab_size_multiple=64))
    assert model.get_input_embeddings().weight.shape[0] == 128
    ids, mask = _batch()
    assert model(input_ids=ids, attention_mask=mask).logits.shape[-1] == TINY["vocab_size"]


def test_all_block_types_covered():
    assert set(BLOCK_TYPES) == {
        "pre_ln",
        "post_ln",
        "parallel",
        "value_skipinit",
        "sas",
        "sas_p",
        "simplest",
        "normformer",
    }


def test_heads_never_change_the_callers_config():
    """One config for an encoder and then a decoder: the decoder must stay causal."""
    config = tiny_config("sas_p")
    masked = AutoModelForMaskedLM.from_config(config)
    causal = perturb_(AutoModelForCausalLM.from_config(config)).eval()
    assert config.is_causal is None
    assert masked.config.is_causal is False and causal.config.is_causal is True
    assert causal.model.config is causal.config and masked.model.config is masked.config
    assert all(layer.attn.is_causal for layer in causal.model.layers)
    assert not any(layer.attn.is_causal for layer in masked.model.layers)
    ids, _ = _batch()
    changed = ids.clone()
    changed[:, -1] = (changed[:, -1] + 1) % TINY["vocab_size"]
    with torch.no_grad():  # a causal model's earlier positions never see later tokens
        assert torch.equal(causal(input_ids=ids).logits[:, :-1], causal(input_ids=changed).logits[:, :-1])


def test_loading_a_checkpoint_without_causality(tmp_path):
    """A config.json with `is_causal` unset loads exactly, with the head's causality."""
    import json

    model = perturb_(SimplifiedForMaskedLM(tiny_config("sas"))).eval()
    model.save_pretrained(tmp_path)
    data = json.loads((tmp_path / "config.json").read_text())
    assert data["is_causal"] is False
    data["is_causal"] = None
    (tmp_path / "config.json").write_text(json.dumps(data))
    reloaded = AutoModelForMaskedLM.from_pretrained(tmp_path).eval()
    assert reloaded.config.is_causal is False and reloaded.model.config is reloaded.config
    _assert_state_equal(model, reloaded)
    ids, mask = _batch()
    with torch.no_grad():
        assert torch.equal(
            model(input_ids=ids, attention_mask=mask).logits, reloaded(input_ids=ids, attention_mask=mask).logits
        )


@pytest.mark.parametrize(
    "cls", [SimplifiedForCausalLM, SimplifiedForMaskedLM, SimplifiedForSequenceClassification, SimplifiedModel]
)
def test_build_train_save_load_log_no_warning(block_type, cls, tmp_path):
    """Building, a training step, saving, reloading (class and Auto class) and generating log no warning (e.g. an
    unrecognised `loss_type`: the loss is chosen from the head's class name) and raise no Python warning."""
    with assert_no_warnings():
        model = cls(tiny_config(block_type, num_labels=3, pad_token_id=0))
        ids, mask = _batch()
        labels = {SimplifiedForSequenceClassification: torch.tensor([0, 1, 2]), SimplifiedModel: None}.get(cls, ids)
        kwargs = {} if labels is None else {"labels": labels}
        out = model(input_ids=ids, attention_mask=mask, **kwargs)
        (out.loss if labels is not None else out.last_hidden_state.sum()).backward()
        model.save_pretrained(tmp_path)
        cls.from_pretrained(tmp_path)
        auto = {
            SimplifiedForCausalLM: AutoModelForCausalLM,
            SimplifiedForMaskedLM: AutoModelForMaskedLM,
            SimplifiedForSequenceClassification: AutoModelForSequenceClassification,
        }.get(cls, AutoModel)
        reloaded = auto.from_pretrained(tmp_path, trust_remote_code=True)
        reloaded(input_ids=ids, attention_mask=mask)
        if cls is SimplifiedForCausalLM:
            model.generate(ids[:1], max_new_tokens=2, do_sample=False, pad_token_id=0)


def test_causality_is_fixed_when_the_model_is_built():
    """transformers copies a call's `is_causal` into the config; the model keeps the causality it was built with. A
    call may pass another one only with its own 4-D mask (continuous batching does); otherwise one ValueError."""
    model = perturb_(SimplifiedModel(tiny_config("sas_p"))).eval()
    ids = torch.randint(1, TINY["vocab_size"], (2, 6), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        causal = model(input_ids=ids).last_hidden_state
        with pytest.raises(ValueError, match=r"is_causal=False for a model loaded with is_causal=True"):
            model(input_ids=ids, is_causal=False)
        allowed = torch.ones(6, 6, dtype=torch.bool).tril()[None, None].expand(2, 1, 6, 6)
        with_own_mask = model(input_ids=ids, attention_mask=allowed, is_causal=False).last_hidden_state
    assert model.config.is_causal is True and model.is_causal is True
    torch.testing.assert_close(with_own_mask, causal, rtol=0, atol=1e-6)


@pytest.mark.parametrize("block_type", ["sas", "sas_p", "simplest"])
def test_prefill_into_an_empty_cache_equals_a_cacheless_forward_bitwise(block_type):
    """A call that holds every key (nothing cached before it) takes the same centring path with or without a cache:
    `generate`'s prefill and scoring give the same bytes."""
    model = perturb_(SimplifiedForCausalLM(tiny_config(block_type))).eval()
    ids = torch.randint(1, TINY["vocab_size"], (3, 9), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, :3] = 0
    with torch.no_grad():
        cached = model(input_ids=ids, attention_mask=mask, use_cache=True).logits
        uncached = model(input_ids=ids, attention_mask=mask, use_cache=False).logits
    assert torch.equal(cached, uncached)
