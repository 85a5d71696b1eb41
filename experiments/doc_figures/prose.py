"""What `python -m experiments.doc_figures --check` asks of every page besides its generated tables: that each
result in the prose (`vocabulary`: a number, a number or quantity word, a verdict, a comparison, a run's name) is
either checked (inside a generated block or a fact) or exempt by a rule of `exempt.EXEMPT`; and, through
`mutations`, that the check fails for every change to a checked result.

The pages are README.md, CHANGELOG.md and every docs/*.md. A fact matches wherever the prose wraps it.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from . import exempt, vocabulary
from .data import REPO


@functools.cache
def loose(text: str) -> re.Pattern:
    """`text` as a pattern in which every whitespace run matches any whitespace run (prose wraps anywhere)."""
    return re.compile(r"\s+".join(re.escape(part) for part in text.split()))


def _mask(length: int, spans: list[tuple[int, int]]) -> bytearray:
    """1 at every offset inside one of `spans`."""
    mask = bytearray(length)
    for a, b in spans:
        mask[a:b] = b"\x01" * (b - a)
    return mask


#: a link whose text names the file it links to (`[`run13.md`](benchmark/run13.md)`): the text is checked by the link
_LINK_TO_FILE = re.compile(r"\[`?(?P<text>[\w.-]+)`?\]\((?:[^)\s]*/)?(?P<file>[\w.-]+)\)")


@dataclass(frozen=True)
class Problem:
    """What is wrong where: compared by kind, page, line and the text found (not the context, which a mutation
    nearby changes)."""

    kind: str
    page: str
    line: int
    found: str
    context: str = field(compare=False)

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.kind}: {self.found!r} in …{self.context}…"


@dataclass
class Page:
    """One page's text, which offsets are checked (a generated block, a fact, a run's recorded command, a link's
    text that names its file) and the facts not found as often as they are stated."""

    name: str
    text: str
    checked_mask: bytearray
    missing: list[str]
    miscounted: list[tuple[str, int, int]]  # (fact, times stated, times found)

    @classmethod
    def read(cls, name: str, text: str, facts: list[str], block: re.Pattern, recorded: tuple[str, ...] = ()) -> Page:
        """`facts`: the texts `text` must hold, each as many times as it is listed; `recorded`: texts checked where
        they stand (a run's recorded command), not required."""
        spans, missing, miscounted = [m.span() for m in block.finditer(text)], [], []
        for fact, stated in Counter(facts).items():
            found = [m.span() for m in loose(fact).finditer(text)]
            spans += found
            if not found:
                missing.append(fact)
            elif len(found) != stated:
                miscounted.append((fact, stated, len(found)))
        for known in recorded:
            spans += [m.span() for m in loose(known).finditer(text)]
        spans += [m.span("text") for m in _LINK_TO_FILE.finditer(text) if m["text"] == m["file"]]
        return cls(name, text, _mask(len(text), spans), missing, miscounted)

    def checked(self, start: int, end: int) -> bool:
        return all(self.checked_mask[start:end])

    @functools.cached_property
    def rules(self) -> list[tuple[exempt.Exempt, list[tuple[int, int]]]]:
        """Each exemption rule with the spans of this page it exempts."""
        return exempt.matches(self.name, self.text)

    @functools.cached_property
    def exempt(self) -> dict[str, bytearray]:
        return exempt.masks(self.rules, len(self.text))

    def is_exempt(self, kind: str, start: int, end: int) -> bool:
        return all(self.exempt[kind][start:end])

    def exempt_by(self, kind: str, start: int, end: int) -> exempt.Exempt | None:
        return exempt.rule_of(self.rules, kind, start, end)

    def results(self) -> Iterator[tuple[str, re.Match]]:
        """Every number, number word, verdict, comparison and run name of the page, with its kind."""
        return vocabulary.occurrences(self.text, _runs())

    def unchecked(self) -> list[Problem]:
        """Every result neither checked nor exempt."""
        return [
            self.problem(f"a {kind} neither checked nor exempt", m)
            for kind, m in self.results()
            if not self.checked(*m.span()) and not self.is_exempt(kind, *m.span())
        ]

    def problem(self, kind: str, m: re.Match) -> Problem:
        line = self.text.count("\n", 0, m.start()) + 1
        return Problem(kind, self.name, line, m[0], " ".join(self.text[max(0, m.start() - 70) : m.end() + 30].split()))


@functools.cache
def _runs() -> re.Pattern:
    return vocabulary.run_name_pattern(vocabulary.committed_runs())


def pages() -> list[str]:
    """Every page the check reads: the front page, the CHANGELOG and every page of docs/."""
    return ["README.md", "CHANGELOG.md", *sorted(p.relative_to(REPO).as_posix() for p in (REPO / "docs").glob("*.md"))]


@dataclass(frozen=True)
class Mutation:
    """One change to one result of a page: `old` at offset `at` becomes `new`."""

    page: str
    kind: str  # one of vocabulary.KINDS
    old: str
    new: str
    at: int
    context: str

    def apply(self, text: str) -> str:
        return text[: self.at] + self.new + text[self.at + len(self.old) :]


def mutations(page: Page) -> Iterator[Mutation]:
    """One mutation of every result of `page`, wherever it stands (checked, exempt or neither): a number's last
    digit, a number word, verdict or comparison turned to another, a run's name to another committed run's."""
    names = vocabulary.committed_runs()
    for kind, m in page.results():
        context = " ".join(page.text[max(0, m.start() - 60) : m.end() + 30].split())
        yield Mutation(page.name, kind, m[0], vocabulary.swap(kind, m[0], names), m.start(), context)
