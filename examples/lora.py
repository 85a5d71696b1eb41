"""LoRA fine-tuning with PEFT (docs/fine_tuning.md): adapters on every linear layer of an exported causal LM (folder or
Hub repo, loaded with `trust_remote_code=True`), trained with the `Trainer` on a text, the base weights frozen; the
adapter is saved, reloaded onto a fresh copy of the base, and merged into a plain model saved beside it.

    python examples/lora.py runs/demo/export --output-dir runs/lora
    python examples/lora.py runs/demo/export --text my_corpus.txt --steps 200

Writes OUTPUT_DIR/adapter (the LoRA weights and `adapter_config.json`, a few hundred kB: load them with
`PeftModel.from_pretrained(base, OUTPUT_DIR/adapter)`) and OUTPUT_DIR/merged (a full model folder, its code included,
that loads without peft). Checks on the way, and exits with 1 if one fails: the reloaded adapter gives the trained
model's logits exactly, the merged model within 1e-5.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import tempfile
import textwrap
import warnings
from pathlib import Path

import torch
from datasets import Dataset
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments, default_data_collator

#: the merged model's logits against the trained adapter's: only the order of float32 sums differs
MERGED_ATOL = 1e-5

# peft (0.21) reads transformers' deprecated `is_gradient_checkpointing` alias in every PeftModel: not this model's
warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)


def text_blocks(tokenizer, text: str, seq_len: int) -> Dataset:
    """The text's tokens cut into full windows of `seq_len` (a causal LM's labels are its inputs)."""
    ids = tokenizer(text)["input_ids"]
    blocks = [ids[i : i + seq_len] for i in range(0, len(ids) - seq_len + 1, seq_len)]
    if not blocks:
        raise SystemExit(f"error: the text has {len(ids)} tokens, fewer than --seq-len {seq_len}")
    return Dataset.from_dict({"input_ids": blocks, "labels": blocks})


def mean_loss(model, blocks: Dataset) -> float:
    model.eval()
    with torch.no_grad():
        batch = torch.tensor(blocks["input_ids"])
        return model(input_ids=batch, labels=batch).loss.item()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python examples/lora.py", description=__doc__)
    parser.add_argument("model", help="an exported folder or Hub repo of a causal LM")
    parser.add_argument("--output-dir", default="runs/lora")
    parser.add_argument("--text", help="a UTF-8 text file to fine-tune on (default: the source of Python's textwrap)")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--rank", type=int, default=8, help="LoRA rank r (lora_alpha is 2r)")
    parser.add_argument("--learning-rate", type=float, default=3e-3)
    args = parser.parse_args(argv)
    out = Path(args.output_dir)

    tokenizer = AutoTokenizer.from_pretrained(args.model, trust_remote_code=True)
    text = Path(args.text).read_text(encoding="utf-8") if args.text else inspect.getsource(textwrap)
    blocks = text_blocks(tokenizer, text, args.seq_len)
    base = AutoModelForCausalLM.from_pretrained(args.model, trust_remote_code=True)
    before = mean_loss(base, blocks)

    # "all-linear": every nn.Linear of the blocks (attention's fused projection and W^O where learned, the MLP), not the LM head
    lora = LoraConfig(r=args.rank, lora_alpha=2 * args.rank, target_modules="all-linear", task_type="CAUSAL_LM")
    model = get_peft_model(base, lora)
    trainable, total = model.get_nb_trainable_parameters()
    print(f"LoRA r={args.rank} on every linear layer: {trainable:,} trainable parameters of {total:,}")
    scratch = tempfile.TemporaryDirectory()  # the Trainer needs a folder; it saves nothing there (save_strategy="no")
    training = TrainingArguments(
        output_dir=scratch.name,
        max_steps=args.steps,
        per_device_train_batch_size=8,
        learning_rate=args.learning_rate,
        lr_scheduler_type="constant",
        logging_steps=max(1, args.steps // 5),
        save_strategy="no",
        report_to="none",
        dataloader_pin_memory=torch.cuda.is_available(),  # pinned memory only speeds copies to a GPU
    )
    Trainer(model=model, args=training, train_dataset=blocks, data_collator=default_data_collator).train()
    scratch.cleanup()
    after = mean_loss(model, blocks)
    print(f"loss on the text: {before:.4f} before, {after:.4f} after {args.steps} steps")

    probe = torch.tensor(blocks["input_ids"][:2])
    with torch.no_grad():
        trained = model(input_ids=probe).logits
    model.save_pretrained(out / "adapter")

    reloaded = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(args.model, trust_remote_code=True), out / "adapter"
    )
    with torch.no_grad():
        same = torch.equal(reloaded.eval()(input_ids=probe).logits, trained)
    print(f"adapter saved to {out / 'adapter'}; reloaded onto the base: identical logits: {same}")

    merged = reloaded.merge_and_unload()  # W + (alpha / r)·BA in every adapted layer: a plain model again
    merged.save_pretrained(out / "merged")
    tokenizer.save_pretrained(out / "merged")
    merged = AutoModelForCausalLM.from_pretrained(out / "merged", trust_remote_code=True).eval()
    with torch.no_grad():
        error = (merged(input_ids=probe).logits - trained).abs().max().item()
    print(f"merged model saved to {out / 'merged'}; max |merged - adapter| logit: {error:.2e} (atol {MERGED_ATOL})")
    return 0 if same and error <= MERGED_ATOL else 1


if __name__ == "__main__":
    sys.exit(main())
