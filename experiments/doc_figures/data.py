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


def glue_tiny() -> dict[str, Any]:
    """`python -m experiments.glue_tiny`'s table of the tiny crammed BERTs."""
    return reproduction("crammed-bert-tiny-glue", "glue.json")


def clear_cache() -> None:
    """Forget every file read (a test that edits a copy of them)."""
    reproduction.cache_clear()
    run.cache_clear()
