"""Parameter counts at the papers' scales, built on the meta device (no memory, no init cost)."""

import pytest
import torch

from modeling_simplified import SimplifiedConfig, SimplifiedForCausalLM, SimplifiedForMaskedLM

#: He & Hofmann §4.2: 18 blocks, d = 768, 12 heads, MLP 3072, GPT-2's 50K vocabulary.
CODEPARROT = dict(
    num_hidden_layers=18, hidden_size=768, num_attention_heads=12, intermediate_size=3072, vocab_size=50257
)
#: Crammed BERT (App. D.2): 16 blocks, GLU with GELU whose 3072 hidden units are halved by the gate, 32768 WordPiece.
CRAMMED_BERT = dict(
    num_hidden_layers=16,
    hidden_size=768,
    num_attention_heads=12,
    hidden_act="geglu",
    intermediate_size=1536,
    vocab_size=32768,
    norm_type="layernorm",
    norm_eps=1e-12,
    beta_ff_init=0.05,
    position_embedding_type="sinusoidal",
)  # cramming: parameter-free positions
#: NormFormer Table 2: GPT-3 small, 12 layers, d = 768, learned positions over 2048 tokens.
GPT3_SMALL = dict(
    num_hidden_layers=12,
    hidden_size=768,
    num_attention_heads=12,
    vocab_size=50257,
    position_embedding_type="learned",
    max_position_embeddings=2048,
    norm_type="layernorm",
)


def count(cls, **kwargs) -> int:
    with torch.device("meta"):
        model = cls(SimplifiedConfig(**kwargs))
    assert all(p.device.type == "meta" for p in model.parameters())
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("block_type,paper", [("pre_ln", 167e6), ("sas", 146e6), ("sas_p", 146e6)])
def test_codeparrot_scale(block_type, paper):
    assert count(SimplifiedForCausalLM, block_type=block_type, **CODEPARROT) == pytest.approx(paper, rel=0.01)


@pytest.mark.parametrize("block_type,paper", [("pre_ln", 120e6), ("sas", 101e6), ("sas_p", 101e6)])
def test_crammed_bert_scale(block_type, paper):
    assert count(SimplifiedForMaskedLM, block_type=block_type, **CRAMMED_BERT) == pytest.approx(paper, rel=0.02)


def test_normformer_adds_about_a_tenth_of_a_million():
    pre_ln = count(SimplifiedForCausalLM, block_type="pre_ln", **GPT3_SMALL)
    normformer = count(SimplifiedForCausalLM, block_type="normformer", **GPT3_SMALL)
    assert 0.05e6 <= normformer - pre_ln <= 0.15e6
    # ResScale λ is optional: one vector of d per layer on top
    with_res_scale = count(SimplifiedForCausalLM, block_type="normformer", residual_scale=True, **GPT3_SMALL)
    assert with_res_scale - normformer == GPT3_SMALL["num_hidden_layers"] * GPT3_SMALL["hidden_size"]


@pytest.mark.parametrize("block_type", ["sas", "sas_p"])
def test_identity_values_and_projections_cost_nothing(block_type):
    """SAS removes W^V and W^P (2d² per block), keeps layer 1's eq. 6 ΔW (d²) with αV, βV, and adds per layer the
    shaped gains α, β, γ (one per head) and the trainable βSA, βFF."""
    shape = dict(CODEPARROT, num_hidden_layers=4)
    layers, d, heads = shape["num_hidden_layers"], shape["hidden_size"], shape["num_attention_heads"]
    reference = "pre_ln" if block_type == "sas" else "parallel"
    saved = count(SimplifiedForCausalLM, block_type=reference, **shape) - count(
        SimplifiedForCausalLM, block_type=block_type, **shape
    )
    assert saved == layers * 2 * d * d - (d * d + 2) - layers * (3 * heads + 2)


@pytest.mark.parametrize(
    "preset,millions", [("codeparrot-pre_ln", 165.83), ("codeparrot-sas", 145.19), ("codeparrot-normformer", 166.00)]
)
def test_paper_scale_presets_build_the_counts_the_docs_state(preset, millions):
    """The paper-scale presets themselves (vocab 50000, sinusoidal positions, App. D.1), not the config above: the
    counts the README's block-type section gives for them."""
    from modeling_simplified.training.presets import load_preset, validate

    config = validate(load_preset(preset))
    with torch.device("meta"):
        model = SimplifiedForCausalLM(config)
    assert round(sum(p.numel() for p in model.parameters()) / 1e6, 2) == millions
