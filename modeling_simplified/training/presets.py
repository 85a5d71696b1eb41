"""Training presets: one JSON per recipe family in `configuration/`, validated into typed dataclasses.

A preset is `{"paper": str, "task": str, "model": {SimplifiedConfig fields}, "training": {...}, "data": {...}}`.
Every key is checked: an unknown key, a wrong type or a value outside its allowed set raises `UsageError`, whose
message names the field and the allowed values.

`configuration/<family>.json` is one paper setting (CodeParrot, its tiny miniature, crammed BERT, its miniature,
GLUE fine-tuning): the setting's preset, whose `paper` text may hold `{placeholders}`, and a `presets` table with one
row per preset `<family>-<row>`. In the CodeParrot and crammed-BERT families each row is named after the block type
it trains (`BLOCKS`): `{"beta_ff_init": βFF, "learning_rate": peak lr, "paper": {placeholder: text}}`. A row names
fields of any section (SimplifiedConfig, TrainingRecipe and DataSpec share no field name); `null` for a model field
removes the family's value, so that the block type's own preset applies. `paper` is the whole text or the values of
the family's placeholders.

A row stands for the delta `{"base": family, "paper": ..., "model": {...}, "training": {...}, "data": {...}}`
(`preset_delta`), which `expand` applies to the family. A preset file given by path is such a delta or a full preset
(e.g. a run's `preset.json`).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib.resources
import importlib.util
import json
import math
import typing
from pathlib import Path
from typing import Any

from modeling_simplified.fields_simplified import BLOCK_PRESETS, BLOCK_TYPES, check_type, nearest_names

if typing.TYPE_CHECKING:
    from modeling_simplified.configuration_simplified import SimplifiedConfig

#: The recipe families: the package `modeling_simplified.configuration` (the root folder `configuration/`).
PRESET_DIR = importlib.resources.files("modeling_simplified.configuration")

SECTIONS = ("paper", "task", "model", "training", "data")

TASKS = ("causal-lm", "masked-lm", "sequence-classification")
LR_SCHEDULERS = ("linear", "cosine", "constant_with_warmup")
EMBEDDED = "embedded"
#: The offline labelled task used by `glue` presets when `data.dataset` is "embedded" (see corpus.py).
EMBEDDED_TASK = "stdlib-topic"


@functools.cache
def model_fields() -> tuple[str, ...]:
    """The SimplifiedConfig fields a preset or `--set` may name (the config's own fields; labels come from the data):
    the annotated names of its class body, read from the module's source, not imported. The config module imports
    transformers, which listing, showing or checking presets does not need (tests/test_presets.py holds the list
    equal to `SimplifiedConfig.__annotations__`)."""
    source = Path(importlib.util.find_spec("modeling_simplified.configuration_simplified").origin).read_text()
    config = next(
        node for node in ast.parse(source).body if isinstance(node, ast.ClassDef) and node.name == "SimplifiedConfig"
    )
    return tuple(node.target.id for node in config.body if isinstance(node, ast.AnnAssign))


#: How close (difflib's ratio) a `--set` key or a preset name must be to a known one to be suggested: looser than
#: the config's `MISSPELLING_CUTOFF`, which decides whether a key is an error at all; here it already is one.
SUGGESTION_CUTOFF = 0.75


class UsageError(ValueError):
    """Bad user input (preset, override, dataset, output directory): the CLI prints it and exits non-zero."""


def first_line(err: BaseException) -> str:
    """What a CLI prints of an error: the first line of its message (load reports and tracebacks stay out)."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


@dataclasses.dataclass
class TrainingRecipe:
    """Optimiser, schedule, batch and bookkeeping of a run (He & Hofmann 2024, App. D)."""

    learning_rate: float
    weight_decay: float = 0.1
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_epsilon: float = 1e-8
    max_grad_norm: float = 1.0
    lr_scheduler: str = "linear"
    #: fraction of the steps with linearly rising lr; 0.75 gives crammed BERT's triangle (peak at 75%)
    warmup_ratio: float = 0.05
    max_steps: int | None = None
    num_train_epochs: float | None = None
    per_device_train_batch_size: int = 32
    gradient_accumulation_steps: int = 1
    per_device_eval_batch_size: int = 64
    #: crammed BERT's batch ramp: the effective batch grows linearly from `per_device_train_batch_size` to this
    #: by `batch_ramp_fraction` of the micro-batch steps (None: no ramp)
    batch_ramp_to: int | None = None
    batch_ramp_fraction: float = 0.6
    eval_steps: int = 500
    logging_steps: int = 50
    save_steps: int = 1000
    save_total_limit: int | None = 3
    seed: int = 0
    #: processes that read and tokenise the training data (a stream's shards are divided among them)
    dataloader_num_workers: int = 0
    #: bf16 mixed precision, the Trainer's `bf16=True`: the forward and backward under bf16 autocast, float32 master
    #: weights and AdamW state (docs/training.md, "bf16")
    bf16: bool = False
    #: a pretrained run (output dir, export or checkpoint) to start from; fine-tuning presets use it
    init_from: str | None = None


@dataclasses.dataclass
class DataSpec:
    """Where the text comes from and how it becomes fixed-length examples."""

    #: "embedded" (offline corpus of the running Python) or a Hugging Face dataset id
    dataset: str = EMBEDDED
    #: a separate dataset id for evaluation (CodeParrot ships train and valid as two repos); `eval_split` names
    #: the split of that repository
    eval_dataset: str | None = None
    #: dataset config name (GLUE task: sst2, cola, ...; the Pile: a subset)
    dataset_config: str | None = None
    train_split: str = "train"
    eval_split: str = "validation"
    #: files of the dataset repository (a glob, `datasets`' `data_files`) that make up the training split; None:
    #: the splits `datasets` infers from the repository's layout or README
    train_data_files: str | None = None
    #: the same for the evaluation split (the Pile's `val.jsonl.zst`, which `datasets` does not infer as a split)
    eval_data_files: str | None = None
    text_column: str = "content"
    streaming: bool = False
    seq_len: int = 128
    #: tokenizer path or id; None trains one from the training data (BPE for causal, WordPiece for masked)
    tokenizer: str | None = None
    #: documents used to train the tokenizer
    tokenizer_train_samples: int = 100_000
    #: cap on training documents (files for the embedded code corpus); None: all
    max_train_samples: int | None = None
    #: cap on evaluation examples (chunks); None: all
    max_eval_samples: int | None = 1000
    mlm_probability: float = 0.25
    #: padding-free batches (`DataCollatorWithFlattening`): each batch is one row of its sequences, positions
    #: restarting at each; the texts are cut into windows of at most `seq_len` tokens (short ones kept), not padded
    packing: bool = False


@dataclasses.dataclass
class Preset:
    """A validated preset. `model` stays a dict of SimplifiedConfig fields (so overrides compose)."""

    name: str
    paper: str
    task: str
    model: dict[str, Any]
    training: TrainingRecipe
    data: DataSpec
    #: the family (`configuration/<base>.json`) the preset is a delta of, if any
    base: str | None = None

    def config(self, **extra) -> SimplifiedConfig:
        """The SimplifiedConfig of the model section (plus `extra`), with bad values as `UsageError`."""
        return build_config({**self.model, **extra}, where=f"preset {self.name!r}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "paper": self.paper,
            "task": self.task,
            "model": dict(self.model),
            "training": dataclasses.asdict(self.training),
            "data": dataclasses.asdict(self.data),
        }


# -- loading -------------------------------------------------------------------------------------------------
def available_families() -> list[str]:
    """Names of the recipe families in `configuration/`."""
    return sorted(p.name.removesuffix(".json") for p in PRESET_DIR.iterdir() if p.name.endswith(".json"))


def available_presets() -> list[str]:
    """Names of the presets: `<family>-<row>` for each row of each family's `presets` table."""
    return sorted(_catalogue())


def _catalogue() -> dict[str, tuple[str, str]]:
    """Preset name -> (family, row)."""
    return {f"{family}-{row}": (family, row) for family in available_families() for row in _family(family)["presets"]}


def _family(family: str) -> dict[str, Any]:
    return _read_json(PRESET_DIR / f"{family}.json")


def _read_json(path) -> Any:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise UsageError(f"preset file {path} is not valid JSON: {err}") from None


def preset_delta(name: str) -> dict[str, Any]:
    """The delta on its family that a named preset's row stands for: each field in its section, and `block_type`
    from the row's name when that is a block type."""
    catalogue = _catalogue()
    near = [] if name in catalogue else nearest_names(name, catalogue, n=3, cutoff=SUGGESTION_CUTOFF)
    if near:  # the nearest names rather than all of them
        raise UsageError(
            f"unknown preset {name!r}; did you mean {', '.join(map(repr, near[:-1]))}{' or ' if near[1:] else ''}"
            f"{near[-1]!r}? (simplified-train --list-presets lists them all; or a path to a preset .json file)"
        )
    if name not in catalogue:
        raise UsageError(
            f"unknown preset {name!r}; available presets: {', '.join(sorted(catalogue))} "
            "(or a path to a preset .json file)."
        )
    family, row = catalogue[name]
    fields = dict(_family(family)["presets"][row])
    delta = {"base": family, "paper": fields.pop("paper", {}), "model": {}, "training": {}, "data": {}}
    if row in BLOCK_TYPES:
        delta["model"]["block_type"] = row
    for field, value in fields.items():
        if field not in _SECTION_OF:
            raise UsageError(
                f"preset {name!r}: unknown field {field!r} in the {family} table; a row names paper and fields of "
                f"model ({', '.join(model_fields())}), training ({', '.join(_names(TrainingRecipe))}) or data "
                f"({', '.join(_names(DataSpec))})."
            )
        delta[_SECTION_OF[field]][field] = value
    return delta


def expand(raw: dict[str, Any], name: str = "<preset>") -> dict[str, Any]:
    """The full preset dict of a delta (`{"base": family, ...}`: the family's preset with the delta's keys applied);
    a dict without `base` is returned as it is."""
    if not isinstance(raw, dict) or "base" not in raw:
        return raw
    family = raw["base"]
    if family not in available_families():
        raise UsageError(
            f"preset {name!r}: unknown base {family!r}; available families: {', '.join(available_families())}."
        )
    base = _family(family)
    _check_keys(raw, ("base", *SECTIONS), f"preset {name!r}")
    full = {key: base[key] for key in ("paper", "task") if key in base}
    for section in ("model", "training", "data"):
        delta = raw.get(section, {})
        _check_keys(delta, _section_keys(section), f"preset {name!r} {section}")
        full[section] = {**base.get(section, {}), **delta}
    full["model"] = {k: v for k, v in full["model"].items() if v is not None}
    if "task" in raw:
        full["task"] = raw["task"]
    paper = raw.get("paper", {})
    if isinstance(paper, dict):
        try:
            paper = base["paper"].format(**paper)
        except (KeyError, IndexError, AttributeError) as err:
            raise UsageError(f"preset {name!r}: paper must fill the base's placeholders ({err}).") from None
    full["paper"] = paper
    return full


def load_preset(name_or_path: str, check: bool = True) -> Preset:
    """Load and validate a preset by name (a row of a family in `configuration/`) or by path to a JSON file.
    `check=False` leaves the model config to one `validate` call after overrides (`simplified-train`)."""
    path = Path(name_or_path)
    if name_or_path.endswith(".json") and path.is_file():
        return parse_preset(_read_json(path), name=path.stem, check=check)
    return parse_preset(preset_delta(name_or_path), name=name_or_path, check=check)


def parse_preset(raw: dict[str, Any], name: str = "<preset>", check: bool = True) -> Preset:
    """Validate a preset dict (full, or a delta on a base): known keys only, typed values, and (with `check`) a
    model section that builds a SimplifiedConfig."""
    if not isinstance(raw, dict):
        raise UsageError(f"preset {name!r} must be a JSON object, got {type(raw).__name__}.")
    base = raw.get("base")
    raw = expand(raw, name)
    _check_keys(raw, SECTIONS, f"preset {name!r}")
    for key in ("paper", "task", "model", "training"):
        if key not in raw:
            raise UsageError(f"preset {name!r} lacks the required key {key!r}.")
    if raw["task"] not in TASKS:
        raise UsageError(f"preset {name!r}: task={raw['task']!r} is not valid; allowed values: {', '.join(TASKS)}.")
    model = dict(raw["model"])
    _check_keys(model, model_fields(), f"preset {name!r} model")
    preset = Preset(
        name=name,
        paper=_typed(raw["paper"], str, f"preset {name!r} paper"),
        task=raw["task"],
        model=model,
        training=_dataclass_from(TrainingRecipe, raw["training"], f"preset {name!r} training"),
        data=_dataclass_from(DataSpec, raw.get("data", {}), f"preset {name!r} data"),
        base=base,
    )
    if check:
        validate(preset)
    return preset


def validate(preset: Preset) -> SimplifiedConfig:
    """Value checks that types cannot express; returns the model config."""
    t, d, where = preset.training, preset.data, f"preset {preset.name!r}"
    if t.lr_scheduler not in LR_SCHEDULERS:
        raise UsageError(
            f"{where}: training.lr_scheduler={t.lr_scheduler!r} is not valid; allowed values: "
            f"{', '.join(LR_SCHEDULERS)}."
        )
    if (t.max_steps is None) == (t.num_train_epochs is None):
        raise UsageError(f"{where}: set exactly one of training.max_steps and training.num_train_epochs.")
    if d.streaming and t.max_steps is None:
        raise UsageError(f"{where}: data.streaming=true needs training.max_steps (a stream has no epochs).")
    positive = {
        "training.learning_rate": t.learning_rate,
        "training.per_device_train_batch_size": t.per_device_train_batch_size,
        "training.gradient_accumulation_steps": t.gradient_accumulation_steps,
        "training.per_device_eval_batch_size": t.per_device_eval_batch_size,
        "training.eval_steps": t.eval_steps,
        "training.logging_steps": t.logging_steps,
        "training.save_steps": t.save_steps,
        "data.seq_len": d.seq_len,
        "data.tokenizer_train_samples": d.tokenizer_train_samples,
    }
    for field in ("max_steps", "num_train_epochs", "save_total_limit", "batch_ramp_to"):
        if getattr(t, field) is not None:
            positive[f"training.{field}"] = getattr(t, field)
    for field in ("max_train_samples", "max_eval_samples"):
        if getattr(d, field) is not None:
            positive[f"data.{field}"] = getattr(d, field)
    for field, value in positive.items():
        if not (math.isfinite(value) and value > 0):
            raise UsageError(f"{where}: {field} must be > 0, got {value}.")
    for field, value, lo, hi in (
        ("training.warmup_ratio", t.warmup_ratio, 0.0, 1.0),
        ("training.adam_beta1", t.adam_beta1, 0.0, 1.0),
        ("training.adam_beta2", t.adam_beta2, 0.0, 1.0),
        ("training.batch_ramp_fraction", t.batch_ramp_fraction, 0.0, 1.0),
        ("data.mlm_probability", d.mlm_probability, 0.0, 1.0),
    ):
        if not lo <= value < hi:
            raise UsageError(f"{where}: {field} must be in [{lo}, {hi}), got {value}.")
    for field in ("weight_decay", "adam_epsilon", "max_grad_norm", "dataloader_num_workers"):
        if not (math.isfinite(getattr(t, field)) and getattr(t, field) >= 0):
            raise UsageError(f"{where}: training.{field} must be >= 0, got {getattr(t, field)}.")
    if t.batch_ramp_to is not None:
        if preset.task != "masked-lm":
            raise UsageError(f"{where}: training.batch_ramp_to is implemented for masked-lm presets only.")
        if t.batch_ramp_to % t.per_device_train_batch_size or t.batch_ramp_to < t.per_device_train_batch_size:
            raise UsageError(
                f"{where}: training.batch_ramp_to ({t.batch_ramp_to}) must be a multiple of "
                f"training.per_device_train_batch_size ({t.per_device_train_batch_size})."
            )
        if t.gradient_accumulation_steps != 1:
            raise UsageError(
                f"{where}: training.batch_ramp_to replaces gradient accumulation; set "
                "training.gradient_accumulation_steps to 1."
            )
    if d.packing and preset.task == "sequence-classification":
        raise UsageError(
            f"{where}: data.packing (--packing) is for the causal-lm and masked-lm tasks; a classifier pools one "
            "token per row, so its batches stay padded."
        )
    if preset.task == "causal-lm" and preset.model.get("is_causal") is False:
        raise UsageError(f"{where}: a causal-lm preset cannot set model.is_causal=false.")
    if (
        d.seq_len > preset.model.get("max_position_embeddings", 1024)
        and preset.model.get("position_embedding_type", "learned") == "learned"
    ):
        raise UsageError(f"{where}: data.seq_len ({d.seq_len}) exceeds model.max_position_embeddings.")
    return preset.config()


# -- overrides -------------------------------------------------------------------------------------------------
def apply_override(preset: Preset, assignment: str) -> None:
    """Apply one `--set` assignment in place: `field=value` (a model field), `model.f=v`, `training.f=v`,
    `data.f=v`. The value is parsed as JSON when it can be (numbers, true/false/null), else taken as a string."""
    key, sep, text = assignment.partition("=")
    key = key.strip()
    if not sep or not key:
        raise UsageError(f"--set expects field=value, got {assignment!r}.")
    value = _parse_value(text)
    section, _, field = key.rpartition(".")
    section = section or "model"
    meant = _meant_key(key, section, field)
    if meant is not None:
        raise UsageError(
            f"--set {key}: unknown field {key!r}; did you mean {meant!r}? (simplified-train --show <preset> lists "
            "every field with its value)"
        )
    if section == "model":
        if field not in model_fields():
            raise UsageError(
                f"--set {key}: unknown config field {field!r}; allowed model fields: "
                f"{', '.join(model_fields())}; or training.<field> ({', '.join(_names(TrainingRecipe))}) "
                f"or data.<field> ({', '.join(_names(DataSpec))})."
            )
        preset.model[field] = value
        return
    targets = {"training": preset.training, "data": preset.data}
    if section not in targets:
        raise UsageError(f"--set {key}: unknown section {section!r}; allowed sections: model, training, data.")
    cls = type(targets[section])
    if field not in _names(cls):
        raise UsageError(
            f"--set {key}: unknown {section} field {field!r}; allowed {section} fields: {', '.join(_names(cls))}."
        )
    setattr(targets[section], field, _typed(value, typing.get_type_hints(cls)[field], f"--set {key}"))


def _meant_key(key: str, section: str, field: str) -> str | None:
    """The `--set` key an unknown one was meant to be, None for a known key or one like no field: the field of
    that name in another section (`learning_rate` → `training.learning_rate`), else the nearest field of any
    section (`hiden_size` → `hidden_size`), as the config suggests for its own keys."""
    if section in ("model", "training", "data") and field in _section_keys(section):
        return None
    qualified = {name: name if where == "model" else f"{where}.{name}" for name, where in _SECTION_OF.items()}
    near = [field] if field in qualified else nearest_names(field, qualified, cutoff=SUGGESTION_CUTOFF)
    return qualified[near[0]] if near else None


def replace_dataset(spec: DataSpec, dataset: str) -> None:
    """`--dataset`: train on `dataset` and evaluate on its own `eval_split`. A preset's separate eval set and its file
    globs name the preset's own repositories (CodeParrot's `-valid` beside `-train`, the Pile's `val.jsonl.zst`):
    they would score another distribution than the new training set's, and behind a firewall they would be the one
    download left. `--eval-dataset` (`data.eval_dataset`) names another eval set."""
    if dataset != spec.dataset:
        spec.dataset = dataset
        spec.eval_dataset = spec.train_data_files = spec.eval_data_files = None


def add_set_option(parser, help: str) -> None:
    """The `--set FIELD=VALUE` option (repeatable, collected in `args.overrides`) of every command that runs
    `simplified-train`; `apply_override` reads each one."""
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="FIELD=VALUE", help=help)


def switch_block_type(preset: Preset, block_type: str, check: bool = True) -> Preset:
    """The preset for another block type: the row of that block type in the same family if there is one (e.g.
    `codeparrot-tiny-sas_p` → `codeparrot-tiny-pre_ln`), else this preset with the block-specific model fields dropped
    so that the new block type's defaults apply."""
    if block_type not in BLOCK_TYPES:
        raise UsageError(f"--block-type {block_type!r} is not valid; allowed values: {', '.join(BLOCK_TYPES)}.")
    current = preset.model.get("block_type", "pre_ln")
    if block_type == current:
        return preset
    sibling = f"{preset.base}-{block_type}"
    if preset.base is not None and sibling in _catalogue():
        return load_preset(sibling, check=check)
    structural = set(BLOCK_PRESETS[current]) | {"beta_ff_init"}
    preset.model = {k: v for k, v in preset.model.items() if k not in structural}
    preset.model["block_type"] = block_type
    if check:
        validate(preset)
    return preset


def build_config(fields: dict[str, Any], where: str = "model") -> SimplifiedConfig:
    """`SimplifiedConfig(**fields)` with unknown fields and invalid values reported as `UsageError`."""
    from modeling_simplified.configuration_simplified import SimplifiedConfig  # transformers: only to build one

    _check_keys(fields, model_fields() + ("num_labels", "id2label", "label2id", "problem_type"), where)
    try:
        return SimplifiedConfig(**fields)
    except (ValueError, TypeError) as err:
        raise UsageError(f"{where}: {err}") from None


# -- helpers ---------------------------------------------------------------------------------------------------
def _names(cls) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def _section_keys(section: str) -> tuple[str, ...]:
    return (
        model_fields() if section == "model" else tuple(_names(TrainingRecipe if section == "training" else DataSpec))
    )


#: The section each field of a family's row belongs to.
_SECTION_OF = {field: section for section in ("model", "training", "data") for field in _section_keys(section)}


def _check_keys(mapping: dict, allowed, where: str) -> None:
    if not isinstance(mapping, dict):
        raise UsageError(f"{where} must be a JSON object, got {type(mapping).__name__}.")
    unknown = sorted(set(mapping) - set(allowed))
    if unknown:
        raise UsageError(
            f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; allowed keys: {', '.join(allowed)}."
        )


def _typed(value, annotation, where: str):
    """`value` checked by the config's one type checker (`check_type`); ints are accepted for floats."""
    try:
        return check_type(value, annotation, where)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _dataclass_from(cls, raw: dict, where: str):
    _check_keys(raw, _names(cls), where)
    kwargs, hints = {}, typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name in raw:
            kwargs[f.name] = _typed(raw[f.name], hints[f.name], f"{where}.{f.name}")
        elif f.default is dataclasses.MISSING:
            raise UsageError(f"{where} lacks the required field {f.name!r}.")
    return cls(**kwargs)


def _parse_value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text
