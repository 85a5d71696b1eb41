"""Configuration of the simplified transformer family (He & Hofmann, *Simplifying Transformer Blocks*, ICLR 2024).

`block_type` is a preset: it fills every structural field it implies with the paper's value (paper §4 and
App. D; NormFormer §2 for `normformer`); where the paper is silent (`simplest`'s two LayerNorms, `normformer`'s
embedding scale and init) it follows the authors' code, fairseq or GPT-3. "The authors' code" is the code of the
paper's reproducibility statement, https://github.com/bobby-he/simplified_transformers. Fields passed explicitly
win over the preset, and the expanded values are what `config.json` stores, with the release that wrote it
(`simplified_transformers_version`).
"""

import dataclasses
import math

import transformers
from packaging.version import Version

from .fields_simplified import (  # re-exported: the family's field vocabulary is part of the config's module
    _CHOICES,
    BLOCK_PRESETS,
    BLOCK_TYPES,
    BLOCKS,
    GATED_ACTIVATIONS,
    BlockType,
    _choice_error,
    check_type,
    nearest_names,
)

#: The release of simplified-transformers (the one place it is written; pyproject.toml reads it from here).
__version__ = "0.2.0"

#: The oldest transformers this code runs under: pyproject.toml, every exported config.json
#: (`simplified_min_transformers_version`) and model card declare it; `make test-compat` tests it and the newest 5.x.
MIN_TRANSFORMERS_VERSION = "5.4.0"


def _require_transformers(installed: str = transformers.__version__, minimum: str = MIN_TRANSFORMERS_VERSION) -> None:
    """One clear ImportError below the floor, raised when this module is imported (AutoConfig imports it first,
    before any weight is read): older releases lack names or signatures this code uses (5.0 has no
    `merge_with_config_defaults`, 5.3's `create_causal_mask` needs `cache_position`, 4.x has no `PreTrainedConfig`)."""
    if Version(installed) < Version(minimum):  # pre-releases of the floor predate it
        raise ImportError(
            f"This simplified-transformers model needs transformers>={minimum},<6, but transformers {installed} is "
            f"installed. Upgrade with: pip install 'transformers>={minimum},<6'"
        )


_require_transformers()

from transformers import GenerationConfig, PreTrainedConfig  # noqa: E402  (after the version check: 4.x lacks them)

#: Every Auto class of the family. Each saved `config.json` carries all of them, whatever class saved it (model or
#: Trainer `save_pretrained`, `push_to_hub`, the export tool), so a folder or Hub repo loads with any Auto class and
#: `trust_remote_code=True`: a head that is not in the checkpoint is initialised, the base weights load as saved.
AUTO_MAP = {
    "AutoConfig": "configuration_simplified.SimplifiedConfig",
    "AutoModel": "modeling_simplified.SimplifiedModel",
    "AutoModelForCausalLM": "modeling_simplified.SimplifiedForCausalLM",
    "AutoModelForMaskedLM": "modeling_simplified.SimplifiedForMaskedLM",
    "AutoModelForSequenceClassification": "modeling_simplified.SimplifiedForSequenceClassification",
}


class SimplifiedConfig(PreTrainedConfig):
    r"""Configuration of [`SimplifiedModel`] and its heads.

    Sequential block (paper eq. 1):  `X̂ = αSA·X + βSA·MHA(Norm1(X))`,  `Y = αFF·X̂ + βFF·MLP(Norm2(X̂))`.
    Parallel block (eq. 7):          `Y = αcomb·X + βSA·MHA(Norm(X)) + βFF·MLP(Norm(X))`.
    Shaped attention (eq. 5):        `(α·I + β·A(X) − γ·C)·X·W^V` per head.

    Fields left at `None` take the value that `block_type` implies (see `BLOCK_PRESETS`).

    Args:
        block_type: one of `BLOCK_TYPES`; a preset for the structural fields below.
        vocab_size, hidden_size, num_hidden_layers, num_attention_heads: the model shape.
        num_key_value_heads: key/value heads of grouped-query attention (Ainslie et al. 2023; Llama): each serves
            `num_attention_heads / num_key_value_heads` query heads, and the KV cache shrinks by that factor. `None`:
            `num_attention_heads` (plain multi-head attention). Needs learned values (`value_mode` and
            `first_layer_value_mode` `linear`: pre_ln, post_ln, parallel, normformer, value_skipinit).
        intermediate_size: width entering the MLP output projection (for `swiglu`/`geglu` the gated width);
            default `4 * hidden_size`.
        hidden_act: MLP activation, one of `ACTIVATIONS`; `leaky_relu_slope` is the negative slope of `leaky_relu`.
        position_embedding_type: `learned` (the default: GPT-2's `wpe`, as in the authors' code; the paper's 167M /
            146M parameter counts include it), `sinusoidal` (App. D.1's text; a fixed unit-amplitude table added at
            the embedding: at std-0.02 token embeddings it swamps the token signal at init, so small models learn
            slowly), or
            `rotary` (`rope_theta`).
        max_position_embeddings: longest sequence for learned positions.
        parallel_block: parallel (GPT-J) instead of sequential sub-blocks.
        norm_position: `pre` (Pre-LN) or `post` (norm after each residual add).
        norm_type / norm_eps / norm_bias: the block norms (`none` removes them); `norm_bias` is LayerNorm's bias.
        embedding_norm / final_norm: norm on the embedding output / after the last block (`none` removes it).
        first_layer_norm: the norm before the first block's attention (a parallel block's only norm); `None`:
            `norm_type` (the authors' `norm_type none` keeps a LayerNorm there only).
        rmsnorm_eps_position: `inside` the root (torch, Llama: `x/sqrt(mean(x²)+eps)`) or `outside` (the authors'
            code: `x/(sqrt(mean(x²))+eps)`).
        qk_norm: `rmsnorm` norms each head's queries and keys with one `[head_dim]` scale (the authors' `op` run).
        type_vocab_size: number of token types (BERT's segment embeddings) added at the embedding; 0: none.
        scale_embedding: multiply the token embeddings by sqrt(hidden_size) (Vaswani et al. 2017 §3.4; fairseq, the
            `normformer` preset); they are then initialised with std hidden_size^-1/2 (fairseq): unit scale.
        attn_skip_gain (αSA), mlp_skip_gain (αFF; αcomb for parallel blocks): fixed skip gains, 0 removes the skip;
            `skip_gains_trainable` makes the non-zero ones trainable scalars.
        beta_sa_init (βSA), beta_ff_init (βFF): residual branch gains; the paper uses βFF 0.1 at 18×768, 0.2 only for
            the 18-layer models of Fig. 6 (MLP 2d), 0.05 for crammed BERT; theory suggests O(1/sqrt(depth)).
        block_gains_trainable: whether βSA and βFF are trained (fixed gains of 1 cost nothing).
        attention_type: `softmax` or `shaped` (eq. 5); shaped_{alpha,beta,gamma}_init are its gain inits,
            `shaped_gains_per_head` makes them head-wise, `shaped_gains_trainable` trains them,
            `centre_attention` keeps the −γ·C term (off for Value-SkipInit, eq. 4).
        value_mode / projection_mode: `identity` (no parameters, no matmul), `linear`, or `reparam`
            (eq. 6: `W = αV·W_init + βV·ΔW`, ΔW zero-initialised); `first_layer_value_mode` overrides the value
            mode in the first block (SAS keeps a trainable W^V there).
        value_projection_init: init of `linear` W^V / W^P (`normal` or `orthogonal`).
        reparam_init: W_init of eq. 6 (`identity`, `orthogonal`, `normal`); `reparam_tie` ties the random W_init
            so that the value-projection product is the identity per block (`all_blocks`) or over the whole
            network (`last_block`); reparam_{alpha,beta}_init and `reparam_gains_trainable` are αV, βV.
        query_init_std: init std of W^Q (0 for the simplified blocks, so shaped attention is the identity).
        head_scale, attn_branch_norm, mlp_act_norm, residual_scale: NormFormer's head-wise scaling (before or
            after W^O), LN after attention, LN after the MLP activation, and ResScale λ on the MLP skip.
        attention_bias / mlp_bias: biases on the attention / MLP matrices (reparameterised ones included).
        frozen_biases: only the query/key biases are trained; the value, projection and MLP biases keep their values
            (the authors' code trains the QK bias and freezes the others at zero; a converted checkpoint keeps them).
        init_scheme: `normal` (std `initializer_range` everywhere) or `gpt2` (residual outputs /sqrt(2L); the
            `normformer` preset, as its GPT-3 baseline).
        pad_vocab_size_multiple: pad the embedding matrix to a multiple of this; padded logits are never predicted.
        is_causal: decoder (`True`) or encoder (`False`); `None` lets the head decide (causal LM: causal).
    """

    model_type = "simplified"
    keys_to_ignore_at_inference = ["cache", "past_key_values"]  # the output field's name from / before 5.24

    block_type: str = "pre_ln"
    vocab_size: int = 50257
    hidden_size: int = 768
    num_hidden_layers: int = 18
    num_attention_heads: int = 12
    num_key_value_heads: int | None = None
    intermediate_size: int | None = None
    hidden_act: str = "relu"
    leaky_relu_slope: float = 0.01
    position_embedding_type: str = "learned"
    max_position_embeddings: int = 1024
    rope_theta: float = 10000.0

    parallel_block: bool | None = None
    norm_position: str | None = None
    norm_type: str | None = None
    norm_eps: float = 1e-8
    norm_bias: bool = True
    embedding_norm: str | None = None
    final_norm: str | None = None
    first_layer_norm: str | None = None
    rmsnorm_eps_position: str = "inside"
    qk_norm: str = "none"
    type_vocab_size: int = 0
    scale_embedding: bool | None = None

    attn_skip_gain: float | None = None
    mlp_skip_gain: float | None = None
    beta_sa_init: float = 1.0
    beta_ff_init: float | None = None
    block_gains_trainable: bool | None = None
    skip_gains_trainable: bool = False

    attention_type: str | None = None
    shaped_alpha_init: float | None = None
    shaped_beta_init: float | None = None
    shaped_gamma_init: float | None = None
    shaped_gains_per_head: bool = True
    shaped_gains_trainable: bool = True
    centre_attention: bool | None = None

    value_mode: str | None = None
    projection_mode: str | None = None
    first_layer_value_mode: str | None = None
    value_projection_init: str | None = None
    reparam_init: str = "identity"
    reparam_tie: str = "none"
    reparam_alpha_init: float = 1.0
    reparam_beta_init: float = 1.0
    reparam_gains_trainable: bool = True
    query_init_std: float | None = None

    head_scale: str | None = None
    attn_branch_norm: bool | None = None
    mlp_act_norm: bool | None = None
    residual_scale: bool | None = None

    attention_bias: bool = False
    mlp_bias: bool = False
    frozen_biases: bool = False
    tie_word_embeddings: bool = True
    initializer_range: float = 0.02
    init_scheme: str | None = None
    attention_dropout: float = 0.0
    hidden_dropout: float = 0.0
    embedding_dropout: float = 0.0
    classifier_dropout: float = 0.0
    pad_vocab_size_multiple: int = 1
    is_causal: bool | None = None
    use_cache: bool = True
    pad_token_id: int | None = None
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None

    def __post_init__(self, **kwargs):
        _check_no_misspelt_field(kwargs)
        super().__post_init__(**kwargs)
        auto_map = getattr(self, "auto_map", None) or {}
        if not isinstance(auto_map, dict) or not all(isinstance(v, (str, list)) for v in auto_map.values()):
            raise ValueError(
                f"SimplifiedConfig.auto_map must be an object mapping Auto class names to 'module.Class' strings "
                f"(e.g. {AUTO_MAP['AutoConfig']!r}), got {auto_map!r}."
            )
        self.auto_map = _complete_auto_map(auto_map)
        self._check_types()
        if self.block_type not in BLOCK_TYPES:
            raise ValueError(_choice_error("block_type", self.block_type, BLOCK_TYPES))
        for name, value in BLOCK_PRESETS[self.block_type].items():
            if getattr(self, name) is None:
                setattr(self, name, value)
        if self.final_norm is None:
            self.final_norm = self.norm_type
        if self.first_layer_norm is None:
            self.first_layer_norm = self.norm_type
        if self.first_layer_value_mode is None:
            self.first_layer_value_mode = self.value_mode
        if self.query_init_std is None:
            self.query_init_std = self.initializer_range
        if self.intermediate_size is None:
            self.intermediate_size = 4 * self.hidden_size
        if self.num_key_value_heads is None:
            self.num_key_value_heads = self.num_attention_heads
        self._check_types()
        self._check_values()

    # -- validation: every bad value raises one ValueError naming the field ---------------------------------
    def _check_types(self):
        for f in dataclasses.fields(SimplifiedConfig):
            if f.name in SimplifiedConfig.__annotations__:
                check_type(getattr(self, f.name), f.type, f"SimplifiedConfig.{f.name}")

    def _check_values(self):
        for name, allowed in _CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ValueError(_choice_error(name, getattr(self, name), allowed))
        for name in (
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "num_key_value_heads",
            "intermediate_size",
            "max_position_embeddings",
            "pad_vocab_size_multiple",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"SimplifiedConfig.{name} must be a positive integer, got {getattr(self, name)}.")
        for name in ("norm_eps", "initializer_range", "query_init_std"):
            if not math.isfinite(getattr(self, name)) or getattr(self, name) < 0:
                raise ValueError(f"SimplifiedConfig.{name} must be a finite number >= 0, got {getattr(self, name)}.")
        if self.type_vocab_size < 0:
            raise ValueError(
                f"SimplifiedConfig.type_vocab_size must be >= 0 (0: no token types), got {self.type_vocab_size}."
            )
        if self.first_layer_norm != self.norm_type and (self.norm_position != "pre" or self.first_layer_norm == "none"):
            raise ValueError(
                f"SimplifiedConfig.first_layer_norm={self.first_layer_norm!r} differs from "
                f"norm_type={self.norm_type!r}: allowed only with norm_position='pre' and a first_layer_norm in "
                "('rmsnorm', 'layernorm')."
            )
        if not math.isfinite(self.rope_theta) or self.rope_theta <= 0:
            raise ValueError(f"SimplifiedConfig.rope_theta must be a finite number > 0, got {self.rope_theta}.")
        for name in ("pad_token_id", "bos_token_id", "eos_token_id"):
            ids = getattr(self, name)
            ids = [] if ids is None else ids if isinstance(ids, list) else [ids]
            if not all(0 <= i < self.vocab_size for i in ids):
                raise ValueError(
                    f"SimplifiedConfig.{name} must be None or token ids in [0, vocab_size={self.vocab_size}), "
                    f"got {getattr(self, name)!r}."
                )
        for name in ("attention_dropout", "hidden_dropout", "embedding_dropout", "classifier_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"SimplifiedConfig.{name} must be in [0, 1), got {getattr(self, name)}.")
        for name in (
            "attn_skip_gain",
            "mlp_skip_gain",
            "beta_sa_init",
            "beta_ff_init",
            "shaped_alpha_init",
            "shaped_beta_init",
            "shaped_gamma_init",
            "reparam_alpha_init",
            "reparam_beta_init",
            "leaky_relu_slope",
        ):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"SimplifiedConfig.{name} must be finite, got {getattr(self, name)}.")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"SimplifiedConfig.num_attention_heads={self.num_attention_heads} does not divide hidden_size="
                f"{self.hidden_size}: hidden_size must be divisible by num_attention_heads (allowed head counts "
                "divide the width)."
            )
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"SimplifiedConfig.num_key_value_heads ({self.num_key_value_heads}) must divide num_attention_heads "
                f"({self.num_attention_heads}); allowed: a divisor of num_attention_heads."
            )
        if self.num_key_value_heads != self.num_attention_heads and not (
            self.value_mode == self.first_layer_value_mode == "linear"
        ):
            raise ValueError(
                f"SimplifiedConfig.num_key_value_heads={self.num_key_value_heads} (grouped-query attention) needs "
                f"learned values: value_mode and first_layer_value_mode 'linear', got {self.value_mode!r} and "
                f"{self.first_layer_value_mode!r} (block_type {self.block_type!r}); allowed: num_key_value_heads="
                f"{self.num_attention_heads} (or None) for this block."
            )
        if self.position_embedding_type == "rotary" and (self.hidden_size // self.num_attention_heads) % 2:
            raise ValueError(
                f"SimplifiedConfig.position_embedding_type='rotary' needs an even head dim, got "
                f"hidden_size/num_attention_heads = {self.hidden_size // self.num_attention_heads}."
            )
        if self.position_embedding_type == "sinusoidal" and self.hidden_size % 2:
            raise ValueError(
                f"SimplifiedConfig.position_embedding_type='sinusoidal' needs an even hidden_size, got {self.hidden_size}."
            )
        if self.norm_position == "post" and self.norm_type == "none":
            raise ValueError(
                "SimplifiedConfig.norm_type='none' is incompatible with norm_position='post' (block_type "
                f"{self.block_type!r}): a post-norm block needs norm_type in ('rmsnorm', 'layernorm')."
            )
        for name in ("attn_branch_norm", "mlp_act_norm"):
            if getattr(self, name) and self.norm_type == "none":
                raise ValueError(
                    f"SimplifiedConfig.{name}=True needs a norm: norm_type must be 'rmsnorm' or 'layernorm', "
                    "got 'none'."
                )
        if self.norm_position == "post" and self.parallel_block:
            raise ValueError(
                "SimplifiedConfig.norm_position='post' is only defined for sequential blocks (parallel_block=False)."
            )
        if self.parallel_block and self.attn_skip_gain != 0:
            raise ValueError(
                f"SimplifiedConfig.attn_skip_gain must be 0 for parallel blocks, got {self.attn_skip_gain}: a parallel "
                "block has one skip, whose gain αcomb is mlp_skip_gain."
            )
        if self.residual_scale and self.mlp_skip_gain != 1:
            raise ValueError(
                f"SimplifiedConfig.residual_scale=True (NormFormer ResScale λ) needs mlp_skip_gain=1, got "
                f"{self.mlp_skip_gain}."
            )
        if self.head_scale == "after_proj" and self.projection_mode == "identity":
            raise ValueError(
                "SimplifiedConfig.head_scale='after_proj' needs a projection matrix: projection_mode must be "
                f"'linear' or 'reparam', got {self.projection_mode!r}."
            )
        if self.reparam_tie != "none" and self.reparam_init == "identity":
            raise ValueError(
                f"SimplifiedConfig.reparam_tie={self.reparam_tie!r} ties random W_init: reparam_init must be "
                "'orthogonal' or 'normal', got 'identity' (which is already tied)."
            )
        modes = (self.value_mode, self.first_layer_value_mode, self.projection_mode)
        if self.reparam_tie != "none" and modes != ("reparam",) * 3:
            raise ValueError(
                f"SimplifiedConfig.reparam_tie={self.reparam_tie!r} ties every block's W^V_init and W^P_init: it needs "
                "value_mode, first_layer_value_mode and projection_mode all 'reparam', got "
                f"{self.value_mode!r}, {self.first_layer_value_mode!r} and {self.projection_mode!r}."
            )
        if isinstance(self.eos_token_id, list) and not all(isinstance(t, int) for t in self.eos_token_id):
            raise ValueError(
                f"SimplifiedConfig.eos_token_id must be an int or a list of ints, got {self.eos_token_id}."
            )

    def to_dict(self) -> dict:
        """The fields, plus the simplified-transformers release that wrote them (`simplified_transformers_version`,
        beside transformers' own `transformers_version`) and the oldest transformers its code loads under
        (`simplified_min_transformers_version`)."""
        output = super().to_dict()
        output["simplified_transformers_version"] = __version__
        output["simplified_min_transformers_version"] = MIN_TRANSFORMERS_VERSION
        return output

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def padded_vocab_size(self) -> int:
        m = self.pad_vocab_size_multiple
        return (self.vocab_size + m - 1) // m * m

    @property
    def base_model_tp_plan(self) -> dict[str, str]:
        """The tensor-parallel plan of the base model (`from_pretrained(..., tp_plan="auto")`), for the modules this
        config builds: heads are split between the ranks. The `simplified_*` styles are defined and registered in
        `tensor_parallel_simplified`, which also refuses what cannot be sharded; see docs/tensor_parallel.md."""
        plan = {
            "embed_tokens": "embedding_rowwise",
            # [W^Q; W^K(; W^V)]: each part colwise, so a rank holds its heads' rows of every part
            "layers.*.attn.qkv.proj": "simplified_qkv_colwise",
            # W^O: rowwise (all-reduce); identity or eq. 6: the ranks' heads gathered, the matrix replicated
            "layers.*.attn.o_proj": "simplified_gather_heads",
        }
        value_modes = {self.value_mode, self.first_layer_value_mode or self.value_mode}
        if value_modes != {"linear"} or (self.frozen_biases and self.attention_bias):  # values outside `qkv.proj`
            plan["layers.*.attn.qkv.value"] = "simplified_local_heads"
        if self.qk_norm != "none":  # one [head_dim] scale shared by the heads: its gradient sums the ranks'
            plan.update(
                dict.fromkeys(("layers.*.attn.q_norm", "layers.*.attn.k_norm"), "replicated_with_grad_allreduce")
            )
        if self.attention_type == "shaped":
            gains = ("alpha", "beta", "gamma") if self.centre_attention else ("alpha", "beta")
            plan.update({f"layers.*.attn.mixing.{g}": "simplified_per_head" for g in gains})
        if self.head_scale == "before_proj":  # after W^O it scales the all-reduced output: replicated
            plan["layers.*.attn.head_scale"] = "simplified_per_head"
        if self.mlp_act_norm:  # a norm over the MLP width needs all of it: W_in's output gathered
            plan.update(
                {
                    "layers.*.mlp.fc_in": "colwise_gather_output",
                    "layers.*.mlp.fc_out": "rowwise_rep",
                }
            )
        else:
            gated = self.hidden_act in GATED_ACTIVATIONS  # W_in = [gate; up]
            plan["layers.*.mlp.fc_in"] = "simplified_gate_up_colwise" if gated else "colwise"
            plan["layers.*.mlp.fc_out"] = "rowwise"
        return plan


#: Keys transformers writes or passes to every config beyond `PreTrainedConfig`'s fields and the generation
#: parameters: those its `__post_init__` reads, and 4.x's `PretrainedConfig.__init__` arguments still found in saved
#: `config.json` files. Never taken for a misspelt field.
_GENERIC_KEYS = frozenset(
    """model_type auto_map torch_dtype num_labels name_or_path output_attentions attn_implementation
    experts_implementation per_layer_config rope_scaling rope_parameters tie_last_hidden_states torchscript
    use_bfloat16 tf_legacy_loss pruned_heads is_decoder add_cross_attention cross_attention_hidden_size
    tie_encoder_decoder finetuning_task task_specific_params tokenizer_class prefix sep_token_id
    decoder_start_token_id""".split()
)


def _check_no_misspelt_field(extra: dict) -> None:
    """One ValueError naming the field meant for a key that is not a field but close to one (`hiden_size=256` would
    otherwise be stored as an extra attribute and the model built at the default width). Keys of transformers' own
    (`_GENERIC_KEYS`, the base class's fields, generation parameters, private `_…` keys) and keys unlike any field
    pass, as transformers lets them."""
    fields = list(SimplifiedConfig.__annotations__)
    for key in extra:
        meant = nearest_names(key, fields)
        if meant and not key.startswith("_") and key not in _generic_keys():
            raise ValueError(
                f"SimplifiedConfig: {key!r} is not a field; did you mean {meant[0]!r}? (an unknown key would be kept "
                f"as an unused attribute and the model built with {meant[0]}'s default)"
            )


def _generic_keys() -> frozenset[str]:
    """Every key transformers itself may put into a config (see `_GENERIC_KEYS`)."""
    base = {f.name for f in dataclasses.fields(PreTrainedConfig)}
    return _GENERIC_KEYS | base | set(GenerationConfig().to_dict())


def _complete_auto_map(auto_map: dict) -> dict:
    """`AUTO_MAP` with the entries a loaded config already has kept as they are: a reference to another repo's code
    (`"repo--modeling_simplified.X"`) stays, and the added classes point at that same repo."""
    prefix = next((ref.split("--")[0] + "--" for ref in auto_map.values() if isinstance(ref, str) and "--" in ref), "")
    return {**{key: prefix + ref for key, ref in AUTO_MAP.items()}, **auto_map}


__all__ = ["SimplifiedConfig", "BlockType", "BLOCKS", "BLOCK_TYPES", "BLOCK_PRESETS", "check_type"]
