"""The authors' checkpoints (`bobby-he/simplified_transformers`, a GPT-2 with `myGPT2Block`s) -> `SimplifiedForCausalLM`.

Their format (every linear Conv1D-style `[in, out]`, `y = x @ W + b`):
  - `attn.qk_attn` `[D, 2D]` = `[W_Q | W_K]` with a trainable bias; `attn.v_attn`, `attn.c_proj`, `mlp.c_fc`,
    `mlp.c_proj` carry a bias too (frozen at zero in training, carried as is here).
  - `v_attn` / `c_proj`: absent (identity), plain, or `W = resid_gain·weight + skip_gain·I` (our eq. 6 `reparam`
    with `W_init = I`, `alpha = skip_gain`, `beta = resid_gain`).
  - attention matrix `β·softmax + α·I − γ·C` with per-head gains when `centre_attn`, else `β·softmax`.
  - block gains `attn/mlp_block_{resid,skip}_gain`; a skip exists only if its config value is non-zero.
  - `norm_type`: `ln`, `rmsnorm` (eps outside the root, parameter `scale`), or `none` (a LayerNorm as layer 0's
    `ln_1` only); `ln_f` is always a LayerNorm; `qk_norm_type rmsnorm` norms each head's q and k.
"""

import json
from pathlib import Path

import torch

from modeling_simplified import SimplifiedConfig, SimplifiedForCausalLM
from modeling_simplified.modeling_simplified import ReparamLinear

from .common import ConversionError, Source, fill, refuse_incompatible, save_atomically, take_gain

#: Their config keys with the defaults of their `default.yaml` / GPT2Config.
DEFAULTS = dict(
    n_positions=1024,
    n_embd=768,
    n_layer=12,
    n_head=12,
    n_inner=None,
    layer_norm_epsilon=1e-5,
    activation_function="leaky_relu",
    lrelu_neg_slope=0.0,
    norm_type="rmsnorm",
    norm_position="pre",
    qk_norm_type="none",
    dot_norm_type="none",
    parallel_layers=False,
    attn_block_resid_gain=1.0,
    attn_block_skip_gain=1.0,
    mlp_block_resid_gain=1.0,
    mlp_block_skip_gain=1.0,
    attn_mat_resid_gain=1.0,
    attn_mat_skip_gain=0.0,
    centre_attn=False,
    centre_attn_gain=None,
    value_resid_gain=1.0,
    value_skip_gain=None,
    first_layer_value_resid_gain=None,
    proj_resid_gain=None,
    proj_skip_gain=None,
    last_layer_proj_resid_gain=None,
    trainable_attn_block_gains=False,
    trainable_mlp_block_gains=False,
    trainable_attn_mat_gains=False,
    trainable_value_gains=False,
    trainable_proj_gains=False,
    val_init_type="normal",
    proj_init_type=None,
    tie_valproj_init=None,
    scale_attn_weights=True,
    scale_attn_by_inverse_layer_idx=False,
    resid_pdrop=0.0,
    attn_pdrop=0.0,
    embd_pdrop=0.0,
    initializer_range=0.02,
)
ACTIVATIONS = {"leaky_relu": "leaky_relu", "relu": "relu", "gelu": "gelu", "gelu_new": "gelu_new"}
NORMS = {"ln": "layernorm", "rmsnorm": "rmsnorm", "none": "none"}


def _settings(raw: dict) -> dict:
    cfg = dict(DEFAULTS)
    cfg.update(raw)
    if cfg["proj_resid_gain"] is None:
        cfg["proj_resid_gain"] = cfg["value_resid_gain"]
    if cfg["proj_init_type"] is None:
        cfg["proj_init_type"] = cfg["val_init_type"]
    if cfg["centre_attn_gain"] is None:
        cfg["centre_attn_gain"] = cfg["attn_mat_resid_gain"]
    return cfg


def _matrix_mode(skip_gain, resid_gain, init_type: str, field: str) -> str:
    """Their `MyConv1D` choice: plain (`skip_gain` None), absent (`W = I`), or reparameterised with `W_init = I`."""
    if skip_gain is None:
        return "linear"
    if init_type != "id":
        raise ConversionError(
            f"cannot convert: {field}={init_type!r} with a reparameterised matrix; its random W_init is not saved "
            "in the checkpoint (allowed: 'id')."
        )
    return "identity" if skip_gain == 1 and resid_gain == 0 else "reparam"


def _frozen_value(state: dict | None, c: dict, name: str, trainable: bool) -> float:
    """A gain their run did not train holds one value in every layer (its config value in a fresh run): read it
    from the checkpoint so that it is carried exactly; trained gains are loaded per layer anyway."""
    default = float(c[name])
    if trainable or state is None:
        return default
    values = {tuple(v.flatten().tolist()) for k, v in state.items() if k.endswith(f".{name}")}
    flat = {x for v in values for x in v}
    if not flat:
        return default
    if len(flat) > 1:
        raise ConversionError(
            f"{name}: a frozen gain (not trainable in this config) holds several values {sorted(flat)}; "
            "only one value per checkpoint can be expressed."
        )
    return flat.pop()


def original_config(raw: dict, state: dict | None = None) -> SimplifiedConfig:
    """Our config for their `config.json` dict (and state dict, whose frozen gains it reads); a ConversionError
    names every setting we cannot express."""
    c = _settings(raw)
    refuse_incompatible(
        "simplified (from the authors' format)",
        {
            "norm_position": (c["norm_position"], "pre"),
            "norm_type": (c["norm_type"], tuple(NORMS)),
            "qk_norm_type": (c["qk_norm_type"], ("none", "rmsnorm")),
            "dot_norm_type": (c["dot_norm_type"], "none"),
            "activation_function": (c["activation_function"], tuple(ACTIVATIONS)),
            "scale_attn_weights": (c["scale_attn_weights"], True),
            "scale_attn_by_inverse_layer_idx": (c["scale_attn_by_inverse_layer_idx"], False),
            "tie_valproj_init": (c["tie_valproj_init"], None),
        },
    )
    value_mode = _matrix_mode(c["value_skip_gain"], c["value_resid_gain"], c["val_init_type"], "val_init_type")
    first_gain = c["first_layer_value_resid_gain"]
    first_value_mode = (
        value_mode
        if first_gain is None
        else _matrix_mode(c["value_skip_gain"], first_gain, c["val_init_type"], "val_init_type")
    )
    proj_mode = _matrix_mode(c["proj_skip_gain"], c["proj_resid_gain"], c["proj_init_type"], "proj_init_type")
    if c["last_layer_proj_resid_gain"] is not None:
        last = _matrix_mode(c["proj_skip_gain"], c["last_layer_proj_resid_gain"], c["proj_init_type"], "proj_init_type")
        refuse_incompatible("simplified (from the authors' format)", {"last_layer_proj_resid_gain": (last, proj_mode)})
    parallel, centre = bool(c["parallel_layers"]), bool(c["centre_attn"])
    attn_gains_trainable = bool(c["trainable_attn_block_gains"])
    mlp_gains_trainable = bool(c["trainable_mlp_block_gains"])
    frozen = lambda name, trainable: _frozen_value(state, c, name, trainable)  # noqa: E731
    beta = frozen("attn_mat_resid_gain", bool(c["trainable_attn_mat_gains"]))
    softmax = not centre and not c["trainable_attn_mat_gains"] and beta == 1
    norm = NORMS[c["norm_type"]]
    return SimplifiedConfig(
        block_type="parallel" if parallel else "pre_ln",
        vocab_size=c.get("vocab_size", 50257),
        hidden_size=c["n_embd"],
        num_hidden_layers=c["n_layer"],
        num_attention_heads=c["n_head"],
        intermediate_size=c["n_inner"] or 4 * c["n_embd"],
        hidden_act=ACTIVATIONS[c["activation_function"]],
        leaky_relu_slope=float(c["lrelu_neg_slope"]),
        position_embedding_type="learned",
        max_position_embeddings=c["n_positions"],
        parallel_block=parallel,
        norm_position="pre",
        norm_type=norm,
        first_layer_norm="layernorm" if norm == "none" else norm,
        rmsnorm_eps_position="outside",
        qk_norm=c["qk_norm_type"],
        norm_eps=float(c["layer_norm_epsilon"]),
        norm_bias=True,
        embedding_norm="none",
        final_norm="layernorm",
        attn_skip_gain=0.0
        if parallel or c["attn_block_skip_gain"] == 0
        else frozen("attn_block_skip_gain", attn_gains_trainable),
        mlp_skip_gain=0.0
        if c["mlp_block_skip_gain"] == 0
        else frozen("mlp_block_skip_gain", mlp_gains_trainable and not parallel),
        skip_gains_trainable=not parallel and (attn_gains_trainable or mlp_gains_trainable),
        beta_sa_init=frozen("attn_block_resid_gain", attn_gains_trainable),
        beta_ff_init=frozen("mlp_block_resid_gain", mlp_gains_trainable),
        block_gains_trainable=attn_gains_trainable or mlp_gains_trainable,
        attention_type="softmax" if softmax else "shaped",
        shaped_alpha_init=float(c["attn_mat_skip_gain"]) if centre else 0.0,
        shaped_beta_init=beta,
        shaped_gamma_init=float(c["centre_attn_gain"]),
        shaped_gains_per_head=True,
        shaped_gains_trainable=bool(c["trainable_attn_mat_gains"]),
        centre_attention=centre,
        value_mode=value_mode,
        first_layer_value_mode=first_value_mode,
        projection_mode=proj_mode,
        reparam_init="identity",
        reparam_gains_trainable=bool(c["trainable_value_gains"] or c["trainable_proj_gains"]),
        head_scale="none",
        attn_branch_norm=False,
        mlp_act_norm=False,
        residual_scale=False,
        attention_bias=True,
        mlp_bias=True,
        tie_word_embeddings=True,
        initializer_range=float(c["initializer_range"]),
        attention_dropout=float(c["attn_pdrop"]),
        hidden_dropout=float(c["resid_pdrop"]),
        embedding_dropout=float(c["embd_pdrop"]),
        is_causal=True,
        bos_token_id=c.get("bos_token_id"),
        eos_token_id=c.get("eos_token_id"),
        pad_token_id=c.get("pad_token_id"),
    )


def _t(w: torch.Tensor | None) -> torch.Tensor | None:
    """Conv1D `[in, out]` -> `nn.Linear` `[out, in]` (a missing key stays None: `Source` lists it)."""
    return None if w is None else w.t().contiguous()


def _norm(src: Source, kind: str, s: str, t: str, out: dict):
    if kind == "layernorm":
        out[f"{t}.weight"], out[f"{t}.bias"] = src.take(f"{s}.weight"), src.take(f"{s}.bias")
    elif kind == "rmsnorm":
        out[f"{t}.weight"] = src.take(f"{s}.scale")


def _matrix(src: Source, module, s: str, t: str, out: dict):
    """A `v_attn` / `c_proj` into our identity, linear or eq. 6 `ReparamLinear`."""
    if isinstance(module, ReparamLinear):
        weight = src.take(f"{s}.weight")
        out[f"{t}.delta"] = _t(weight)
        out[f"{t}.weight_init"] = torch.eye(module.delta.shape[0], dtype=module.delta.dtype)
        for ours, theirs in (("alpha", "skip_gain"), ("beta", "resid_gain")):
            value = src.take(f"{s}.{theirs}")
            out[f"{t}.{ours}"] = None if value is None else value.reshape(())
        out[f"{t}.bias"] = src.take(f"{s}.bias")
    elif isinstance(module, torch.nn.Linear):
        weight = src.take(f"{s}.weight")
        out[f"{t}.weight"] = _t(weight)
        out[f"{t}.bias"] = src.take(f"{s}.bias")


def original_to_simplified(raw_config: dict, state_dict: dict[str, torch.Tensor]) -> SimplifiedForCausalLM:
    """Their `config.json` dict and state dict -> `SimplifiedForCausalLM` with the same logits (and a KV cache)."""
    config = original_config(raw_config, state_dict)
    state = dict(state_dict)
    wte = state.get("transformer.wte.weight")
    if wte is None:
        raise ConversionError("authors' checkpoint: missing keys ['transformer.wte.weight'].")
    model = SimplifiedForCausalLM(config).to(wte.dtype)
    head = state.pop("lm_head.weight", None)
    if head is not None and not torch.equal(head, wte):
        raise ConversionError(
            "authors' checkpoint: lm_head.weight differs from transformer.wte.weight (their head is tied)."
        )
    src = Source(state, "authors'")
    out = {
        "model.embed_tokens.weight": src.take("transformer.wte.weight"),
        "model.embed_positions.weight": src.take("transformer.wpe.weight"),
    }
    _norm(src, "layernorm", "transformer.ln_f", "model.norm", out)
    parallel = config.parallel_block
    for i, layer in enumerate(model.model.layers):
        s, t = f"transformer.h.{i}.", f"model.layers.{i}."
        first = config.first_layer_norm if i == 0 else config.norm_type
        _norm(src, first, f"{s}ln_1", f"{t}norm" if parallel else f"{t}attn_norm", out)
        if parallel:  # their parallel block never applies ln_2: its parameters are dropped
            for key in (f"{s}ln_2.weight", f"{s}ln_2.bias", f"{s}ln_2.scale"):
                if src.has(key):
                    src.take(key)
        else:
            _norm(src, config.norm_type, f"{s}ln_2", f"{t}mlp_norm", out)
        # queries and keys (+ values when they are a plain matrix: our fused projection)
        qk_w, qk_b = src.take(f"{s}attn.qk_attn.weight"), src.take(f"{s}attn.qk_attn.bias")
        attn = layer.attn
        if hasattr(attn.qkv, "value"):
            out[f"{t}attn.qkv.proj.weight"], out[f"{t}attn.qkv.proj.bias"] = _t(qk_w), qk_b
            _matrix(src, attn.qkv.value, f"{s}attn.v_attn", f"{t}attn.qkv.value", out)
        else:
            v_w, v_b = src.take(f"{s}attn.v_attn.weight"), src.take(f"{s}attn.v_attn.bias")
            if None not in (qk_w, qk_b, v_w, v_b):
                out[f"{t}attn.qkv.proj.weight"] = torch.cat([qk_w, v_w], dim=1).t().contiguous()
                out[f"{t}attn.qkv.proj.bias"] = torch.cat([qk_b, v_b])
        _matrix(src, attn.o_proj, f"{s}attn.c_proj", f"{t}attn.o_proj", out)
        if config.qk_norm == "rmsnorm":
            out[f"{t}attn.q_norm.weight"] = src.take(f"{s}attn.q_norm.scale")
            out[f"{t}attn.k_norm.weight"] = src.take(f"{s}attn.k_norm.scale")
        # attention-matrix gains [1, H, 1, 1]
        heads = lambda x: None if x is None else x.reshape(-1)  # noqa: E731
        beta, alpha, gamma = (
            src.take(f"{s}attn.{n}") for n in ("attn_mat_resid_gain", "attn_mat_skip_gain", "centre_attn_gain")
        )
        if config.attention_type == "shaped":
            out[f"{t}attn.mixing.beta.weight"] = heads(beta)
            out[f"{t}attn.mixing.alpha.weight"] = (
                heads(alpha) if config.centre_attention else torch.zeros(config.num_attention_heads, dtype=wte.dtype)
            )
            if config.centre_attention:
                out[f"{t}attn.mixing.gamma.weight"] = heads(gamma)
        elif beta is not None and not torch.all(beta == 1):
            raise ConversionError(
                f"{s}attn.attn_mat_resid_gain={beta.flatten().tolist()} but its config fixes it at 1."
            )
        # MLP
        for a, b in (("c_fc", "fc_in"), ("c_proj", "fc_out")):
            out[f"{t}mlp.{b}.weight"] = _t(src.take(f"{s}mlp.{a}.weight"))
            out[f"{t}mlp.{b}.bias"] = src.take(f"{s}mlp.{a}.bias")
        # block gains: a skip whose config value is 0 is absent (its parameter is ignored)
        take_gain(src, f"{s}attn_block_resid_gain", layer.attn_gain, out, f"{t}attn_gain.weight")
        take_gain(src, f"{s}mlp_block_resid_gain", layer.mlp_gain, out, f"{t}mlp_gain.weight")
        if parallel:
            src.take(f"{s}attn_block_skip_gain")
            take_gain(src, f"{s}mlp_block_skip_gain", layer.skip, out, f"{t}skip.weight")
        else:
            take_gain(src, f"{s}attn_block_skip_gain", layer.attn_skip, out, f"{t}attn_skip.weight")
            take_gain(src, f"{s}mlp_block_skip_gain", layer.mlp_skip, out, f"{t}mlp_skip.weight")
    src.finish()
    return fill(model, out, "authors' -> simplified").eval()


def load_original(src: str | Path) -> tuple[dict, dict[str, torch.Tensor]]:
    """Their folder: `config.json` and `model.safetensors` or `pytorch_model.bin`."""
    src = Path(src)
    if not (src / "config.json").is_file():
        raise ConversionError(f"SRC={str(src)!r} has no config.json.")
    raw = json.loads((src / "config.json").read_text())
    if (src / "model.safetensors").is_file():
        from safetensors.torch import load_file

        state = load_file(src / "model.safetensors")
    elif (src / "pytorch_model.bin").is_file():
        state = torch.load(src / "pytorch_model.bin", map_location="cpu", weights_only=True)
    else:
        raise ConversionError(f"SRC={str(src)!r} has neither model.safetensors nor pytorch_model.bin.")
    return raw, state


def convert_original(src: str | Path, out: str | Path) -> Path:
    """`simplified-convert original SRC OUT`: their folder -> a `save_pretrained` folder (nothing at OUT on failure)."""
    raw, state = load_original(src)
    return save_atomically(original_to_simplified(raw, state), out)
