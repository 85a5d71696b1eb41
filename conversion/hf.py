"""GPT-2 <-> `pre_ln`, Llama <-> `pre_ln`, BERT -> `post_ln`: exact weight maps between native and our classes.

GPT-2's Conv1D stores `[in, out]` (our `nn.Linear` `[out, in]`); its fused `c_attn` is `[Q | K | V]` like our
`FusedQKV`. Llama's gate and up projections are the two halves of our SwiGLU input projection (gate first).
"""

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


def _plain_pre_ln_checks(c: SimplifiedConfig) -> dict:
    """What a plain sequential Pre-LN block with softmax attention and full matrices needs."""
    return {
        "parallel_block": (c.parallel_block, False),
        "norm_position": (c.norm_position, "pre"),
        "embedding_norm": (c.embedding_norm, "none"),
        "attn_skip_gain": (c.attn_skip_gain, 1.0),
        "mlp_skip_gain": (c.mlp_skip_gain, 1.0),
        "skip_gains_trainable": (c.skip_gains_trainable, False),
        "beta_sa_init": (c.beta_sa_init, 1.0),
        "beta_ff_init": (c.beta_ff_init, 1.0),
        "block_gains_trainable": (c.block_gains_trainable, False),
        "attention_type": (c.attention_type, "softmax"),
        "value_mode": (c.value_mode, "linear"),
        "first_layer_value_mode": (c.first_layer_value_mode, "linear"),
        "projection_mode": (c.projection_mode, "linear"),
        "head_scale": (c.head_scale, "none"),
        "attn_branch_norm": (c.attn_branch_norm, False),
        "mlp_act_norm": (c.mlp_act_norm, False),
        "residual_scale": (c.residual_scale, False),
        "qk_norm": (c.qk_norm, "none"),
        "type_vocab_size": (c.type_vocab_size, 0),
        "is_causal": (c.is_causal, (True, None)),
        "frozen_biases": (c.frozen_biases, False),
    }


# ----------------------------------------------------------------------------------------------------------------
# GPT-2
# ----------------------------------------------------------------------------------------------------------------
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
    config = SimplifiedConfig(
        block_type="pre_ln",
        vocab_size=g.vocab_size,
        hidden_size=g.n_embd,
        num_hidden_layers=g.n_layer,
        num_attention_heads=g.n_head,
        intermediate_size=g.n_inner or 4 * g.n_embd,
        hidden_act=GPT2_ACTIVATIONS[g.activation_function],
        position_embedding_type="learned",
        max_position_embeddings=g.n_positions,
        norm_type="layernorm",
        norm_eps=g.layer_norm_epsilon,
        norm_bias=True,
        final_norm="layernorm",
        attention_bias=True,
        mlp_bias=True,
        tie_word_embeddings=g.tie_word_embeddings,
        initializer_range=g.initializer_range,
        init_scheme="gpt2",
        attention_dropout=g.attn_pdrop,
        hidden_dropout=g.resid_pdrop,
        embedding_dropout=g.embd_pdrop,
        is_causal=True,
        **_common_ids(g),
    )
    src = Source(model.state_dict(), "GPT-2")
    out = {
        "model.embed_tokens.weight": src.take("transformer.wte.weight"),
        "model.embed_positions.weight": src.take("transformer.wpe.weight"),
        "model.norm.weight": src.take("transformer.ln_f.weight"),
        "model.norm.bias": src.take("transformer.ln_f.bias"),
    }
    head = src.take("lm_head.weight")
    if not g.tie_word_embeddings:
        out["lm_head.weight"] = head
    for i in range(g.n_layer):
        s, t = f"transformer.h.{i}.", f"model.layers.{i}."
        for a, b in (("ln_1", "attn_norm"), ("ln_2", "mlp_norm")):
            for p in ("weight", "bias"):
                out[f"{t}{b}.{p}"] = src.take(f"{s}{a}.{p}")
        for a, b in (
            ("attn.c_attn", "attn.qkv.proj"),
            ("attn.c_proj", "attn.o_proj"),
            ("mlp.c_fc", "mlp.fc_in"),
            ("mlp.c_proj", "mlp.fc_out"),
        ):
            out[f"{t}{b}.weight"] = _t(src.take(f"{s}{a}.weight"))
            out[f"{t}{b}.bias"] = src.take(f"{s}{a}.bias")
    src.finish()
    return fill(SimplifiedForCausalLM(config).to(model.dtype), out, "GPT-2 -> pre_ln").eval()


def simplified_to_gpt2(model: SimplifiedForCausalLM) -> GPT2LMHeadModel:
    """`SimplifiedForCausalLM` -> `GPT2LMHeadModel`, when the config is a GPT-2 block (else: a ConversionError
    naming every incompatible field)."""
    c = model.config
    refuse_incompatible(
        "GPT-2",
        dict(
            _plain_pre_ln_checks(c),
            norm_type=(c.norm_type, "layernorm"),
            first_layer_norm=(c.first_layer_norm, "layernorm"),
            final_norm=(c.final_norm, "layernorm"),
            norm_bias=(c.norm_bias, True),
            position_embedding_type=(c.position_embedding_type, "learned"),
            hidden_act=(c.hidden_act, tuple(GPT2_ACTIVATIONS.values())),
            attention_bias=(c.attention_bias, True),
            mlp_bias=(c.mlp_bias, True),
        ),
    )
    g = GPT2Config(
        vocab_size=c.vocab_size,
        n_positions=c.max_position_embeddings,
        n_embd=c.hidden_size,
        n_layer=c.num_hidden_layers,
        n_head=c.num_attention_heads,
        n_inner=c.intermediate_size,
        activation_function=c.hidden_act,
        layer_norm_epsilon=c.norm_eps,
        initializer_range=c.initializer_range,
        resid_pdrop=c.hidden_dropout,
        embd_pdrop=c.embedding_dropout,
        attn_pdrop=c.attention_dropout,
        tie_word_embeddings=c.tie_word_embeddings,
        **_common_ids(c),
    )
    src = Source(model.state_dict(), "pre_ln")
    v = c.vocab_size
    out = {
        "transformer.wte.weight": src.take("model.embed_tokens.weight")[:v],
        "transformer.wpe.weight": src.take("model.embed_positions.weight"),
        "transformer.ln_f.weight": src.take("model.norm.weight"),
        "transformer.ln_f.bias": src.take("model.norm.bias"),
    }
    head = src.take("lm_head.weight")
    if not c.tie_word_embeddings:
        out["lm_head.weight"] = head[:v]
    for i in range(c.num_hidden_layers):
        s, t = f"model.layers.{i}.", f"transformer.h.{i}."
        for a, b in (("ln_1", "attn_norm"), ("ln_2", "mlp_norm")):
            for p in ("weight", "bias"):
                out[f"{t}{a}.{p}"] = src.take(f"{s}{b}.{p}")
        for a, b in (
            ("attn.c_attn", "attn.qkv.proj"),
            ("attn.c_proj", "attn.o_proj"),
            ("mlp.c_fc", "mlp.fc_in"),
            ("mlp.c_proj", "mlp.fc_out"),
        ):
            out[f"{t}{a}.weight"] = _t(src.take(f"{s}{b}.weight"))
            out[f"{t}{a}.bias"] = src.take(f"{s}{b}.bias")
    src.finish()
    return fill(GPT2LMHeadModel(g).to(model.dtype), out, "pre_ln -> GPT-2").eval()


# ----------------------------------------------------------------------------------------------------------------
# Llama
# ----------------------------------------------------------------------------------------------------------------
def _rope_theta(config: LlamaConfig) -> float:
    params = getattr(config, "rope_parameters", None) or {}
    return float(params.get("rope_theta", getattr(config, "rope_theta", 10000.0)))


def llama_to_simplified(model: LlamaForCausalLM) -> SimplifiedForCausalLM:
    """`LlamaForCausalLM` -> `SimplifiedForCausalLM` (`pre_ln` with RMSNorm, SwiGLU, rotary; no GQA)."""
    l = model.config  # noqa: E741
    params = getattr(l, "rope_parameters", None) or {}
    refuse_incompatible(
        "pre_ln (from Llama)",
        {
            "num_key_value_heads": (l.num_key_value_heads, l.num_attention_heads),
            "head_dim": (
                getattr(l, "head_dim", None) or l.hidden_size // l.num_attention_heads,
                l.hidden_size // l.num_attention_heads,
            ),
            "hidden_act": (l.hidden_act, "silu"),
            "rope_parameters.rope_type": (params.get("rope_type", "default"), "default"),
        },
    )
    config = SimplifiedConfig(
        block_type="pre_ln",
        vocab_size=l.vocab_size,
        hidden_size=l.hidden_size,
        num_hidden_layers=l.num_hidden_layers,
        num_attention_heads=l.num_attention_heads,
        intermediate_size=l.intermediate_size,
        hidden_act="swiglu",
        position_embedding_type="rotary",
        max_position_embeddings=l.max_position_embeddings,
        rope_theta=_rope_theta(l),
        norm_type="rmsnorm",
        norm_eps=l.rms_norm_eps,
        final_norm="rmsnorm",
        attention_bias=l.attention_bias,
        mlp_bias=l.mlp_bias,
        tie_word_embeddings=l.tie_word_embeddings,
        initializer_range=l.initializer_range,
        attention_dropout=l.attention_dropout,
        is_causal=True,
        **_common_ids(l),
    )
    src = Source(model.state_dict(), "Llama")
    out = {
        "model.embed_tokens.weight": src.take("model.embed_tokens.weight"),
        "model.norm.weight": src.take("model.norm.weight"),
    }
    head = src.take("lm_head.weight")
    if not l.tie_word_embeddings:
        out["lm_head.weight"] = head
    params = ("weight", "bias") if l.attention_bias else ("weight",)
    mlp_params = ("weight", "bias") if l.mlp_bias else ("weight",)
    d, w = l.hidden_size, l.intermediate_size
    for i in range(l.num_hidden_layers):
        s, t = f"model.layers.{i}.", f"model.layers.{i}."
        out[f"{t}attn_norm.weight"] = src.take(f"{s}input_layernorm.weight")
        out[f"{t}mlp_norm.weight"] = src.take(f"{s}post_attention_layernorm.weight")
        for p in params:
            shape = (d, d) if p == "weight" else (d,)
            out[f"{t}attn.qkv.proj.{p}"] = src.cat([f"{s}self_attn.{n}_proj.{p}" for n in "qkv"], shape)
            out[f"{t}attn.o_proj.{p}"] = src.take(f"{s}self_attn.o_proj.{p}")
        for p in mlp_params:
            shape = (w, d) if p == "weight" else (w,)
            out[f"{t}mlp.fc_in.{p}"] = src.cat([f"{s}mlp.{n}_proj.{p}" for n in ("gate", "up")], shape)
            out[f"{t}mlp.fc_out.{p}"] = src.take(f"{s}mlp.down_proj.{p}")
    src.finish()
    return fill(SimplifiedForCausalLM(config).to(model.dtype), out, "Llama -> pre_ln").eval()


def simplified_to_llama(model: SimplifiedForCausalLM) -> LlamaForCausalLM:
    """`SimplifiedForCausalLM` -> `LlamaForCausalLM`, when the config is a Llama block (else: a ConversionError
    naming every incompatible field)."""
    c = model.config
    refuse_incompatible(
        "Llama",
        dict(
            _plain_pre_ln_checks(c),
            norm_type=(c.norm_type, "rmsnorm"),
            first_layer_norm=(c.first_layer_norm, "rmsnorm"),
            final_norm=(c.final_norm, "rmsnorm"),
            rmsnorm_eps_position=(c.rmsnorm_eps_position, "inside"),
            position_embedding_type=(c.position_embedding_type, "rotary"),
            hidden_act=(c.hidden_act, "swiglu"),
        ),
    )
    l = LlamaConfig(  # noqa: E741
        vocab_size=c.vocab_size,
        hidden_size=c.hidden_size,
        intermediate_size=c.intermediate_size,
        num_hidden_layers=c.num_hidden_layers,
        num_attention_heads=c.num_attention_heads,
        num_key_value_heads=c.num_attention_heads,
        hidden_act="silu",
        max_position_embeddings=c.max_position_embeddings,
        rms_norm_eps=c.norm_eps,
        rope_parameters={"rope_type": "default", "rope_theta": c.rope_theta},
        attention_bias=c.attention_bias,
        mlp_bias=c.mlp_bias,
        tie_word_embeddings=c.tie_word_embeddings,
        initializer_range=c.initializer_range,
        attention_dropout=c.attention_dropout,
        **_common_ids(c),
    )
    src = Source(model.state_dict(), "pre_ln")
    v, d, w = c.vocab_size, c.hidden_size, c.intermediate_size
    out = {
        "model.embed_tokens.weight": src.take("model.embed_tokens.weight")[:v],
        "model.norm.weight": src.take("model.norm.weight"),
    }
    head = src.take("lm_head.weight")
    if not c.tie_word_embeddings:
        out["lm_head.weight"] = head[:v]
    params = ("weight", "bias") if c.attention_bias else ("weight",)
    mlp_params = ("weight", "bias") if c.mlp_bias else ("weight",)
    for i in range(c.num_hidden_layers):
        s = t = f"model.layers.{i}."
        out[f"{t}input_layernorm.weight"] = src.take(f"{s}attn_norm.weight")
        out[f"{t}post_attention_layernorm.weight"] = src.take(f"{s}mlp_norm.weight")
        for p in params:
            for n, part in zip("qkv", src.take(f"{s}attn.qkv.proj.{p}").split(d)):
                out[f"{t}self_attn.{n}_proj.{p}"] = part.contiguous()
            out[f"{t}self_attn.o_proj.{p}"] = src.take(f"{s}attn.o_proj.{p}")
        for p in mlp_params:
            gate, up = src.take(f"{s}mlp.fc_in.{p}").split(w)
            out[f"{t}mlp.gate_proj.{p}"], out[f"{t}mlp.up_proj.{p}"] = gate.contiguous(), up.contiguous()
            out[f"{t}mlp.down_proj.{p}"] = src.take(f"{s}mlp.fc_out.{p}")
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
