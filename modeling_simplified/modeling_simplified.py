"""Simplified transformer blocks (He & Hofmann, ICLR 2024), NormFormer and the Pre-LN family for transformers 5.x.

One concept per module: gains, norms, the value/projection matrices (identity, linear, or eq. 6 reparameterisation),
shaped attention (eq. 5) on top of transformers' attention interface, sequential (eq. 1) and parallel (eq. 7)
blocks, and the heads. "The authors' code" is the paper's released code,
https://github.com/bobby-he/simplified_transformers.

Shipped to the Hub as custom code with its siblings, imported by single-dot sibling imports only:
`configuration_simplified.py` (the config), `embeddings_simplified.py` (token embeddings, token types and positions),
`kernels_simplified.py` (the performance kernels this file calls by name: the CPU RMSNorm, the running sum, eq. 5's
combination, the fused head and loss), `checkpoints_simplified.py` (the refusal of a checkpoint that is no
checkpoint of the model), `compat_simplified.py` (the shims for older transformers releases and older checkpoints),
`tensor_parallel_simplified.py` (the tensor-parallel styles), `weight_decay_simplified.py` (the paper's no-decay rule
for any trainer) and `quantization_simplified.py` (torchao quantization of eq. 6's matrices and a tied head).
"""

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import initialization as init
from transformers.cache_utils import Cache, DynamicCache
from transformers.generation import GenerationMixin
from transformers.masking_utils import (
    create_bidirectional_mask,
    create_causal_mask,
    find_packed_sequence_indices,
    packed_sequence_mask_function,
)
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import (
    BaseModelOutputWithPast,
    CausalLMOutputWithPast,
    MaskedLMOutput,
    SequenceClassifierOutputWithPast,
)
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS, PreTrainedModel
from transformers.utils import can_return_tuple, is_torchdynamo_compiling
from transformers.utils.generic import merge_with_config_defaults
from transformers.utils.output_capturing import capture_outputs

from .checkpoints_simplified import refuse_unmatched_checkpoint, refuse_unmatched_file
from .compat_simplified import CACHE_FIELD, ScalarGainCheckpoints, cache_argument, max_cache_length
from .configuration_simplified import GATED_ACTIVATIONS, SimplifiedConfig
from .embeddings_simplified import (
    POSITIONS,
    NoTokenTypes,
    ScaledEmbedding,
    TokenTypeEmbedding,
    apply_rotary,
    build_token_embedding,
    check_learned_positions,
    positions_from_cu_seq_lens,
)
from .kernels_simplified import (
    TiedHeadGradient,
    autocast_enabled,
    linear,
    linear_cross_entropy,
    rms_norm,
    running_sum,
    shaped_combination,
)
from .quantization_simplified import QuantizedAfterLoading, quantize_every_matrix
from .tensor_parallel_simplified import check_tensor_parallel
from .weight_decay_simplified import PaperWeightDecay


# ----------------------------------------------------------------------------------------------------------------
# Gains and skips
# ----------------------------------------------------------------------------------------------------------------
class Gain(nn.Module):
    """A gain `g·x` (βSA, βFF, NormFormer's ResScale λ): a scalar (shape `(1,)`) or a vector, trainable or fixed.

    No gain is 0-dimensional: FSDP2 (`fully_shard`) shards no 0-dim parameter, and the authors' code stores its
    gains as 1-element vectors too. With `residual`, returns `residual + value·g·x` in one fused pass
    (`torch.addcmul`): the residual sums of eq. 1 and eq. 5 cost one elementwise op per term.
    """

    def __init__(self, init_value: float, shape: tuple[int, ...] = (1,), trainable: bool = True):
        super().__init__()
        self.init_value = float(init_value)
        self.weight = nn.Parameter(torch.full(shape, self.init_value), requires_grad=trainable)

    def _gain(self) -> torch.Tensor:
        return self.weight

    def forward(
        self, x: torch.Tensor | None = None, residual: torch.Tensor | None = None, value: float = 1.0
    ) -> torch.Tensor:
        """`g·x`, `residual + value·g·x`, or, called without `x`, the gain itself (for a fused consumer: calling the
        module rather than reading its weight lets accelerate's offload hooks load it)."""
        if x is None:
            return self._gain()
        if residual is None:
            return self._gain() * x if value == 1 else value * self._gain() * x
        return torch.addcmul(residual, self._gain(), x, value=value)

    def extra_repr(self) -> str:
        return f"shape={tuple(self.weight.shape)}, init={self.init_value}, trainable={self.weight.requires_grad}"


class ConstantScale(nn.Module):
    """A fixed, parameter-free scale (a skip gain α that is neither 0 nor 1)."""

    def __init__(self, value: float):
        super().__init__()
        self.value = float(value)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.value * x


class NoSkip(nn.Module):
    """A removed skip connection (α = 0): contributes nothing to the residual sum."""

    def forward(self, x: torch.Tensor) -> None:
        return None


class UnitGain(nn.Module):
    """A branch gain fixed at 1 (Pre-LN): no parameter, no multiply; `residual + x` with a residual."""

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        return x if residual is None else residual + x


def build_skip(gain: float, trainable: bool = False) -> nn.Module:
    """The skip gain α of eq. 1: identity, removed, or a constant (a trainable scalar with `trainable`)."""
    if trainable and gain != 0:
        return Gain(gain, trainable=True)
    if gain == 1:
        return nn.Identity()
    return NoSkip() if gain == 0 else ConstantScale(gain)


def build_gain(init_value: float, trainable: bool) -> nn.Module:
    """A residual-branch gain β: free when fixed at 1."""
    if not trainable and init_value == 1:
        return UnitGain()
    return Gain(init_value, trainable=trainable)


class RMSNorm(nn.RMSNorm):
    """`nn.RMSNorm` (same parameters and result), on the CPU computed by the `rms_norm` kernel; elsewhere torch's own
    (fused on CUDA)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type != "cpu":
            return super().forward(x)
        return rms_norm(x, self.weight, torch.finfo(x.dtype).eps if self.eps is None else self.eps)


class RMSNormEpsOutside(nn.RMSNorm):
    """RMSNorm with eps outside the root, `weight·x/(sqrt(mean(x²)) + eps)` (the authors' code); as every norm here,
    computed in at least float32 (16-bit inputs rounded once, at the end)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.to(torch.promote_types(x.dtype, torch.float32))
        y = self.weight * (x32 / (x32.pow(2).mean(-1, keepdim=True).sqrt() + self.eps))
        return y.to(torch.promote_types(x.dtype, self.weight.dtype))


def build_norm(kind: str, dim: int, config: SimplifiedConfig) -> nn.Module:
    """`rmsnorm` (eps inside or outside the root), `layernorm` or `none` (an `nn.Identity`)."""
    if kind == "rmsnorm":
        rmsnorm = RMSNormEpsOutside if config.rmsnorm_eps_position == "outside" else RMSNorm
        return rmsnorm(dim, eps=config.norm_eps)
    if kind == "layernorm":
        return nn.LayerNorm(dim, eps=config.norm_eps, bias=config.norm_bias)
    return nn.Identity()


# ----------------------------------------------------------------------------------------------------------------
# Linear layers
# ----------------------------------------------------------------------------------------------------------------
class Linear(nn.Linear):
    """`nn.Linear` through the `linear` kernel (its one-row CPU rule), with its init declared (read by
    `_init_linear`): normal with std `init_std` (None: `initializer_range`) or `orthogonal_init`; a fused query-key
    (-value) projection re-draws its first `d` rows (W^Q) with `query_init_std` (None: no re-draw) and, with
    `value_orthogonal`, its value rows."""

    init_std: float | None = None
    orthogonal_init: bool = False
    query_init_std: float | None = None
    value_orthogonal: bool = False

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        *,
        init_std: float | None = None,
        orthogonal_init: bool = False,
        query_init_std: float | None = None,
        value_orthogonal: bool = False,
    ):
        super().__init__(in_features, out_features, bias=bias)
        self.init_std, self.orthogonal_init = init_std, orthogonal_init
        self.query_init_std, self.value_orthogonal = query_init_std, value_orthogonal

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias)


# ----------------------------------------------------------------------------------------------------------------
# MLP
# ----------------------------------------------------------------------------------------------------------------
class GatedActivation(nn.Module):
    """GLU variants (SwiGLU, GeGLU): `act(gate) * up` on the two halves of the input projection."""

    def __init__(self, act: nn.Module):
        super().__init__()
        self.act = act

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = x.chunk(2, dim=-1)
        return self.act(gate) * up


def build_activation(config: SimplifiedConfig) -> nn.Module:
    """The MLP's activation. ReLU and leaky ReLU run in place on `W_in`'s fresh output, which nothing else keeps (a
    linear layer saves its input, not its output): one `(tokens, intermediate_size)` allocation less per layer."""
    return {
        "relu": lambda: nn.ReLU(inplace=True),
        "gelu": lambda: nn.GELU(),
        "gelu_new": lambda: nn.GELU(approximate="tanh"),
        "leaky_relu": lambda: nn.LeakyReLU(config.leaky_relu_slope, inplace=True),
        "swiglu": lambda: GatedActivation(nn.SiLU()),
        "geglu": lambda: GatedActivation(nn.GELU()),
    }[config.hidden_act]()


class SimplifiedMLP(nn.Module):
    """`W_out · [Norm](act(W_in · x))`; the optional norm after the activation is NormFormer's FFN LN."""

    def __init__(self, config: SimplifiedConfig):
        super().__init__()
        width = config.intermediate_size
        gates = 2 if config.hidden_act in GATED_ACTIVATIONS else 1
        self.fc_in = Linear(config.hidden_size, gates * width, bias=config.mlp_bias)
        self.act = build_activation(config)
        self.act_norm = build_norm(config.norm_type if config.mlp_act_norm else "none", width, config)
        self.fc_out = Linear(width, config.hidden_size, bias=config.mlp_bias, init_std=_output_init_std(config))
        for matrix in (self.fc_in, self.fc_out):
            _freeze_bias(matrix, config)
        self.dropout = nn.Dropout(config.hidden_dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.fc_out(self.act_norm(self.act(self.fc_in(x)))))


# ----------------------------------------------------------------------------------------------------------------
# Value and projection matrices
# ----------------------------------------------------------------------------------------------------------------
class ReparamLinear(nn.Module):
    """Paper eq. 6: `W = αV·W_init + βV·ΔW`, with `W_init` fixed (identity, orthogonal or normal; a buffer that is
    saved with the weights) and `ΔW` trainable and zero-initialised.

    A random `W_init` is drawn from its own generator seeded with `seed` (the matrix's place in the network), so
    `__init__`, `_init_weights` after a meta-device build, and `from_pretrained` of a checkpoint that lacks it all
    give the same matrix, whatever the global random state."""

    def __init__(self, dim: int, config: SimplifiedConfig, seed: int):
        super().__init__()
        self.dim, self.init_kind, self.seed, self.init_std = dim, config.reparam_init, seed, config.initializer_range
        self.alpha_init, self.beta_init = config.reparam_alpha_init, config.reparam_beta_init
        weight_init = torch.empty(dim, dim)
        if weight_init.device.type != "meta":
            weight_init.copy_(self.initial_matrix())
        self.weight_init = nn.Buffer(weight_init)
        self.delta = nn.Parameter(torch.empty(dim, dim))
        self.alpha = nn.Parameter(torch.empty(1), requires_grad=config.reparam_gains_trainable)  # (1,): see `Gain`
        self.beta = nn.Parameter(torch.empty(1), requires_grad=config.reparam_gains_trainable)
        self.bias = nn.Parameter(torch.empty(dim)) if config.attention_bias else None
        _freeze_bias(self, config)

    def initial_matrix(self) -> torch.Tensor:
        """`W_init` as `reparam_init` defines it (on the CPU, float32)."""
        if self.init_kind == "identity":
            return torch.eye(self.dim)
        matrix = torch.randn(self.dim, self.dim, generator=torch.Generator().manual_seed(self.seed), device="cpu")
        if self.init_kind == "normal":
            return matrix * self.init_std
        q, r = torch.linalg.qr(matrix)  # orthogonal, as torch.nn.init.orthogonal_ draws it
        return q * torch.sign(torch.diagonal(r))

    @property
    def weight(self) -> torch.Tensor:
        return self.alpha * self.weight_init + self.beta * self.delta

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias)


def _freeze_bias(module: nn.Module, config: SimplifiedConfig):
    """`frozen_biases`: this matrix's bias keeps its value (only query/key biases train)."""
    if config.frozen_biases and module.bias is not None:
        module.bias.requires_grad_(False)


def build_matrix(
    mode: str,
    config: SimplifiedConfig,
    seed: int,
    linear_init_std: float | None = None,
    out_features: int | None = None,
) -> nn.Module:
    """W^V or W^P: `identity` (no parameters, no matmul), `linear` (`d → out_features`, default d: a grouped-query
    W^V is narrower), or `reparam` (eq. 6, its W_init drawn with `seed`)."""
    d = config.hidden_size
    if mode == "identity":
        return nn.Identity()
    if mode == "reparam":
        return ReparamLinear(d, config, seed)
    orthogonal = config.value_projection_init == "orthogonal"
    linear = Linear(
        d, out_features or d, bias=config.attention_bias, init_std=linear_init_std, orthogonal_init=orthogonal
    )
    _freeze_bias(linear, config)
    return linear


def _kv_dim(config: SimplifiedConfig) -> int:
    """Width of the keys (and learned values): `num_key_value_heads` heads of `head_dim` (grouped-query attention)."""
    return config.num_key_value_heads * config.head_dim


def _split_parts(fused: torch.Tensor, widths: tuple[int, ...]) -> tuple[torch.Tensor, ...]:
    """The parts of a fused projection's output, by its actual width: under tensor parallelism a rank holds the same
    share of every part (`PackedPartsColwise`), so each local width is the full one scaled by that share."""
    total, width = sum(widths), fused.shape[-1]
    return fused.split(widths if width == total else [w * width // total for w in widths], dim=-1)


class FusedQKV(nn.Module):
    """Trainable values: one `d → d + 2·d_kv` matmul for queries, keys and values (`d_kv = d` without GQA)."""

    def __init__(self, config: SimplifiedConfig):
        super().__init__()
        orthogonal = config.value_projection_init == "orthogonal"
        self.proj = _query_key_projection(config, 2 * _kv_dim(config), value_orthogonal=orthogonal)
        self.split = (config.hidden_size, _kv_dim(config), _kv_dim(config))

    def forward(self, x: torch.Tensor):
        return _split_parts(self.proj(x), self.split)


class QKWithValue(nn.Module):
    """Identity or reparameterised values: a `d → 2d` matmul for queries and keys, values from `value`."""

    def __init__(self, config: SimplifiedConfig, value_mode: str, layer_idx: int):
        super().__init__()
        self.proj = _query_key_projection(config, _kv_dim(config))
        self.value = build_matrix(value_mode, config, seed=2 * layer_idx, out_features=_kv_dim(config))
        self.split = (config.hidden_size, _kv_dim(config))

    def forward(self, x: torch.Tensor):
        q, k = _split_parts(self.proj(x), self.split)
        return q, k, self.value(x)


def _query_key_projection(config: SimplifiedConfig, kv_width: int, value_orthogonal: bool = False) -> Linear:
    """The fused projection whose first `d` rows are W^Q (initialised with `query_init_std`, see `_init_weights`),
    followed by `kv_width` rows of W^K (and W^V)."""
    return Linear(
        config.hidden_size,
        config.hidden_size + kv_width,
        bias=config.attention_bias,
        query_init_std=config.query_init_std,
        value_orthogonal=value_orthogonal,
    )


class HeadScale(nn.Module):
    """NormFormer's head-wise scaling γ_h (init 1) of a `(B, T, H, D)` tensor."""

    def __init__(self, num_heads: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(num_heads))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.weight[:, None]


# ----------------------------------------------------------------------------------------------------------------
# Shaped attention
# ----------------------------------------------------------------------------------------------------------------
#: Attention implementations that apply the mask `SimplifiedModel` builds from the caller's inputs. With them, in a
#: call that holds every key, the centring term may be a `RunningMean`; any other (a serving engine's, continuous
#: batching's paged kernels, a Hub kernel) computes C·X with its own attention call, which sees its own cache and mask.
OWN_KERNELS = frozenset({"sdpa", "flex_attention", "flash_attention_2", "flash_attention_3"})


@dataclass(frozen=True)
class RunningMean:
    """`C·X` of eq. 5 without an attention call, for a forward that holds every key itself (nothing cached before it,
    one sequence per row): query i averages the real keys up to itself (causal) or all real keys (bidirectional).
    `key_mask`: the caller's `(B, T)` padding mask (1 = real token), None when every token is real. O(T) time and
    memory, where the zero-query attention call it equals is O(T²)."""

    key_mask: torch.Tensor | None

    def __call__(self, values: torch.Tensor, causal: bool) -> torch.Tensor:
        """`values` `(B, H, T, D)` → `(B, T, H, D)` (bidirectional: `(B, 1, H, D)`, shared by the queries), computed in
        at least float32; zero where a query has no real key."""
        batch, heads, length, dim = values.shape
        compute = torch.promote_types(values.dtype, torch.float32)
        tokens = values.transpose(1, 2).to(compute).reshape(batch, length, heads * dim)  # a view of the projection
        if self.key_mask is None:
            counts = torch.ones(length, device=values.device, dtype=compute).expand(batch, -1)
        else:
            # (a static cache's 2-D mask runs to the cache's length; this call's tokens are its first columns)
            counts = self.key_mask[:, :length].to(device=values.device, dtype=compute)
            tokens = torch.where(counts[:, :, None] > 0, tokens, 0.0)
        if causal:
            sums, counts = running_sum(tokens), counts.cumsum(-1)
        else:
            sums, counts = tokens.sum(1, keepdim=True), counts.sum(-1, keepdim=True)
        return (sums / counts.clamp(min=1)[:, :, None]).view(batch, -1, heads, dim).to(values.dtype)

    def adjoint(self, grad: torch.Tensor, causal: bool) -> torch.Tensor:
        """`Cᵀ·grad`, the gradient with respect to the values of the centring term `C·X`, for `grad` `(B, T, H, D)` (a
        result per query): `(B, H, T, D)` in `grad`'s dtype, computed in at least float32. Key j gets
        `mask_j·Σ_{i ≥ j} grad_i / n_i` (causal, `n_i` the real keys up to query i) or `mask_j·Σ_i grad_i / n`
        (bidirectional): a reverse running sum, O(T) where the kernel's backward is O(T²)."""
        batch, length, heads, dim = grad.shape
        compute = torch.promote_types(grad.dtype, torch.float32)
        grad = grad.to(compute).reshape(batch, length, heads * dim)
        if self.key_mask is None:
            counts = torch.ones(length, device=grad.device, dtype=compute).expand(batch, -1)
        else:
            counts = self.key_mask[:, :length].to(device=grad.device, dtype=compute)
        if causal:
            per_query = grad / counts.cumsum(-1).clamp(min=1)[:, :, None]
            # Σ_{i ≥ j} = the total − Σ_{i ≤ j} + the term at j
            keys = per_query.sum(1, keepdim=True) - running_sum(per_query) + per_query
        else:
            keys = (grad.sum(1, keepdim=True) / counts.sum(-1, keepdim=True).clamp(min=1)[:, :, None]).expand_as(grad)
        if self.key_mask is not None:
            keys = keys * counts[:, :, None]
        return keys.view(batch, length, heads, dim).transpose(1, 2).to(grad.dtype)


class _KernelCentre(torch.autograd.Function):
    """The centring term `C·X` as the attention kernel computed it (its zero-query call, rounded as `A·X` is: shaped
    attention stays exactly the identity at init in 16 bits), differentiated in closed form by
    `RunningMean.adjoint` instead of by the kernel's backward (O(T²) for a gradient that is a reverse running sum).
    `C` depends on the values only: the keys and the all-zero queries get no gradient, as the kernel's backward
    would give them."""

    @staticmethod
    def forward(ctx, values, centre, running_mean: "RunningMean", causal: bool):
        ctx.running_mean, ctx.causal = running_mean, causal
        return centre.view_as(centre)

    @staticmethod
    def backward(ctx, grad):
        return ctx.running_mean.adjoint(grad, ctx.causal), None, None, None


class SoftmaxMixing(nn.Module):
    """Plain attention: the output of the attention interface as is."""

    centred = False

    def forward(
        self, attn_output, attn_weights, values, current_values, centre=None, centre_weights=None, query_start=0
    ):
        return attn_output, attn_weights


class HeadGain(Gain):
    """A per-head gain of shaped attention (shape `(H,)`, or `(1,)` shared by the heads) on `(B, T, H, ·)` tensors."""

    def _gain(self) -> torch.Tensor:
        return self.weight[:, None]


class ShapedMixing(nn.Module):
    """Shaped attention (eq. 5): `α·X + β·A(X)·X − γ·C·X` per head. `A(X)·X` is the attention call's output with values
    X; `C·X` is the same call with all-zero queries: softmax over equal logits is uniform over exactly the keys the
    mask allows, so the mask, cache and kernel at hand (an engine's included) define C as they define A. With W^Q = 0
    and β = γ it is exactly the identity. Without centring (`γ` absent) it is Value-SkipInit's `α·I + β·A` (eq. 4)."""

    def __init__(self, config: SimplifiedConfig):
        super().__init__()
        shape = (config.num_attention_heads,) if config.shaped_gains_per_head else (1,)
        trainable = config.shaped_gains_trainable
        self.alpha = HeadGain(config.shaped_alpha_init, shape, trainable)
        self.beta = HeadGain(config.shaped_beta_init, shape, trainable)
        self.gamma = HeadGain(config.shaped_gamma_init, shape, trainable) if config.centre_attention else None
        self.centred = config.centre_attention
        self.num_key_value_groups = config.num_attention_heads // config.num_key_value_heads

    def forward(
        self, attn_output, attn_weights, values, current_values, centre=None, centre_weights=None, query_start=0
    ):
        """`attn_output` and `centre` (C·X) `(B, T, H, D)`; `values`, every key's `(B, H_kv, Tk, D)` (cache included),
        and `current_values`, this step's, are repeated per query head (grouped-query). Eager attention's weights `A`
        and `centre_weights` `C` `(B, H, Tq, Tk)` give the effective matrix `α·I + β·A − γ·C` (the identity at key
        `query_start + i`): returned, and the output computed from it, so that it is in the autograd graph. Where the
        queries' keys are unknown (`query_start` None: an engine's cache), the output is the combination, no matrix."""
        if attn_weights is not None and query_start is not None:
            weights = self.effective_weights(attn_weights, centre_weights, query_start)
            values = repeat_kv(values, self.num_key_value_groups)
            return (weights @ values.to(weights.dtype)).transpose(1, 2).to(values.dtype), weights
        values = repeat_kv(current_values, self.num_key_value_groups).transpose(1, 2)
        # the gains are called, never read: accelerate's offload hooks load weights when a module runs
        gamma = None if self.gamma is None else self.gamma()
        return shaped_combination(values, attn_output, centre, self.alpha(), self.beta(), gamma), None

    def effective_weights(self, attn_weights, centre_weights, query_start):
        """`α·I + β·A − γ·C` as a `(B, H, Tq, Tk)` matrix; in 16 bits `α·I + (β·A − γ·C)`, exactly `α·I` where `A = C`
        and `β = γ` (as `shaped_combination` orders it)."""
        b, h, q_len, k_len = attn_weights.shape
        eye = torch.zeros(q_len, k_len, device=attn_weights.device, dtype=attn_weights.dtype)
        eye[torch.arange(q_len), torch.arange(q_len) + query_start] = 1.0
        per_head = lambda m: m.to(attn_weights.dtype).expand(b, h, q_len, k_len).transpose(1, 2)  # noqa: E731
        if self.gamma is not None and attn_weights.dtype.itemsize < 4:
            shaped = self.beta(per_head(attn_weights)) - self.gamma(per_head(centre_weights))
            return self.alpha(per_head(eye), residual=shaped).transpose(1, 2).to(attn_weights.dtype)
        weights = self.beta(per_head(attn_weights), residual=self.alpha(per_head(eye)))
        if self.gamma is not None:
            weights = self.gamma(per_head(centre_weights), residual=weights, value=-1.0)
        return weights.transpose(1, 2).to(attn_weights.dtype)


def repeat_kv(hidden_states: torch.Tensor, n_rep: int) -> torch.Tensor:
    """Grouped-query attention: `(B, H_kv, T, D)` → `(B, H_kv·n_rep, T, D)`, each key/value head serving `n_rep`
    consecutive query heads (`torch.repeat_interleave` on dim 1, as Llama's)."""
    if n_rep == 1:
        return hidden_states
    batch, kv_heads, length, head_dim = hidden_states.shape
    hidden_states = hidden_states[:, :, None].expand(batch, kv_heads, n_rep, length, head_dim)
    return hidden_states.reshape(batch, kv_heads * n_rep, length, head_dim)


def eager_attention_forward(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """Reference attention that materialises the weights (`attn_implementation="eager"`); grouped-query keys and
    values are repeated per query head (`module.num_key_value_groups`)."""
    key, value = repeat_kv(key, module.num_key_value_groups), repeat_kv(value, module.num_key_value_groups)
    attn_weights = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        if attention_mask.dtype == torch.bool:
            attention_mask = torch.zeros_like(attention_mask, dtype=query.dtype).masked_fill(
                ~attention_mask, torch.finfo(query.dtype).min
            )
        attn_weights = attn_weights + attention_mask
    attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)
    attn_weights = F.dropout(attn_weights, p=dropout, training=module.training)
    return torch.matmul(attn_weights, value).transpose(1, 2).contiguous(), attn_weights


def _attends_in_full_precision(query: torch.Tensor) -> bool:
    """Whether the attention call computes in float32 or wider (no autocast, float32 queries): only then may the
    centring term be a `RunningMean`. In 16 bits the kernel rounds `A·X` its own way (block order, 16-bit
    probabilities), which no running mean reproduces, so `C·X` is the same kernel's zero-query call: with W^Q = 0 the
    two calls get equal inputs and return equal outputs, and shaped attention stays exactly the identity."""
    return query.dtype.itemsize >= 4 and not autocast_enabled(query.device)


#: kernels that compute in 16 bits only (their float32 inputs are refused), so attention cannot be upcast for them
SIXTEEN_BIT_KERNELS = frozenset({"flash_attention_2", "flash_attention_3"})


def attend_in_float32(attention_interface: Callable) -> Callable:
    """`attention_interface` computing in float32 on 16-bit queries, keys and values (autocast off), its output
    rounded once to their dtype: attention whose bf16 result does not depend on how the rows are laid out (a padded
    batch or one packed row; the CPU kernel's 16-bit sums run in a layout-dependent order)."""

    def attend(module, query, key, value, attention_mask, **kwargs):
        if query.dtype.itemsize >= 4:
            return attention_interface(module, query, key, value, attention_mask, **kwargs)
        with torch.autocast(query.device.type, enabled=False):
            output, weights = attention_interface(
                module, query.float(), key.float(), value.float(), attention_mask, **kwargs
            )
        return output.to(query.dtype), None if weights is None else weights.to(query.dtype)

    return attend


def _cache_length(cache: Cache | None, layer_idx: int) -> int | torch.Tensor | None:
    """Tokens already cached, read before `update` (a static cache advances its length tensor in place); None for a
    cache that is not transformers' `Cache` (continuous batching's paged cache, which holds many sequences)."""
    if cache is None:
        return 0
    if not isinstance(cache, Cache):
        return None
    length = cache.get_seq_length(layer_idx)
    return length.clone() if isinstance(length, torch.Tensor) else length


class SimplifiedAttention(nn.Module):
    """Multi-head attention with optional identity values/projections (paper §4.2) and shaped attention (eq. 5).

    Queries, keys and values come from one fused matmul (or two when values are the identity). Every mixing goes
    through the attention interface, as Llama's: the softmax term `A·X`, and for shaped attention the centring term
    `C·X` (the same call with zero queries, or a `RunningMean` where that is equal and cheaper).
    """

    def __init__(self, config: SimplifiedConfig, layer_idx: int):
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.num_heads = config.num_attention_heads
        self.num_key_value_heads = config.num_key_value_heads
        self.num_key_value_groups = self.num_heads // self.num_key_value_heads  # read by the attention interface
        self.head_dim = config.head_dim
        self.scaling = self.head_dim**-0.5
        self.is_causal = config.is_causal is not False
        self.attention_dropout = config.attention_dropout
        value_mode = config.first_layer_value_mode if layer_idx == 0 else config.value_mode
        # fused unless the value bias must stay frozen while the query/key bias trains
        fused = value_mode == "linear" and not (config.frozen_biases and config.attention_bias)
        self.qkv = FusedQKV(config) if fused else QKWithValue(config, value_mode, layer_idx)
        self.q_norm = build_norm(config.qk_norm, self.head_dim, config)
        self.k_norm = build_norm(config.qk_norm, self.head_dim, config)
        self.mixing = ShapedMixing(config) if config.attention_type == "shaped" else SoftmaxMixing()
        self.head_scale = HeadScale(self.num_heads) if config.head_scale != "none" else nn.Identity()
        self.o_proj = build_matrix(config.projection_mode, config, 2 * layer_idx + 1, _output_init_std(config))
        self.scale_before_proj = config.head_scale == "before_proj"
        self.dropout = nn.Dropout(config.hidden_dropout)
        # NormFormer's LayerNorm after attention makes its small branch a unit-scale term of the residual stream, so
        # a 16-bit kernel's layout-dependent rounding would reach the logits: it attends in float32 (§8.6)
        self.attends_in_float32 = bool(config.attn_branch_norm)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
        running_mean: RunningMean | None = None,
        **kwargs,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """`running_mean`: given by the model when this call holds every key (none cached before it, one sequence per
        row)."""
        cache: Cache | None = kwargs.pop(CACHE_FIELD, None)  # the name gradient checkpointing clears
        input_shape = hidden_states.shape[:-1]
        heads = lambda t: t.view(*input_shape, -1, self.head_dim).transpose(1, 2)  # noqa: E731
        query, key, value = (heads(t) for t in self.qkv(hidden_states))  # keys, values: num_key_value_heads
        query, key = apply_rotary(self.q_norm(query), self.k_norm(key), position_embeddings)
        query_start, current_value = _cache_length(cache, self.layer_idx), value
        if cache is not None:  # (`kwargs=`: a paged cache reads its indices from them and updates them in place)
            key, value = cache.update(key, value, self.layer_idx, kwargs=kwargs)

        implementation = self.config._attn_implementation
        attention_interface: Callable = ALL_ATTENTION_FUNCTIONS.get_interface(implementation, eager_attention_forward)
        if self.attends_in_float32 and implementation not in SIXTEEN_BIT_KERNELS:
            attention_interface = attend_in_float32(attention_interface)
        attend = lambda q, dropout: attention_interface(  # noqa: E731
            self, q, key, value, attention_mask, dropout=dropout, scaling=self.scaling, **kwargs
        )
        per_head = lambda t: t.reshape(*input_shape, -1, self.head_dim)  # noqa: E731  (from [T, H·D] too; local heads)
        attn_output, attn_weights = attend(query, self.attention_dropout if self.training else 0.0)
        centre = centre_weights = None
        own_keys = running_mean is not None and self.config._attn_implementation in OWN_KERNELS
        if self.mixing.centred and own_keys and _attends_in_full_precision(query):
            centre = running_mean(repeat_kv(current_value, self.num_key_value_groups), self.is_causal)
        elif self.mixing.centred and own_keys and torch.is_grad_enabled():
            with torch.no_grad():  # the kernel's rounding forward; `RunningMean.adjoint`'s gradient backward
                centre = per_head(attend(torch.zeros_like(query), 0.0)[0])
            values = repeat_kv(current_value, self.num_key_value_groups)
            centre = _KernelCentre.apply(values, centre, running_mean, self.is_causal)
        elif self.mixing.centred:  # softmax over all-zero logits is uniform over the keys the mask and cache allow
            centre, centre_weights = attend(torch.zeros_like(query), 0.0)
            centre = per_head(centre)
        attn_output, attn_weights = self.mixing(
            attn_output=per_head(attn_output),
            attn_weights=attn_weights,
            values=value,
            current_values=current_value,
            centre=centre,
            centre_weights=centre_weights,
            query_start=query_start,
        )
        return self.dropout(self._project(attn_output)), attn_weights

    def _project(self, attn_output: torch.Tensor) -> torch.Tensor:
        """W^O with NormFormer's head scale before it (the paper) or after it (fairseq)."""
        batch, q_len = attn_output.shape[:2]
        if self.scale_before_proj:
            attn_output = self.head_scale(attn_output)
        out = self.o_proj(attn_output.reshape(batch, q_len, -1))
        if self.scale_before_proj:
            return out
        return self.head_scale(out.view(batch, q_len, self.num_heads, -1)).view(batch, q_len, -1)


# ----------------------------------------------------------------------------------------------------------------
# Blocks
# ----------------------------------------------------------------------------------------------------------------
class SimplifiedBlock(GradientCheckpointingLayer):
    """Sequential block (eq. 1): `X̂ = αSA·X + βSA·MHA(Norm1(X))`, `Y = αFF·X̂ + βFF·MLP(Norm2(X̂))`.

    Pre-LN norms the branch inputs; Post-LN norms after each add; NormFormer adds a norm on the attention output
    and ResScale λ on the MLP skip. Every absent part is an `nn.Identity`.
    """

    def __init__(self, config: SimplifiedConfig, layer_idx: int):
        super().__init__()
        d, pre, kind = config.hidden_size, config.norm_position == "pre", config.norm_type
        self.attn_norm = build_norm((config.first_layer_norm if layer_idx == 0 else kind) if pre else "none", d, config)
        self.attn = SimplifiedAttention(config, layer_idx)
        self.attn_out_norm = build_norm(kind if config.attn_branch_norm else "none", d, config)
        self.attn_skip = build_skip(config.attn_skip_gain, config.skip_gains_trainable)
        self.attn_gain = build_gain(config.beta_sa_init, config.block_gains_trainable)
        self.post_attn_norm = build_norm("none" if pre else kind, d, config)
        self.mlp_norm = build_norm(kind if pre else "none", d, config)
        self.mlp = SimplifiedMLP(config)
        self.mlp_skip = (
            Gain(1.0, (d,)) if config.residual_scale else build_skip(config.mlp_skip_gain, config.skip_gains_trainable)
        )
        self.mlp_gain = build_gain(config.beta_ff_init, config.block_gains_trainable)
        self.post_mlp_norm = build_norm("none" if pre else kind, d, config)

    def forward(self, hidden_states: torch.Tensor, **kwargs) -> torch.Tensor:
        attn, _ = self.attn(self.attn_norm(hidden_states), **kwargs)
        residual = self.attn_gain(self.attn_out_norm(attn), residual=self.attn_skip(hidden_states))
        hidden_states = self.post_attn_norm(residual)
        mlp = self.mlp(self.mlp_norm(hidden_states))
        return self.post_mlp_norm(self.mlp_gain(mlp, residual=self.mlp_skip(hidden_states)))


class SimplifiedParallelBlock(GradientCheckpointingLayer):
    """Parallel block (eq. 7, GPT-J / SAS-P): `Y = αcomb·X + βSA·MHA(Norm(X)) + βFF·MLP(Norm(X))`."""

    def __init__(self, config: SimplifiedConfig, layer_idx: int):
        super().__init__()
        d = config.hidden_size
        self.norm = build_norm(config.first_layer_norm if layer_idx == 0 else config.norm_type, d, config)
        self.attn = SimplifiedAttention(config, layer_idx)
        self.attn_out_norm = build_norm(config.norm_type if config.attn_branch_norm else "none", d, config)
        self.attn_gain = build_gain(config.beta_sa_init, config.block_gains_trainable)
        self.mlp = SimplifiedMLP(config)
        self.mlp_gain = build_gain(config.beta_ff_init, config.block_gains_trainable)
        self.skip = (
            Gain(1.0, (d,)) if config.residual_scale else build_skip(config.mlp_skip_gain, config.skip_gains_trainable)
        )

    def forward(self, hidden_states: torch.Tensor, **kwargs) -> torch.Tensor:
        normed = self.norm(hidden_states)
        attn, _ = self.attn(normed, **kwargs)
        out = self.mlp_gain(self.mlp(normed), residual=self.skip(hidden_states))
        return self.attn_gain(self.attn_out_norm(attn), residual=out)


def _output_init_std(config: SimplifiedConfig) -> float:
    """Init std of the residual branches' output matrices (W^O, MLP out): GPT-2 scales them by 1/sqrt(2L)."""
    if config.init_scheme == "gpt2":
        return config.initializer_range / math.sqrt(2 * config.num_hidden_layers)
    return config.initializer_range


# ----------------------------------------------------------------------------------------------------------------
# Models
# ----------------------------------------------------------------------------------------------------------------
class SimplifiedPreTrainedModel(ScalarGainCheckpoints, PaperWeightDecay, QuantizedAfterLoading, PreTrainedModel):
    config_class = SimplifiedConfig
    config: SimplifiedConfig
    base_model_prefix = "model"
    supports_gradient_checkpointing = True
    _no_split_modules = ["SimplifiedBlock", "SimplifiedParallelBlock"]
    _skip_keys_device_placement = ["cache", "past_key_values"]
    _supports_flash_attn = True
    _supports_sdpa = True
    _supports_flex_attn = True
    _supports_attention_backend = True
    _can_compile_fullgraph = True
    _can_record_outputs = {
        "hidden_states": [SimplifiedBlock, SimplifiedParallelBlock],
        "attentions": SimplifiedAttention,
    }
    #: causality when `config.is_causal` is None
    default_is_causal = True

    def __init__(self, config: SimplifiedConfig, *inputs, **kwargs):
        if config.is_causal is None:  # a copy: never flip the caller's config (a later head would inherit it)
            config = copy.deepcopy(config)
            config.is_causal = self.default_is_causal
        super().__init__(config, *inputs, **kwargs)

    @torch.no_grad()
    def _init_weights(self, module: nn.Module):
        """Paper App. D: std `initializer_range` everywhere (embeddings included), W^Q = 0 for the simplified blocks,
        identity / orthogonal / zero where eq. 6 says, gains at their config values."""
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            _init_linear(module, std)
        elif isinstance(module, ScaledEmbedding):  # fairseq's rule: std d^-1/2, so the scaled embeddings are unit-scale
            init.normal_(module.weight, mean=0.0, std=module.embedding_dim**-0.5)
        elif isinstance(module, nn.Embedding):
            init.normal_(module.weight, mean=0.0, std=std)
        elif isinstance(module, (nn.LayerNorm, nn.RMSNorm)):
            if module.weight is not None:
                init.ones_(module.weight)
            if getattr(module, "bias", None) is not None:
                init.zeros_(module.bias)
        elif isinstance(module, Gain):
            init.constant_(module.weight, module.init_value)
        elif isinstance(module, HeadScale):
            init.ones_(module.weight)
        elif isinstance(module, ReparamLinear):
            _init_reparam(module)

    def resize_token_embeddings(
        self, new_num_tokens: int | None = None, pad_to_multiple_of: int | None = None, mean_resizing: bool = True
    ) -> nn.Embedding:
        """Resize to `new_num_tokens` real tokens (`config.vocab_size`). The rows stay padded to
        `config.pad_vocab_size_multiple`, which `pad_to_multiple_of` raises to their least common multiple; padded
        logits are never predicted, so a saved model reloads with the same shapes."""
        if pad_to_multiple_of is not None and not isinstance(pad_to_multiple_of, int):  # transformers' own check
            raise ValueError(
                f"Asking to pad the embedding matrix to a multiple of `{pad_to_multiple_of}`, which is not and integer. "
                "Please make sure to pass an integer"
            )
        if new_num_tokens is None and pad_to_multiple_of is None:
            return self.get_input_embeddings()
        vocab_size = self.config.vocab_size if new_num_tokens is None else new_num_tokens
        multiple = math.lcm(self.config.pad_vocab_size_multiple, pad_to_multiple_of or 1)
        embeddings = super().resize_token_embeddings(vocab_size, multiple, mean_resizing)
        self.config.vocab_size, self.config.pad_vocab_size_multiple = vocab_size, multiple
        return embeddings

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        """transformers' `from_pretrained`, then the config's fixed parameters (frozen gains, `frozen_biases`) are
        frozen again (loading re-creates every parameter as trainable), and under a torchao `quantization_config` the
        matrices transformers leaves in float are quantized (`quantize_every_matrix`)."""
        output_loading_info = kwargs.pop("output_loading_info", False)
        source = args[0] if args else kwargs.get("pretrained_model_name_or_path")
        refuse_unmatched_file(cls, source, kwargs)  # a local file, before transformers logs its load report
        model, info = super().from_pretrained(*args, output_loading_info=True, **kwargs)
        refuse_unmatched_checkpoint(model, info, source)
        for name in model._fixed_parameters:
            model.get_parameter(name).requires_grad_(False)
        quantize_every_matrix(model, ReparamLinear)  # with a torchao quantization_config: eq. 6's and a tied head
        return (model, info) if output_loading_info else model

    def _resolve_parallel_plans(self, distributed_config):
        """transformers' plan resolution, after refusing (one `ValueError`) a config that cannot be sharded."""
        if (getattr(distributed_config, "tp_size", None) or 1) > 1:
            check_tensor_parallel(self.config, distributed_config.tp_size)
        return super()._resolve_parallel_plans(distributed_config)

    def post_init(self):
        super().post_init()
        self._fixed_parameters = [name for name, param in self.named_parameters() if not param.requires_grad]

    def _base_model_outputs(self, fused: bool, head: nn.Linear | None, input_ids, inputs_embeds, **kwargs):
        """`(outputs, tied)`: the base model's outputs on these inputs (`kwargs`: its other arguments). With the fused
        loss (`fused`) and a head tied to the token embedding, the embedding is looked up here, so that its backward
        adds to the head's weight gradient (`tied`, a `TiedHeadGradient`); otherwise the inputs go as given and
        `tied` is None."""
        embedding, tied = self.model.embed_tokens, None
        own_lookup = type(embedding) in (nn.Embedding, ScaledEmbedding)  # (a subclass's forward would be skipped)
        if fused and inputs_embeds is None and own_lookup and TiedHeadGradient.applies(embedding, head, input_ids):
            tied = TiedHeadGradient()
            inputs_embeds = tied.embed(embedding, input_ids)
            if isinstance(embedding, ScaledEmbedding):
                inputs_embeds = inputs_embeds * embedding.embed_scale
            input_ids = None
        return self.model(input_ids=input_ids, inputs_embeds=inputs_embeds, **kwargs), tied

    def initialize_weights(self):
        """Per-module init (`_init_weights`), then the cross-layer ties of eq. 6's W_init, which no single module
        can do (and transformers skips parameter-free modules in custom code)."""
        super().initialize_weights()
        _tie_reparam_inits(self.base_model, self.config)


def _unset(t: torch.Tensor) -> bool:
    return not getattr(t, "_is_hf_initialized", False)


def _init_reparam(module: ReparamLinear):
    if _unset(module.weight_init):
        init.copy_(module.weight_init, module.initial_matrix())
    init.zeros_(module.delta)
    init.constant_(module.alpha, module.alpha_init)
    init.constant_(module.beta, module.beta_init)
    if module.bias is not None:
        init.zeros_(module.bias)


def _init_linear(module: nn.Linear, std: float):
    """The init a `Linear` declares (a plain `nn.Linear`, e.g. one `resize_token_embeddings` made, has `Linear`'s
    defaults): normal (std `init_std`, else `std`) or orthogonal weights, zero bias. A fused query-key(-value)
    projection then re-draws its first `d` rows (W^Q) with `query_init_std` (0 for the simplified blocks) and, for
    Value-SkipInit, makes its value rows orthogonal. Slices lose the loaded flag, so it is checked here."""
    declared = module if isinstance(module, Linear) else Linear
    fresh = _unset(module.weight)
    if declared.orthogonal_init:
        init.orthogonal_(module.weight)
    else:
        init.normal_(module.weight, mean=0.0, std=std if declared.init_std is None else declared.init_std)
    if module.bias is not None:
        init.zeros_(module.bias)
    if declared.query_init_std is None or not fresh:
        return
    d = module.in_features
    module.weight[:d].normal_(0.0, declared.query_init_std)
    if declared.value_orthogonal:  # the value rows: the second half after W^Q's d rows
        torch.nn.init.orthogonal_(module.weight[d + (module.out_features - d) // 2 :])


def _tie_reparam_inits(model: nn.Module, config: SimplifiedConfig):
    """Tie the fixed W_init of eq. 6 across the network (paper Fig. 14 ablations): `all_blocks` makes each block's
    W^P_init = (W^V_init)^T; `last_block` makes the product over all blocks the identity. Only a tied matrix that
    is not set (a new model, or one a checkpoint lacks) is derived, from the others as built or loaded."""
    if config.reparam_tie == "none":
        return
    values = [layer.attn.qkv.value.weight_init for layer in model.layers]
    projections = [layer.attn.o_proj.weight_init for layer in model.layers]
    if values[0].device.type == "meta":
        return
    if config.reparam_tie == "all_blocks":
        for v, p in zip(values, projections):
            if _unset(p):
                p.copy_(v.T)
        return
    if not _unset(projections[-1]):
        return
    product = torch.eye(config.hidden_size, device=values[0].device, dtype=values[0].dtype)
    for i, (v, p) in enumerate(zip(values, projections)):
        product = product @ v.T
        if i < len(values) - 1:
            product = product @ p.T
    projections[-1].copy_(product)


@dataclass(frozen=True)
class LayerPlan:
    """The subnetwork of one training step (RaPTr, Panigrahi et al. 2024, Alg. 1 and App. J).

    Layer i maps `x` to `x + scales[i]·(layer(x) − x)`: its update is scaled (for residual blocks the sum of its
    residual branches; for skipless blocks its deviation from the identity). `scales[i] == 0` bypasses the layer: the
    identity, not computed, its parameters kept in the graph with weight 0 so that DDP sees every parameter used
    and reduces an exact zero gradient for them. Set per step by a training callback, applied only in training
    mode; never saved (not a parameter, buffer or config field).
    """

    scales: tuple[float, ...]


def _check_call_causality(call_causal: bool | None, causal: bool, attention_mask) -> None:
    """A model's causality is its checkpoint's, fixed at load. A call may pass another `is_causal` only with a mask
    it built itself (continuous batching passes False with its own 4-D masks); otherwise the mask built here and
    shaped attention's running mean would disagree."""
    if call_causal is None or bool(call_causal) == causal or isinstance(attention_mask, dict):
        return
    if isinstance(attention_mask, torch.Tensor) and attention_mask.dim() == 4:
        return
    raise ValueError(
        f"is_causal={call_causal} for a model loaded with is_causal={causal}: causality is fixed when the model is "
        f"built. Load it with is_causal={call_causal} (e.g. `from_pretrained(path, is_causal={call_causal})`) or pass "
        "a 4-D attention mask of your own."
    )


def _refuse_packed_rows_in_fixed_cache(position_ids: torch.Tensor, cache: Cache) -> None:
    """Packed rows need their own mask, which indexes the keys by the call's tokens; a fixed-length cache's keys run
    to its length, so that mask cannot apply, and the rows would attend across their sequences."""
    if find_packed_sequence_indices(position_ids) is not None:
        raise ValueError(
            "position_ids restart within a row (packed sequences), which a fixed-length cache "
            f"({type(cache).__name__} of {max_cache_length(cache)} tokens) cannot keep apart. Allowed: cache=None "
            "(use_cache=False), a DynamicCache, or one sequence per row with an attention_mask."
        )


def _in_graph_with_zero_weight(layer: nn.Module) -> torch.Tensor:
    """`0·Σ sum(p)` over the layer's trainable parameters: an exact 0 whose backward gives them zero gradients."""
    return sum(p.sum() for p in layer.parameters() if p.requires_grad) * 0.0


class SimplifiedModel(SimplifiedPreTrainedModel):
    """Embedding (+ positions, + optional norm), the blocks, and the final norm."""

    layer_plan: LayerPlan | None = None  # RaPTr's per-step subnetwork (training only); None = the full model

    def __init__(self, config: SimplifiedConfig):
        super().__init__(config)
        config = self.config  # the layers share the model's config (its resolved `is_causal`, attention backend)
        self.is_causal = bool(config.is_causal)  # fixed here: transformers writes a call's `is_causal` into the config
        self.embed_tokens = build_token_embedding(config)
        self.embed_token_types = TokenTypeEmbedding(config) if config.type_vocab_size else NoTokenTypes()
        self.embed_positions = POSITIONS[config.position_embedding_type](config)
        self.embed_norm = build_norm(config.embedding_norm, config.hidden_size, config)
        self.embed_dropout = nn.Dropout(config.embedding_dropout)
        block = SimplifiedParallelBlock if config.parallel_block else SimplifiedBlock
        self.layers = nn.ModuleList(block(config, i) for i in range(config.num_hidden_layers))
        with torch.no_grad():
            _tie_reparam_inits(self, config)  # W_init is complete after __init__, as after init_weights()
        self.norm = build_norm(config.final_norm, config.hidden_size, config)
        self.gradient_checkpointing = False
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embed_tokens

    def set_input_embeddings(self, value: nn.Embedding):
        self.embed_tokens = value

    @cache_argument
    @merge_with_config_defaults
    @capture_outputs
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        cache: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        token_type_ids: torch.LongTensor | None = None,
        past_key_values: Cache | None = None,
        **kwargs,
    ) -> BaseModelOutputWithPast:
        r"""past_key_values: the older name of `cache` (`cache_argument` passes it on as `cache`)."""
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("SimplifiedModel.forward: pass exactly one of input_ids or inputs_embeds.")
        if inputs_embeds is None:
            inputs_embeds = self.embed_tokens(input_ids)
        causal = self.is_causal
        _check_call_causality(kwargs.get("is_causal"), causal, attention_mask)
        if use_cache and causal and cache is None:
            cache = DynamicCache(config=self.config)
        if not causal:
            cache = None
        past_length = cache.get_seq_length() if isinstance(cache, Cache) else 0
        seq_len = inputs_embeds.shape[1]
        if position_ids is None and kwargs.get("cu_seq_lens_q") is not None and past_length == 0:
            position_ids = positions_from_cu_seq_lens(kwargs["cu_seq_lens_q"], seq_len)  # packed, varlen kwargs only
        given_positions = position_ids is not None
        if self.config.position_embedding_type == "learned" and not is_torchdynamo_compiling():
            check_learned_positions(position_ids, past_length, seq_len, self.config.max_position_embeddings)
        if position_ids is None:
            position_ids = (torch.arange(seq_len, device=inputs_embeds.device) + past_length).unsqueeze(0)

        # packed rows (no mask, given positions restarting at 0; read on the host): attention stays in each sequence.
        # Its mask indexes the keys by this call's tokens, so not with a fixed-length cache, whose keys run further:
        # there packed rows are refused (`generate`'s static-cache prefill gives positions and no mask: compiled, the
        # positions cannot be read, and neither check is made)
        sequence_ids = None
        if given_positions and attention_mask is None and isinstance(past_length, int) and past_length == 0:
            if seq_len > 1 and (cache is None or max_cache_length(cache) < 0):
                sequence_ids = find_packed_sequence_indices(position_ids.expand(inputs_embeds.shape[0], -1))
            elif seq_len > 1 and not is_torchdynamo_compiling():
                _refuse_packed_rows_in_fixed_cache(position_ids, cache)
        mask_fn = create_causal_mask if causal else create_bidirectional_mask
        # no `position_ids` for the mask: transformers' own packed-row detection would re-index `and_mask_function`
        mask_kwargs = {CACHE_FIELD: cache} if causal else {}
        if sequence_ids is not None:
            mask_kwargs["and_mask_function"] = packed_sequence_mask_function(sequence_ids)
        mask = mask_fn(config=self.config, inputs_embeds=inputs_embeds, attention_mask=attention_mask, **mask_kwargs)
        # C·X as a running mean needs this call to hold every key: none cached before it, one sequence a row
        running_mean = None
        if (
            (cache is None or isinstance(cache, Cache))
            and isinstance(past_length, int)
            and past_length == 0
            and sequence_ids is None
            and kwargs.get("cu_seq_lens_q") is None
            and (attention_mask is None or (isinstance(attention_mask, torch.Tensor) and attention_mask.dim() == 2))
        ):
            running_mean = RunningMean(attention_mask)

        inputs_embeds = self.embed_token_types(inputs_embeds, token_type_ids)
        hidden_states, position_embeddings = self.embed_positions(inputs_embeds, position_ids)
        hidden_states = self.embed_dropout(self.embed_norm(hidden_states))
        scales = self.layer_plan.scales if self.training and self.layer_plan is not None else ()
        for i, layer in enumerate(self.layers):
            scale = scales[i] if scales else 1.0
            if scale == 0.0:
                hidden_states = hidden_states + _in_graph_with_zero_weight(layer)
                continue
            output = layer(
                hidden_states,
                attention_mask=mask,
                position_ids=position_ids,  # flash-attention kernels find packed sequences from them
                position_embeddings=position_embeddings,
                running_mean=running_mean,
                **{CACHE_FIELD: cache},
                **kwargs,
            )
            hidden_states = output if scale == 1.0 else torch.lerp(hidden_states, output, scale)
        return BaseModelOutputWithPast(last_hidden_state=self.norm(hidden_states), **{CACHE_FIELD: cache})


class SimplifiedForCausalLM(SimplifiedPreTrainedModel, GenerationMixin):
    _tied_weights_keys = {"lm_head.weight": "model.embed_tokens.weight"}
    _tp_plan = {"lm_head": "colwise_gather_output"}

    def __init__(self, config: SimplifiedConfig):
        super().__init__(config)
        self.model = SimplifiedModel(self.config)
        self.lm_head = Linear(config.hidden_size, config.padded_vocab_size, bias=False)
        self.post_init()

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head

    def set_output_embeddings(self, new_embeddings: nn.Linear):
        self.lm_head = new_embeddings

    #: inductor's options in `compile_for_decoding`: `freezing` makes the weights constants of the graph (float32 ones
    #: prepacked for oneDNN's GEMMs); a producer of more than 8 ops is computed once into a buffer, not inlined into
    #: each row of the one-row reductions that read 16-bit weights (`kernels_simplified.one_row_16bit`), which would
    #: redo it for every weight row (inductor's default, 30, left a norm and a residual add inside them)
    decoding_compile_options = {"freezing": True, "realize_opcount_threshold": 8}
    #: set by `compile_for_decoding`: the weights are constants of the compiled graph, so the model never trains again
    frozen_for_decoding = False

    def compile_for_decoding(self) -> "SimplifiedForCausalLM":
        """The compiled decoding recipe (docs/inference.md), in place: eval mode, `forward` compiled whole by inductor
        with `decoding_compile_options`; decode with `generate(..., cache_implementation="static")`, whose steps all
        have the same shapes. It compiles on the first call (the prompt's graph and a step's). With the weights frozen
        into the graph, `train()` is refused from then on: changed weights would never reach it."""
        self.eval()
        self.forward = torch.compile(self.forward, fullgraph=True, options=dict(self.decoding_compile_options))
        self.frozen_for_decoding = True
        return self

    def train(self, mode: bool = True):
        if mode and self.frozen_for_decoding:
            raise RuntimeError(
                "This model was compiled for decoding (compile_for_decoding): its weights are constants of the "
                "compiled graph, which training would never update. Train a fresh copy (from_pretrained) and compile "
                "it for decoding afterwards."
            )
        return super().train(mode)

    def generate(self, *args, **kwargs):
        """`GenerationMixin.generate`, for causal models only: a bidirectional model (`is_causal=False`, e.g. a
        masked-LM checkpoint) lets earlier tokens attend to later ones, so cached decoding cannot equal recomputing
        the prefix, and neither is the left-to-right model it was not trained as."""
        if not self.config.is_causal:
            raise ValueError(
                "SimplifiedForCausalLM.generate needs a causal model, but config.is_causal is False (a bidirectional, "
                "e.g. masked-LM, checkpoint). Load it with is_causal=True to decode left to right anyway."
            )
        return super().generate(*args, **kwargs)

    @staticmethod
    @cache_argument
    def create_masks_for_generate(
        attention_mask: torch.Tensor | None = None, cache: Cache | None = None, **kwargs
    ) -> torch.Tensor | None:
        """With a static cache, `generate` would pre-build a 4-D mask; keep the 2-D padding mask instead (the model
        builds its mask itself, and shaped attention counts the real keys of its centring term from it), zero-padded
        to the cache's length: every decoding step then has the same input shapes, and a compiled forward never
        recompiles. Unfilled cache slots are no real keys."""
        max_length = max_cache_length(cache) if cache is not None else -1
        if attention_mask is None or attention_mask.dim() != 2 or max_length <= attention_mask.shape[-1]:
            return attention_mask
        return F.pad(attention_mask, (0, max_length - attention_mask.shape[-1]))

    @cache_argument
    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        cache: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        logits_to_keep: int | torch.Tensor = 0,
        skip_logits: bool | None = None,
        past_key_values: Cache | None = None,
        **kwargs,
    ) -> CausalLMOutputWithPast:
        r"""skip_logits: with `labels`, compute the loss without the logits (`linear_cross_entropy`; `logits` is then
        `None`). Default: in training mode; `False` returns the logits too.
        past_key_values: the older name of `cache` (`cache_argument` passes it on as `cache`)."""
        if use_cache is None and labels is not None and self.training:
            use_cache = False  # a training step builds no cache (it would copy every layer's keys and values)
        fused = (self.training if skip_logits is None else skip_logits) and labels is not None
        outputs, tied = self._base_model_outputs(
            fused,
            self.lm_head,
            input_ids,
            inputs_embeds,
            attention_mask=attention_mask,
            position_ids=position_ids,
            cache=cache,
            use_cache=use_cache,
            **kwargs,
        )
        hidden_states = outputs.last_hidden_state
        loss = logits = None
        if fused:
            shift_labels = kwargs.pop("shift_labels", None)
            if shift_labels is None:  # tokens < n predict n, as `ForCausalLMLoss`
                shift_labels = F.pad(labels, (0, 1), value=kwargs.get("ignore_index", -100))[..., 1:]
            loss = linear_cross_entropy(
                hidden_states, self.lm_head, shift_labels, self.config.vocab_size, tied=tied, **kwargs
            )
        else:
            keep = slice(-logits_to_keep, None) if isinstance(logits_to_keep, int) else logits_to_keep
            logits = self.lm_head(hidden_states[:, keep, :])[..., : self.config.vocab_size]
            if labels is not None:
                loss = self.loss_function(logits=logits, labels=labels, vocab_size=self.config.vocab_size, **kwargs)
        return CausalLMOutputWithPast(
            loss=loss,
            logits=logits,
            **{CACHE_FIELD: getattr(outputs, CACHE_FIELD)},
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )


class SimplifiedMLMHead(nn.Module):
    """BERT's masked-LM head: dense → GELU → norm, then the (tied) decoder with its bias."""

    def __init__(self, config: SimplifiedConfig):
        super().__init__()
        self.dense = Linear(config.hidden_size, config.hidden_size)
        self.act = nn.GELU()
        self.norm = build_norm(
            "layernorm" if config.norm_type == "none" else config.norm_type, config.hidden_size, config
        )
        self.decoder = Linear(config.hidden_size, config.padded_vocab_size, bias=True)

    def transform(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.norm(self.act(self.dense(hidden_states)))

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.transform(hidden_states))


class _HeadOnLastHiddenState(SimplifiedPreTrainedModel):
    """The one forward of the heads on a cache-less pass (masked LM, sequence classification): the base model, then
    the subclass's `_logits(last_hidden_state, attention_mask)` and `_loss(logits, labels, **kwargs)`; a head with a
    vocabulary-sized output also has a `_fused_loss(last_hidden_state, labels, **kwargs)` that skips the logits."""

    default_is_causal = False
    output_class: type[MaskedLMOutput] | type[SequenceClassifierOutputWithPast]
    _fused_loss: Callable[..., torch.Tensor] | None = None

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        skip_logits: bool | None = None,
        **kwargs,
    ) -> MaskedLMOutput | SequenceClassifierOutputWithPast:
        r"""skip_logits: as `SimplifiedForCausalLM.forward` (heads with a `_fused_loss`; the classifier always returns
        its logits)."""
        fused = (self.training if skip_logits is None else skip_logits) and labels is not None
        fused = fused and self._fused_loss is not None
        head = self.get_output_embeddings() if fused else None
        kwargs.pop("use_cache", None)  # generic callers pass it (as to BertForMaskedLM); these heads never cache
        outputs, tied = self._base_model_outputs(
            fused,
            head,
            input_ids,
            inputs_embeds,
            attention_mask=attention_mask,
            position_ids=position_ids,
            use_cache=False,
            **kwargs,
        )
        if fused:
            logits, loss = None, self._fused_loss(outputs.last_hidden_state, labels, tied=tied, **kwargs)
        else:
            logits = self._logits(outputs.last_hidden_state, attention_mask)
            loss = None if labels is None else self._loss(logits, labels, **kwargs)
        return self.output_class(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


class SimplifiedForMaskedLM(_HeadOnLastHiddenState):
    _tied_weights_keys = {"mlm_head.decoder.weight": "model.embed_tokens.weight"}
    _tp_plan = {"mlm_head.decoder": "colwise_gather_output"}
    output_class = MaskedLMOutput

    def __init__(self, config: SimplifiedConfig):
        super().__init__(config)
        self.model = SimplifiedModel(self.config)
        self.mlm_head = SimplifiedMLMHead(config)
        self.post_init()

    def get_output_embeddings(self) -> nn.Linear:
        return self.mlm_head.decoder

    def set_output_embeddings(self, new_embeddings: nn.Linear):
        self.mlm_head.decoder = new_embeddings

    def _logits(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        return self.mlm_head(hidden_states)[..., : self.config.vocab_size]

    def _loss(self, logits: torch.Tensor, labels: torch.LongTensor, **kwargs) -> torch.Tensor:
        return self.loss_function(logits=logits, labels=labels, vocab_size=self.config.vocab_size, **kwargs)

    def _fused_loss(self, hidden_states: torch.Tensor, labels: torch.LongTensor, **kwargs) -> torch.Tensor:
        """The loss without the logits: only the masked tokens go through the head (`linear_cross_entropy`)."""
        head = self.mlm_head
        return linear_cross_entropy(
            hidden_states, head.decoder, labels, self.config.vocab_size, head.transform, **kwargs
        )


class SimplifiedForSequenceClassification(_HeadOnLastHiddenState):
    """A linear classifier on one token: the first (`[CLS]`) for encoders, the last real token for decoders."""

    output_class = SequenceClassifierOutputWithPast

    def __init__(self, config: SimplifiedConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.model = SimplifiedModel(self.config)
        self.dropout = nn.Dropout(config.classifier_dropout)
        self.score = Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def _logits(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        rows = torch.arange(hidden_states.shape[0], device=hidden_states.device)
        pooled = hidden_states[rows, self._pooled_index(hidden_states, attention_mask)]
        return self.score(self.dropout(pooled))

    def _loss(self, logits: torch.Tensor, labels: torch.LongTensor, **kwargs) -> torch.Tensor:
        return self.loss_function(labels=labels, pooled_logits=logits, config=self.config, **kwargs)

    def _pooled_index(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """Encoders pool the first real token, decoders the last real one (left or right padding)."""
        batch, seq_len = hidden_states.shape[:2]
        if attention_mask is None:
            attention_mask = torch.ones(batch, seq_len, device=hidden_states.device)
        positions = torch.arange(seq_len, device=hidden_states.device)
        real = attention_mask.to(hidden_states.device).bool()
        if self.config.is_causal:
            return torch.where(real, positions, -1).amax(-1).clamp(min=0)
        return torch.where(real, positions, seq_len).amin(-1).clamp(max=seq_len - 1)


SimplifiedConfig.register_for_auto_class()
SimplifiedModel.register_for_auto_class("AutoModel")
SimplifiedForCausalLM.register_for_auto_class("AutoModelForCausalLM")
SimplifiedForMaskedLM.register_for_auto_class("AutoModelForMaskedLM")
SimplifiedForSequenceClassification.register_for_auto_class("AutoModelForSequenceClassification")

__all__ = [
    "SimplifiedPreTrainedModel",
    "SimplifiedModel",
    "SimplifiedForCausalLM",
    "SimplifiedForMaskedLM",
    "SimplifiedForSequenceClassification",
]
