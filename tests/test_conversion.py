"""Converters: GPT-2 <-> pre_ln, Llama <-> pre_ln, BERT -> post_ln, and the authors' checkpoints -> ours.

Every reference model has every weight and gain perturbed away from its init; logits must agree within 1e-5 and
round trips must give back the reference state dict exactly. The authors' format is built from its documented facts
and checked against a direct implementation of their equations written here.
"""

import json
import math
import re

import pytest
import torch
import torch.nn.functional as F
from conftest import perturb_, tiny_config
from safetensors.torch import save_file
from transformers import (
    BertConfig,
    BertForMaskedLM,
    BertModel,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
)

from modeling_simplified import SimplifiedForCausalLM
from modeling_simplified.conversion import (
    ConversionError,
    bert_to_simplified,
    gpt2_to_simplified,
    llama_to_simplified,
    original_to_simplified,
    simplified_to_gpt2,
    simplified_to_llama,
)
from modeling_simplified.conversion.cli import main

V, D, H, L, T = 61, 32, 4, 3, 12


def _ids(seed=0, batch=2, length=T, vocab=V):
    return torch.randint(0, vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


def _assert_same_state(a: dict, b: dict):
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]), k


# ----------------------------------------------------------------------------------------------------------------
# GPT-2 and Llama round trips
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("tied", [True, False])
def test_gpt2_round_trip(tied):
    g = GPT2Config(
        n_layer=L,
        n_embd=D,
        n_head=H,
        vocab_size=V,
        n_positions=32,
        tie_word_embeddings=tied,
        bos_token_id=0,
        eos_token_id=0,
    )
    ref = perturb_(GPT2LMHeadModel(g)).eval()
    ours = gpt2_to_simplified(ref)
    assert ours.config.block_type == "pre_ln"
    with torch.no_grad():
        assert torch.allclose(ours(_ids()).logits, ref(_ids()).logits, atol=1e-5, rtol=0)
        back = simplified_to_gpt2(ours)
        _assert_same_state(ref.state_dict(), back.state_dict())
        assert torch.equal(back(_ids()).logits, ref(_ids()).logits)


@pytest.mark.parametrize("tied,bias", [(True, False), (False, True)])
def test_llama_round_trip(tied, bias):
    cfg = LlamaConfig(
        num_hidden_layers=L,
        hidden_size=D,
        num_attention_heads=H,
        num_key_value_heads=H,
        intermediate_size=48,
        vocab_size=V,
        max_position_embeddings=32,
        tie_word_embeddings=tied,
        attention_bias=bias,
        mlp_bias=bias,
        rope_parameters={"rope_type": "default", "rope_theta": 500.0},
    )
    ref = perturb_(LlamaForCausalLM(cfg)).eval()
    ours = llama_to_simplified(ref)
    assert ours.config.rope_theta == 500.0 and ours.config.tie_word_embeddings == tied
    with torch.no_grad():
        assert torch.allclose(ours(_ids()).logits, ref(_ids()).logits, atol=1e-5, rtol=0)
        back = simplified_to_llama(ours)
        _assert_same_state(ref.state_dict(), back.state_dict())
        assert torch.equal(back(_ids()).logits, ref(_ids()).logits)


def test_ours_to_native_and_back_is_exact():
    ours = perturb_(
        SimplifiedForCausalLM(
            tiny_config(
                "pre_ln",
                norm_type="layernorm",
                final_norm="layernorm",
                position_embedding_type="learned",
                hidden_act="gelu_new",
                attention_bias=True,
                mlp_bias=True,
            )
        )
    ).eval()
    _assert_same_state(ours.state_dict(), gpt2_to_simplified(simplified_to_gpt2(ours)).state_dict())
    llama_like = perturb_(
        SimplifiedForCausalLM(tiny_config("pre_ln", hidden_act="swiglu", position_embedding_type="rotary"))
    ).eval()
    back = llama_to_simplified(simplified_to_llama(llama_like))
    _assert_same_state(llama_like.state_dict(), back.state_dict())


@pytest.mark.parametrize(
    "block_type,field",
    [("sas", "value_mode"), ("sas_p", "parallel_block"), ("pre_ln", "norm_type"), ("normformer", "head_scale")],
)
def test_incompatible_to_gpt2_names_field(block_type, field):
    model = SimplifiedForCausalLM(tiny_config(block_type))
    with pytest.raises(ConversionError, match=field):
        simplified_to_gpt2(model)


def test_frozen_biases_are_refused_by_native_exports():
    """GPT-2 and Llama train every bias (and fuse a plain W^V that `frozen_biases` keeps apart)."""
    with pytest.raises(ConversionError, match="frozen_biases=True"):
        simplified_to_gpt2(SimplifiedForCausalLM(tiny_config("pre_ln", attention_bias=True, frozen_biases=True)))
    llama_like = tiny_config("pre_ln", hidden_act="swiglu", position_embedding_type="rotary", frozen_biases=True)
    with pytest.raises(ConversionError, match="frozen_biases=True"):
        simplified_to_llama(SimplifiedForCausalLM(llama_like))


def test_incompatible_llama_conversions_name_field():
    with pytest.raises(ConversionError, match="hidden_act"):
        simplified_to_llama(SimplifiedForCausalLM(tiny_config("pre_ln", position_embedding_type="rotary")))
    with pytest.raises(ConversionError, match="rmsnorm_eps_position"):
        simplified_to_llama(
            SimplifiedForCausalLM(
                tiny_config(
                    "pre_ln", hidden_act="swiglu", rmsnorm_eps_position="outside", position_embedding_type="rotary"
                )
            )
        )
    with pytest.raises(ConversionError, match="num_key_value_heads=2 .needs 4."):
        simplified_to_gpt2(
            SimplifiedForCausalLM(
                tiny_config(
                    "pre_ln",
                    num_key_value_heads=2,
                    norm_type="layernorm",
                    attention_bias=True,
                    mlp_bias=True,
                    hidden_act="gelu_new",
                )
            )
        )


@pytest.mark.parametrize(
    "field, value",
    [("activation_function", "silu"), ("scale_attn_weights", False), ("scale_attn_by_inverse_layer_idx", True)],
)
def test_gpt2_source_fields_we_cannot_express_are_named(field, value):
    ref = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=D, n_head=H, vocab_size=V, n_positions=32, **{field: value}))
    with pytest.raises(ConversionError, match=field):
        gpt2_to_simplified(ref)


@pytest.mark.parametrize(
    "field, overrides",
    [
        ("head_dim", {"head_dim": 2 * D // H}),
        ("hidden_act", {"hidden_act": "gelu"}),
        ("rope_parameters.rope_type", {"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}}),
    ],
)
def test_llama_source_fields_we_cannot_express_are_named(field, overrides):
    cfg = LlamaConfig(
        num_hidden_layers=1, hidden_size=D, num_attention_heads=H, intermediate_size=48, vocab_size=V, **overrides
    )
    with pytest.raises(ConversionError, match=re.escape(field)):
        llama_to_simplified(LlamaForCausalLM(cfg))


# ----------------------------------------------------------------------------------------------------------------
# BERT
# ----------------------------------------------------------------------------------------------------------------
def _bert_inputs(vocab=V):
    ids = _ids(vocab=vocab)
    types = torch.randint(0, 2, ids.shape, generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0
    return dict(input_ids=ids, token_type_ids=types, attention_mask=mask)


@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
def test_bert_masked_lm_to_post_ln(tied):
    cfg = BertConfig(
        num_hidden_layers=L,
        hidden_size=D,
        num_attention_heads=H,
        intermediate_size=48,
        vocab_size=V,
        max_position_embeddings=32,
        type_vocab_size=3,
        tie_word_embeddings=tied,
    )
    ref = perturb_(BertForMaskedLM(cfg)).eval()
    # untied, BERT's forward adds `decoder.bias`, a tensor apart from `predictions.bias`: perturbed apart here
    assert tied == (ref.cls.predictions.decoder.bias is ref.cls.predictions.bias)
    ours = bert_to_simplified(ref)
    assert ours.config.block_type == "post_ln" and ours.config.type_vocab_size == 3
    assert ours.config.tie_word_embeddings == tied
    inputs = _bert_inputs()
    with torch.no_grad():
        assert torch.allclose(ours(**inputs).logits, ref(**inputs).logits, atol=1e-5, rtol=0)
        # token types matter (a test that could fail): other types give other logits
        other = dict(inputs, token_type_ids=(inputs["token_type_ids"] + 1) % 3)
        assert not torch.allclose(ours(**other).logits, ours(**inputs).logits, atol=1e-3)
        assert torch.allclose(ours(**other).logits, ref(**other).logits, atol=1e-5, rtol=0)
        no_types = {k: v for k, v in inputs.items() if k != "token_type_ids"}
        assert torch.allclose(ours(**no_types).logits, ref(**no_types).logits, atol=1e-5, rtol=0)


def test_sentence_transformer_shaped_bert_model_converts():
    """The shape of all-MiniLM-L6-v2 (random init: no downloads)."""
    cfg = BertConfig(
        num_hidden_layers=6,
        hidden_size=384,
        num_attention_heads=12,
        intermediate_size=1536,
        vocab_size=30522,
        max_position_embeddings=512,
    )
    ref = perturb_(BertModel(cfg), scale=0.02).eval()
    with pytest.raises(ConversionError, match="pooler.dense.weight"):
        bert_to_simplified(ref)
    ours = bert_to_simplified(ref, drop_pooler=True)
    inputs = _bert_inputs(vocab=30522)
    with torch.no_grad():
        expected = ref(**inputs).last_hidden_state
        assert torch.allclose(ours(**inputs).last_hidden_state, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    "cls,change,field",
    [
        (BertForMaskedLM, dict(hidden_act="relu"), "hidden_act"),  # the MLM head's transform is GELU here
        (BertModel, dict(hidden_act="silu"), "hidden_act"),
        (BertModel, dict(position_embedding_type="relative_key"), "position_embedding_type"),
        (BertForMaskedLM, dict(is_decoder=True), "is_decoder"),
    ],
)
def test_bert_incompatible_fields_are_named(cls, change, field):
    cfg = BertConfig(
        num_hidden_layers=1, hidden_size=D, num_attention_heads=H, intermediate_size=48, vocab_size=V, **change
    )
    with pytest.raises(ConversionError, match=f"{field}="):
        bert_to_simplified(cls(cfg), drop_pooler=True)


def test_bert_pooler_refusal_names_keys_and_flag():
    cfg = BertConfig(num_hidden_layers=1, hidden_size=D, num_attention_heads=H, intermediate_size=48, vocab_size=V)
    with pytest.raises(ConversionError) as refused:
        bert_to_simplified(BertModel(cfg))
    assert "pooler.dense.bias, pooler.dense.weight" in str(refused.value) and "--drop-pooler" in str(refused.value)
    assert bert_to_simplified(BertModel(cfg, add_pooling_layer=False)).config.block_type == "post_ln"  # no pooler


# ----------------------------------------------------------------------------------------------------------------
# The authors' format
# ----------------------------------------------------------------------------------------------------------------
SKIPLESS = dict(
    attn_block_skip_gain=0.0,
    centre_attn=True,
    attn_mat_skip_gain=1.0,
    attn_mat_resid_gain=1.0,
    centre_attn_gain=1.0,
    value_skip_gain=1.0,
    value_resid_gain=0.0,
    first_layer_value_resid_gain=1.0,
    proj_skip_gain=1.0,
    proj_resid_gain=0.0,
    val_init_type="id",
    mlp_block_resid_gain=0.2,
    trainable_attn_block_gains=True,
    trainable_mlp_block_gains=True,
    trainable_attn_mat_gains=True,
    trainable_value_gains=True,
    trainable_proj_gains=True,
)
"""Their `skipless.yaml` (on top of `default.yaml`; `query_init_std` and the depth-dependent βFF only change the
init)."""
OP = dict(norm_type="none", qk_norm_type="rmsnorm", mlp_block_resid_gain=0.2, attn_block_resid_gain=0.2)
"""Their `op.yaml`: frozen block gains at 0.2 (trainable ones are an option it comments out)."""
VARIANTS = {
    # their default.yaml and default-parallel.yaml
    "pre_ln": dict(norm_type="rmsnorm"),
    "pre_ln_layernorm": dict(norm_type="ln", activation_function="gelu_new"),
    "parallel": dict(norm_type="rmsnorm", parallel_layers=True, attn_block_skip_gain=0.0),
    # baseline_comparison.sh's Value-SkipInit: skipless.yaml with plain orthogonal W^V, W^P (centring kept)
    "value_skipinit": dict(SKIPLESS, value_skip_gain=None, proj_skip_gain=None, val_init_type="orth"),
    # the paper's eq. 4 Value-SkipInit: `centre_attn_gain: 0` freezes γ at 0 in their code (no centring)
    "value_skipinit_uncentred": dict(
        attn_block_skip_gain=0.0,
        centre_attn=True,
        attn_mat_skip_gain=1.0,
        attn_mat_resid_gain=0.0,
        centre_attn_gain=0.0,
        trainable_attn_mat_gains=True,
        value_skip_gain=None,
        val_init_type="orth",
        lrelu_neg_slope=0.1,
    ),
    "sas": dict(SKIPLESS),
    "sas_p": dict(SKIPLESS, parallel_layers=True, mlp_block_skip_gain=0.0, attn_block_resid_gain=0.2),
    "sas_p_no_norms": dict(SKIPLESS, parallel_layers=True, mlp_block_skip_gain=0.0, norm_type="none"),
    "sas_no_norms": dict(SKIPLESS, norm_type="none"),
    # trainable_value_proj_gains.sh (their Figure 4): reparameterised W^V and W^P with trainable gains
    "sas_value_proj_gains": dict(SKIPLESS, value_resid_gain=0.2, first_layer_value_resid_gain=0.2, proj_resid_gain=0.2),
    "op": dict(OP),
    "op_trainable_gains": dict(OP, trainable_attn_block_gains=True, trainable_mlp_block_gains=True),
    "sas_last_layer_proj": dict(SKIPLESS, proj_resid_gain=0.5, last_layer_proj_resid_gain=0.1),
}


def _their_config(variant: str) -> dict:
    base = dict(
        vocab_size=V,
        n_positions=32,
        n_embd=D,
        n_layer=L,
        n_head=H,
        n_inner=48,
        layer_norm_epsilon=1e-2,
        activation_function="leaky_relu",
        lrelu_neg_slope=0.0,
        norm_type="rmsnorm",
        norm_position="pre",
        qk_norm_type="none",
        parallel_layers=False,
        attn_block_resid_gain=1.0,
        attn_block_skip_gain=1.0,
        mlp_block_resid_gain=1.0,
        mlp_block_skip_gain=1.0,
        attn_mat_resid_gain=1.0,
        attn_mat_skip_gain=0.0,
        centre_attn=False,
        centre_attn_gain=1.0,
        value_resid_gain=1.0,
        value_skip_gain=None,
        first_layer_value_resid_gain=None,
        proj_resid_gain=1.0,
        proj_skip_gain=None,
        last_layer_proj_resid_gain=None,
        val_init_type="normal",
        proj_init_type=None,
        trainable_attn_block_gains=False,
        trainable_mlp_block_gains=False,
        trainable_attn_mat_gains=False,
        trainable_value_gains=False,
        trainable_proj_gains=False,
        model_type="gpt2",
    )
    cfg = dict(base, **VARIANTS[variant])
    cfg["proj_init_type"] = cfg["proj_init_type"] or cfg["val_init_type"]
    return cfg


def _their_matrix_form(skip, resid, init_type):
    if skip is None:
        return "plain"
    return "absent" if skip == 1 and resid == 0 and init_type == "id" else "reparam"


def _their_checkpoint(cfg: dict, seed: int = 0) -> dict[str, torch.Tensor]:
    """Their state dict, built from the format's facts, every tensor random (biases, gains, norm scales too)."""
    gen = torch.Generator().manual_seed(seed)
    rnd = lambda *shape, scale=0.15: torch.randn(*shape, generator=gen) * scale  # noqa: E731
    near = lambda value, *shape: value + rnd(*shape, scale=0.1)  # noqa: E731
    d, n, w = cfg["n_embd"], cfg["n_head"], cfg["n_inner"]
    # a gain their run does not train holds one value everywhere: perturbed once, shared by every layer and head
    frozen = {
        name: near(cfg[name], 1)
        for name in (
            "attn_mat_resid_gain",
            "attn_mat_skip_gain",
            "centre_attn_gain",
            "attn_block_resid_gain",
            "attn_block_skip_gain",
            "mlp_block_resid_gain",
            "mlp_block_skip_gain",
        )
    }
    sd = {
        "transformer.wte.weight": rnd(cfg["vocab_size"], d),
        "transformer.wpe.weight": rnd(cfg["n_positions"], d),
        "transformer.ln_f.weight": near(1.0, d),
        "transformer.ln_f.bias": rnd(d),
    }
    for i in range(cfg["n_layer"]):
        p = f"transformer.h.{i}."
        for ln in ("ln_1", "ln_2"):
            if cfg["norm_type"] == "ln" or (cfg["norm_type"] == "none" and ln == "ln_1" and i == 0):
                sd[f"{p}{ln}.weight"], sd[f"{p}{ln}.bias"] = near(1.0, d), rnd(d)
            elif cfg["norm_type"] == "rmsnorm":
                sd[f"{p}{ln}.scale"] = near(1.0, d)
        sd[f"{p}attn.qk_attn.weight"], sd[f"{p}attn.qk_attn.bias"] = rnd(d, 2 * d), rnd(2 * d)
        value_resid = cfg["value_resid_gain"]
        if i == 0 and cfg["first_layer_value_resid_gain"] is not None:
            value_resid = cfg["first_layer_value_resid_gain"]
        proj_resid = cfg["proj_resid_gain"]
        if i == cfg["n_layer"] - 1 and cfg["last_layer_proj_resid_gain"] is not None:
            proj_resid = cfg["last_layer_proj_resid_gain"]
        for name, skip, resid, init_type in (
            ("v_attn", cfg["value_skip_gain"], value_resid, cfg["val_init_type"]),
            ("c_proj", cfg["proj_skip_gain"], proj_resid, cfg["proj_init_type"]),
        ):
            form = _their_matrix_form(skip, resid, init_type)
            if form != "absent":
                sd[f"{p}attn.{name}.weight"], sd[f"{p}attn.{name}.bias"] = rnd(d, d), rnd(d, scale=0.1)
            if form == "reparam":
                sd[f"{p}attn.{name}.resid_gain"], sd[f"{p}attn.{name}.skip_gain"] = near(resid, 1), near(skip, 1)
        for name in ("attn_mat_resid_gain", "attn_mat_skip_gain", "centre_attn_gain"):
            trained = cfg["trainable_attn_mat_gains"]
            if name == "centre_attn_gain" and cfg[name] == 0:  # their code freezes γ at 0: it stays exactly 0
                sd[f"{p}attn.{name}"] = torch.zeros(1, n, 1, 1)
                continue
            sd[f"{p}attn.{name}"] = near(cfg[name], 1, n, 1, 1) if trained else frozen[name].expand(1, n, 1, 1).clone()
        if cfg["qk_norm_type"] == "rmsnorm":
            sd[f"{p}attn.q_norm.scale"], sd[f"{p}attn.k_norm.scale"] = near(1.0, d // n), near(1.0, d // n)
        sd[f"{p}mlp.c_fc.weight"], sd[f"{p}mlp.c_fc.bias"] = rnd(d, w), rnd(w, scale=0.1)
        sd[f"{p}mlp.c_proj.weight"], sd[f"{p}mlp.c_proj.bias"] = rnd(w, d), rnd(d, scale=0.1)
        for block in ("attn", "mlp"):
            trainable = cfg[f"trainable_{block}_block_gains"]
            for kind in ("resid", "skip"):
                value = cfg[f"{block}_block_{kind}_gain"]
                fixed = not trainable or (kind == "skip" and cfg["parallel_layers"])
                sd[f"{p}{block}_block_{kind}_gain"] = (
                    frozen[f"{block}_block_{kind}_gain"].clone() if fixed else near(value, 1)
                )
    return sd


def _their_rmsnorm(x, scale, eps):
    return scale * (x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps))


def _their_logits(cfg: dict, sd: dict, ids: torch.Tensor) -> torch.Tensor:
    """Their equations, directly: Conv1D linears, the post-softmax attention matrix, block gains and skips."""
    eps, n = cfg["layer_norm_epsilon"], cfg["n_head"]
    t = ids.shape[1]
    x = sd["transformer.wte.weight"][ids] + sd["transformer.wpe.weight"][:t]
    conv = lambda h, key: h @ sd[f"{key}.weight"] + sd[f"{key}.bias"]  # noqa: E731

    def norm(h, key):
        if f"{key}.scale" in sd:
            return _their_rmsnorm(h, sd[f"{key}.scale"], eps)
        if f"{key}.weight" in sd:
            return F.layer_norm(h, h.shape[-1:], sd[f"{key}.weight"], sd[f"{key}.bias"], eps)
        return h

    def matrix(h, key):
        if f"{key}.weight" not in sd:
            return h
        if f"{key}.skip_gain" in sd:
            eye = torch.eye(h.shape[-1])
            return (
                h @ (sd[f"{key}.resid_gain"] * sd[f"{key}.weight"] + sd[f"{key}.skip_gain"] * eye) + sd[f"{key}.bias"]
            )
        return conv(h, key)

    def attention(u, p):
        b, d = u.shape[0], u.shape[-1]
        split = lambda z: z.view(b, t, n, d // n).transpose(1, 2)  # noqa: E731
        q, k = conv(u, f"{p}attn.qk_attn").split(d, dim=-1)
        q, k, v = split(q), split(k), split(matrix(u, f"{p}attn.v_attn"))
        if cfg["qk_norm_type"] == "rmsnorm":
            q, k = (
                _their_rmsnorm(q, sd[f"{p}attn.q_norm.scale"], eps),
                _their_rmsnorm(k, sd[f"{p}attn.k_norm.scale"], eps),
            )
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(d // n)
        causal = torch.tril(torch.ones(t, t, dtype=torch.bool))
        a = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
        m = sd[f"{p}attn.attn_mat_resid_gain"] * a
        if cfg["centre_attn"]:
            c = causal.float() / torch.arange(1, t + 1).view(-1, 1)
            m = m + sd[f"{p}attn.attn_mat_skip_gain"] * torch.eye(t) - sd[f"{p}attn.centre_attn_gain"] * c
        out = (m @ v).transpose(1, 2).reshape(b, t, d)
        return matrix(out, f"{p}attn.c_proj")

    def mlp(u, p):
        h = conv(u, f"{p}mlp.c_fc")
        if cfg["activation_function"] == "leaky_relu":
            h = torch.where(h >= 0, h, h * cfg["lrelu_neg_slope"])
        else:
            h = {"gelu_new": lambda z: F.gelu(z, approximate="tanh"), "relu": F.relu, "gelu": F.gelu}[
                cfg["activation_function"]
            ](h)
        return conv(h, f"{p}mlp.c_proj")

    for i in range(cfg["n_layer"]):
        p = f"transformer.h.{i}."
        g = lambda name, p=p: sd[f"{p}{name}"]  # noqa: E731
        u = norm(x, f"{p}ln_1")
        if cfg["parallel_layers"]:
            out = g("mlp_block_resid_gain") * mlp(u, p) + g("attn_block_resid_gain") * attention(u, p)
            if cfg["mlp_block_skip_gain"] != 0:
                out = out + g("mlp_block_skip_gain") * x
        else:
            h = g("attn_block_resid_gain") * attention(u, p)
            if cfg["attn_block_skip_gain"] != 0:
                h = h + g("attn_block_skip_gain") * x
            out = g("mlp_block_resid_gain") * mlp(norm(h, f"{p}ln_2"), p)
            if cfg["mlp_block_skip_gain"] != 0:
                out = out + g("mlp_block_skip_gain") * h
        x = out
    x = F.layer_norm(x, x.shape[-1:], sd["transformer.ln_f.weight"], sd["transformer.ln_f.bias"], eps)
    return x @ sd["transformer.wte.weight"].T


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_original_checkpoint_matches_their_equations(variant):
    """In float64, so that 1e-5 is far above rounding even for the norm-free variants (whose activations grow)."""
    cfg = _their_config(variant)
    sd = {k: v.double() for k, v in _their_checkpoint(cfg).items()}
    model = original_to_simplified(cfg, sd)
    assert model.dtype == torch.float64
    ids = _ids()
    with torch.no_grad():
        expected = _their_logits(cfg, sd, ids)
        got = model(ids).logits
    assert expected.abs().max() > 0.1  # not a degenerate network
    assert torch.allclose(got, expected, atol=1e-5, rtol=0), (got - expected).abs().max()


def test_original_expected_structure():
    sas_p = original_to_simplified(_their_config("sas_p_no_norms"), _their_checkpoint(_their_config("sas_p_no_norms")))
    c = sas_p.config
    assert (c.parallel_block, c.norm_type, c.first_layer_norm, c.final_norm) == (True, "none", "layernorm", "layernorm")
    assert (c.value_mode, c.first_layer_value_mode, c.projection_mode) == ("identity", "reparam", "identity")
    assert c.attention_type == "shaped" and c.centre_attention and c.mlp_skip_gain == 0
    sd = _their_checkpoint(_their_config("pre_ln"))
    shaped = original_to_simplified(_their_config("pre_ln"), sd).config  # a frozen β that is not 1 is carried
    assert shaped.attention_type == "shaped" and not shaped.centre_attention and shaped.shaped_alpha_init == 0
    sd.update({k: torch.ones_like(v) for k, v in sd.items() if k.endswith("attn_mat_resid_gain")})
    pre_ln = original_to_simplified(_their_config("pre_ln"), sd).config
    assert pre_ln.attention_type == "softmax" and pre_ln.rmsnorm_eps_position == "outside"
    op = original_to_simplified(_their_config("op"), _their_checkpoint(_their_config("op"))).config
    assert op.qk_norm == "rmsnorm"


def test_converted_sas_p_decodes_with_cache():
    cfg = _their_config("sas_p")
    sd = _their_checkpoint(cfg)
    model = original_to_simplified(cfg, sd)
    prompt = _ids(length=5)
    kwargs = dict(max_new_tokens=10, do_sample=False, attention_mask=torch.ones_like(prompt), pad_token_id=V - 1)
    cached = model.generate(prompt, use_cache=True, output_logits=True, return_dict_in_generate=True, **kwargs)
    uncached = model.generate(prompt, use_cache=False, **kwargs)
    assert cached.sequences.shape == (2, 15)
    assert torch.equal(cached.sequences, uncached)
    with torch.no_grad():
        full = model(cached.sequences[:, :-1]).logits  # one uncached forward over everything generated
        for step, logits in enumerate(cached.logits):  # each cached step's logits are the uncached ones there
            position = prompt.shape[1] - 1 + step
            assert torch.allclose(logits, full[:, position], atol=1e-5, rtol=0), (
                step,
                (logits - full[:, position]).abs().max(),
            )
        # and the generated text is what their equations predict
        assert torch.equal(_their_logits(cfg, sd, cached.sequences[:, :-1])[:, -1].argmax(-1), cached.sequences[:, -1])


def _their_trains(cfg: dict, key: str) -> bool:
    """Whether their code trains a parameter: `requires_grad` as their modules set it, and used by their forward
    (`ln_2` of a parallel block, α and γ without `centre_attn`, and a skip whose config value is 0 never are)."""
    parallel, centre = cfg["parallel_layers"], cfg["centre_attn"]
    name = key.rsplit(".", 1)[-1]
    if name == "bias" and any(m in key for m in (".v_attn.", ".c_proj.", ".c_fc.")):
        return False  # MyConv1D(bias=False): a frozen zero bias; only qk_attn's trains
    if ".ln_2." in key:
        return not parallel
    if ".v_attn." in key and name in ("resid_gain", "skip_gain"):
        return cfg["trainable_value_gains"]
    if ".attn.c_proj." in key and name in ("resid_gain", "skip_gain"):
        return cfg["trainable_proj_gains"]
    mat = cfg["trainable_attn_mat_gains"]
    rules = {
        "attn_mat_resid_gain": mat,
        "attn_mat_skip_gain": mat and centre,
        "centre_attn_gain": mat and centre and cfg["centre_attn_gain"] != 0,
        "attn_block_resid_gain": cfg["trainable_attn_block_gains"],
        "mlp_block_resid_gain": cfg["trainable_mlp_block_gains"],
        "attn_block_skip_gain": cfg["trainable_attn_block_gains"] and not parallel and cfg["attn_block_skip_gain"] != 0,
        "mlp_block_skip_gain": cfg["trainable_mlp_block_gains"] and not parallel and cfg["mlp_block_skip_gain"] != 0,
    }
    return bool(rules.get(name, True))


def _our_key(cfg: dict, sd: dict, key: str) -> str | None:
    """Our parameter for one of theirs (None: dropped, e.g. a parallel block's `ln_2`)."""
    top = {
        "transformer.wte.weight": "model.embed_tokens.weight",
        "transformer.wpe.weight": "model.embed_positions.weight",
    }
    if key in top:
        return top[key]
    if key.startswith("transformer.ln_f."):
        return key.replace("transformer.ln_f.", "model.norm.")
    i, rest = re.fullmatch(r"transformer\.h\.(\d+)\.(.+)", key).groups()
    t, parallel = f"model.layers.{i}.", cfg["parallel_layers"]
    module, _, param = rest.rpartition(".")
    param = "weight" if param == "scale" else param
    if module == "ln_1":
        return f"{t}{'norm' if parallel else 'attn_norm'}.{param}"
    if module == "ln_2":
        return None if parallel else f"{t}mlp_norm.{param}"
    if module in ("attn.v_attn", "attn.c_proj"):
        ours = "attn.qkv.value" if module == "attn.v_attn" else "attn.o_proj"
        reparam = f"transformer.h.{i}.{module}.skip_gain" in sd
        names = {"weight": "delta" if reparam else "weight", "bias": "bias", "resid_gain": "beta", "skip_gain": "alpha"}
        return f"{t}{ours}.{names[param]}"
    simple = {
        "attn.qk_attn": "attn.qkv.proj",
        "attn.q_norm": "attn.q_norm",
        "attn.k_norm": "attn.k_norm",
        "mlp.c_fc": "mlp.fc_in",
        "mlp.c_proj": "mlp.fc_out",
    }
    if module in simple:
        return f"{t}{simple[module]}.{param}"
    gains = {
        "attn_mat_resid_gain": "attn.mixing.beta",
        "attn_mat_skip_gain": "attn.mixing.alpha",
        "centre_attn_gain": "attn.mixing.gamma",
        "attn_block_resid_gain": "attn_gain",
        "mlp_block_resid_gain": "mlp_gain",
        "attn_block_skip_gain": None if parallel else "attn_skip",
        "mlp_block_skip_gain": "skip" if parallel else "mlp_skip",
    }
    gain = gains[rest.removeprefix("attn.")]
    return None if gain is None else f"{t}{gain}.weight"


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_original_trains_what_theirs_trains(variant):
    """Our trainable parameters are exactly the counterparts of those their code trains (every variant here has
    trainability flags our config expresses; README: what differs when it cannot)."""
    cfg = _their_config(variant)
    sd = _their_checkpoint(cfg)
    model = original_to_simplified(cfg, sd)
    ours = {name for name, param in model.named_parameters() if param.requires_grad}
    theirs = {_our_key(cfg, sd, key) for key in sd if _their_trains(cfg, key)}
    assert None not in theirs
    assert ours == theirs, (sorted(ours - theirs), sorted(theirs - ours))


def _trainable_linear_biases(model) -> set[str]:
    """Trainable biases of the linear maps (norm biases aside: they train in their code too)."""
    modules = dict(model.named_modules())
    return {
        name
        for name, param in model.named_parameters()
        if name.endswith(".bias") and param.requires_grad and "norm" not in type(modules[name[:-5]]).__name__.lower()
    }


@pytest.mark.parametrize("variant", ["sas_p", "value_skipinit", "pre_ln_layernorm"])
def test_original_biases_stay_frozen(tmp_path, variant):
    """Their code trains the query/key bias only (value, projection and MLP biases are frozen at zero): ours too
    (`frozen_biases`, kept by `save_pretrained`), with the same logits after conversion and after reloading."""
    cfg = _their_config(variant)
    sd = _their_checkpoint(cfg)
    converted = original_to_simplified(cfg, sd)
    assert converted.config.frozen_biases
    assert _trainable_linear_biases(converted) == {f"model.layers.{i}.attn.qkv.proj.bias" for i in range(L)}
    # a plain W^V is its own linear, not fused with Q and K: its bias is frozen, theirs trains
    assert isinstance(converted.model.layers[1].attn.qkv.value, torch.nn.Linear) == (variant != "sas_p")
    converted.save_pretrained(tmp_path / "ours")
    reloaded = SimplifiedForCausalLM.from_pretrained(tmp_path / "ours").eval()
    assert reloaded.config.frozen_biases
    for model in (converted, reloaded):
        with torch.no_grad():
            assert torch.allclose(model(_ids()).logits, _their_logits(cfg, sd, _ids()), atol=1e-5, rtol=0)


def test_original_trainability_survives_save_and_load(tmp_path):
    cfg = _their_config("sas_p")
    converted = original_to_simplified(cfg, _their_checkpoint(cfg))
    converted.save_pretrained(tmp_path / "ours")
    reloaded = SimplifiedForCausalLM.from_pretrained(tmp_path / "ours")
    assert _trainable_linear_biases(reloaded) == {f"model.layers.{i}.attn.qkv.proj.bias" for i in range(L)}
    trainable = lambda model: {n for n, p in model.named_parameters() if p.requires_grad}  # noqa: E731
    assert trainable(reloaded) == trainable(converted)


@pytest.mark.parametrize(
    "edit,listed",
    [
        (lambda sd: sd.pop("transformer.h.1.mlp.c_fc.bias"), "transformer.h.1.mlp.c_fc.bias"),
        (lambda sd: sd.__setitem__("transformer.h.0.attn.extra", torch.zeros(1)), "transformer.h.0.attn.extra"),
        (lambda sd: sd.pop("transformer.h.0.attn.v_attn.skip_gain"), "transformer.h.0.attn.v_attn.skip_gain"),
    ],
)
def test_original_missing_or_unexpected_keys_are_listed(edit, listed):
    cfg = _their_config("sas")
    sd = _their_checkpoint(cfg)
    edit(sd)
    with pytest.raises(ConversionError, match=listed.replace(".", r"\.")):
        original_to_simplified(cfg, sd)


@pytest.mark.parametrize(
    "change,field",
    [
        (dict(norm_position="post"), "norm_position"),
        (dict(val_init_type="orth", value_skip_gain=1.0, value_resid_gain=1.0), "val_init_type"),
        (dict(scale_attn_by_inverse_layer_idx=True), "scale_attn_by_inverse_layer_idx"),
        (dict(activation_function="swish"), "activation_function"),
        (dict(dot_norm_type="tanh"), "dot_norm_type"),
        (dict(tie_valproj_init="all_blocks"), "tie_valproj_init"),
        (dict(qk_norm_type="layernorm"), "qk_norm_type"),
        (dict(norm_type="batchnorm"), "norm_type"),
        (dict(n_embd=30), "n_embd"),
    ],
)
def test_original_incompatible_config_names_field(change, field):
    cfg = dict(_their_config("pre_ln"), **change)
    with pytest.raises(ConversionError, match=field):
        original_to_simplified(cfg, _their_checkpoint(_their_config("pre_ln")))


def test_original_last_layer_projection_of_another_form_is_refused():
    """`last_layer_proj_resid_gain` that turns the last layer's identity W^P into a reparameterised one: our
    config has one projection form for every layer. The same form with another gain converts (its gains load)."""
    cfg = dict(_their_config("sas"), last_layer_proj_resid_gain=0.5)  # the others: skip 1, resid 0 = identity
    with pytest.raises(ConversionError, match="last_layer_proj_resid_gain='reparam' \\(needs 'identity'\\)"):
        original_to_simplified(cfg, _their_checkpoint(cfg))
    cfg = _their_config("sas_last_layer_proj")
    assert original_to_simplified(cfg, _their_checkpoint(cfg)).config.projection_mode == "reparam"


def test_original_wrong_shape_is_named_before_any_reshape():
    cfg = _their_config("sas")
    sd = _their_checkpoint(cfg)
    sd["transformer.h.1.attn.qk_attn.weight"] = torch.zeros(D, 2 * D - 1)
    expected = f"transformer.h.1.attn.qk_attn.weight has shape ({D}, {2 * D - 1}), expected ({D}, {2 * D})"
    with pytest.raises(ConversionError, match=re.escape(expected)):
        original_to_simplified(cfg, sd)
    sd = _their_checkpoint(cfg)
    sd["transformer.h.0.attn.attn_mat_resid_gain"] = torch.ones(H)
    with pytest.raises(
        ConversionError, match=re.escape(f"attn_mat_resid_gain has shape ({H},), expected (1, {H}, 1, 1)")
    ):
        original_to_simplified(cfg, sd)


def test_original_gamma_frozen_at_zero_is_no_centring():
    """`centre_attn_gain: 0` freezes their γ at 0: ours has no centring term (nothing that could train away from 0);
    a γ frozen at another value is carried."""
    cfg = _their_config("value_skipinit_uncentred")
    sd = _their_checkpoint(cfg)
    config = original_to_simplified(cfg, sd).config
    assert config.attention_type == "shaped" and not config.centre_attention and config.shaped_gains_trainable
    sd = {k: torch.full_like(v, 0.3) if k.endswith("centre_attn_gain") else v for k, v in sd.items()}
    model = original_to_simplified(cfg, sd)
    assert model.config.centre_attention
    with torch.no_grad():
        assert torch.allclose(model(_ids()).logits, _their_logits(cfg, sd, _ids()), atol=1e-5, rtol=0)


def test_original_frozen_gain_with_several_values_is_refused():
    cfg = _their_config("pre_ln")  # frozen block gains: one value per checkpoint
    sd = _their_checkpoint(cfg)
    sd["transformer.h.1.attn_block_resid_gain"] = torch.tensor([0.5])
    with pytest.raises(ConversionError, match="attn_block_resid_gain"):
        original_to_simplified(cfg, sd)


# ----------------------------------------------------------------------------------------------------------------
# CLI
# ----------------------------------------------------------------------------------------------------------------
def _write_theirs(folder, cfg, sd, fmt="safetensors"):
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    if fmt == "safetensors":
        save_file(sd, folder / "model.safetensors")
    else:
        torch.save(dict(sd, **{"lm_head.weight": sd["transformer.wte.weight"]}), folder / "pytorch_model.bin")


@pytest.mark.parametrize("fmt", ["safetensors", "bin"])
def test_cli_original_writes_loadable_folder(tmp_path, fmt):
    cfg = _their_config("sas")
    sd = _their_checkpoint(cfg)
    _write_theirs(tmp_path / "theirs", cfg, sd, fmt)
    assert main(["original", str(tmp_path / "theirs"), str(tmp_path / "ours")]) == 0
    model = SimplifiedForCausalLM.from_pretrained(tmp_path / "ours").eval()
    with torch.no_grad():
        assert torch.allclose(model(_ids()).logits, _their_logits(cfg, sd, _ids()), atol=1e-5, rtol=0)


def test_cli_failure_writes_nothing(tmp_path, capsys):
    cfg = _their_config("sas")
    sd = _their_checkpoint(cfg)
    sd.pop("transformer.h.2.attn.qk_attn.weight")
    _write_theirs(tmp_path / "theirs", cfg, sd)
    assert main(["original", str(tmp_path / "theirs"), str(tmp_path / "ours")]) == 1
    assert "transformer.h.2.attn.qk_attn.weight" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["theirs"]
    existing = tmp_path / "taken"
    existing.mkdir()
    (existing / "keep.txt").write_text("x")
    _write_theirs(tmp_path / "ok", _their_config("sas"), _their_checkpoint(_their_config("sas")))
    assert main(["original", str(tmp_path / "ok"), str(existing)]) == 1
    assert [p.name for p in existing.iterdir()] == ["keep.txt"]


class _NotATensor:
    """A pickled class: `torch.load(weights_only=True)` refuses it."""


def _corrupt(kind: str, folder):
    cfg = _their_config("sas")
    sd = _their_checkpoint(cfg)
    if kind == "wrong_shape":
        sd["transformer.h.1.mlp.c_fc.weight"] = torch.zeros(48, D)  # transposed
        _write_theirs(folder, cfg, sd)
        return f"transformer.h.1.mlp.c_fc.weight has shape (48, {D}), expected ({D}, 48)"
    if kind == "bad_json":
        _write_theirs(folder, cfg, sd)
        (folder / "config.json").write_text(json.dumps(cfg)[:-20])
        return "config.json is not valid JSON"
    if kind == "json_list":
        _write_theirs(folder, cfg, sd)
        (folder / "config.json").write_text("[1, 2]")
        return "must hold a JSON object"
    if kind == "bad_value":  # the config's own ValueError (a dropout must be in [0, 1))
        _write_theirs(folder, dict(cfg, attn_pdrop=2.0), sd)
        return "their config.json gives an invalid config"
    if kind == "refused_pickle":
        _write_theirs(folder, cfg, sd, fmt="bin")
        torch.save(dict(sd, extra=_NotATensor()), folder / "pytorch_model.bin")
        return "torch.load(weights_only=True)"
    if kind == "not_a_torch_file":
        _write_theirs(folder, cfg, sd, fmt="bin")
        (folder / "pytorch_model.bin").write_bytes(b"not a checkpoint")
        return "torch.load(weights_only=True)"
    if kind == "bad_safetensors":
        _write_theirs(folder, cfg, sd)
        (folder / "model.safetensors").write_bytes(b"\x00" * 16)
        return "cannot be read as safetensors"
    raise AssertionError(kind)


@pytest.mark.parametrize(
    "kind",
    ["wrong_shape", "bad_json", "json_list", "bad_value", "refused_pickle", "not_a_torch_file", "bad_safetensors"],
)
def test_cli_bad_input_is_one_error_line(tmp_path, capsys, kind):
    """Every failure: exit status 1, one `error:` line naming the problem, no traceback, nothing at OUT."""
    expected = _corrupt(kind, tmp_path / "theirs")
    capsys.readouterr()
    assert main(["original", str(tmp_path / "theirs"), str(tmp_path / "ours")]) == 1
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("simplified-convert original: error: "), captured.err
    assert expected in lines[0] and "Traceback" not in captured.err + captured.out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["theirs"]


def test_cli_gpt2_round_trip_and_refusal(tmp_path, capsys):
    g = GPT2Config(n_layer=2, n_embd=D, n_head=H, vocab_size=V, n_positions=32, bos_token_id=0, eos_token_id=0)
    ref = perturb_(GPT2LMHeadModel(g)).eval()
    ref.save_pretrained(tmp_path / "gpt2")
    assert main(["gpt2-to-simplified", str(tmp_path / "gpt2"), str(tmp_path / "ours")]) == 0
    assert main(["simplified-to-gpt2", str(tmp_path / "ours"), str(tmp_path / "back")]) == 0
    _assert_same_state(ref.state_dict(), GPT2LMHeadModel.from_pretrained(tmp_path / "back").state_dict())
    SimplifiedForCausalLM(tiny_config("sas")).save_pretrained(tmp_path / "sas")
    assert main(["simplified-to-gpt2", str(tmp_path / "sas"), str(tmp_path / "no")]) == 1
    assert "value_mode" in capsys.readouterr().err and not (tmp_path / "no").exists()


def test_cli_runs_as_a_program(tmp_path):
    """The `simplified-convert` entry point's module, run in a fresh interpreter."""
    import subprocess
    import sys

    cfg = _their_config("sas_p_no_norms")
    sd = _their_checkpoint(cfg)
    _write_theirs(tmp_path / "theirs", cfg, sd)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "modeling_simplified.conversion.cli",
            "original",
            str(tmp_path / "theirs"),
            str(tmp_path / "ours"),
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    model = SimplifiedForCausalLM.from_pretrained(tmp_path / "ours").eval()
    with torch.no_grad():
        assert torch.allclose(model(_ids()).logits, _their_logits(cfg, sd, _ids()), atol=1e-5, rtol=0)


def test_cli_bert_and_llama(tmp_path, capsys):
    from modeling_simplified import SimplifiedForMaskedLM, SimplifiedModel

    bert = perturb_(
        BertForMaskedLM(
            BertConfig(
                num_hidden_layers=2,
                hidden_size=D,
                num_attention_heads=H,
                intermediate_size=48,
                vocab_size=V,
                max_position_embeddings=32,
            )
        )
    ).eval()
    bert.save_pretrained(tmp_path / "bert")
    assert main(["bert-to-simplified", str(tmp_path / "bert"), str(tmp_path / "ours-mlm")]) == 0
    inputs = _bert_inputs()
    with torch.no_grad():
        ours = SimplifiedForMaskedLM.from_pretrained(tmp_path / "ours-mlm").eval()
        assert torch.allclose(ours(**inputs).logits, bert(**inputs).logits, atol=1e-5, rtol=0)
    encoder = perturb_(BertModel(bert.config)).eval()
    encoder.save_pretrained(tmp_path / "encoder")
    capsys.readouterr()
    assert main(["bert-to-simplified", str(tmp_path / "encoder"), str(tmp_path / "refused")]) == 1
    err = capsys.readouterr().err
    assert "pooler.dense.bias, pooler.dense.weight" in err and "pass --drop-pooler" in err
    assert not (tmp_path / "refused").exists()
    assert main(["bert-to-simplified", "--drop-pooler", str(tmp_path / "encoder"), str(tmp_path / "ours-enc")]) == 0
    with torch.no_grad():
        ours = SimplifiedModel.from_pretrained(tmp_path / "ours-enc").eval()
        expected = encoder(**inputs).last_hidden_state
        assert torch.allclose(ours(**inputs).last_hidden_state, expected, atol=1e-5, rtol=0)
    llama = perturb_(
        LlamaForCausalLM(
            LlamaConfig(
                num_hidden_layers=2,
                hidden_size=D,
                num_attention_heads=H,
                num_key_value_heads=H,
                intermediate_size=48,
                vocab_size=V,
            )
        )
    ).eval()
    llama.save_pretrained(tmp_path / "llama")
    assert main(["llama-to-simplified", str(tmp_path / "llama"), str(tmp_path / "ours-llama")]) == 0
    assert main(["simplified-to-llama", str(tmp_path / "ours-llama"), str(tmp_path / "llama-back")]) == 0
    _assert_same_state(llama.state_dict(), LlamaForCausalLM.from_pretrained(tmp_path / "llama-back").state_dict())


# ----------------------------------------------------------------------------------------------------------------
# Exact or refused, field by field
# ----------------------------------------------------------------------------------------------------------------
#: Every SimplifiedConfig field, with values that change it (and what a valid config then needs alongside).
FIELD_FLIPS = {
    "block_type": [{"block_type": "normformer"}, {"block_type": "parallel"}],
    "vocab_size": [{"vocab_size": 80}],
    "hidden_size": [{"hidden_size": 48}],
    "num_hidden_layers": [{"num_hidden_layers": 3}],
    "num_attention_heads": [{"num_attention_heads": 8, "num_key_value_heads": 8}],
    "num_key_value_heads": [{"num_key_value_heads": 2}],
    "intermediate_size": [{"intermediate_size": 40}],
    "hidden_act": [{"hidden_act": "relu"}, {"hidden_act": "gelu"}, {"hidden_act": "geglu"}],
    "leaky_relu_slope": [{"leaky_relu_slope": 0.2}],
    "position_embedding_type": [{"position_embedding_type": "sinusoidal"}],
    "max_position_embeddings": [{"max_position_embeddings": 40}],
    "rope_theta": [{"rope_theta": 500.0}],
    "parallel_block": [{"parallel_block": True, "attn_skip_gain": 0.0}],
    "norm_position": [{"norm_position": "post"}],
    "norm_type": [{"norm_type": "rmsnorm"}, {"norm_type": "layernorm"}],
    "norm_eps": [{"norm_eps": 1e-3}],
    "norm_bias": [{"norm_bias": False}],
    "embedding_norm": [{"embedding_norm": "layernorm"}],
    "final_norm": [{"final_norm": "none"}],
    "first_layer_norm": [{"first_layer_norm": "rmsnorm"}, {"first_layer_norm": "layernorm"}],
    "rmsnorm_eps_position": [{"rmsnorm_eps_position": "outside"}],
    "qk_norm": [{"qk_norm": "rmsnorm"}],
    "type_vocab_size": [{"type_vocab_size": 2}],
    "scale_embedding": [{"scale_embedding": True}],
    "attn_skip_gain": [{"attn_skip_gain": 0.5}],
    "mlp_skip_gain": [{"mlp_skip_gain": 0.5}],
    "beta_sa_init": [{"beta_sa_init": 0.5}],
    "beta_ff_init": [{"beta_ff_init": 0.5}],
    "block_gains_trainable": [{"block_gains_trainable": True}],
    "skip_gains_trainable": [{"skip_gains_trainable": True}],
    "attention_type": [{"attention_type": "shaped"}],
    "shaped_alpha_init": [{"shaped_alpha_init": 0.5}],
    "shaped_beta_init": [{"shaped_beta_init": 0.5}],
    "shaped_gamma_init": [{"shaped_gamma_init": 0.5}],
    "shaped_gains_per_head": [{"shaped_gains_per_head": False}],
    "shaped_gains_trainable": [{"shaped_gains_trainable": False}],
    "centre_attention": [{"centre_attention": False}],
    "value_mode": [{"value_mode": "identity"}, {"value_mode": "reparam"}],
    "projection_mode": [{"projection_mode": "identity"}, {"projection_mode": "reparam"}],
    "first_layer_value_mode": [{"first_layer_value_mode": "reparam"}],
    "value_projection_init": [{"value_projection_init": "orthogonal"}],
    "reparam_init": [{"reparam_init": "orthogonal"}],
    "reparam_tie": [
        {
            "reparam_tie": "all_blocks",
            "reparam_init": "orthogonal",
            "value_mode": "reparam",
            "projection_mode": "reparam",
        }
    ],
    "reparam_alpha_init": [{"reparam_alpha_init": 0.5}],
    "reparam_beta_init": [{"reparam_beta_init": 0.5}],
    "reparam_gains_trainable": [{"reparam_gains_trainable": False}],
    "query_init_std": [{"query_init_std": 0.0}],
    "head_scale": [{"head_scale": "before_proj"}, {"head_scale": "after_proj"}],
    "attn_branch_norm": [{"attn_branch_norm": True}],
    "mlp_act_norm": [{"mlp_act_norm": True}],
    "residual_scale": [{"residual_scale": True}],
    "attention_bias": [{"attention_bias": True}, {"attention_bias": False}],
    "mlp_bias": [{"mlp_bias": True}, {"mlp_bias": False}],
    "frozen_biases": [{"frozen_biases": True, "attention_bias": True}],
    "tie_word_embeddings": [{"tie_word_embeddings": False}],
    "initializer_range": [{"initializer_range": 0.05}],
    "init_scheme": [{"init_scheme": "gpt2"}, {"init_scheme": "normal"}],
    "attention_dropout": [{"attention_dropout": 0.1}],
    "hidden_dropout": [{"hidden_dropout": 0.1}],
    "embedding_dropout": [{"embedding_dropout": 0.1}],
    "classifier_dropout": [{"classifier_dropout": 0.1}],
    "pad_vocab_size_multiple": [{"pad_vocab_size_multiple": 64}],
    "is_causal": [{"is_causal": False}],
    "use_cache": [{"use_cache": False}],
    "pad_token_id": [{"pad_token_id": 3}],
    "bos_token_id": [{"bos_token_id": 1}],
    "eos_token_id": [{"eos_token_id": 2}, {"eos_token_id": [2, 5]}],
}
NATIVE_BASES = {
    "GPT-2": (
        dict(norm_type="layernorm", attention_bias=True, mlp_bias=True, hidden_act="gelu_new"),
        simplified_to_gpt2,
    ),
    "Llama": (dict(hidden_act="swiglu", position_embedding_type="rotary"), simplified_to_llama),
}


def test_field_flips_cover_every_config_field():
    """A new config field must be added to FIELD_FLIPS: the converters check it only if this test flips it."""
    import dataclasses

    from modeling_simplified import SimplifiedConfig

    fields = {f.name for f in dataclasses.fields(SimplifiedConfig) if f.name in SimplifiedConfig.__annotations__}
    assert set(FIELD_FLIPS) == fields


@pytest.mark.parametrize("target", NATIVE_BASES)
@pytest.mark.parametrize("field", FIELD_FLIPS)
def test_every_field_converts_exactly_or_is_refused_by_name(target, field):
    """Ours -> GPT-2 / Llama with one field changed from a convertible model: the logits agree within 1e-5, or the
    ConversionError names that field (perturbed weights and gains, so no change hides behind an init value)."""
    base, convert = NATIVE_BASES[target]
    for flip in FIELD_FLIPS[field]:
        config = tiny_config(**{"block_type": "pre_ln", **base, **flip})
        ours = perturb_(SimplifiedForCausalLM(config)).eval()
        try:
            native = convert(ours)
        except ConversionError as error:
            assert f"{field}=" in str(error), (flip, str(error))
            continue
        ids = _ids(vocab=min(V, config.vocab_size))
        with torch.no_grad():
            expected = ours(ids).logits[..., : config.vocab_size]
            assert torch.allclose(native(ids).logits, expected, atol=1e-5, rtol=0), flip


@pytest.mark.parametrize("convert", [simplified_to_gpt2, simplified_to_llama])
def test_scale_embedding_is_refused(convert):
    """The drift the preset-derived check fixes: `scale_embedding` was missing from a hand-written list."""
    base = NATIVE_BASES["GPT-2" if convert is simplified_to_gpt2 else "Llama"][0]
    with pytest.raises(ConversionError, match="scale_embedding=True"):
        convert(SimplifiedForCausalLM(tiny_config("pre_ln", scale_embedding=True, **base)))
