"""On a CUDA device: a bf16 (autocast) training step, shaped attention exactly the identity at init in bf16, sdpa
and flash-attention-2 against eager (packed sequences included), cached generate against uncached, left-padded
generate against each row alone, scoring (no-grad forward) against the training forward, bit-identical repeats, and
`make bench` on CUDA (training, generate, scoring). The whole module is skipped without CUDA: CI never has one; run it
with `make test-gpu` on a GPU machine."""

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import tiny_config
from transformers import DataCollatorWithFlattening

from modeling_simplified import BLOCK_TYPES, SimplifiedForCausalLM

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

ROOT = Path(__file__).resolve().parents[2]
CUDA = "cuda"
FLASH = pytest.param(
    "flash_attention_2",
    marks=pytest.mark.skipif(importlib.util.find_spec("flash_attn") is None, reason="flash_attn is not installed"),
)
#: bf16 logits of a 2-block model: ~3 significant digits
BF16 = dict(atol=6e-2, rtol=6e-2)


def _model(block_type: str, dtype=torch.float32, **overrides) -> SimplifiedForCausalLM:
    torch.manual_seed(0)
    config = tiny_config(block_type, hidden_size=64, num_attention_heads=4, **overrides)
    return SimplifiedForCausalLM(config).to(CUDA, dtype)


@pytest.mark.parametrize("block_type", BLOCK_TYPES)
def test_bf16_autocast_training_steps_lower_the_loss(block_type):
    """The Trainer's `bf16=True`: fp32 weights, bf16 autocast; finite gradients and a falling loss on one batch."""
    model = _model(block_type).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, fused=True)
    ids = torch.randint(0, model.config.vocab_size, (4, 32), device=CUDA, generator=None)
    losses = []
    for _ in range(8):
        with torch.autocast(CUDA, dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    assert all(math.isfinite(x) for x in losses) and losses[-1] < losses[0]


@pytest.mark.parametrize("attn", ["sdpa", FLASH])
@pytest.mark.parametrize("precision", ["autocast", "bf16_weights"])
@pytest.mark.parametrize("block_type", ["value_skipinit", "sas", "sas_p", "simplest"])
def test_shaped_attention_is_the_identity_at_init_in_bf16(block_type, precision, attn):
    """The CPU test of tests/test_shaped_attention.py on CUDA kernels, in training mode (queries, keys and values
    that need gradients, as in a training step: the real and the zero-query call must take the same kernel): every
    shaped attention sub-block returns its input X bit for bit at init."""
    model = _model(block_type, torch.bfloat16 if precision == "bf16_weights" else torch.float32).train()
    model.set_attn_implementation(attn)
    seen = []
    for layer in model.model.layers:
        layer.attn.mixing.register_forward_hook(
            lambda m, a, kw, out: seen.append((kw["current_values"].transpose(1, 2), out[0])), with_kwargs=True
        )
    ids = torch.randint(0, model.config.vocab_size, (4, 200), device=CUDA)
    with torch.autocast(CUDA, dtype=torch.bfloat16, enabled=precision == "autocast"):
        model(input_ids=ids, labels=ids).loss.backward()
    assert len(seen) == len(model.model.layers)
    for values, mixed in seen:
        assert torch.equal(mixed, values.to(mixed.dtype))


@pytest.mark.parametrize("attn", ["sdpa", FLASH])
@pytest.mark.parametrize("block_type", BLOCK_TYPES)
def test_attention_backends_equal_eager_in_bf16(block_type, attn):
    model = _model(block_type, torch.bfloat16).eval()
    ids = torch.randint(0, model.config.vocab_size, (2, 24), device=CUDA)
    with torch.no_grad():
        reference = model(input_ids=ids).logits.float()
        model.set_attn_implementation(attn)
        logits = model(input_ids=ids).logits.float()
    torch.testing.assert_close(logits, reference, **BF16)


@pytest.mark.parametrize("attn", ["sdpa", FLASH])
@pytest.mark.parametrize("block_type", ("pre_ln", "sas_p", "simplest"))
def test_packed_row_equals_each_sequence_alone(block_type, attn):
    """One `DataCollatorWithFlattening` row (position ids restart per sequence; flash-attention gets `cu_seq_lens`)
    gives each sequence the logits it has alone, and the packed loss equals the loss of the padded batch."""
    model = _model(block_type, torch.bfloat16).eval()
    model.set_attn_implementation(attn)
    gen = torch.Generator().manual_seed(0)
    seqs = [torch.randint(1, model.config.vocab_size, (n,), generator=gen) for n in (7, 3, 12, 5)]
    collator = DataCollatorWithFlattening(return_position_ids=True, return_flash_attn_kwargs=attn != "sdpa")
    batch = {k: v.to(CUDA) for k, v in collator([{"input_ids": s.tolist()} for s in seqs]).items()}
    with torch.no_grad():
        packed = model(**batch, skip_logits=False)
        alone = torch.cat([model(input_ids=s[None].to(CUDA)).logits[0] for s in seqs])
    torch.testing.assert_close(packed.logits[0].float(), alone.float(), **BF16)


@pytest.mark.parametrize("attn", ["sdpa", FLASH])
@pytest.mark.parametrize("block_type", BLOCK_TYPES)
def test_cached_generate_equals_uncached(block_type, attn):
    model = _model(block_type).eval()  # fp32: greedy ties in bf16 could flip a token either way
    if attn != "sdpa":
        model = model.to(torch.bfloat16)
    model.set_attn_implementation(attn)
    ids = torch.randint(1, model.config.vocab_size, (2, 6), device=CUDA)
    kwargs = dict(max_new_tokens=10, do_sample=False, pad_token_id=0)
    cached = model.generate(ids, use_cache=True, **kwargs)
    uncached = model.generate(ids, use_cache=False, **kwargs)
    assert torch.equal(cached, uncached)


@pytest.mark.parametrize("block_type", ("pre_ln", "sas", "sas_p"))
def test_left_padded_generate_equals_each_row_alone(block_type):
    """Greedy decoding of a left-padded batch gives each row the tokens it gets alone (fp32, sdpa)."""
    model = _model(block_type).eval()
    gen = torch.Generator().manual_seed(1)
    rows = [torch.randint(1, model.config.vocab_size, (n,), generator=gen) for n in (9, 4)]
    ids = torch.zeros(2, 9, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, row in enumerate(rows):
        ids[i, -len(row) :], mask[i, -len(row) :] = row, 1
    kwargs = dict(max_new_tokens=8, do_sample=False, pad_token_id=0)
    batch = model.generate(ids.to(CUDA), attention_mask=mask.to(CUDA), **kwargs)[:, 9:]
    for i, row in enumerate(rows):
        alone = model.generate(row[None].to(CUDA), **kwargs)[0, len(row) :]
        assert torch.equal(batch[i], alone)


@pytest.mark.parametrize("block_type", ("pre_ln", "sas", "sas_p"))
def test_scoring_equals_the_training_forward(block_type):
    """Scoring (no autograd, every position's logits) equals the logits of the training forward, and two scoring
    calls on the same input are bit-identical."""
    model = _model(block_type).eval()
    ids = torch.randint(0, model.config.vocab_size, (3, 40), device=CUDA)
    trained = model(input_ids=ids, labels=ids)
    with torch.no_grad():
        first = model(input_ids=ids).logits
        second = model(input_ids=ids).logits
    assert torch.equal(first, second)
    torch.testing.assert_close(first, trained.logits.detach())
    loss = torch.nn.functional.cross_entropy(first[:, :-1].flatten(0, 1), ids[:, 1:].flatten())
    torch.testing.assert_close(loss, trained.loss.detach())


def test_generate_is_bit_identical_across_processes(tmp_path):
    """Greedy tokens and their scores from two fresh processes on CUDA are bit-identical."""
    script = (
        "import sys, torch; sys.path.insert(0, 'tests'); from conftest import tiny_config; "
        "from modeling_simplified import SimplifiedForCausalLM; torch.manual_seed(0); "
        "m = SimplifiedForCausalLM(tiny_config('sas_p', hidden_size=64, num_attention_heads=4)).to('cuda').eval(); "
        "ids = torch.arange(1, 17, device='cuda').view(2, 8); "
        "out = m.generate(ids, max_new_tokens=12, do_sample=False, pad_token_id=0, output_scores=True, "
        "return_dict_in_generate=True); "
        "torch.save({'tokens': out.sequences.cpu(), 'scores': torch.stack(out.scores).cpu()}, sys.argv[1])"
    )
    paths = [tmp_path / f"run{i}.pt" for i in range(2)]
    for path in paths:
        subprocess.run([sys.executable, "-c", script, str(path)], cwd=ROOT, check=True)
    first, second = (torch.load(path) for path in paths)
    assert torch.equal(first["tokens"], second["tokens"]) and torch.equal(first["scores"], second["scores"])


def test_benchmark_runs_on_cuda(tmp_path):
    """`make bench` on CUDA (the smoke shape): the train, generate and score sections time on the GPU."""
    out = tmp_path / "bench.json"
    command = [sys.executable, "-m", "benchmarks.benchmark", "--quick", "--device", "cuda"]
    command += ["--sections", "train,mfu,generate,score,kv_cache,loss", "--json", str(out)]
    subprocess.run(command, cwd=ROOT, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    result = json.loads(out.read_text())
    assert result["meta"]["device"].startswith("cuda")
    assert result["train"]["pre_ln"]["median_s"] > 0 and "vs_gpt2" in result["train"]["pre_ln"]
    assert "vs_llama" in result["train"]["pre_ln_llama"]
    assert set(result["generate"]) == {"batch_1", "batch_8"}
    assert result["loss"]["pre_ln"]["fused"]["peak_MiB"] > 0
    for rows in result["score"].values():
        assert set(rows) == {"gpt2", "pre_ln", "sas", "sas_p"} and all(r["tokens_per_s"] > 0 for r in rows.values())
    assert result["kv_cache"]
