"""Write the reference folders for `make test-compat` (run with the project's own venv, the newest transformers).

For every block type, a small perturbed `SimplifiedForCausalLM` and `SimplifiedForMaskedLM` is exported with
`export_model` (exactly the Hub folder) next to the outputs this process computes: logits on a padded batch and the
greedy, cached continuation. `check_folders.py` loads the folders under another transformers and compares.

Usage: python tests/compat/export_references.py OUT_DIR
"""

import json
import sys
from pathlib import Path

import torch

from modeling_simplified import BLOCK_TYPES, SimplifiedConfig, SimplifiedForCausalLM, SimplifiedForMaskedLM
from modeling_simplified.hub_cards.export import export_model

TINY = dict(
    vocab_size=97, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
    max_position_embeddings=64,
)  # fmt: skip
HEADS = {"AutoModelForCausalLM": SimplifiedForCausalLM, "AutoModelForMaskedLM": SimplifiedForMaskedLM}


@torch.no_grad()
def main(out: Path) -> None:
    torch.set_num_threads(1)
    out.mkdir(parents=True, exist_ok=True)
    manifest = []
    for auto, cls in HEADS.items():
        for block_type in BLOCK_TYPES:
            seed = len(manifest)
            torch.manual_seed(seed)
            model = cls(SimplifiedConfig(block_type=block_type, **TINY)).eval()
            gen = torch.Generator().manual_seed(seed)
            for p in model.parameters():  # away from the degenerate init (W^Q = 0, identity attention)
                p.add_(torch.randn(p.shape, generator=gen) * 0.05)
            ids = torch.randint(5, TINY["vocab_size"], (2, 9), generator=gen)
            mask = torch.ones_like(ids)
            mask[1, -3:] = 0  # right padding in the second row
            ref = {"input_ids": ids, "attention_mask": mask, "logits": model(input_ids=ids, attention_mask=mask).logits}
            if cls is SimplifiedForCausalLM:
                ref["generated"] = model.generate(
                    ids[:1], max_new_tokens=5, do_sample=False, eos_token_id=None, pad_token_id=0
                ).tolist()
            name = f"{cls.__name__}-{block_type}"
            export_model(model, out / name)
            torch.save(ref, out / f"{name}.pt")
            manifest.append({"name": name, "dir": name, "auto": auto, "reference": f"{name}.pt"})
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    print(f"wrote {len(manifest)} reference folders to {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
