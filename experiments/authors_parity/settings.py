"""The miniature both codes train in, the blocks and how each code selects them, and the shared batches."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from modeling_simplified.training.corpus import code_dataset
from modeling_simplified.training.data import chunk_causal, train_tokenizer

#: block -> the authors' hydra overrides that select it (their `exp_scripts/baseline_comparison.sh`: Pre-LN is the
#: default config; V-SkipInit is `skipless` with plain orthogonal W^V, W^P; SAS is `skipless` (Fig. 9); SAS-P is
#: `skipless-parallel` (Fig. 10)).
THEIR_BLOCKS: dict[str, tuple[str, ...]] = {
    "pre_ln": ("model=default",),
    "sas": ("model=skipless",),
    "sas_p": ("model=skipless-parallel",),
    "value_skipinit": (
        "model=skipless",
        "model.value_skip_gain=null",
        "model.proj_skip_gain=null",
        "model.val_init_type=orth",
    ),
}
BLOCKS = tuple(THEIR_BLOCKS)

#: their optimizer as their script gets it (TrainingArguments' default `optim` in transformers 4.30: transformers'
#: own AdamW) and torch's AdamW (the one this project's Trainer uses), which `optim="adamw_torch"` selects in theirs
THEIR_OPTIMIZER, TORCH_OPTIMIZER = "adamw_hf", "adamw_torch"


@dataclasses.dataclass(frozen=True)
class Miniature:
    """The shape and run length. The optimizer, weight decay, schedule, warmup, ε and clipping are always those of
    the authors' `config/train/train.yaml` (AdamW, wd 0.1 off gains/norms/biases, polynomial decay to 1e-7 with 5%
    warmup, ε 1e-8, clip 1); the lr is theirs too (1e-3) unless set here."""

    n_layer: int = 4
    n_embd: int = 128
    n_head: int = 4
    seq_len: int = 64
    vocab_size: int = 4096
    batch: int = 16
    steps: int = 200
    learning_rate: float = 1e-3
    #: βFF init of the simplified blocks (their skipless config's 0.1 is for 18 blocks, "O(1/sqrt(depth))"; 0.2 is
    #: this project's choice at 4 blocks)
    beta_ff_init: float = 0.2
    train_files: int = 300
    eval_windows: int = 128

    def their_overrides(self, block: str) -> list[str]:
        shape = [f"model.n_layer={self.n_layer}", f"model.n_embd={self.n_embd}", f"model.n_head={self.n_head}"]
        gain = [] if block == "pre_ln" else [f"model.mlp_block_resid_gain={self.beta_ff_init}"]
        return [*THEIR_BLOCKS[block], *shape, *gain]


def their_job(setting: Miniature, data: dict, src: Path) -> dict:
    """The fields of a job of `their_side.py` that the setting, its batches and their source fix."""
    return {
        "src": str(src),
        "steps": setting.steps,
        "batch": setting.batch,
        "learning_rate": setting.learning_rate,
        "vocab_size": int(data["vocab_size"]),
        "seq_len": setting.seq_len,
        "bos_token_id": int(data["bos_token_id"]),
        "eos_token_id": int(data["eos_token_id"]),
    }


def build_batches(setting: Miniature, path: Path) -> dict:
    """The shared batches: a 4K byte-level BPE trained on the embedded stdlib corpus' training files (the
    reproduction's tokenizer recipe), every full `seq_len` window of those files in a seeded shuffled order (the
    first `steps × batch` are trained on, in order), and `eval_windows` windows of the validation files. Saved as one
    tensor file both venvs read (`torch.load(weights_only=True)`)."""
    train = code_dataset("train", max_files=setting.train_files)
    valid = code_dataset("validation")
    tokenizer = train_tokenizer("bpe", (row["content"] for row in train), setting.vocab_size)

    def windows(ds) -> torch.Tensor:
        ids = chunk_causal({"content": list(ds["content"])}, tokenizer, "content", setting.seq_len)["input_ids"]
        return torch.tensor(ids, dtype=torch.long)

    train_ids = windows(train)
    train_ids = train_ids[torch.randperm(train_ids.shape[0], generator=torch.Generator().manual_seed(0))]
    need = setting.steps * setting.batch
    if train_ids.shape[0] < need:
        raise ValueError(f"{setting.train_files} files give {train_ids.shape[0]} windows; {need} are needed.")
    eval_ids = windows(valid)[: setting.eval_windows]
    data = {
        "train": train_ids[:need].contiguous(),
        "eval": eval_ids.contiguous(),
        "vocab_size": torch.tensor(len(tokenizer)),
        "bos_token_id": torch.tensor(tokenizer.bos_token_id),
        "eos_token_id": torch.tensor(tokenizer.eos_token_id),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(data, path)
    return data
