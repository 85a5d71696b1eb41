"""How the pages print a result: numbers at the printed precision, lrs, verdicts, counts in words, run names."""

from __future__ import annotations

from typing import Any

#: counts as the prose spells them
COUNTS = dict(enumerate(("none", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")))


#: ordinals as the prose spells them
ORDINALS = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth"}
#: fractions as the prose spells them
FRACTIONS = {1 / 2: "half", 1 / 3: "a third", 2 / 3: "two-thirds", 1 / 4: "a quarter", 3 / 4: "three quarters"}


def fraction(x: float) -> str:
    """A simple fraction in words (0.5 → "half"); one the prose has no word for is an error (reword the page)."""
    for value, word in FRACTIONS.items():
        if abs(x - value) < 1e-9:
            return word
    raise ValueError(f"no word for the fraction {x}: reword the page")


def about_fraction(x: float, tolerance: float = 0.03) -> str:
    """The simple fraction nearest `x` in words ("about a quarter"); none within `tolerance` is an error."""
    value = min(FRACTIONS, key=lambda v: abs(v - x))
    if abs(value - x) > tolerance:
        raise ValueError(f"no simple fraction near {x}: reword the page")
    return FRACTIONS[value]


def num(x: float, digits: int = 3) -> str:
    """`x` with `digits` decimals, a negative one with the typographic minus the docs use."""
    return f"{x:.{digits}f}".replace("-", "−")


def signed(x: float, digits: int = 3) -> str:
    return ("+" if x >= 0 else "") + num(x, digits)


def pct(x: float) -> str:
    """A signed percentage at one decimal: +1.2%."""
    return signed(x, 1) + "%"


def span(values: list[float], digits: int = 3) -> str:
    """min–max of `values` at `digits` decimals, one figure where both print the same."""
    low, high = num(min(values), digits), num(max(values), digits)
    return low if low == high else f"{low}–{high}"


def lr_text(lr: float) -> str:
    """0.004 → 4e-3, 0.016 → 1.6e-2 (how the docs write lrs)."""
    mantissa, exponent = f"{lr:e}".split("e")
    return f"{float(mantissa):g}e{int(exponent)}"


def verdict_word(verdict: str) -> str:
    """The committed verdict as the docs say it: held, did not hold, inconclusive (its reason dropped), not run."""
    return verdict.replace("did NOT hold", "did not hold").split(" (")[0]


def common(values: list[Any]) -> Any:
    """The one value that all of `values` print as, where the prose states one figure for several runs or blocks."""
    if len(set(values)) != 1:
        raise ValueError(f"the prose states one figure where the JSON gives {sorted(set(values))}: reword it")
    return values[0]


def seeds_text(seeds: list[str]) -> str:
    """["0", "1"] → "0 and 1"."""
    return " and ".join([", ".join(seeds[:-1]), seeds[-1]] if len(seeds) > 1 else seeds)


def run_numbers(names: tuple[str, ...]) -> str:
    """`("run13", "run14", "run15", "run16")` → "13–16", as the prose names a span of consecutive runs."""
    numbers = [int(name.removeprefix("run")) for name in names]
    if numbers != list(range(numbers[0], numbers[-1] + 1)):
        raise ValueError(f"not consecutive runs: {names}")
    return f"{numbers[0]}–{numbers[-1]}"


def run_label(name: str) -> str:
    """A run as a table's column names it: run13 → run 13; bf16run2 stays."""
    return name.replace("run", "run ") if name.startswith("run") else name
