"""SimplifiedConfig: block-type presets, explicit overrides, serialisation, and validation of bad input."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import tiny_config

from modeling_simplified import BLOCK_PRESETS, BLOCK_TYPES, BLOCKS, SimplifiedConfig
from modeling_simplified.configuration_simplified import _GENERIC_KEYS
from modeling_simplified.fields_simplified import ACTIVATIONS

# (kwargs, field the message must name). Every row must raise exactly ValueError.
BAD_CONFIGS = [
    (dict(block_type="sasp"), "block_type"),
    (dict(block_type=None), "block_type"),
    (dict(block_type=3), "block_type"),
    (dict(hidden_size=30, num_attention_heads=4), "hidden_size"),
    (dict(block_type="sas", hidden_size=36, num_attention_heads=8), "num_attention_heads"),
    (dict(block_type="post_ln", norm_type="none"), "norm_type"),
    (dict(block_type="post_ln", parallel_block=True), "norm_position"),
    (dict(hidden_size="768"), "hidden_size"),
    (dict(num_hidden_layers=2.5), "num_hidden_layers"),
    (dict(tie_word_embeddings="yes"), "tie_word_embeddings"),
    (dict(shaped_gains_per_head=1), "shaped_gains_per_head"),
    (dict(eos_token_id="</s>"), "eos_token_id"),
    (dict(eos_token_id=[1, "a"]), "eos_token_id"),
    (dict(vocab_size=-1), "vocab_size"),
    (dict(hidden_size=0), "hidden_size"),
    (dict(num_attention_heads=0), "num_attention_heads"),
    (dict(num_hidden_layers=-2), "num_hidden_layers"),
    (dict(intermediate_size=-5), "intermediate_size"),
    (dict(max_position_embeddings=0), "max_position_embeddings"),
    (dict(pad_vocab_size_multiple=0), "pad_vocab_size_multiple"),
    (dict(hidden_act="swish"), "hidden_act"),
    (dict(norm_type="batchnorm"), "norm_type"),
    (dict(embedding_norm="ln"), "embedding_norm"),
    (dict(final_norm=1), "final_norm"),
    (dict(norm_position="sandwich"), "norm_position"),
    (dict(position_embedding_type="alibi"), "position_embedding_type"),
    (dict(attention_type="linear"), "attention_type"),
    (dict(value_mode="none"), "value_mode"),
    (dict(first_layer_value_mode="foo"), "first_layer_value_mode"),
    (dict(value_projection_init="identity"), "value_projection_init"),
    (dict(init_scheme="xavier"), "init_scheme"),
    (dict(head_scale="yes"), "head_scale"),
    (dict(reparam_init="eye"), "reparam_init"),
    (dict(reparam_tie="all_blocks"), "reparam_tie"),  # identity W_init needs no tie
    (dict(value_mode="reparam", projection_mode="reparam", reparam_tie="last_block"), "reparam_init"),
    (dict(reparam_init="orthogonal", reparam_tie="all_blocks"), "reparam_tie"),  # values/projections are linear
    (dict(block_type="sas", reparam_init="orthogonal", reparam_tie="last_block"), "reparam_tie"),
    (dict(attention_dropout=1.0), "attention_dropout"),
    (dict(hidden_dropout=-0.1), "hidden_dropout"),
    (dict(classifier_dropout=2.0), "classifier_dropout"),
    (dict(embedding_dropout=float("nan")), "embedding_dropout"),
    (dict(norm_eps=-1.0), "norm_eps"),
    (dict(norm_eps=float("nan")), "norm_eps"),
    (dict(initializer_range=-0.02), "initializer_range"),
    (dict(query_init_std=-1.0), "query_init_std"),
    (dict(rope_theta=0.0), "rope_theta"),
    (dict(beta_ff_init=float("inf")), "beta_ff_init"),
    (dict(leaky_relu_slope=float("nan")), "leaky_relu_slope"),
    (dict(block_type="sas", head_scale="after_proj"), "head_scale"),
    (dict(block_type="sas_p", attn_skip_gain=1.0), "attn_skip_gain"),
    (dict(block_type="sas_p", residual_scale=True), "residual_scale"),
    (dict(block_type="normformer", norm_type="none"), "attn_branch_norm"),
    (dict(block_type="pre_ln", mlp_act_norm=True, norm_type="none"), "mlp_act_norm"),
    (dict(position_embedding_type="rotary", hidden_size=36, num_attention_heads=4), "position_embedding_type"),
    (
        dict(hidden_size=33, num_attention_heads=3, position_embedding_type="sinusoidal"),
        "position_embedding_type",
    ),  # sinusoidal needs an even width
    (dict(vocab_size=100, pad_token_id=100), "pad_token_id"),
    (dict(pad_token_id=-3), "pad_token_id"),
    (dict(use_cache="no"), "use_cache"),
    (dict(is_causal="yes"), "is_causal"),
    (dict(bos_token_id=True), "bos_token_id"),
    (dict(type_vocab_size=-1), "type_vocab_size"),
    (dict(type_vocab_size=2.0), "type_vocab_size"),
    (dict(rmsnorm_eps_position="root"), "rmsnorm_eps_position"),
    (dict(qk_norm="layernorm"), "qk_norm"),
    (dict(first_layer_norm="batchnorm"), "first_layer_norm"),
    (dict(block_type="post_ln", first_layer_norm="rmsnorm"), "first_layer_norm"),
    (dict(block_type="pre_ln", first_layer_norm="none"), "first_layer_norm"),
    (dict(skip_gains_trainable="yes"), "skip_gains_trainable"),
]


@pytest.mark.parametrize("kwargs,field", BAD_CONFIGS, ids=[f"{f}-{i}" for i, (_, f) in enumerate(BAD_CONFIGS)])
def test_bad_config_raises_value_error_naming_field(kwargs, field):
    with pytest.raises(Exception) as info:
        SimplifiedConfig(**kwargs)
    assert type(info.value) is ValueError, f"{type(info.value).__name__}: {info.value}"
    assert field in str(info.value)


def test_bad_choice_lists_allowed_values():
    with pytest.raises(ValueError) as info:
        SimplifiedConfig(block_type="sasp")
    message = str(info.value)
    assert "'sasp'" in message
    assert all(f"'{name}'" in message for name in BLOCK_TYPES)
    with pytest.raises(ValueError) as info:
        SimplifiedConfig(hidden_act="swish")
    assert all(f"'{name}'" in str(info.value) for name in ACTIVATIONS)


def test_bad_table_is_large_enough():
    assert len(BAD_CONFIGS) >= 20
    assert len({f for _, f in BAD_CONFIGS}) >= 20


@pytest.mark.parametrize("block_type", BLOCK_TYPES)
def test_preset_fills_every_field_it_implies(block_type):
    config = SimplifiedConfig(block_type=block_type)
    preset = BLOCK_PRESETS[block_type]
    for name, value in preset.items():
        if value is None:  # derived fields
            continue
        assert getattr(config, name) == value, name
    assert config.final_norm == (preset["final_norm"] or config.norm_type)
    assert config.first_layer_norm == (preset["first_layer_norm"] or config.norm_type)
    assert config.first_layer_value_mode == (preset["first_layer_value_mode"] or config.value_mode)
    expected_query_std = preset["query_init_std"] if preset["query_init_std"] is not None else 0.02
    assert config.query_init_std == expected_query_std
    assert config.intermediate_size == 4 * config.hidden_size
    assert all(getattr(config, name) is not None for name in preset)


def test_presets_match_block_type_table():
    """Spot checks of the block-type table (docs/architecture.md; paper §4, App. D) against the expanded configs."""
    sas, sas_p, simplest = (SimplifiedConfig(block_type=b) for b in ("sas", "sas_p", "simplest"))
    assert (sas.attn_skip_gain, sas.mlp_skip_gain, sas.parallel_block) == (0.0, 1.0, False)
    assert (sas.value_mode, sas.projection_mode, sas.first_layer_value_mode) == ("identity", "identity", "reparam")
    assert (sas.attention_type, sas.query_init_std, sas.beta_ff_init) == ("shaped", 0.0, 0.1)
    assert (sas_p.parallel_block, sas_p.attn_skip_gain, sas_p.mlp_skip_gain) == (True, 0.0, 0.0)
    assert (simplest.norm_type, simplest.embedding_norm) == ("none", "layernorm")
    vs = SimplifiedConfig(block_type="value_skipinit")
    assert (vs.shaped_beta_init, vs.centre_attention, vs.value_projection_init) == (0.0, False, "orthogonal")
    nf = SimplifiedConfig(block_type="normformer")
    assert (nf.head_scale, nf.attn_branch_norm, nf.mlp_act_norm, nf.norm_type) == (
        "before_proj",
        True,
        True,
        "layernorm",
    )
    post = SimplifiedConfig(block_type="post_ln")
    assert (post.norm_position, post.final_norm) == ("post", "none")
    pre = SimplifiedConfig(block_type="pre_ln")
    assert (pre.attention_type, pre.value_mode, pre.attn_skip_gain, pre.block_gains_trainable) == (
        "softmax",
        "linear",
        1.0,
        False,
    )


def _block_table(page: str) -> dict[str, dict[str, str]]:
    """The rows of the page's block-type table (the one whose first header is `block_type`): block type -> cells."""
    lines = (Path(__file__).resolve().parents[1] / page).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| `block_type` |"))
    header = [cell.strip() for cell in lines[start].strip("|").split("|")]
    rows = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[cells[0].strip("`")] = dict(zip(header, cells))
    return rows


@pytest.mark.parametrize("page", ["README.md", "docs/architecture.md"])
def test_docs_block_tables_list_every_block_type_of_blocks(page):
    """One row per block type, in `BLOCKS` order; where the table states the source, it is `BLOCKS[...].source`
    (optionally followed by `; ` and the equations)."""
    rows = _block_table(page)
    assert list(rows) == list(BLOCKS)
    for name, row in rows.items():
        if "source" in row:
            assert row["source"] == BLOCKS[name].source or row["source"].startswith(BLOCKS[name].source + ";"), name


def test_explicit_overrides_win_over_preset():
    config = SimplifiedConfig(
        block_type="sas_p", norm_type="layernorm", beta_ff_init=0.2, first_layer_value_mode="linear"
    )
    assert config.norm_type == "layernorm"
    assert config.final_norm == "layernorm"  # derived from the overridden norm_type
    assert config.beta_ff_init == 0.2
    assert config.first_layer_value_mode == "linear"
    assert config.parallel_block is True and config.value_mode == "identity"  # the rest of the preset still applies
    assert SimplifiedConfig(block_type="sas", intermediate_size=100).intermediate_size == 100
    assert SimplifiedConfig(block_type="sas", query_init_std=0.01).query_init_std == 0.01
    # an override equal to another preset's value is kept, not re-expanded
    assert SimplifiedConfig(block_type="simplest", norm_type="rmsnorm").norm_type == "rmsnorm"


def test_expanded_values_in_config_json_and_round_trip(tmp_path):
    config = SimplifiedConfig(block_type="sas_p", norm_type="layernorm", hidden_size=64, num_attention_heads=4)
    as_dict = config.to_dict()
    for name in BLOCK_PRESETS["sas_p"]:
        assert as_dict[name] == getattr(config, name) and as_dict[name] is not None, name
    config.save_pretrained(tmp_path)
    on_disk = json.loads((tmp_path / "config.json").read_text())
    for name in BLOCK_PRESETS["sas_p"]:
        assert on_disk[name] == getattr(config, name), name
    assert on_disk["block_type"] == "sas_p" and on_disk["model_type"] == "simplified"
    assert on_disk["auto_map"]["AutoConfig"] == "configuration_simplified.SimplifiedConfig"
    reloaded = SimplifiedConfig.from_pretrained(tmp_path)
    assert _fields(reloaded) == _fields(config)


def test_config_json_names_the_release_that_wrote_it(tmp_path):
    """`simplified_transformers_version` is written on every save, from the one place the version lives."""
    from importlib.metadata import version

    from modeling_simplified import __version__

    assert version("simplified-transformers") == __version__  # pyproject reads it from configuration_simplified
    config = tiny_config("sas")
    config.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["simplified_transformers_version"] == __version__
    data = json.loads((tmp_path / "config.json").read_text())
    data["simplified_transformers_version"] = "0.0.1"  # an older release's folder: re-saving stamps this release
    (tmp_path / "config.json").write_text(json.dumps(data))
    reloaded = SimplifiedConfig.from_pretrained(tmp_path)
    assert reloaded.to_dict()["simplified_transformers_version"] == __version__


def test_the_changelog_has_a_dated_section_for_the_release_under_an_unreleased_one():
    """CHANGELOG.md's first section is `[Unreleased]`; a release version (not a `.devN`) has its own dated
    `[X.Y.Z] - YYYY-MM-DD` section right after it."""
    from packaging.version import Version

    from modeling_simplified import __version__

    headings = re.findall(r"^## \[([^\]]+)\](.*)$", (Path(__file__).parents[1] / "CHANGELOG.md").read_text(), re.M)
    assert headings[0][0] == "Unreleased", headings[:2]
    if not Version(__version__).is_devrelease:
        assert headings[1][0] == __version__, f"CHANGELOG.md has no section for {__version__} after [Unreleased]"
        assert re.fullmatch(r" - \d{4}-\d{2}-\d{2}", headings[1][1]), headings[1]


def _fields(config: SimplifiedConfig) -> dict:
    """The serialised fields, without where the config was loaded from."""
    return {k: v for k, v in config.to_dict().items() if k != "_name_or_path"}


@pytest.mark.parametrize("block_type", BLOCK_TYPES)
def test_round_trip_every_block_type(block_type, tmp_path):
    from transformers import AutoConfig

    config = tiny_config(block_type, eos_token_id=[1, 2], pad_token_id=0, hidden_act="geglu")
    config.save_pretrained(tmp_path)
    reloaded = AutoConfig.from_pretrained(tmp_path)
    assert type(reloaded) is SimplifiedConfig
    assert _fields(reloaded) == _fields(config)
    assert SimplifiedConfig.from_dict(config.to_dict()).to_dict() == config.to_dict()


def test_json_file_is_validated(tmp_path):
    """A hand-edited config.json goes through the same validation."""
    tiny_config("sas").save_pretrained(tmp_path)
    path = os.path.join(tmp_path, "config.json")
    data = json.loads(open(path).read())
    data["block_type"] = "sasp"
    with open(path, "w") as f:
        json.dump(data, f)
    with pytest.raises(ValueError, match="block_type"):
        SimplifiedConfig.from_pretrained(tmp_path)


@pytest.mark.parametrize(
    "kwargs,typo,meant",
    [
        (dict(block_type="sas_p", hiden_size=256), "hiden_size", "hidden_size"),
        (dict(blok_type="sas"), "blok_type", "block_type"),
        (dict(block_type="sas", norm_typ="layernorm"), "norm_typ", "norm_type"),
        (dict(beta_ff_int=0.2), "beta_ff_int", "beta_ff_init"),
        (dict(num_hidden_layer=4), "num_hidden_layer", "num_hidden_layers"),
    ],
)
def test_a_misspelt_field_is_one_error_naming_the_field_meant(kwargs, typo, meant):
    """Without the check, `hiden_size=256` builds a model of width 768 and says nothing."""
    with pytest.raises(ValueError) as info:
        SimplifiedConfig(**kwargs)
    message = str(info.value)
    assert len(message.splitlines()) == 1
    assert f"{typo!r} is not a field; did you mean {meant!r}?" in message


@pytest.mark.parametrize("renamed", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["added", "renamed"])
def test_a_misspelt_field_in_config_json_fails_in_a_fresh_process(tmp_path, renamed):
    """A hand-edited Hub folder (the config and its code file, loaded with trust_remote_code in a fresh process, as
    from the Hub): `"blok_type": "sas"` beside `block_type` would load as sas_p, in place of it as pre_ln."""
    tiny_config("sas_p").save_pretrained(tmp_path)
    package = Path(__file__).resolve().parents[1] / "modeling_simplified"
    shutil.copy(package / "configuration_simplified.py", tmp_path)
    raw = json.loads((tmp_path / "config.json").read_text())
    if renamed:
        del raw["block_type"]
    (tmp_path / "config.json").write_text(json.dumps({**raw, "blok_type": "sas"}))
    code = (
        "import sys, transformers\n"
        "try:\n"
        "    transformers.AutoConfig.from_pretrained(sys.argv[1], trust_remote_code=True)\n"
        "except ValueError as err:\n"
        "    sys.exit(str(err))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "modeling_simplified" not in proc.stderr  # the folder's copy of the code, not the installed package's
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .startswith("SimplifiedConfig: 'blok_type' is not a field; did you mean 'block_type'?")
    )


def test_transformers_generic_keys_and_unrelated_keys_still_pass(tmp_path):
    """Every key transformers' base config serialises, every generation parameter and 4.x config argument loads as
    before (transformers drops or keeps them), and so do keys unlike any field, even ones near a field's name
    (tokenizer ids, another model's names): they are kept as extra attributes, saved and loaded back."""
    from transformers import GenerationConfig, PreTrainedConfig

    fields = SimplifiedConfig.__annotations__
    base = {k: v for k, v in PreTrainedConfig().to_dict().items() if k not in fields}
    generation = {k: v for k, v in GenerationConfig().to_dict().items() if k not in fields}
    legacy = {key: None for key in _GENERIC_KEYS} | dict(
        model_type="simplified", auto_map={}, torch_dtype="float32", num_labels=3, name_or_path="x",
        output_attentions=False, pruned_heads={}, task_specific_params={}, is_decoder=True, sep_token_id=5,
        tokenizer_class="GPT2TokenizerFast", prefix="", decoder_start_token_id=0, per_layer_config=None,
    )  # fmt: skip
    unrelated = dict(
        cls_token_id=1, mask_token_id=2, unk_token_id=3, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
        vocab_file="vocab.json", rms_norm_eps=1e-6, n_positions=64, layer_norm_eps=1e-5,
        hidden_layers=2, my_note="from the lr sweep", _private=1,
    )  # fmt: skip
    for extra in (base, generation, legacy):
        config = tiny_config("sas_p", **extra)
        assert config.block_type == "sas_p" and config.hidden_size == 32
    config = tiny_config("sas_p", **unrelated)
    assert config.cls_token_id == 1 and config.hidden_dropout == 0.0 and config.my_note == "from the lr sweep"
    config.save_pretrained(tmp_path)
    assert SimplifiedConfig.from_pretrained(tmp_path).rms_norm_eps == 1e-6


def test_derived_properties():
    config = SimplifiedConfig(vocab_size=50257, hidden_size=768, num_attention_heads=12, pad_vocab_size_multiple=64)
    assert config.head_dim == 64
    assert config.padded_vocab_size == 50304
    assert SimplifiedConfig(vocab_size=50257).padded_vocab_size == 50257


def test_conversion_fields_defaults():
    """Fields added for checkpoint conversion change nothing by default; first_layer_norm follows norm_type."""
    config = SimplifiedConfig(block_type="pre_ln", norm_type="layernorm")
    assert (config.type_vocab_size, config.rmsnorm_eps_position, config.qk_norm) == (0, "inside", "none")
    assert config.first_layer_norm == "layernorm" and config.skip_gains_trainable is False
    assert (
        SimplifiedConfig(block_type="sas_p", norm_type="none", first_layer_norm="layernorm").first_layer_norm
        == "layernorm"
    )


def test_every_config_field_is_listed_in_the_config_guide():
    """docs/config.md is where the fields are documented (the README links to it rather than repeating them)."""
    text = (Path(__file__).resolve().parents[1] / "docs/config.md").read_text()
    missing = [name for name in SimplifiedConfig.__annotations__ if f"`{name}`" not in text]
    assert not missing, f"docs/config.md does not list {missing}"
