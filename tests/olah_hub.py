"""A real Hugging Face Hub mirror for downloads in the tests: olah (PyPI `olah`), started offline on 127.0.0.1 over
git repositories that this module builds in the layouts the Hub holds for the datasets the presets name.

- `huggingface-course/codeparrot-ds-train` / `-valid`: JSON lines with CodeParrot's columns (`repo_name`, `path`,
  `copies`, `size`, `content`, `license`); the train repository in several shards (`data/train-0000k-of-0000n.jsonl`),
  the valid one as its `validation` split (the HF course loads it with `split="validation"`).
- `monology/pile-uncopyrighted`: `train/NN.jsonl.zst`, `val.jsonl.zst`, `test.jsonl.zst`, rows
  `{"text", "meta": {"pile_set_name"}}`; from this layout `datasets` infers only a `train` split, as on the Hub.
- `nyu-mll/glue`: one parquet file per config and split (`<task>/<split>-00000-of-00001.parquet`, label names in the
  files' features), the configs declared in the README's YAML (`configs:`) with their features and splits
  (`dataset_info:`, the ClassLabel names), as the Hub's card has them.
- `simplified-tests/glue-unlabelled`: the same layout for RTE alone, without a label column (a copy of GLUE's test
  files, say): fine-tuning on it is refused.

`OlahHub(root)` builds the repositories under `root/mirrors`, starts `olah-cli` on a free port and waits until it
answers; `publish(folder, repo_id)` makes any folder (an exported model) a served git repository. olah is read-only:
uploads go to `hub_server.HubServer`. What olah needs: every repository a git repository with a `README.md` and a
`main` branch (a missing file is answered 401 `RepoNotFound`), offline mode with a `*/*` proxy rule (without a rule
every repository is refused), and a revision in every repository-info request (without one, offline olah looks
only in its cache).
"""

from __future__ import annotations

import collections
import email
import inspect
import io
import json
import logging
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import typing
import unittest
import urllib
import urllib.error
import urllib.request
from pathlib import Path

import datasets
import zstandard

CODEPARROT_TRAIN = "huggingface-course/codeparrot-ds-train"
CODEPARROT_VALID = "huggingface-course/codeparrot-ds-valid"
PILE = "monology/pile-uncopyrighted"
GLUE = "nyu-mll/glue"
#: rows per shard of the language-modelling repositories, and the train repositories' shard counts
ROWS, CODE_SHARDS, PILE_SHARDS = 40, 4, 3
#: GLUE task → (text columns, label names or None for a regression score, splits as the Hub holds them)
GLUE_LAYOUT: dict[str, tuple[tuple[str, ...], tuple[str, ...] | None, tuple[str, ...]]] = {
    "cola": (("sentence",), ("unacceptable", "acceptable"), ("train", "validation", "test")),
    "sst2": (("sentence",), ("negative", "positive"), ("train", "validation", "test")),
    "mrpc": (("sentence1", "sentence2"), ("not_equivalent", "equivalent"), ("train", "validation", "test")),
    "qqp": (("question1", "question2"), ("not_duplicate", "duplicate"), ("train", "validation", "test")),
    "stsb": (("sentence1", "sentence2"), None, ("train", "validation", "test")),
    "mnli": (
        ("premise", "hypothesis"),
        ("entailment", "neutral", "contradiction"),
        ("train", "validation_matched", "validation_mismatched", "test_matched", "test_mismatched"),
    ),
    "qnli": (("question", "sentence"), ("entailment", "not_entailment"), ("train", "validation", "test")),
    "rte": (("sentence1", "sentence2"), ("entailment", "not_entailment"), ("train", "validation", "test")),
    "wnli": (("sentence1", "sentence2"), ("not_entailment", "entailment"), ("train", "validation", "test")),
}
GIT = ["git", "-c", "user.name=tests", "-c", "user.email=tests@localhost", "-c", "init.defaultBranch=main"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _git_repo(folder: Path, message: str = "upload") -> str:
    """Make `folder` a git repository on branch `main` with everything committed; returns the commit sha."""
    if not (folder / ".git").exists():
        subprocess.run([*GIT, "init", "-q", "-b", "main", str(folder)], check=True)
    subprocess.run([*GIT, "-C", str(folder), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(folder), "commit", "-q", "--allow-empty", "-m", message], check=True)
    return subprocess.run(
        ["git", "-C", str(folder), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()


# -- documents ---------------------------------------------------------------------------------------------------
def code_documents(n: int) -> list[dict]:
    """`n` CodeParrot rows from the running Python's stdlib source (real code, the columns of codeparrot-ds)."""
    stdlib = Path(inspect.getfile(json)).parent.parent
    files = sorted(p for p in stdlib.rglob("*.py") if p.stat().st_size > 2000 and "site-packages" not in p.parts)[:n]
    return [
        {
            "repo_name": f"python/cpython-{i}",
            "path": f"Lib/{p.relative_to(stdlib).as_posix()}",
            "copies": "1",
            "size": str(p.stat().st_size),
            "content": p.read_text(encoding="utf-8", errors="replace")[:6000],
            "license": "psf-2.0",
        }
        for i, p in enumerate(files)
    ]


def prose_documents(n: int, offset: int = 0) -> list[str]:
    """`n` English paragraphs: docstrings of stdlib modules (distinct texts, in a fixed order)."""
    texts = []
    for module in (collections, email, json, logging, pathlib, textwrap, typing, unittest, urllib, inspect, io, os):
        for name, obj in sorted(vars(module).items()):
            doc = inspect.getdoc(obj) if not name.startswith("_") else None
            if doc and len(doc) > 80 and doc not in texts:
                texts.append(doc)
    if len(texts) < offset + n:
        raise RuntimeError(f"only {len(texts)} docstrings for {offset + n} documents")
    return texts[offset : offset + n]


def _write_jsonl(path: Path, rows: list[dict], compress: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    path.write_bytes(zstandard.ZstdCompressor().compress(data) if compress else data)


def _readme(folder: Path, yaml: str = "") -> None:
    """A card with YAML metadata, as the Hub's repositories have (without it huggingface_hub warns at each load)."""
    name = f"{folder.parent.name}/{folder.name}"
    (folder / "README.md").write_text(f"---\npretty_name: {name}\n{yaml}---\n\n# {name}\n\nA test mirror.\n")


# -- the repositories ----------------------------------------------------------------------------------------------
def build_codeparrot(mirrors: Path) -> None:
    docs = code_documents(ROWS * (CODE_SHARDS + 1))
    train = mirrors / "datasets" / CODEPARROT_TRAIN
    for k in range(CODE_SHARDS):
        shard = docs[k * ROWS : (k + 1) * ROWS]
        _write_jsonl(train / "data" / f"train-{k:05d}-of-{CODE_SHARDS:05d}.jsonl", shard)
    _readme(train)
    valid = mirrors / "datasets" / CODEPARROT_VALID
    _write_jsonl(valid / "data" / "validation-00000-of-00001.jsonl", docs[CODE_SHARDS * ROWS :])
    _readme(valid)
    _git_repo(train)
    _git_repo(valid)


def pile_rows(split: str) -> list[dict]:
    """The rows of a Pile file: `train/NN` (NN from 00), `val` or `test`."""
    offset = {"val": PILE_SHARDS * ROWS, "test": (PILE_SHARDS + 1) * ROWS}.get(split)
    if offset is None:
        offset = int(split.split("/")[1]) * ROWS
    sets = ("Pile-CC", "Wikipedia (en)", "StackExchange", "PubMed Abstracts")
    texts = prose_documents(ROWS, offset)
    return [{"text": t, "meta": {"pile_set_name": sets[i % len(sets)]}} for i, t in enumerate(texts)]


def build_pile(mirrors: Path) -> None:
    repo = mirrors / "datasets" / PILE
    for k in range(PILE_SHARDS):
        _write_jsonl(repo / "train" / f"{k:02d}.jsonl.zst", pile_rows(f"train/{k:02d}"), compress=True)
    for split in ("val", "test"):
        _write_jsonl(repo / f"{split}.jsonl.zst", pile_rows(split), compress=True)
    _readme(repo)
    _git_repo(repo)


GLUE_UNLABELLED = "simplified-tests/glue-unlabelled"


def _dataset_info(
    task: str, columns: tuple[str, ...], names: tuple[str, ...] | None, splits: dict[str, tuple[int, int]]
) -> str:
    """A config's `dataset_info:` entry of the card's YAML: its features (the label a class_label with its names,
    or a float score) and its splits' (examples, bytes)."""
    lines = [f"- config_name: {task}", "  features:"]
    lines += [f"  - name: {c}\n    dtype: string" for c in columns]
    if names is None:
        lines.append("  - name: label\n    dtype: float32")
    elif names:
        classes = "".join(f"\n          '{k}': {name}" for k, name in enumerate(names))
        lines.append(f"  - name: label\n    dtype:\n      class_label:\n        names:{classes}")
    lines.append("  - name: idx\n    dtype: int32")
    lines.append("  splits:")
    lines += [f"  - name: {split}\n    num_bytes: {size}\n    num_examples: {n}" for split, (n, size) in splits.items()]
    return "\n".join(lines) + "\n"


def glue_repo(repo: Path, layout: dict, labelled: bool = True) -> None:
    """GLUE's layout for the tasks of `layout`: labels follow the text's source (learnable), the test split is
    unlabelled (-1) as on the Hub; without `labelled`, no label column at all."""
    texts = prose_documents(160)
    datasets.disable_progress_bars()  # one bar per parquet file otherwise
    configs, infos = [], []
    for task, (columns, names, splits) in layout.items():
        features = {c: datasets.Value("string") for c in columns}
        if labelled:
            features["label"] = datasets.ClassLabel(names=list(names)) if names else datasets.Value("float32")
        features["idx"] = datasets.Value("int32")
        files, sizes = [], {}
        for s, split in enumerate(splits):
            n = 48 if split == "train" else 16
            rows = []
            for i in range(n):
                label = (i + s) % len(names) if names else float((i % 6) * 1.0)
                if split.startswith("test"):
                    label = -1 if names else -1.0
                row = {c: texts[(i * len(columns) + j + 7 * s) % len(texts)][:300] for j, c in enumerate(columns)}
                rows.append({**row, **({"label": label} if labelled else {}), "idx": i})
            path = repo / task / f"{split}-00000-of-00001.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            datasets.Dataset.from_list(rows, features=datasets.Features(features)).to_parquet(str(path))
            sizes[split] = (n, path.stat().st_size)
            files.append(f"  - split: {split}\n    path: {task}/{split}-*\n")
        configs.append(f"- config_name: {task}\n  data_files:\n" + "".join(files))
        infos.append(_dataset_info(task, columns, names if labelled else (), sizes))
    _readme(repo, "dataset_info:\n" + "".join(infos) + "configs:\n" + "".join(configs))
    _git_repo(repo)


def build_glue(mirrors: Path) -> None:
    """Every GLUE task as the Hub holds it, and a repository in its layout without labels."""
    glue_repo(mirrors / "datasets" / GLUE, GLUE_LAYOUT)
    glue_repo(mirrors / "datasets" / GLUE_UNLABELLED, {"rte": GLUE_LAYOUT["rte"]}, labelled=False)


BUILDERS = (build_codeparrot, build_pile, build_glue)


# -- the server ------------------------------------------------------------------------------------------------------
class OlahHub:
    """olah serving the repositories under `root/mirrors`, offline, on 127.0.0.1 (a context manager)."""

    def __init__(self, root: Path, startup_timeout: float = 60.0):
        self.root = Path(root)
        self.mirrors = self.root / "mirrors"
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.startup_timeout = startup_timeout
        self.process: subprocess.Popen | None = None

    def build(self) -> OlahHub:
        for builder in BUILDERS:
            builder(self.mirrors)
        return self

    def publish(self, folder: Path, repo_id: str, repo_type: str = "models") -> str:
        """Serve a copy of `folder` as the repository `repo_id` (a README is added if missing); returns its commit."""
        target = self.mirrors / repo_type / repo_id
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(folder, target)
        if not (target / "README.md").is_file():
            _readme(target)
        return _git_repo(target)

    def env(self, home: Path) -> dict[str, str]:
        """The environment of a process that downloads from this mirror with its own HF_HOME."""
        return {
            **os.environ,
            "HF_ENDPOINT": self.url,
            "HF_HOME": str(home),
            "HF_HUB_OFFLINE": "0",
            "HF_DATASETS_OFFLINE": "0",
        }

    def __enter__(self) -> OlahHub:
        olah = shutil.which("olah-cli", path=str(Path(sys.executable).parent)) or shutil.which("olah-cli")
        if olah is None:
            raise RuntimeError("olah-cli is not installed: `pip install -e '.[test]'` installs olah (a test extra).")
        config = self.root / "olah.toml"
        config.write_text(
            "[basic]\n"
            f'host = "127.0.0.1"\nport = {self.port}\n'
            f'repos-path = "{self.root / "cache"}"\n'
            'mirror-scheme = "http"\n'
            f'mirror-netloc = "127.0.0.1:{self.port}"\nmirror-lfs-netloc = "127.0.0.1:{self.port}"\n'
            f'mirrors-path = ["{self.mirrors}"]\n'
            "[accessibility]\noffline = true\n"
            '[[accessibility.proxy]]\nrepo = "*/*"\nallow = true\n'
        )
        self.log = open(self.root / "olah.log", "wb")  # noqa: SIM115 - closed in __exit__
        self.process = subprocess.Popen(
            [olah, "-c", str(config)], cwd=self.root, stdout=self.log, stderr=subprocess.STDOUT
        )
        deadline = time.time() + self.startup_timeout
        probe = f"{self.url}/api/datasets/{PILE}/revision/main"  # without a revision olah asks its cache
        while True:
            if self.process.poll() is not None:
                self.__exit__()
                raise RuntimeError(f"olah exited with code {self.process.returncode}: {self._log_tail()}")
            try:
                with urllib.request.urlopen(probe, timeout=2) as answer:
                    if answer.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                pass
            if time.time() > deadline:
                self.__exit__()
                raise RuntimeError(
                    f"olah did not answer {probe} within {self.startup_timeout:.0f} s: {self._log_tail()}"
                )
            time.sleep(0.2)

    def _log_tail(self) -> str:
        path = self.root / "olah.log"
        return path.read_text(errors="replace")[-2000:] if path.is_file() else "(no log)"

    def __exit__(self, *exc) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if getattr(self, "log", None) is not None:
            self.log.close()
