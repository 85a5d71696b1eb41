"""The embedded corpora: text that ships with every CPython, so that training works with no dataset host.

- code: the `.py` files of the running interpreter's standard library (`sysconfig.get_paths()["stdlib"]`), read
  as strict UTF-8 (failures skipped); a file is validation iff `int(sha256(relpath).hexdigest(), 16) % 100 < 5`.
- prose: Python's reference documentation (`pydoc_data.topics`) and the docstrings of the non-test stdlib
  modules (module, class and function docstrings, found with `ast`); the same split rule on the file path.
- held-out docstrings: those of the stdlib's test modules, which the prose corpus leaves out of both splits (in-domain
  prose that a model pretrained on the prose has not read).
- stdlib-topic: an offline labelled task in the style of GLUE's single-sentence tasks: does a stdlib docstring
  document a GUI module (tkinter, idlelib, turtle, curses) or an internet / mail / markup module (email, http,
  urllib, xml, ...)? About 3,000 docstrings, close to balanced; 10% (by hash of the docstring's location) are
  validation.

Each corpus is a `datasets.Dataset` built with `Dataset.from_generator`, so it is cached under HF_HOME (file
lists travel as one newline-joined string: `from_generator` would shard a list argument).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import datasets

CODE_COLUMN = "content"  # as in huggingface-course/codeparrot-ds-*
PROSE_COLUMN = "text"
TOPIC_LABELS = ("internet", "gui")
TOPIC_FAMILIES = {
    "internet": (
        "email",
        "http",
        "urllib",
        "xml",
        "xmlrpc",
        "html",
        "wsgiref",
        "mailbox",
        "imaplib",
        "nntplib",
        "smtplib",
        "smtpd",
        "ftplib",
        "poplib",
        "ssl",
        "socketserver",
        "cgi",
        "mimetypes",
        "telnetlib",
    ),
    "gui": ("tkinter", "idlelib", "turtle", "turtledemo", "curses"),
}
_TEST_PARTS = {"test", "tests", "idle_test"}


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def split_of(key: str, validation_percent: int = 5) -> str:
    """`validation` iff `int(sha256(key).hexdigest(), 16) % 100 < validation_percent`, else `train`."""
    digest = int(hashlib.sha256(key.encode("utf-8")).hexdigest(), 16)
    return "validation" if digest % 100 < validation_percent else "train"


@functools.lru_cache(maxsize=4)
def _all_stdlib_files(root: str) -> tuple[str, ...]:
    """Every stdlib `.py` file (relative posix path, installed packages excluded), in a fixed pseudo-random order."""
    paths = [p.relative_to(root).as_posix() for p in Path(root).rglob("*.py")]
    paths = [p for p in paths if p.split("/")[0] not in ("site-packages", "dist-packages")]
    return tuple(sorted(paths, key=lambda p: hashlib.sha256(f"order:{p}".encode()).hexdigest()))


def stdlib_files(split: str, max_files: int | None = None, skip_tests: bool = False) -> list[str]:
    """Relative paths of the stdlib `.py` files in `split`, in a fixed pseudo-random order (by hash), capped."""
    paths = [
        p
        for p in _all_stdlib_files(str(stdlib_root()))
        if split_of(p) == split and not (skip_tests and _TEST_PARTS & set(p.split("/")))
    ]
    return paths[:max_files] if max_files else paths


def _read(root: str, relpath: str) -> str | None:
    try:
        return (Path(root) / relpath).read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _code_records(root: str, paths: str) -> Iterator[dict]:
    for rel in paths.splitlines():
        text = _read(root, rel)
        if text and text.strip():
            yield {"path": rel, CODE_COLUMN: text}


def code_dataset(split: str, max_files: int | None = None) -> datasets.Dataset:
    """The stdlib source files of one split as a Dataset with columns `path` and `content`."""
    paths = stdlib_files(split, max_files)
    return datasets.Dataset.from_generator(
        _code_records, gen_kwargs={"root": str(stdlib_root()), "paths": "\n".join(paths)}
    )


def _docstrings(root: str, rel: str) -> Iterator[tuple[int, str]]:
    text = _read(root, rel)
    if not text:
        return
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return
    for node in _definitions(tree):
        doc = ast.get_docstring(node)
        if doc and len(doc.split()) >= 3:
            yield getattr(node, "lineno", 0), doc


def _definitions(node: ast.AST) -> Iterator[ast.AST]:
    """The module, class and function nodes under `node`, walking statements only (docstrings live there)."""
    if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        yield node
    for field in ("body", "orelse", "finalbody", "handlers", "cases"):
        for child in getattr(node, field, ()) or ():
            if isinstance(child, (ast.stmt, ast.excepthandler, getattr(ast, "match_case", ast.stmt))):
                yield from _definitions(child)


def _prose_records(root: str, paths: str, split: str, max_docs: int) -> Iterator[dict]:
    import pydoc_data.topics  # lazy: ~0.75 MB of help text, read only for the embedded prose split

    count = 0
    for name, text in sorted(pydoc_data.topics.topics.items()):
        source = f"pydoc_data/topics.py#{name}"
        if split_of(source) == split and count < max_docs:
            count += 1
            yield {"source": source, PROSE_COLUMN: text}
    for rel in paths.splitlines():
        for line, doc in _docstrings(root, rel):
            if count >= max_docs:
                return
            count += 1
            yield {"source": f"{rel}:{line}", PROSE_COLUMN: doc}


def prose_dataset(split: str, max_docs: int | None = None) -> datasets.Dataset:
    """English prose shipped with Python: the pydoc topics, then the docstrings of the stdlib files in hash order
    (columns `source`, `text`), capped at `max_docs` documents."""
    paths = stdlib_files(split, skip_tests=True)
    kwargs = {"root": str(stdlib_root()), "paths": "\n".join(paths), "split": split, "max_docs": max_docs or 10**12}
    return datasets.Dataset.from_generator(_prose_records, gen_kwargs=kwargs)


def held_out_docstrings() -> Iterator[tuple[str, str]]:
    """(source, docstring) of the stdlib's test modules, in the files' hash order: the prose corpus skips them."""
    root = str(stdlib_root())
    for rel in _all_stdlib_files(root):
        if _TEST_PARTS & set(rel.split("/")):
            for line, doc in _docstrings(root, rel):
                yield f"{rel}:{line}", doc


def _topic_records(root: str, paths: str) -> Iterator[dict]:
    family_of = {module: label for label, modules in TOPIC_FAMILIES.items() for module in modules}
    seen: dict[str, int] = {}
    records = []
    for rel in paths.splitlines():
        family = family_of.get(rel.split("/")[0].removesuffix(".py"))
        if family is None:
            continue
        for line, doc in _docstrings(root, rel):
            text = " ".join(doc.split())[:600]
            label = TOPIC_LABELS.index(family)
            if seen.setdefault(text, label) != label:
                seen[text] = -1  # the same text in both families: ambiguous, dropped below
            records.append({"source": f"{rel}:{line}", "sentence": text, "label": label})
    emitted = set()
    for record in records:
        if seen[record["sentence"]] >= 0 and record["sentence"] not in emitted:
            emitted.add(record["sentence"])
            yield record


def topic_dataset(split: str) -> datasets.Dataset:
    """The offline labelled task `stdlib-topic`: columns `source`, `sentence`, `label` (0 internet, 1 gui)."""
    paths = sorted(stdlib_files("train", skip_tests=True) + stdlib_files("validation", skip_tests=True))
    features = datasets.Features(
        {
            "source": datasets.Value("string"),
            "sentence": datasets.Value("string"),
            "label": datasets.ClassLabel(names=list(TOPIC_LABELS)),
        }
    )
    ds = datasets.Dataset.from_generator(
        _topic_records, gen_kwargs={"root": str(stdlib_root()), "paths": "\n".join(paths)}, features=features
    )
    return ds.filter(lambda source: split_of(source, validation_percent=10) == split, input_columns="source")
