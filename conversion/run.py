"""The work of `simplified-convert SUBCOMMAND SRC OUT` (`cli.py` reads the arguments, then imports this): SRC checked
before anything loads, the source model loaded and converted, OUT written only when the whole conversion succeeded."""

import argparse
import json
from pathlib import Path

from safetensors import safe_open
from transformers import AutoConfig, BertForMaskedLM, BertModel, GPT2LMHeadModel, LlamaForCausalLM

from modeling_simplified import SimplifiedForCausalLM

from .common import ConversionError, check_out, save_atomically
from .hf import bert_to_simplified, gpt2_to_simplified, llama_to_simplified, simplified_to_gpt2, simplified_to_llama
from .original import load_original, original_to_simplified


def _gpt2_to_simplified(src, args):
    return gpt2_to_simplified(GPT2LMHeadModel.from_pretrained(src))


def _simplified_to_gpt2(src, args):
    return simplified_to_gpt2(SimplifiedForCausalLM.from_pretrained(src))


def _llama_to_simplified(src, args):
    return llama_to_simplified(LlamaForCausalLM.from_pretrained(src))


def _simplified_to_llama(src, args):
    return simplified_to_llama(SimplifiedForCausalLM.from_pretrained(src))


def _bert_to_simplified(src, args):
    architectures = AutoConfig.from_pretrained(src).architectures or []
    cls = BertForMaskedLM if "BertForMaskedLM" in architectures else BertModel
    return bert_to_simplified(cls.from_pretrained(src), drop_pooler=args.drop_pooler)


def _original(src, args):
    return original_to_simplified(*load_original(src))


#: subcommand → the function that loads SRC and returns the converted model (`cli.SUBCOMMANDS` holds their help)
CONVERTERS = {
    "gpt2-to-simplified": _gpt2_to_simplified,
    "simplified-to-gpt2": _simplified_to_gpt2,
    "llama-to-simplified": _llama_to_simplified,
    "simplified-to-llama": _simplified_to_llama,
    "bert-to-simplified": _bert_to_simplified,
    "original": _original,
}


#: The `model_type` each subcommand reads (`original`: the authors' folder has its own checks).
SOURCE_MODEL_TYPES = {
    "gpt2-to-simplified": "gpt2",
    "simplified-to-gpt2": "simplified",
    "llama-to-simplified": "llama",
    "simplified-to-llama": "simplified",
    "bert-to-simplified": "bert",
}


def check_source(command: str, src: str):
    """One clear error before any loading: SRC must be an existing folder; for the Hugging Face formats its
    config.json must be a JSON object of the expected `model_type`, and every `*.safetensors` file must be readable."""
    folder = Path(src)
    if not folder.exists():
        raise ConversionError(f"SRC={src!r} does not exist (a local folder is expected).")
    if not folder.is_dir():
        raise ConversionError(f"SRC={src!r} is not a folder.")
    expected = SOURCE_MODEL_TYPES.get(command)
    if expected is None:
        return
    path = folder / "config.json"
    if not path.is_file():
        raise ConversionError(f"{path} does not exist: SRC must be a save_pretrained folder.")
    try:
        config = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConversionError(f"{path} is not valid JSON: {error}.") from None
    if not isinstance(config, dict):
        raise ConversionError(f"{path} must hold a JSON object, got a {type(config).__name__}.")
    found = config.get("model_type")
    if found != expected:
        raise ConversionError(
            f"{path} has model_type={found!r}; {command} expects model_type={expected!r} (another family's "
            "checkpoint: pick the subcommand for its model_type)."
        )
    for weights in sorted(folder.glob("*.safetensors")):
        try:
            with safe_open(weights, framework="pt") as f:
                for key in f.keys():
                    f.get_slice(key)
        except Exception as error:
            raise ConversionError(f"{weights} cannot be read as safetensors: {error}.") from None


def convert(command: str, src: str, out: str, args: argparse.Namespace) -> tuple[object, Path]:
    """Check SRC and OUT, convert SRC with the subcommand and save it to OUT atomically; the model and its folder."""
    check_source(command, src)
    check_out(out)  # before the source model is loaded (which can take minutes)
    model = CONVERTERS[command](src, args)
    return model, save_atomically(model, out, copy_from=src)
