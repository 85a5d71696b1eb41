"""Checkpoint converters (authors' checkpoints, GPT-2, Llama, BERT) and their CLI (`simplified-convert`). The names
load on first use (PEP 562), so that the CLI module (`cli.py`) imports without torch."""

import importlib
from typing import Any

#: the module of the package that defines each public name
_SOURCES = {
    "ConversionError": "common",
    **dict.fromkeys(
        (
            "gpt2_to_simplified",
            "simplified_to_gpt2",
            "llama_to_simplified",
            "simplified_to_llama",
            "bert_to_simplified",
        ),
        "hf",
    ),
    **dict.fromkeys(("original_config", "original_to_simplified", "convert_original"), "original"),
}
__all__ = list(_SOURCES)


def __getattr__(name: str) -> Any:
    if name not in _SOURCES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_SOURCES[name]}", __name__), name)
    globals()[name] = value  # the next lookup skips __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
