"""transformers pipelines on our models with locally trained tokenizers: text-generation (causal, byte-level BPE)
and fill-mask (masked, WordPiece). The pipelines' answers equal what the model itself computes."""

import copy

import pytest
import torch
from conftest import perturb_, tiny_config
from transformers import pipeline

from modeling_simplified import SimplifiedForCausalLM, SimplifiedForMaskedLM

PROMPTS = ["def load(path):\n    with open(path) as f:", "import json", "class Encoder:"]


@pytest.fixture
def bpe(bpe_tokenizer):
    """A private copy: the text-generation pipeline switches its tokenizer to left padding."""
    return copy.deepcopy(bpe_tokenizer)


@pytest.mark.parametrize("block_type", ["sas", "pre_ln"])
def test_text_generation_pipeline(block_type, bpe):
    config = tiny_config(
        block_type,
        vocab_size=len(bpe),
        eos_token_id=bpe.eos_token_id,
        pad_token_id=bpe.pad_token_id,
        bos_token_id=bpe.bos_token_id,
    )
    model = perturb_(SimplifiedForCausalLM(config)).eval()
    generator = pipeline("text-generation", model=model, tokenizer=bpe)
    kwargs = dict(max_new_tokens=8, min_new_tokens=8, do_sample=False)
    batched = generator(PROMPTS, batch_size=3, return_full_text=False, **kwargs)  # left-padded batch
    assert bpe.padding_side == "left"
    for text, result in zip(PROMPTS, batched, strict=True):
        ids = bpe(text, return_tensors="pt").input_ids
        new_tokens = model.generate(ids, attention_mask=torch.ones_like(ids), pad_token_id=bpe.pad_token_id, **kwargs)[
            0, ids.shape[1] :
        ]
        assert new_tokens.shape == (8,)
        assert result[0]["generated_text"] == bpe.decode(new_tokens)
    full = generator(PROMPTS[0], **kwargs)[0]["generated_text"]
    assert full == PROMPTS[0] + batched[0][0]["generated_text"]


@pytest.mark.parametrize("block_type", ["sas_p", "post_ln"])
def test_fill_mask_pipeline(block_type, wordpiece_tokenizer):
    tok = wordpiece_tokenizer
    model = perturb_(
        SimplifiedForMaskedLM(tiny_config(block_type, vocab_size=len(tok), pad_token_id=tok.pad_token_id))
    ).eval()
    fill = pipeline("fill-mask", model=model, tokenizer=tok)
    texts = [f"the {tok.mask_token} of the file", f"return {tok.mask_token} value"]
    batched = fill(texts, top_k=3, batch_size=2)  # padded batch
    for text, answers in zip(texts, batched, strict=True):
        enc = tok(text, return_tensors="pt")
        with torch.no_grad():
            logits = model(**enc).logits[0, (enc.input_ids[0] == tok.mask_token_id).nonzero().item()]
        top = logits.softmax(-1).topk(3)
        assert [a["token"] for a in answers] == top.indices.tolist()
        torch.testing.assert_close(torch.tensor([a["score"] for a in answers]), top.values, atol=1e-6, rtol=0)
        assert answers[0]["sequence"] == tok.decode(
            enc.input_ids[0].masked_fill(enc.input_ids[0] == tok.mask_token_id, top.indices[0]),
            skip_special_tokens=True,
        )
