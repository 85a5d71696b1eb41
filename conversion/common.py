"""Shared pieces of the converters: key bookkeeping, exact loading, refusing configs, atomic saving."""

import os
import shutil
import tempfile
from pathlib import Path

import torch
from torch import nn

from modeling_simplified.modeling_simplified import ConstantScale, Gain, NoSkip


class ConversionError(ValueError):
    """A checkpoint or config that cannot be converted exactly; the message names the fields or keys."""


class Source:
    """A source state dict whose keys must all be used: `take` records use, `finish` lists missing and unused keys."""

    def __init__(self, state_dict: dict[str, torch.Tensor], name: str):
        self.tensors, self.name = dict(state_dict), name
        self.used: set[str] = set()
        self.missing: list[str] = []

    def take(self, key: str, shape: tuple[int, ...] | None = None) -> torch.Tensor | None:
        """The tensor at `key` (None, recorded as missing, if absent); with `shape`, it must have that shape."""
        if key not in self.tensors:
            self.missing.append(key)
            return None
        self.used.add(key)
        value = self.tensors[key]
        if shape is not None:
            check_shape(value, shape, key, self.name)
        return value

    def cat(self, keys: list[str], shape: tuple[int, ...] | list[tuple[int, ...]]) -> torch.Tensor | None:
        """`torch.cat` of the tensors at `keys` along dim 0, each checked to have `shape` (one for all, or one per
        key) first (None if any is missing: `finish` lists it)."""
        shapes = shape if isinstance(shape, list) else [shape] * len(keys)
        parts = [self.take(key, s) for key, s in zip(keys, shapes)]
        return None if any(part is None for part in parts) else torch.cat(parts)

    def has(self, key: str) -> bool:
        return key in self.tensors

    def finish(self):
        unexpected = sorted(set(self.tensors) - self.used)
        if self.missing or unexpected:
            raise ConversionError(
                f"{self.name} checkpoint does not match its config: missing keys {sorted(self.missing)}; "
                f"unexpected keys {unexpected}."
            )


def check_shape(value: torch.Tensor, shape: tuple[int, ...], key: str, name: str):
    """A ConversionError naming `key` unless `value` is a tensor of exactly `shape`."""
    if not isinstance(value, torch.Tensor):
        raise ConversionError(f"{name} checkpoint: {key} is a {type(value).__name__}, not a tensor.")
    if tuple(value.shape) != tuple(shape):
        raise ConversionError(
            f"{name} checkpoint: {key} has shape {tuple(value.shape)}, expected {tuple(shape)} from its config."
        )


def refuse_incompatible(target: str, checks: dict[str, tuple[object, object]]):
    """Raise naming every field whose value (first) is not the required one (second: a value or a tuple of them)."""
    bad = []
    for field, (value, allowed) in checks.items():
        if isinstance(allowed, tuple):
            allowed = tuple(dict.fromkeys(allowed))  # each allowed value once (several sources may map to one)
            ok = value in allowed
        else:
            ok = value == allowed
        if not ok:
            needed = allowed[0] if isinstance(allowed, tuple) and len(allowed) == 1 else allowed
            bad.append(f"{field}={value!r} (needs {needed!r})")
    if bad:
        raise ConversionError(f"cannot convert to {target}: incompatible fields: {'; '.join(bad)}.")


def fill(model: nn.Module, tensors: dict[str, torch.Tensor], name: str) -> nn.Module:
    """Copy `tensors` into `model`, which must need exactly these keys (tied copies aside)."""
    expected = model.state_dict()
    tied = set(getattr(model, "_tied_weights_keys", None) or {}) if model.config.tie_word_embeddings else set()
    missing = sorted(set(expected) - set(tensors) - tied)
    unexpected = sorted(set(tensors) - set(expected))
    if missing or unexpected:
        raise ConversionError(f"{name}: missing keys {missing}; unexpected keys {unexpected}.")
    with torch.no_grad():
        for key, value in tensors.items():
            if expected[key].shape != value.shape:
                raise ConversionError(
                    f"{name}: {key} has shape {tuple(value.shape)}, expected {tuple(expected[key].shape)}."
                )
            expected[key].copy_(value)
    return model


def take_gain(src: Source, key: str, module: nn.Module, out: dict, target_key: str):
    """A scalar gain of the source: into a `Gain`'s weight, or checked against the fixed value our module implies."""
    value = src.take(key)
    if value is None or isinstance(module, NoSkip):
        return
    if isinstance(module, Gain):
        out[target_key] = value.reshape(module.weight.shape)
        return
    fixed = module.value if isinstance(module, ConstantScale) else 1.0
    if not torch.all(value == fixed):
        raise ConversionError(f"{key}={value.flatten().tolist()} but its config fixes it at {fixed} (not trainable).")


#: The tokenizer files a conversion copies from its source folder, when present.
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "chat_template.jinja",
    "vocab.json",
    "merges.txt",
    "vocab.txt",
    "tokenizer.model",
)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def check_out(out: str | os.PathLike) -> Path:
    """OUT as a Path, once it is a new path or an empty folder (a ConversionError naming it otherwise)."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConversionError(f"OUT={str(out)!r} exists and is not an empty folder; choose a new path.")
    return out


def save_atomically(model, out: str | os.PathLike, copy_from: str | os.PathLike | None = None):
    """`save_pretrained` into a temporary folder beside OUT (with the tokenizer files of `copy_from`, when present),
    then move it into place with the permissions `save_pretrained` gives a folder: nothing at OUT on failure."""
    out = check_out(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        model.save_pretrained(tmp)
        for name in TOKENIZER_FILES if copy_from is not None else ():
            if (Path(copy_from) / name).is_file():
                shutil.copyfile(Path(copy_from) / name, tmp / name)
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it 0700
        if out.exists():
            out.rmdir()
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return out
