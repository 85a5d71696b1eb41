"""Training presets (`configuration/*.json`): every preset loads, its model section builds a SimplifiedConfig,
the paper settings hold, unknown keys and bad values are rejected with a message naming them."""

import copy
import json
from pathlib import Path

import pytest

from modeling_simplified import BLOCK_TYPES, SimplifiedConfig
from modeling_simplified.training.presets import (
    PRESET_DIR,
    UsageError,
    apply_override,
    available_presets,
    expand,
    load_preset,
    parse_preset,
    switch_block_type,
)

PRESETS = available_presets()
CRAMMED_BLOCKS = ("pre_ln", "parallel", "value_skipinit", "sas", "sas_p", "simplest")


#: every preset as it expanded before presets became bases plus deltas: `{name: {"preset": Preset.to_dict(),
#: "config": SimplifiedConfig.to_dict() without the version keys}}`
EXPANSIONS = json.loads((Path(__file__).parent / "fixtures" / "preset_expansions.json").read_text())


def _raw(name: str) -> dict:
    """The full preset dict of `configuration/<name>.json` (a delta expanded onto its base)."""
    return expand(json.loads((PRESET_DIR / f"{name}.json").read_text()), name)


def test_every_preset_expands_to_what_it_was():
    """Paper text, task and model section exactly; every recipe, data and config field the fixture holds with its
    value (a field added later, with its default, is not in the fixture)."""
    assert PRESETS == sorted(EXPANSIONS)
    for name in PRESETS:
        preset = load_preset(name)
        now = json.loads(json.dumps({"preset": preset.to_dict(), "config": preset.config().to_dict()}))
        then = EXPANSIONS[name]
        for key in ("paper", "task", "model"):
            assert now["preset"][key] == then["preset"][key], (name, key)
        for section in ("training", "data"):
            assert {k: now["preset"][section].get(k) for k in then["preset"][section]} == then["preset"][section]
        assert {k: now["config"].get(k) for k in then["config"]} == then["config"], name


def test_presets_are_deltas_on_one_base_per_family():
    bases = {json.loads((PRESET_DIR / f"{name}.json").read_text())["base"] for name in PRESETS}
    assert bases == {"codeparrot", "codeparrot-tiny", "crammed-bert", "crammed-bert-tiny", "glue"}
    for name in PRESETS:
        delta = json.loads((PRESET_DIR / f"{name}.json").read_text())
        assert len(delta.get("model", {})) + len(delta.get("training", {})) <= 3 or name.startswith("glue"), name


def test_bad_deltas_name_the_base_or_placeholder():
    with pytest.raises(UsageError, match="unknown base 'nope'.*codeparrot-tiny"):
        parse_preset({"base": "nope"}, name="broken")
    with pytest.raises(UsageError, match="placeholders"):
        parse_preset({"base": "codeparrot-tiny", "paper": {"blok": "x"}}, name="broken")
    with pytest.raises(UsageError, match="'hidden_sise'"):
        parse_preset({"base": "codeparrot-tiny", "paper": {"block": "x"}, "model": {"hidden_sise": 1}}, name="b")


def test_the_promised_presets_exist():
    names = set(PRESETS)
    for block_type in BLOCK_TYPES:
        assert f"codeparrot-{block_type}" in names and f"codeparrot-tiny-{block_type}" in names
    for block_type in CRAMMED_BLOCKS:
        assert f"crammed-bert-{block_type}" in names and f"crammed-bert-tiny-{block_type}" in names
    assert {"glue-finetune", "glue-tiny"} <= names


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_validates_and_builds_its_config(name):
    preset = load_preset(name)
    config = preset.config()
    assert isinstance(config, SimplifiedConfig)
    assert config.block_type == _raw(name)["model"]["block_type"]
    assert preset.paper.strip(), "each preset says which paper setting it reproduces"
    assert set(_raw(name)) <= {"paper", "task", "model", "training", "data"}


@pytest.mark.parametrize("block_type", BLOCK_TYPES)
def test_codeparrot_presets_follow_app_d1(block_type):
    preset = load_preset(f"codeparrot-{block_type}")
    c, t, d = preset.config(), preset.training, preset.data
    assert (c.num_hidden_layers, c.hidden_size, c.num_attention_heads, c.intermediate_size) == (18, 768, 12, 3072)
    assert c.vocab_size == 50000 and c.hidden_act == "relu" and d.seq_len == 128
    assert (t.weight_decay, t.adam_beta1, t.adam_beta2, t.adam_epsilon, t.max_grad_norm) == (0.1, 0.9, 0.999, 1e-8, 1)
    assert t.lr_scheduler == "linear" and t.warmup_ratio == 0.05
    assert t.per_device_train_batch_size * t.gradient_accumulation_steps == 128 and t.max_steps == 43000
    assert t.learning_rate == (3e-4 if block_type == "value_skipinit" else 1e-3)
    if c.block_gains_trainable:
        assert c.beta_ff_init == 0.1
    assert d.dataset == "huggingface-course/codeparrot-ds-train"
    assert d.eval_dataset == "huggingface-course/codeparrot-ds-valid"


@pytest.mark.parametrize("block_type", CRAMMED_BLOCKS)
def test_crammed_bert_presets_follow_app_d2(block_type):
    preset = load_preset(f"crammed-bert-{block_type}")
    c, t, d = preset.config(), preset.training, preset.data
    assert (c.num_hidden_layers, c.hidden_size, c.num_attention_heads) == (16, 768, 12)
    assert c.hidden_act == "geglu" and c.intermediate_size == 1536 and c.norm_eps == 1e-12
    assert c.vocab_size == 32768 and c.final_norm == "layernorm" and d.seq_len == 128 and d.mlm_probability == 0.25
    assert c.norm_type == ("none" if block_type == "simplest" else "layernorm")
    assert (t.adam_beta1, t.adam_beta2, t.adam_epsilon, t.max_grad_norm, t.weight_decay) == (0.9, 0.98, 1e-12, 0.5, 0.1)
    assert t.lr_scheduler == "linear" and t.warmup_ratio == 0.75  # linear rise to the peak at 75%, then decay
    assert (t.per_device_train_batch_size, t.batch_ramp_to, t.batch_ramp_fraction) == (64, 8192, 0.6)
    assert t.learning_rate == {"sas": 3e-3, "sas_p": 3e-3, "simplest": 2e-3}.get(block_type, 1e-3)
    if c.block_gains_trainable:
        assert c.beta_ff_init == 0.05


def test_glue_finetune_preset_follows_the_paper():
    preset = load_preset("glue-finetune")
    t = preset.training
    assert preset.task == "sequence-classification" and preset.data.dataset == "nyu-mll/glue"
    assert (t.num_train_epochs, t.per_device_train_batch_size, t.learning_rate) == (5, 32, 1.5e-4)
    assert t.lr_scheduler == "cosine" and t.adam_epsilon == 1e-6
    assert preset.model["hidden_dropout"] == preset.model["classifier_dropout"] == 0.1


def test_tiny_presets_are_small_and_offline():
    for name in PRESETS:
        if "tiny" in name:
            preset = load_preset(name)
            assert preset.data.dataset == "embedded"
            assert preset.config().hidden_size <= 128 and preset.config().num_hidden_layers <= 4


@pytest.mark.parametrize(
    "section, key", [(None, "optimiser"), ("model", "hidden_sise"), ("training", "lr"), ("data", "datset")]
)
def test_unknown_keys_are_rejected_by_name(section, key):
    raw = copy.deepcopy(_raw("codeparrot-tiny-sas_p"))
    (raw if section is None else raw[section])[key] = 1
    with pytest.raises(UsageError, match=repr(key)):
        parse_preset(raw, name="broken")


@pytest.mark.parametrize(
    "section, key, value, match",
    [
        ("model", "hidden_act", "tanh", "hidden_act"),
        ("model", "num_attention_heads", 5, "divisible"),
        ("training", "learning_rate", "fast", "learning_rate"),
        ("training", "lr_scheduler", "step", "allowed values"),
        ("training", "warmup_ratio", 1.5, "warmup_ratio"),
        ("data", "seq_len", 0, "seq_len"),
    ],
)
def test_bad_values_are_rejected_with_the_field_named(section, key, value, match):
    raw = copy.deepcopy(_raw("codeparrot-tiny-sas_p"))
    raw[section][key] = value
    with pytest.raises(UsageError, match=match):
        parse_preset(raw, name="broken")


def test_overrides_reach_every_section_and_are_typed():
    preset = load_preset("codeparrot-tiny-sas_p")
    apply_override(preset, "hidden_size=64")
    apply_override(preset, "model.beta_ff_init=0.3")
    apply_override(preset, "training.learning_rate=2e-3")
    apply_override(preset, "data.max_train_samples=null")
    apply_override(preset, "data.dataset=some/dataset")
    assert preset.model["hidden_size"] == 64 and preset.model["beta_ff_init"] == 0.3
    assert preset.training.learning_rate == 2e-3 and preset.data.max_train_samples is None
    assert preset.data.dataset == "some/dataset"
    assert preset.config().hidden_size == 64
    for bad, match in [
        ("foo=1", "unknown config field 'foo'"),
        ("training.foo=1", "unknown training field"),
        ("optim.lr=1", "unknown section"),
        ("training.max_steps=ten", "max_steps"),
        ("novalue", "="),
    ]:
        with pytest.raises(UsageError, match=match):
            apply_override(preset, bad)


def test_switching_block_type_uses_the_sibling_preset_or_drops_block_fields():
    preset = switch_block_type(load_preset("codeparrot-tiny-sas_p"), "pre_ln")
    assert preset.name == "codeparrot-tiny-pre_ln"
    config = preset.config()
    assert config.block_type == "pre_ln" and config.beta_ff_init == 1.0 and not config.block_gains_trainable
    # no sibling (crammed BERT has no post_ln preset): the block-specific fields are dropped, the shape stays
    preset = switch_block_type(load_preset("crammed-bert-tiny-sas_p"), "post_ln")
    config = preset.config()
    assert config.block_type == "post_ln" and config.hidden_size == 128 and config.beta_ff_init == 1.0
    with pytest.raises(UsageError, match="allowed values"):
        switch_block_type(load_preset("codeparrot-tiny-sas_p"), "resnet")


def test_unknown_preset_names_the_available_ones():
    with pytest.raises(UsageError, match="unknown preset 'nope'.*codeparrot-tiny-sas_p"):
        load_preset("nope")


def test_a_run_validates_its_preset_once(tmp_path, monkeypatch):
    """`simplified-train`'s plan builds the model config once, after the block switch and the overrides."""
    from modeling_simplified.training import api, cli, presets

    built = []
    real = presets.build_config
    monkeypatch.setattr(
        presets, "build_config", lambda fields, where="model": built.append(where) or real(fields, where)
    )
    argv = ["--preset", "codeparrot-tiny-sas_p", "--block-type", "pre_ln", "--set", "hidden_size=64"]
    plan = cli.plan_from_args(cli.build_parser().parse_args([*argv, "--output-dir", str(tmp_path / "run")]))
    api.check_plan(plan)
    assert plan.preset.name == "codeparrot-tiny-pre_ln" and plan.preset.model["hidden_size"] == 64
    assert len(built) == 1
