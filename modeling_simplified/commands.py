"""The console commands' entry points (`[project.scripts]` in pyproject.toml): each imports its command's module and
runs its `main`, the one place the commands import lazily. Ctrl-C at any moment, the seconds spent importing torch
and transformers included, ends a command with one line and the shell's status for SIGINT (130), never a traceback:
this module and the package's `__init__` (whose names load on first use) import nothing heavy, so the interrupt of
the command module's import lands here.
"""

import importlib
import sys

#: the exit status of a command stopped by Ctrl-C (128 + SIGINT, as a shell reports it)
EXIT_INTERRUPTED = 130


def _run(command: str, module: str, function: str = "main") -> int:
    try:
        return getattr(importlib.import_module(module), function)()
    except KeyboardInterrupt:
        print(f"{command}: interrupted (Ctrl-C).", file=sys.stderr)
        return EXIT_INTERRUPTED


def train() -> int:
    return _run("simplified-train", "modeling_simplified.training.cli")


def glue() -> int:
    return _run("simplified-glue", "modeling_simplified.training.glue_cli")


def export() -> int:
    return _run("simplified-export", "modeling_simplified.hub_cards.cli", "export_main")


def push() -> int:
    return _run("simplified-push", "modeling_simplified.hub_cards.cli", "push_main")


def convert() -> int:
    return _run("simplified-convert", "modeling_simplified.conversion.cli")
