"""Training-time features: activation (gradient) checkpointing, torch.compile, bf16/fp16, accelerate's
`device_map="auto"` (with offload), `resize_token_embeddings`, and `num_items_in_batch` under gradient accumulation."""

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from conftest import perturb_, tiny_config
from transformers import StaticCache, Trainer, TrainingArguments

from modeling_simplified import SimplifiedForCausalLM, SimplifiedForMaskedLM

HEADS = {"causal": SimplifiedForCausalLM, "masked": SimplifiedForMaskedLM}


def build(block_type: str, head: str = "causal", **overrides):
    return perturb_(HEADS[head](tiny_config(block_type, pad_token_id=0, **overrides)))


def batch(batch_size: int = 3, seq_len: int = 10, seed: int = 0):
    """Ids, a left-padded mask (row 0) and labels with a different number of ignored tokens per row."""
    ids = torch.randint(1, 97, (batch_size, seq_len), generator=torch.Generator().manual_seed(seed))
    mask = torch.ones_like(ids)
    mask[0, :3] = 0
    labels = ids.masked_fill(mask == 0, -100)
    labels[1, 5:] = -100
    return ids, mask, labels


def gradients(model, ids, mask, labels) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    loss = model(ids, attention_mask=mask, labels=labels).loss
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


# ----------------------------------------------------------------------------------------------------------------
# activation checkpointing
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs", [None, {"use_reentrant": True}], ids=["default", "reentrant"])
def test_gradient_checkpointing_same_gradients(block_type, kwargs):
    model = build(block_type).train()
    ids, mask, labels = batch()
    loss, expected = gradients(model, ids, mask, labels)
    calls = []
    model.model.layers[0].mlp.register_forward_pre_hook(lambda *_: calls.append(1))  # pre: recompute stops early
    model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    assert model.is_gradient_checkpointing and all(layer.gradient_checkpointing for layer in model.model.layers)
    ckpt_loss, actual = gradients(model, ids, mask, labels)
    assert len(calls) == 2  # the block ran again in backward: it really was checkpointed
    assert actual.keys() == expected.keys() and len(expected) == len(list(model.parameters()))
    torch.testing.assert_close(ckpt_loss, loss, atol=1e-6, rtol=0)
    for name in expected:
        torch.testing.assert_close(
            actual[name], expected[name], atol=1e-6, rtol=0, msg=lambda m, name=name: f"{name}: {m}"
        )


# ----------------------------------------------------------------------------------------------------------------
# torch.compile
# ----------------------------------------------------------------------------------------------------------------
@torch.no_grad()
def _compiled_equals_eager(model, ids, mask, with_static_cache: bool):
    expected = model(ids, attention_mask=mask).logits
    compiled = torch.compile(model.forward, fullgraph=True)
    if not with_static_cache:
        torch.testing.assert_close(compiled(input_ids=ids, attention_mask=mask).logits, expected, atol=1e-5, rtol=0)
        return
    cache = StaticCache(config=model.config, max_cache_len=ids.shape[1] + 2)
    prefill = compiled(input_ids=ids[:, :-1], attention_mask=mask[:, :-1], cache=cache).logits
    step = compiled(input_ids=ids[:, -1:], attention_mask=mask, cache=cache).logits
    torch.testing.assert_close(torch.cat([prefill, step], 1), expected, atol=1e-5, rtol=0)


def test_compiled_forward_equals_eager():
    """Fullgraph (no graph break), padded batch; the shaped-attention SAS block (the other types: slow test)."""
    assert SimplifiedForCausalLM._can_compile_fullgraph
    model = build("sas").eval()
    ids, mask, _ = batch()
    _compiled_equals_eager(model, ids, mask, with_static_cache=False)


@pytest.mark.parametrize("head", ["causal", "masked"])
def test_compiled_training_step_equals_eager(head):
    """Fullgraph, with labels in training mode (the fused loss's default): the labelled-row selection has a
    data-dependent shape, so a compiled graph takes the logits path; loss and gradients equal the eager fused ones."""
    torch._dynamo.reset()
    model = build("sas_p", head).train()
    ids, mask, labels = batch()
    expected_loss, expected = gradients(model, ids, mask, labels)
    model.zero_grad(set_to_none=True)
    out = torch.compile(model.forward, fullgraph=True)(input_ids=ids, attention_mask=mask, labels=labels)
    out.loss.backward()
    assert out.logits is None
    torch.testing.assert_close(out.loss.detach(), expected_loss, atol=1e-5, rtol=1e-6)  # sums in another order
    for name, grad in expected.items():
        torch.testing.assert_close(dict(model.named_parameters())[name].grad, grad, atol=1e-6, rtol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("block_type", ["sas_p", "normformer"])
def test_compiled_bf16_training_step_equals_eager(block_type):
    """The Trainer's `torch_compile=True` with `bf16=True`: fullgraph under bf16 autocast, backward outside it. Shaped
    attention's combination (its backward turns autocast off) and NormFormer's float32 attention compile; loss and
    gradients equal eager's to bf16 precision (the compiled graph fuses and rounds in another order)."""
    torch._dynamo.reset()
    model = build(block_type).train()
    ids, mask, labels = batch()
    results = []
    for forward in (model.forward, torch.compile(model.forward, fullgraph=True)):
        model.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = forward(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        results.append((loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}))
    (eager_loss, eager), (compiled_loss, compiled) = results
    torch.testing.assert_close(compiled_loss, eager_loss, atol=0.02, rtol=0)
    assert compiled.keys() == eager.keys()
    ours, theirs = (torch.cat([g[n].flatten() for n in sorted(eager)]) for g in (compiled, eager))
    assert torch.nn.functional.cosine_similarity(ours, theirs, dim=0) >= 0.99


@pytest.mark.slow
@pytest.mark.parametrize("position", ["sinusoidal", "rotary", "learned"])
def test_compiled_static_cache_decoding_equals_eager(block_type, position):
    torch._dynamo.reset()
    model = build(block_type, position_embedding_type=position).eval()
    ids, mask, _ = batch()
    _compiled_equals_eager(model, ids, mask, with_static_cache=True)


def test_a_model_compiled_for_decoding_refuses_to_train():
    """`compile_for_decoding` freezes the weights into the graph: `train()` (which the Trainer calls) is then one
    error, `eval()` still works; a model never compiled trains as before."""
    model = build("sas_p")
    assert model.compile_for_decoding() is model and not model.training
    with pytest.raises(RuntimeError, match="compiled for decoding"):
        model.train()
    model.eval()
    assert build("sas_p").train().training


def test_packed_rows_with_a_fixed_length_cache_are_refused():
    """A packed row (positions restarting at 0, no mask) needs its own mask, which a fixed-length cache's keys
    cannot take: one error naming what is allowed, where the row used to attend across its sequences. Positions that
    do not restart (`generate`'s static-cache prefill) pass, and so does the packed row without a cache."""
    model = build("sas").eval()
    ids = torch.randint(1, 97, (1, 8), generator=torch.Generator().manual_seed(0))
    packed = torch.tensor([[0, 1, 2, 0, 1, 2, 3, 4]])
    with torch.no_grad():
        with pytest.raises(ValueError, match="packed sequences.*StaticCache.*Allowed: cache=None"):
            model(ids, position_ids=packed, cache=StaticCache(config=model.config, max_cache_len=12))
        model(ids, position_ids=torch.arange(8)[None], cache=StaticCache(config=model.config, max_cache_len=12))
        model(ids, position_ids=packed, use_cache=False)


# ----------------------------------------------------------------------------------------------------------------
# dtypes (correctness on tiny shapes only: finite, loosely close to fp32)
# ----------------------------------------------------------------------------------------------------------------
def test_bf16_autocast_forward_backward(block_type):
    model = build(block_type).train()
    ids, mask, labels = batch()
    with torch.no_grad():
        expected = model(ids, attention_mask=mask).logits
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(ids, attention_mask=mask, labels=labels, skip_logits=False)
        fused = model(ids, attention_mask=mask, labels=labels)  # the fused head + loss under autocast
    torch.testing.assert_close(fused.loss, out.loss, atol=0.05, rtol=0)
    out.loss.backward()
    assert out.logits.dtype == torch.bfloat16
    real = mask.bool()
    torch.testing.assert_close(out.logits.float()[real], expected[real], atol=0.05, rtol=0)
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_weights(block_type, dtype):
    model = build(block_type).eval()
    ids, mask, _ = batch()
    half = copy.deepcopy(model).to(dtype)
    assert all(p.dtype == dtype for p in half.parameters())
    with torch.no_grad():
        expected = model(ids, attention_mask=mask).logits
        logits = half(ids, attention_mask=mask).logits
    assert logits.dtype == dtype
    real = mask.bool()
    torch.testing.assert_close(logits.float()[real], expected[real], atol=0.1, rtol=0)
    out = half.generate(
        ids,
        attention_mask=mask,
        max_new_tokens=4,
        eos_token_id=None,
        pad_token_id=0,
        do_sample=False,
        output_logits=True,
        return_dict_in_generate=True,
    )
    assert out.sequences.shape == (3, 14) and all(torch.isfinite(step).all() for step in out.logits)


# ----------------------------------------------------------------------------------------------------------------
# device_map="auto"
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("block_type", ["pre_ln", "sas", "simplest", "normformer"])
@pytest.mark.parametrize("offload", [False, True], ids=["cpu", "disk-offload"])
def test_device_map_auto(block_type, offload, tmp_path):
    """Loading through accelerate; with too little memory, blocks go to disk whole (`_no_split_modules`) and are
    loaded by hooks when they run."""
    model = build(block_type, num_hidden_layers=4).eval()
    model.save_pretrained(tmp_path / "model")
    kwargs = dict(max_memory={"cpu": 60_000}, offload_folder=str(tmp_path / "offload")) if offload else {}
    loaded = SimplifiedForCausalLM.from_pretrained(tmp_path / "model", device_map="auto", **kwargs)
    ids, mask, _ = batch()
    if offload:
        placements = loaded.hf_device_map
        assert "disk" in placements.values()
        blocks = [name for name in placements if name.startswith("model.layers")]
        assert all(name.count(".") <= 2 for name in blocks), blocks  # never inside a block
    with torch.no_grad():
        torch.testing.assert_close(
            loaded(ids, attention_mask=mask).logits, model(ids, attention_mask=mask).logits, atol=1e-6, rtol=0
        )


def test_no_split_modules_are_the_blocks():
    model = build("sas_p")
    names = {type(m).__name__ for m in model.model.layers}
    assert names <= set(model._no_split_modules)


# ----------------------------------------------------------------------------------------------------------------
# resize_token_embeddings
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("head", ["causal", "masked"])
@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
@pytest.mark.parametrize("new_size", [120, 90])
def test_resize_token_embeddings(head, tied, new_size):
    model = build("sas", head, tie_word_embeddings=tied)
    old_in = model.get_input_embeddings().weight.detach().clone()
    old_out = model.get_output_embeddings()
    old_out_weight, old_bias = old_out.weight.detach().clone(), getattr(old_out, "bias", None)
    old_bias = None if old_bias is None else old_bias.detach().clone()
    model.resize_token_embeddings(new_size, mean_resizing=False)
    kept = min(97, new_size)
    emb, out = model.get_input_embeddings(), model.get_output_embeddings()
    assert model.config.vocab_size == new_size
    assert emb.weight.shape == out.weight.shape == (new_size, 32)
    assert torch.equal(emb.weight[:kept], old_in[:kept])
    assert torch.equal(out.weight[:kept], old_out_weight[:kept])
    assert (out.weight is emb.weight) == tied
    if head == "masked":
        assert out.bias.shape == (new_size,) and torch.equal(out.bias[:kept], old_bias[:kept])
    ids = torch.randint(0, new_size, (2, 6))
    assert model(ids).logits.shape == (2, 6, new_size)


@pytest.mark.parametrize("head", ["causal", "masked"])
def test_resize_keeps_vocab_padding_and_reloads(head, tmp_path):
    """With `pad_vocab_size_multiple`, the rows stay padded, only `vocab_size` logits are predicted, and the
    resized model reloads exactly (transformers alone would store the padded size as vocab_size)."""
    model = build("sas", head, pad_vocab_size_multiple=64).eval()
    model.resize_token_embeddings(130)
    assert model.config.vocab_size == 130 and model.get_input_embeddings().weight.shape[0] == 192
    model.resize_token_embeddings(130, pad_to_multiple_of=48)
    assert model.config.pad_vocab_size_multiple == 192 and model.get_input_embeddings().weight.shape[0] == 192
    ids = torch.randint(0, 130, (2, 6))
    model.save_pretrained(tmp_path)
    reloaded = HEADS[head].from_pretrained(tmp_path).eval()
    with torch.no_grad():
        logits = model(ids).logits
        assert logits.shape == (2, 6, 130)
        torch.testing.assert_close(reloaded(ids).logits, logits, atol=0, rtol=0)


# ----------------------------------------------------------------------------------------------------------------
# num_items_in_batch
# ----------------------------------------------------------------------------------------------------------------
def _token_losses_sum(head: str, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    if head == "causal":
        logits, labels = logits[:, :-1], labels[:, 1:]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100, reduction="sum")


@pytest.mark.parametrize("head", ["causal", "masked"])
def test_num_items_in_batch_is_the_loss_denominator(head):
    model = build("sas_p", head).eval()
    ids, mask, labels = batch()
    with torch.no_grad():
        summed = _token_losses_sum(head, model(ids, attention_mask=mask).logits, labels)
        for items in (7, torch.tensor(50)):
            loss = model(ids, attention_mask=mask, labels=labels, num_items_in_batch=items).loss
            torch.testing.assert_close(loss, summed / items, atol=1e-6, rtol=0)


@pytest.mark.parametrize("head", ["causal", "masked"])
def test_gradient_accumulation_with_num_items_equals_full_batch(head):
    """Two micro-batches with unequal token counts, each divided by the total count: the summed loss and gradients
    equal the full batch's mean; dividing each micro-batch by its own count (no num_items_in_batch) would not."""
    model = build("sas", head).train()
    ids, mask, labels = batch(batch_size=4)
    full_loss, full_grads = gradients(model, ids, mask, labels)
    total = int((labels[:, 1:] if head == "causal" else labels).ne(-100).sum())
    model.zero_grad(set_to_none=True)
    accumulated = 0.0
    for part in (slice(0, 1), slice(1, 4)):
        loss = model(ids[part], attention_mask=mask[part], labels=labels[part], num_items_in_batch=total).loss
        loss.backward()
        accumulated += loss.detach()
    torch.testing.assert_close(accumulated, full_loss, atol=1e-6, rtol=0)
    for name, param in model.named_parameters():
        torch.testing.assert_close(param.grad, full_grads[name], atol=1e-6, rtol=0)
    model.zero_grad(set_to_none=True)
    for part in (slice(0, 1), slice(1, 4)):  # the naive way: each micro-batch's own mean, halved
        (model(ids[part], attention_mask=mask[part], labels=labels[part]).loss / 2).backward()
    assert max((p.grad - full_grads[n]).abs().max() for n, p in model.named_parameters()) > 1e-4


def test_trainer_gradient_accumulation_equals_one_big_batch(tmp_path):
    """The Trainer passes num_items_in_batch to our forward: 2 accumulated micro-batches of 2 make the same SGD step
    as one batch of 4, although the micro-batches hold different numbers of label tokens."""
    ids, mask, labels = batch(batch_size=4)
    rows = [dict(input_ids=i, attention_mask=m, labels=y) for i, m, y in zip(ids, mask, labels)]
    start = build("sas")
    results = []
    for micro, steps in ((4, 1), (2, 2)):
        model = copy.deepcopy(start)
        args = TrainingArguments(
            output_dir=str(tmp_path / f"run{micro}"),
            per_device_train_batch_size=micro,
            gradient_accumulation_steps=steps,
            max_steps=1,
            learning_rate=0.5,
            optim="sgd",
            lr_scheduler_type="constant",
            use_cpu=True,
            report_to="none",
            save_strategy="no",
            logging_strategy="no",
            disable_tqdm=True,
            seed=0,
        )
        trainer = Trainer(model=model, args=args, train_dataset=rows)
        assert trainer.model_accepts_loss_kwargs
        trainer.train()
        results.append(dict(model.named_parameters()))
    moved = max((results[0][n] - p).abs().max() for n, p in start.named_parameters())
    assert moved > 1e-3  # the step really changed the weights
    for name, param in results[0].items():
        torch.testing.assert_close(results[1][name], param, atol=1e-6, rtol=0, msg=lambda m, name=name: f"{name}: {m}")


_COMPILED_DECODING = """
import hashlib, sys
import torch
from conftest import perturb_, tiny_config
from modeling_simplified import SimplifiedForCausalLM

torch.manual_seed(0)
model = perturb_(SimplifiedForCausalLM(tiny_config(sys.argv[1], pad_token_id=0))).eval().to(torch.bfloat16)
prompt = torch.randint(1, 97, (1, 9), generator=torch.Generator().manual_seed(1))
kw = dict(max_new_tokens=5, min_new_tokens=5, do_sample=False, eos_token_id=None, pad_token_id=0,
          cache_implementation="static", output_logits=True, return_dict_in_generate=True)
with torch.no_grad():
    eager = torch.stack(model.generate(prompt, **kw).logits)
    model.compile_for_decoding()
    out = model.generate(prompt, **kw)
compiled = torch.stack(out.logits)
print(hashlib.sha256(compiled.float().numpy().tobytes()).hexdigest(), (compiled - eager).abs().max().item())
"""


@pytest.mark.slow
@pytest.mark.parametrize("block_type", ["pre_ln", "sas_p"])
def test_compiled_bf16_decoding_recipe_is_exact_across_processes(block_type, tmp_path):
    """docs/inference.md's bf16 decoding recipe (bf16 weights; `forward` compiled by inductor with `freezing`, which
    prepacks the weights; `cache_implementation="static"`), on a prompt without a mask (`generate` then passes
    positions and no mask, the case whose packed-row check once indexed past the prompt in the compiled graph): two
    fresh processes give the same logits bit for bit, within bf16 rounding of eager's."""
    script = tmp_path / "decode.py"
    script.write_text(_COMPILED_DECODING)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
    runs = [
        subprocess.run([sys.executable, str(script), block_type], capture_output=True, text=True, env=env, timeout=600)
        for _ in range(2)
    ]
    for run in runs:
        assert run.returncode == 0, run.stderr[-3000:]
    (digest_a, diff_a), (digest_b, _) = (run.stdout.split()[-2:] for run in runs)
    assert digest_a == digest_b
    assert float(diff_a) < 0.05
