"""The things in the prose that look like results and are not, each kind by one named rule (`EXEMPT`). Everything
else that `vocabulary` finds (a number, a number or quantity word, a verdict, a comparison, a run's name) is a
result and must be checked: inside a generated block or a fact."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from .vocabulary import COMPARISON, KINDS, NUMBER, NUMBER_WORD, RUN_NAME, VERDICT

WORDS = frozenset({NUMBER_WORD, VERDICT, COMPARISON})
_CARDINAL = r"(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"

#: The passages that describe the code (what it does and how it is used, each statement checked by the tests it
#: names or by the code itself) and state no measured result, by page: a heading names its section, to the next
#: heading (so each subsection is named); other text names the paragraph or list item it opens, to its end; "*"
#: is the whole page. The words there are not results; a number there still needs a fact or a rule, and a
#: generated block or a run's name may not stand there (`test_doc_figures.py`).
DESCRIBES_CODE: dict[str, tuple[str, ...]] = {
    "README.md": (
        "# simplified-transformers",
        "## Quickstart",
        "## The model",
        "### Install and supported versions",
        "### Block types",
        "### Config fields",
        "### Usage",
        "## Inference and publishing",
        "## Training",
        "## Development",
        "## Documentation",
    ),
    "CHANGELOG.md": (
        "# Changelog",
        "The `codeparrot-tiny-authors` presets:",
        "### Fixed",
        "`simplified-convert original` records",
        "In a compiled graph, a one-row product",
        "The docs tool is the package",
        "The docs' check reads words as results too",
        "`python -m benchmarks.benchmark --sections profile`",
        "The shipped model code is split",
        "`SimplifiedForCausalLM.compile_for_decoding()`",
        "metrics.json and the model card",
        "A fine-tuning run's load report",
        "The package's names",
        "The console commands start",
        "The depth reproduction's results record",
        "`make test-slow` builds",
        "Clients on exports (docs/clients.md)",
    ),
    "docs/architecture.md": ("*",),
    "docs/clients.md": (
        "# Clients: lm-evaluation-harness, TRL, torchao, accelerate",
        "## Loading the tokenizer",
        "## The paper's weight-decay rule under any trainer",
        "## lm-evaluation-harness",
        "## TRL: supervised fine-tuning",
        "transformers' torchao quantizer quantizes",
        "`test_torchao_int8_quantizes_every_matrix",
    ),
    "docs/config.md": ("*",),
    "docs/conversion.md": ("*",),
    "docs/development.md": ("*",),
    "docs/export.md": ("*",),
    "docs/hub.md": ("*",),
    "docs/install.md": ("*",),
    "docs/serving.md": ("*",),
    "docs/tensor_parallel.md": ("*",),
    "docs/raptr.md": (
        "RaPTr (Panigrahi et al.",
        "- **Depth (Alg. 1).**",
        "- **Scaling (App. J).**",
        "- **Learning rate (§4",
        "- **Schedules (App. E).**",
        "- **Width variants (§4.3).**",
        "- **Batch ramp.**",
        "- **AdamW and bypassed layers.**",
        "**Multi-GPU / multi-node.**",
        "`tests/test_raptr.py` runs a DDP job",
    ),
    "docs/fine_tuning.md": (
        "# Fine-tuning",
        "## Full fine-tuning",
        "## LoRA (PEFT)",
        "## GLUE (the paper's fine-tuning)",
        "`simplified-glue` fine-tunes one pretrained run",
        "Each task and seed is one",
        "**The GLUE score**",
        "The table, in the layout of Table 2",
        "**GLUE from a Hub mirror.**",
        "`tests/test_glue.py` runs it this way",
    ),
    "docs/inference.md": (
        "# Inference",
        "## What is supported: each claim is a test",
        "Decoding at small batch reads every weight",
        "- Outputs are deterministic",
        "- In the compiled graph a one-row product",
        "- Its speed is measured by",
    ),
    "docs/training.md": (
        "# Training",
        "## The main job: `make demo`",
        "## The CLI",
        "## Data",
        "## Packing (padding-free batches)",
        "## Resuming",
        "## The training API",
        "## Recipes",
        "## Local data and behind a firewall",
        "## Sharding with FSDP2",
        "## The loss of a training step",
    ),
    "docs/speed.md": ("# Speed", "## How it is measured", "## The bounds beside the ratios"),
    "docs/reproduction.md": (
        "# Reproduction",
        "## Protocol",
        "## Not as in the paper",
        "Verdicts as the command computes them",
        "**Claims.** Each on the final eval loss",
    ),
}

_HEADING = re.compile(r"^(#{1,6}) .*$", re.MULTILINE)
_FENCE = re.compile(r"```.*?```", re.DOTALL)


def headings(text: str) -> list[re.Match]:
    """The page's headings (a `#` line inside a code block is code, not a heading)."""
    fences = [m.span() for m in _FENCE.finditer(text)]
    return [m for m in _HEADING.finditer(text) if not any(a <= m.start() < b for a, b in fences)]


#: where a paragraph or list item ends: a blank line, the next list item, heading, table or comment
_PARAGRAPH_END = re.compile(r"\n(?=\s*\n|\s*(?:[-*] |\d+\. |#|\||<!--))")


def section_spans(text: str, wanted: tuple[str, ...]) -> list[tuple[int, int]]:
    """The spans of `wanted`'s passages: each heading's section, to the next heading; each paragraph or list item
    that opens with the text given, to its end."""
    if "*" in wanted:
        return [(0, len(text))]
    found = headings(text)
    ends = [h.start() for h in found[1:]] + [len(text)]
    spans = [(h.start(), end) for h, end in zip(found, ends) if h[0].rstrip() in wanted]
    for opening in (w for w in wanted if not w.startswith("#")):
        for m in re.finditer(r"^(?:[-*] |\d+\. )?" + re.escape(opening), text, re.MULTILINE):
            end = _PARAGRAPH_END.search(text, m.end())
            spans.append((m.start(), end.start() if end else len(text)))
    return spans


def _released(text: str) -> list[tuple[int, int]]:
    """The CHANGELOG's entries of released versions (`## [0.2.0] - date` and its subsections), not
    `## [Unreleased]`'s."""
    found = headings(text)
    starts = [h.start() for h in found if re.match(r"## \[\d", h[0])]
    return [(starts[0], len(text))] if starts else []


@dataclass(frozen=True)
class Exempt:
    """Results of `kinds` inside a match of `pattern` (or a span `spans` finds) are not results: `why` says what
    they are instead."""

    why: str
    pattern: str = ""
    flags: int = re.MULTILINE
    kinds: frozenset[str] = frozenset({NUMBER})
    spans: Callable[[str, str], list[tuple[int, int]]] | None = None

    def find(self, page: str, text: str) -> list[tuple[int, int]]:
        if self.spans is not None:
            return self.spans(page, text)
        return [m.span() for m in re.finditer(self.pattern, text, self.flags)]


EXEMPT: tuple[Exempt, ...] = (
    Exempt(
        "code: commands, arguments, file names and config values (the code and its tests own them); a run's name "
        "in code is still a result",
        r"```.*?```|`[^`\n]+`",
        re.DOTALL,
        kinds=frozenset({NUMBER, *WORDS}),
    ),
    Exempt(
        "a link's target, a URL, an HTML comment or a link to a numbered section",
        r"\]\([^)\s]*\)|https?://\S+|<!--.*?-->|\[[\d.]+(?: [^\]]*)?\]\(#[^)\s]*\)",
        re.DOTALL,
        kinds=frozenset(KINDS),
    ),
    Exempt(
        "the papers' own words, quoted", r'"[^"\n]+"|“[^”\n]+”|^>.*$', re.MULTILINE, kinds=frozenset({NUMBER, *WORDS})
    ),
    Exempt(
        "a reference: figure, table, section, equation, appendix, algorithm, footnote, arXiv id, a numbered step",
        r"\b(?:Fig(?:ure)?s?\.?|Tables?|App(?:endix|\.)|[Ee]qs?\.|[Ee]quations?|[Ss]ections?|[Ff]ootnote|Alg\.|arXiv:)"
        r"\s*[\dA-Z][\w.]*(?:\s*(?:[–,-]|and|or)\s*(?:\d|[A-Z]\.?\d)[\w.]*)*|§+\s*[\d.]+(?:[–-][\d.]+)?|^#+ [\d.]+"
        r"|^\s*\d+\.\s|\bsteps? \d\b",
    ),
    Exempt(
        "a year, a date, a version or a release",
        r"\b\d{4}-\d{2}-\d{2}\b|\b20[0-2]\d\b|\bv?\d+\.\d+\.\d+\w*|\b\d+\.x\b|\bpre-\d[\d.]*|(?:Python|transformers|torch|PyTorch|vLLM|"
        r"TGI|CUDA|datasets|tokenizers|huggingface_hub|accelerate|safetensors|numpy|olah|SGLang|ONNX|opset)"
        r"\s*[<>=~≥≤]*\s*\d+(?:\.\d+)*",
    ),
    Exempt(
        "a setting, by its name or unit: a shape, a length, a rate, a count of blocks, threads or cores, or another "
        "recipe constant",
        r"\b(?:lr|wd|eps|clip|betas?|heads?|batch|seq(?:uence)?|vocab|MLP|width|depth|top-k)"
        r"\s*[=:]?\s*\(?[−-]?\d[\d.,e−-]*(?:,\s*[\d.]+\))?|\b(?:[dHTLBDk]|[αβγλ]\w*)\s*=\s*[−-]?\d[\d.]*"
        rf"|\b(?:\d[\d,]*|{_CARDINAL})\s*(?:blocks?|layers?|heads?|threads?|cores?|processes|GPUs?|bits?|rounds?|warm-ups?|rows?|process)\b"
        rf"|\b\d-D\b|\b{_CARDINAL}\s+at\s+a\s+time\b",
        re.MULTILINE | re.IGNORECASE,
        kinds=frozenset({NUMBER, NUMBER_WORD}),
    ),
    Exempt(
        "a name with a digit in it: a model, a data set, a kernel or a standard (GPT-2, SST-2, SmolLM2-135M), or a "
        "committed benchmark run's number (run 14, runs 13–16: the run's name is still a result)",
        r"\b(?:GPT|SST|SmolLM2|flash-attention|SHA|UTF|AVX|Apache)-\d+(?:\.\d+)?[KMB]?\b"
        r"|\b[Rr]uns?\s+\d+(?![.\d])(?:\s*(?:–|,|and)\s*\d+(?![.\d]))*",
    ),
    Exempt(
        "a seed's index, which names a run (how many seeds ran is a result)",
        r"\b[Ss]eeds?\s+\d+(?![\d%]|\.\d)(?:(?:,\s*|\s+(?:and|or|to)\s+|\s*/\s*)(?:seed\s+)?\d+(?![\d%]|\.\d))*",
    ),
    Exempt(
        "an English phrase in which the word neither counts, compares nor judges: one by one, each other, the peak lr "
        "held constant, no longer, if at all, half the bytes (bf16's size against float32's), a verdict's definition",
        r"\bone by one\b|\beach other\b|\bone another\b|\bheld constant\b|\bno longer\b|\bif at all\b|\bhalf\s+the\s+(?:weight\s+)?bytes\b"
        r"|\bA verdict is \*\*inconclusive\*\* with one seed"
        r"|\bbf16\s+counts\s+as\s+\*within\s+float32's\s+seed\s+spread\*\s+when\s+[^()]*\([^)]*\)\s+is\s+smaller\s+than"
        r"\s+the\s+two\s+float32\s+seeds'\s+range"
        r'|\ba claim across depths reads "untestable in this setting" where',
        kinds=WORDS,
    ),
    Exempt(
        "a place on the page (the sections below, as above, [above](#...)) and a statistic named by its code (the "
        "largest `|mixing(X) − X|`), a norm's ε inside or outside the root (a setting): the word points, defines or "
        "configures, it does not compare",
        r"\b(?:as|see)\s+(?:above|below)\b|(?<![\d%×]\s)(?<!is\s)(?<!are\s)(?<!was\s)(?<!were\s)(?<!ends\s)(?<!stays\s)(?<!sits\s)\b(?:above|below)(?=[\],.;:)]|\s+\(|\s+(?:predate|report|come"
        r"|sweeps|puts|(?:are\s+)?generated|every|after)\b)|\b(?:largest|smallest)(?=\s+`)"
        r"|\b(?:inside|outside)\s+the\s+(?:RMSNorm's\s+)?root\b",
        re.IGNORECASE,
        kinds=frozenset({COMPARISON}),
    ),
    Exempt(
        "what a comparison holds fixed, not its outcome: equal steps or (measured) time, equal matmul FLOPs (a "
        "bound's premise), the same run, cores, weights, batches, plans, GEMM, ratio, batch size, model family, "
        "architecture, stored order or way; a definition (where every token is the same)",
        r"\b(?:at\s+)?equal\s+(?:measured\s+)?(?:time|steps)\b|\bequal\s+matmul\s+FLOPs\b"
        r"|\bthe\s+same\s+(?:run|cores|weights|batches|plans|GEMM|ratio|batch\s+size|model\s+family|architecture"
        r"|stored\s+order|way\s+when)\b|\bwhere\s+every\s+token\s+is\s+the\s+same\b",
        re.IGNORECASE,
        kinds=frozenset({COMPARISON}),
    ),
    Exempt(
        "the determinism invariant the test suite holds (bit-identical across processes, bit-identical repeats: "
        "`tests/test_generation.py`), not a measurement",
        r"\bbit-identical\s+(?:across\s+processes|repeats)\b",
        kinds=frozenset({COMPARISON}),
    ),
    Exempt(
        "a benchmark's module (`python -m benchmarks.stream_resume`): code that writes a run, not the run",
        r"\bbenchmarks\.\w+",
        kinds=frozenset({RUN_NAME}),
    ),
    Exempt(
        "a distributive (each, every): it ranges a statement over the things it names and counts none of them; "
        "before a claim, run, seed or lr it states a result across all of them and is one",
        r"\b(?:each|every)\b(?!\s+(?:claims?|runs?|seeds?|lrs?|sweeps?)\b)",
        re.IGNORECASE,
        kinds=frozenset({NUMBER_WORD}),
    ),
    Exempt(
        "one as a pronoun (this one, the float32 one, each one's, let one tell) or the code's output as a unit (one "
        "line, one error, one `ValueError`), and one thing at a time (a method)",
        r"\b(?:this|that|the|each|never|ship|let)\s+(?:[\w-]+\s+)?one(?='s\b|\s*[,.;:)]|\s+(?:goes|packed|trained"
        r"|registers|tell|because)\b)|\bone(?=\s+(?:such\s+)?(?:(?:line|error)\b|`\w+Error`))"
        r"|\bone(?=\s+[\w-]+\s+at\s+a\s+time\b)",
        re.IGNORECASE,
        kinds=frozenset({NUMBER_WORD}),
    ),
    Exempt(
        "a released version's entry in the CHANGELOG: the record of what changed then, in that release's words",
        kinds=frozenset({*WORDS, RUN_NAME}),
        spans=lambda page, text: _released(text) if page == "CHANGELOG.md" else [],
    ),
    Exempt(
        "a section that describes the code, not a measurement (`DESCRIBES_CODE`)",
        kinds=WORDS,
        spans=lambda page, text: section_spans(text, DESCRIBES_CODE.get(page, ())),
    ),
)


def matches(page: str, text: str) -> list[tuple[Exempt, list[tuple[int, int]]]]:
    """Each rule with the spans of `text` it exempts."""
    return [(rule, rule.find(page, text)) for rule in EXEMPT]


def masks(found: list[tuple[Exempt, list[tuple[int, int]]]], length: int) -> dict[str, bytearray]:
    """Per kind of result: 1 at every offset that a rule of `found` exempts for that kind."""
    by_kind = {kind: bytearray(length) for kind in KINDS}
    for rule, spans in found:
        for a, b in spans:
            for kind in rule.kinds:
                by_kind[kind][a:b] = b"\x01" * (b - a)
    return by_kind


def rule_of(found: list[tuple[Exempt, list[tuple[int, int]]]], kind: str, start: int, end: int) -> Exempt | None:
    """The first rule of `found` that exempts `start:end`, a result of `kind`, or None."""
    for rule, spans in found:
        if kind in rule.kinds and any(a <= start and end <= b for a, b in spans):
            return rule
    return None


#: Results not yet checked, counted per page and kind: words whose facts are still to be written. They are no rule
#: (nothing here says they are not results): the mutation test counts every one of them as missed, and the check
#: fails when a page holds a different number of unchecked results of a kind than this ledger says, so a new
#: unchecked word fails it and a covered one must be struck off here. A (page, kind) absent here must have none.
PENDING: dict[tuple[str, str], int] = {}
