"""Export a simplified-transformer model as exactly the folder that goes to the Hub.

`export_model(model, output_dir, tokenizer=None, run_info=None)` writes `model.safetensors` (in the model's dtype: a
bf16 model's weights stay bf16, `dtype` in `config.json` says so and the card states it), `config.json` (whose
`auto_map` names every Auto class, as every `save_pretrained` of the family writes it), `generation_config.json`
(causal LM), the flat custom-code files (`CODE_FILES`: the configuration, the modeling file and its sibling
modules), the tokenizer files, `README.md` (the model card) and the loss-curve PNG when given. CLI: `simplified-export CHECKPOINT_DIR OUT_DIR` (`cli.py`).
"""

from __future__ import annotations

import ast
import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from transformers import AutoTokenizer, GenerationConfig

import modeling_simplified.modeling_simplified as modeling

from .card import CARD_MARKER, HEADS, render_card, validate_run_info

#: The shipped custom code: the modeling file and every sibling it imports (save_pretrained copies them all).
CODE_FILES = (
    "configuration_simplified.py",
    "fields_simplified.py",
    "modeling_simplified.py",
    "embeddings_simplified.py",
    "kernels_simplified.py",
    "checkpoints_simplified.py",
    "compat_simplified.py",
    "tensor_parallel_simplified.py",
    "weight_decay_simplified.py",
    "quantization_simplified.py",
)
LOSS_CURVE_NAME = "loss_curve.png"
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json")


class ExportError(ValueError):
    """A bad export request (wrong model, path or output folder): the message names the problem."""


def load_checkpoint(path: str | os.PathLike):
    """Load a saved model or Trainer checkpoint folder with the class named in its config's `architectures`."""
    path = Path(path)
    config_file = path / "config.json"
    if not config_file.is_file():
        raise ExportError(f"{path} is not a saved model or checkpoint folder: it has no config.json.")
    try:
        config = json.loads(config_file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ExportError(f"{config_file} is not valid JSON: {err}.") from None
    if not isinstance(config, dict):
        raise ExportError(f"{config_file} must hold a JSON object, got a {type(config).__name__}.")
    if config.get("model_type") != "simplified":
        raise ExportError(f"{config_file}: model_type is {config.get('model_type')!r}, expected 'simplified'.")
    architectures = config.get("architectures") or []
    if not isinstance(architectures, list) or len(architectures) != 1 or architectures[0] not in HEADS:
        raise ExportError(f"{config_file}: architectures is {architectures!r}; expected one of {', '.join(HEADS)}.")
    try:
        return getattr(modeling, architectures[0]).from_pretrained(path)
    except ValueError as err:  # an invalid field names itself; an unmatched checkpoint names its file
        where = "" if str(path) in str(err) else f"{config_file}: "
        raise ExportError(f"{where}{one_line(err)}") from None
    except Exception as err:  # noqa: BLE001  (safetensors' and torch's errors have no common base)
        raise ExportError(f"{path / 'model.safetensors'}: cannot load the weights: {one_line(err)}") from None


def one_line(err: BaseException) -> str:
    """The first line of an error's message (or its type when it has none): what a CLI prints."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def run_info_from_trainer_state(path: str | os.PathLike) -> dict[str, Any]:
    """steps, tokens seen and the final train/eval loss from a Trainer checkpoint's trainer_state.json (the logged
    learning rates are scheduled values, not the peak: pass `learning_rate` in run_info)."""
    state_file = Path(path) / "trainer_state.json"
    if not state_file.is_file():
        return {}
    state = json.loads(state_file.read_text())
    info: dict[str, Any] = {}
    if isinstance(state.get("global_step"), int) and state["global_step"] > 0:
        info["steps"] = state["global_step"]
    history = state.get("log_history") or []
    for key, target in (
        ("loss", "train_loss"),
        ("eval_loss", "eval_loss"),
        ("eval_perplexity", "perplexity"),
        ("num_input_tokens_seen", "tokens_seen"),
    ):
        values = [h[key] for h in history if isinstance(h.get(key), (int, float)) and math.isfinite(h[key])]
        if values:
            info[target] = int(values[-1]) if target == "tokens_seen" else float(values[-1])
    return info


def _is_previous_export(folder: Path) -> bool:
    readme = folder / "README.md"
    return (
        readme.is_file()
        and CARD_MARKER in readme.read_text(errors="replace")
        and (folder / "config.json").is_file()
        and all(p.is_file() for p in folder.iterdir())
    )


def _check_output_dir(output_dir: Path) -> None:
    if output_dir.exists() and not output_dir.is_dir():
        raise ExportError(f"output_dir {output_dir} exists and is not a folder.")
    if output_dir.is_dir() and any(output_dir.iterdir()) and not _is_previous_export(output_dir):
        raise ExportError(
            f"output_dir {output_dir} is not empty and is not a previous export (no README.md written by "
            "simplified-export): refusing to overwrite it. Choose an empty or new folder."
        )


def _check_code_files(folder: Path) -> None:
    """The shipped code must be exactly the flat modules of `CODE_FILES`, importing each other by sibling imports
    only."""
    shipped = sorted(p.name for p in folder.glob("*.py"))
    if shipped != sorted(CODE_FILES):
        raise ExportError(f"the export holds code files {shipped}, expected exactly {list(CODE_FILES)}.")
    for name in CODE_FILES:
        for node in ast.walk(ast.parse((folder / name).read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                if node.level != 1 or not node.module or not (folder / f"{node.module}.py").is_file():
                    raise ExportError(
                        f"{name}: relative import 'from {'.' * node.level}{node.module or ''} import "
                        "...' is not a sibling import of a shipped file."
                    )
            modules = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else ([node.module] if isinstance(node, ast.ImportFrom) and not node.level and node.module else [])
            )
            if any(m.split(".")[0] == "modeling_simplified" for m in modules):
                raise ExportError(f"{name} imports the modeling_simplified package, which Hub users do not have.")


def _write_generation_config(folder: Path, model, tokenizer) -> None:
    generation = getattr(model, "generation_config", None) or GenerationConfig.from_model_config(model.config)
    generation = GenerationConfig.from_dict(generation.to_dict())
    for name in ("eos_token_id", "pad_token_id", "bos_token_id"):
        if getattr(generation, name, None) is None:
            value = getattr(model.config, name, None)
            if value is None and tokenizer is not None:
                value = getattr(tokenizer, name, None)
            if value is not None:
                setattr(generation, name, value)
    if generation.pad_token_id is None and generation.eos_token_id is not None:
        eos = generation.eos_token_id
        generation.pad_token_id = eos[0] if isinstance(eos, list) else eos
    generation.save_pretrained(folder)


def export_model(model, output_dir: str | os.PathLike, tokenizer=None, run_info: dict[str, Any] | None = None) -> Path:
    """Write the Hub folder for `model` (a Simplified* model, or a path to a saved model / Trainer checkpoint) into
    `output_dir` and return it. A previous export in `output_dir` is replaced; any other non-empty folder is refused."""
    output_dir = Path(output_dir).resolve()
    run_info = dict(validate_run_info(run_info))
    _check_output_dir(output_dir)
    if isinstance(model, (str, os.PathLike)):
        source = Path(model)
        run_info = {**run_info_from_trainer_state(source), **run_info}
        if tokenizer is None and any((source / f).is_file() for f in _TOKENIZER_FILES):
            try:
                tokenizer = AutoTokenizer.from_pretrained(source)
            except Exception as err:  # noqa: BLE001
                raise ExportError(f"{source}: cannot load its tokenizer files: {one_line(err)}") from None
        model = load_checkpoint(source)
    architecture = type(model).__name__
    if architecture not in HEADS or getattr(model.config, "model_type", None) != "simplified":
        raise ExportError(f"model must be one of {', '.join(HEADS)} (model_type 'simplified'), got {architecture}.")
    loss_curve = run_info.get("loss_curve")
    if loss_curve is not None:
        loss_curve = Path(loss_curve)
        if not loss_curve.is_file() or loss_curve.read_bytes()[:8] != _PNG_MAGIC:
            raise ExportError(f"run_info['loss_curve'] must be an existing PNG file, got {str(loss_curve)!r}.")

    output_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output_dir.name}.partial-", dir=output_dir.parent))
    umask = os.umask(0)
    os.umask(umask)
    staging.chmod(0o777 & ~umask)  # mkdtemp makes 0700; save_pretrained's os.makedirs gives 0777 less the umask
    try:
        model.save_pretrained(staging)
        if architecture == "SimplifiedForCausalLM":
            _write_generation_config(staging, model, tokenizer)
        else:
            (staging / "generation_config.json").unlink(missing_ok=True)
        _check_code_files(staging)
        if tokenizer is not None:
            tokenizer.save_pretrained(staging)
        if loss_curve is not None:
            shutil.copyfile(loss_curve, staging / LOSS_CURVE_NAME)
        card = render_card(
            model.config,
            architecture,
            {k: v for k, v in run_info.items() if k != "loss_curve"},
            loss_curve_file=LOSS_CURVE_NAME if loss_curve is not None else None,
            has_tokenizer=tokenizer is not None,
        )
        card.save(staging / "README.md")
        if output_dir.exists():
            shutil.rmtree(output_dir)  # a previous export (checked above)
        os.replace(staging, output_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return output_dir
