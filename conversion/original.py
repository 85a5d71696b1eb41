"""The authors' checkpoints (`bobby-he/simplified_transformers`, a GPT-2 with `myGPT2Block`s) -> `SimplifiedForCausalLM`.

Their format (every linear Conv1D-style `[in, out]`, `y = x @ W + b`):
  - `attn.qk_attn` `[D, 2D]` = `[W_Q | W_K]` with a trainable bias; `attn.v_attn`, `attn.c_proj`, `mlp.c_fc`,
    `mlp.c_proj` carry a bias too (frozen at zero in training): carried as is, and kept frozen (`frozen_biases`).
  - `v_attn` / `c_proj`: absent (identity), plain, or `W = resid_gain·weight + skip_gain·I` (our eq. 6 `reparam`
    with `W_init = I`, `alpha = skip_gain`, `beta = resid_gain`).
  - attention matrix `β·softmax + α·I − γ·C` with per-head gains when `centre_attn`, else `β·softmax`; a γ that
    their run froze at 0 (`centre_attn_gain: 0`) is our uncentred `α·I + β·A` (eq. 4).
  - block gains `attn/mlp_block_{resid,skip}_gain`; a skip exists only if its config value is non-zero.
  - `norm_type`: `ln`, `rmsnorm` (eps outside the root, parameter `scale`), or `none` (a LayerNorm as layer 0's
    `ln_1` only); `ln_f` is always a LayerNorm; `qk_norm_type rmsnorm` norms each head's q and k.
Their trainability flags map onto ours (one flag per group of ours: a group trains if any of their gains in it that
exist do; README "Conversion" lists where that differs).
"""

import json
import re
from pathlib import Path

import torch
from safetensors.torch import load_file

from modeling_simplified import SimplifiedConfig, SimplifiedForCausalLM
from modeling_simplified.modeling_simplified import ReparamLinear

from .common import ConversionError, Source, check_shape, fill, refuse_incompatible, save_atomically, take_gain

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
    query_init_std=None,
    tie_valproj_init=None,
    scale_attn_weights=True,
    scale_attn_by_inverse_layer_idx=False,
    resid_pdrop=0.0,
    attn_pdrop=0.0,
    embd_pdrop=0.0,
    initializer_range=0.02,
)
#: their init of a plain (not reparameterised) W^V / W^P -> our `value_projection_init` (carried so that the converted
#: config records how their model was initialised; the weights are loaded either way)
LINEAR_INITS = {"normal": "normal", "orth": "orthogonal"}
ACTIVATIONS = {"leaky_relu": "leaky_relu", "relu": "relu", "gelu": "gelu", "gelu_new": "gelu_new"}
NORMS = {"ln": "layernorm", "rmsnorm": "rmsnorm", "none": "none"}


SIZES = ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head")


def _settings(raw: dict) -> dict:
    if not isinstance(raw, dict):
        raise ConversionError(f"their config.json must hold a JSON object, not a {type(raw).__name__}.")
    cfg = dict(DEFAULTS, vocab_size=50257)
    cfg.update(raw)
    bad = [f"{k}={cfg[k]!r}" for k in SIZES if type(cfg[k]) is not int or cfg[k] < 1]
    if cfg["n_inner"] is not None and (type(cfg["n_inner"]) is not int or cfg["n_inner"] < 1):
        bad.append(f"n_inner={cfg['n_inner']!r}")
    if bad:
        raise ConversionError(f"their config.json: {', '.join(bad)} (each needs a positive integer).")
    if cfg["n_embd"] % cfg["n_head"]:
        raise ConversionError(f"their config.json: n_embd={cfg['n_embd']} is not a multiple of n_head={cfg['n_head']}.")
    if cfg["proj_resid_gain"] is None:
        cfg["proj_resid_gain"] = cfg["value_resid_gain"]
    if cfg["proj_init_type"] is None:
        cfg["proj_init_type"] = cfg["val_init_type"]
    if cfg["centre_attn_gain"] is None:
        cfg["centre_attn_gain"] = cfg["attn_mat_resid_gain"]
    return cfg


def _their_shapes(c: dict) -> tuple[dict[str, tuple], dict[str, tuple]]:
    """The shape of every key of their format: top-level keys, and per-layer suffixes of `transformer.h.{i}.`."""
    d, n, v = c["n_embd"], c["n_head"], c["vocab_size"]
    w = c["n_inner"] or 4 * d
    top = {
        "transformer.wte.weight": (v, d),
        "lm_head.weight": (v, d),
        "transformer.wpe.weight": (c["n_positions"], d),
        "transformer.ln_f.weight": (d,),
        "transformer.ln_f.bias": (d,),
    }
    layer = {f"{ln}.{p}": (d,) for ln in ("ln_1", "ln_2") for p in ("weight", "bias", "scale")}
    layer.update({"attn.qk_attn.weight": (d, 2 * d), "attn.qk_attn.bias": (2 * d,)})
    for m in ("v_attn", "c_proj"):
        layer.update({f"attn.{m}.weight": (d, d), f"attn.{m}.bias": (d,)})
        layer.update({f"attn.{m}.resid_gain": (1,), f"attn.{m}.skip_gain": (1,)})
    layer.update({f"attn.{q}_norm.scale": (d // n,) for q in "qk"})
    layer.update({f"attn.{g}": (1, n, 1, 1) for g in ("attn_mat_resid_gain", "attn_mat_skip_gain", "centre_attn_gain")})
    layer.update(
        {"mlp.c_fc.weight": (d, w), "mlp.c_fc.bias": (w,), "mlp.c_proj.weight": (w, d), "mlp.c_proj.bias": (d,)}
    )
    layer.update({f"{b}_block_{k}_gain": (1,) for b in ("attn", "mlp") for k in ("resid", "skip")})
    return top, layer


def _check_shapes(state: dict, c: dict):
    """Every tensor of a known key has the shape its config implies (checked before any reshape or concatenation);
    unknown keys are left for the key check, which lists them."""
    top, layer = _their_shapes(c)
    for key, value in state.items():
        if not isinstance(value, torch.Tensor):
            raise ConversionError(f"authors' checkpoint: {key} is a {type(value).__name__}, not a tensor.")
        match = re.fullmatch(r"transformer\.h\.\d+\.(.+)", key)
        shape = layer.get(match.group(1)) if match else top.get(key)
        if shape is not None:
            check_shape(value, shape, key, "authors'")


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
    if state is not None:
        _check_shapes(state, c)
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
    parallel, their_centre = bool(c["parallel_layers"]), bool(c["centre_attn"])
    attn_gains_trainable = bool(c["trainable_attn_block_gains"])
    mlp_gains_trainable = bool(c["trainable_mlp_block_gains"])
    mat_gains_trainable = bool(c["trainable_attn_mat_gains"])
    frozen = lambda name, trainable: _frozen_value(state, c, name, trainable)  # noqa: E731
    beta = frozen("attn_mat_resid_gain", mat_gains_trainable)
    # their γ trains only when its config value is non-zero; one frozen at 0 removes the centring term exactly
    gamma = frozen("centre_attn_gain", mat_gains_trainable and c["centre_attn_gain"] != 0) if their_centre else 0.0
    centre = their_centre and gamma != 0
    softmax = not their_centre and not mat_gains_trainable and beta == 1
    attn_skip = (
        0.0 if parallel or c["attn_block_skip_gain"] == 0 else frozen("attn_block_skip_gain", attn_gains_trainable)
    )
    mlp_skip = (
        0.0 if c["mlp_block_skip_gain"] == 0 else frozen("mlp_block_skip_gain", mlp_gains_trainable and not parallel)
    )
    # one trainability flag per group of ours: their flags, counting only the gains that exist
    value_reparam = "reparam" in (value_mode, first_value_mode)
    reparam_trainable = (value_reparam and bool(c["trainable_value_gains"])) or (
        proj_mode == "reparam" and bool(c["trainable_proj_gains"])
    )
    skips_trainable = not parallel and (
        (attn_gains_trainable and attn_skip != 0) or (mlp_gains_trainable and mlp_skip != 0)
    )
    beta_sa = frozen("attn_block_resid_gain", attn_gains_trainable)
    beta_ff = frozen("mlp_block_resid_gain", mlp_gains_trainable)
    norm = NORMS[c["norm_type"]]
    plain_init = c["val_init_type"] if value_mode == "linear" else c["proj_init_type"]
    try:  # the config's own validation, or a value of the wrong type
        return SimplifiedConfig(
            block_type="parallel" if parallel else "pre_ln",
            vocab_size=c["vocab_size"],
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
            attn_skip_gain=attn_skip,
            mlp_skip_gain=mlp_skip,
            skip_gains_trainable=skips_trainable,
            beta_sa_init=beta_sa,
            beta_ff_init=beta_ff,
            block_gains_trainable=attn_gains_trainable or mlp_gains_trainable,
            attention_type="softmax" if softmax else "shaped",
            shaped_alpha_init=float(c["attn_mat_skip_gain"]) if their_centre else 0.0,
            shaped_beta_init=beta,
            shaped_gamma_init=float(gamma),
            shaped_gains_per_head=True,
            shaped_gains_trainable=mat_gains_trainable,
            centre_attention=centre,
            value_mode=value_mode,
            first_layer_value_mode=first_value_mode,
            projection_mode=proj_mode,
            reparam_init="identity",
            reparam_gains_trainable=reparam_trainable,
            value_projection_init=LINEAR_INITS.get(plain_init, "normal"),
            query_init_std=None if c["query_init_std"] is None else float(c["query_init_std"]),
            head_scale="none",
            attn_branch_norm=False,
            mlp_act_norm=False,
            residual_scale=False,
            attention_bias=True,
            mlp_bias=True,
            frozen_biases=True,
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
    except (ValueError, TypeError) as error:
        raise ConversionError(f"their config.json gives an invalid config: {error}") from error


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
            out[f"{t}.{ours}"] = None if value is None else value.reshape(1)
        out[f"{t}.bias"] = src.take(f"{s}.bias")
    elif isinstance(module, torch.nn.Linear):
        weight = src.take(f"{s}.weight")
        out[f"{t}.weight"] = _t(weight)
        out[f"{t}.bias"] = src.take(f"{s}.bias")


def original_to_simplified(raw_config: dict, state_dict: dict[str, torch.Tensor]) -> SimplifiedForCausalLM:
    """Their `config.json` dict and state dict -> `SimplifiedForCausalLM` with the same logits (and a KV cache)."""
    config = original_config(raw_config, state_dict)
    their_centre = bool(_settings(raw_config)["centre_attn"])
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
        # queries and keys; values apart (their frozen value bias keeps even a plain W^V out of the fused matmul)
        attn = layer.attn
        out[f"{t}attn.qkv.proj.weight"] = _t(src.take(f"{s}attn.qk_attn.weight"))
        out[f"{t}attn.qkv.proj.bias"] = src.take(f"{s}attn.qk_attn.bias")
        _matrix(src, attn.qkv.value, f"{s}attn.v_attn", f"{t}attn.qkv.value", out)
        _matrix(src, attn.o_proj, f"{s}attn.c_proj", f"{t}attn.o_proj", out)
        if config.qk_norm == "rmsnorm":
            out[f"{t}attn.q_norm.weight"] = src.take(f"{s}attn.q_norm.scale")
            out[f"{t}attn.k_norm.weight"] = src.take(f"{s}attn.k_norm.scale")
        # attention-matrix gains [1, H, 1, 1]
        heads = lambda x: None if x is None else x.reshape(-1)  # noqa: E731
        beta, alpha, gamma = (
            src.take(f"{s}attn.{n}") for n in ("attn_mat_resid_gain", "attn_mat_skip_gain", "centre_attn_gain")
        )
        if config.attention_type == "shaped":  # their α and γ act only with centre_attn (γ: when not frozen at 0)
            out[f"{t}attn.mixing.beta.weight"] = heads(beta)
            out[f"{t}attn.mixing.alpha.weight"] = (
                heads(alpha) if their_centre else torch.zeros(config.num_attention_heads, dtype=wte.dtype)
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
    """Their folder: `config.json` and `model.safetensors` or `pytorch_model.bin` (loaded with `weights_only`).
    Anything unreadable is a ConversionError naming the file."""
    src = Path(src)
    config_file = src / "config.json"
    if not config_file.is_file():
        raise ConversionError(f"SRC={str(src)!r} has no config.json.")
    try:
        raw = json.loads(config_file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ConversionError(f"{config_file} is not valid JSON: {error}.") from error
    if not isinstance(raw, dict):
        raise ConversionError(f"{config_file} must hold a JSON object, not a {type(raw).__name__}.")
    if (src / "model.safetensors").is_file():
        weights = src / "model.safetensors"
        try:
            state = load_file(weights)
        except Exception as error:  # safetensors raises its own error type for a corrupt file
            raise ConversionError(f"{weights} cannot be read as safetensors: {_first_line(error)}") from error
    elif (src / "pytorch_model.bin").is_file():
        weights = src / "pytorch_model.bin"
        try:
            state = torch.load(weights, map_location="cpu", weights_only=True)
        except Exception as error:  # UnpicklingError (a refused global), RuntimeError (not a torch file), ...
            raise ConversionError(
                f"{weights} cannot be loaded with torch.load(weights_only=True): {_first_line(error)}"
            ) from error
    else:
        raise ConversionError(f"SRC={str(src)!r} has neither model.safetensors nor pytorch_model.bin.")
    if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
        raise ConversionError(f"{weights} holds a {type(state).__name__}, not a state dict (names -> tensors).")
    return raw, state


def _first_line(error: Exception) -> str:
    """The informative line of a (possibly many-line) load error: torch's `WeightsUnpickler error: ...` line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    for line in lines:
        if "WeightsUnpickler error" in line:
            return line
    return lines[0] if lines else type(error).__name__


def convert_original(src: str | Path, out: str | Path) -> Path:
    """`simplified-convert original SRC OUT`: their folder -> a `save_pretrained` folder (nothing at OUT on failure)."""
    raw, state = load_original(src)
    return save_atomically(original_to_simplified(raw, state), out)
