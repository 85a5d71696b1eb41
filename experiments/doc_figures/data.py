"""The committed files the docs' results come from: the reproduction's `docs/reproduction/<family>/results.json`
(`make reproduce`), the benchmark runs and measurements in `docs/benchmark/` (`make bench` and its tools), each read
once."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
REPRODUCTION = REPO / "docs" / "reproduction"
BENCHMARK = REPO / "docs" / "benchmark"
#: the reproduction's families that the pages cite by name
DEPTH = "codeparrot-depth"
AUTHORS = "authors-parity"


@functools.cache
def reproduction(family: str, file: str = "results.json") -> dict[str, Any]:
    """`docs/reproduction/<family>/<file>` (a family's results, or another file of its folder)."""
    return json.loads((REPRODUCTION / family / file).read_text())


@functools.cache
def run(name: str) -> dict[str, Any]:
    """`docs/benchmark/<name>.json`: a `make bench` run or another committed measurement."""
    return json.loads((BENCHMARK / f"{name}.json").read_text())


#: `python -m experiments.glue_tiny`'s output folder: the default setting's glue.json, each other setting's in a folder
GLUE_TINY = "crammed-bert-tiny-glue"


def glue_tiny(setting: str = "") -> dict[str, Any]:
    """`python -m experiments.glue_tiny`'s table of the tiny crammed BERTs: the default setting's, or another's (the
    name of its folder)."""
    return reproduction(f"{GLUE_TINY}/{setting}".rstrip("/"), "glue.json")


def glue_tiny_settings() -> list[str]:
    """Every setting `python -m experiments.glue_tiny` has a committed glue.json of: the default ("") first."""
    folder = REPRODUCTION / GLUE_TINY
    return [""] + sorted(p.parent.name for p in folder.glob("*/glue.json"))


def clear_cache() -> None:
    """Forget every file read (a test that edits a copy of them)."""
    reproduction.cache_clear()
    run.cache_clear()
