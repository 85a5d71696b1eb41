"""Placeholder main job: build a tiny sas_p model, save it Hub-ready, reload it with trust_remote_code, generate."""

import tempfile

import torch
from transformers import AutoModelForCausalLM

from modeling_simplified import SimplifiedConfig, SimplifiedForCausalLM


def main():
    torch.manual_seed(0)
    config = SimplifiedConfig(block_type="sas_p", vocab_size=256, hidden_size=64, num_hidden_layers=4,
                              num_attention_heads=4)
    model = SimplifiedForCausalLM(config)
    with tempfile.TemporaryDirectory() as out:
        model.save_pretrained(out)
        reloaded = AutoModelForCausalLM.from_pretrained(out, trust_remote_code=True)
        ids = torch.tensor([list(b"def main(")])
        generated = reloaded.generate(ids, max_new_tokens=16, do_sample=False, eos_token_id=None, pad_token_id=0)
        print(bytes(generated[0].tolist()).decode("latin-1"))


if __name__ == "__main__":
    main()
