"""Datasets and tokenizers of the three tasks.

- causal-lm: CodeParrot (`huggingface-course/codeparrot-ds-train` / `-valid`, column `content`, optionally
  streamed), tokenised into full `seq_len` windows exactly as the Hugging Face course, chapter 7.6 (truncation
  with overflowing tokens, windows shorter than `seq_len` dropped); a byte-level BPE tokenizer trained from the
  data. Embedded default: the stdlib source (corpus.py).
- masked-lm: an HF Pile dataset (column `text`) or the embedded prose, tokenised with a WordPiece tokenizer
  (`[CLS] doc [SEP]`), concatenated and cut into `seq_len` blocks (course chapter 7.3).
- sequence-classification: a GLUE task of `nyu-mll/glue` by name, or the embedded `stdlib-topic` task.

A Hub dataset is never replaced by another one: one that cannot be loaded (unreachable host, a split it does not
have) raises `UsageError` with one clear message naming the id, the split, the splits that exist and the fix.
Only presets whose dataset is `embedded` train on the offline corpus.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import sys
import tempfile
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import datasets
import torch
from datasets.utils.tqdm import tqdm
from huggingface_hub import constants
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import (
    AutoTokenizer,
    DataCollatorForLanguageModeling,
    DataCollatorWithFlattening,
    PreTrainedTokenizerFast,
)

from . import corpus
from .glue_tasks import GLUE, GLUE_EXTRA_EVAL, GLUE_TASKS
from .presets import EMBEDDED, EMBEDDED_TASK, DataSpec, UsageError

BPE_SPECIALS = ("<|endoftext|>",)
WORDPIECE_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


@dataclass
class TaskData:
    """What the trainer needs: datasets, tokenizer and, for classification, the label set."""

    train: datasets.Dataset | datasets.IterableDataset
    eval: datasets.Dataset
    tokenizer: PreTrainedTokenizerFast
    source: str  # a human-readable name of the data actually used
    #: the evaluation set's name, as `source` names the training data (`data.eval_dataset`, else the same dataset)
    eval_source: str = ""
    num_labels: int = 0
    label_names: tuple[str, ...] = ()
    #: classification: the GLUE task whose metrics score it (`metrics.py`; None: other data, accuracy)
    glue_task: str | None = None
    #: classification: more evaluation splits by name (MNLI's `validation_mismatched`), scored after training
    extra_eval: dict[str, datasets.Dataset] = field(default_factory=dict)
    #: the name of the split `eval` holds
    eval_split: str = "validation"


# -- loading raw text ------------------------------------------------------------------------------------------
def _offline() -> bool:
    return bool(datasets.config.HF_HUB_OFFLINE)


def _host_reachable(timeout: float = 3.0) -> bool:
    """A quick TCP check of the Hub endpoint, so an unreachable host fails in seconds, not after minutes of
    retries."""
    url = urllib.parse.urlparse(constants.ENDPOINT)
    try:
        socket.create_connection((url.hostname, url.port or (443 if url.scheme == "https" else 80)), timeout).close()
        return True
    except OSError:
        return False


class _NoSuchFolder(FileNotFoundError):
    """`--dataset` names a local path (not a Hub id) that does not exist."""


def _looks_like_a_path(dataset_id: str) -> bool:
    """An absolute, home-relative or dot-relative path, or a Windows drive: never a Hub id (`org/name`)."""
    return (
        dataset_id.startswith(("/", "~", "./", "../", ".\\", "..\\"))
        or dataset_id in (".", "..")
        or (len(dataset_id) > 2 and dataset_id[1] == ":" and dataset_id[2] in "/\\")
    )


#: What a local `--dataset DIR` must hold (docs/training.md, "Local data and behind a firewall").
LOCAL_LAYOUT = (
    "A local dataset folder holds one data file per split, train.jsonl and validation.jsonl, each line one JSON object "
    "with the text in the preset's data.text_column ('content' for the code presets), or a save_to_disk folder"
)


def _text_lines_note(dataset_id: str) -> str:
    """For a local folder of `.txt` files: how `datasets` reads them (a document per line), which explains a missing
    column or documents too short for a window; else ''."""
    folder = Path(dataset_id)
    if not folder.is_dir() or not any(folder.rglob("*.txt")):
        return ""
    return (
        " Each line of a .txt file is its own document (datasets' text loader, column 'text'): for whole files as "
        "documents, write train.jsonl and validation.jsonl with one object per document."
    )


def load_remote(
    dataset_id: str, config: str | None, split: str, streaming: bool, data_files: str | None = None, field: str = ""
):
    """`datasets.load_dataset` (or `load_from_disk` for a saved folder) of one split, with any failure as one
    `UsageError` that names the dataset, the split, the splits that exist and the fix. `data_files` (a glob of
    the repository's files) makes those files the split; `field` is the preset field that named the split."""
    local = Path(dataset_id)
    where = f"{dataset_id!r}" + (f" (config {config!r})" if config else "") + f", split {split!r}"
    try:
        if local.is_dir() and any((local / f).is_file() for f in ("dataset_dict.json", "dataset_info.json")):
            loaded = datasets.load_from_disk(str(local))
            return loaded[split] if isinstance(loaded, datasets.DatasetDict) else loaded
        if not local.exists() and _looks_like_a_path(dataset_id):
            raise _NoSuchFolder(f"no such folder: {local.expanduser().resolve()}")
        if not local.exists() and not _offline() and not _host_reachable():
            raise ConnectionError(f"the dataset host {constants.ENDPOINT} is unreachable")
        files = {split: data_files} if data_files else None
        return datasets.load_dataset(dataset_id, config, split=split, streaming=streaming, data_files=files)
    except Exception as err:  # noqa: BLE001 - every loading failure becomes one clear message
        files_field = field.replace("_split", "_data_files") if field else "the split's data_files"
        evaluating = field == "data.eval_split"
        splits = (
            None if data_files or isinstance(err, (_NoSuchFolder, ConnectionError)) else _splits(dataset_id, config)
        )
        if splits is not None and split not in splits:
            raise UsageError(
                f"cannot load dataset {where}: the dataset has the splits {', '.join(splits)}. Choose the "
                f"repository's files for the split with {files_field} (a glob), or set {field or 'the split'} to one "
                "of those splits"
                + (", or evaluate on another set (--eval-dataset DIR or id, data.eval_dataset)." if evaluating else ".")
            ) from None
        reason = " ".join(str(err).split())[:300] or type(err).__name__
        if data_files and not isinstance(err, ConnectionError):
            raise UsageError(
                f"cannot load dataset {where} from the files {data_files!r} ({files_field}): {reason}. Check the glob "
                "against the repository's files, and the id."
            ) from None
        if local.is_dir() and not data_files:  # a local folder: no connection was tried
            raise UsageError(f"cannot load dataset {where}: {reason}. {LOCAL_LAYOUT}.") from None
        if isinstance(err, _NoSuchFolder):
            check = "Check the path"
        elif isinstance(err, ConnectionError) or _offline():
            check = "Check your connection and HF_ENDPOINT (HF_HUB_OFFLINE=1 allows only cached datasets)"
        else:
            check = "Check the id and your connection"
        instead = (
            "or evaluate on a local folder instead (--eval-dataset DIR, data.eval_dataset; --dataset DIR evaluates on "
            "that folder's validation split)"
            if evaluating
            else f"or train on a local folder (--dataset DIR) or the offline corpus that ships with Python (--dataset "
            f"{EMBEDDED})"
        )
        raise UsageError(f"cannot load dataset {where}: {reason}. {check}, {instead}.") from None


def _splits(dataset_id: str, config: str | None) -> list[str] | None:
    """The split names `datasets` finds for a dataset (None when it cannot tell)."""
    try:
        return list(datasets.get_dataset_split_names(dataset_id, config))
    except Exception:  # noqa: BLE001 - only used to explain another failure
        return None


def _take(ds, n: int | None):
    if n is None:
        return ds
    if isinstance(ds, datasets.IterableDataset):
        return ds.take(n)
    return ds.select(range(min(n, len(ds))))


def _materialise(ds) -> datasets.Dataset:
    """An in-memory Dataset from a (possibly streamed, already capped) dataset."""
    if isinstance(ds, datasets.IterableDataset):
        return datasets.Dataset.from_list(list(ds))
    return ds


def _raw_text(spec: DataSpec, task: str):
    """(train, eval, text column, source name) of raw text: the dataset the spec names (never another one: a
    dataset that cannot be loaded is a `UsageError`), or the embedded corpus of the running Python."""
    if spec.dataset != EMBEDDED:
        train = load_remote(
            spec.dataset,
            spec.dataset_config,
            spec.train_split,
            spec.streaming,
            spec.train_data_files,
            "data.train_split",
        )
        evaluation = load_remote(
            spec.eval_dataset or spec.dataset,
            spec.dataset_config,
            spec.eval_split,
            spec.streaming,
            spec.eval_data_files,
            "data.eval_split",
        )
        for name, split, ds in (
            (spec.dataset, spec.train_split, train),
            (spec.eval_dataset, spec.eval_split, evaluation),
        ):
            columns = getattr(ds, "column_names", None)  # (None: a stream that does not know them yet)
            if columns is not None and spec.text_column not in columns:
                raise UsageError(
                    f"dataset {name or spec.dataset!r}, split {split!r}: no {spec.text_column!r} column to read the "
                    f"texts from (data.text_column); its columns: {', '.join(columns)}. Pass --set "
                    f"data.text_column=NAME.{_text_lines_note(name or spec.dataset)}"
                )
        return train, evaluation, spec.text_column, spec.dataset
    if task == "causal-lm":
        return (
            corpus.code_dataset("train", spec.max_train_samples),
            corpus.code_dataset("validation"),
            corpus.CODE_COLUMN,
            "embedded: Python standard library source",
        )
    return (
        corpus.prose_dataset("train", spec.max_train_samples),
        corpus.prose_dataset("validation"),
        corpus.PROSE_COLUMN,
        "embedded: pydoc topics + stdlib docstrings",
    )


# -- tokenizers ------------------------------------------------------------------------------------------------
def tokenizer_cache_dir() -> Path:
    return Path(constants.HF_HOME) / "simplified-transformers" / "tokenizers"


def _texts(ds, column: str, n: int, source: str | None = None):
    """The first `n` texts of `column` (rows without a string there are skipped), with a progress bar on stderr
    when `source` names a dataset that is read for it (a stream from the Hub takes minutes at paper scale)."""
    progress = tqdm(total=n, desc=f"reading {source} for the tokenizer", unit=" docs", disable=source is None)
    with progress:
        for i, row in enumerate(ds):
            if i >= n:
                break
            progress.update()
            if isinstance(row.get(column), str):
                yield row[column]


def train_tokenizer(kind: str, texts, vocab_size: int) -> PreTrainedTokenizerFast:
    """A byte-level BPE (`bpe`, GPT-2 style, `<|endoftext|>` as bos/eos/pad) or a lower-cased WordPiece
    (`wordpiece`, BERT's special tokens and `[CLS] A [SEP]` template) trained on `texts`."""
    if kind == "bpe":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=list(BPE_SPECIALS),
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        tok.train_from_iterator(texts, trainer)
        special = BPE_SPECIALS[0]
        return PreTrainedTokenizerFast(
            tokenizer_object=tok, bos_token=special, eos_token=special, pad_token=special, unk_token=special
        )
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.train_from_iterator(
        texts,
        trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=list(WORDPIECE_SPECIALS), show_progress=False),
    )
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )


def cached_tokenizer(kind: str, vocab_size: int, identity: dict[str, Any], texts_fn) -> PreTrainedTokenizerFast:
    """Train a tokenizer once per (kind, vocab, data identity) and keep it under HF_HOME."""
    key = hashlib.sha256(json.dumps({"kind": kind, "vocab": vocab_size, **identity}, sort_keys=True).encode())
    path = tokenizer_cache_dir() / f"{kind}-{vocab_size}-{key.hexdigest()[:16]}"
    if not (path / "tokenizer.json").is_file():
        tokenizer = train_tokenizer(kind, texts_fn(), vocab_size)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=".tmp-"))
        tokenizer.save_pretrained(tmp)
        try:
            os.replace(tmp, path)
        except OSError:  # another process won the race
            shutil.rmtree(tmp, ignore_errors=True)
    return PreTrainedTokenizerFast.from_pretrained(str(path))


def load_tokenizer(name: str) -> PreTrainedTokenizerFast:
    try:
        return AutoTokenizer.from_pretrained(name)
    except Exception as err:  # noqa: BLE001
        reason = " ".join(str(err).split())[:300]
        raise UsageError(f"cannot load tokenizer {name!r}: {reason}") from None


class ResumableMaskingCollator(DataCollatorForLanguageModeling):
    """`DataCollatorForLanguageModeling` whose masks come from a generator seeded by `(seed, batch content)`, so a
    run resumed from a checkpoint masks every batch exactly as the uninterrupted run did (a single running
    generator would be out of step after the Trainer skips the batches it already trained on)."""

    def torch_mask_tokens(self, inputs: torch.Tensor, *args, **kwargs):
        digest = hashlib.sha256(inputs.numpy().tobytes()).digest()
        self.generator = torch.Generator().manual_seed((self.seed or 0) ^ int.from_bytes(digest[:7], "little"))
        return super().torch_mask_tokens(inputs, *args, **kwargs)


class PackingCollator:
    """Padding-free batches for the language-modelling tasks: `DataCollatorWithFlattening` concatenates the batch's
    sequences into one row with `position_ids` restarting at 0 at each sequence (no padding, no attention mask; the
    model keeps attention and shaped attention's centring within each sequence). Causal LM: the flattening
    collator's labels (each sequence's first label ignored). Masked LM: the flattening collator cannot mask, so the
    row's tokens are then masked by `masker` (a `DataCollatorForLanguageModeling`): its masking is independent per
    token and skips special tokens, so masking the row is masking each sequence and flattening."""

    def __init__(self, masker: DataCollatorForLanguageModeling | None = None):
        self.flatten = DataCollatorWithFlattening(return_position_ids=True)
        self.masker = masker

    def __call__(self, features: list[dict]) -> dict:
        batch = self.flatten([{"input_ids": f["input_ids"]} for f in features])
        if self.masker is not None:
            batch["input_ids"], batch["labels"] = self.masker.torch_mask_tokens(batch["input_ids"].clone())
        return batch


# -- tokenised datasets ----------------------------------------------------------------------------------------
def chunk_causal(batch: dict, tokenizer, column: str, seq_len: int, packing: bool = False) -> dict:
    """HF course 7.6: split each text into `seq_len` windows, keep only the full ones (with `packing`, every window
    of at least 2 tokens: nothing is padded, so a text's short last window costs nothing)."""
    outputs = tokenizer(
        batch[column], truncation=True, max_length=seq_len, return_overflowing_tokens=True, return_length=True
    )
    shortest = 2 if packing else seq_len
    return {"input_ids": [ids for length, ids in zip(outputs["length"], outputs["input_ids"]) if length >= shortest]}


def window_masked(batch: dict, tokenizer, column: str, seq_len: int) -> dict:
    """Masked LM with packing: each document on its own (`[CLS] doc [SEP]`), cut into windows of at most `seq_len`
    tokens; windows of fewer than 3 tokens (nothing between the special tokens) are dropped."""
    outputs = tokenizer(
        batch[column], truncation=True, max_length=seq_len, return_overflowing_tokens=True, return_length=True
    )
    return {"input_ids": [ids for length, ids in zip(outputs["length"], outputs["input_ids"]) if length >= 3]}


def group_masked(batch: dict, tokenizer, column: str, seq_len: int) -> dict:
    """HF course 7.3: tokenise (`[CLS] doc [SEP]`), concatenate, cut into `seq_len` blocks (rest dropped)."""
    ids = [i for seq in tokenizer(batch[column])["input_ids"] for i in seq]
    blocks = [ids[i : i + seq_len] for i in range(0, len(ids) - seq_len + 1, seq_len)]
    return {"input_ids": blocks, "attention_mask": [[1] * seq_len for _ in blocks]}


def _tokenise(ds, fn, **kwargs):
    columns = getattr(ds, "column_names", None)
    map_kwargs = {} if isinstance(ds, datasets.IterableDataset) else {"desc": "tokenising"}
    return ds.map(fn, batched=True, remove_columns=columns or None, fn_kwargs=kwargs, **map_kwargs)


def _language_modelling(
    spec: DataSpec, task: str, vocab_size: int, tokenizer: PreTrainedTokenizerFast | None = None
) -> TaskData:
    train_raw, eval_raw, column, source = _raw_text(spec, task)
    embedded = spec.dataset == EMBEDDED
    if not embedded:
        train_raw = _take(train_raw, spec.max_train_samples)
    kind = "bpe" if task == "causal-lm" else "wordpiece"
    if tokenizer is None and spec.tokenizer:
        tokenizer = load_tokenizer(spec.tokenizer)
    if tokenizer is None:  # else a resumed run's or a pretrained model's
        identity = {
            "source": source,
            "config": spec.dataset_config,
            "split": spec.train_split,
            "column": column,
            "samples": spec.tokenizer_train_samples,
            "max_train": spec.max_train_samples,
            "python": sys.version.split()[0] if embedded else None,
            **({"data_files": spec.train_data_files} if spec.train_data_files else {}),
        }
        reading = None if embedded else source
        tokenizer = cached_tokenizer(
            kind, vocab_size, identity, lambda: _texts(train_raw, column, spec.tokenizer_train_samples, reading)
        )
    kwargs = dict(tokenizer=tokenizer, column=column, seq_len=spec.seq_len)
    if task == "causal-lm":
        fn, kwargs["packing"] = chunk_causal, spec.packing
    else:
        fn = window_masked if spec.packing else group_masked
    train = _tokenise(train_raw, fn, **kwargs)
    evaluation = _materialise(_take(_tokenise(eval_raw, fn, **kwargs), spec.max_eval_samples))
    if not isinstance(train, datasets.IterableDataset) and len(train) == 0 or len(evaluation) == 0:
        raise UsageError(
            f"the data from {source} yields no full {spec.seq_len}-token example for training or "
            "evaluation; use more data (data.max_train_samples) or a shorter data.seq_len."
            + (
                ""
                if embedded
                else _text_lines_note(spec.dataset) + (_text_lines_note(spec.eval_dataset) if spec.eval_dataset else "")
            )
        )
    eval_source = source if embedded else _dataset_name(spec.eval_dataset or spec.dataset, spec.dataset_config)
    return TaskData(
        train=train,
        eval=evaluation,
        tokenizer=tokenizer,
        source=source,
        eval_source=eval_source,
        eval_split="validation" if embedded else spec.eval_split,
    )


def _dataset_name(dataset: str, config: str | None) -> str:
    """A dataset as a run reports it: its id or folder, and its config."""
    return f"{dataset}/{config}" if config else dataset


def _classification(spec: DataSpec, tokenizer: PreTrainedTokenizerFast | None, vocab_size: int) -> TaskData:
    if spec.dataset == EMBEDDED:
        train_raw, eval_raw = corpus.topic_dataset("train"), corpus.topic_dataset("validation")
        first, second, labels = "sentence", None, corpus.TOPIC_LABELS
        source = f"embedded: {EMBEDDED_TASK} (stdlib docstrings, {' vs '.join(labels)})"
    else:
        if spec.dataset == GLUE and spec.dataset_config not in GLUE_TASKS:
            raise UsageError(
                f"data.dataset_config={spec.dataset_config!r} is not a GLUE task; allowed values: "
                f"{', '.join(GLUE_TASKS)}."
            )
        first, second, num, eval_split = GLUE_TASKS.get(spec.dataset_config, ("sentence", None, 2, spec.eval_split))
        if spec.dataset != GLUE or spec.eval_split != "validation":
            eval_split = spec.eval_split
        train_raw = load_remote(
            spec.dataset, spec.dataset_config, spec.train_split, False, spec.train_data_files, "data.train_split"
        )
        eval_raw = load_remote(
            spec.eval_dataset or spec.dataset,
            spec.dataset_config,
            eval_split,
            False,
            spec.eval_data_files,
            "data.eval_split",
        )
        glue_task = spec.dataset_config if spec.dataset_config in GLUE_TASKS else None
        # the extra splits go with the task's own eval split (another eval_split is scored alone)
        extra = GLUE_EXTRA_EVAL.get(glue_task, ()) if glue_task and eval_split == GLUE_TASKS[glue_task][3] else ()
        extra_raw = {
            split: load_remote(
                spec.eval_dataset or spec.dataset, spec.dataset_config, split, False, None, "data.eval_split"
            )
            for split in extra
        }
        where = f"dataset {spec.dataset!r}" + (f" (config {spec.dataset_config!r})" if spec.dataset_config else "")
        for split_name, ds in (("train", train_raw), (eval_split, eval_raw), *extra_raw.items()):
            if "label" not in ds.column_names:
                raise UsageError(
                    f"{where}, split {split_name!r}: no 'label' column to fine-tune on (columns: "
                    f"{', '.join(ds.column_names)})."
                )
        feature = train_raw.features.get("label")
        if glue_task and num > 1 and not hasattr(feature, "names"):
            raise UsageError(
                f"{where}: its 'label' column is not a ClassLabel (the dataset card's dataset_info names the "
                f"classes); found {feature!r}."
            )
        labels = tuple(feature.names) if num > 1 and hasattr(feature, "names") else ("score",) * num
        source = _dataset_name(spec.dataset, spec.dataset_config)
    eval_source = (
        source if spec.dataset == EMBEDDED else _dataset_name(spec.eval_dataset or spec.dataset, spec.dataset_config)
    )
    if spec.dataset == EMBEDDED:
        glue_task, extra_raw, eval_split = None, {}, "validation"
    train_raw = _take(train_raw, spec.max_train_samples)
    eval_raw = _take(eval_raw, spec.max_eval_samples)
    extra_raw = {split: _take(ds, spec.max_eval_samples) for split, ds in extra_raw.items()}
    if tokenizer is None and spec.tokenizer:
        tokenizer = load_tokenizer(spec.tokenizer)
    if tokenizer is None:
        prose = corpus.prose_dataset("train")
        identity = {
            "source": "embedded: pydoc topics + stdlib docstrings",
            "config": None,
            "split": "train",
            "column": corpus.PROSE_COLUMN,
            "samples": spec.tokenizer_train_samples,
            "max_train": None,
            "python": sys.version.split()[0],
        }
        tokenizer = cached_tokenizer(
            "wordpiece", vocab_size, identity, lambda: _texts(prose, corpus.PROSE_COLUMN, spec.tokenizer_train_samples)
        )

    def encode(batch):
        pair = (batch[first],) if second is None else (batch[first], batch[second])
        return tokenizer(*pair, truncation=True, max_length=spec.seq_len)

    keep = {"label"}
    train = train_raw.map(encode, batched=True, remove_columns=[c for c in train_raw.column_names if c not in keep])
    evaluation = eval_raw.map(encode, batched=True, remove_columns=[c for c in eval_raw.column_names if c not in keep])
    extra = {
        split: ds.map(encode, batched=True, remove_columns=[c for c in ds.column_names if c not in keep])
        for split, ds in extra_raw.items()
    }
    return TaskData(
        train=train,
        eval=evaluation,
        tokenizer=tokenizer,
        source=source,
        eval_source=eval_source,
        num_labels=len(labels),
        label_names=tuple(labels),
        glue_task=glue_task,
        extra_eval=extra,
        eval_split=eval_split,
    )


def build_task_data(
    task: str,
    spec: DataSpec,
    vocab_size: int,
    tokenizer: PreTrainedTokenizerFast | None = None,
) -> TaskData:
    """The tokenised train/eval data and tokenizer of `task` as `spec` describes."""
    if task == "sequence-classification":
        return _classification(spec, tokenizer, vocab_size)
    return _language_modelling(spec, task, vocab_size, tokenizer)
