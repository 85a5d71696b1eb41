"""Grouped-query attention (`num_key_value_heads`): a smaller KV cache, exact cached decoding, exact Llama round
trips, and a config refusal where the block has no W^V."""

import pytest
import torch
from conftest import perturb_, tiny_config
from transformers import LlamaConfig, LlamaForCausalLM

from modeling_simplified import SimplifiedForCausalLM
from modeling_simplified.compat_simplified import CACHE_FIELD
from modeling_simplified.conversion import llama_to_simplified, simplified_to_llama

LEARNED_VALUES = ("pre_ln", "post_ln", "parallel", "normformer", "value_skipinit")


@pytest.mark.parametrize("block_type", LEARNED_VALUES)
@pytest.mark.parametrize("attn_implementation", ["sdpa", "eager"])
def test_gqa_cache_is_smaller_and_decoding_exact(block_type, attn_implementation):
    config = tiny_config(block_type, num_key_value_heads=2, attn_implementation=attn_implementation)
    model = perturb_(SimplifiedForCausalLM(config)).eval()
    ids = torch.randint(0, config.vocab_size, (2, 5), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        cache = model(ids, use_cache=True)[CACHE_FIELD]
        assert tuple(cache.layers[0].keys.shape) == (2, 2, 5, config.head_dim)
        assert tuple(cache.layers[0].values.shape) == (2, 2, 5, config.head_dim)
        kwargs = dict(max_new_tokens=6, do_sample=False, eos_token_id=None)
        cached = model.generate(ids, use_cache=True, **kwargs)
        uncached = model.generate(ids, use_cache=False, **kwargs)
        assert torch.equal(cached, uncached)
        # each decoding step's logits equal the full forward's at that position
        full = model(cached).logits[:, -1]
        past = model(cached[:, :-1], use_cache=True)[CACHE_FIELD]
        step = model(cached[:, -1:], cache=past).logits[:, -1]
        assert torch.allclose(full, step, atol=1e-5, rtol=0)


def test_gqa_matches_repeated_heads():
    """A GQA model equals the plain multi-head model whose K/V heads are the repeated GQA heads (what Llama computes)."""
    gqa = perturb_(SimplifiedForCausalLM(tiny_config("pre_ln", num_key_value_heads=2))).eval()
    mha = SimplifiedForCausalLM(tiny_config("pre_ln")).eval()
    d, hd, state = gqa.config.hidden_size, gqa.config.head_dim, dict(gqa.state_dict())
    for key in [k for k in state if k.endswith("qkv.proj.weight")]:
        q, k, v = state[key].split([d, 2 * hd, 2 * hd])
        state[key] = torch.cat([q, *(m.view(2, hd, d).repeat_interleave(2, 0).reshape(d, d) for m in (k, v))])
    mha.load_state_dict(state)
    ids = torch.randint(0, 97, (2, 7), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.allclose(gqa(ids).logits, mha(ids).logits, atol=1e-5, rtol=0)


@pytest.mark.parametrize("block_type", ["sas", "sas_p", "simplest"])
def test_gqa_refused_without_learned_values(block_type):
    with pytest.raises(ValueError, match=r"num_key_value_heads=2 .*value_mode"):
        tiny_config(block_type, num_key_value_heads=2)
    with pytest.raises(ValueError, match=r"num_key_value_heads=2 .*value_mode"):
        tiny_config("pre_ln", value_mode="reparam", num_key_value_heads=2)


@pytest.mark.parametrize("value", [3, 0, 8])
def test_gqa_head_count_must_divide(value):
    with pytest.raises(ValueError, match="num_key_value_heads"):
        tiny_config("pre_ln", num_key_value_heads=value)


def test_gqa_default_is_multi_head():
    assert tiny_config("sas").num_key_value_heads == 4
    assert tiny_config("pre_ln", num_key_value_heads=None).num_key_value_heads == 4


@pytest.mark.parametrize("tied,bias", [(True, False), (False, True)])
def test_gqa_llama_round_trip(tied, bias):
    """SmolLM2's shape in miniature: 9 query heads, 3 key/value heads."""
    ref = LlamaForCausalLM(
        LlamaConfig(
            num_hidden_layers=2,
            hidden_size=36,
            num_attention_heads=9,
            num_key_value_heads=3,
            intermediate_size=40,
            vocab_size=61,
            max_position_embeddings=32,
            tie_word_embeddings=tied,
            attention_bias=bias,
            mlp_bias=bias,
        )
    )
    ref = perturb_(ref).eval()
    ours = llama_to_simplified(ref)
    assert ours.config.num_key_value_heads == 3 and ours.config.num_attention_heads == 9
    ids = torch.randint(0, 61, (2, 10), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.allclose(ours(ids).logits, ref(ids).logits, atol=1e-5, rtol=0)
        kwargs = dict(max_new_tokens=8, do_sample=False, eos_token_id=None, pad_token_id=0)
        cached = ours.generate(ids, use_cache=True, **kwargs)
        assert torch.equal(cached, ours.generate(ids, use_cache=False, **kwargs))
        assert torch.equal(cached, ref.generate(ids, **kwargs))
        assert ours(ids, use_cache=True)[CACHE_FIELD].layers[0].keys.shape[1] == 3
        back = simplified_to_llama(ours)
    assert back.state_dict().keys() == ref.state_dict().keys()
    for key, value in ref.state_dict().items():
        assert torch.equal(back.state_dict()[key], value), key
    assert back.config.num_key_value_heads == 3
