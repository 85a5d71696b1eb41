"""`simplified-convert SUBCOMMAND SRC OUT`: SRC is a local `save_pretrained` folder (the authors' folder for
`original`), OUT a new `save_pretrained` folder, written only when the whole conversion succeeded. The arguments are
read before the conversion code (`run.py`: torch, transformers, the model) loads, so `--help` and a mistyped
subcommand answer at once."""

import argparse
import sys

#: subcommand → what it converts (`run.CONVERTERS` holds the function of each)
SUBCOMMANDS = {
    "gpt2-to-simplified": "GPT2LMHeadModel -> SimplifiedForCausalLM (pre_ln)",
    "simplified-to-gpt2": "SimplifiedForCausalLM (GPT-2-shaped pre_ln) -> GPT2LMHeadModel",
    "llama-to-simplified": "LlamaForCausalLM -> SimplifiedForCausalLM (pre_ln)",
    "simplified-to-llama": "SimplifiedForCausalLM (Llama-shaped pre_ln) -> LlamaForCausalLM",
    "bert-to-simplified": "BertForMaskedLM / BertModel -> SimplifiedForMaskedLM / SimplifiedModel",
    "original": "the authors' simplified_transformers checkpoint -> SimplifiedForCausalLM",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="simplified-convert", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("src", help="source folder")
        p.add_argument("out", help="new output folder (must not exist or be empty)")
        if name == "bert-to-simplified":
            p.add_argument("--drop-pooler", action="store_true", help="drop BertModel's pooler (no counterpart)")
    return parser


def _one_line(error: BaseException) -> str:
    """An error as one line: its message (its type too, for errors that are not about the input files; a
    `ConversionError` is a `ValueError`)."""
    text = " ".join(str(error).split()) or "(no message)"
    if isinstance(error, (OSError, ValueError)):
        return text
    return f"{type(error).__name__}: {text}"


def main(argv: list[str] | None = None) -> int:
    """Returns 0 on success; on any failure prints one `error:` line to stderr (no traceback), writes nothing to
    OUT and returns 1."""
    args = build_parser().parse_args(argv)
    from .run import convert

    try:
        model, out = convert(args.command, args.src, args.out, args)
    except Exception as error:  # ConversionError, the config's ValueError, OSError, torch/safetensors load errors
        print(f"simplified-convert {args.command}: error: {_one_line(error)}", file=sys.stderr)
        return 1
    print(f"wrote {type(model).__name__} to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
