"""Diagnostics callback (`--diagnostics`): the trajectories the authors track, logged with the train loss.

Per layer i, by name (`DiagnosticsCallback.layers()`, `TrainResult.layers`; logged as `diag/L{i}/<name>`):
- `beta_ff`, `beta_sa`: the residual-branch gains βFF, βSA (the trainable `Gain` modules `mlp_gain`, `attn_gain`);
- `alpha_mean`/`alpha_std`, `beta_mean`/`beta_std`, `gamma_mean`/`gamma_std`: shaped attention's per-head α, β, γ
  (eq. 5) over heads;
- layer 0 only, `value_alpha`, `value_beta`: αV, βV of eq. 6's first-layer value `W^V = αV·W_init + βV·ΔW`;
- `kurtosis`: the activation kurtosis of the block output, as in He et al. (2024, *Understanding and minimising
  outlier features*): with `s_j` the mean square of channel j over the batch's tokens, `mean(s²) / mean(s)²`
  (1 when every channel has the same scale, large when a few channels carry outlier features). It is measured
  with forward hooks on the training forward pass of each step that logs;
- `token_cosine_init`, `token_cosine_end`: signal propagation, the mean cosine similarity between the block
  output's token representations (every pair of distinct tokens of a sequence, averaged over the sequences of the
  first evaluation batch, at most 8), before the first step and after the last, in eval mode. Near 1 means rank
  collapse: every token carries the same representation (Dong et al. 2021, as He & Hofmann §4.1 cite it);
- `token_rank_init`, `token_rank_end`: the same probe's normalised effective rank of a sequence's token matrix
  (`effective_rank`): 1 when the tokens' singular values are all equal, 1/min(n, d) when every token is the same.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from transformers import TrainerCallback


def activation_kurtosis(hidden: torch.Tensor) -> float:
    """`mean(s²)/mean(s)²` with `s` the per-channel mean square over all tokens of `hidden` (…, d)."""
    s = hidden.detach().float().reshape(-1, hidden.shape[-1]).pow(2).mean(0)
    return float(s.pow(2).mean() / s.mean().pow(2).clamp_min(1e-30))


def token_cosine_similarity(hidden: torch.Tensor, mask: torch.Tensor | None = None) -> float:
    """Mean over sequences of the mean cosine similarity of every pair of distinct (unmasked) tokens of `hidden`
    (batch, T, d), as `(‖Σ u‖² − n) / (n(n − 1))` over the unit vectors u of a sequence's n tokens: no T×T tensor."""
    units = torch.nn.functional.normalize(hidden.detach().float(), dim=-1)
    keep = torch.ones(units.shape[:2], device=units.device) if mask is None else mask.to(units.device).float()
    units = units * keep[..., None]
    n = keep.sum(-1)
    pairs = (units.sum(1).pow(2).sum(-1) - n) / (n * (n - 1)).clamp_min(1)
    return float(pairs[n > 1].mean())


def effective_rank(hidden: torch.Tensor, mask: torch.Tensor | None = None) -> float:
    """Mean over sequences of the normalised effective rank (Roy & Vetterli 2007) of the (unmasked) token matrix of
    `hidden` (batch, T, d): `exp(H(p)) / min(n, d)` with `p` the singular values over their sum; rank collapse
    (every token the same) gives 1/min(n, d); NaN where a sequence's tokens are not finite."""
    ranks = []
    for i, tokens in enumerate(hidden.detach().float()):
        if mask is not None:
            tokens = tokens[mask[i].to(tokens.device).bool()]
        if tokens.shape[0] < 2:
            continue
        if not torch.isfinite(tokens).all():  # a diverged model: no SVD of NaNs, the probe reads NaN as the cosine does
            ranks.append(math.nan)
            continue
        sigma = torch.linalg.svdvals(tokens)
        p = sigma / sigma.sum().clamp_min(1e-30)
        entropy = -(p * p.clamp_min(1e-30).log()).sum()
        ranks.append(float(entropy.exp()) / min(tokens.shape))
    return sum(ranks) / len(ranks)


#: one layer's diagnostics by name ("beta_ff", "alpha_mean", "kurtosis", "token_cosine_end", ...)
LayerStats = dict[str, float]


def _scalar(module: nn.Module) -> float | None:
    weight = getattr(module, "weight", None)
    if isinstance(weight, torch.Tensor) and weight.numel() == 1:
        return float(weight.detach())
    return None


def layer_gains(model: nn.Module) -> list[LayerStats]:
    """The gains of every layer of a simplified model by name (see the module docstring); absent parts are
    skipped."""
    stats: list[LayerStats] = []
    for i, layer in enumerate(getattr(getattr(model, "base_model", model), "layers", [])):
        row: LayerStats = {}
        for key, name in (("beta_ff", "mlp_gain"), ("beta_sa", "attn_gain")):
            value = _scalar(getattr(layer, name, None))
            if value is not None:
                row[key] = value
        mixing = getattr(getattr(layer, "attn", None), "mixing", None)
        for key in ("alpha", "beta", "gamma"):
            gain = getattr(mixing, key, None)
            if gain is not None and hasattr(gain, "weight"):
                w = gain.weight.detach().float()
                row[f"{key}_mean"] = float(w.mean())
                row[f"{key}_std"] = float(w.std()) if w.numel() > 1 else 0.0
        value = getattr(getattr(getattr(layer, "attn", None), "qkv", None), "value", None)
        if i == 0 and value is not None and isinstance(getattr(value, "alpha", None), torch.Tensor):
            row["value_alpha"] = float(value.alpha.detach())
            row["value_beta"] = float(value.beta.detach())
        stats.append(row)
    return stats


def log_keys(layers: list[LayerStats]) -> dict[str, float]:
    """Per-layer diagnostics as flat log keys `diag/L{i}/{name}`."""
    return {f"diag/L{i}/{name}": value for i, row in enumerate(layers) for name, value in row.items()}


class DiagnosticsCallback(TrainerCallback):
    """Hooks the blocks of `model`; on each step that logs, records their output kurtosis. `layers()` returns the
    gains, the last kurtosis values and the probes per layer by name; `SimplifiedTrainer.log` merges them into the
    train logs (`record`)."""

    def __init__(self, model: nn.Module):
        self.capture = False
        self.kurtosis: dict[int, float] = {}
        self.probe_mask: torch.Tensor | None = None  # set while the signal-propagation probe runs
        self.cosine: dict[str, dict[int, float]] = {"init": {}, "end": {}}
        self.rank: dict[str, dict[int, float]] = {"init": {}, "end": {}}
        self.probe_batch: dict[str, torch.Tensor] | None = None  # set by `train`: the first evaluation examples
        self.history: list[tuple[int, list[LayerStats]]] = []  # (step, per-layer values) at each training log
        layers = getattr(getattr(model, "base_model", model), "layers", [])
        self.handles = [layer.register_forward_hook(self._hook(i)) for i, layer in enumerate(layers)]

    def _hook(self, index: int):
        def hook(module, args, output):
            hidden = output[0] if isinstance(output, tuple) else output
            if self.probe_mask is not None:
                self.cosine[self.probe_when][index] = token_cosine_similarity(hidden, self.probe_mask)
                self.rank[self.probe_when][index] = effective_rank(hidden, self.probe_mask)
            elif self.capture and module.training:
                self.kurtosis[index] = activation_kurtosis(hidden)

        return hook

    def probe(self, model: nn.Module, when: str) -> None:
        """Signal propagation of the probe batch's tokens through every block, in eval mode, without gradients."""
        if self.probe_batch is None:
            return
        device = next(model.parameters()).device
        ids = self.probe_batch["input_ids"].to(device)
        mask = self.probe_batch.get("attention_mask")
        mask = torch.ones_like(ids) if mask is None else mask.to(device)
        training = model.training
        self.probe_mask, self.probe_when = mask, when
        try:
            with torch.no_grad():
                model.eval()
                model(input_ids=ids, attention_mask=mask)
        finally:
            self.probe_mask = None
            model.train(training)

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if model is not None:
            self.probe(model, "init")

    def on_step_begin(self, args, state, control, **kwargs):
        step = state.global_step + 1
        self.capture = step % max(1, args.logging_steps) == 0 or (step == 1 and args.logging_first_step)

    def on_step_end(self, args, state, control, **kwargs):
        self.capture = False

    def on_train_end(self, args, state, control, model=None, **kwargs):
        if model is not None:
            self.probe(model, "end")
        for handle in self.handles:
            handle.remove()
        self.handles = []

    def layers(self, model: nn.Module) -> list[LayerStats]:
        """Per layer, the gains now, the last kurtosis and the signal-propagation probes, by name."""
        stats = layer_gains(model)
        for i, row in enumerate(stats):
            if i in self.kurtosis:
                row["kurtosis"] = self.kurtosis[i]
            for probe, found in (("cosine", self.cosine), ("rank", self.rank)):
                for when, values in found.items():
                    if i in values:
                        row[f"token_{probe}_{when}"] = values[i]
        return stats

    def collect(self, model: nn.Module) -> dict[str, float]:
        """`layers()` as log keys."""
        return log_keys(self.layers(model))

    def record(self, step: int, model: nn.Module) -> dict[str, float]:
        """The log keys of a step that logs the training loss; its per-layer values are kept in `history`."""
        stats = self.layers(model)
        self.history.append((step, stats))
        return log_keys(stats)
