"""Property-based tests of the config space: random valid configs over every field of `SimplifiedConfig`
× every head build, run finite under random padding, save → load identically, decode the same with and without
the KV cache, treat a left-padded row as that row alone, and round-trip through JSON; random invalid values of
every field raise one ValueError at construction that names the field.

The strategies are derived from the config's dataclass fields (their annotations and `_CHOICES`), so a field added
later is drawn too: only fields whose valid values a type cannot express are listed by hand below. Derandomized;
the default profile keeps the file well under 90 s, the `slow` tests draw many more examples.
"""

import dataclasses
import json
import math
import types
import typing

import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from modeling_simplified import (
    SimplifiedConfig,
    SimplifiedForCausalLM,
    SimplifiedForMaskedLM,
    SimplifiedForSequenceClassification,
    SimplifiedModel,
)
from modeling_simplified.configuration_simplified import _CHOICES

HEADS = (SimplifiedModel, SimplifiedForCausalLM, SimplifiedForMaskedLM, SimplifiedForSequenceClassification)
VOCAB = 40


def _profile(max_examples: int) -> settings:
    return settings(
        max_examples=max_examples,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
    )


FAST, LONG = _profile(6), _profile(60)

#: Fields whose valid values a type does not say (the model shape is kept tiny; dropout off so runs are exact;
#: token ids None so random models never stop early). Every other field is drawn from its annotation.
FIXED = dict(
    vocab_size=VOCAB,
    hidden_size=16,
    max_position_embeddings=24,
    attention_dropout=0.0,
    hidden_dropout=0.0,
    embedding_dropout=0.0,
    classifier_dropout=0.0,
    pad_token_id=None,
    bos_token_id=None,
    eos_token_id=None,
    is_causal=None,
    use_cache=True,
)
HAND = dict(
    num_hidden_layers=st.integers(1, 3),
    num_attention_heads=st.sampled_from([1, 2, 4]),
    intermediate_size=st.sampled_from([None, 8, 24]),
    type_vocab_size=st.sampled_from([0, 2]),
    pad_vocab_size_multiple=st.sampled_from([1, 8]),
    norm_eps=st.sampled_from([1e-8, 1e-5]),
    initializer_range=st.sampled_from([0.02, 0.1]),
    query_init_std=st.sampled_from([None, 0.0, 0.02]),
    rope_theta=st.sampled_from([100.0, 10000.0]),
)
GAINS = st.sampled_from([0.0, 0.5, 1.0])


def _field_strategy(field: dataclasses.Field):
    """Valid values of one field, from its annotation: a choice field draws its allowed values, a bool True/False,
    a float a few gains, an int a few small counts (the config refuses the combinations it cannot build)."""
    if field.name in HAND:
        return HAND[field.name]
    annotation = field.type
    args = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    optional = [st.none()] if type(None) in args else []
    if field.name in _CHOICES:
        base = st.sampled_from(list(_CHOICES[field.name]))
    elif bool in args:
        base = st.booleans()
    elif float in args:
        base = GAINS
    elif int in args:
        base = st.integers(1, 4)
    else:
        raise AssertionError(f"no strategy for SimplifiedConfig.{field.name}: {annotation}; add one to HAND")
    return st.one_of(base, *optional)


FIELDS = [f for f in dataclasses.fields(SimplifiedConfig) if f.name in SimplifiedConfig.__annotations__]
DRAWN = [f for f in FIELDS if f.name not in FIXED]


@st.composite
def valid_configs(draw) -> SimplifiedConfig:
    """A config with a random subset of fields set to random values (the rest from the block preset); combinations
    the config refuses are discarded, which is itself the property that refused ones never reach a model."""
    kwargs = dict(FIXED)
    for field in DRAWN:
        if field.name in ("block_type", "num_hidden_layers", "num_attention_heads") or draw(st.booleans()):
            kwargs[field.name] = draw(_field_strategy(field), label=field.name)
    try:
        return SimplifiedConfig(**kwargs)
    except ValueError:
        assume(False)


def _perturbed(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Move every parameter off its init (W^Q = 0 and identity shaped attention hide most mistakes)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(0.2 * torch.randn(param.shape, generator=generator))
    return model.eval()


def _build(cls, config: SimplifiedConfig, seed: int = 0):
    torch.manual_seed(seed)
    if cls is SimplifiedForSequenceClassification:
        config = SimplifiedConfig.from_dict({**config.to_dict(), "num_labels": 3})
    return _perturbed(cls(config), seed)


def _output(model, **inputs) -> torch.Tensor:
    out = model(**inputs)
    return out.logits if hasattr(out, "logits") else out.last_hidden_state


def _positions(mask: torch.Tensor) -> torch.Tensor:
    return (mask.cumsum(-1) - 1).clamp(min=0)


def check_valid_config(cls, config: SimplifiedConfig, seed: int, tmp_path):
    # config JSON round trip: every field comes back as it was
    again = SimplifiedConfig.from_dict(json.loads(config.to_json_string()))
    assert again.to_dict() == config.to_dict()

    model = _build(cls, config, seed)
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (3, 7), generator=generator)
    mask = (torch.rand(3, 7, generator=generator) < 0.7).long()
    mask[:, -1] = 1  # each row keeps a real token
    with torch.no_grad():
        out = _output(model, input_ids=ids, attention_mask=mask, position_ids=_positions(mask))
    assert torch.isfinite(out).all(), "non-finite output under a random attention mask"

    # save → load identical
    model.save_pretrained(tmp_path / "saved")
    loaded = cls.from_pretrained(tmp_path / "saved").eval()
    with torch.no_grad():
        again = _output(loaded, input_ids=ids, attention_mask=mask, position_ids=_positions(mask))
    assert torch.equal(out, again)

    # a left-padded row gives what the row gives alone (on its real positions)
    short = ids[1, 3:]
    padded_mask = torch.tensor([[1] * 7, [0] * 3 + [1] * 4])
    batch = torch.stack([ids[0], torch.cat([torch.zeros(3, dtype=torch.long), short])])
    with torch.no_grad():
        together = _output(model, input_ids=batch, attention_mask=padded_mask, position_ids=_positions(padded_mask))
        alone = _output(model, input_ids=short[None])
        first = _output(model, input_ids=ids[:1])
    if cls is SimplifiedForSequenceClassification:
        torch.testing.assert_close(together[1], alone[0], atol=1e-5, rtol=1e-5)
    else:
        torch.testing.assert_close(together[1, 3:], alone[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(together[0], first[0], atol=1e-5, rtol=1e-5)

    # cached == uncached greedy decoding (left-padded batch)
    if cls is SimplifiedForCausalLM:
        kwargs = dict(attention_mask=padded_mask, max_new_tokens=5, do_sample=False, pad_token_id=0)
        cached = model.generate(batch, use_cache=True, output_scores=True, return_dict_in_generate=True, **kwargs)
        plain = model.generate(batch, use_cache=False, output_scores=True, return_dict_in_generate=True, **kwargs)
        torch.testing.assert_close(torch.stack(cached.scores), torch.stack(plain.scores), atol=1e-4, rtol=1e-4)
        assert torch.equal(cached.sequences, plain.sequences)


@pytest.mark.parametrize("cls", HEADS, ids=lambda c: c.__name__)
@FAST
@given(config=valid_configs(), seed=st.integers(0, 2**16))
def test_valid_configs(cls, config, seed, tmp_path_factory):
    check_valid_config(cls, config, seed, tmp_path_factory.mktemp("p"))


@pytest.mark.slow
@pytest.mark.parametrize("cls", HEADS, ids=lambda c: c.__name__)
@LONG
@given(config=valid_configs(), seed=st.integers(0, 2**16))
def test_valid_configs_long(cls, config, seed, tmp_path_factory):
    check_valid_config(cls, config, seed, tmp_path_factory.mktemp("p"))


# -- invalid values ---------------------------------------------------------------------------------------------
#: Values a type allows but a field does not (beyond the choice fields, whose invalid values are any other string).
OUT_OF_RANGE = dict(
    vocab_size=[0, -3],
    hidden_size=[0, -16],
    num_hidden_layers=[0, -1],
    num_attention_heads=[0, 3, 5],  # 16 is not divisible by 3 or 5
    intermediate_size=[0, -1],
    max_position_embeddings=[0],
    pad_vocab_size_multiple=[0],
    type_vocab_size=[-1],
    norm_eps=[-1.0, math.inf, math.nan],
    initializer_range=[-0.1, math.nan],
    query_init_std=[-1.0, math.inf],
    rope_theta=[0.0, -1.0, math.inf],
    attention_dropout=[1.0, -0.1],
    hidden_dropout=[1.5],
    embedding_dropout=[-0.5],
    classifier_dropout=[1.0],
    pad_token_id=[-1, VOCAB, VOCAB + 5],
    bos_token_id=[-1, VOCAB],
    eos_token_id=[-1, VOCAB, [1, -1], [VOCAB]],
    attn_skip_gain=[math.inf],
    mlp_skip_gain=[math.nan],
    beta_sa_init=[math.inf],
    beta_ff_init=[-math.inf],
    shaped_alpha_init=[math.nan],
    shaped_beta_init=[math.inf],
    shaped_gamma_init=[math.nan],
    reparam_alpha_init=[math.inf],
    reparam_beta_init=[math.nan],
    leaky_relu_slope=[math.inf],
)


def _wrong_type(annotation):
    """Values of a type the annotation does not allow (bools are no numbers)."""
    args = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    return [v for v in ("x", 1.5, [1.5], {"a": 1}, True) if not any(_allows(a, v) for a in args)]


def _allows(arg, value) -> bool:
    if arg is type(None):
        return value is None
    if typing.get_origin(arg) is list:
        return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    if arg is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if arg is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, arg)


@st.composite
def invalid_values(draw):
    """(field, value) with a value the field refuses: a wrong type, an unknown choice, or out of range."""
    field = draw(st.sampled_from(FIELDS), label="field")
    kinds = [st.sampled_from(_wrong_type(field.type))]
    if field.name in _CHOICES:
        kinds.append(st.text(max_size=8).filter(lambda s: s not in _CHOICES[field.name]))
    if field.name in OUT_OF_RANGE:
        kinds.append(st.sampled_from(OUT_OF_RANGE[field.name]))
    return field.name, draw(st.one_of(*kinds), label="value")


def check_invalid_value(name: str, value):
    kwargs = {**dict(vocab_size=VOCAB, hidden_size=16, num_attention_heads=2, num_hidden_layers=2), name: value}
    with pytest.raises(ValueError) as raised:
        SimplifiedConfig(**kwargs)
    message = str(raised.value)
    assert f"SimplifiedConfig.{name}" in message, message
    assert "\n" not in message
    if name in _CHOICES and isinstance(value, str):
        assert all(repr(choice) in message for choice in _CHOICES[name]), message


@settings(FAST, max_examples=150)
@given(invalid_values())
def test_invalid_values_raise_at_construction(case):
    check_invalid_value(*case)


@pytest.mark.slow
@settings(LONG, max_examples=1500)
@given(invalid_values())
def test_invalid_values_raise_at_construction_long(case):
    check_invalid_value(*case)


def test_every_field_has_a_strategy():
    """A new field gets a valid strategy from its annotation (or must be named in FIXED/HAND) and invalid values."""
    for field in DRAWN:
        _field_strategy(field)
    for field in FIELDS:
        assert _wrong_type(field.type), field.name


# -- the classes of bug random configs found, one example each ------------------------------------------------------------
@pytest.mark.parametrize("first_layer_value_mode", ["linear", "identity"])
@pytest.mark.parametrize("tie", ["all_blocks", "last_block"])
def test_reparam_tie_needs_reparam_values_in_every_block(first_layer_value_mode, tie):
    with pytest.raises(ValueError, match="first_layer_value_mode"):
        SimplifiedConfig(
            value_mode="reparam",
            projection_mode="reparam",
            reparam_tie=tie,
            reparam_init="orthogonal",
            first_layer_value_mode=first_layer_value_mode,
            vocab_size=VOCAB,
            hidden_size=16,
            num_attention_heads=2,
            num_hidden_layers=2,
        )


def test_auto_map_must_be_an_object(tmp_path):
    config = SimplifiedConfig(vocab_size=VOCAB, hidden_size=16, num_attention_heads=2, num_hidden_layers=1)
    config.save_pretrained(tmp_path)
    raw = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**raw, "auto_map": "x"}))
    with pytest.raises(ValueError, match="SimplifiedConfig.auto_map"):
        SimplifiedConfig.from_pretrained(tmp_path)
