"""The paper's weight-decay rule under whichever trainer builds the optimizer: decay the matrices only. He & Hofmann,
App. D.1: "We do not apply weight decay to any scalar gain parameter"; norms and biases are exempt too (our choice, as
transformers' `Trainer` does).

transformers' `Trainer` (and so TRL's trainers) decides by name (`Trainer.get_decay_parameter_names`): it exempts
`nn.LayerNorm` modules and names containing "bias" or "norm", so it decays every gain of this family (the
shaped-attention α/β/γ, eq. 6's αV/βV, βSA/βFF, NormFormer's head scales). A model cannot change that decision: it
is the Trainer's, by the types and names of its parameters. So the rule ships with the model as two methods every
export has (`SimplifiedPreTrainedModel` takes `PaperWeightDecay` as a base), and the model watches the optimizers it
is trained by:

- `model.decay_parameter_names` is a drop-in for the Trainer's method:
  `trainer.get_decay_parameter_names = model.decay_parameter_names` before `trainer.train()`; the Trainer still builds
  the optimizer its arguments name (`optim`, lr, betas, fused kernels), with these two groups;
- `model.parameter_groups(weight_decay)` are the two groups for an optimizer built by hand (an accelerate loop);
- at the first step of any torch optimizer that decays a gain of a live model of this family, one warning (once per
  process) says so and names both fixes (a global optimizer step pre-hook, registered when the first model is built).

Shipped to the Hub next to the modeling file: it imports only torch.
"""

import warnings
import weakref

import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_pre_hook


def decay_parameter_names(model: nn.Module) -> list[str]:
    """The names of the parameters to decay: the matrices (linear weights, embeddings, eq. 6's ΔW), not the gains,
    norms or biases (all of which have fewer than two dimensions). The signature and meaning of the Trainer's
    `get_decay_parameter_names(model)`, for any model (on GPT-2 it gives the Trainer's own answer)."""
    return [name for name, param in model.named_parameters() if param.dim() >= 2]


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


def gain_names(model: nn.Module) -> dict[int, str]:
    """The trainable gains of `model` by parameter id: every parameter of fewer than two dimensions that is neither a
    norm's nor a bias (by structure, not by class: an export's classes are not this package's)."""
    gains = {}
    for module_name, module in model.named_modules():
        if isinstance(module, (nn.LayerNorm, nn.RMSNorm, nn.GroupNorm)):
            continue
        for name, param in module.named_parameters(recurse=False):
            if param.requires_grad and param.dim() < 2 and name != "bias":
                gains.setdefault(id(param), f"{module_name}.{name}" if module_name else name)
    return gains


# ----------------------------------------------------------------------------------------------------------------
# The warning
# ----------------------------------------------------------------------------------------------------------------
_MODELS: "weakref.WeakSet[nn.Module]" = weakref.WeakSet()  # every live model of the family
_CHECKED: "weakref.WeakSet[torch.optim.Optimizer]" = weakref.WeakSet()  # optimizers whose groups were checked
_STATE = {"hook": None, "warned": False}


def watch(model: nn.Module) -> None:
    """Check the optimizers that train `model`: the first step of each looks for decayed gains."""
    _MODELS.add(model)
    if _STATE["hook"] is None:
        _STATE["hook"] = register_optimizer_step_pre_hook(_check_first_step)


def decayed_gains(optimizer: torch.optim.Optimizer, model: nn.Module) -> list[str]:
    """The names of `model`'s gains that a group of `optimizer` with a nonzero weight decay holds."""
    decayed = {id(p) for group in optimizer.param_groups if group.get("weight_decay") for p in group["params"]}
    return [name for pid, name in gain_names(model).items() if pid in decayed]


def _check_first_step(optimizer: torch.optim.Optimizer, args, kwargs) -> None:
    """A global step pre-hook: at an optimizer's first step, warn (once per process) if it decays a gain of a live
    model of this family. Later steps cost one set lookup."""
    if optimizer in _CHECKED or _STATE["warned"]:
        return
    _CHECKED.add(optimizer)
    found = max((decayed_gains(optimizer, model) for model in list(_MODELS)), key=len, default=[])
    if not found:
        return
    _STATE["warned"] = True
    shown = ", ".join(found[:3]) + (", …" if len(found) > 3 else "")
    warnings.warn(
        f"{type(optimizer).__name__} applies weight decay to {len(found)} gain parameters of a simplified-transformers "
        f"model ({shown}); the paper decays no scalar gain (He & Hofmann, App. D.1). With a transformers Trainer or a "
        "TRL trainer, set `trainer.get_decay_parameter_names = model.decay_parameter_names` before `train()`; with "
        "an optimizer of your own, pass it `model.parameter_groups(weight_decay)`.",
        UserWarning,
        stacklevel=3,
    )


class PaperWeightDecay:
    """The decay rule as methods of every model of the family (a mixin of the pre-trained model class), so that an
    export loaded with `trust_remote_code=True` carries it; each model registers for the first-step check."""

    #: `trainer.get_decay_parameter_names = model.decay_parameter_names`: the Trainer calls it with its model
    decay_parameter_names = staticmethod(decay_parameter_names)

    def parameter_groups(self, weight_decay: float) -> list[dict]:
        return parameter_groups(self, weight_decay)

    def post_init(self):
        super().post_init()
        watch(self)
