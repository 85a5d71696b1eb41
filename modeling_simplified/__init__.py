"""simplified-transformers: the simplified transformer blocks of He & Hofmann (ICLR 2024), NormFormer and friends
as a Hugging Face Transformers model family. Importing the package registers it with the Auto classes."""

from pathlib import Path

from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    AutoModelForSequenceClassification,
)

# `conversion/` and `hub_cards/` sit at the repository root and install as subpackages (pyproject package-dir).
# When this package is imported straight from a checkout (`python -m ...` in the repository), find them there too.
_checkout = Path(__file__).resolve().parent.parent
if (_checkout / "pyproject.toml").is_file() and (_checkout / "hub_cards").is_dir():
    __path__.append(str(_checkout))

from .configuration_simplified import BLOCK_PRESETS, BLOCK_TYPES, SimplifiedConfig, __version__
from .modeling_simplified import (
    SimplifiedForCausalLM,
    SimplifiedForMaskedLM,
    SimplifiedForSequenceClassification,
    SimplifiedModel,
    SimplifiedPreTrainedModel,
)
from .optimization import parameter_groups

AutoConfig.register(SimplifiedConfig.model_type, SimplifiedConfig, exist_ok=True)
AutoModel.register(SimplifiedConfig, SimplifiedModel, exist_ok=True)
AutoModelForCausalLM.register(SimplifiedConfig, SimplifiedForCausalLM, exist_ok=True)
AutoModelForMaskedLM.register(SimplifiedConfig, SimplifiedForMaskedLM, exist_ok=True)
AutoModelForSequenceClassification.register(SimplifiedConfig, SimplifiedForSequenceClassification, exist_ok=True)

__all__ = [
    "__version__",
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
