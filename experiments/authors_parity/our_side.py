"""This project's side of the parity runs: a model (the authors' initial weights converted with `simplified-convert
original`, or a model of this project's fields, e.g. a block preset, with its own initialisation) trained by this project's `SimplifiedTrainer`
(its AdamW parameter groups, `modeling_simplified.optimization.parameter_groups`) with the authors'
`train.yaml` hyper-parameters, on the shared batches in order."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F
import yaml
from torch.utils.data import Dataset, SequentialSampler
from transformers import default_data_collator

from modeling_simplified import SimplifiedForCausalLM
from modeling_simplified.conversion.original import convert_original
from modeling_simplified.training.presets import TrainingRecipe, build_config
from modeling_simplified.training.trainer import SimplifiedTrainer, training_arguments

from .run_record import optimizer_class, parameter_stats, trained_record
from .settings import Miniature
from .venv import UPSTREAM

#: the authors' training hyper-parameters (`config/train/train.yaml` at the pinned commit)
THEIR_TRAIN_YAML = UPSTREAM / "simplified_transformers" / "config" / "train" / "train.yaml"


def their_train_settings() -> dict:
    return yaml.safe_load(THEIR_TRAIN_YAML.read_text())


class _Batches(Dataset):
    def __init__(self, ids: torch.Tensor):
        self.ids = ids

    def __len__(self) -> int:
        return self.ids.shape[0]

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


class ParityTrainer(SimplifiedTrainer):
    """This project's Trainer; the batches in order, and each step's loss and lr recorded."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.record: dict[str, list[float]] = {"loss": [], "lr": []}

    def _get_train_sampler(self, train_dataset=None):
        return SequentialSampler(train_dataset if train_dataset is not None else self.train_dataset)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        if model.dtype == torch.float64:
            # transformers 5's causal-LM loss casts the logits to float32 (4.30's GPT-2 loss does not): in float64 the
            # same next-token cross-entropy is taken in the logits' dtype
            logits = model(input_ids=inputs["input_ids"]).logits
            labels = inputs["labels"]
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1))
            out = (loss, logits) if return_outputs else loss
        else:
            out = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        loss = out[0] if return_outputs else out
        self.record["loss"].append(float(loss.detach()))
        self.record["lr"].append(float(self.lr_scheduler.get_last_lr()[0]))
        return out


def converted_model(their_init: Path, out: Path, dtype: torch.dtype = torch.float32) -> SimplifiedForCausalLM:
    """The authors' initial weights (their format) through `simplified-convert original`, loaded in `dtype`."""
    if not (out / "config.json").is_file():
        convert_original(their_init, out)
    return SimplifiedForCausalLM.from_pretrained(out, dtype=dtype)


def model_from_fields(fields: dict, seed: int, data: dict) -> SimplifiedForCausalLM:
    """The model of these `SimplifiedConfig` fields (a preset's model section, e.g. a step of the study's walk) for
    the batches' tokenizer, with this project's initialisation drawn after `torch.manual_seed(seed)`."""
    config = build_config(
        {
            **fields,
            "vocab_size": int(data["vocab_size"]),
            "bos_token_id": int(data["bos_token_id"]),
            "eos_token_id": int(data["eos_token_id"]),
            "pad_token_id": int(data["eos_token_id"]),
        }
    )
    torch.manual_seed(seed)
    return SimplifiedForCausalLM(config)


def train(model: SimplifiedForCausalLM, data: dict, setting: Miniature, seed: int) -> dict:
    """Train `model` on the batches with the authors' hyper-parameters; the per-step loss and lr, the final eval
    loss and each parameter's AdamW group."""
    theirs = their_train_settings()
    ids = data["train"][: setting.steps * setting.batch]
    recipe = TrainingRecipe(
        learning_rate=setting.learning_rate,
        weight_decay=float(theirs["weight_decay"]),
        adam_epsilon=float(theirs["adam_epsilon"]),
        max_grad_norm=float(theirs["max_grad_norm"]),
        warmup_ratio=float(theirs["warmup_ratio"]),
        max_steps=setting.steps,
        per_device_train_batch_size=setting.batch,
        seed=seed,
    )
    with tempfile.TemporaryDirectory() as tmp:
        args = training_arguments(
            recipe,
            tmp,
            lr_scheduler_type=theirs["lr_scheduler_type"],  # "polynomial": decay to 1e-7, which no preset offers
            eval_strategy="no",
            save_strategy="no",
            logging_steps=max(1, setting.steps // 10),
            logging_first_step=False,
            include_num_input_tokens_seen="no",
            disable_tqdm=True,
        )
        trainer = ParityTrainer(
            model=model, args=args, recipe=recipe, data_collator=default_data_collator, train_dataset=_Batches(ids)
        )
        trainer.train()
    return {
        "code": "ours",
        "optimizer": optimizer_class(trainer),
        "seed": seed,
        **trained_record(trainer, model, data["eval"], setting.batch),
    }


def init_stats(model: torch.nn.Module) -> dict[str, dict]:
    """Mean, std and largest magnitude of every parameter."""
    return {n: parameter_stats(p) for n, p in model.named_parameters()}


def main(job_file: str) -> None:
    """One job of `__main__` or `study`: `{"kind": "converted" | "model", "block", "seed", "setting", "data", "out",
    ...}` (`converted`: their initial weights; `model`: the fields of a model of ours, drawn from the seed)."""
    job = json.loads(Path(job_file).read_text())
    torch.set_num_threads(int(job.get("threads", 1)))
    setting = Miniature(**job["setting"])
    data = torch.load(job["data"], weights_only=True)
    if job["kind"] == "converted":
        dtype = getattr(torch, job.get("dtype", "float32"))
        model = converted_model(Path(job["their_init"]), Path(job["converted"]), dtype)
    else:
        model = model_from_fields(job["model"], int(job["seed"]), data)
    stats = init_stats(model)
    record = train(model, data, setting, int(job["seed"]))
    record.update(kind=job["kind"], block=job["block"], init=stats, config=model.config.to_diff_dict())
    Path(job["out"]).write_text(json.dumps(record, indent=1, default=str))
    print(
        f"ours {job['kind']} {job['block']} seed {job['seed']}: {record['train_loss'][0]:.4f} -> "
        f"{record['train_loss'][-1]:.4f}",
        flush=True,
    )


if __name__ == "__main__":
    main(sys.argv[1])
