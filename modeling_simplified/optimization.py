"""AdamW parameter groups: weight decay on matrices only (paper App. D.1 exempts the scalar gains; we also exempt
norms and biases)."""

from torch import nn


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Two AdamW groups: weight decay on the trainable matrices (linear weights, embeddings, eq. 6's ΔW), none on
    anything else: the scalar and vector gains (α, β, γ, βSA, βFF, αV, βV, λ, head scales), norms and biases."""
    decay, no_decay = [], []
    for param in model.parameters():
        if param.requires_grad:
            (decay if param.dim() >= 2 else no_decay).append(param)
    # tied weights appear once in model.parameters()
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
