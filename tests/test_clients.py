"""The clients researchers bring, on this family (docs/clients.md): the paper's no-decay rule (App. D.1) under the
plain `Trainer`, TRL's `SFTTrainer` and an accelerate loop, with one warning when an optimizer decays a gain;
lm-evaluation-harness scoring a tiny export as the model itself computes it; TRL fine-tuning one, plain and packed,
saved and reloaded exactly; torchao quantizing every matrix through `quantization_config` and decoding. Each harness
is first run on a native transformers model (GPT-2, Llama), where the answer is transformers' own."""

import inspect
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from conftest import perturb_, tiny_config
from transformers import (
    AutoModelForCausalLM,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    Trainer,
    TrainingArguments,
)

import modeling_simplified.weight_decay_simplified as weight_decay
from modeling_simplified import SimplifiedForCausalLM
from modeling_simplified.hub_cards.export import export_model
from modeling_simplified.modeling_simplified import ReparamLinear
from modeling_simplified.optimization import decay_parameter_names

ROOT = Path(__file__).resolve().parents[1]
LR, WD = 0.5, 0.1


def client(name: str):
    """The client package `name` (an extra, `clients`, which `make test-clients` installs in a venv of its own:
    torchao logs at import, and transformers imports it in every process that loads a model)."""
    return pytest.importorskip(name, reason=f"{name}: pip install -e '.[clients]' (make test-clients)")


# -- the no-decay rule -------------------------------------------------------------------------------------------
def _args(tmp_path, **kw) -> TrainingArguments:
    return TrainingArguments(
        output_dir=str(tmp_path / "run"), learning_rate=LR, weight_decay=WD, use_cpu=True, report_to="none", **kw
    )


def _step_with_zero_gradients(
    optimizer: torch.optim.Optimizer, model: torch.nn.Module
) -> list[warnings.WarningMessage]:
    """One optimizer step with every gradient zero: AdamW then applies its decoupled weight decay only (a decayed
    parameter shrinks by `1 - lr·wd`, any other stays put). Returns the warnings the step raised."""
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        optimizer.step()
    return [w for w in caught if "weight decay" in str(w.message)]


def _decayed(model: torch.nn.Module, before: dict[str, torch.Tensor]) -> set[str]:
    """The parameters a zero-gradient step changed (all of them by exactly the decay factor)."""
    changed = set()
    for name, param in model.named_parameters():
        if not torch.equal(param.detach(), before[name]):
            torch.testing.assert_close(param.detach(), before[name] * (1 - LR * WD), rtol=0, atol=1e-7, msg=name)
            changed.add(name)
    return changed


def _snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def _gains(model: torch.nn.Module) -> set[str]:
    names = {id(p): n for n, p in model.named_parameters()}
    return {names[i] for i in weight_decay.gain_names(model)}


@pytest.fixture
def fresh_warning(monkeypatch):
    """The once-per-process warning as if not given yet in this process."""
    monkeypatch.setitem(weight_decay._STATE, "warned", False)


def test_the_rule_gives_the_trainers_own_answer_on_gpt2(tmp_path):
    """On a native model the Trainer's name rule is right (biases and LayerNorms exempt): ours agrees with it
    parameter for parameter, so the rule is the Trainer's wherever the Trainer sees what to exempt."""
    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=97, n_positions=64))
    trainer = Trainer(model=gpt2, args=_args(tmp_path))
    theirs, ours = set(trainer.get_decay_parameter_names(gpt2)), set(decay_parameter_names(gpt2))
    decided = {name: (name in theirs, name in ours) for name, _ in gpt2.named_parameters()}  # as create_optimizer asks
    assert all(a == b for a, b in decided.values()) and any(a for a, _ in decided.values()), decided
    assert weight_decay.gain_names(gpt2) == {}  # no gain: nothing to warn about


@pytest.mark.parametrize("block_type", ["sas_p", "normformer"])
def test_the_plain_trainer_decays_every_gain_with_one_warning_unless_given_the_models_rule(
    block_type, tmp_path, fresh_warning
):
    """transformers' Trainer with weight_decay > 0 decays the gains (its rule knows norms and biases by name): the
    first step warns once, naming them. With `trainer.get_decay_parameter_names = model.decay_parameter_names` its
    own optimizer decays exactly the matrices, and nothing warns."""
    model = perturb_(SimplifiedForCausalLM(tiny_config(block_type, residual_scale=block_type == "normformer")))
    gains = _gains(model)
    assert gains
    trainer = Trainer(model=model, args=_args(tmp_path))
    before = _snapshot(model)
    (warning,) = _step_with_zero_gradients(trainer.create_optimizer(), model)
    assert gains <= _decayed(model, before)
    assert "App. D.1" in str(warning.message) and sorted(gains)[0].split(".")[-2] in str(warning.message)
    assert _step_with_zero_gradients(Trainer(model=model, args=_args(tmp_path)).create_optimizer(), model) == []

    model = perturb_(SimplifiedForCausalLM(tiny_config(block_type, residual_scale=block_type == "normformer")))
    weight_decay._STATE["warned"] = False
    trainer = Trainer(model=model, args=_args(tmp_path))
    trainer.get_decay_parameter_names = model.decay_parameter_names
    before = _snapshot(model)
    assert _step_with_zero_gradients(trainer.create_optimizer(), model) == []
    assert _decayed(model, before) == {n for n, p in model.named_parameters() if p.dim() >= 2}


def test_an_accelerate_loop_with_the_models_groups_decays_no_gain(tmp_path, fresh_warning):
    """The loop accelerate's docs show, its optimizer built from `model.parameter_groups(wd)`: only the matrices
    decay. Built from `model.parameters()` instead, every gain decays and the first step warns once."""
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=True)
    model = perturb_(SimplifiedForCausalLM(tiny_config("sas")))
    model, optimizer = accelerator.prepare(model, torch.optim.AdamW(model.parameter_groups(WD), lr=LR))
    before = _snapshot(model)
    assert _step_with_zero_gradients(optimizer, model) == []
    assert _decayed(model, before) == {n for n, p in model.named_parameters() if p.dim() >= 2}

    model = perturb_(SimplifiedForCausalLM(tiny_config("sas")))
    model, optimizer = accelerator.prepare(model, torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WD))
    before = _snapshot(model)
    assert len(_step_with_zero_gradients(optimizer, model)) == 1
    assert _gains(model) <= _decayed(model, before)


@pytest.mark.slow  # imports TRL
def test_trl_sft_trainer_with_the_models_rule_decays_no_gain(tmp_path, bpe_tokenizer, fresh_warning):
    """TRL's SFTTrainer builds its optimizer with the Trainer's rule: it decays the gains and warns, unless given
    the model's rule as the plain Trainer is."""
    client("trl")
    from trl import SFTConfig, SFTTrainer

    data = _sft_dataset()
    for fixed in (False, True):
        weight_decay._STATE["warned"] = False
        model = perturb_(SimplifiedForCausalLM(tiny_config("sas_p", vocab_size=len(bpe_tokenizer))))
        args = SFTConfig(
            output_dir=str(tmp_path / "sft"), learning_rate=LR, weight_decay=WD, use_cpu=True, report_to="none"
        )
        trainer = SFTTrainer(model=model, args=args, train_dataset=data, processing_class=bpe_tokenizer)
        if fixed:
            trainer.get_decay_parameter_names = model.decay_parameter_names
        before = _snapshot(model)
        warned = _step_with_zero_gradients(trainer.create_optimizer(), model)
        decayed = _decayed(model, before)
        if fixed:
            assert warned == [] and decayed == {n for n, p in model.named_parameters() if p.dim() >= 2}
        else:
            assert len(warned) == 1 and _gains(model) <= decayed


# -- TRL ---------------------------------------------------------------------------------------------------------
def _sft_dataset():
    from datasets import Dataset

    source = inspect.getsource(json).splitlines()  # stdlib source: the text the tiny BPE tokenizer was trained on
    rows = ["\n".join(source[i : i + 6]) for i in range(0, 6 * 16, 6)]
    return Dataset.from_list([{"text": row} for row in rows])


def _export(tmp_path, tokenizer, block_type="sas_p", **overrides) -> Path:
    model = perturb_(SimplifiedForCausalLM(tiny_config(block_type, vocab_size=len(tokenizer), **overrides)))
    return export_model(model, tmp_path / f"export-{block_type}", tokenizer=tokenizer)


@pytest.mark.slow
@pytest.mark.parametrize("packing", [False, True], ids=["plain", "packed"])
def test_trl_fine_tunes_an_export_and_the_saved_model_reloads_exactly(packing, tmp_path, bpe_tokenizer):
    """docs/clients.md's SFT recipe on an export loaded with trust_remote_code=True, in float32 (`bf16=False`),
    plain and packed without padding (`packing=True, padding_free=True`: one row of several sequences, their
    positions restarting at each): the weights move, the paper's rule holds, and the saved model reloads with the
    trained model's logits exactly."""
    client("trl")
    from trl import SFTConfig, SFTTrainer

    export = _export(tmp_path, bpe_tokenizer)
    model = AutoModelForCausalLM.from_pretrained(export, trust_remote_code=True)
    start = _snapshot(model)
    args = SFTConfig(
        output_dir=str(tmp_path / "sft"),
        max_steps=4,
        per_device_train_batch_size=2,
        max_length=48,
        learning_rate=1e-3,
        weight_decay=WD,
        bf16=False,
        use_cpu=True,
        report_to="none",
        save_strategy="no",
        packing=packing,
        padding_free=packing,
    )
    trainer = SFTTrainer(model=model, args=args, train_dataset=_sft_dataset(), processing_class=bpe_tokenizer)
    trainer.get_decay_parameter_names = model.decay_parameter_names
    if packing:  # the collator's rows: several sequences, no padding, positions restarting at each
        batch = next(iter(trainer.get_train_dataloader()))
        assert batch["input_ids"].shape[0] == 1 and (batch["position_ids"][0] == 0).sum() > 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # the decay warning among them
        trainer.train()
    assert any(not torch.equal(p.detach(), start[n]) for n, p in model.named_parameters())
    trainer.save_model(str(tmp_path / "tuned"))
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path / "tuned", trust_remote_code=True).eval()
    ids = bpe_tokenizer(["def f(x):\n    return x", "import os"], return_tensors="pt", padding=True)
    with torch.no_grad():
        torch.testing.assert_close(reloaded(**ids).logits, model.eval()(**ids).logits, rtol=0, atol=0)


@pytest.mark.slow
def test_trls_bf16_default_leaves_the_trained_model_under_autocast(tmp_path, bpe_tokenizer):
    """TRL's SFTConfig defaults to bf16=True, on a CPU too. accelerate then wraps the model's forward in bf16
    autocast, and the wrapper stays after `train()`: the model in memory computes in bf16 while the saved one
    reloads in float32. The reloaded model under the same autocast gives the in-memory model's logits exactly
    (docs/clients.md)."""
    client("trl")
    from trl import SFTConfig, SFTTrainer

    assert SFTConfig(output_dir=str(tmp_path / "defaults"), use_cpu=True).bf16
    export = _export(tmp_path, bpe_tokenizer)
    model = AutoModelForCausalLM.from_pretrained(export, trust_remote_code=True)
    args = SFTConfig(
        output_dir=str(tmp_path / "sft"), max_steps=2, per_device_train_batch_size=2, max_length=48, use_cpu=True
    )
    args.report_to, args.save_strategy = [], "no"
    trainer = SFTTrainer(model=model, args=args, train_dataset=_sft_dataset(), processing_class=bpe_tokenizer)
    trainer.train()
    trainer.save_model(str(tmp_path / "tuned"))
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path / "tuned", trust_remote_code=True).eval()
    ids = bpe_tokenizer(["def f(x):\n    return x"], return_tensors="pt")
    with torch.no_grad():
        in_memory = model.eval()(**ids).logits
        assert not torch.equal(reloaded(**ids).logits, in_memory)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            torch.testing.assert_close(reloaded(**ids).logits.float(), in_memory, rtol=0, atol=0)


# -- lm-evaluation-harness -----------------------------------------------------------------------------------------
#: a multiple-choice task (loglikelihood per choice), a rolling-loglikelihood one and a generate_until one, over
#: local JSON lines (no download); `{data}` is the folder of the data files
TASKS = {
    "tiny_mc": """
task: tiny_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}/mc.jsonl
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{answer}}}}"
metric_list:
  - metric: acc
""",
    "tiny_rolling": """
task: tiny_rolling
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}/rolling.jsonl
test_split: test
output_type: loglikelihood_rolling
doc_to_text: ""
doc_to_target: "{{{{text}}}}"
metric_list:
  - metric: word_perplexity
""",
    "tiny_gen": """
task: tiny_gen
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}/gen.jsonl
test_split: test
output_type: generate_until
doc_to_text: "{{{{prompt}}}}"
doc_to_target: ""
generation_kwargs:
  until: ["\\n\\n"]
  max_gen_toks: 8
  do_sample: false
metric_list:
  - metric: exact_match
""",
}
MC = [
    {"question": "def add(a, b):\n    return", "choices": [" a + b", " a - b", " None"], "answer": 0},
    {"question": "import", "choices": [" os", " json", " sys\nimport re"], "answer": 1},
    {"question": "for i in range(10):\n   ", "choices": [" print(i)", " pass", " break"], "answer": 2},
]
ROLLING = [{"text": "class Point:\n    def __init__(self, x):\n        self.x = x\n"}, {"text": "x = [1, 2, 3]"}]
GEN = [{"prompt": "def main():\n"}, {"prompt": "import json\n\ndata ="}, {"prompt": "# a comment"}]


def _write_tasks(folder: Path) -> Path:
    folder.mkdir()
    for name, rows in (("mc", MC), ("rolling", ROLLING), ("gen", GEN)):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for name, text in TASKS.items():
        (folder / f"{name}.yaml").write_text(text.format(data=folder))
    return folder


def _lm_eval(model_dir: Path, tasks: Path, out: Path, batch_size: int) -> dict[str, list[dict]]:
    """`lm_eval` as docs/clients.md runs it, in a process of its own; its logged samples by task."""
    done = subprocess.run(
        [sys.executable, "-m", "lm_eval", "--model", "hf"]
        + ["--model_args", f"pretrained={model_dir},trust_remote_code=True,dtype=float32"]
        + ["--tasks", "tiny_mc,tiny_rolling,tiny_gen", "--include_path", str(tasks), "--device", "cpu"]
        + ["--batch_size", str(batch_size), "--output_path", str(out), "--log_samples"],
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    samples = {}
    for path in out.rglob("samples_*.jsonl"):
        task = path.name.removeprefix("samples_").rsplit("_", 1)[0]
        samples[task] = [json.loads(line) for line in path.read_text().splitlines()]
    assert sorted(samples) == sorted(TASKS), sorted(samples)
    return samples


def _continuation_logprob(model, tokenizer, context: str, continuation: str) -> float:
    """The log-probability of `continuation` after `context`, computed here: the pair encoded whole, the context's
    tokens split off (lm-eval's rule for causal models: a context's trailing spaces belong to the continuation), one
    forward, the continuation tokens' log-softmax summed; an empty context is the prefix token (EOS)."""
    spaces = len(context) - len(context.rstrip())
    if spaces:
        context, continuation = context[:-spaces], context[-spaces:] + continuation
    if context:
        whole = tokenizer.encode(context + continuation)
        prompt = tokenizer.encode(context)
    else:
        prompt, whole = [tokenizer.eos_token_id], [tokenizer.eos_token_id] + tokenizer.encode(continuation)
    target = whole[len(prompt) :]
    with torch.no_grad():
        logits = model(torch.tensor([whole[:-1]])).logits[0, len(prompt) - 1 :].float()
    return logits.log_softmax(-1).gather(-1, torch.tensor(target)[:, None]).sum().item()


def _generated(model, tokenizer, prompt: str) -> str:
    """Greedy `generate()` of 8 new tokens after `prompt`, cut at the task's stop sequence and at EOS."""
    ids = torch.tensor([tokenizer.encode(prompt)])
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=8, do_sample=False, pad_token_id=tokenizer.eos_token_id)
    text = tokenizer.decode(out[0, ids.shape[1] :])
    for stop in ("\n\n", tokenizer.eos_token):
        text = text.split(stop)[0]
    return text


def _native_gpt2(tmp_path, tokenizer) -> Path:
    config = GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=len(tokenizer), n_positions=64)
    model = perturb_(GPT2LMHeadModel(config))
    model.generation_config.eos_token_id = model.generation_config.pad_token_id = tokenizer.eos_token_id
    model.save_pretrained(tmp_path / "gpt2")
    tokenizer.save_pretrained(tmp_path / "gpt2")
    return tmp_path / "gpt2"


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["gpt2", "sas_p"])
def test_lm_eval_scores_equal_the_models_own_at_batch_1_and_4(kind, tmp_path, bpe_tokenizer):
    """`lm_eval --model hf --model_args pretrained=EXPORT,trust_remote_code=True` on local multiple-choice,
    rolling-loglikelihood and generate_until tasks, at batch size 1 and 4: every loglikelihood equals this test's
    own computation with the model (within float32 rounding of a batched forward), and every greedy continuation
    equals `generate()`'s. Run first on a native GPT-2 folder at batch size 1 (the check of this test's own
    computation; each `lm_eval` process costs tens of seconds of a CPU, `make test-clients` keeps to minutes)."""
    client("lm_eval")
    assert tokenizer_adds_nothing(bpe_tokenizer)
    folder = _native_gpt2(tmp_path, bpe_tokenizer) if kind == "gpt2" else _export(tmp_path, bpe_tokenizer)
    model = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True).eval()
    tasks = _write_tasks(tmp_path / "tasks")
    for batch_size in (1, 4) if kind == "sas_p" else (1,):  # GPT-2 checks this test's computation: once is enough
        samples = _lm_eval(folder, tasks, tmp_path / f"out-{batch_size}", batch_size)
        scored = 0
        for task in ("tiny_mc", "tiny_rolling"):
            for sample in samples[task]:
                for args, resp in zip(sample["arguments"].values(), sample["resps"]):
                    if task == "tiny_mc":
                        ours = _continuation_logprob(model, bpe_tokenizer, args["arg_0"], args["arg_1"])
                        theirs = resp[0][0]
                    else:
                        ours = _continuation_logprob(model, bpe_tokenizer, "", args["arg_0"])
                        theirs = resp[0]
                    assert float(theirs) == pytest.approx(ours, abs=1e-4), (task, batch_size, args)
                    scored += 1
        assert scored == sum(len(r["choices"]) for r in MC) + len(ROLLING)
        generated = {s["doc"]["prompt"]: s["resps"][0][0] for s in samples["tiny_gen"]}
        assert generated == {row["prompt"]: _generated(model, bpe_tokenizer, row["prompt"]) for row in GEN}
        assert any(generated.values())  # not all empty: the comparison compares text


def tokenizer_adds_nothing(tokenizer) -> bool:
    """The fixture tokenizer adds no special token, so `encode` with lm-eval's defaults is plain encoding."""
    return tokenizer.encode("x = 1") == tokenizer.encode("x = 1", add_special_tokens=False)


# -- torchao ---------------------------------------------------------------------------------------------------------
def float_matrices(model: torch.nn.Module) -> list[str]:
    """The modules of `model` whose matrix product reads a plain float weight: `nn.Linear` (the head included) and
    eq. 6's `ReparamLinear` (whatever its parts: its product reads `α·W_init + β·ΔW`)."""
    names = []
    for name, module in model.named_modules():
        if isinstance(module, ReparamLinear) or (
            isinstance(module, torch.nn.Linear) and type(module.weight) in (torch.Tensor, torch.nn.Parameter)
        ):
            names.append(name)
    return names


def _torchao(**kw):
    client("torchao")
    from torchao.quantization import Int8WeightOnlyConfig
    from transformers import TorchAoConfig

    return TorchAoConfig(Int8WeightOnlyConfig(), **kw)


@pytest.mark.slow
def test_torchao_leaves_a_native_llamas_head_in_float_unless_asked(tmp_path):
    """The check on a native model: transformers' torchao quantizer quantizes every `nn.Linear` of an untied Llama
    but its head, and the head too with `include_input_output_embeddings=True`."""
    config = LlamaConfig(
        vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, max_position_embeddings=64, tie_word_embeddings=False,
    )  # fmt: skip
    LlamaForCausalLM(config).save_pretrained(tmp_path / "llama")
    default = AutoModelForCausalLM.from_pretrained(tmp_path / "llama", quantization_config=_torchao())
    assert float_matrices(default) == ["lm_head"]
    every = AutoModelForCausalLM.from_pretrained(
        tmp_path / "llama", quantization_config=_torchao(include_input_output_embeddings=True)
    )
    assert float_matrices(every) == []


@pytest.mark.slow
@pytest.mark.parametrize("block_type", ["pre_ln", "sas", "sas_p"])
def test_torchao_int8_quantizes_every_matrix_of_an_export_and_decodes(block_type, tmp_path, bpe_tokenizer):
    """`from_pretrained(EXPORT, trust_remote_code=True, quantization_config=TorchAoConfig(Int8WeightOnlyConfig(),
    include_input_output_embeddings=True))`: no matrix product reads a float weight, eq. 6's W^V (sas, sas_p)
    folded and the tied head included (default config: all but the head, as for a native model); its logits stay
    within int8's rounding of float32's; cached greedy decoding at batch 1 and 2 (left-padded) computes the logits
    of one uncached forward over the decoded sequence; save_pretrained refuses the folded model."""
    export = _export(tmp_path, bpe_tokenizer, block_type)
    full = AutoModelForCausalLM.from_pretrained(export, trust_remote_code=True).eval()
    default = AutoModelForCausalLM.from_pretrained(export, trust_remote_code=True, quantization_config=_torchao())
    assert float_matrices(default) == ["lm_head"]
    model = AutoModelForCausalLM.from_pretrained(
        export, trust_remote_code=True, quantization_config=_torchao(include_input_output_embeddings=True)
    ).eval()
    assert float_matrices(full) and float_matrices(model) == []
    if block_type != "pre_ln":
        assert not any(type(m).__name__ == "ReparamLinear" for m in model.modules())
    prompts = ["def read(path):\n    with open(path) as f:", "import os"]
    batch = bpe_tokenizer(prompts, return_tensors="pt", padding=True, padding_side="left")
    with torch.no_grad():
        reference, quantized = full(**batch).logits, model(**batch).logits
    real = batch["attention_mask"].bool()
    error = (quantized - reference)[real].abs().max().item()
    assert 0 < error <= 0.02 * reference[real].abs().max().item(), error
    for rows in (batch, bpe_tokenizer(prompts[:1], return_tensors="pt")):
        with torch.no_grad():
            out = model.generate(
                **rows, max_new_tokens=6, min_new_tokens=6, do_sample=False, eos_token_id=None,
                output_logits=True, return_dict_in_generate=True,
            )  # fmt: skip
            cached = torch.stack(out.logits, 1)
            mask = torch.cat([rows["attention_mask"], torch.ones_like(out.sequences[:, -6:])], 1)
            positions = (mask.cumsum(-1) - 1).clamp(min=0)  # as generate() derives them from a left-padded mask
            uncached = model(
                input_ids=out.sequences, attention_mask=mask, position_ids=positions, use_cache=False
            ).logits[:, -7:-1]
        # the cached steps compute what one uncached forward over the decoded sequence computes, to float rounding
        # (a near-tie may still pick another token than recomputing each prefix would: int8 shifts the ties)
        torch.testing.assert_close(cached, uncached, rtol=0, atol=1e-4 * uncached.abs().max().item())
        assert torch.equal(out.sequences[:, -6:], cached.argmax(-1))
    with pytest.raises(ValueError, match="save_pretrained: .*quantized after loading"):
        model.save_pretrained(tmp_path / "quantized")
