"""What keeps the simplified-transformers model running under every transformers it supports, from the floor
(`MIN_TRANSFORMERS_VERSION` in `configuration_simplified.py`, 5.4.0) to the newest tested (5.24), and loading the
checkpoints of its earlier versions. Each shim says when it can be deleted.

Shipped to the Hub next to the modeling file: it imports only torch, safetensors and transformers.
"""

import functools
from collections.abc import Callable

import torch
from safetensors import safe_open
from safetensors.torch import load_file
from transformers.cache_utils import Cache
from transformers.modeling_outputs import BaseModelOutputWithPast
from transformers.modeling_utils import PreTrainedModel
from transformers.utils.deprecation import deprecate_kwarg

# ----------------------------------------------------------------------------------------------------------------
# The cache's name
# ----------------------------------------------------------------------------------------------------------------
#: The cache's name as a forward argument, an output field and `create_causal_mask`'s argument: `cache` from 5.24,
#: `past_key_values` before. `generate` and gradient checkpointing use the installed release's name, so the layers
#: get it and the outputs carry it under this name. Delete when the floor is 5.24 (then `cache` everywhere).
CACHE_FIELD = "cache" if "cache" in BaseModelOutputWithPast.__dataclass_fields__ else "past_key_values"


def cache_argument(forward: Callable) -> Callable:
    """A forward that takes the cache as `cache`, also accepting its older name `past_key_values` (both at once are
    refused). From 5.24 the old name warns as native models' forwards do (`deprecate_kwarg`); before it, it is the
    name `generate` passes, and nothing warns. The branch before 5.24 can go when the floor is 5.24; the whole
    decorator when native models drop the old name (5.40)."""
    if CACHE_FIELD == "cache":
        return deprecate_kwarg("past_key_values", "5.40.0", new_name="cache", raise_if_both_names=True)(forward)

    @functools.wraps(forward)
    def with_one_cache(*args, **kwargs):
        past_key_values = kwargs.pop("past_key_values", None)
        if past_key_values is not None:
            if kwargs.get("cache") is not None:
                raise ValueError("Pass the cache once: as `cache` or as `past_key_values` (its older name), not both.")
            kwargs["cache"] = past_key_values
        return forward(*args, **kwargs)

    return with_one_cache


_MAX_LENGTH = "get_max_length" if hasattr(Cache, "get_max_length") else "get_max_cache_shape"


def max_cache_length(cache: Cache) -> int:
    """A cache's capacity: `get_max_cache_shape()` up to 5.10 at least, `get_max_length()` from 5.14. Delete when the
    floor is 5.14 (then `cache.get_max_length()`)."""
    return getattr(cache, _MAX_LENGTH)()


# ----------------------------------------------------------------------------------------------------------------
# Checkpoints written before version 0.2
# ----------------------------------------------------------------------------------------------------------------
def _is_scalar(value) -> bool:
    return isinstance(value, torch.Tensor) and value.dim() == 0


def _reshape_scalars(state_dict: dict) -> None:
    """Every 0-dim tensor of `state_dict`, in place, as the `(1,)` tensor it is now."""
    for key, value in state_dict.items():
        if _is_scalar(value):
            state_dict[key] = value.reshape(1)


def _has_scalar_tensors(checkpoint_files: list[str]) -> bool:
    """Whether a safetensors checkpoint holds a 0-dim tensor (read from the files' headers only)."""
    if not all(str(f).endswith(".safetensors") for f in checkpoint_files):
        return False
    for file in checkpoint_files:
        with safe_open(file, "pt") as handle:
            if any(not handle.get_slice(key).get_shape() for key in handle.keys()):
                return True
    return False


class ScalarGainCheckpoints:
    """Checkpoints written before version 0.2 stored the scalar gains (βSA, βFF, eq. 6's αV and βV) as 0-dim tensors;
    they load as the `(1,)` tensors they are now (no gain is 0-dim: FSDP2 shards no 0-dim parameter). The model has
    no 0-dim tensor, so every 0-dim tensor of a checkpoint is one of these gains. A mixin of the pre-trained model
    class, for both loaders: `from_pretrained` (transformers' `_load_pretrained_model`) and `load_state_dict`
    (`_load_from_state_dict`, which sees the whole state dict before the submodules do). Delete when checkpoints
    from before 0.2 need no longer load."""

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        _reshape_scalars(state_dict)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    @staticmethod
    def _load_pretrained_model(model, state_dict, checkpoint_files, load_config, *args, **kwargs):
        """transformers' loader, given the checkpoint's tensors with its 0-dim gains reshaped: only a checkpoint that
        has such gains is read here first (its safetensors headers say so)."""
        if state_dict is None and checkpoint_files and _has_scalar_tensors(checkpoint_files):
            state_dict = {k: v for f in checkpoint_files for k, v in load_file(f).items()}
        if state_dict is not None and any(_is_scalar(v) for v in state_dict.values()):
            state_dict = dict(state_dict)
            _reshape_scalars(state_dict)
        return PreTrainedModel._load_pretrained_model(model, state_dict, checkpoint_files, load_config, *args, **kwargs)
