"""`python -m experiments.doc_figures`: rewrite the generated blocks, or `--check` every page, or show with
`--mutations` that the check fails for each changed result."""

from __future__ import annotations

import argparse
import sys

from . import __doc__ as description
from .check import PAGES, Check, regenerate
from .data import REPO


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.doc_figures", description=description, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 naming every problem")
    parser.add_argument(
        "--mutations",
        action="store_true",
        help="change every result of every page in turn (number, number word, verdict, comparison, run name); "
        "exit 1 if the check misses one that no rule exempts",
    )
    args = parser.parse_args(argv)
    if not args.check and not args.mutations:
        for page in PAGES:
            path = REPO / page
            text = path.read_text()
            if regenerate(text) != text:
                path.write_text(regenerate(text))
                print(f"{page}: generated blocks rewritten")
    check = Check()
    problems = [problem for page in PAGES for problem in check.problems(page)]
    print("\n".join(map(str, problems)))
    if args.mutations:
        coverage = check.coverage_of_every_page()
        for m in coverage.missed:
            print(f"{m.page}: the check misses {m.kind} {m.old!r} → {m.new!r} at …{m.context}…")
        print(coverage.summary())
        return 1 if problems or coverage.missed else 0
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
