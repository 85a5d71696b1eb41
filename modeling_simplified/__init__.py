"""simplified-transformers: the simplified transformer blocks of He & Hofmann (ICLR 2024), NormFormer and friends
as a Hugging Face Transformers model family. Importing the package registers it with the Auto classes."""

from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    AutoModelForSequenceClassification,
)

from .configuration_simplified import BLOCK_PRESETS, BLOCK_TYPES, BLOCKS, BlockType, SimplifiedConfig, __version__
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
