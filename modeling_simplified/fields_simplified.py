"""The vocabulary of the family's config fields: every block type and the fields it implies (paper §4, App. D;
NormFormer §2), the allowed values of each choice field, the one type check and the misspelling rule. Plain Python,
no torch or transformers: `configuration_simplified` builds on it, and the console commands read presets with it in
milliseconds (`simplified-train --help`, `--list-presets`, `--show`).
"""

import dataclasses
import difflib
import types
import typing

NORM_TYPES = ("rmsnorm", "layernorm", "none")
ACTIVATIONS = ("relu", "gelu", "gelu_new", "leaky_relu", "swiglu", "geglu")
GATED_ACTIVATIONS = ("swiglu", "geglu")
POSITION_TYPES = ("sinusoidal", "learned", "rotary")
ATTENTION_TYPES = ("softmax", "shaped")
MATRIX_MODES = ("identity", "linear", "reparam")
LINEAR_INITS = ("normal", "orthogonal")
REPARAM_INITS = ("identity", "orthogonal", "normal")
REPARAM_TIES = ("none", "all_blocks", "last_block")
HEAD_SCALES = ("none", "before_proj", "after_proj")
INIT_SCHEMES = ("normal", "gpt2")
NORM_POSITIONS = ("pre", "post")
EPS_POSITIONS = ("inside", "outside")
QK_NORMS = ("none", "rmsnorm")


_PRE_LN = dict(
    parallel_block=False,
    norm_position="pre",
    norm_type="rmsnorm",
    embedding_norm="none",
    final_norm=None,  # None: same as norm_type
    first_layer_norm=None,  # None: same as norm_type
    attn_skip_gain=1.0,
    mlp_skip_gain=1.0,
    block_gains_trainable=False,
    beta_ff_init=1.0,
    attention_type="softmax",
    shaped_alpha_init=1.0,
    shaped_beta_init=1.0,
    shaped_gamma_init=1.0,
    centre_attention=True,
    value_mode="linear",
    projection_mode="linear",
    first_layer_value_mode=None,  # None: same as value_mode
    value_projection_init="normal",
    query_init_std=None,  # None: initializer_range
    head_scale="none",
    attn_branch_norm=False,
    mlp_act_norm=False,
    residual_scale=False,
    init_scheme="normal",
    scale_embedding=False,
)
_SHAPED = dict(
    _PRE_LN,
    attn_skip_gain=0.0,
    block_gains_trainable=True,
    beta_ff_init=0.1,
    attention_type="shaped",
    query_init_std=0.0,
)
_SAS = dict(_SHAPED, value_mode="identity", projection_mode="identity", first_layer_value_mode="reparam")


@dataclasses.dataclass(frozen=True)
class BlockType:
    """What a block type is, stated once: the fields it implies, one line on it, and the paper that defines it.
    The model card, the reproduction, the benchmark groups and the docs tables read or are tested against it."""

    preset: dict
    summary: str
    source: str


#: Every block type (paper §4, App. D; NormFormer §2). Each preset key is a field that defaults to the preset.
BLOCKS: dict[str, BlockType] = {
    "pre_ln": BlockType(
        _PRE_LN,
        "the standard Pre-LN block (the baseline of He & Hofmann, Fig. 1 left)",
        "He & Hofmann 2024, §3, Fig. 1 (left)",
    ),
    "post_ln": BlockType(
        dict(_PRE_LN, norm_position="post", norm_type="layernorm", final_norm="none"),
        "the original Post-LN block (norm after each residual add, as in BERT)",
        "Vaswani et al. 2017; He & Hofmann 2024, §3",
    ),
    "parallel": BlockType(
        dict(_PRE_LN, parallel_block=True, attn_skip_gain=0.0),
        "the parallel block of GPT-J / PaLM: attention and MLP read the same normalised input",
        "Wang & Komatsuzaki 2021; He & Hofmann 2024, Fig. 1 (bottom right)",
    ),
    "value_skipinit": BlockType(
        dict(_SHAPED, shaped_beta_init=0.0, centre_attention=False, value_projection_init="orthogonal"),
        "Value-SkipInit (He et al. 2023, eq. 4): no attention skip, attention `α·I + β·A`",
        "He et al. 2023, eq. 4; He & Hofmann 2024, §4.1",
    ),
    "sas": BlockType(
        _SAS,
        "SAS, the simplified attention sub-block (He & Hofmann §4.2): shaped attention replaces the "
        "attention skip, and the value and projection matrices are removed",
        "He & Hofmann 2024, §4.2, Fig. 9",
    ),
    "sas_p": BlockType(
        dict(_SAS, parallel_block=True, mlp_skip_gain=0.0),
        "SAS-P, the parallel simplified block (He & Hofmann §4.3): SAS (shaped attention, no value and "
        "projection matrices) in a parallel block without any skip",
        "He & Hofmann 2024, §4.3, Fig. 10",
    ),
    "simplest": BlockType(
        dict(
            _SAS,
            parallel_block=True,
            mlp_skip_gain=0.0,
            norm_type="none",
            embedding_norm="layernorm",
            final_norm="layernorm",
        ),
        "the simplest block of He & Hofmann (§4.4): SAS-P (shaped attention in a parallel block without "
        "skips) without normalisation layers",
        "He & Hofmann 2024, §4.4, Fig. 1 (top right)",
    ),
    "normformer": BlockType(
        dict(
            _PRE_LN,
            norm_type="layernorm",
            head_scale="before_proj",
            attn_branch_norm=True,
            mlp_act_norm=True,
            init_scheme="gpt2",  # NormFormer's GPT-3 baseline (Brown et al. 2020) scales residual outputs by 1/sqrt(2L)
            # fairseq's transformer_lm multiplies token embeddings by sqrt(d): the unit-scale output of the
            # post-attention LN then meets a residual stream of the same order
            scale_embedding=True,
        ),
        "NormFormer (Shleifer et al. 2021): Pre-LN plus a LayerNorm after attention, head-wise "
        "scaling of the attention output and a LayerNorm after the MLP activation",
        "Shleifer et al. 2021, §2",
    ),
}
BLOCK_TYPES = tuple(BLOCKS)
#: The fields each block type implies (`BLOCKS[name].preset`).
BLOCK_PRESETS: dict[str, dict] = {name: block.preset for name, block in BLOCKS.items()}

_CHOICES = {
    "block_type": BLOCK_TYPES,
    "norm_type": NORM_TYPES,
    "embedding_norm": NORM_TYPES,
    "final_norm": NORM_TYPES,
    "first_layer_norm": NORM_TYPES,
    "rmsnorm_eps_position": EPS_POSITIONS,
    "qk_norm": QK_NORMS,
    "norm_position": NORM_POSITIONS,
    "hidden_act": ACTIVATIONS,
    "position_embedding_type": POSITION_TYPES,
    "attention_type": ATTENTION_TYPES,
    "value_mode": MATRIX_MODES,
    "projection_mode": MATRIX_MODES,
    "first_layer_value_mode": MATRIX_MODES,
    "value_projection_init": LINEAR_INITS,
    "reparam_init": REPARAM_INITS,
    "reparam_tie": REPARAM_TIES,
    "head_scale": HEAD_SCALES,
    "init_scheme": INIT_SCHEMES,
}


def _type_ok(value, annotation) -> bool:
    """Strict check of a value against a simple field annotation (`int`, `float`, `bool`, `str`, `X | None`)."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return any(_type_ok(value, arg) for arg in typing.get_args(annotation))
    if annotation is type(None):
        return value is None
    if typing.get_origin(annotation) is list:
        (item,) = typing.get_args(annotation)
        return isinstance(value, list) and all(_type_ok(v, item) for v in value)
    if annotation is dict or typing.get_origin(annotation) is dict:
        return isinstance(value, dict)
    if annotation is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if annotation in (bool, str):
        return isinstance(value, annotation)
    return True


def check_type(value, annotation, where: str):
    """The one type check of the family (config fields and training presets): `value` against a simple annotation
    (`int`, `float`, `bool`, `str`, `list[X]`, `X | None`); bools are not numbers, ints are accepted for floats (and
    returned as floats). Raises one `ValueError` naming `where` and the allowed types."""
    if not _type_ok(value, annotation):
        raise ValueError(f"{where} must be of type {_type_name(annotation)}, got {value!r} ({type(value).__name__}).")
    if annotation is float or (float in typing.get_args(annotation) and int not in typing.get_args(annotation)):
        return float(value) if isinstance(value, int) else value
    return value


#: How close (difflib's ratio) a key that is not a field must be to one to count as its misspelling: a letter or two
#: off in a name of 8+ characters (`hiden_size`, `blok_type`); tokenizer and other models' keys (`cls_token_id`,
#: `hidden_dropout_prob`, `vocab_file`, `rms_norm_eps`) stay below it and pass as extra attributes.
MISSPELLING_CUTOFF = 0.9


def nearest_names(word: str, names, n: int = 1, cutoff: float = MISSPELLING_CUTOFF) -> list[str]:
    """The names closest to `word` (difflib's ratio ≥ `cutoff`), best first: what a misspelt key was meant to be.
    The config's own check and the CLI's suggestions (`simplified-train --set`, `--preset`) both use it."""
    return difflib.get_close_matches(word, list(names), n=n, cutoff=cutoff) if isinstance(word, str) else []


def _type_name(annotation) -> str:
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return " | ".join(_type_name(a) for a in typing.get_args(annotation))
    if annotation is type(None):
        return "None"
    return str(annotation) if typing.get_origin(annotation) else annotation.__name__


def _choice_error(name: str, value, allowed) -> str:
    return f"SimplifiedConfig.{name}={value!r} is not valid; allowed values: {', '.join(map(repr, allowed))}."
