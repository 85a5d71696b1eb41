"""The check of every page against the committed files: each generated block as it renders now, each registered
fact found in its page as often as it is stated, and every other result the prose holds exempt by a rule of
`exempt`. `Check` computes the blocks and facts once, so that a page's text (the committed one, or a mutation of
it) is checked quickly; `Check.coverage` runs the mutation test."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from . import exempt, prose, vocabulary
from .data import REPO, run
from .registry import BLOCKS, Fact, all_facts

#: every page the check reads: README.md, CHANGELOG.md and docs/*.md
PAGES = tuple(prose.pages())

BLOCK = re.compile(r"<!-- generated:(?P<name>[\w-]+) -->\n(?P<body>.*?)<!-- /generated:(?P=name) -->", re.DOTALL)


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


def recorded_commands() -> tuple[str, ...]:
    """The command each committed run records (`meta.command`, or `command`): a page that quotes it in full quotes
    the record, run name included."""
    commands = []
    for name in vocabulary.committed_runs():
        record = run(name)
        meta = record.get("meta") if isinstance(record, dict) else None
        command = (meta or {}).get("command") or (record.get("command") if isinstance(record, dict) else None)
        if command:
            commands.append(f"`{command}`")
    return tuple(commands)


def pending_or_unchecked(page: str, unchecked: list[prose.Problem]) -> list[prose.Problem]:
    """The problems of `unchecked` (results of `page` neither checked nor exempt) that `exempt.PENDING` does not
    account for: where the ledger counts a kind on this page, one problem if the count differs; elsewhere each."""
    out = []
    for kind in vocabulary.KINDS:
        found = [p for p in unchecked if p.kind == f"a {kind} neither checked nor exempt"]
        pending = exempt.PENDING.get((page, kind))
        if pending is None:
            out += found
        elif len(found) != pending:
            out.append(
                prose.Problem(
                    f"{kind}s not yet checked: {len(found)}, the ledger (exempt.PENDING) says {pending}",
                    page,
                    0,
                    str(len(found)),
                    "",
                )
            )
    return out


@dataclass
class Coverage:
    """What the mutation test found, by kind of result: changes caught; results exempt (by rule); changes to a
    checked result the check misses; and results not yet checked (`exempt.PENDING`), which no change to can fail."""

    caught: Counter = field(default_factory=Counter)
    exempt: Counter = field(default_factory=Counter)  # by kind
    by_rule: Counter = field(default_factory=Counter)  # by the rule that exempts
    missed: list[prose.Mutation] = field(default_factory=list)
    pending: list[prose.Mutation] = field(default_factory=list)

    def add(self, other: Coverage) -> None:
        self.caught.update(other.caught)
        self.exempt.update(other.exempt)
        self.by_rule.update(other.by_rule)
        self.missed += other.missed
        self.pending += other.pending

    def summary(self) -> str:
        lines = []
        for kind in vocabulary.KINDS:
            missed = sum(m.kind == kind for m in self.missed)
            pending = sum(m.kind == kind for m in self.pending)
            results = self.caught[kind] + missed + pending
            lines.append(
                f"{kind}: {self.caught[kind]} of {results} results caught ({missed} checked but missed, {pending} "
                f"not yet checked), {self.exempt[kind]} exempt by a rule"
            )
        lines += [f"  exempt: {n} by {why}" for why, n in self.by_rule.most_common()]
        return "\n".join(lines)


class Check:
    """The check of every page against the committed JSON, computed once: the facts per page, each generated block
    as it renders now and the runs' recorded commands. `problems(page, text)` checks one page's text."""

    def __init__(self) -> None:
        self.facts: dict[str, list[str]] = {page: [] for page in PAGES}
        for fact in all_facts():
            self.facts[fact.page].append(fact.text)
        self.rendered = {name: render() for name, render in BLOCKS.items()}
        self.recorded = recorded_commands()

    def page(self, page: str, text: str | None = None) -> prose.Page:
        text = (REPO / page).read_text() if text is None else text
        return prose.Page.read(page, text, self.facts[page], BLOCK, self.recorded)

    def stale_blocks(self, text: str) -> list[str]:
        return [m["name"] for m in BLOCK.finditer(text) if m["body"] != self.rendered.get(m["name"], "") + "\n"]

    def problems(self, page: str, text: str | None = None) -> list[prose.Problem]:
        """Everything wrong with `page` (or `text` as that page)."""
        read = self.page(page, text)
        return [
            *(prose.Problem("a stale generated block", page, 0, name, "") for name in self.stale_blocks(read.text)),
            *(prose.Problem("a fact the page lacks", page, 0, fact, "") for fact in read.missing),
            *(
                prose.Problem(f"a fact stated {stated} times, found {found}", page, 0, fact, "")
                for fact, stated, found in read.miscounted
            ),
            *pending_or_unchecked(page, read.unchecked()),
        ]

    def coverage(self, page: str, text: str | None = None, every: int = 1) -> Coverage:
        """The mutation test on `page` (or `text` as that page): every result changed in turn. A change the check
        reports (a problem the unchanged page does not have) is caught; a result that a rule exempts, and no fact
        or block checks, is counted by its rule; anything else is missed. `every`: check only every n-th mutation
        of a checked result (the default suite's sample)."""
        read, before = self.page(page, text), set(self.problems(page, text))
        found = Coverage()
        checked = 0
        for mutation in prose.mutations(read):
            start, end = mutation.at, mutation.at + len(mutation.old)
            if not read.checked(start, end):
                if read.is_exempt(mutation.kind, start, end):
                    found.exempt[mutation.kind] += 1
                    found.by_rule[read.exempt_by(mutation.kind, start, end).why] += 1
                else:  # a result neither checked nor exempt (one of `exempt.PENDING`): no change to it can fail
                    found.pending.append(mutation)
                continue
            checked += 1
            if (checked - 1) % every:
                continue
            if set(self.problems(page, mutation.apply(read.text))) - before:
                found.caught[mutation.kind] += 1
            else:
                found.missed.append(mutation)
        return found

    def coverage_of_every_page(self, every: int = 1) -> Coverage:
        total = Coverage()
        for page in PAGES:
            total.add(self.coverage(page, every=every))
        return total

    def missing_facts(self) -> list[Fact]:
        return [Fact(page, fact) for page in PAGES for fact in self.page(page).missing]

    def unchecked(self) -> list[str]:
        """Every result neither checked, exempt nor counted by `exempt.PENDING`."""
        return [str(p) for page in PAGES for p in pending_or_unchecked(page, self.page(page).unchecked())]

    def pending(self) -> list[prose.Problem]:
        """Every result that `exempt.PENDING` counts: not yet checked."""
        return [p for page in PAGES for p in self.page(page).unchecked()]
