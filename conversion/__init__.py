"""Checkpoint converters (authors' checkpoints, GPT-2, Llama, BERT) and their CLI (`simplified-convert`)."""

from .common import ConversionError
from .hf import bert_to_simplified, gpt2_to_simplified, llama_to_simplified, simplified_to_gpt2, simplified_to_llama
from .original import convert_original, original_config, original_to_simplified

__all__ = [
    "ConversionError",
    "gpt2_to_simplified",
    "simplified_to_gpt2",
    "llama_to_simplified",
    "simplified_to_llama",
    "bert_to_simplified",
    "original_config",
    "original_to_simplified",
    "convert_original",
]
