"""Diagnostics callback (`--diagnostics`): the trajectories the authors track, logged with the train loss.

Per layer i (keys `diag/L{i}/...`):
- `beta_ff`, `beta_sa`: the residual-branch gains βFF, βSA (the trainable `Gain` modules `mlp_gain`, `attn_gain`);
- `alpha_mean`/`alpha_std`, `beta_mean`/`beta_std`, `gamma_mean`/`gamma_std`: shaped attention's per-head α, β, γ
  (eq. 5) over heads;
- layer 0 only, `value_alpha`, `value_beta`: αV, βV of eq. 6's first-layer value `W^V = αV·W_init + βV·ΔW`;
- `kurtosis`: the activation kurtosis of the block output, as in He et al. (2024, *Understanding and minimising
  outlier features*): with `s_j` the mean square of channel j over the batch's tokens, `mean(s²) / mean(s)²`
  (1 when every channel has the same scale, large when a few channels carry outlier features). It is measured
  with forward hooks on the training forward pass of each step that logs.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import TrainerCallback


def activation_kurtosis(hidden: torch.Tensor) -> float:
    """`mean(s²)/mean(s)²` with `s` the per-channel mean square over all tokens of `hidden` (…, d)."""
    s = hidden.detach().float().reshape(-1, hidden.shape[-1]).pow(2).mean(0)
    return float(s.pow(2).mean() / s.mean().pow(2).clamp_min(1e-30))


def _scalar(module: nn.Module) -> float | None:
    weight = getattr(module, "weight", None)
    if isinstance(weight, torch.Tensor) and weight.numel() == 1:
        return float(weight.detach())
    return None


def gain_statistics(model: nn.Module) -> dict[str, float]:
    """The gains of every layer of a simplified model (see the module docstring); absent parts are skipped."""
    stats: dict[str, float] = {}
    layers = getattr(getattr(model, "base_model", model), "layers", [])
    for i, layer in enumerate(layers):
        for key, name in (("beta_ff", "mlp_gain"), ("beta_sa", "attn_gain")):
            value = _scalar(getattr(layer, name, None))
            if value is not None:
                stats[f"diag/L{i}/{key}"] = value
        mixing = getattr(getattr(layer, "attn", None), "mixing", None)
        for key in ("alpha", "beta", "gamma"):
            gain = getattr(mixing, key, None)
            if gain is not None and hasattr(gain, "weight"):
                w = gain.weight.detach().float()
                stats[f"diag/L{i}/{key}_mean"] = float(w.mean())
                stats[f"diag/L{i}/{key}_std"] = float(w.std()) if w.numel() > 1 else 0.0
        value = getattr(getattr(getattr(layer, "attn", None), "qkv", None), "value", None)
        if i == 0 and value is not None and isinstance(getattr(value, "alpha", None), torch.Tensor):
            stats[f"diag/L{i}/value_alpha"] = float(value.alpha.detach())
            stats[f"diag/L{i}/value_beta"] = float(value.beta.detach())
    return stats


class DiagnosticsCallback(TrainerCallback):
    """Hooks the blocks of `model`; on each step that logs, records their output kurtosis. `collect()` returns the
    gains and the last kurtosis values; `SimplifiedTrainer.log` merges them into the train logs."""

    def __init__(self, model: nn.Module):
        self.capture = False
        self.kurtosis: dict[int, float] = {}
        layers = getattr(getattr(model, "base_model", model), "layers", [])
        self.handles = [layer.register_forward_hook(self._hook(i)) for i, layer in enumerate(layers)]

    def _hook(self, index: int):
        def hook(module, args, output):
            if self.capture and module.training:
                hidden = output[0] if isinstance(output, tuple) else output
                self.kurtosis[index] = activation_kurtosis(hidden)

        return hook

    def on_step_begin(self, args, state, control, **kwargs):
        step = state.global_step + 1
        self.capture = step % max(1, args.logging_steps) == 0 or (step == 1 and args.logging_first_step)

    def on_step_end(self, args, state, control, **kwargs):
        self.capture = False

    def on_train_end(self, args, state, control, **kwargs):
        for handle in self.handles:
            handle.remove()
        self.handles = []

    def collect(self, model: nn.Module) -> dict[str, float]:
        stats = gain_statistics(model)
        stats.update({f"diag/L{i}/kurtosis": k for i, k in sorted(self.kurtosis.items())})
        return stats
