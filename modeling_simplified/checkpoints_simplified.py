"""Checkpoints that are no checkpoint of the model they are loaded into (an empty weights file, every key renamed,
another model's weights) are refused with one `ValueError` instead of giving a randomly initialised model.

Shipped to the Hub next to the modeling file: it imports only torch and safetensors.
"""

import os

import torch
from safetensors import safe_open
from torch import nn


def refuse_unmatched_file(cls, source, kwargs: dict):
    """`refuse_unmatched_checkpoint` for a local folder's single `model.safetensors`, read before loading: its
    tensor names against those of the model (built on the meta device), so a refusal is one error, not a load
    report followed by one."""
    if source is None or kwargs.get("subfolder") or not os.path.isdir(source):
        return
    path = os.path.join(source, "model.safetensors")
    if not os.path.isfile(path):
        return
    try:
        with safe_open(path, framework="pt") as weights:
            keys = list(weights.keys())
    except Exception as err:  # noqa: BLE001  (safetensors' errors share no base class with OSError)
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(f"{path} is not a readable safetensors file: {first}.") from None
    config = kwargs.get("config")
    if config is None or isinstance(config, (str, os.PathLike)):
        config = cls.config_class.from_pretrained(config or source)
    with torch.device("meta"):
        model = cls(config)
    expected = set(model.state_dict())
    prefix = f"{model.base_model_prefix}."
    if not any(k in expected or prefix + k in expected or k.removeprefix(prefix) in expected for k in keys):
        refuse_unmatched_checkpoint(model, {"missing_keys": expected, "unexpected_keys": keys}, source)


def refuse_unmatched_checkpoint(model: nn.Module, info: dict, source):
    """A checkpoint none of whose tensors is one of the model's (an empty weights file, every key renamed, another
    model's weights) is no checkpoint of this model: refuse it rather than return a randomly initialised model.
    Partial loads (e.g. a new head on saved base weights) keep transformers' load report."""
    missing = set(info.get("missing_keys", ()))
    tied = set(getattr(model, "all_tied_weights_keys", None) or {})
    expected = {name for name in model.state_dict() if name not in tied}
    if expected and expected <= missing:
        where = os.path.join(source, "model.safetensors") if source is not None and os.path.isdir(source) else source
        unexpected = sorted(info.get("unexpected_keys", ()))
        found = (
            f"its tensors are {', '.join(unexpected[:3])}{', …' if len(unexpected) > 3 else ''}"
            if unexpected
            else "it holds no tensors"
        )
        raise ValueError(
            f"{where}: no tensor of the checkpoint matches {type(model).__name__} ({found}); expected names such as "
            f"{', '.join(sorted(expected)[:3])}. Is this a checkpoint of a simplified-transformers model?"
        )
