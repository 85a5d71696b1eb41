"""The check of every page against the committed files: each generated block as it renders now, each registered
fact found in its page, and everything else the prose says held to `prose`'s rules. `Check` computes the blocks and
facts once, so that a page's text (the committed one, or a mutation of it) is checked quickly."""

from __future__ import annotations

import re

from . import prose
from .data import REPO
from .registry import BLOCKS, Fact, all_facts

#: every page the check reads: README.md, CHANGELOG.md and docs/*.md
PAGES = tuple(prose.pages())

BLOCK = re.compile(r"<!-- generated:(?P<name>[\w-]+) -->\n(?P<body>.*?)<!-- /generated:(?P=name) -->", re.DOTALL)

#: the verdict words of the pages that are not a verdict (a definition, an English use), checked as facts
NOT_VERDICTS = (
    "A verdict is **inconclusive** with one seed",
    "the peak lr held constant",
    'a claim across depths reads "untestable in this setting" where',
)


def regenerate(text: str) -> str:
    """`text` with every generated block rendered anew; an unknown block name is an error."""

    def render(match: re.Match) -> str:
        name = match["name"]
        if name not in BLOCKS:
            raise KeyError(f"unknown generated block {name!r}; known: {', '.join(BLOCKS)}")
        return f"<!-- generated:{name} -->\n{BLOCKS[name]()}\n<!-- /generated:{name} -->"

    return BLOCK.sub(render, text)


def blocks_in(text: str) -> list[str]:
    return [m["name"] for m in BLOCK.finditer(text)]


class Check:
    """The check of every page against the committed JSON, computed once: the facts per page and each generated
    block as it renders now. `problems(page, text)` checks one page's text (the committed one, or a mutation)."""

    def __init__(self) -> None:
        self.facts: dict[str, list[str]] = {page: [] for page in PAGES}
        for fact in all_facts():
            self.facts[fact.page].append(fact.text)
        self.rendered = {name: render() for name, render in BLOCKS.items()}

    def page(self, page: str, text: str | None = None) -> prose.Page:
        text = (REPO / page).read_text() if text is None else text
        found = [t for t in NOT_VERDICTS if prose.loose(t).search(text)]
        return prose.Page.read(page, text, [*self.facts[page], *found], BLOCK)

    def stale_blocks(self, text: str) -> list[str]:
        return [m["name"] for m in BLOCK.finditer(text) if m["body"] != self.rendered.get(m["name"], "") + "\n"]

    def problems(self, page: str, text: str | None = None) -> list[prose.Problem]:
        """Everything wrong with `page` (or `text` as that page)."""
        read = self.page(page, text)
        return [
            *(prose.Problem("a stale generated block", page, 0, name, "") for name in self.stale_blocks(read.text)),
            *(prose.Problem("a fact the page lacks", page, 0, fact, "") for fact in read.missing),
            *read.unchecked_verdicts(),
            *read.unchecked_numbers(),
        ]

    def misses(self, page: str, text: str | None = None, number_every: int = 1) -> tuple[int, list[prose.Mutation]]:
        """How many mutations of `page` (or of `text` as that page) there are, and those the check misses: a
        mutation is caught when the check of the mutated page finds a problem the unmutated one does not have.
        `number_every`: only every n-th mutation that is a number's (all verdict and comparison ones)."""
        read, before = self.page(page, text), set(self.problems(page, text))
        total, missed = 0, []
        for i, mutation in enumerate(prose.mutations(read)):
            if mutation.kind == "number" and i % number_every:
                continue
            total += 1
            if not set(self.problems(page, prose.apply(read, mutation))) - before:
                missed.append(mutation)
        return total, missed

    def mutations(self, number_every: int = 1) -> tuple[int, list[prose.Mutation]]:
        """`misses` over every page: how many mutations there are, and those the check misses."""
        counts = [self.misses(page, number_every=number_every) for page in PAGES]
        return sum(n for n, _ in counts), [m for _, missed in counts for m in missed]

    def missing_facts(self) -> list[Fact]:
        return [Fact(page, fact) for page in PAGES for fact in self.page(page).missing]

    def unchecked_verdicts(self) -> list[str]:
        return [str(p) for page in PAGES for p in self.page(page).unchecked_verdicts()]

    def unchecked_numbers(self) -> list[str]:
        return [str(p) for page in PAGES for p in self.page(page).unchecked_numbers()]
