"""The Hub: export folders, model cards, the push CLI, `push_to_hub`, and loading with trust_remote_code in a fresh
process that cannot import this package, through the real `huggingface_hub` client against a local Hub server."""

from __future__ import annotations

import ast
import json
import math
import os
import re
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest
import torch
from conftest import TOKEN, perturb_, tiny_config
from hub_server import HubServer, git_blob_sha
from safetensors import safe_open

import modeling_simplified.modeling_simplified as modeling_mod
from modeling_simplified import (
    BLOCK_TYPES,
    SimplifiedConfig,
    SimplifiedForCausalLM,
    SimplifiedForMaskedLM,
    SimplifiedForSequenceClassification,
    SimplifiedModel,
)
from modeling_simplified.configuration_simplified import AUTO_MAP, BLOCK_PRESETS, BLOCKS, __version__
from modeling_simplified.hub_cards import card as card_mod
from modeling_simplified.hub_cards.cli import export_main, push_main
from modeling_simplified.hub_cards.export import CODE_FILES, ExportError, export_model
from modeling_simplified.hub_cards.push import make_api, push_export

AUTO = {
    SimplifiedForCausalLM: "AutoModelForCausalLM",
    SimplifiedForMaskedLM: "AutoModelForMaskedLM",
    SimplifiedForSequenceClassification: "AutoModelForSequenceClassification",
}
EXPORT_FILES = {
    "README.md",
    "config.json",
    "configuration_simplified.py",
    "fields_simplified.py",
    "modeling_simplified.py",
    "embeddings_simplified.py",
    "kernels_simplified.py",
    "checkpoints_simplified.py",
    "compat_simplified.py",
    "tensor_parallel_simplified.py",
    "weight_decay_simplified.py",
    "quantization_simplified.py",
    "model.safetensors",
}
TOKENIZER_FILES = {"tokenizer.json", "tokenizer_config.json"}


# ------------------------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------------------------
def _site_dirs() -> list[str]:
    paths = sysconfig.get_paths()
    return list(dict.fromkeys([paths["purelib"], paths["platlib"]]))


#: Runs first in every fresh process: `-I -S` skip PYTHONPATH, the user site and every .pth file (so the editable
#: install's finder never loads); site-packages is then added by hand. The asserts prove the package is unreachable.
PRELUDE = textwrap.dedent(f"""
    import sys, importlib.util
    sys.path.extend({_site_dirs()!r})
    assert not any("editable" in repr(f).lower() for f in sys.meta_path), sys.meta_path
    assert importlib.util.find_spec("modeling_simplified") is None, "modeling_simplified is importable"
    import torch
    torch.set_num_threads(1)
""")


RESULT = "\n@@result@@ "  # scripts print their JSON report after this marker (transformers' prompts share stdout)


def run_fresh(script: str, tmp_path: Path, *args: str, env: dict[str, str] | None = None, timeout: int = 300):
    """Run `script` (after PRELUDE) in a fresh `python -I -S` process with cwd and HF_HOME in temporary folders;
    return the JSON report it printed after `RESULT`."""
    home, cwd = tmp_path / "fresh-hf-home", tmp_path / "fresh-cwd"
    cwd.mkdir(exist_ok=True)
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    full_env.update(
        HF_HOME=str(home),
        OMP_NUM_THREADS="1",
        TOKENIZERS_PARALLELISM="false",
        HF_HUB_DISABLE_PROGRESS_BARS="1",
        **(env or {}),
    )
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-c", PRELUDE + textwrap.dedent(script), *args],
        cwd=cwd,
        env=full_env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, f"fresh process failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return json.loads(proc.stdout.rsplit(RESULT, 1)[1])


def _inputs(vocab_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(5, vocab_size, (2, 9), generator=gen)
    mask = torch.ones_like(ids)
    mask[1, -3:] = 0  # right padding in the second row
    return ids, mask


def make_model(cls, block_type: str, seed: int = 0, **config_kw):
    torch.manual_seed(seed)
    if cls is SimplifiedForSequenceClassification:
        config_kw.setdefault("num_labels", 3)
        config_kw.setdefault("id2label", {0: "neg", 1: "neutral", 2: "pos"})
        config_kw.setdefault("label2id", {"neg": 0, "neutral": 1, "pos": 2})
    return perturb_(cls(tiny_config(block_type, **config_kw)), seed=seed).eval()


@torch.no_grad()
def reference(model, path: Path) -> Path:
    """Save the parent's outputs (hidden states, logits, greedy continuation) for the fresh process to compare."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        ids, mask = _inputs(model.config.vocab_size)
        ref = {
            "input_ids": ids,
            "attention_mask": mask,
            "hidden": model.model(input_ids=ids, attention_mask=mask).last_hidden_state,
            "logits": model(input_ids=ids, attention_mask=mask).logits,
        }
        if isinstance(model, SimplifiedForCausalLM):
            ref["generated"] = model.generate(
                ids[:1], max_new_tokens=4, do_sample=False, eos_token_id=None, pad_token_id=0
            ).tolist()
    finally:
        torch.set_num_threads(threads)
    torch.save(ref, path)
    return path


# ------------------------------------------------------------------------------------------------------------------
# the server speaks the protocol (through the real client)
# ------------------------------------------------------------------------------------------------------------------
def test_local_hub_protocol(hub_env, tmp_path):
    from huggingface_hub import HfApi, get_hf_file_metadata, hf_hub_download, hf_hub_url
    from huggingface_hub.errors import (
        HfHubHTTPError,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    api = HfApi(endpoint=hub_env.url, token=TOKEN)
    url = api.create_repo("proto/repo")
    assert url.repo_id == "proto/repo"
    with pytest.raises(HfHubHTTPError) as err:
        api.create_repo("proto/repo")
    assert err.value.response.status_code == 409
    api.create_repo("proto/repo", exist_ok=True)

    first = api.upload_file(path_or_fileobj=b"one", path_in_repo="a/x.txt", repo_id="proto/repo")
    second = api.upload_file(path_or_fileobj=b"two", path_in_repo="a/x.txt", repo_id="proto/repo")
    assert re.fullmatch(r"[0-9a-f]{40}", first.oid) and first.oid != second.oid
    assert first.commit_url == f"{hub_env.url}/proto/repo/commit/{first.oid}"
    # unchanged content: the preupload oid matches, the client makes no new commit
    again = api.upload_file(path_or_fileobj=b"two", path_in_repo="a/x.txt", repo_id="proto/repo")
    assert again.oid == second.oid

    assert api.model_info("proto/repo").sha == second.oid
    assert api.model_info("proto/repo", revision=first.oid).sha == first.oid
    assert {s.rfilename for s in api.model_info("proto/repo").siblings} == {".gitattributes", "a/x.txt"}
    tree = {e.path: type(e).__name__ for e in api.list_repo_tree("proto/repo")}
    assert tree == {".gitattributes": "RepoFile", "a": "RepoFolder"}
    assert [e.path for e in api.list_repo_tree("proto/repo", recursive=True) if type(e).__name__ == "RepoFile"] == [
        ".gitattributes",
        "a/x.txt",
    ]
    assert [c.commit_id for c in api.list_repo_commits("proto/repo")][:2] == [second.oid, first.oid]

    meta = get_hf_file_metadata(
        hf_hub_url("proto/repo", "a/x.txt", revision=first.oid, endpoint=hub_env.url), token=TOKEN
    )
    assert (meta.commit_hash, meta.etag, meta.size) == (first.oid, git_blob_sha(b"one"), 3)
    kw = dict(repo_id="proto/repo", filename="a/x.txt", cache_dir=tmp_path / "cache", endpoint=hub_env.url, token=TOKEN)
    assert Path(hf_hub_download(**kw, revision=first.oid)).read_bytes() == b"one"
    assert Path(hf_hub_download(**kw)).read_bytes() == b"two"

    with pytest.raises(RemoteEntryNotFoundError):
        hf_hub_download(**{**kw, "filename": "missing.txt"})
    with pytest.raises(RevisionNotFoundError):
        hf_hub_download(**kw, revision="no-such-branch")
    with pytest.raises(RepositoryNotFoundError):
        api.model_info("proto/absent")
    api.create_repo("proto/private", private=True)
    with pytest.raises(RepositoryNotFoundError):
        HfApi(endpoint=hub_env.url, token=False).model_info("proto/private")
    assert api.model_info("proto/private").private is True
    with pytest.raises(HfHubHTTPError) as err:  # writes need the token
        HfApi(endpoint=hub_env.url, token="wrong").upload_file(
            path_or_fileobj=b"x", path_in_repo="y", repo_id="proto/repo"
        )
    assert err.value.response.status_code == 401
    assert any(r.startswith("POST /api/models/proto/repo/preupload/main") for r in hub_env.requests)


# ------------------------------------------------------------------------------------------------------------------
# export folders
# ------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "cls", [SimplifiedForCausalLM, SimplifiedForMaskedLM, SimplifiedForSequenceClassification, SimplifiedModel]
)
def test_export_folder_is_exactly_the_hub_folder(cls, tmp_path, bpe_tokenizer):
    model = (
        make_model(cls, "sas", vocab_size=len(bpe_tokenizer))
        if cls is not SimplifiedModel
        else SimplifiedModel(tiny_config("sas"))
    )
    curve = tmp_path / "curve.png"
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.figure(figsize=(2, 2))
    plt.plot([3.0, 2.0, 1.5])
    plt.savefig(curve)
    plt.close()  # noqa: E702
    out = export_model(model, tmp_path / "export", tokenizer=bpe_tokenizer, run_info={"loss_curve": str(curve)})
    files = {p.name for p in out.iterdir()}
    expected = EXPORT_FILES | TOKENIZER_FILES | {"loss_curve.png"}
    if cls is SimplifiedForCausalLM:
        expected.add("generation_config.json")
    assert files == expected
    assert all(p.is_file() for p in out.iterdir())
    config = json.loads((out / "config.json").read_text())
    assert config["auto_map"] == AUTO_MAP
    assert config["architectures"] == [cls.__name__]
    # the release that produced the export, in the config and the card
    assert config["simplified_transformers_version"] == __version__
    assert f"Exported with simplified-transformers {__version__} " in (out / "README.md").read_text()
    modeling_src = (out / "modeling_simplified.py").read_text()
    assert "from .configuration_simplified import" in modeling_src
    for code in out.glob("*.py"):  # the modeling file and its siblings: sibling imports only
        assert not re.search(r"^\s*(from|import)\s+modeling_simplified\b", code.read_text(), re.MULTILINE), code
    assert (out / "loss_curve.png").read_bytes() == curve.read_bytes()
    assert "![training loss curve](loss_curve.png)" in (out / "README.md").read_text()
    if cls is SimplifiedForCausalLM:
        generation = json.loads((out / "generation_config.json").read_text())
        assert generation["eos_token_id"] == bpe_tokenizer.eos_token_id
        assert generation["pad_token_id"] == bpe_tokenizer.pad_token_id


def test_code_files_are_the_modeling_file_and_every_sibling_it_reaches():
    """`CODE_FILES` is what `save_pretrained` ships: the modeling file and, transitively, every module it imports by
    a single-dot sibling import; and every `*_simplified.py` module of the package is one of them (a new shipped
    module missing from `CODE_FILES` fails here, not on a user's `trust_remote_code` load)."""
    package = Path(modeling_mod.__file__).parent
    reached, todo = set(), ["modeling_simplified.py"]
    while todo:
        name = todo.pop()
        reached.add(name)
        for node in ast.walk(ast.parse((package / name).read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and f"{node.module}.py" not in reached:
                todo.append(f"{node.module}.py")
    assert reached == set(CODE_FILES) == {p.name for p in package.glob("*_simplified.py")}


def test_export_refuses_foreign_folders_and_replaces_previous_exports(tmp_path):
    model = make_model(SimplifiedForCausalLM, "pre_ln")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(ExportError, match=r"foreign is not empty and is not a previous export"):
        export_model(model, foreign)
    assert [p.name for p in foreign.iterdir()] == ["notes.txt"]
    assert not [p for p in tmp_path.iterdir() if ".partial-" in p.name]  # nothing left behind

    out = tmp_path / "out"
    export_model(model, out, run_info={"steps": 10})
    (out / "stale.bin").write_bytes(b"x")  # a previous export holding a stale file is replaced as a whole
    export_model(model, out, run_info={"steps": 20})
    assert "stale.bin" not in {p.name for p in out.iterdir()}
    assert "| optimizer steps | 20 |" in (out / "README.md").read_text()
    (out / "sub").mkdir()  # a folder inside: no longer an export
    with pytest.raises(ExportError, match="refusing to overwrite"):
        export_model(model, out)


@pytest.mark.parametrize(
    "run_info, message",
    [
        (
            {"stepz": 3},
            r"run_info key 'stepz' is not known; allowed keys: dataset, datasets, eval_dataset, eval_split, steps",
        ),
        ({"steps": "many"}, r"run_info\['steps'\] must be an int, got 'many'"),
        ({"steps": 2.5}, r"run_info\['steps'\] must be an int, got 2.5"),
        ({"eval_loss": True}, r"run_info\['eval_loss'\] must be a number, got True"),
        ({"eval_loss": float("nan")}, r"run_info\['eval_loss'\] must be finite"),
        ({"datasets": ["a", 3]}, r"run_info\['datasets'\] must be a list of str"),
        ({"loss_curve": __file__}, r"run_info\['loss_curve'\] must be an existing PNG file"),
    ],
)
def test_export_rejects_bad_run_info(run_info, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        export_model(make_model(SimplifiedForCausalLM, "sas"), tmp_path / "out", run_info=run_info)
    assert not (tmp_path / "out").exists()


def test_run_info_accepts_numpy_scalars_and_drops_none():
    import numpy as np

    checked = card_mod.validate_run_info(
        {
            "steps": np.int64(5),
            "tokens_seen": 640.0,
            "eval_loss": np.float32(2.5),
            "perplexity": None,
            "datasets": ("a", "b"),
        }
    )
    assert checked == {"steps": 5, "tokens_seen": 640, "eval_loss": 2.5, "datasets": ["a", "b"]}
    assert [type(checked[k]) for k in ("steps", "tokens_seen", "eval_loss")] == [int, int, float]


def test_export_from_trainer_checkpoint_and_cli(tmp_path, bpe_tokenizer, capsys):
    model = make_model(SimplifiedForCausalLM, "sas_p", vocab_size=len(bpe_tokenizer))
    ckpt = tmp_path / "run" / "checkpoint-40"
    model.save_pretrained(ckpt)
    bpe_tokenizer.save_pretrained(ckpt)
    (ckpt / "optimizer.pt").write_bytes(b"not an export file")
    (ckpt / "trainer_state.json").write_text(
        json.dumps(
            {
                "global_step": 40,
                "log_history": [
                    {"loss": 4.5, "learning_rate": 0.001, "step": 20},
                    {"loss": 3.25, "learning_rate": 0.0005, "step": 40},
                    {"eval_loss": 3.5, "step": 40, "num_input_tokens_seen": 5120},
                ],
            }
        )
    )
    run_info = tmp_path / "run_info.json"
    run_info.write_text(json.dumps({"learning_rate": 0.002, "train_loss": 3.0}))  # explicit facts win

    assert (
        export_main(
            [
                str(ckpt),
                str(tmp_path / "out"),
                "--dataset",
                "stdlib-code",
                "--run-info",
                str(run_info),
                "--repo-id",
                "me/sas-p-tiny",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "exported to" in printed and "model.safetensors" in printed
    out = tmp_path / "out"
    assert {p.name for p in out.iterdir()} == EXPORT_FILES | TOKENIZER_FILES | {"generation_config.json"}
    from safetensors.torch import load_file

    saved = load_file(out / "model.safetensors")
    state = model.state_dict()
    assert saved and all(torch.equal(saved[k], state[k]) for k in saved)
    text = (out / "README.md").read_text()
    for row in (
        "| optimizer steps | 40 |",
        "| final training loss | 3 |",
        "| final evaluation loss | 3.5 |",
        "| tokens seen | 5,120 |",
        "| peak learning rate | 0.002 |",
        "| data | stdlib-code |",
        f"| evaluation perplexity | {math.exp(3.5):.4g} |",
        'REPO_ID = "me/sas-p-tiny"',
    ):
        assert row in text, row

    # errors: one line naming the problem, exit status 2, no traceback
    for argv, message in (
        ([str(tmp_path / "nowhere"), str(tmp_path / "o2")], "has no config.json"),
        ([str(ckpt), str(ckpt)], "is not empty and is not a previous export"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            export_main(argv)
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith("simplified-export: error:") and message in err and "Traceback" not in err


# ------------------------------------------------------------------------------------------------------------------
# model cards
# ------------------------------------------------------------------------------------------------------------------
def test_card_metadata_parses_and_validates(hub_env, tmp_path, bpe_tokenizer, wordpiece_tokenizer):
    from huggingface_hub import ModelCard

    cases = [
        (SimplifiedForCausalLM, "sas", bpe_tokenizer, "text-generation"),
        (SimplifiedForMaskedLM, "normformer", wordpiece_tokenizer, "fill-mask"),
        (SimplifiedForSequenceClassification, "simplest", wordpiece_tokenizer, "text-classification"),
    ]
    for cls, block_type, tokenizer, pipeline_tag in cases:
        model = make_model(cls, block_type, vocab_size=len(tokenizer))
        run_info = {
            "dataset": "embedded: stdlib text",
            "datasets": ["stdlib-code", "me/pydoc-topics"],
            "eval_loss": 2.0,
            "train_loss": 1.9,
            "steps": 100,
            "license": "mit",
            "base_model": "me/base",
        }
        out = export_model(model, tmp_path / cls.__name__, tokenizer=tokenizer, run_info=run_info)
        card = ModelCard.load(out / "README.md")
        data = card.data
        assert data.library_name == "transformers" and data.pipeline_tag == pipeline_tag
        assert {"custom_code", block_type, "simplified-transformers"} <= set(data.tags)
        # only Hub-id-like names go to the `datasets` metadata; the free-text source is in the body and model-index
        assert data.datasets == ["stdlib-code", "me/pydoc-topics"] and data.license == "mit"
        assert "| data | embedded: stdlib text, stdlib-code, me/pydoc-topics |" in card.text
        assert {(r.dataset_name, r.dataset_type) for r in data.eval_results} == {("embedded: stdlib text", "custom")}
        assert data.base_model == "me/base"
        metrics = {r.metric_type: r.metric_value for r in data.eval_results}
        expected = (
            {"loss": 2.0}
            if cls is SimplifiedForSequenceClassification
            else {"loss": 2.0, "perplexity": round(math.exp(2.0), 4)}
        )
        assert metrics == expected
        assert {r.task_type for r in data.eval_results} == {pipeline_tag}
        assert "model-index" in card.content and "trust_remote_code=True" in card.text
        assert ("NormFormer: Improved Transformer Pretraining" in card.text) == (block_type == "normformer")
        assert "He, Bobby and Hofmann, Thomas" in card.text
        card.validate()  # the local Hub's validate-yaml route
    broken = ModelCard(card.content.replace("license: mit", "license: not-a-license"))
    with pytest.raises(ValueError, match="license"):
        broken.validate()


def _authors_variants() -> dict[str, SimplifiedConfig]:
    """Our configs of the authors' variants, built as `conversion/original.py` builds them (no checkpoint needed)."""
    from test_conversion import VARIANTS, _their_config

    from modeling_simplified.conversion.original import original_config

    return {f"authors-{name}": original_config(_their_config(name)) for name in VARIANTS}


def _card_configs() -> dict[str, SimplifiedConfig]:
    configs = {block_type: tiny_config(block_type) for block_type in BLOCK_TYPES}
    configs.update(_authors_variants())
    # a preset name that does not say what the fields build: block_type "parallel" with SAS-P's overrides
    configs["parallel-with-sas_p-fields"] = tiny_config(
        "parallel", **{k: v for k, v in BLOCK_PRESETS["sas_p"].items() if k != "beta_ff_init"}
    )
    return configs


@pytest.mark.parametrize("name, config", list(_card_configs().items()))
def test_card_tags_and_summary_agree_with_the_fields(tmp_path, name, config):
    """The card's tags, title and summary come from the expanded config fields, never from the `block_type` name:
    a converted authors' SAS-P model saved as `block_type="parallel"` is tagged and described as SAS-P."""
    text = card_mod.render_card(config, "SimplifiedForCausalLM").text
    data = card_mod.card_data(config, "SimplifiedForCausalLM")
    summary, removed = card_mod.block_summary(config), card_mod.removed_parts(config)
    shaped, parallel = config.attention_type == "shaped", config.parallel_block
    centred = shaped and config.centre_attention
    assert ("shaped-attention" in data.tags) == shaped
    assert ("shaped attention" in summary) == centred and ("`α·I + β·A`" in summary) == (shaped and not centred)
    assert ("parallel" in summary) == parallel
    assert ("without normalisation" in summary or "no normalisation" in summary) == (config.norm_type == "none")
    assert any("W^V" in part for part in removed) == (config.value_mode == "identity")
    assert any("W^P" in part for part in removed) == (config.projection_mode == "identity")
    no_skip = config.mlp_skip_gain == 0 or (not parallel and config.attn_skip_gain == 0)
    assert any("skip" in part for part in removed) == no_skip
    named = card_mod.block_name(config)
    assert named in data.tags if named else "custom-block" in data.tags
    if named is not None:  # the named block's preset has exactly these structural fields
        preset = SimplifiedConfig(block_type=named)
        assert card_mod.block_structure(preset) == card_mod.block_structure(config)
        assert summary == BLOCKS[named].summary
    assert f"A `{named or 'custom'}` transformer" in text and summary in text
    if name in BLOCK_TYPES:
        assert named == name
    expected = {"authors-sas_p": "sas_p", "parallel-with-sas_p-fields": "sas_p", "authors-sas_p_no_norms": "simplest"}
    if name in expected:
        assert named == expected[name] and "shaped-attention" in data.tags


def test_readme_block_table_agrees_with_the_fields():
    """The README's block-type table says what `block_structure` reads from each preset's expanded fields (a row
    `as `X`, and ...` also claims X's row)."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    table = dict(re.findall(r"^\| `(\w+)` \| [\d.]+M \| (.+?) \|$", readme, re.MULTILINE))
    assert list(table) == list(BLOCK_TYPES)

    def claims(block_type: str) -> str:
        row = table[block_type]
        based_on = re.match(r"as `(\w+)`", row)
        return row + (" " + claims(based_on.group(1)) if based_on else "")

    for block_type in BLOCK_TYPES:
        s, row = dict(card_mod.block_structure(SimplifiedConfig(block_type=block_type))), claims(block_type)
        assert ("parallel" in row) == s["parallel_block"], block_type
        assert ("`α·I + β·A − γ·C`" in row) == s["centred"], block_type
        assert ("`α·I + β·A`" in row) == (s["attention_type"] == "shaped" and not s["centred"]), block_type
        assert ("W^V and W^P (identity" in row) == (s["value_removed"] and s["projection_removed"]), block_type
        assert ("removes the block norms" in row) == (not s["block_norms"]), block_type
        assert ("head-wise scales" in row) == any(s["normformer"]), block_type


def test_card_parameter_saving_against_pre_ln_twin(tmp_path):
    config = tiny_config("sas")
    report = card_mod.parameter_report(config, "SimplifiedForCausalLM")
    own = sum(p.numel() for p in SimplifiedForCausalLM(config).parameters())
    twin = SimplifiedForCausalLM(tiny_config("pre_ln"))
    assert report["parameters"] == own
    assert report["pre_ln_parameters"] == sum(p.numel() for p in twin.parameters())
    assert report["saving"] == report["pre_ln_parameters"] - own > 0
    # fields the user set explicitly survive in the twin; preset fields are reset to pre_ln's
    custom = tiny_config("simplest", hidden_act="swiglu", intermediate_size=48, attention_bias=True)
    twin_config = card_mod.pre_ln_twin(custom)
    assert (
        twin_config.block_type,
        twin_config.hidden_act,
        twin_config.intermediate_size,
        twin_config.attention_bias,
        twin_config.norm_type,
        twin_config.value_mode,
    ) == ("pre_ln", "swiglu", 48, True, "rmsnorm", "linear")
    # the paper's shapes (He & Hofmann §4.2 and Table 1; NormFormer Table 2), counted on the meta device
    gpt = dict(
        vocab_size=50257,
        hidden_size=768,
        num_hidden_layers=18,
        num_attention_heads=12,
        position_embedding_type="learned",
    )
    sas = card_mod.parameter_report(SimplifiedConfig(block_type="sas", **gpt), "SimplifiedForCausalLM")
    assert (round(sas["pre_ln_parameters"] / 1e6), round(sas["parameters"] / 1e6)) == (167, 146)
    bert = dict(
        vocab_size=32768,
        hidden_size=768,
        num_hidden_layers=16,
        num_attention_heads=12,
        hidden_act="geglu",
        intermediate_size=1536,
        norm_type="layernorm",
        position_embedding_type="sinusoidal",
    )  # cramming's parameter-free positions
    sas_p = card_mod.parameter_report(SimplifiedConfig(block_type="sas_p", **bert), "SimplifiedForMaskedLM")
    assert (round(sas_p["pre_ln_parameters"] / 1e6), math.floor(sas_p["parameters"] / 1e6)) == (120, 101)
    normformer = card_mod.parameter_report(
        SimplifiedConfig(block_type="normformer", **{**gpt, "num_hidden_layers": 12}), "SimplifiedForCausalLM"
    )
    assert 0.05e6 < -normformer["saving"] < 0.2e6  # NormFormer adds ~0.1M at the 125M shape

    text = export_model(make_model(SimplifiedForCausalLM, "sas"), tmp_path / "out").joinpath("README.md").read_text()
    assert f"| this model (`sas`) | {own:,} |" in text
    assert f"{report['saving']:,} fewer ({report['saving_pct']:.1f}% fewer than Pre-LN)" in text
    assert "the attention output projections W^P in every block" in text
    text = (
        export_model(make_model(SimplifiedForCausalLM, "normformer"), tmp_path / "nf").joinpath("README.md").read_text()
    )
    assert "more than Pre-LN" in text and "keeps every component" in text


def test_pin_snippet_rewrites_only_the_snippet_lines():
    snippet = card_mod.usage_snippet("SimplifiedForCausalLM")
    text = f'intro REVISION = "x"\n```python\n{snippet}\n```\n'
    pinned = card_mod.pin_snippet(text, "me/model", "a" * 40)
    assert 'REPO_ID = "me/model"' in pinned and f'REVISION = "{"a" * 40}"  # pin a commit sha' in pinned
    assert pinned.count("a" * 40) == 1 and 'intro REVISION = "x"' in pinned
    with pytest.raises(ValueError, match="no usage snippet"):
        card_mod.pin_snippet("no snippet here", "me/model", "main")


# ------------------------------------------------------------------------------------------------------------------
# fresh-process loading of exported folders (one process for every case)
# ------------------------------------------------------------------------------------------------------------------
LOAD_FOLDERS = r"""
    import json, sys, inspect, torch
    import transformers
    manifest = json.load(open(sys.argv[1]))
    results = []
    for case in manifest:
        ref = torch.load(case["reference"])
        auto = getattr(transformers, case["auto"])
        res = {"name": case["name"]}
        try:
            auto.from_pretrained(case["dir"])
        except ValueError as exc:
            res["untrusted_error"] = str(exc)
        config = transformers.AutoConfig.from_pretrained(case["dir"], trust_remote_code=True)
        res["config"] = [type(config).__name__, type(config).__module__, config.block_type]
        base = transformers.AutoModel.from_pretrained(case["dir"], trust_remote_code=True).eval()
        head = auto.from_pretrained(case["dir"], trust_remote_code=True).eval()
        res["classes"] = [type(base).__name__, type(head).__name__]
        res["source"] = inspect.getsourcefile(type(head))
        with torch.no_grad():
            hidden = base(input_ids=ref["input_ids"], attention_mask=ref["attention_mask"]).last_hidden_state
            logits = head(input_ids=ref["input_ids"], attention_mask=ref["attention_mask"]).logits
        res["hidden_equal"] = torch.equal(hidden, ref["hidden"])
        res["logits_equal"] = torch.equal(logits, ref["logits"])
        res["max_diff"] = float((logits - ref["logits"]).abs().max())
        if "generated" in ref:
            out = head.generate(ref["input_ids"][:1], max_new_tokens=4, do_sample=False, eos_token_id=None,
                                pad_token_id=0)
            res["generate_equal"] = out.tolist() == ref["generated"]
        results.append(res)
    print("\n@@result@@ " + json.dumps({"results": results,
                                        "modeling_simplified_imported": "modeling_simplified" in sys.modules}))
"""

FOLDER_CASES = [(SimplifiedForCausalLM, bt) for bt in BLOCK_TYPES] + [
    (SimplifiedForMaskedLM, "sas_p"),
    (SimplifiedForMaskedLM, "post_ln"),
    (SimplifiedForSequenceClassification, "sas"),
    (SimplifiedForSequenceClassification, "normformer"),
]


def test_isolated_process_cannot_import_the_package(tmp_path):
    """The fresh-process recipe really hides the editable install (which a plain `python -c` does find)."""
    check = "import importlib.util, json; print(json.dumps(importlib.util.find_spec('modeling_simplified') is None))"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    plain = subprocess.run([sys.executable, "-c", check], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert json.loads(plain.stdout) is False  # the venv's editable finder makes it importable...
    isolated = PRELUDE.split("import torch")[0] + "print('isolated')"
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-c", isolated], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "isolated", proc.stderr  # ...the prelude's asserts hide it


def test_exported_folders_load_in_a_fresh_process(tmp_path):
    manifest = []
    for cls, block_type in FOLDER_CASES:
        name = f"{cls.__name__}-{block_type}"
        model = make_model(cls, block_type, seed=len(manifest))
        out = export_model(model, tmp_path / name)
        manifest.append(
            {
                "name": name,
                "dir": str(out),
                "auto": AUTO[cls],
                "reference": str(reference(model, tmp_path / f"{name}.pt")),
            }
        )
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    report = run_fresh(LOAD_FOLDERS, tmp_path, str(tmp_path / "manifest.json"), env={"HF_HUB_OFFLINE": "1"})
    assert report["modeling_simplified_imported"] is False
    assert [r["name"] for r in report["results"]] == [m["name"] for m in manifest]
    for res, (cls, block_type) in zip(report["results"], FOLDER_CASES):
        assert res["config"][0] == "SimplifiedConfig" and res["config"][2] == block_type, res
        assert res["config"][1].startswith("transformers_modules."), res
        assert res["classes"] == ["SimplifiedModel", cls.__name__], res
        assert str(tmp_path / "fresh-hf-home") in res["source"], res
        assert res["hidden_equal"] and res["logits_equal"], res
        assert res.get("generate_equal", cls is not SimplifiedForCausalLM), res
        assert "trust_remote_code=True" in res.get("untrusted_error", ""), res
        assert "contains custom code" in res["untrusted_error"], res


# ------------------------------------------------------------------------------------------------------------------
# bf16 checkpoints, as the Hub has them
# ------------------------------------------------------------------------------------------------------------------
LOAD_BF16 = r"""
    import json, sys, torch
    import transformers
    results = []
    for case in json.load(open(sys.argv[1])):
        ref = torch.load(case["reference"])
        model = getattr(transformers, case["auto"]).from_pretrained(
            case["dir"], trust_remote_code=True, dtype="auto").eval()
        with torch.no_grad():
            logits = model(input_ids=ref["input_ids"], attention_mask=ref["attention_mask"]).logits
        res = {"name": case["name"], "dtypes": sorted({str(t.dtype) for t in model.state_dict().values()}),
               "logits_dtype": str(logits.dtype), "logits_equal": torch.equal(logits, ref["logits"])}
        if "generated" in ref:
            out = model.generate(ref["input_ids"][:1], max_new_tokens=4, do_sample=False, eos_token_id=None,
                                 pad_token_id=0)
            res["generate_equal"] = out.tolist() == ref["generated"]
        results.append(res)
    print("\n@@result@@ " + json.dumps(results))
"""
BF16_CASES = [(SimplifiedForCausalLM, bt) for bt in ("pre_ln", "sas", "sas_p", "normformer")] + [
    (SimplifiedForMaskedLM, "sas_p")
]


@pytest.mark.slow  # two fresh processes
def test_bf16_checkpoints_save_and_load_as_bf16(tmp_path, capsys):
    """A bf16 model's `save_pretrained` and export write bf16 safetensors with `dtype: bfloat16` in `config.json`, the
    card and the export CLI state it, and a fresh process's `from_pretrained(..., dtype="auto")` (remote code) gets
    the bf16 model back: every tensor bf16, the same logits and greedy continuation bit for bit."""
    manifest = []
    for cls, block_type in BF16_CASES:
        name = f"{cls.__name__}-{block_type}"
        model = make_model(cls, block_type, seed=len(manifest)).to(torch.bfloat16)
        out = export_model(model, tmp_path / name)
        assert json.loads((out / "config.json").read_text())["dtype"] == "bfloat16"
        with safe_open(out / "model.safetensors", framework="pt") as weights:
            assert {weights.get_slice(k).get_dtype() for k in weights.keys()} == {"BF16"}
        assert "The weights are stored in **bfloat16**" in (out / "README.md").read_text()
        manifest.append(
            {
                "name": name,
                "dir": str(out),
                "auto": AUTO[cls],
                "reference": str(reference(model, tmp_path / f"{name}.pt")),
            }
        )
    # the CLI re-exports the saved bf16 folder as bf16 and says so
    assert export_main([manifest[0]["dir"], str(tmp_path / "re-export")]) == 0
    assert "(weights in bfloat16)" in capsys.readouterr().out
    assert json.loads((tmp_path / "re-export" / "config.json").read_text())["dtype"] == "bfloat16"
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    report = run_fresh(LOAD_BF16, tmp_path, str(tmp_path / "manifest.json"), env={"HF_HUB_OFFLINE": "1"})
    assert [r["name"] for r in report] == [m["name"] for m in manifest]
    for res, (cls, _) in zip(report, BF16_CASES):
        assert res["dtypes"] == ["torch.bfloat16"] and res["logits_dtype"] == "torch.bfloat16", res
        assert res["logits_equal"] and res.get("generate_equal", cls is not SimplifiedForCausalLM), res


def test_float32_exports_state_float32():
    """A float32 model's card says float32, with no upcasting note."""
    model = make_model(SimplifiedForCausalLM, "sas")
    text = str(card_mod.render_card(model.config, "SimplifiedForCausalLM"))
    assert "The weights are stored in **float32**" in text and "upcast" not in text


# ------------------------------------------------------------------------------------------------------------------
# push to the local Hub, then load by repo id and by commit sha in a fresh process
# ------------------------------------------------------------------------------------------------------------------
LOAD_PUSHED = r"""
    import contextlib, io, json, re, sys, torch
    import transformers
    manifest = json.load(open(sys.argv[1]))
    results = []
    for case in manifest["loads"]:
        ref = torch.load(case["reference"])
        model = getattr(transformers, case["auto"]).from_pretrained(
            case["repo"], revision=case["revision"], trust_remote_code=True).eval()
        with torch.no_grad():
            logits = model(input_ids=ref["input_ids"], attention_mask=ref["attention_mask"]).logits
        res = {"name": case["name"], "logits_equal": torch.equal(logits, ref["logits"]),
               "module": type(model).__module__}
        if "generated" in ref:
            out = model.generate(ref["input_ids"][:1], max_new_tokens=4, do_sample=False, eos_token_id=None,
                                 pad_token_id=0)
            res["generate_equal"] = out.tolist() == ref["generated"]
        results.append(res)
    snippets = []
    for name, text in manifest["snippets"].items():
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            exec(compile(text, f"<card snippet {name}>", "exec"), {"__name__": "__main__"})
        snippets.append({"name": name, "stdout": stdout.getvalue()})
    print("\n@@result@@ " + json.dumps({"results": results, "snippets": snippets}))
"""


def _snippet(readme: str) -> str:
    blocks = re.findall(r"```python\n(.*?)```", readme, re.DOTALL)
    assert len(blocks) == 1, blocks
    return blocks[0]


def test_push_and_load_from_the_local_hub(hub_env, tmp_path, capsys, bpe_tokenizer, wordpiece_tokenizer):
    from huggingface_hub import hf_hub_download

    api = make_api()
    loads, snippets = [], {}

    def load(name, repo, revision, model, ref):
        loads.append(
            {"name": name, "repo": repo, "revision": revision, "auto": AUTO[type(model)], "reference": str(ref)}
        )

    # 1. the CLI, twice to one repo: the first sha must keep serving the first model
    eos = {"eos_token_id": bpe_tokenizer.eos_token_id, "pad_token_id": bpe_tokenizer.pad_token_id}
    first = make_model(SimplifiedForCausalLM, "sas_p", seed=1, vocab_size=len(bpe_tokenizer), **eos)
    second = make_model(SimplifiedForCausalLM, "sas_p", seed=2, vocab_size=len(bpe_tokenizer), **eos)
    shas = []
    for i, model in enumerate((first, second)):
        export_model(
            model,
            tmp_path / f"causal{i}",
            tokenizer=bpe_tokenizer,
            run_info={"dataset": "stdlib-code", "eval_loss": 3.0 - i},
        )
        assert push_main([str(tmp_path / f"causal{i}"), "me/causal", "--commit-message", f"model {i}"]) == 0
        printed = capsys.readouterr().out
        sha = re.search(r"^sha: ([0-9a-f]{40})$", printed, re.MULTILINE).group(1)
        assert f"commit: {hub_env.url}/me/causal/commit/{sha}\n" in printed
        shas.append(sha)
        load(f"causal{i}-by-sha", "me/causal", sha, model, reference(model, tmp_path / f"causal{i}.pt"))
    load("causal-by-id", "me/causal", None, second, tmp_path / "causal1.pt")
    commits = [c.title for c in api.list_repo_commits("me/causal")]
    assert commits[:4] == [
        f"Pin the card's usage snippet to {shas[1]}",
        "model 1",
        f"Pin the card's usage snippet to {shas[0]}",
        "model 0",
    ]
    readme = Path(hf_hub_download("me/causal", "README.md", cache_dir=tmp_path / "c", token=TOKEN)).read_text()
    snippets["causal"] = _snippet(readme)
    assert f'REVISION = "{shas[1]}"' in snippets["causal"] and 'REPO_ID = "me/causal"' in snippets["causal"]
    assert "trust_remote_code=True" in snippets["causal"]

    # 2. masked LM to a private repo on a branch, through the Python API
    mlm = make_model(SimplifiedForMaskedLM, "sas", vocab_size=len(wordpiece_tokenizer))
    export_model(mlm, tmp_path / "mlm", tokenizer=wordpiece_tokenizer)
    result = push_export(tmp_path / "mlm", "me/mlm", private=True, revision="v1")
    assert api.model_info("me/mlm", revision="v1").sha == result.card_commit_sha
    load("mlm-by-sha", "me/mlm", result.commit_sha, mlm, reference(mlm, tmp_path / "mlm.pt"))
    readme = Path(
        hf_hub_download("me/mlm", "README.md", revision="v1", cache_dir=tmp_path / "c", token=TOKEN)
    ).read_text()
    snippets["mlm"] = _snippet(readme)

    # 3. transformers' own push_to_hub also makes a loadable custom-code repo
    pushed = make_model(SimplifiedForCausalLM, "simplest", seed=3)
    pushed.push_to_hub("me/via-push-to-hub", token=TOKEN)
    files = {s.rfilename for s in api.model_info("me/via-push-to-hub").siblings}
    assert {*CODE_FILES, "config.json", "model.safetensors"} <= files
    load("push_to_hub", "me/via-push-to-hub", None, pushed, reference(pushed, tmp_path / "pushed.pt"))

    # errors: one line, exit status 1
    for argv, env, message in (
        ([str(tmp_path / "mlm"), "me/x"], {"HF_TOKEN": "wrong"}, "401"),
        ([str(tmp_path), "me/x"], {}, "is not an export folder"),
        ([str(tmp_path / "mlm"), "no-namespace"], {}, "REPO_ID must look like"),
    ):
        with pytest.MonkeyPatch.context() as mp:
            for k, v in env.items():
                mp.setenv(k, v)
            with pytest.raises(SystemExit) as exit_info:
                push_main(argv)
        err = capsys.readouterr().err
        assert exit_info.value.code == 1 and err.startswith("simplified-push: error:") and message in err, err
        assert "Traceback" not in err

    (tmp_path / "manifest.json").write_text(json.dumps({"loads": loads, "snippets": snippets}))
    report = run_fresh(
        LOAD_PUSHED,
        tmp_path,
        str(tmp_path / "manifest.json"),
        env={"HF_ENDPOINT": hub_env.url, "HF_TOKEN": TOKEN, "HF_HUB_OFFLINE": "0"},
    )
    assert [r["name"] for r in report["results"]] == [case["name"] for case in loads]
    for res in report["results"]:
        assert res["logits_equal"], res
        assert res.get("generate_equal", True), res
    by_name = {r["name"]: r for r in report["results"]}
    assert shas[0] in by_name["causal0-by-sha"]["module"] and shas[1] in by_name["causal1-by-sha"]["module"]
    outputs = {s["name"]: s["stdout"] for s in report["snippets"]}
    assert set(outputs) == {"causal", "mlm"} and all(o.strip() for o in outputs.values()), outputs
    assert outputs["causal"].startswith("def fibonacci(n):"), outputs  # no trust prompt, the decoded prompt first


# ------------------------------------------------------------------------------------------------------------------
# the "Publish to the Hub" commands (docs/hub.md), run as written
# ------------------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_readme_publish_commands_run_as_written(tmp_path, bpe_tokenizer):
    readme = (Path(__file__).resolve().parent.parent / "docs" / "hub.md").read_text()
    section = readme.split("<!-- SECTION:hub -->", 1)[1].split("<!-- SECTION:", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.DOTALL)
    export_push_load, server_block = blocks[:3], blocks[3]
    token = re.search(r"--token (\S+)", server_block).group(1)
    assert f"HF_TOKEN={token}" in server_block
    # the checkpoint the README exports: a Trainer-style folder at the path it names
    ckpt = tmp_path / re.search(r"simplified-export (\S+)", export_push_load[0]).group(1)
    model = make_model(
        SimplifiedForCausalLM, "sas_p", vocab_size=len(bpe_tokenizer), eos_token_id=bpe_tokenizer.eos_token_id
    )
    model.save_pretrained(ckpt)
    bpe_tokenizer.save_pretrained(ckpt)
    (ckpt / "trainer_state.json").write_text(json.dumps({"global_step": 20, "log_history": [{"loss": 5.0}]}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    with HubServer(tmp_path / "hub", token=token) as hub:
        env.update(
            HF_ENDPOINT=hub.url,
            HF_TOKEN=token,
            HF_HUB_OFFLINE="0",
            HF_HOME=str(tmp_path / "home"),
            PATH=f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}",
        )
        script = "set -euo pipefail\n" + "\n".join(export_push_load)
        proc = subprocess.run(
            ["bash", "-c", script],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=600,
        )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "exported to" in proc.stdout and proc.stdout.rstrip().splitlines()[-1].startswith("def main(")
    assert any(r.startswith("POST /api/models/your-name/") for r in hub.requests)
