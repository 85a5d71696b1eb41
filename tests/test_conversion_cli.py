"""`simplified-convert` on the folders users bring: one error line naming the path, file or model_type; written
folders with save_pretrained's permissions; the source's tokenizer copied so the result works with AutoTokenizer and
pipeline."""

import os

import pytest
import torch
from conftest import perturb_
from transformers import AutoTokenizer, BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel, pipeline

from modeling_simplified.conversion.cli import main

D, H = 32, 4


def _gpt2(folder, vocab=61):
    model = perturb_(
        GPT2LMHeadModel(
            GPT2Config(n_layer=1, n_embd=D, n_head=H, vocab_size=vocab, n_positions=64, bos_token_id=0, eos_token_id=0)
        )
    )
    model.save_pretrained(folder)
    return model


def _one_error_line(capsys, argv) -> str:
    capsys.readouterr()
    assert main(argv) == 1
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"simplified-convert {argv[0]}: error: "), captured.err
    assert "Traceback" not in captured.err + captured.out
    return lines[0]


@pytest.mark.parametrize("command", ["gpt2-to-simplified", "simplified-to-llama", "original"])
def test_missing_source_path_is_named(tmp_path, capsys, command):
    line = _one_error_line(capsys, [command, str(tmp_path / "nope"), str(tmp_path / "out")])
    assert f"SRC={str(tmp_path / 'nope')!r} does not exist" in line and "Repo id" not in line
    assert not (tmp_path / "out").exists()


def test_other_family_names_the_model_type_found(tmp_path, capsys):
    BertForMaskedLM(
        BertConfig(num_hidden_layers=1, hidden_size=D, num_attention_heads=H, intermediate_size=48, vocab_size=61)
    ).save_pretrained(tmp_path / "bert")
    line = _one_error_line(capsys, ["llama-to-simplified", str(tmp_path / "bert"), str(tmp_path / "out")])
    assert "model_type='bert'" in line and "expects model_type='llama'" in line
    _gpt2(tmp_path / "gpt2")
    line = _one_error_line(capsys, ["simplified-to-gpt2", str(tmp_path / "gpt2"), str(tmp_path / "out")])
    assert "model_type='gpt2'" in line and "expects model_type='simplified'" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "kind, expected",
    [
        ("truncated", "model.safetensors cannot be read as safetensors"),
        ("bad_json", "config.json is not valid JSON"),
        ("json_string", "config.json must hold a JSON object, got a str"),
        ("json_list", "config.json must hold a JSON object, got a list"),
        ("no_config", "config.json does not exist"),
    ],
)
def test_broken_files_are_named(tmp_path, capsys, kind, expected):
    src = tmp_path / "gpt2"
    _gpt2(src)
    weights, config = src / "model.safetensors", src / "config.json"
    if kind == "truncated":
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    elif kind == "bad_json":
        config.write_text(config.read_text()[:-10])
    elif kind == "json_string":
        config.write_text('"gpt2"')
    elif kind == "json_list":
        config.write_text("[1, 2]")
    else:
        config.unlink()
    line = _one_error_line(capsys, ["gpt2-to-simplified", str(src), str(tmp_path / "out")])
    assert expected in line and str(src) in line
    assert not (tmp_path / "out").exists()


def test_converted_folder_has_save_pretrained_permissions_and_the_tokenizer(tmp_path, bpe_tokenizer):
    src = tmp_path / "gpt2"
    ref = _gpt2(src, vocab=len(bpe_tokenizer)).eval()
    bpe_tokenizer.save_pretrained(src)
    assert main(["gpt2-to-simplified", str(src), str(tmp_path / "ours")]) == 0
    assert os.stat(tmp_path / "ours").st_mode & 0o777 == os.stat(src).st_mode & 0o777
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "ours")
    text = "def main():\n    return 1\n"
    assert tokenizer(text)["input_ids"] == bpe_tokenizer(text)["input_ids"]
    generator = pipeline("text-generation", model=str(tmp_path / "ours"), trust_remote_code=True)
    result = generator(text, max_new_tokens=5, do_sample=False)
    ids = torch.tensor([bpe_tokenizer(text)["input_ids"]])
    expected = ref.generate(ids, max_new_tokens=5, do_sample=False, pad_token_id=0)
    assert result[0]["generated_text"] == bpe_tokenizer.decode(expected[0])
    assert main(["simplified-to-gpt2", str(tmp_path / "ours"), str(tmp_path / "back")]) == 0
    assert AutoTokenizer.from_pretrained(tmp_path / "back")(text)["input_ids"] == tokenizer(text)["input_ids"]


def test_a_non_empty_out_is_refused_before_the_source_is_loaded(tmp_path, capsys, monkeypatch):
    src, out = tmp_path / "gpt2", tmp_path / "out"
    _gpt2(src)
    out.mkdir()
    (out / "mine.txt").write_text("keep")

    def no_loading(*args, **kwargs):
        raise AssertionError("the source model was loaded")

    monkeypatch.setattr(GPT2LMHeadModel, "from_pretrained", no_loading)
    line = _one_error_line(capsys, ["gpt2-to-simplified", str(src), str(out)])
    assert f"OUT={str(out)!r} exists and is not an empty folder" in line
    assert [p.name for p in out.iterdir()] == ["mine.txt"]


def test_a_refusal_lists_each_allowed_value_once(tmp_path, capsys):
    """GPT-2's `gelu_new` and `gelu_pytorch_tanh` both convert to our `gelu_new`: the refusal once listed
    ('gelu_new', 'gelu_new', 'gelu', 'relu')."""
    from modeling_simplified import SimplifiedConfig, SimplifiedForCausalLM

    SimplifiedForCausalLM(
        SimplifiedConfig(
            block_type="pre_ln",
            vocab_size=61,
            hidden_size=D,
            num_hidden_layers=1,
            num_attention_heads=H,
            intermediate_size=4 * D,
            max_position_embeddings=64,
            hidden_act="leaky_relu",
        )
    ).save_pretrained(tmp_path / "ours")
    line = _one_error_line(capsys, ["simplified-to-gpt2", str(tmp_path / "ours"), str(tmp_path / "out")])
    assert "hidden_act='leaky_relu' (needs ('gelu_new', 'gelu', 'relu'))" in line, line


def test_every_subcommand_has_its_converter():
    """The CLI's subcommands (`cli.SUBCOMMANDS`, read without torch) are exactly the converters (`run.CONVERTERS`)."""
    from modeling_simplified.conversion.cli import SUBCOMMANDS
    from modeling_simplified.conversion.run import CONVERTERS

    assert list(SUBCOMMANDS) == list(CONVERTERS)
