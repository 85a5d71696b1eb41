"""Every folder and Hub repo the family writes loads with every Auto class and `trust_remote_code=True`, in a fresh
process that cannot import this package: `save_pretrained` of each model class, `push_to_hub`, the Trainer's
`save_model`, checkpoints and `push_to_hub`, and `simplified-export`. Base weights load exactly, a head that is not in
the checkpoint is initialised and reported missing by transformers, and nothing that was in the checkpoint is
re-initialised."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import MASKED, TOKEN, perturb_
from test_hub import make_model, run_fresh

from modeling_simplified import (
    SimplifiedForCausalLM,
    SimplifiedForMaskedLM,
    SimplifiedForSequenceClassification,
    SimplifiedModel,
)
from modeling_simplified.hub_cards.cli import export_main
from modeling_simplified.hub_cards.export import export_model

PACKAGE = Path(__file__).resolve().parents[1] / "modeling_simplified"
SHIPPED = (
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
)
AUTO_CLASSES = ("AutoModel", "AutoModelForCausalLM", "AutoModelForMaskedLM", "AutoModelForSequenceClassification")
FULL_AUTO_MAP = {
    "AutoConfig": "configuration_simplified.SimplifiedConfig",
    "AutoModel": "modeling_simplified.SimplifiedModel",
    "AutoModelForCausalLM": "modeling_simplified.SimplifiedForCausalLM",
    "AutoModelForMaskedLM": "modeling_simplified.SimplifiedForMaskedLM",
    "AutoModelForSequenceClassification": "modeling_simplified.SimplifiedForSequenceClassification",
}
CLASS_OF = {
    "AutoModel": "SimplifiedModel",
    "AutoModelForCausalLM": "SimplifiedForCausalLM",
    "AutoModelForMaskedLM": "SimplifiedForMaskedLM",
    "AutoModelForSequenceClassification": "SimplifiedForSequenceClassification",
}


CLASSES = (SimplifiedModel, SimplifiedForCausalLM, SimplifiedForMaskedLM, SimplifiedForSequenceClassification)


def _download(repo: str, tmp_path: Path) -> Path:
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(repo, cache_dir=tmp_path / "downloads", token=TOKEN))


def _check_folder(folder: Path):
    """The saved folder holds exactly the shipped flat modules, byte for byte, and the full auto_map."""
    assert sorted(p.name for p in folder.glob("*.py")) == sorted(SHIPPED)
    for name in SHIPPED:
        assert (folder / name).read_bytes() == (PACKAGE / name).read_bytes(), name
    assert json.loads((folder / "config.json").read_text())["auto_map"] == FULL_AUTO_MAP


@torch.no_grad()
def _reference(model, path: Path) -> str:
    """What the fresh process compares with: the base model's state dict and hidden states, the writer's class."""
    base = model.base_model if not isinstance(model, SimplifiedModel) else model
    gen = torch.Generator().manual_seed(3)
    ids = torch.randint(3, model.config.vocab_size, (2, 7), generator=gen)
    mask = torch.ones_like(ids)
    mask[1, :2] = 0  # left padding
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the fresh process runs: the same kernels, bit-identical results
    try:
        hidden = base(input_ids=ids, attention_mask=mask).last_hidden_state
    finally:
        torch.set_num_threads(threads)
    torch.save(
        {
            "base_state": {k: v.clone() for k, v in base.state_dict().items()},
            "hidden": hidden,
            "input_ids": ids,
            "attention_mask": mask,
            "state": dict(model.state_dict()),
        },
        path,
    )
    return str(path)


#: For each (folder or repo, revision) and each Auto class: config class, loaded class, base hidden states and base
#: weights equal, the loading info, and whether every loaded tensor that the writer also had is unchanged.
LOAD_MATRIX = r"""
    import json, sys, torch, transformers
    manifest = json.load(open(sys.argv[1]))
    out = []
    for case in manifest:
        ref = torch.load(case["reference"])
        kw = dict(revision=case["revision"], trust_remote_code=True)
        config = transformers.AutoConfig.from_pretrained(case["source"], **kw)
        row = {"name": case["name"], "config": type(config).__name__, "loads": {}}
        for auto in case["autos"]:
            model, info = getattr(transformers, auto).from_pretrained(case["source"], output_loading_info=True, **kw)
            model.eval()
            base = model.base_model
            with torch.no_grad():
                hidden = base(input_ids=ref["input_ids"], attention_mask=ref["attention_mask"]).last_hidden_state
            state = model.state_dict()
            prefix = "" if base is model else model.base_model_prefix + "."
            same_class = type(model).__name__ == case["writer"]
            kept = [k for k, v in ref["state"].items() if same_class and k in state and not torch.equal(state[k], v)]
            row["loads"][auto] = {
                "class": type(model).__name__,
                "remote": type(model).__module__.startswith("transformers_modules."),
                "hidden_equal": torch.equal(hidden, ref["hidden"]),
                "base_equal": all(torch.equal(base.state_dict()[k], v) for k, v in ref["base_state"].items())
                              and set(base.state_dict()) == set(ref["base_state"]),
                "missing": sorted(info["missing_keys"]),
                "head_keys": sorted(k for k in state if not k.startswith(prefix) or not prefix),
                "changed_same_class": kept,
                "prefix": prefix,
            }
        out.append(row)
    print("\n@@result@@ " + json.dumps(out))
"""


def _check_matrix(report: list[dict], manifest: list[dict]):
    assert [r["name"] for r in report] == [m["name"] for m in manifest]
    for row, case in zip(report, manifest):
        assert row["config"] == "SimplifiedConfig", row
        for auto, res in row["loads"].items():
            where = f"{row['name']} with {auto}"
            assert res["class"] == CLASS_OF[auto] and res["remote"], where
            assert res["hidden_equal"] and res["base_equal"], (where, res)
            assert not [k for k in res["missing"] if res["prefix"] and k.startswith(res["prefix"])], (where, res)
            if res["class"] == case["writer"]:
                assert res["missing"] == [] and res["changed_same_class"] == [], (where, res)
            else:  # a new head: initialised, and transformers reports exactly its untied weights as missing
                assert set(res["missing"]) <= set(res["head_keys"]), (where, res)
                expected = {
                    "SimplifiedForSequenceClassification": {"score.weight", "score.bias"},
                    "SimplifiedForMaskedLM": {"mlm_head.dense.weight", "mlm_head.dense.bias", "mlm_head.decoder.bias"},
                }.get(res["class"], set())
                assert expected <= set(res["missing"]), (where, res)


def _trained_with_trainer(model, out: Path, hub_model_id: str | None = None):
    """Two Trainer steps with a checkpoint, then `save_model` (and `push_to_hub` when a repo is given)."""
    from transformers import Trainer, TrainingArguments

    gen = torch.Generator().manual_seed(0)
    rows = [{"input_ids": torch.randint(3, model.config.vocab_size, (8,), generator=gen)} for _ in range(4)]
    for r in rows:
        r["labels"] = r["input_ids"].clone() if not isinstance(model, SimplifiedForSequenceClassification) else 1
    args = TrainingArguments(
        output_dir=str(out),
        max_steps=2,
        per_device_train_batch_size=2,
        save_steps=2,
        report_to="none",
        use_cpu=True,
        learning_rate=1e-3,
        push_to_hub=hub_model_id is not None,
        hub_model_id=hub_model_id,
        hub_token=TOKEN if hub_model_id else None,
        hub_strategy="end",
    )
    trainer = Trainer(model=model, args=args, train_dataset=rows)
    trainer.train()
    trainer.save_model(str(out / "saved"))
    if hub_model_id is not None:
        trainer.push_to_hub(commit_message="trainer push")
    model.eval()
    return trainer


@pytest.mark.parametrize("block_type", ["sas_p", "pre_ln"])
def test_every_writer_loads_with_every_auto_class(block_type, hub_env, tmp_path):
    manifest = []

    def add(name, source, writer, model, revision=None, folder=None):
        if folder is not None:
            _check_folder(folder)
        manifest.append(
            {
                "name": name,
                "source": str(source),
                "revision": revision,
                "writer": writer,
                "autos": list(AUTO_CLASSES),
                "reference": _reference(model, tmp_path / f"{name}.pt"),
            }
        )

    # save_pretrained of every class
    for i, cls in enumerate(CLASSES):
        model = make_model(cls, block_type, seed=i)
        model.save_pretrained(tmp_path / cls.__name__)
        add(
            f"save_pretrained-{cls.__name__}",
            tmp_path / cls.__name__,
            cls.__name__,
            model,
            folder=tmp_path / cls.__name__,
        )
    # model.push_to_hub of every class; the repo holds the shipped code and the full auto_map
    for i, cls in enumerate(CLASSES):
        pushed = make_model(cls, block_type, seed=10 + i)
        repo = f"me/auto-{block_type}-{cls.__name__}"
        pushed.push_to_hub(repo, token=TOKEN)
        add(f"push_to_hub-{cls.__name__}", repo, cls.__name__, pushed, folder=_download(repo, tmp_path))
    # the Trainer with every head: save_model, its checkpoint, push_to_hub
    for i, cls in enumerate(CLASSES[1:]):
        trained = make_model(cls, block_type, seed=20 + i).train()
        out, repo = tmp_path / f"trainer-{cls.__name__}", f"me/trainer-{block_type}-{cls.__name__}"
        _trained_with_trainer(trained, out, hub_model_id=repo)
        add(f"trainer-save_model-{cls.__name__}", out / "saved", cls.__name__, trained, folder=out / "saved")
        add(
            f"trainer-checkpoint-{cls.__name__}",
            out / "checkpoint-2",
            cls.__name__,
            trained,
            folder=out / "checkpoint-2",
        )
        add(f"trainer-push_to_hub-{cls.__name__}", repo, cls.__name__, trained, folder=_download(repo, tmp_path))
    # simplified-export: the CLI on a Trainer checkpoint, and export_model on a model in memory
    checkpoint = tmp_path / "trainer-SimplifiedForCausalLM" / "checkpoint-2"
    assert export_main([str(checkpoint), str(tmp_path / "export-cli")]) == 0
    from_checkpoint = SimplifiedForCausalLM.from_pretrained(checkpoint).eval()
    add(
        "simplified-export-cli",
        tmp_path / "export-cli",
        "SimplifiedForCausalLM",
        from_checkpoint,
        folder=tmp_path / "export-cli",
    )
    exported = make_model(SimplifiedForSequenceClassification, block_type, seed=7)
    export_model(exported, tmp_path / "export")
    add(
        "export_model", tmp_path / "export", "SimplifiedForSequenceClassification", exported, folder=tmp_path / "export"
    )

    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    report = run_fresh(
        LOAD_MATRIX,
        tmp_path,
        str(tmp_path / "manifest.json"),
        env={"HF_ENDPOINT": hub_env.url, "HF_TOKEN": TOKEN, "HF_HUB_OFFLINE": "0"},
    )
    _check_matrix(report, manifest)


def test_a_repo_pushed_twice_stays_consistent(hub_env, tmp_path):
    """Causal LM pushed, then a classifier fine-tuned from it pushed to the same repo: the repo keeps the full
    auto_map and the shipped code, and every Auto class loads the newest base weights."""
    from huggingface_hub import snapshot_download
    from transformers import AutoModelForSequenceClassification

    repo = "me/pushed-twice"
    causal = make_model(SimplifiedForCausalLM, "sas_p", seed=1)
    causal.push_to_hub(repo, token=TOKEN)
    classifier = AutoModelForSequenceClassification.from_pretrained(repo, num_labels=2, token=TOKEN)
    assert isinstance(classifier, SimplifiedForSequenceClassification)
    assert torch.equal(classifier.model.embed_tokens.weight, causal.model.embed_tokens.weight)
    perturb_(classifier, seed=9).eval()
    classifier.push_to_hub(repo, token=TOKEN)
    folder = Path(snapshot_download(repo, cache_dir=tmp_path / "dl", token=TOKEN))
    _check_folder(folder)
    assert json.loads((folder / "config.json").read_text())["architectures"] == ["SimplifiedForSequenceClassification"]
    manifest = [
        {
            "name": "pushed-twice",
            "source": repo,
            "revision": None,
            "writer": "SimplifiedForSequenceClassification",
            "autos": list(AUTO_CLASSES),
            "reference": _reference(classifier, tmp_path / "ref.pt"),
        }
    ]
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    report = run_fresh(
        LOAD_MATRIX,
        tmp_path,
        str(tmp_path / "manifest.json"),
        env={"HF_ENDPOINT": hub_env.url, "HF_TOKEN": TOKEN, "HF_HUB_OFFLINE": "0"},
    )
    _check_matrix(report, manifest)


PIPELINES = r"""
    import json, sys, transformers
    out = {}
    for task, repo, text in json.load(open(sys.argv[1])):
        pipe = transformers.pipeline(task, model=repo, trust_remote_code=True)
        kw = dict(max_new_tokens=3, do_sample=False) if task == "text-generation" else {}
        result = pipe(text, **kw)
        out[task] = {"model": type(pipe.model).__name__, "module": type(pipe.model).__module__, "result": result}
    print("\n@@result@@ " + json.dumps(out))
"""


def test_pipelines_load_repos_pushed_with_the_standard_call(hub_env, tmp_path, bpe_tokenizer, wordpiece_tokenizer):
    cases = []
    for task, cls, tok, text in (
        ("text-generation", SimplifiedForCausalLM, bpe_tokenizer, "def main("),
        ("fill-mask", SimplifiedForMaskedLM, wordpiece_tokenizer, "the [MASK] module"),
        ("text-classification", SimplifiedForSequenceClassification, wordpiece_tokenizer, "the json module"),
    ):
        model = make_model(
            cls, "sas_p", vocab_size=len(tok), pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id
        )
        repo = f"me/pipe-{task}"
        model.push_to_hub(repo, token=TOKEN)
        tok.push_to_hub(repo, token=TOKEN)
        cases.append((task, repo, text))
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    report = run_fresh(
        PIPELINES,
        tmp_path,
        str(tmp_path / "cases.json"),
        env={"HF_ENDPOINT": hub_env.url, "HF_TOKEN": TOKEN, "HF_HUB_OFFLINE": "0"},
    )
    assert report["text-generation"]["model"] == "SimplifiedForCausalLM"
    generated = report["text-generation"]["result"][0]["generated_text"]
    assert generated.startswith("def main(") and len(generated) > len("def main(")
    assert report["fill-mask"]["model"] == "SimplifiedForMaskedLM" and len(report["fill-mask"]["result"]) == 5
    assert all("[MASK]" not in r["sequence"] for r in report["fill-mask"]["result"])
    label = report["text-classification"]["result"][0]
    assert report["text-classification"]["model"] == "SimplifiedForSequenceClassification"
    assert label["label"] in {"neg", "neutral", "pos"} and 0 < label["score"] <= 1
    assert all(r["module"].startswith("transformers_modules.") for r in report.values())


FINE_TUNE = r"""
    import json, sys, torch, transformers
    from transformers import AutoModelForSequenceClassification, Trainer, TrainingArguments, DataCollatorWithPadding
    spec = json.load(open(sys.argv[1]))
    data = torch.load(spec["data"])
    tok = transformers.AutoTokenizer.from_pretrained(spec["repo"])
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(spec["repo"], num_labels=2, trust_remote_code=True)
    args = TrainingArguments(output_dir=spec["out"], max_steps=40, per_device_train_batch_size=16,
                             learning_rate=1e-3, lr_scheduler_type="cosine", report_to="none", use_cpu=True,
                             save_strategy="no", seed=0)
    trainer = Trainer(model=model, args=args, train_dataset=data["train"], data_collator=DataCollatorWithPadding(tok))
    trainer.train()
    preds = trainer.predict(data["eval"]).predictions.argmax(-1)
    labels = [row["labels"] for row in data["eval"]]
    accuracy = sum(int(p == l) for p, l in zip(preds, labels)) / len(labels)
    majority = max(labels.count(0), labels.count(1)) / len(labels)
    print("\n@@result@@ " + json.dumps({"accuracy": accuracy, "majority": majority, "class": type(model).__name__}))
"""


@pytest.mark.slow  # trains twice (~1-2 min); run by .ci/run's test-slow
def test_fine_tuning_a_pushed_language_model_in_a_fresh_process(hub_env, tmp_path):
    """Train a tiny masked LM, publish it with the standard `push_to_hub`, then fine-tune it into a classifier
    through `AutoModelForSequenceClassification` in a process without the package: it beats the majority class."""
    from modeling_simplified.training.cli import main as train_main
    from modeling_simplified.training.data import build_task_data
    from modeling_simplified.training.presets import DataSpec

    run = tmp_path / "mlm"
    assert train_main([*MASKED, "--max-steps", "24", "--output-dir", str(run)]) == 0
    model = SimplifiedForMaskedLM.from_pretrained(run / "export")
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(run / "export")
    model.push_to_hub("me/mlm-to-classify", token=TOKEN)
    tokenizer.push_to_hub("me/mlm-to-classify", token=TOKEN)
    task = build_task_data(
        "sequence-classification", DataSpec(seq_len=64), model.config.vocab_size, tokenizer=tokenizer
    )

    def rows(ds):
        return [{"input_ids": r["input_ids"], "attention_mask": r["attention_mask"], "labels": r["label"]} for r in ds]

    torch.save({"train": rows(task.train), "eval": rows(task.eval)}, tmp_path / "data.pt")
    (tmp_path / "spec.json").write_text(
        json.dumps({"repo": "me/mlm-to-classify", "data": str(tmp_path / "data.pt"), "out": str(tmp_path / "ft")})
    )
    report = run_fresh(
        FINE_TUNE,
        tmp_path,
        str(tmp_path / "spec.json"),
        timeout=900,
        env={"HF_ENDPOINT": hub_env.url, "HF_TOKEN": TOKEN, "HF_HUB_OFFLINE": "0"},
    )
    assert report["class"] == "SimplifiedForSequenceClassification"
    assert 0.5 <= report["majority"] < 0.6
    assert report["accuracy"] > report["majority"] + 0.05, report


def test_readme_usage_snippet_runs_as_written(tmp_path, monkeypatch):
    """The README's Usage example (build, save_pretrained, load with three Auto classes) runs as written."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    snippet = readme.split("### Usage", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(snippet, "README.md (Usage)", "exec"), namespace)
    _check_folder(tmp_path / "my-sas_p")
    assert type(namespace["clf"]).__name__ == "SimplifiedForSequenceClassification"
    assert torch.equal(namespace["base"].embed_tokens.weight, namespace["model"].model.embed_tokens.weight)
