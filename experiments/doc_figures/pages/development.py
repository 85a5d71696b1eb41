"""docs/development.md's and the CHANGELOG's account of the docs check: how many results the ledger of unchecked
results (`exempt.PENDING`) counts, by page and kind, computed from the ledger itself."""

from __future__ import annotations

from collections import Counter

from .. import exempt
from ..registry import facts


def ledger() -> str:
    """ "46 results not yet checked, all in docs/reproduction.md (26 number words, 12 comparisons, 8 verdicts)"."""
    total = sum(exempt.PENDING.values())
    if not total:
        return "no result not yet checked"
    pages = Counter()
    kinds = Counter()
    for (page, kind), n in exempt.PENDING.items():
        pages[page] += n
        kinds[kind] += n
    where = ", ".join(f"{n} in {page}" for page, n in sorted(pages.items()))
    what = ", ".join(f"{n} {kind}s" for kind, n in kinds.most_common())
    return f"{total} results not yet checked ({what}; {where})"


@facts("docs/development.md")
def check_in_development() -> list[str]:
    return [f"The ledger now counts {ledger()}."]


@facts("CHANGELOG.md")
def check_in_changelog() -> list[str]:
    return [f"its ledger counts {ledger()}"]
