"""Training presets (`configuration/<family>.json`): every preset loads, its model section builds a
SimplifiedConfig, each is its family's preset with its row applied, the paper settings hold, unknown keys and bad
values are rejected with a message naming them."""

import copy
import dataclasses
import json

import pytest

from modeling_simplified import BLOCK_TYPES, BLOCKS, SimplifiedConfig
from modeling_simplified.training import presets
from modeling_simplified.training.presets import (
    PRESET_DIR,
    DataSpec,
    TrainingRecipe,
    UsageError,
    apply_override,
    available_families,
    available_presets,
    expand,
    load_preset,
    model_fields,
    parse_preset,
    preset_delta,
    switch_block_type,
)

PRESETS = available_presets()
FAMILIES = {name: json.loads((PRESET_DIR / f"{name}.json").read_text()) for name in available_families()}
CRAMMED_BLOCKS = tuple(FAMILIES["crammed-bert"]["presets"])


def _raw(name: str) -> dict:
    """The full preset dict of a named preset (its row's delta expanded onto its family)."""
    return expand(preset_delta(name), name)


def _family_and_row(name: str) -> tuple[str, str]:
    family = max((f for f in FAMILIES if name.startswith(f"{f}-")), key=len)
    return family, name[len(family) + 1 :]


def test_presets_are_the_rows_of_one_table_per_family():
    assert set(FAMILIES) == {
        "codeparrot",
        "codeparrot-tiny",
        "codeparrot-tiny-authors",
        "codeparrot-depth",
        "crammed-bert",
        "crammed-bert-tiny",
        "glue",
    }
    names = [f"{family}-{row}" for family, table in FAMILIES.items() for row in table["presets"]]
    assert sorted(names) == PRESETS and len(set(names)) == len(names)
    assert all(
        _family_and_row(f"{family}-{row}") == (family, row) for family, t in FAMILIES.items() for row in t["presets"]
    )
    for family, table in FAMILIES.items():
        if family != "glue":  # a block table: block -> βFF, lr, the paper's note (and at most one more field)
            assert set(table["presets"]) <= set(BLOCK_TYPES), family
            for row in table["presets"].values():
                # the authors' configuration sets the fields their configs set per block (tests/test_authors_parity.py)
                most = 3 if family == "codeparrot-tiny-authors" else 1
                assert "learning_rate" in row and len(set(row) - {"paper", "beta_ff_init", "learning_rate"}) <= most


def test_row_fields_name_one_section_each():
    training, data = ({f.name for f in dataclasses.fields(cls)} for cls in (TrainingRecipe, DataSpec))
    assert not (set(model_fields()) & training or set(model_fields()) & data or training & data)


def test_causal_families_train_every_block_type_and_masked_ones_the_papers_table_1():
    """CodeParrot (and its miniature): every block type of BLOCKS; the depth miniature: Fig. 6's Pre-LN, V-SkipInit,
    SAS and SAS-P. Crammed BERT (Table 1): no Post-LN and no NormFormer, and asking for them is refused by name."""
    fig6 = [b for b in BLOCK_TYPES if b in ("pre_ln", "value_skipinit", "sas", "sas_p")]
    for family, table in FAMILIES.items():
        if table["task"] == "causal-lm":
            # the depth miniature and the authors' configuration: the blocks of their comparisons (Fig. 6; the authors'
            # baseline_comparison.sh)
            few = family in ("codeparrot-depth", "codeparrot-tiny-authors")
            assert list(table["presets"]) == (fig6 if few else list(BLOCK_TYPES)), family
        if table["task"] == "masked-lm":
            assert list(table["presets"]) == [b for b in BLOCK_TYPES if b not in ("post_ln", "normformer")], family
            for block_type in ("post_ln", "normformer"):
                with pytest.raises(UsageError, match=f"unknown preset '{family}-{block_type}'"):
                    load_preset(f"{family}-{block_type}")
    assert FAMILIES["codeparrot"]["presets"].keys() == FAMILIES["codeparrot-tiny"]["presets"].keys()
    assert FAMILIES["crammed-bert"]["presets"].keys() == FAMILIES["crammed-bert-tiny"]["presets"].keys()


@pytest.mark.parametrize("name", PRESETS)
def test_each_preset_is_its_family_plus_its_block_plus_its_row(name):
    """Model config = the family's model section, then the row's model fields (`null` drops one), then for every field
    neither sets, `BLOCKS[block].preset`; the recipe and data = the family's sections updated by the row's fields."""
    family, row_name = _family_and_row(name)
    table, row = FAMILIES[family], FAMILIES[family]["presets"][row_name]
    preset = load_preset(name)
    config = preset.config()
    model = {**table["model"], **{k: v for k, v in row.items() if k in model_fields()}}
    if row_name in BLOCKS:
        model["block_type"] = row_name
    model = {k: v for k, v in model.items() if v is not None}
    assert preset.model == model and preset.base == family and preset.task == table["task"]
    for field, value in model.items():
        assert getattr(config, field) == value, (name, field)
    for field, value in BLOCKS[config.block_type].preset.items():
        if field not in model and value is not None:
            assert getattr(config, field) == value, (name, field)
    for section, fields in (("training", preset.training), ("data", preset.data)):
        expected = {**table.get(section, {}), **{k: v for k, v in row.items() if hasattr(fields, k)}}
        assert {k: getattr(fields, k) for k in expected} == expected, (name, section)
    paper = row["paper"]
    assert preset.paper == (table["paper"].format(**paper) if isinstance(paper, dict) else paper)


def test_a_row_naming_no_field_is_refused_by_name(tmp_path, monkeypatch):
    family = {**FAMILIES["codeparrot-tiny"], "presets": {"sas": {"learning_rat": 1e-3, "paper": {"block": "SAS"}}}}
    (tmp_path / "mini.json").write_text(json.dumps(family))
    monkeypatch.setattr(presets, "PRESET_DIR", tmp_path)
    assert available_presets() == ["mini-sas"]
    with pytest.raises(UsageError, match="unknown field 'learning_rat' in the mini table"):
        load_preset("mini-sas")


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


def test_the_model_fields_read_from_the_config_source_are_the_config_classes():
    """`model_fields()` parses configuration_simplified.py instead of importing it (no transformers for the CLI's
    quick answers); it must name exactly the class's annotated fields, in order."""
    from modeling_simplified import SimplifiedConfig

    assert model_fields() == tuple(SimplifiedConfig.__annotations__)
