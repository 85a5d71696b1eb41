"""What `python -m experiments.doc_figures --check` asks of every page besides its figures: that each number in the
prose is either checked (inside a generated block or a `Fact`) or exempt by a rule of `EXEMPT`, that each verdict
word is checked, and that the check can fail: `mutations` changes each checked number, verdict word and comparison
word next to a checked number, one at a time, and each change must be reported.

The pages are README.md, CHANGELOG.md and every docs/*.md. A fact matches wherever the prose wraps it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from .data import REPO

#: a number as the prose writes one: 12, 1,024, 0.96, 1.2e-3, −0.050, 2.3×, 77%
NUMBER = re.compile(r"(?<![\w.])(?:[−+-])?\d+(?:,\d{3})*(?:\.\d+)?(?:e[−-]?\d+)?[KMB]?(?![\w])")
#: a verdict, in any case; `-` after it is a compound ("held-out"), not a verdict
VERDICT = re.compile(r"\b(held|did not hold|inconclusive|untestable|not testable)\b(?!-)", re.IGNORECASE)
VERDICT_SWAP = {"held": "did not hold", "did not hold": "held", "inconclusive": "held", "untestable": "held"}
VERDICT_SWAP["not testable"] = "held"
#: the words that say which way a checked number points, and the word that turns each around
COMPARISONS = {
    "more than": "less than",
    "less than": "more than",
    "fewer than": "more than",
    "ahead": "behind",
    "behind": "ahead",
    "within": "outside",
    "above": "below",
    "below": "above",
    "faster": "slower",
    "slower": "faster",
    "higher": "lower",
    "lower": "higher",
    "better": "worse",
    "worse": "better",
}
COMPARISON = re.compile(r"\b(" + "|".join(COMPARISONS) + r")\b", re.IGNORECASE)
#: how far (characters) from a checked number a comparison word counts as its
NEAR = 40


@dataclass(frozen=True)
class Exempt:
    """Numbers inside a match of `pattern` are not results: `why` says what they are instead."""

    why: str
    pattern: str
    flags: int = re.MULTILINE


#: The numbers that are not results, each kind by one rule. Everything else in the prose is a result and must be
#: checked: generated from the committed JSON, or a `Fact` of `experiments.doc_figures` formatted from it.
EXEMPT: tuple[Exempt, ...] = (
    Exempt(
        "code: commands, arguments, file names and config values (the code and its tests own them)",
        r"```.*?```|`[^`\n]+`",
        re.DOTALL,
    ),
    Exempt(
        "a link's target, a URL, an HTML comment or a link to a numbered section",
        r"\]\([^)\s]*\)|https?://\S+"
        r"|<!--.*?-->|\[[\d.]+(?: [^\]]*)?\]\(#[^)\s]*\)",
        re.DOTALL,
    ),
    Exempt("the papers' own words, quoted", r'"[^"\n]+"|“[^”\n]+”|^>.*$', re.MULTILINE),
    Exempt(
        "a reference: figure, table, section, equation, appendix, algorithm, footnote, arXiv id, a numbered step",
        r"\b(?:Fig(?:ure)?s?\.?|Tables?|App(?:endix|\.)|[Ee]qs?\.|[Ee]quations?|[Ss]ections?|[Ff]ootnote|Alg\.|arXiv:)"
        r"\s*[\dA-Z][\w.]*(?:\s*(?:[–,-]|and|or)\s*(?:\d|[A-Z]\.?\d)[\w.]*)*|§+\s*[\d.]+(?:[–-][\d.]+)?|^#+ [\d.]+"
        r"|^\s*\d+\.\s|\bsteps? \d\b",
        re.MULTILINE,
    ),
    Exempt(
        "a year, a date, a version or a release",
        r"\b\d{4}-\d{2}-\d{2}\b|\b20[0-2]\d\b|\bv?\d+\.\d+\.\d+\w*|\b\d+\.x\b|\bpre-\d[\d.]*|(?:Python|transformers|torch|PyTorch|vLLM|"
        r"TGI|CUDA|datasets|tokenizers|huggingface_hub|accelerate|safetensors|numpy|olah|SGLang|ONNX|opset)"
        r"\s*[<>=~≥≤]*\s*\d+(?:\.\d+)*",
    ),
    Exempt(
        "a setting, by its name or unit: a shape, a length, a rate or another recipe constant",
        r"\b(?:lr|wd|eps|clip|betas?|heads?|batch|seq(?:uence)?|vocab|MLP|width|depth|top-k)"
        r"\s*[=:]?\s*\(?[−-]?\d[\d.,e−-]*(?:,\s*[\d.]+\))?|\b(?:[dHTLBDk]|[αβγλ]\w*)\s*=\s*[−-]?\d[\d.]*"
        r"|\b\d[\d,]*\s*(?:blocks?|layers?|heads?|threads?|cores?|processes|GPUs?|bits?)\b|\b\d-D\b",
    ),
    Exempt(
        "a name with a digit in it: a model, a data set, a kernel or a standard (GPT-2, SST-2, SmolLM2-135M), or a "
        "committed benchmark run (run 14, runs 13–16)",
        r"\b(?:GPT|SST|SmolLM2|flash-attention|SHA|UTF|AVX|Apache)-\d+(?:\.\d+)?[KMB]?\b"
        r"|\b[Rr]uns?\s+\d+(?![.\d])(?:\s*(?:–|,|and)\s*\d+(?![.\d]))*",
    ),
    Exempt(
        "a seed's index, which names a run (how many seeds ran is a result)",
        r"\b[Ss]eeds?\s+\d+(?![\d%]|\.\d)(?:(?:,\s*|\s+(?:and|or|to)\s+|\s*/\s*)(?:seed\s+)?\d+(?![\d%]|\.\d))*",
    ),
)


def exempt_spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for rule in EXEMPT for m in re.finditer(rule.pattern, text, rule.flags)]


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
    """One page's text, which offsets are checked (a generated block or a fact found) and the facts not found."""

    name: str
    text: str
    checked_mask: bytearray
    missing: list[str]

    @classmethod
    def read(cls, name: str, text: str, facts: list[str], block: re.Pattern) -> Page:
        spans, missing = [m.span() for m in block.finditer(text)], []
        for fact in facts:
            found = [m.span() for m in loose(fact).finditer(text)]
            spans += found
            if not found:
                missing.append(fact)
        return cls(name, text, _mask(len(text), spans), missing)

    def checked(self, start: int, end: int) -> bool:
        return all(self.checked_mask[start:end])

    def unchecked_numbers(self) -> list[Problem]:
        exempt = _mask(len(self.text), exempt_spans(self.text))
        return [
            self.problem("a number neither checked nor exempt", m)
            for m in NUMBER.finditer(self.text)
            if not self.checked(*m.span()) and not all(exempt[m.start() : m.end()])
        ]

    def unchecked_verdicts(self) -> list[Problem]:
        return [
            self.problem("a verdict no fact checks", m)
            for m in VERDICT.finditer(self.text)
            if not self.checked(*m.span())
        ]

    def problem(self, kind: str, m: re.Match) -> Problem:
        line = self.text.count("\n", 0, m.start()) + 1
        return Problem(kind, self.name, line, m[0], " ".join(self.text[max(0, m.start() - 70) : m.end() + 30].split()))


def pages() -> list[str]:
    """Every page the check reads: the front page, the CHANGELOG and every page of docs/."""
    return ["README.md", "CHANGELOG.md", *sorted(p.relative_to(REPO).as_posix() for p in (REPO / "docs").glob("*.md"))]


@dataclass(frozen=True)
class Mutation:
    page: str
    kind: str  # number, verdict or comparison
    old: str
    new: str
    at: int  # offset in the page's text
    context: str


def _bump(number: str) -> str:
    """`number` with its last digit changed (9 → 8, else + 1)."""
    i = max(i for i, c in enumerate(number) if c.isdigit())
    digit = int(number[i])
    return number[:i] + str(digit - 1 if digit == 9 else digit + 1) + number[i + 1 :]


def _mutation(page: Page, kind: str, m: re.Match, new: str) -> Mutation:
    return Mutation(
        page.name, kind, m[0], new, m.start(), " ".join(page.text[max(0, m.start() - 60) : m.end() + 30].split())
    )


def mutations(page: Page) -> Iterator[Mutation]:
    """Every change the check must catch on `page`: each number inside a checked span (fact or generated block),
    each verdict word anywhere, and each comparison word within `NEAR` characters of a checked number."""
    checked_numbers = [m for m in NUMBER.finditer(page.text) if page.checked(*m.span())]
    for m in checked_numbers:
        yield _mutation(page, "number", m, _bump(m[0]))
    for m in VERDICT.finditer(page.text):
        yield _mutation(page, "verdict", m, VERDICT_SWAP[m[0].lower()])
    starts = [m.start() for m in checked_numbers]
    for m in COMPARISON.finditer(page.text):
        if any(abs(s - m.start()) <= NEAR for s in starts):
            yield _mutation(page, "comparison", m, COMPARISONS[m[0].lower()])


def apply(page: Page, mutation: Mutation) -> str:
    text = page.text
    return text[: mutation.at] + mutation.new + text[mutation.at + len(mutation.old) :]
