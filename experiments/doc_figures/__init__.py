"""The docs' results from the committed files: `docs/reproduction/<family>/results.json` (`make reproduce`), the
`make bench` runs in `docs/benchmark/` and the presets, and the check of every page (README.md, CHANGELOG.md,
docs/*.md) against them.

- **Generated blocks.** A table between `<!-- generated:NAME -->` and `<!-- /generated:NAME -->` is rendered by the
  function registered with `@block(NAME)`; this tool rewrites every such block.
- **Checked facts.** A number, verdict or comparison in hand-written prose is a fact: a text that a function
  registered with `@facts(PAGE)` returns, formatted from the committed files at the precision the page prints. A
  changed result changes the text, which the page then no longer contains.
- **Everything else** is checked by `prose`: a number outside a block and a fact must be exempt by one of its named
  rules (`EXEMPT`: code, links, quoted paper text, references, dates and versions, settings, names, seed indices),
  and a verdict word must be inside a fact.

The package: `data` (the committed files), `text` (how a page prints a figure), `registry` (`@block`, `@facts`,
`table`), `benchruns` and `claims` (figures several pages derive), `prose` and `check` (the check), and `pages/`,
one module per page family.

    python -m experiments.doc_figures              # rewrite every generated block
    python -m experiments.doc_figures --check      # exit 1 naming every problem
    python -m experiments.doc_figures --mutations  # change each checked number, verdict and comparison word in
                                                   # turn: exit 1 if the check misses one
"""

from .check import BLOCK, PAGES, Check, blocks_in, regenerate
from .pages import FAMILIES
from .registry import BLOCKS, Fact, all_facts

__all__ = ["BLOCK", "BLOCKS", "FAMILIES", "PAGES", "Check", "Fact", "all_facts", "blocks_in", "regenerate"]
