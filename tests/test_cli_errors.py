"""Files users bring: loading refuses what is not a checkpoint of this model, and every CLI turns bad
input into one line on stderr that names the file or field (no traceback). The CLIs run in-process via main()."""

import json
import os
import stat

import pytest
import torch
from conftest import tiny_config
from safetensors.torch import load_file, save_file

from modeling_simplified import SimplifiedForCausalLM, SimplifiedForMaskedLM
from modeling_simplified.hub_cards.cli import export_main, push_main
from modeling_simplified.training.cli import main as train_main


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    folder = tmp_path_factory.mktemp("saved")
    torch.manual_seed(0)
    SimplifiedForCausalLM(tiny_config()).save_pretrained(folder)
    return folder


def _copy(saved, tmp_path, name="ckpt"):
    folder = tmp_path / name
    folder.mkdir()
    for path in saved.iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    return folder


def _truncate(folder):
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])


def _json_string(folder):
    (folder / "config.json").write_text(json.dumps("simplified"))


def _broken_json(folder):
    (folder / "config.json").write_text('{"model_type": "simplified",')


def _other_family(folder):
    raw = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**raw, "model_type": "bert", "architectures": ["BertModel"]}))


def _empty_weights(folder):
    save_file({}, folder / "model.safetensors", metadata={"format": "pt"})


def _renamed_weights(folder):
    tensors = load_file(folder / "model.safetensors")
    save_file({f"other.{k}": v for k, v in tensors.items()}, folder / "model.safetensors", metadata={"format": "pt"})


def _bad_field(folder):
    raw = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**raw, "eos_token_id": raw["vocab_size"]}))


#: (damage, what the one error line must name)
DAMAGE = {
    "truncated weights": (_truncate, "model.safetensors"),
    "config.json a JSON string": (_json_string, "config.json"),
    "broken JSON": (_broken_json, "config.json"),
    "another model family": (_other_family, "'bert'"),
    "empty weights": (_empty_weights, "model.safetensors"),
    "every tensor renamed": (_renamed_weights, "model.safetensors"),
    "invalid field": (_bad_field, "eos_token_id"),
}


def _one_line(err: str, prefix: str, *names: str):
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(prefix) and "Traceback" not in err, err
    for name in names:
        assert name in lines[0], (name, err)


# -- loading ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("damage", [_empty_weights, _renamed_weights], ids=["empty", "renamed"])
def test_from_pretrained_refuses_a_checkpoint_with_no_matching_tensor(saved, tmp_path, damage):
    folder = _copy(saved, tmp_path)
    damage(folder)
    with pytest.raises(ValueError, match="no tensor of the checkpoint matches") as raised:
        SimplifiedForCausalLM.from_pretrained(folder)
    assert str(folder / "model.safetensors") in str(raised.value)


def test_partial_load_keeps_transformers_report(saved):
    """A new head on saved base weights (causal LM save → masked LM) loads, with the head reported missing."""
    model, info = SimplifiedForMaskedLM.from_pretrained(saved, output_loading_info=True)
    assert info["missing_keys"] and all(k.startswith("mlm_head.") for k in info["missing_keys"])
    reference = SimplifiedForCausalLM.from_pretrained(saved)
    assert torch.equal(model.model.embed_tokens.weight, reference.model.embed_tokens.weight)


def test_generate_refuses_a_bidirectional_checkpoint(tmp_path):
    """A masked-LM save loaded as a causal LM stays bidirectional (is_causal=False): cached decoding could not equal
    recomputation, so generate() refuses it; loading it with is_causal=True decodes left to right, exactly."""
    torch.manual_seed(0)
    SimplifiedForMaskedLM(tiny_config()).save_pretrained(tmp_path)
    model = SimplifiedForCausalLM.from_pretrained(tmp_path)
    assert model.config.is_causal is False
    prompt = torch.tensor([[5, 7, 9]])
    with pytest.raises(ValueError, match="is_causal"):
        model.generate(prompt, max_new_tokens=4, do_sample=False)
    causal = SimplifiedForCausalLM.from_pretrained(tmp_path, is_causal=True)
    kwargs = dict(max_new_tokens=6, do_sample=False, eos_token_id=None, pad_token_id=0)
    assert torch.equal(
        causal.generate(prompt, use_cache=True, **kwargs), causal.generate(prompt, use_cache=False, **kwargs)
    )


# -- simplified-export -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", DAMAGE, ids=list(DAMAGE))
def test_export_bad_checkpoint_is_one_line(saved, tmp_path, capsys, case):
    damage, name = DAMAGE[case]
    folder = _copy(saved, tmp_path)
    damage(folder)
    with pytest.raises(SystemExit) as exit_info:
        export_main([str(folder), str(tmp_path / "out")])
    assert exit_info.value.code == 2
    _one_line(capsys.readouterr().err, "simplified-export: error:", name)
    assert not (tmp_path / "out").exists()


def test_export_missing_path_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        export_main([str(tmp_path / "nowhere"), str(tmp_path / "out")])
    assert exit_info.value.code == 2
    _one_line(capsys.readouterr().err, "simplified-export: error:", str(tmp_path / "nowhere"))


def test_export_folder_is_0755_like_save_pretrained(saved, tmp_path, capsys):
    export_main([str(saved), str(tmp_path / "out")])
    capsys.readouterr()
    SimplifiedForCausalLM(tiny_config()).save_pretrained(tmp_path / "reference")
    mode = stat.S_IMODE(os.stat(tmp_path / "out").st_mode)
    assert mode == stat.S_IMODE(os.stat(tmp_path / "reference").st_mode) == 0o755 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# -- simplified-push (checks the folder before any network call) ------------------------------------------------------
@pytest.mark.parametrize(
    "case", ["truncated weights", "config.json a JSON string", "broken JSON", "another model family", "empty weights"]
)
def test_push_bad_export_is_one_line(saved, tmp_path, capsys, case):
    damage, name = DAMAGE[case]
    export_main([str(saved), str(tmp_path / "export")])
    capsys.readouterr()
    damage(tmp_path / "export")
    with pytest.raises(SystemExit) as exit_info:
        push_main([str(tmp_path / "export"), "me/model"])
    assert exit_info.value.code == 1
    _one_line(capsys.readouterr().err, "simplified-push: error:", name)


def test_push_missing_path_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        push_main([str(tmp_path / "nowhere"), "me/model"])
    assert exit_info.value.code == 1
    _one_line(capsys.readouterr().err, "simplified-push: error:", str(tmp_path / "nowhere"))


# -- simplified-train --init-from (refused while planning, before data or models are built) --------------------------
@pytest.mark.parametrize("case", ["config.json a JSON string", "broken JSON", "another model family"])
def test_train_init_from_bad_checkpoint_is_one_line(saved, tmp_path, capsys, case):
    damage, name = DAMAGE[case]
    folder = _copy(saved, tmp_path)
    damage(folder)
    argv = ["--preset", "codeparrot-tiny-pre_ln", "--output-dir", str(tmp_path / "run"), "--init-from", str(folder)]
    assert train_main(argv) == 2
    _one_line(capsys.readouterr().err, "simplified-train: error:", str(folder / "config.json"), name)
    assert not (tmp_path / "run").exists()


def test_train_init_from_missing_path_is_one_line(tmp_path, capsys):
    argv = ["--preset", "codeparrot-tiny-pre_ln", "--output-dir", str(tmp_path / "run")]
    assert train_main([*argv, "--init-from", str(tmp_path / "nowhere")]) == 2
    _one_line(capsys.readouterr().err, "simplified-train: error:", str(tmp_path / "nowhere"))


def test_train_broken_preset_file_is_one_line(tmp_path, capsys):
    preset = tmp_path / "mine.json"
    preset.write_text('{"paper": ')
    assert train_main(["--preset", str(preset), "--output-dir", str(tmp_path / "run")]) == 2
    _one_line(capsys.readouterr().err, "simplified-train: error:", str(preset))


def test_train_init_from_bad_block_type_is_refused_before_any_data_is_loaded(saved, tmp_path, capsys, monkeypatch):
    """A config.json with an invalid field is refused while planning: the GLUE data is never loaded or tokenised."""
    from modeling_simplified.training import api

    folder = _copy(saved, tmp_path)
    raw = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**raw, "block_type": "sas_pp"}))
    loaded = []
    monkeypatch.setattr(api, "build_task_data", lambda *a, **k: loaded.append(a))
    argv = ["--preset", "glue-tiny", "--output-dir", str(tmp_path / "run"), "--init-from", str(folder)]
    assert train_main(argv) == 2
    _one_line(capsys.readouterr().err, "simplified-train: error:", str(folder / "config.json"), "block_type", "sas_pp")
    assert loaded == [] and not (tmp_path / "run").exists()
