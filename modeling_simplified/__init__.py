"""simplified-transformers: the simplified transformer blocks of He & Hofmann (ICLR 2024), NormFormer and friends
as a Hugging Face Transformers model family. Importing a name from the package registers the family with the Auto
classes.

The names load on first use (PEP 562): `import modeling_simplified.<module>` then costs only that module's imports,
so the console commands (`commands.py`) answer `--help` and typos, and catch Ctrl-C, without first importing torch
and transformers for the model classes.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .configuration_simplified import BLOCK_PRESETS, BLOCK_TYPES, BLOCKS, BlockType, SimplifiedConfig, __version__
    from .modeling_simplified import (
        SimplifiedForCausalLM,
        SimplifiedForMaskedLM,
        SimplifiedForSequenceClassification,
        SimplifiedModel,
        SimplifiedPreTrainedModel,
    )
    from .optimization import parameter_groups

__all__ = [
    "__version__",
    "BLOCKS",
    "BlockType",
    "BLOCK_PRESETS",
    "BLOCK_TYPES",
    "SimplifiedConfig",
    "SimplifiedPreTrainedModel",
    "SimplifiedModel",
    "SimplifiedForCausalLM",
    "SimplifiedForMaskedLM",
    "SimplifiedForSequenceClassification",
    "parameter_groups",
]
#: the module of the package that defines each public name
_SOURCES = {
    **dict.fromkeys(__all__, "modeling_simplified"),
    **dict.fromkeys(
        ("__version__", "BLOCKS", "BlockType", "BLOCK_PRESETS", "BLOCK_TYPES", "SimplifiedConfig"),
        "configuration_simplified",
    ),
    "parameter_groups": "optimization",
}


def _register() -> None:
    """Register the config and the four model classes with the Auto classes (idempotent)."""
    from transformers import (
        AutoConfig,
        AutoModel,
        AutoModelForCausalLM,
        AutoModelForMaskedLM,
        AutoModelForSequenceClassification,
    )

    from . import configuration_simplified as configuration
    from . import modeling_simplified as modeling

    config = configuration.SimplifiedConfig
    AutoConfig.register(config.model_type, config, exist_ok=True)
    AutoModel.register(config, modeling.SimplifiedModel, exist_ok=True)
    AutoModelForCausalLM.register(config, modeling.SimplifiedForCausalLM, exist_ok=True)
    AutoModelForMaskedLM.register(config, modeling.SimplifiedForMaskedLM, exist_ok=True)
    AutoModelForSequenceClassification.register(config, modeling.SimplifiedForSequenceClassification, exist_ok=True)


def __getattr__(name: str) -> Any:
    if name not in _SOURCES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    _register()
    value = getattr(importlib.import_module(f".{_SOURCES[name]}", __name__), name)
    globals()[name] = value  # the next lookup skips __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
