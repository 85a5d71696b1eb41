"""What the check counts as a result in the prose, kind by kind, and how the mutation test changes each: a number
in digits, a number or quantity word, a verdict word, a comparison word and a committed run's name."""

from __future__ import annotations

import re
from collections.abc import Iterator

from .data import BENCHMARK

NUMBER, NUMBER_WORD, VERDICT, COMPARISON, RUN_NAME = "number", "number word", "verdict", "comparison", "run name"
KINDS = (NUMBER, NUMBER_WORD, VERDICT, COMPARISON, RUN_NAME)


def _words(swaps: dict[str, str], before: str = r"\b", after: str = r"\b") -> re.Pattern:
    """Any key of `swaps`, longest first, in any case."""
    alternatives = "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in sorted(swaps, key=len, reverse=True))
    return re.compile(f"{before}(?:{alternatives}){after}", re.IGNORECASE)


#: counts, fractions, multiples and quantifiers, each with the word the mutation test puts in its place
NUMBER_WORDS = {
    **dict(
        zip(
            ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven"),
            ("two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"),
        )
    ),
    "twelve": "eleven",
    "twenty": "thirty",
    "hundred": "thousand",
    "thousand": "hundred",
    "two-thirds": "half",
    "three-quarters": "half",
    "half": "a third",
    "halves": "thirds",
    "third": "half",
    "thirds": "halves",
    "quarter": "third",
    "quarters": "thirds",
    "once": "twice",
    "twice": "three times",
    "thrice": "twice",
    "double": "triple",
    "single": "double",
    "both": "neither",
    "either": "both",
    "neither": "both",
    "every": "no",
    "each": "no",
    "all": "none",
    "none": "all",
    "some": "all",
    "most": "few",
    "several": "no",
    "few": "many",
    "many": "few",
}
#: a word joined to the next by a hyphen is part of a compound ("one-row product", "held-out"), not a count
NUMBER_WORD_PATTERN = _words(NUMBER_WORDS, after=r"\b(?!-)")
VERDICTS = {
    "held": "did not hold",
    "holds": "does not hold",
    "did not hold": "held",
    "does not hold": "holds",
    "inconclusive": "held",
    "untestable": "held",
    "not testable": "testable",
    "met": "missed",
    "missed": "met",
    "meets": "misses",
    "misses": "meets",
    "shows": "does not show",
    "showed": "did not show",
    "show": "do not show",
    "does not show": "shows",
    "did not show": "showed",
    "do not show": "show",
    "agrees": "differs",
    "agree": "differ",
    "agreed": "differed",
    "differs": "agrees",
    "differ": "agree",
    "differed": "agreed",
    "disagree": "agree",
    "passes": "fails",
    "passed": "failed",
    "fails": "passes",
    "failed": "passed",
    "matched": "not matched",
    "not matched": "matched",
    "matches": "does not match",
    "does not match": "matches",
    "beat": "trail",
    "beats": "trails",
    "did not beat": "beat",
    "does not beat": "beats",
    "did not help": "helped",
    "helped": "did not help",
    "improves": "does not improve",
    "does not improve": "improves",
}
VERDICT_PATTERN = _words(VERDICTS, after=r"\b(?!-)")
COMPARISONS = {
    "ahead": "behind",
    "behind": "ahead",
    "faster": "slower",
    "slower": "faster",
    "fastest": "slowest",
    "slowest": "fastest",
    "more": "less",
    "less": "more",
    "fewer": "more",
    "least": "most",
    "larger": "smaller",
    "smaller": "larger",
    "largest": "smallest",
    "smallest": "largest",
    "greater": "smaller",
    "higher": "lower",
    "lower": "higher",
    "highest": "lowest",
    "lowest": "highest",
    "above": "below",
    "below": "above",
    "better": "worse",
    "worse": "better",
    "within": "outside",
    "outside": "within",
    "longer": "shorter",
    "shorter": "longer",
    "wider": "narrower",
    "narrower": "wider",
    "narrowest": "widest",
    "same": "different",
    "different": "same",
    "identical": "different",
    "equal": "unequal",
    "equals": "differs from",
}
COMPARISON_PATTERN = _words(COMPARISONS, after=r"\b(?!-)")
#: a number as the prose writes one: 12, 1,024, 0.96, 1.2e-3, −0.050, 2.3×, 77%
NUMBER_PATTERN = re.compile(r"(?<![\w.])(?:[−+-])?\d+(?:,\d{3})*(?:\.\d+)?(?:e[−-]?\d+)?[KMB]?(?![\w])")


def committed_runs() -> list[str]:
    """The names of the committed benchmark runs and measurements (`docs/benchmark/*.json`)."""
    return sorted(p.stem for p in BENCHMARK.glob("*.json"))


def run_name_pattern(names: list[str]) -> re.Pattern:
    """A committed run by its file's name (`bf16run3`, `run14.json`), or a numbered run in words (run 14, runs
    13–16, Run 13's)."""
    by_name = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(rf"(?<![\w-])(?:{by_name})(?![\w-])|\b[Rr]uns?\s+\d+(?:\s*(?:–|,|and|to)\s*\d+)*(?![\d.])")


def occurrences(text: str, runs: re.Pattern) -> Iterator[tuple[str, re.Match]]:
    """Every result-like word or number of `text`, with its kind."""
    for kind, pattern in (
        (NUMBER, NUMBER_PATTERN),
        (NUMBER_WORD, NUMBER_WORD_PATTERN),
        (VERDICT, VERDICT_PATTERN),
        (COMPARISON, COMPARISON_PATTERN),
        (RUN_NAME, runs),
    ):
        for m in pattern.finditer(text):
            yield kind, m


def _same_case(word: str, like: str) -> str:
    return word[:1].upper() + word[1:] if like[:1].isupper() else word


def bump(number: str) -> str:
    """`number` with its last digit changed (9 → 8, else + 1)."""
    i = max(i for i, c in enumerate(number) if c.isdigit())
    digit = int(number[i])
    return number[:i] + str(digit - 1 if digit == 9 else digit + 1) + number[i + 1 :]


def swap(kind: str, found: str, names: list[str]) -> str:
    """What the mutation test writes in place of `found`, a result of `kind`: another number, the other word, another
    committed run."""
    if kind == NUMBER:
        return bump(found)
    table = {NUMBER_WORD: NUMBER_WORDS, VERDICT: VERDICTS, COMPARISON: COMPARISONS}.get(kind)
    if table is not None:
        return _same_case(table[" ".join(found.lower().split())], found)
    if found in names:  # another run of the same series where there is one (bf16run3 → bf16run4), else the next
        stem = found.rstrip("0123456789")
        series = [n for n in names if n != found and n.rstrip("0123456789") == stem and n != stem]
        return series[0] if series else names[(names.index(found) + 1) % len(names)]
    return bump(found)  # run 14 → run 15
