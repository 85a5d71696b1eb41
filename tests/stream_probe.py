"""Run in a fresh process by tests/test_hub_datasets.py (with the Hub mirror's endpoint): build a preset's task data as
`simplified-train` does, read one full pass of its training stream through the Trainer's data loader, and print
JSON: the tokenizer's vocabulary, the rows the stream yields read directly (no loader), and the rows the Trainer's
loader yields (with the preset's `training.dataloader_num_workers`).

Usage: python tests/stream_probe.py PRESET [key=value ...]
"""

from __future__ import annotations

import json
import sys
import tempfile

import datasets
import torch

from modeling_simplified import SimplifiedForCausalLM, SimplifiedForMaskedLM
from modeling_simplified.training.data import build_task_data
from modeling_simplified.training.presets import apply_override, load_preset
from modeling_simplified.training.trainer import SimplifiedTrainer, training_arguments


def as_tensor(rows: list[dict]) -> dict[str, torch.Tensor]:
    """The loader's collator: the rows' token ids as they are, padded with -1 (accelerate needs tensors)."""
    ids = [torch.tensor(row["input_ids"]) for row in rows]
    return {"input_ids": torch.nn.utils.rnn.pad_sequence(ids, batch_first=True, padding_value=-1)}


def main(name: str, *assignments: str) -> None:
    preset = load_preset(name)
    for assignment in assignments:
        apply_override(preset, assignment)
    data = build_task_data(preset.task, preset.data, preset.model.get("vocab_size", 50257))
    assert isinstance(data.train, datasets.IterableDataset), type(data.train)
    direct = [row["input_ids"] for row in data.train]
    model_class = SimplifiedForCausalLM if preset.task == "causal-lm" else SimplifiedForMaskedLM
    model = model_class(preset.config(vocab_size=len(data.tokenizer)))
    with tempfile.TemporaryDirectory() as out:
        args = training_arguments(preset.training, out, eval_strategy="no", remove_unused_columns=False)
        trainer = SimplifiedTrainer(  # the loader the Trainer trains with (accelerate's, over the workers)
            model=model, args=args, train_dataset=data.train, data_collator=as_tensor, recipe=preset.training
        )
        batches = [batch["input_ids"] for batch in trainer.get_train_dataloader()]
    loaded = [[i for i in row.tolist() if i >= 0] for batch in batches for row in batch]
    print(
        json.dumps(
            {
                "source": data.source,
                "shards": data.train.n_shards,
                "vocab": data.tokenizer.get_vocab(),
                "direct": direct,
                "loaded": loaded,
            }
        )
    )


if __name__ == "__main__":
    main(*sys.argv[1:])
