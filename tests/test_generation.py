"""KV-cached generation is exact: cached == uncached decoding for every block type (greedy, beam, sampling, chunked
prefill, static cache), left-padded batches == each prompt alone, masked models ignore padding, learned positions
refuse sequences longer than they have positions for."""

import subprocess
import sys
import warnings

import pytest
import torch
from conftest import assert_no_warnings, perturb_, tiny_config
from transformers import DynamicCache, StaticCache

from modeling_simplified import SimplifiedForCausalLM, SimplifiedForMaskedLM
from modeling_simplified.compat_simplified import CACHE_FIELD

POSITIONS = ("sinusoidal", "rotary", "learned")
NEW_TOKENS = 20
ATOL = 1e-5
PAD = 0


def causal_lm(block_type: str, **overrides) -> SimplifiedForCausalLM:
    return perturb_(SimplifiedForCausalLM(tiny_config(block_type, pad_token_id=PAD, **overrides))).eval()


def prompt(length: int, seed: int = 0, batch: int = 1) -> torch.LongTensor:
    return torch.randint(1, 97, (batch, length), generator=torch.Generator().manual_seed(seed))


def decode_kwargs(**kw) -> dict:
    """Every step really decodes: no EOS, exactly NEW_TOKENS new tokens, per-step logits returned."""
    return dict(
        max_new_tokens=NEW_TOKENS,
        eos_token_id=None,
        pad_token_id=PAD,
        output_logits=True,
        return_dict_in_generate=True,
        **kw,
    )


def positions_from_mask(mask: torch.Tensor) -> torch.LongTensor:
    """Positions that skip left padding (what `generate` derives from the attention mask)."""
    return (mask.long().cumsum(-1) - 1).clamp(min=0)


@torch.no_grad()
def uncached_greedy(model, ids: torch.LongTensor, steps: int, mask: torch.Tensor | None = None):
    """Reference decoding: the full sequence through forward at every step, no cache."""
    mask = torch.ones_like(ids) if mask is None else mask
    logits_per_step = []
    for _ in range(steps):
        logits = model(ids, attention_mask=mask, position_ids=positions_from_mask(mask), use_cache=False).logits[:, -1]
        logits_per_step.append(logits)
        ids = torch.cat([ids, logits.argmax(-1, keepdim=True)], dim=-1)
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=-1)
    return ids, logits_per_step


def assert_logits_close(actual, expected):
    assert len(actual) == len(expected) == NEW_TOKENS
    for step, (a, e) in enumerate(zip(actual, expected)):
        torch.testing.assert_close(a, e, atol=ATOL, rtol=0, msg=lambda m, step=step: f"step {step}: {m}")


# ----------------------------------------------------------------------------------------------------------------
# cached == uncached
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("position", POSITIONS)
def test_greedy_cached_equals_uncached(block_type, position):
    model = causal_lm(block_type, position_embedding_type=position)
    ids = prompt(6, batch=2)
    expected_ids, expected_logits = uncached_greedy(model, ids, NEW_TOKENS)
    out = model.generate(ids, do_sample=False, **decode_kwargs())
    assert isinstance(out[CACHE_FIELD], DynamicCache)
    assert out[CACHE_FIELD].get_seq_length() == ids.shape[1] + NEW_TOKENS - 1
    assert torch.equal(out.sequences, expected_ids)
    assert_logits_close(out.logits, expected_logits)


def test_static_cache_equals_uncached(block_type):
    """`cache_implementation="static"` with a left-padded batch (the mask is longer than the prompt's real tokens)."""
    model = causal_lm(block_type)
    ids, mask = prompt(7, batch=2), torch.ones(2, 7, dtype=torch.long)
    ids[0, :3], mask[0, :3] = PAD, 0
    expected_ids, expected_logits = uncached_greedy(model, ids, NEW_TOKENS, mask)
    out = model.generate(ids, attention_mask=mask, do_sample=False, cache_implementation="static", **decode_kwargs())
    assert isinstance(out[CACHE_FIELD], StaticCache)
    assert torch.equal(out.sequences, expected_ids)
    assert_logits_close(out.logits, expected_logits)


def test_beam_search_cached_equals_uncached(block_type):
    model = causal_lm(block_type)
    ids = prompt(5, seed=1)
    kwargs = decode_kwargs(num_beams=3, num_return_sequences=3, do_sample=False, output_scores=True)
    cached = model.generate(ids, use_cache=True, **kwargs)
    uncached = model.generate(ids, use_cache=False, **kwargs)
    assert cached.get(CACHE_FIELD) is not None and uncached.get(CACHE_FIELD) is None
    assert cached.sequences.shape == (3, ids.shape[1] + NEW_TOKENS)
    assert torch.equal(cached.sequences, uncached.sequences)
    torch.testing.assert_close(cached.sequences_scores, uncached.sequences_scores, atol=ATOL, rtol=0)
    assert_logits_close(cached.logits, uncached.logits)


def test_sampling_cached_equals_uncached(block_type):
    model = causal_lm(block_type)
    ids = prompt(5, seed=2, batch=2)
    runs = []
    for use_cache in (True, False):
        torch.manual_seed(1234)
        runs.append(
            model.generate(ids, do_sample=True, top_k=0, temperature=1.0, use_cache=use_cache, **decode_kwargs())
        )
    cached, uncached = runs
    assert torch.equal(cached.sequences, uncached.sequences)
    assert_logits_close(cached.logits, uncached.logits)
    greedy = model.generate(ids, do_sample=False, **decode_kwargs())
    assert not torch.equal(cached.sequences, greedy.sequences)  # it really sampled


@pytest.mark.parametrize(
    ("position", "cache_cls"), [("sinusoidal", "static"), ("rotary", "dynamic"), ("learned", "static")]
)
def test_chunked_prefill(block_type, position, cache_cls):
    """The prompt in 3 chunks through forward with the cache (one row left-padded), then single-token steps: every
    chunk's logits equal the full forward's, and the continuation equals uncached decoding."""
    model = causal_lm(block_type, position_embedding_type=position)
    ids, mask = prompt(11, seed=3, batch=2), torch.ones(2, 11, dtype=torch.long)
    ids[1, :4], mask[1, :4] = PAD, 0
    positions = positions_from_mask(mask)
    steps = 8
    with torch.no_grad():
        full = model(ids, attention_mask=mask, position_ids=positions, use_cache=False).logits
        cache = (
            DynamicCache(config=model.config)
            if cache_cls == "dynamic"
            else StaticCache(config=model.config, max_cache_len=ids.shape[1] + steps)
        )
        for start, end in ((0, 3), (3, 8), (8, 11)):
            chunk = model(
                ids[:, start:end],
                attention_mask=mask[:, :end],
                position_ids=positions[:, start:end],
                cache=cache,
                use_cache=True,
            ).logits
            torch.testing.assert_close(chunk, full[:, start:end], atol=ATOL, rtol=0)
        assert int(cache.get_seq_length()) == ids.shape[1]
        expected_ids, expected_logits = uncached_greedy(model, ids, steps, mask)
        seq, next_token = ids, chunk[:, -1].argmax(-1, keepdim=True)
        torch.testing.assert_close(chunk[:, -1], expected_logits[0], atol=ATOL, rtol=0)
        for step in range(1, steps):
            seq, mask = torch.cat([seq, next_token], -1), torch.cat([mask, torch.ones_like(mask[:, :1])], -1)
            logits = model(
                next_token,
                attention_mask=mask,
                position_ids=positions_from_mask(mask)[:, -1:],
                cache=cache,
                use_cache=True,
            ).logits[:, -1]
            torch.testing.assert_close(logits, expected_logits[step], atol=ATOL, rtol=0)
            next_token = logits.argmax(-1, keepdim=True)
    assert torch.equal(torch.cat([seq, next_token], -1), expected_ids)


# ----------------------------------------------------------------------------------------------------------------
# padding
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("position", "cache"), [("sinusoidal", "dynamic"), ("rotary", "static"), ("learned", "dynamic")]
)
def test_left_padded_batch_equals_each_prompt_alone(block_type, position, cache):
    model = causal_lm(block_type, position_embedding_type=position)
    prompts = [prompt(n, seed=10 + n)[0] for n in (3, 8, 5)]
    width = max(len(p) for p in prompts)
    ids = torch.full((3, width), PAD, dtype=torch.long)
    mask = torch.zeros(3, width, dtype=torch.long)
    for row, p in enumerate(prompts):
        ids[row, width - len(p) :], mask[row, width - len(p) :] = p, 1
    kwargs = decode_kwargs(do_sample=False, cache_implementation=cache)
    batch = model.generate(ids, attention_mask=mask, **kwargs)
    for row, p in enumerate(prompts):
        alone = model.generate(p[None], **kwargs)
        assert torch.equal(batch.sequences[row, width:], alone.sequences[0, len(p) :]), f"row {row}"
        for step, (b, a) in enumerate(zip(batch.logits, alone.logits)):
            torch.testing.assert_close(
                b[row], a[0], atol=ATOL, rtol=0, msg=lambda m, row=row, step=step: f"row {row} step {step}: {m}"
            )


@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_masked_lm_padding_does_not_change_real_tokens(block_type, padding_side):
    model = perturb_(SimplifiedForMaskedLM(tiny_config(block_type, pad_token_id=PAD))).eval()
    rows = [prompt(n, seed=20 + n)[0] for n in (4, 9, 6)]
    width = max(len(r) for r in rows)
    ids = torch.full((3, width), PAD, dtype=torch.long)
    mask = torch.zeros(3, width, dtype=torch.long)
    for i, r in enumerate(rows):
        span = slice(0, len(r)) if padding_side == "right" else slice(width - len(r), width)
        ids[i, span], mask[i, span] = r, 1
    with torch.no_grad():
        batch = model(ids, attention_mask=mask, position_ids=positions_from_mask(mask)).logits
        for i, r in enumerate(rows):
            alone = model(r[None]).logits[0]
            torch.testing.assert_close(batch[i][mask[i].bool()], alone, atol=ATOL, rtol=0)
        # the padding really is masked: without the mask the real tokens' logits change (default positions: with
        # the mask's positions, whose restarts mark sequence boundaries, the pads would be packed sequences of their own)
        unmasked = model(ids).logits
    assert (unmasked[0][mask[0].bool()] - batch[0][mask[0].bool()]).abs().max() > 1e-3


# ----------------------------------------------------------------------------------------------------------------
# positions
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("position", POSITIONS)
def test_positions_follow_the_cache_offset(position):
    """One token decoded after a cached prefix equals the full forward, and differs from the same token placed at
    position 0: the cache offset really reaches the positions."""
    model = causal_lm("pre_ln", position_embedding_type=position)
    ids = prompt(9, seed=4)
    with torch.no_grad():
        full = model(ids, use_cache=False).logits[:, -1]
        cache = DynamicCache(config=model.config)
        model(ids[:, :-1], cache=cache, use_cache=True)
        step = model(ids[:, -1:], cache=cache, use_cache=True).logits[:, -1]
        cache = DynamicCache(config=model.config)
        model(ids[:, :-1], cache=cache, use_cache=True)
        at_zero = model(
            ids[:, -1:], position_ids=torch.zeros(1, 1, dtype=torch.long), cache=cache, use_cache=True
        ).logits[:, -1]
    torch.testing.assert_close(step, full, atol=ATOL, rtol=0)
    assert (at_zero - full).abs().max() > 1e-4


def test_cache_under_either_name_and_no_deprecation_warning():
    """transformers 5.24 renamed `past_key_values` to `cache` and `generate` passes the installed release's name: the
    forward takes both (the same cache, the same logits), refuses both at once, and decoding logs no deprecation.
    Where the cache is `cache`, the old name warns as native models do (transformers' `test_bc_cache_name_forward`)."""
    model = causal_lm("sas_p")
    ids = prompt(9, seed=5)
    renamed = CACHE_FIELD == "cache"
    with torch.no_grad():
        steps = []
        for name in ("cache", "past_key_values"):
            cache = DynamicCache(config=model.config)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                prefill = model(ids[:, :-1], use_cache=True, **{name: cache})
            deprecated = [w for w in caught if "`past_key_values` is deprecated" in str(w.message)]
            assert len(deprecated) == (renamed and name == "past_key_values"), [str(w.message) for w in caught]
            assert prefill[CACHE_FIELD] is cache
            steps.append(model(ids[:, -1:], use_cache=True, **{name: cache}).logits)
        torch.testing.assert_close(steps[0], steps[1], atol=0, rtol=0)
        with pytest.raises(ValueError, match=r"`past_key_values`"):
            model(ids, cache=DynamicCache(config=model.config), past_key_values=DynamicCache(config=model.config))
        with assert_no_warnings():
            out = model.generate(ids, do_sample=False, **decode_kwargs())
            model(ids, use_cache=True)
    assert out[CACHE_FIELD].get_seq_length() == ids.shape[1] + NEW_TOKENS - 1


def test_learned_positions_too_long_raise():
    model = causal_lm("sas", position_embedding_type="learned", max_position_embeddings=16)
    with torch.no_grad():
        model(prompt(16))  # exactly max_position_embeddings is fine
        with pytest.raises(ValueError, match=r"Position id 16 is out of range.*max_position_embeddings=16"):
            model(prompt(17))
        with pytest.raises(ValueError, match=r"Position id 20 is out of range"):  # given positions: their largest id
            model(prompt(4), position_ids=torch.tensor([[0, 20, 1, 2]]))
        cache = DynamicCache(config=model.config)
        model(prompt(12), cache=cache, use_cache=True)
        with pytest.raises(ValueError, match=r"Position id 17 is out of range.*max_position_embeddings=16"):
            model(prompt(6), cache=cache, use_cache=True)
    with pytest.raises(ValueError, match="max_position_embeddings=16"):
        model.generate(prompt(10), max_new_tokens=10, eos_token_id=None, pad_token_id=PAD)


def test_generate_continues_from_returned_cache():
    """A second `generate` call fed the first call's cache continues exactly as one long call."""
    model = causal_lm("sas_p")
    ids = prompt(5, seed=6)
    long = model.generate(ids, do_sample=False, max_new_tokens=12, eos_token_id=None, pad_token_id=PAD)
    first = model.generate(
        ids, do_sample=False, max_new_tokens=6, eos_token_id=None, pad_token_id=PAD, return_dict_in_generate=True
    )
    second = model.generate(
        first.sequences,
        **{CACHE_FIELD: first[CACHE_FIELD]},
        do_sample=False,
        max_new_tokens=6,
        eos_token_id=None,
        pad_token_id=PAD,
    )
    assert torch.equal(second, long)


_DIGEST_SCRIPT = """
import hashlib, sys, torch
from modeling_simplified import SimplifiedConfig, SimplifiedForCausalLM
torch.manual_seed(0)
config = SimplifiedConfig(block_type=sys.argv[1], vocab_size=512, hidden_size=256, num_hidden_layers=2,
                          num_attention_heads=4, intermediate_size=1024, max_position_embeddings=128)
model = SimplifiedForCausalLM(config).eval()
with torch.no_grad():
    for p in model.parameters():
        p.add_(torch.randn(p.shape) * 0.05)
ids = torch.randint(1, 512, (3, 16), generator=torch.Generator().manual_seed(1))
out = model.generate(ids, max_new_tokens=12, do_sample=False, eos_token_id=None, pad_token_id=0,
                     output_logits=True, return_dict_in_generate=True)
digest = hashlib.sha256(out.sequences.numpy().tobytes())
for logits in out.logits:
    digest.update(logits.numpy().tobytes())
print(digest.hexdigest())
"""


@pytest.mark.parametrize("block_type", ["pre_ln", "sas_p"])
def test_generate_is_bit_identical_across_processes(block_type):
    """No code path depends on timing: the same `generate` (tokens and every step's logits) in fresh processes gives
    the same bytes."""
    run = lambda: subprocess.run(  # noqa: E731
        [sys.executable, "-c", _DIGEST_SCRIPT, block_type], capture_output=True, text=True, check=True, timeout=300
    ).stdout.strip()
    digests = {run() for _ in range(3)}
    assert len(digests) == 1, digests
