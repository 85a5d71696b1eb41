"""What generic transformers code does with a model of this family, end to end: the keyword arguments its callers
pass to any head, PEFT LoRA fine-tuning (train, save and reload the adapter, merge; in process, and
examples/lora.py run as a user runs it) and `torch.export`."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import safetensors.torch
import torch
from conftest import perturb_, tiny_config

from modeling_simplified import SimplifiedForCausalLM, SimplifiedForMaskedLM, SimplifiedForSequenceClassification

ROOT = Path(__file__).resolve().parents[1]
HEADS = [SimplifiedForCausalLM, SimplifiedForMaskedLM, SimplifiedForSequenceClassification]
#: what transformers' generic callers (pipelines, the Trainer's evaluation, PEFT, benchmarks) pass to any model
GENERIC_KWARGS = dict(use_cache=False, output_attentions=False, output_hidden_states=True, return_dict=True)


def _ids(config, batch=2, length=12, seed=0):
    return torch.randint(0, config.vocab_size, (batch, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("cls", HEADS, ids=lambda c: c.__name__)
def test_every_head_accepts_the_keyword_arguments_generic_callers_pass(cls):
    """`SimplifiedForMaskedLM(input_ids=..., use_cache=False)` raised "got multiple values for keyword argument
    'use_cache'" (BertForMaskedLM accepts it); the output does not depend on these flags."""
    config = tiny_config("sas_p", num_labels=3)
    model = perturb_(cls(config)).eval()
    ids = _ids(config)
    with torch.no_grad():
        plain = model(input_ids=ids)
        generic = model(input_ids=ids, **GENERIC_KWARGS)
        labelled = model(
            input_ids=ids, labels=torch.zeros(2, dtype=torch.long) if cls is HEADS[2] else ids, **GENERIC_KWARGS
        )
    torch.testing.assert_close(generic.logits, plain.logits, rtol=0, atol=0)
    assert len(generic.hidden_states) == config.num_hidden_layers + 1
    assert torch.isfinite(labelled.loss)


# -- PEFT LoRA ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("block_type", ["pre_ln", "sas", "sas_p"])
def test_peft_lora_all_linear_trains_reloads_exactly_and_merges(block_type, tmp_path):
    """LoRA on every linear layer (PEFT's "all-linear": the LM head excluded) trains a tiny model on a fixed batch
    with the base weights frozen; the saved adapter on a reloaded base gives the trained model's logits exactly, and
    `merge_and_unload` gives them within 1e-5."""
    import peft  # a test extra (pyproject), so CI runs this

    config = tiny_config(block_type)
    base = perturb_(SimplifiedForCausalLM(config))
    base.save_pretrained(tmp_path / "base")
    frozen = {k: v.clone() for k, v in base.state_dict().items()}
    lora = peft.LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", lora_dropout=0.0)
    model = peft.get_peft_model(base, lora)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    assert not any("lm_head" in n for n in trainable)

    ids = _ids(config, batch=4, length=16)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    model.train()
    losses = []
    for _ in range(12):
        loss = model(input_ids=ids, labels=ids).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 0.1, losses
    for name, value in model.get_base_model().state_dict().items():
        if "lora_" not in name:
            key = name.replace(".base_layer.", ".")
            assert torch.equal(value, frozen[key]), name

    model.eval()
    with torch.no_grad():
        trained = model(input_ids=ids).logits
    model.save_pretrained(tmp_path / "adapter")
    reloaded = peft.PeftModel.from_pretrained(
        SimplifiedForCausalLM.from_pretrained(tmp_path / "base"), tmp_path / "adapter"
    ).eval()
    with torch.no_grad():
        torch.testing.assert_close(reloaded(input_ids=ids).logits, trained, rtol=0, atol=0)
        merged = reloaded.merge_and_unload()
        assert type(merged) is SimplifiedForCausalLM
        assert not any("lora_" in n for n, _ in merged.named_parameters())
        torch.testing.assert_close(merged(input_ids=ids).logits, trained, rtol=0, atol=1e-5)


@pytest.mark.slow  # a fresh interpreter, 10 Trainer steps and three loads: about 25 s on 2 cores
def test_the_lora_example_fine_tunes_an_export_saves_reloads_and_merges(tmp_path, bpe_tokenizer):
    """`python examples/lora.py EXPORT --output-dir OUT` (docs/fine_tuning.md), as a user runs it, on a folder of
    `simplified-export` loaded with `trust_remote_code=True`: the loss on its text goes down, the adapter is saved
    (LoRA weights only) and reloaded onto the base with identical logits, and the merged model is a full folder with
    its code that loads without peft and gives the adapter's logits within 1e-5."""
    from modeling_simplified.hub_cards.export import export_model

    model = perturb_(SimplifiedForCausalLM(tiny_config("sas_p", vocab_size=len(bpe_tokenizer))))
    export_model(model, tmp_path / "export", tokenizer=bpe_tokenizer)
    out = tmp_path / "lora"
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "lora.py"), str(tmp_path / "export"), "--output-dir", str(out)]
        + ["--steps", "10", "--seq-len", "32"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # no library warning (PEFT's hidden label names, ...), and no empty Trainer folder left behind
    assert not re.search(r"warn", done.stdout + done.stderr, re.IGNORECASE), done.stdout[-3000:] + done.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["adapter", "merged"]
    before, after = map(float, re.search(r"loss on the text: (\S+) before, (\S+) after 10 steps", done.stdout).groups())
    assert after < before, done.stdout
    assert "reloaded onto the base: identical logits: True" in done.stdout
    error = float(re.search(r"max \|merged - adapter\| logit: (\S+) \(atol 1e-05\)", done.stdout).group(1))
    assert error <= 1e-5
    adapter = safetensors.torch.load_file(out / "adapter" / "adapter_model.safetensors")
    assert adapter and all("lora_" in name for name in adapter)
    merged = json.loads((out / "merged" / "config.json").read_text())
    assert merged["auto_map"]["AutoModelForCausalLM"] == "modeling_simplified.SimplifiedForCausalLM"
    assert (out / "merged" / "modeling_simplified.py").is_file() and (out / "merged" / "tokenizer.json").is_file()


# -- torch.export ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [SimplifiedForCausalLM, SimplifiedForMaskedLM], ids=lambda c: c.__name__)
@pytest.mark.parametrize("block_type", ["pre_ln", "sas", "sas_p"])
def test_torch_export_gives_the_eager_logits(cls, block_type):
    """`torch.export.export` of the causal and masked LM (no cache) with a dynamic batch and sequence length gives
    eager mode's logits within 1e-5 at other batch sizes and lengths."""
    config = tiny_config(block_type)
    model = perturb_(cls(config)).eval()
    kwargs = {"use_cache": False} if cls is SimplifiedForCausalLM else {}
    dims = {"input_ids": {0: torch.export.Dim("batch", min=1, max=8), 1: torch.export.Dim("length", min=2, max=48)}}
    with torch.no_grad():
        exported = torch.export.export(
            model,
            args=(),
            kwargs={"input_ids": _ids(config), **kwargs},
            dynamic_shapes={**dims, **dict.fromkeys(kwargs)},
        )
        for batch, length in ((1, 5), (3, 33), (2, 48)):
            other = torch.randint(
                1, config.vocab_size, (batch, length), generator=torch.Generator().manual_seed(length)
            )
            eager = model(input_ids=other, **kwargs).logits
            got = exported.module()(input_ids=other, **kwargs).logits
            torch.testing.assert_close(got, eager, rtol=0, atol=1e-5)
