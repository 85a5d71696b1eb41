"""The one mechanism every page family uses to state its results: a generated block is a function registered by
`@block(NAME)` that returns the table (usually through `table`); a page's checked facts come from functions
registered by `@facts(PAGE)`, each returning the texts the page must contain. A page family's module registers its
own and imports no other family's."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Fact:
    """`text` must appear in `page` (wrapped anywhere)."""

    page: str
    text: str


#: every generated block: its name in the markers → the function that renders it
BLOCKS: dict[str, Callable[[], str]] = {}
#: every function of checked facts, with the page it states them on, in the order registered
FACT_SOURCES: list[tuple[str, Callable[[], Iterable[str]]]] = []


def block(name: str) -> Callable[[Callable[[], str]], Callable[[], str]]:
    """Register the decorated function as the renderer of `<!-- generated:name -->`."""

    def register(render: Callable[[], str]) -> Callable[[], str]:
        if name in BLOCKS:
            raise ValueError(f"two renderers of the generated block {name!r}")
        BLOCKS[name] = render
        return render

    return register


def facts(page: str) -> Callable[[Callable[[], Iterable[str]]], Callable[[], Iterable[str]]]:
    """Register the decorated function's texts as facts of `page` (its path from the repository root)."""

    def register(source: Callable[[], Iterable[str]]) -> Callable[[], Iterable[str]]:
        FACT_SOURCES.append((page, source))
        return source

    return register


def all_facts() -> list[Fact]:
    """Every registered fact, computed from the committed files now."""
    return [Fact(page, text) for page, source in FACT_SOURCES for text in source()]


def table(head: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A Markdown table: its header cells, the separator and a line per row of cells."""
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)
