"""Tensor parallelism for the simplified-transformers model: `from_pretrained(..., tp_plan="auto")` under torchrun,
with the plan `SimplifiedConfig.base_model_tp_plan` (docs/tensor_parallel.md).

A rank holds a contiguous share of the heads: its rows of W^Q, W^K, W^V (each part of the fused projection sharded
on its own), its per-head gains, and for identity values its heads' slice of X. W^O and W_out are rowwise
(all-reduce); an identity (or eq. 6) W^O instead gathers the ranks' heads, which are then slices of d. Eq. 6
matrices run whole on every rank (replicated, not sharded). The `simplified_*` styles below are registered with
transformers' `ALL_PARALLEL_STYLES` when this module is imported (the modeling file imports it), where the installed
transformers has `transformers.distributed.tensor_parallel` (5.4 has not; 5.24 has).

Shipped to the Hub next to the modeling file: it imports only torch, transformers and the configuration.
"""

import torch
from torch import nn

from .configuration_simplified import GATED_ACTIVATIONS, SimplifiedConfig

try:
    import torch.distributed as dist
    from torch.distributed.tensor import Shard, distribute_tensor
    from torch.distributed.tensor.placement_types import _StridedShard
    from transformers.distributed.parallel_utils import _AllReduceBackward
    from transformers.distributed.tensor_parallel import (
        ALL_PARALLEL_STYLES,
        ColwiseParallel,
        PackedColwiseParallel,
        ReplicatedWithGradAllReduce,
        RowwiseParallel,
        TensorParallelLayer,
    )
except ImportError:  # torch without distributed, or a transformers without `transformers.distributed.tensor_parallel`
    ALL_PARALLEL_STYLES = None
    TensorParallelLayer = PackedColwiseParallel = object


def tensor_parallel_problems(config: SimplifiedConfig, tp_size: int) -> list[str]:
    """What keeps `config` from being sharded over `tp_size` ranks (empty: it can be; one rank shards nothing)."""
    problems = []
    if tp_size <= 1:
        return problems
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
    if kv_heads != heads:
        problems.append(
            f"num_key_value_heads={kv_heads} differs from num_attention_heads={heads} (grouped-query attention: the "
            "fused query/key/value projection's parts have unequal widths and are not sharded)"
        )
    if heads % tp_size:
        problems.append(f"num_attention_heads={heads} is not divisible by tp_size={tp_size}")
    if config.intermediate_size % tp_size:
        problems.append(f"intermediate_size={config.intermediate_size} is not divisible by tp_size={tp_size}")
    if config.mlp_act_norm and config.hidden_act in GATED_ACTIVATIONS:
        problems.append(f"mlp_act_norm=True with the gated hidden_act={config.hidden_act!r}")
    return problems


def check_tensor_parallel(config: SimplifiedConfig, tp_size: int) -> None:
    """Raise one `ValueError` naming every field that keeps `config` from being sharded over `tp_size` ranks."""
    problems = tensor_parallel_problems(config, tp_size)
    if problems:
        raise ValueError(
            f"Tensor parallelism over tp_size={tp_size} ranks cannot shard this SimplifiedConfig "
            f"(block_type={config.block_type!r}): {'; '.join(problems)}. It shards every block type with multi-head "
            "attention (num_key_value_heads == num_attention_heads) whose num_attention_heads and intermediate_size "
            "are divisible by tp_size (and no mlp_act_norm with a gated activation); see docs/tensor_parallel.md."
        )


def _tp_rank_and_size(mesh) -> tuple[int, int]:
    return mesh.get_local_rank(), mesh.size()


def _shard_parameter(module: nn.Module, name: str, mesh, placement) -> None:
    meta = module._parameters.get(name)
    if meta is not None:
        distributed = distribute_tensor(meta, mesh, [placement], src_data_rank=None)
        module._parameters[name] = nn.Parameter(distributed, requires_grad=meta.requires_grad)


class _GatherLastDim(torch.autograd.Function):
    """The ranks' slices of the last dim, concatenated in rank order; backward, this rank's slice of the gradient
    (what follows runs replicated, so every rank holds the whole, identical gradient)."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        parts = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]
        dist.all_gather(parts, x.contiguous(), group=group)
        return torch.cat(parts, dim=-1)

    @staticmethod
    def backward(ctx, grad):
        return grad.chunk(dist.get_world_size(ctx.group), dim=-1)[dist.get_rank(ctx.group)].contiguous(), None


class PackedPartsColwise(PackedColwiseParallel):
    """A fused projection of `parts` equal parts stacked on the output rows (`[W^Q; W^K(; W^V)]`, `[gate; up]`): each
    part sharded colwise, so a rank's rows are its slice of every part, in order (its biases too: transformers'
    `packed_colwise` shards a 1-D bias contiguously). `parts=None`: `out_features // in_features` (the attention
    projections, all `d` wide). The forward splits by the local widths (`_split_parts`)."""

    def __init__(self, parts: int | None = None):
        super().__init__(split_factor=parts or 1)
        self.parts = parts

    def shard_param(self, module, param, mesh):
        parts = self.parts or module.out_features // module.in_features
        _shard_parameter(module, param, mesh, _StridedShard(dim=0, split_factor=parts))


class _LinearOrWhole(TensorParallelLayer):
    """A matrix that is a learned `Linear` (sharded by `linear_style`, transformers' own) or an identity / eq. 6 matrix,
    which runs whole on every rank with the subclass's transforms around it."""

    linear_style: TensorParallelLayer | None = None

    def shard_param(self, module, param, mesh):
        if isinstance(module, nn.Linear):
            self.linear_style.shard_param(module, param, mesh)

    def install_forward(self, module, mesh):
        if isinstance(module, nn.Linear):
            return self.linear_style.install_forward(module, mesh)
        return super().install_forward(module, mesh)


class LocalHeadsOfValues(_LinearOrWhole):
    """Values outside the fused projection: a learned `Linear` is colwise; an identity (X itself) or eq. 6 W^V runs
    whole on every rank and each rank keeps its heads' slice of the output (backward: the ranks' gradients summed)."""

    linear_style = ColwiseParallel() if ALL_PARALLEL_STYLES is not None else None

    def transform_output_post_forward(self, module, output, mesh):
        rank, size = _tp_rank_and_size(mesh)
        output = _AllReduceBackward.apply(output, mesh.get_group())
        return output.chunk(size, dim=-1)[rank]


class GatheredHeadsProjection(_LinearOrWhole):
    """W^O: a learned `Linear` is rowwise (its input is the rank's heads, the outputs all-reduced); an identity or
    eq. 6 W^O gets the ranks' heads gathered into the whole `d` and runs replicated."""

    linear_style = RowwiseParallel() if ALL_PARALLEL_STYLES is not None else None

    def transform_inputs_pre_forward(self, module, args, kwargs, mesh):
        return (_GatherLastDim.apply(args[0], mesh.get_group()), *args[1:]), kwargs


class PerHeadGain(TensorParallelLayer):
    """A per-head gain or scale (`HeadGain`, `HeadScale`, shape `(H,)`): sharded by heads, used as the rank's local
    slice. A gain shared by the heads (`(1,)`) stays replicated, its gradient summed over the ranks' heads."""

    shared = ReplicatedWithGradAllReduce() if ALL_PARALLEL_STYLES is not None else None

    def shard_param(self, module, param, mesh):
        if module._parameters[param].shape[0] > 1:
            _shard_parameter(module, param, mesh, Shard(0))

    def install_forward(self, module, mesh):
        if module.weight.shape[0] == 1:
            return self.shared.install_forward(module, mesh)
        return super().install_forward(module, mesh)

    def should_use_local_tensors(self, module):
        return True


if ALL_PARALLEL_STYLES is not None:
    ALL_PARALLEL_STYLES.register("simplified_qkv_colwise", PackedPartsColwise())
    ALL_PARALLEL_STYLES.register("simplified_gate_up_colwise", PackedPartsColwise(parts=2))
    ALL_PARALLEL_STYLES.register("simplified_local_heads", LocalHeadsOfValues())
    ALL_PARALLEL_STYLES.register("simplified_gather_heads", GatheredHeadsProjection())
    ALL_PARALLEL_STYLES.register("simplified_per_head", PerHeadGain())
