"""RaPTr: progressive subnetwork training (Panigrahi et al. 2024) as a Trainer callback.

At step t of stage s (Alg. 1) layer i runs with ζ_i = 1 for i in the always-kept set I (default: first and last
layer, §4) and ζ_i ~ Bernoulli(p_s) otherwise; bypassed layers are the identity and cost no compute. Stages are given
by their average subnetwork size n_s (e.g. `6-8-10-12`), so `p_s = (n_s − |I|) / (L − |I|)` and the expected
layer FLOPs relative to full training are `Σ_s len_s · n_s / (L · T)` (§2.1, App. E).

Scaling of the kept layers (App. J), applied to each kept layer's update `layer(x) − x` (see `LayerPlan`):
- `sqrt` (default, `h_sqrt`): kept layer j gets `sqrt(j̄ − j)` with j̄ the next kept layer (L+1 after the last one),
  so the sum of squared scales of the kept layers before any kept layer k is k − 1: every kept layer sees the input
  norm it has in the full model (Thm J.1: ‖y^(ℓ)‖² = ‖x‖² + Θ(Σ_j α_j² d)), and the output norm is that of L layers.
- `inverse`: 1/p_s on the sampled (non-I) kept layers (Huang et al. 2016, applied at training so evaluation needs no
  rescaling); `none`: 1.
With p = 1 every scale is 1 and the plan is the full model: the last stage trains exactly as without the callback.

Sampling uses `numpy.random.default_rng([seed, step])`: every DDP rank draws the same subnetwork at a global step
with no communication, and a resumed run redraws the same ones. Bypassed layers keep their parameters in the graph
with weight 0 (`LayerPlan`), so DDP needs no `find_unused_parameters` and all-reduces an exact zero gradient for them.
Under torch AdamW a parameter with a zero gradient (not None) still follows AdamW's rules for one step:
decoupled decay `θ ← θ(1 − lr·λ)`, moments `m ← β1·m`, `v ← β2·v`, and the update `lr·m̂/(√v̂ + ε)` from the
momentum of earlier steps — the same as in the paper's App. G formulation, where skipped layers get zero gradients.

The per-stage tallies (steps, units, wall time) are checkpointed with the Trainer state (`ExportableState`), so a
resumed run reports the whole run. RaPTr draws per Trainer step, i.e. per optimizer update; with crammed BERT's batch
ramp (`BatchRampAdamW`, one micro-batch per Trainer step) that would be per micro-batch, so the combination is refused.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn
from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState

from ..modeling_simplified import LayerPlan
from .trainer import BatchRampAdamW
from .trainer import stagewise_lr_lambda as stagewise_lr_lambda  # re-exported: SimplifiedTrainer runs it

logger = logging.getLogger(__name__)

SCALINGS = ("sqrt", "inverse", "none")
STAGE_LENGTHS = ("equal", "proportional")


class RaptrSpecError(ValueError):
    """A bad RaPTr schedule or option (names the field and the allowed values)."""


def sqrt_scales(keep: Sequence[bool]) -> list[float]:
    """App. J's `h_sqrt`: kept layer j (1-based) gets `sqrt(j̄ − j)`, j̄ the next kept layer or L+1; bypassed get 0."""
    scales = [0.0] * len(keep)
    following = len(keep)  # 0-based index of the next kept layer (L when none)
    for j in range(len(keep) - 1, -1, -1):
        if keep[j]:
            scales[j] = math.sqrt(following - j)
            following = j
    return scales


def layer_scales(keep: Sequence[bool], p: float, fixed: Sequence[int], scaling: str) -> list[float]:
    """Per-layer output scales of a sampled subnetwork (0 = bypassed) under `scaling` (one of SCALINGS)."""
    if scaling == "sqrt":
        return sqrt_scales(keep)
    if scaling == "inverse":
        return [0.0 if not k else 1.0 if i in fixed else 1.0 / p for i, k in enumerate(keep)]
    if scaling == "none":
        return [1.0 if k else 0.0 for k in keep]
    raise RaptrSpecError(f"RaPTr scaling={scaling!r}: allowed values are {', '.join(SCALINGS)}.")


@dataclass
class Stage:
    """Steps [start, end) train (p, I)-subnetworks of average size `size` (layers)."""

    size: float
    p: float
    start: int
    end: int


@dataclass
class RaptrSchedule:
    """T_{1:k} × (p_{1:k}, I): the stages (an optional full-model phase first) over `max_steps` optimizer steps."""

    num_layers: int  # units a subnetwork is drawn from: layers (depth), sub-MLPs or heads per layer (width)
    fixed: tuple[int, ...]
    stages: list[Stage]
    scaling: str = "sqrt"
    seed: int = 0
    rows: int = 1  # independent draws per step: 1 (depth) or the model's layers (width variants)

    def stage_index(self, step: int) -> int:
        for i, stage in enumerate(self.stages):
            if step < stage.end:
                return i
        return len(self.stages) - 1

    def sample(self, step: int) -> tuple[bool, ...]:
        """ζ_{1:L} at `step` (0-based global step): a function of (seed, step) only."""
        p = self.stages[self.stage_index(step)].p
        n = self.num_layers
        draws = np.random.default_rng([self.seed, step]).random(self.rows * n)
        return tuple(bool(i % n in self.fixed or draws[i] < p) for i in range(self.rows * n))

    def plan(self, step: int) -> LayerPlan | None:
        """The model's layer plan at `step`; None (the full model) when every layer runs unscaled."""
        keep = self.sample(step)
        scales = layer_scales(keep, self.stages[self.stage_index(step)].p, self.fixed, self.scaling)
        return None if all(s == 1.0 for s in scales) else LayerPlan(tuple(scales))

    def expected_relative_flops(self) -> float:
        """Σ_s len_s · n_s / (L · T): expected layer FLOPs relative to full training (§2.1, App. E)."""
        total = sum(s.end - s.start for s in self.stages)
        return sum((s.end - s.start) * s.size for s in self.stages) / (self.num_layers * max(total, 1))


def parse_sizes(spec: str, num_layers: int) -> list[float]:
    """`recommended` (4 stages: L/2, then +L/6 per stage up to L, §4 box) or hyphen-separated sizes `6-8-10-12`."""
    if spec == "recommended":
        return [num_layers / 2 + k * num_layers / 6 for k in range(4)]
    try:
        sizes = [float(x) for x in spec.split("-")]
    except ValueError:
        raise RaptrSpecError(
            f"RaPTr schedule {spec!r}: expected 'recommended' or average subnetwork sizes like '6-8-10-12'."
        ) from None
    return sizes


def build_schedule(
    spec: str,
    num_layers: int,
    max_steps: int,
    lengths: str | Sequence[int] = "equal",
    full_model_steps: int = 0,
    fixed: Sequence[int] | None = None,
    scaling: str = "sqrt",
    seed: int = 0,
    rows: int = 1,
    unit: str = "layers",
) -> RaptrSchedule:
    """A schedule from a spec. `lengths`: `equal`, `proportional` (stage s ∝ s, App. E) or the k−1 step boundaries
    where stages 2..k start. `full_model_steps`: an initial full-model phase taken from the last stage (UL2, §4.2).
    `unit` names what the sizes count (for error messages): layers, or sub-MLPs / heads per layer (width variants)."""
    L = num_layers
    fixed = tuple(sorted({i % L for i in ((0, L - 1) if fixed is None else fixed)}))
    sizes = parse_sizes(spec, L)
    if any(not len(fixed) <= n <= L for n in sizes):
        raise RaptrSpecError(
            f"RaPTr schedule {spec!r}: sizes count {unit} and must lie in [|I|, {L}] = [{len(fixed)}, {L}] "
            f"(|I| = {len(fixed)} always-kept)."
        )
    if sizes != sorted(sizes):
        raise RaptrSpecError(f"RaPTr schedule {spec!r}: sizes must not decrease (progressive subnetworks, §2.1).")
    if scaling not in SCALINGS:
        raise RaptrSpecError(f"RaPTr scaling={scaling!r}: allowed values are {', '.join(SCALINGS)}.")
    k = len(sizes)
    if isinstance(lengths, str):
        if lengths not in STAGE_LENGTHS:
            raise RaptrSpecError(
                f"RaPTr stage lengths={lengths!r}: allowed values are {', '.join(STAGE_LENGTHS)} or k-1 step boundaries."
            )
        weights = [1] * k if lengths == "equal" else list(range(1, k + 1))
        cumulative = np.cumsum(weights) / sum(weights)
        bounds = [round(max_steps * c) for c in cumulative[:-1]]
    else:
        bounds = [int(b) for b in lengths]
        if len(bounds) != k - 1 or bounds != sorted(bounds) or any(not 0 <= b <= max_steps for b in bounds):
            raise RaptrSpecError(
                f"RaPTr stage boundaries {list(lengths)}: need {k - 1} non-decreasing steps in [0, {max_steps}]."
            )
    edges = [0, *bounds, max_steps]
    if not 0 <= full_model_steps <= edges[-1] - edges[-2]:
        raise RaptrSpecError(
            f"RaPTr full_model_steps={full_model_steps}: must lie in [0, {edges[-1] - edges[-2]}] (the last stage)."
        )
    p_of = lambda n: 1.0 if L == len(fixed) else (n - len(fixed)) / (L - len(fixed))  # noqa: E731
    stages = [Stage(float(L), 1.0, 0, full_model_steps)] if full_model_steps else []
    f = full_model_steps
    for i, n in enumerate(sizes):
        start, end = edges[i] + f, (edges[i + 1] + f if i < k - 1 else max_steps)
        stages.append(Stage(n, p_of(n), start, end))
    return RaptrSchedule(L, fixed, stages, scaling, seed, rows)


VARIANTS = ("depth", "mlp", "attention")
MLP_PARTS = 4  # MLP-RaPTr splits each MLP into 4 sub-MLPs (§4.3)
UNITS = {  # what a schedule's sizes count, per variant
    "depth": "layers",
    "mlp": f"sub-MLPs per layer (MLP-RaPTr splits each MLP into {MLP_PARTS})",
    "attention": "attention heads per layer",
}
FLOPS_SCOPE = {  # which FLOPs the expected / realised relative FLOPs cover, per variant
    "depth": "transformer-layer FLOPs (embedding, final norm, LM head and optimizer not counted); bypassed layers "
    "are not computed, so these FLOPs are really saved",
    "mlp": "MLP FLOPs only (attention, embedding, head and optimizer not counted), nominal: the masked sub-MLPs "
    "are still computed (computed_relative_flops = 1)",
    "attention": "attention FLOPs only (per-head Q/K/V, scores, mixing and W^O; MLP, embedding, head and optimizer "
    "not counted), nominal: the masked heads are still computed (computed_relative_flops = 1)",
}


def num_units(config, variant: str) -> int:
    """How many units a subnetwork is drawn from: layers (depth), sub-MLPs or heads per layer (width)."""
    return {"mlp": MLP_PARTS, "attention": config.num_attention_heads}.get(variant, config.num_hidden_layers)


class WidthMasks:
    """MLP-RaPTr / Attention-RaPTr (§4.3) by forward hooks, no model change, applied in training mode only.

    - `mlp`: the MLP's hidden units (after the activation and its optional norm) in 4 contiguous sub-MLPs are
      multiplied by the step's 0/1 mask, so each layer's MLP is the sum of its kept sub-MLPs, unscaled.
    - `attention`: each layer's attention mixing output (`attn.mixing`, per head, before W^O and the head scale) is
      masked per head. With softmax attention a dropped head outputs 0. With shaped attention (`α·X + β·A·X − γ·C·X`
      per head, the `sas` / `sas_p` / `simplest` / `value_skipinit` blocks) a dropped head outputs its identity part
      `α·X_h` only: for the skipless blocks (identity W^O, no attention skip) that part carries the residual stream, so
      a dropped head is the identity, as a bypassed layer is in depth RaPTr. (Masking the input of W^O instead would
      zero the head's whole channel slice of the residual stream.) The attention weights the mixing returns (eager,
      `output_attentions`) are not masked.

    Exact subnetworks and DDP-safe (all parameters stay in the graph; dropped units get zero gradients, except a dropped
    shaped head's α, which scales the kept identity part), but the masked units are still computed: this variant saves
    no wall time or FLOPs (slicing the matmuls would)."""

    def __init__(self, base: nn.Module, variant: str):
        config = base.config
        self.variant = variant
        self.units = num_units(config, variant)
        if variant == "mlp":
            if config.intermediate_size % MLP_PARTS:
                raise RaptrSpecError(
                    f"RaPTr variant='mlp': intermediate_size={config.intermediate_size} must be "
                    f"divisible by {MLP_PARTS}."
                )
            self.repeat = config.intermediate_size // MLP_PARTS
            targets = [layer.mlp.act_norm for layer in base.layers]
            self.handles = [t.register_forward_hook(self._mlp_hook(i)) for i, t in enumerate(targets)]
        else:
            self.repeat = config.head_dim
            targets = [layer.attn.mixing for layer in base.layers]
            self.handles = [
                t.register_forward_hook(self._mixing_hook(i), with_kwargs=True) for i, t in enumerate(targets)
            ]
        self.keep: torch.Tensor | None = None  # (layers, units) bool
        self.masks: torch.Tensor | None = None  # (layers, intermediate_size) 0/1 (mlp)

    def set(self, keep: Sequence[bool] | None):
        """Masks from a flat (layers × units) sample, or None for the full model."""
        if keep is None:
            self.keep = self.masks = None
            return
        self.keep = torch.tensor(keep, dtype=torch.bool).view(-1, self.units)
        if self.variant == "mlp":
            self.masks = self.keep.float().repeat_interleave(self.repeat, dim=1)

    def _mlp_hook(self, index: int):
        def hook(module, args, output):
            if self.keep is None or not module.training:
                return None
            return output * self.masks[index].to(device=output.device, dtype=output.dtype)

        return hook

    def _mixing_hook(self, index: int):
        def hook(module, args, kwargs, output):
            if self.keep is None or not module.training:
                return None
            out, weights = output  # out: (B, T, H, D)
            keep = self.keep[index].to(out.device)[:, None]  # (H, 1)
            alpha = getattr(module, "alpha", None)
            if alpha is None:  # softmax attention: a dropped head outputs 0
                return out * keep.to(out.dtype), weights
            # shaped attention: a dropped head keeps its identity part α·X_h (X: this step's values, (B, H, T, D))
            values = kwargs["current_values"]  # `SimplifiedAttention` calls the mixing with named arguments
            return torch.where(keep, out, alpha(values.transpose(1, 2)).to(out.dtype)), weights

        return hook

    def remove(self):
        for handle in self.handles:
            handle.remove()
        self.handles, self.keep, self.masks = [], None, None


def _base_model(model):
    model = getattr(model, "module", model)
    return getattr(model, "base_model", model)


@dataclass
class _StageTally:
    steps: int = 0
    layers: float = 0  # Σ over steps of the kept layers (depth) or the mean kept units per layer (width)
    wall_time_s: float = 0.0


def refuse_sharded(model) -> None:
    """RaPTr needs every parameter on every rank: a bypassed layer stays in the graph as `0·Σ sum(p)` without running
    (`LayerPlan`), and FSDP gathers a layer's sharded parameters only when the layer runs. A model sharded with FSDP
    (`fully_shard`, or FSDP1's `FullyShardedDataParallel`) is refused here, before training."""
    sharded = [type(m).__name__ for m in model.modules() if type(m).__name__.startswith("FSDP")]
    sharded += [type(m).__name__ for m in model.modules() if type(m).__name__ == "FullyShardedDataParallel"]
    if sharded:
        raise RaptrSpecError(
            "RaPTr cannot train a model sharded with FSDP (fully_shard / FullyShardedDataParallel): its bypassed "
            "layers keep their parameters in the graph without running, and FSDP gathers a layer's parameters only "
            "when it runs. Train RaPTr with DDP (torchrun or accelerate launch without FSDP)."
        )


class RaptrCallback(TrainerCallback, ExportableState):
    """Sets the model's layer plan (depth) or width masks before each optimizer step and clears them after
    (evaluation, `generate()` and saving always see the full model). Reports the expected relative FLOPs before
    training and the realised FLOPs and wall time per stage after it (`report`, logged; the CLI writes it to
    `metrics.json`). Its per-stage tallies are saved in checkpoints (`state()`) and restored on resume.

    `fixed` (the always-kept layers I, default first and last) and `scaling` (default `sqrt`) are depth options: the
    width variants (§4.3) keep no unit always and do not rescale, and refuse other values."""

    def __init__(
        self,
        spec: str = "recommended",
        lengths: str | Sequence[int] = "equal",
        full_model_steps: int = 0,
        fixed: Sequence[int] | None = None,
        scaling: str | None = None,
        seed: int | None = None,
        variant: str = "depth",
    ):
        if variant not in VARIANTS:
            raise RaptrSpecError(f"RaPTr variant={variant!r}: allowed values are {', '.join(VARIANTS)}.")
        if variant != "depth":  # width (§4.3): no always-kept units, no rescaling (ours; §4.3 names no scaling)
            if fixed is not None and len(fixed):
                raise RaptrSpecError(
                    f"RaPTr variant={variant!r} keeps no unit always: fixed={list(fixed)} is a depth option "
                    "(the always-kept layers I)."
                )
            if scaling not in (None, "none"):
                raise RaptrSpecError(
                    f"RaPTr variant={variant!r} does not rescale the kept units: scaling={scaling!r} is a depth "
                    "option (use the default, or 'none')."
                )
        self.constructor_args = dict(
            spec=spec,
            lengths=lengths if isinstance(lengths, str) else [int(b) for b in lengths],
            full_model_steps=full_model_steps,
            fixed=None if fixed is None else [int(i) for i in fixed],
            scaling=scaling,
            seed=seed,
            variant=variant,
        )
        if variant != "depth":
            fixed, scaling = (), "none"
        self.options = dict(
            spec=spec, lengths=lengths, full_model_steps=full_model_steps, fixed=fixed, scaling=scaling or "sqrt"
        )
        self.variant = variant
        self.seed = seed
        self.width: WidthMasks | None = None
        self.schedule: RaptrSchedule | None = None
        self.tallies: list[_StageTally] = []
        self.report: dict = {}
        self._began = 0.0
        self._stage = 0

    def build(self, config, max_steps: int, seed: int = 0) -> RaptrSchedule:
        """The schedule for a model `config` over `max_steps` optimizer steps (raises RaptrSpecError)."""
        rows = 1 if self.variant == "depth" else config.num_hidden_layers
        return build_schedule(
            num_layers=num_units(config, self.variant),
            max_steps=max_steps,
            seed=seed,
            rows=rows,
            unit=UNITS[self.variant],
            **self.options,
        )

    def state(self) -> dict:
        """The constructor arguments and the per-stage tallies so far (saved in each checkpoint's trainer state)."""
        return {"args": dict(self.constructor_args), "attributes": {"saved_tallies": [asdict(t) for t in self.tallies]}}

    def _restore(self, state) -> None:
        """On resume, continue the tallies saved in the checkpoint (they cover its steps)."""
        name = type(self).__name__
        saved = state.stateful_callbacks.get(name)
        if state.global_step == 0:
            return
        if isinstance(saved, list):
            saved = saved[0] if saved else None
        tallies = (saved or {}).get("attributes", {}).get("saved_tallies")
        if saved is None or tallies is None:
            logger.warning(
                "RaPTr: resumed at step %d from a checkpoint without RaPTr tallies; the report covers the steps "
                "from here on only.",
                state.global_step,
            )
        elif saved.get("args") != self.constructor_args or len(tallies) != len(self.tallies):
            logger.warning(
                "RaPTr: resumed at step %d with other options than the checkpoint's (%s, now %s); the report covers "
                "the steps from here on only.",
                state.global_step,
                saved.get("args"),
                self.constructor_args,
            )
        else:
            self.tallies = [_StageTally(**t) for t in tallies]
        if not isinstance(state.stateful_callbacks.get(name), dict):
            state.stateful_callbacks[name] = self.state()  # the Trainer updates an existing entry at each save

    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
        if isinstance(getattr(optimizer, "optimizer", optimizer), BatchRampAdamW):
            raise RaptrSpecError(
                "RaPTr cannot run with the batch-ramp optimizer (BatchRampAdamW, training.batch_ramp_to): each "
                "Trainer step is one micro-batch there, so RaPTr would draw a subnetwork per micro-batch instead "
                "of per optimizer update."
            )
        refuse_sharded(model)
        base = _base_model(model)
        seed = args.seed if self.seed is None else self.seed
        self.schedule = self.build(base.config, state.max_steps, seed)
        if self.variant != "depth":
            self.width = WidthMasks(base, self.variant)
        self.tallies = [_StageTally() for _ in self.schedule.stages]
        self._restore(state)
        expected = self.schedule.expected_relative_flops()
        self.report = {
            "schedule": self.options["spec"],
            "variant": self.variant,
            "units": UNITS[self.variant],
            "scaling": self.schedule.scaling,
            "fixed_layers": list(self.schedule.fixed),
            "expected_relative_flops": expected,
            "flops_scope": FLOPS_SCOPE[self.variant],
        }
        if self.variant != "depth":
            self.report["computed_relative_flops"] = 1.0
        logger.warning(
            "RaPTr %s (%s) on %d %s: stages %s, expected relative FLOPs %.4f (%s)",
            self.options["spec"],
            self.variant,
            self.schedule.num_layers,
            UNITS[self.variant],
            [(round(s.size, 3), s.start, s.end) for s in self.schedule.stages],
            expected,
            FLOPS_SCOPE[self.variant],
        )

    def on_step_begin(self, args, state, control, model=None, **kwargs):
        step = state.global_step
        self._stage = self.schedule.stage_index(step)
        tally = self.tallies[self._stage]
        tally.steps += 1
        if self.width is not None:
            keep = self.schedule.sample(step)
            self.width.set(keep)
            tally.layers += sum(keep) / self.schedule.rows  # mean kept units per layer
        else:
            plan = self.schedule.plan(step)
            _base_model(model).layer_plan = plan
            tally.layers += self.schedule.num_layers if plan is None else sum(s > 0 for s in plan.scales)
        self._began = time.perf_counter()

    def on_step_end(self, args, state, control, model=None, **kwargs):
        self.tallies[self._stage].wall_time_s += time.perf_counter() - self._began
        _base_model(model).layer_plan = None
        if self.width is not None:
            self.width.set(None)

    def on_train_end(self, args, state, control, model=None, **kwargs):
        _base_model(model).layer_plan = None
        if self.width is not None:
            self.width.remove()
        L = self.schedule.num_layers
        steps = sum(t.steps for t in self.tallies)
        stages = []
        for stage, tally in zip(self.schedule.stages, self.tallies):
            stages.append(
                {
                    **asdict(stage),
                    **asdict(tally),
                    "mean_layers": tally.layers / tally.steps if tally.steps else None,
                    "s_per_step": tally.wall_time_s / tally.steps if tally.steps else None,
                }
            )
        realised = sum(t.layers for t in self.tallies) / (L * max(steps, 1))
        self.report["realised_relative_flops"] = realised
        self.report["computed_relative_flops"] = realised if self.variant == "depth" else 1.0
        self.report["steps"] = steps
        self.report["step_time_s"] = sum(t.wall_time_s for t in self.tallies)
        self.report["stages"] = stages
        logger.warning(
            "RaPTr realised relative FLOPs %.4f (expected %.4f; %s), computed %.4f; per stage (size, steps, mean %s, "
            "s/step): %s",
            realised,
            self.report["expected_relative_flops"],
            self.report["flops_scope"],
            self.report["computed_relative_flops"],
            UNITS[self.variant],
            [(round(s["size"], 2), s["steps"], s["mean_layers"], s["s_per_step"]) for s in stages],
        )
