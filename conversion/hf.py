"""GPT-2 <-> `pre_ln`, Llama <-> `pre_ln`, BERT -> `post_ln`: exact weight maps between native and our classes.

GPT-2's Conv1D stores `[in, out]` (our `nn.Linear` `[out, in]`); its fused `c_attn` is `[Q | K | V]` like our
`FusedQKV`. Llama's gate and up projections are the two halves of our SwiGLU input projection (gate first).
"""

import dataclasses

import torch
from transformers import (
    BertForMaskedLM,
    BertModel,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
)

from modeling_simplified import SimplifiedConfig, SimplifiedForCausalLM, SimplifiedForMaskedLM, SimplifiedModel

from .common import ConversionError, Source, fill, refuse_incompatible

GPT2_ACTIVATIONS = {"gelu_new": "gelu_new", "gelu_pytorch_tanh": "gelu_new", "gelu": "gelu", "relu": "relu"}
BERT_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_new", "relu": "relu"}


def _t(w: torch.Tensor | None) -> torch.Tensor | None:
    """Conv1D `[in, out]` <-> `nn.Linear` `[out, in]` (a missing key stays None: `Source.finish` lists it)."""
    return None if w is None else w.t().contiguous()


def _common_ids(config) -> dict:
    return dict(pad_token_id=config.pad_token_id, bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id)


#: Our config fields that set only the initialisation or runtime defaults: no effect on a trained model's function
#: (padded vocabulary rows are dropped by the converters and never predicted).
NO_FORWARD_EFFECT = (
    "initializer_range",
    "init_scheme",
    "query_init_std",
    "value_projection_init",
    "use_cache",
    "classifier_dropout",
    "pad_vocab_size_multiple",
)


def _fields() -> list[str]:
    return [f.name for f in dataclasses.fields(SimplifiedConfig) if f.name in SimplifiedConfig.__annotations__]


def refuse_unless_expressible(c: SimplifiedConfig, target: str, block: dict, carried: dict, restricted: dict):
    """The one check of ours -> `target`: the block the target can express is `SimplifiedConfig(**block)` (its
    expanded preset) with the `carried` fields (our name -> the target's) taken from `c`; every other field of `c`
    that affects the forward pass must equal that block's value, and `restricted` carried fields must take one of
    the values given. A ConversionError names every field that differs."""
    try:
        expressible = SimplifiedConfig(**{name: getattr(c, name) for name in carried}, **block)
    except ValueError as error:
        raise ConversionError(f"cannot convert to {target}: {error}") from None
    checks = {
        name: (getattr(c, name), getattr(expressible, name))
        for name in _fields()
        if name not in carried and name not in NO_FORWARD_EFFECT
    }
    refuse_incompatible(target, {**checks, **{name: (getattr(c, name), ok) for name, ok in restricted.items()}})


def _rows(t: torch.Tensor | None, n: int) -> torch.Tensor | None:
    """The first `n` rows (the real vocabulary of a padded embedding); a missing key stays None."""
    return None if t is None else t[:n]


# ----------------------------------------------------------------------------------------------------------------
# GPT-2
# ----------------------------------------------------------------------------------------------------------------
#: The GPT-2 block: the expanded `pre_ln` preset with these fields.
GPT2_BLOCK = dict(
    block_type="pre_ln",
    position_embedding_type="learned",
    norm_type="layernorm",
    norm_bias=True,
    attention_bias=True,
    mlp_bias=True,
    is_causal=True,
)
#: Our config field -> GPT2Config's (both directions).
GPT2_CONFIG = dict(
    vocab_size="vocab_size",
    hidden_size="n_embd",
    num_hidden_layers="n_layer",
    num_attention_heads="n_head",
    intermediate_size="n_inner",
    hidden_act="activation_function",
    max_position_embeddings="n_positions",
    norm_eps="layer_norm_epsilon",
    initializer_range="initializer_range",
    attention_dropout="attn_pdrop",
    hidden_dropout="resid_pdrop",
    embedding_dropout="embd_pdrop",
    tie_word_embeddings="tie_word_embeddings",
    pad_token_id="pad_token_id",
    bos_token_id="bos_token_id",
    eos_token_id="eos_token_id",
)
#: Our key -> GPT-2's (both directions); per layer, Conv1D weights are transposed.
GPT2_TOP = {
    "model.embed_tokens.weight": "transformer.wte.weight",
    "model.embed_positions.weight": "transformer.wpe.weight",
    "model.norm.weight": "transformer.ln_f.weight",
    "model.norm.bias": "transformer.ln_f.bias",
}
GPT2_LAYER = {"attn_norm": "ln_1", "mlp_norm": "ln_2"}
GPT2_LAYER_CONV1D = {
    "attn.qkv.proj": "attn.c_attn",
    "attn.o_proj": "attn.c_proj",
    "mlp.fc_in": "mlp.c_fc",
    "mlp.fc_out": "mlp.c_proj",
}


def _gpt2_keys(num_layers: int, tied: bool) -> list[tuple[str, str, bool]]:
    """(our key, GPT-2's key, transposed) for every tensor."""
    keys = [(ours, theirs, False) for ours, theirs in GPT2_TOP.items()]
    keys += [] if tied else [("lm_head.weight", "lm_head.weight", False)]
    for i in range(num_layers):
        s, t = f"model.layers.{i}.", f"transformer.h.{i}."
        for p in ("weight", "bias"):
            keys += [(f"{s}{a}.{p}", f"{t}{b}.{p}", False) for a, b in GPT2_LAYER.items()]
            keys += [(f"{s}{a}.{p}", f"{t}{b}.{p}", p == "weight") for a, b in GPT2_LAYER_CONV1D.items()]
    return keys


def gpt2_to_simplified(model: GPT2LMHeadModel) -> SimplifiedForCausalLM:
    """`GPT2LMHeadModel` -> `SimplifiedForCausalLM` (`pre_ln` with LayerNorm, learned positions, biases)."""
    g = model.config
    refuse_incompatible(
        "pre_ln (from GPT-2)",
        {
            "activation_function": (g.activation_function, tuple(GPT2_ACTIVATIONS)),
            "scale_attn_weights": (g.scale_attn_weights, True),
            "scale_attn_by_inverse_layer_idx": (g.scale_attn_by_inverse_layer_idx, False),
            "add_cross_attention": (getattr(g, "add_cross_attention", False), False),
        },
    )
    carried = {ours: getattr(g, theirs) for ours, theirs in GPT2_CONFIG.items()}
    carried.update(intermediate_size=g.n_inner or 4 * g.n_embd, hidden_act=GPT2_ACTIVATIONS[g.activation_function])
    config = SimplifiedConfig(**GPT2_BLOCK, **carried, init_scheme="gpt2")
    src = Source(model.state_dict(), "GPT-2")
    src.take("lm_head.weight") if g.tie_word_embeddings else None  # the tied copy
    out = {
        ours: _t(src.take(theirs)) if t else src.take(theirs)
        for ours, theirs, t in _gpt2_keys(g.n_layer, g.tie_word_embeddings)
    }
    src.finish()
    return fill(SimplifiedForCausalLM(config).to(model.dtype), out, "GPT-2 -> pre_ln").eval()


def simplified_to_gpt2(model: SimplifiedForCausalLM) -> GPT2LMHeadModel:
    """`SimplifiedForCausalLM` -> `GPT2LMHeadModel`, when the config is a GPT-2 block (else: a ConversionError
    naming every incompatible field)."""
    c = model.config
    refuse_unless_expressible(c, "GPT-2", GPT2_BLOCK, GPT2_CONFIG, {"hidden_act": tuple(GPT2_ACTIVATIONS.values())})
    g = GPT2Config(**{theirs: getattr(c, ours) for ours, theirs in GPT2_CONFIG.items()})
    src = Source(model.state_dict(), "pre_ln")
    src.take("lm_head.weight") if c.tie_word_embeddings else None  # the tied copy
    out = {
        theirs: _t(src.take(ours)) if t else src.take(ours)
        for ours, theirs, t in _gpt2_keys(c.num_hidden_layers, c.tie_word_embeddings)
    }
    for key in ("transformer.wte.weight", "lm_head.weight"):
        if key in out:
            out[key] = _rows(out[key], c.vocab_size)
    src.finish()
    return fill(GPT2LMHeadModel(g).to(model.dtype), out, "pre_ln -> GPT-2").eval()


# ----------------------------------------------------------------------------------------------------------------
# Llama
# ----------------------------------------------------------------------------------------------------------------
#: The Llama block: the expanded `pre_ln` preset with these fields.
LLAMA_BLOCK = dict(
    block_type="pre_ln", position_embedding_type="rotary", norm_type="rmsnorm", hidden_act="swiglu", is_causal=True
)
#: Our config field -> LlamaConfig's (both directions; `rope_theta` lives in Llama's `rope_parameters`).
LLAMA_CONFIG = dict(
    vocab_size="vocab_size",
    hidden_size="hidden_size",
    intermediate_size="intermediate_size",
    num_hidden_layers="num_hidden_layers",
    num_attention_heads="num_attention_heads",
    num_key_value_heads="num_key_value_heads",
    max_position_embeddings="max_position_embeddings",
    norm_eps="rms_norm_eps",
    attention_bias="attention_bias",
    mlp_bias="mlp_bias",
    tie_word_embeddings="tie_word_embeddings",
    initializer_range="initializer_range",
    attention_dropout="attention_dropout",
    pad_token_id="pad_token_id",
    bos_token_id="bos_token_id",
    eos_token_id="eos_token_id",
)
LLAMA_TOP = {"model.embed_tokens.weight": "model.embed_tokens.weight", "model.norm.weight": "model.norm.weight"}
LLAMA_LAYER = {"attn_norm": "input_layernorm", "mlp_norm": "post_attention_layernorm"}
#: Our fused matrix -> Llama's parts, stacked along the output rows (queries | keys | values; gate | up).
LLAMA_LAYER_ATTN = {
    "attn.qkv.proj": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
    "attn.o_proj": ("self_attn.o_proj",),
}
LLAMA_LAYER_MLP = {"mlp.fc_in": ("mlp.gate_proj", "mlp.up_proj"), "mlp.fc_out": ("mlp.down_proj",)}


def _llama_keys(c) -> list[tuple[str, tuple[str, ...], list[tuple[int, ...]] | None]]:
    """(our key, Llama's keys, their shapes when they are parts of ours) for every tensor; `c` has our field names."""
    d, w = c.hidden_size, c.intermediate_size
    kv = c.num_key_value_heads * (d // c.num_attention_heads)
    rows = {"attn.qkv.proj": (d, kv, kv), "mlp.fc_in": (w, w)}
    keys = [(ours, (theirs,), None) for ours, theirs in LLAMA_TOP.items()]
    keys += [] if c.tie_word_embeddings else [("lm_head.weight", ("lm_head.weight",), None)]
    for i in range(c.num_hidden_layers):
        s = f"model.layers.{i}."
        keys += [(f"{s}{a}.weight", (f"{s}{b}.weight",), None) for a, b in LLAMA_LAYER.items()]
        for names, bias in ((LLAMA_LAYER_ATTN, c.attention_bias), (LLAMA_LAYER_MLP, c.mlp_bias)):
            for p in ("weight", "bias") if bias else ("weight",):
                for a, parts in names.items():
                    shapes = [(n, d) if p == "weight" else (n,) for n in rows[a]] if a in rows else None
                    keys.append((f"{s}{a}.{p}", tuple(f"{s}{b}.{p}" for b in parts), shapes))
    return keys


def _rope_theta(config: LlamaConfig) -> float:
    params = getattr(config, "rope_parameters", None) or {}
    return float(params.get("rope_theta", getattr(config, "rope_theta", 10000.0)))


def llama_to_simplified(model: LlamaForCausalLM) -> SimplifiedForCausalLM:
    """`LlamaForCausalLM` -> `SimplifiedForCausalLM` (`pre_ln` with RMSNorm, SwiGLU, rotary; grouped-query attention
    as `num_key_value_heads`)."""
    l = model.config  # noqa: E741
    params = getattr(l, "rope_parameters", None) or {}
    refuse_incompatible(
        "pre_ln (from Llama)",
        {
            "head_dim": (
                getattr(l, "head_dim", None) or l.hidden_size // l.num_attention_heads,
                l.hidden_size // l.num_attention_heads,
            ),
            "hidden_act": (l.hidden_act, "silu"),
            "rope_parameters.rope_type": (params.get("rope_type", "default"), "default"),
        },
    )
    carried = {ours: getattr(l, theirs) for ours, theirs in LLAMA_CONFIG.items()}
    config = SimplifiedConfig(**LLAMA_BLOCK, **carried, rope_theta=_rope_theta(l))
    src = Source(model.state_dict(), "Llama")
    src.take("lm_head.weight") if l.tie_word_embeddings else None  # the tied copy
    out = {}
    for ours, theirs, shapes in _llama_keys(config):
        out[ours] = src.cat(list(theirs), shapes) if shapes else src.take(theirs[0])
    src.finish()
    return fill(SimplifiedForCausalLM(config).to(model.dtype), out, "Llama -> pre_ln").eval()


def simplified_to_llama(model: SimplifiedForCausalLM) -> LlamaForCausalLM:
    """`SimplifiedForCausalLM` -> `LlamaForCausalLM`, when the config is a Llama block (else: a ConversionError
    naming every incompatible field)."""
    c = model.config
    refuse_unless_expressible(c, "Llama", LLAMA_BLOCK, {**LLAMA_CONFIG, "rope_theta": None}, {})
    l = LlamaConfig(  # noqa: E741
        **{theirs: getattr(c, ours) for ours, theirs in LLAMA_CONFIG.items()},
        hidden_act="silu",
        rope_parameters={"rope_type": "default", "rope_theta": c.rope_theta},
    )
    src = Source(model.state_dict(), "pre_ln")
    src.take("lm_head.weight") if c.tie_word_embeddings else None  # the tied copy
    out = {}
    for ours, theirs, shapes in _llama_keys(c):
        tensor = src.take(ours)
        parts = [tensor] if shapes is None or tensor is None else tensor.split([s[0] for s in shapes])
        out.update({key: None if part is None else part.contiguous() for key, part in zip(theirs, parts)})
    for key in ("model.embed_tokens.weight", "lm_head.weight"):
        if key in out:
            out[key] = _rows(out[key], c.vocab_size)
    src.finish()
    return fill(LlamaForCausalLM(l).to(model.dtype), out, "pre_ln -> Llama").eval()


# ----------------------------------------------------------------------------------------------------------------
# BERT
# ----------------------------------------------------------------------------------------------------------------
def bert_to_simplified(model: BertForMaskedLM | BertModel, drop_pooler: bool = False):
    """`BertForMaskedLM` -> `SimplifiedForMaskedLM`, `BertModel` -> `SimplifiedModel` (`post_ln` encoder with
    token types and an embedding LayerNorm). `BertModel`'s pooler has no counterpart: it is refused (the error names
    its keys and `--drop-pooler`) unless `drop_pooler`."""
    b = model.config
    masked_lm = isinstance(model, BertForMaskedLM)
    refuse_incompatible(
        "post_ln (from BERT)",
        {
            "hidden_act": (b.hidden_act, "gelu" if masked_lm else tuple(BERT_ACTIVATIONS)),
            "position_embedding_type": (getattr(b, "position_embedding_type", "absolute"), "absolute"),
            "is_decoder": (b.is_decoder, False),
            "add_cross_attention": (getattr(b, "add_cross_attention", False), False),
        },
    )
    config = SimplifiedConfig(
        block_type="post_ln",
        vocab_size=b.vocab_size,
        hidden_size=b.hidden_size,
        num_hidden_layers=b.num_hidden_layers,
        num_attention_heads=b.num_attention_heads,
        intermediate_size=b.intermediate_size,
        hidden_act=BERT_ACTIVATIONS[b.hidden_act],
        position_embedding_type="learned",
        max_position_embeddings=b.max_position_embeddings,
        type_vocab_size=b.type_vocab_size,
        norm_type="layernorm",
        norm_eps=b.layer_norm_eps,
        norm_bias=True,
        embedding_norm="layernorm",
        final_norm="none",
        attention_bias=True,
        mlp_bias=True,
        tie_word_embeddings=getattr(b, "tie_word_embeddings", True),
        initializer_range=b.initializer_range,
        attention_dropout=b.attention_probs_dropout_prob,
        hidden_dropout=b.hidden_dropout_prob,
        embedding_dropout=b.hidden_dropout_prob,
        is_causal=False,
        **_common_ids(b),
    )
    state = model.state_dict()
    pooler = sorted(k for k in state if k.startswith("pooler."))
    if pooler and not drop_pooler:
        raise ConversionError(
            f"BertModel's pooler ({', '.join(pooler)}) has no counterpart in SimplifiedModel; pass --drop-pooler "
            "(Python: drop_pooler=True) to convert the encoder without it."
        )
    state = {k: v for k, v in state.items() if k not in pooler}
    src = Source(state, "BERT")
    s0 = "bert." if masked_lm else ""
    t0 = "model." if masked_lm else ""
    out = {
        f"{t0}embed_tokens.weight": src.take(f"{s0}embeddings.word_embeddings.weight"),
        f"{t0}embed_positions.weight": src.take(f"{s0}embeddings.position_embeddings.weight"),
        f"{t0}embed_token_types.weight": src.take(f"{s0}embeddings.token_type_embeddings.weight"),
    }
    for p in ("weight", "bias"):
        out[f"{t0}embed_norm.{p}"] = src.take(f"{s0}embeddings.LayerNorm.{p}")
    d = b.hidden_size
    for i in range(b.num_hidden_layers):
        s, t = f"{s0}encoder.layer.{i}.", f"{t0}layers.{i}."
        for p in ("weight", "bias"):
            out[f"{t}attn.qkv.proj.{p}"] = src.cat(
                [f"{s}attention.self.{n}.{p}" for n in ("query", "key", "value")], (d, d) if p == "weight" else (d,)
            )
            for a, c in (
                ("attention.output.dense", "attn.o_proj"),
                ("attention.output.LayerNorm", "post_attn_norm"),
                ("intermediate.dense", "mlp.fc_in"),
                ("output.dense", "mlp.fc_out"),
                ("output.LayerNorm", "post_mlp_norm"),
            ):
                out[f"{t}{c}.{p}"] = src.take(f"{s}{a}.{p}")
    if masked_lm:
        for p in ("weight", "bias"):
            out[f"mlm_head.dense.{p}"] = src.take(f"cls.predictions.transform.dense.{p}")
            out[f"mlm_head.norm.{p}"] = src.take(f"cls.predictions.transform.LayerNorm.{p}")
        decoder = src.take("cls.predictions.decoder.weight")
        if not config.tie_word_embeddings:
            out["mlm_head.decoder.weight"] = decoder
        # BERT's forward adds `decoder.bias`; transformers ties it to `predictions.bias` only with tied embeddings
        bias = src.take("cls.predictions.bias")
        if src.has("cls.predictions.decoder.bias"):
            bias = src.take("cls.predictions.decoder.bias")
        out["mlm_head.decoder.bias"] = bias
    src.finish()
    target = SimplifiedForMaskedLM(config) if masked_lm else SimplifiedModel(config)
    return fill(target.to(model.dtype), out, "BERT -> post_ln").eval()
