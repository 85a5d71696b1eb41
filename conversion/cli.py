"""`simplified-convert SUBCOMMAND SRC OUT`: SRC is a local `save_pretrained` folder (the authors' folder for
`original`), OUT a new `save_pretrained` folder, written only when the whole conversion succeeded."""

import argparse
import json
import sys
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


COMMANDS = {
    "gpt2-to-simplified": (_gpt2_to_simplified, "GPT2LMHeadModel -> SimplifiedForCausalLM (pre_ln)"),
    "simplified-to-gpt2": (_simplified_to_gpt2, "SimplifiedForCausalLM (GPT-2-shaped pre_ln) -> GPT2LMHeadModel"),
    "llama-to-simplified": (_llama_to_simplified, "LlamaForCausalLM -> SimplifiedForCausalLM (pre_ln)"),
    "simplified-to-llama": (_simplified_to_llama, "SimplifiedForCausalLM (Llama-shaped pre_ln) -> LlamaForCausalLM"),
    "bert-to-simplified": (
        _bert_to_simplified,
        "BertForMaskedLM / BertModel -> SimplifiedForMaskedLM / SimplifiedModel",
    ),
    "original": (_original, "the authors' simplified_transformers checkpoint -> SimplifiedForCausalLM"),
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="simplified-convert", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (_, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("src", help="source folder")
        p.add_argument("out", help="new output folder (must not exist or be empty)")
        if name == "bert-to-simplified":
            p.add_argument("--drop-pooler", action="store_true", help="drop BertModel's pooler (no counterpart)")
    return parser


def _one_line(error: BaseException) -> str:
    """An error as one line: its message (its type too, for errors that are not about the input files)."""
    text = " ".join(str(error).split()) or "(no message)"
    if isinstance(error, (ConversionError, OSError, ValueError)):
        return text
    return f"{type(error).__name__}: {text}"


def main(argv: list[str] | None = None) -> int:
    """Returns 0 on success; on any failure prints one `error:` line to stderr (no traceback), writes nothing to
    OUT and returns 1."""
    args = build_parser().parse_args(argv)
    try:
        check_source(args.command, args.src)
        check_out(args.out)  # before the source model is loaded (which can take minutes)
        model = COMMANDS[args.command][0](args.src, args)
        out = save_atomically(model, args.out, copy_from=args.src)
    except Exception as error:  # ConversionError, the config's ValueError, OSError, torch/safetensors load errors
        print(f"simplified-convert {args.command}: error: {_one_line(error)}", file=sys.stderr)
        return 1
    print(f"wrote {type(model).__name__} to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
