"""AdamW parameter groups: weight decay on matrices only (paper App. D.1 exempts the scalar gains; we also exempt
norms and biases). The rule itself ships with the model (`weight_decay_simplified.py`, so that an export carries it
as `model.parameter_groups` and `model.decay_parameter_names`); this is its import path in the package."""

from .weight_decay_simplified import decay_parameter_names, parameter_groups

__all__ = ["decay_parameter_names", "parameter_groups"]
