"""ONNX export is exact at every length and batch size, or fails at export time.

`torch.onnx.export(..., dynamo=True, dynamic_shapes=...)` traces one sample (batch 2, 17 tokens); the graph must then
give eager's logits in onnxruntime at lengths far from it (5, 33, 64, 200, 1100: across and past `running_sum`'s
32-token blocks, and learned positions up to their last one) and at batch 1 and 3. Shape-dependent Python branches
are traced once: torch's exporter by default turns their guards into runtime asserts and then deletes them, so such
a graph is silently wrong at other shapes. `export_onnx` therefore exports with guards kept (the effect of
`TORCH_ONNX_PREFER_DEFERRED_RUNTIME_ASSERTS_OVER_GUARDS=0`): a graph that would only hold for some lengths is refused
at export with torch's `Constraints violated` error (`test_shape_specialised_export_fails_loudly`).

The harness is checked on native `GPT2LMHeadModel` and `LlamaForCausalLM` first (same helpers, same tolerance).
transformers' own (experimental) exporter, prefill + decode with a cache, is checked against eager cached decoding
and `generate` in `test_transformers_exporter_prefill_decode`. docs/export.md describes all of it.

Tolerance: ONNX Runtime and torch sum in different orders (its own GEMM and softmax kernels), so logits differ by
float32 rounding only: measured ≤ 1.1e-6 of the largest |logit| for every model here, up to 1100 tokens. The tests
allow 1e-4 of it (`RTOL_OF_SCALE`), ~100× that, while a wrongly specialised graph is off by 1e-1 (shaped attention's
centring term at 64 tokens after a 17-token export).
"""

import contextlib
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from conftest import perturb_, tiny_config

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")
pytest.importorskip("onnx")

import torch.onnx._flags as onnx_flags  # noqa: E402
from transformers import DynamicCache  # noqa: E402

from modeling_simplified import BLOCK_TYPES, SimplifiedForCausalLM, SimplifiedForMaskedLM  # noqa: E402
from modeling_simplified.kernels_simplified import running_sum  # noqa: E402

#: The traced sample and the shapes checked in onnxruntime: (batch, length)
SAMPLE = (2, 17)
SHAPES = [(2, 17), (1, 5), (3, 33), (2, 64), (1, 200), (1, 1100)]
#: Learned positions cover exactly the longest length checked (ids 0..1099): their last row is used
MAX_POSITIONS = 1100
#: max |onnx − eager| ≤ RTOL_OF_SCALE · max |eager| (see the module docstring)
RTOL_OF_SCALE = 1e-4
#: The fast default subset (one plain, one shaped block type); every other test and parametrization is `slow`
FAST_BLOCK_TYPES = ("pre_ln", "sas")
VOCAB = 97
Dim = torch.export.Dim


def _slow_unless(fast: bool):
    return () if fast else (pytest.mark.slow,)


def block_params(fast=FAST_BLOCK_TYPES, types=BLOCK_TYPES):
    return [pytest.param(t, marks=_slow_unless(t in fast)) for t in types]


class Logits(torch.nn.Module):
    """The model's logits as the graph's one output (no cache, no loss): what the exported graph computes."""

    def __init__(self, model: torch.nn.Module, **fixed_kwargs):
        super().__init__()
        self.model, self.fixed_kwargs = model, fixed_kwargs

    def forward(self, input_ids, attention_mask=None):
        return self.model(input_ids=input_ids, attention_mask=attention_mask, **self.fixed_kwargs).logits


@contextlib.contextmanager
def guards_kept():
    """`TORCH_ONNX_PREFER_DEFERRED_RUNTIME_ASSERTS_OVER_GUARDS=0` for this block: torch reads that variable once, at
    import, into this flag, which its capture strategies read at every export."""
    old = onnx_flags.PREFER_DEFERRED_RUNTIME_ASSERTS_OVER_GUARDS
    onnx_flags.PREFER_DEFERRED_RUNTIME_ASSERTS_OVER_GUARDS = False
    try:
        yield
    finally:
        onnx_flags.PREFER_DEFERRED_RUNTIME_ASSERTS_OVER_GUARDS = old


def dynamic_axes(with_mask: bool):
    """Batch and length dynamic (`Dim`s, not `Dim.AUTO`: a specialisation is an error, not a silent constant)."""
    batch, length = Dim("batch"), Dim("length")
    axes = {"input_ids": {0: batch, 1: length}}
    if with_mask:
        axes["attention_mask"] = {0: batch, 1: length}
    return axes


def export_onnx(module: torch.nn.Module, with_mask: bool = False, keep_guards: bool = True, sample=SAMPLE):
    """Export `module(input_ids[, attention_mask])` with dynamic batch and length; an onnxruntime session of it."""
    input_ids = torch.randint(0, VOCAB, sample, generator=torch.Generator().manual_seed(0))
    kwargs = {"attention_mask": torch.ones_like(input_ids)} if with_mask else {}
    with warnings.catch_warnings(), guards_kept() if keep_guards else contextlib.nullcontext():
        warnings.simplefilter("ignore")  # torch's own deprecation notes while tracing
        program = torch.onnx.export(
            module.eval(),
            (input_ids,),
            kwargs=kwargs,
            dynamo=True,
            dynamic_shapes=dynamic_axes(with_mask),
            verbose=False,
        )
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    options.log_severity_level = 3  # a failing run raises; its error is not also printed
    return ort.InferenceSession(program.model_proto.SerializeToString(), options, providers=["CPUExecutionProvider"])


def run_onnx(session, input_ids, attention_mask=None) -> torch.Tensor:
    feeds = {"input_ids": input_ids.numpy()}
    if attention_mask is not None:
        feeds["attention_mask"] = attention_mask.numpy()
    feeds = {spec.name: feeds[spec.name] for spec in session.get_inputs()}
    return torch.from_numpy(session.run(None, feeds)[0])


def assert_close_to_eager(actual: torch.Tensor, expected: torch.Tensor, where: str, rows=None):
    """`rows` (bool, `(B, T)`): compare only these tokens (real ones, not padding)."""
    if rows is not None:
        actual, expected = actual[rows], expected[rows]
    scale = expected.abs().max().item()
    error = (actual - expected).abs().max().item()
    assert error <= RTOL_OF_SCALE * scale, f"{where}: max |onnx - eager| = {error:.3g}, {error / scale:.3g} of scale"


def check_shapes(module: torch.nn.Module, session, shapes=SHAPES, with_mask: bool = False):
    """Every shape run in onnxruntime (all of them, the failures collected) against eager; `with_mask`: an all-ones
    attention_mask goes in with the ids."""
    failures = []
    for seed, (batch, length) in enumerate(shapes):
        ids = torch.randint(0, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed + 1))
        mask = torch.ones_like(ids) if with_mask else None
        with torch.no_grad():
            expected = module(ids, mask)
        try:
            assert_close_to_eager(run_onnx(session, ids, mask), expected, f"batch {batch}, length {length}")
        except Exception as e:  # an onnxruntime error or a mismatch
            failures.append(f"batch {batch}, length {length}: {type(e).__name__}: {str(e).splitlines()[0][:300]}")
    assert not failures, "\n".join(failures)


def left_padded(lengths, total: int, seed: int = 0):
    """Rows of `lengths` real tokens, left-padded to `total`; the ids and the 2-D mask."""
    ids = torch.randint(1, VOCAB, (len(lengths), total), generator=torch.Generator().manual_seed(seed))
    mask = torch.zeros(len(lengths), total, dtype=torch.long)
    for row, n in enumerate(lengths):
        mask[row, total - n :] = 1
    return ids.masked_fill(mask == 0, 0), mask


def check_padded(module: torch.nn.Module, session, alone: bool):
    """Left-padded batches in onnxruntime against eager on their real tokens; with `alone`, eager on each row alone
    (unpadded) too, so that the exported graph really ignores the padding, not merely matches eager."""
    for lengths, total in [((5, 3), 5), ((33, 20, 1), 33), ((64, 40), 64), ((200,), 200)]:
        ids, mask = left_padded(lengths, total, seed=total)
        with torch.no_grad():
            expected = module(ids, mask)
        got = run_onnx(session, ids, mask)
        assert_close_to_eager(got, expected, f"left-padded {lengths}", rows=mask.bool())
        if alone:
            for row, n in enumerate(lengths):
                with torch.no_grad():
                    own = module(ids[row : row + 1, total - n :])
                assert_close_to_eager(got[row : row + 1, total - n :], own, f"row {row} alone ({n} tokens)")


def causal_lm(block_type: str, **overrides):
    config = tiny_config(block_type, max_position_embeddings=MAX_POSITIONS, **overrides)
    return perturb_(SimplifiedForCausalLM(config)).eval()


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=VOCAB, n_positions=MAX_POSITIONS)
    return perturb_(GPT2LMHeadModel(config)).eval()


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        num_hidden_layers=2,
        hidden_size=32,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
        vocab_size=VOCAB,
        max_position_embeddings=MAX_POSITIONS,
    )
    return perturb_(LlamaForCausalLM(config)).eval()


NATIVE = {"gpt2": gpt2, "llama": llama}


# ---------------------------------------------------------------------------------------------------------------
# The harness on native transformers models
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_native_model_exports_exactly(name):
    """GPT2LMHeadModel / LlamaForCausalLM, exported with an attention_mask input (all ones here): one export at
    (2, 17) matches eager at every shape of `SHAPES`. Without a mask they do not export with a dynamic batch
    (`test_native_model_without_mask_refuses_a_dynamic_batch`)."""
    module = Logits(NATIVE[name](), use_cache=False)
    check_shapes(module, export_onnx(module, with_mask=True), with_mask=True)


@pytest.mark.slow
def test_native_model_without_mask_refuses_a_dynamic_batch():
    """A real shape-specialised path, refused at export: transformers' `_preprocess_mask_arguments`
    (masking_utils.py, 5.24: `if batch_size != position_ids.shape[0]`, run when no mask and no cache are given) checks
    for packed sequences by comparing the batch to the default position ids' batch of 1, a guard `batch != 1` that
    no dynamic batch including 1 satisfies. torch's default would export it (and batch 1 happens to be harmless
    there); with guards kept, the export names the guard."""
    with pytest.raises(Exception, match=r"(?s)Constraints violated.*batch.*!= 1"):
        export_onnx(Logits(gpt2(), use_cache=False))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_native_model_exports_left_padding(name):
    """With an attention_mask input: left-padded batches match eager on the real tokens, and each row alone."""
    module = Logits(NATIVE[name](), use_cache=False)
    # GPT-2's learned positions follow the mask only if given position ids: compare to eager padded, not alone
    check_padded(module, export_onnx(module, with_mask=True), alone=name == "llama")


# ---------------------------------------------------------------------------------------------------------------
# Our block types
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("block_type", block_params())
def test_causal_lm_exports_exactly(block_type):
    """SimplifiedForCausalLM, learned positions up to their last id (1099): one export at (2, 17) matches eager at
    lengths 5 to 1100 and batch 1 to 3."""
    module = Logits(causal_lm(block_type), use_cache=False)
    check_shapes(module, export_onnx(module))


@pytest.mark.slow
@pytest.mark.parametrize("block_type", ["pre_ln", "sas_p"])
@pytest.mark.parametrize("positions", ["rotary", "sinusoidal"])
def test_causal_lm_exports_exactly_with_other_positions(block_type, positions):
    module = Logits(causal_lm(block_type, position_embedding_type=positions), use_cache=False)
    check_shapes(module, export_onnx(module))


@pytest.mark.parametrize("block_type", block_params(fast=("sas",), types=("pre_ln", "sas", "sas_p", "simplest")))
def test_causal_lm_exports_left_padding(block_type):
    """An attention_mask input: left-padded batches match eager on the real tokens. Learned positions count from the
    first (padding) token unless position ids are given, so a row is compared to eager on the padded batch; rotary
    positions as well (`generate` passes positions; the graph takes ids and mask only)."""
    module = Logits(causal_lm(block_type), use_cache=False)
    check_padded(module, export_onnx(module, with_mask=True), alone=False)


@pytest.mark.slow
@pytest.mark.parametrize("block_type", ["pre_ln", "sas", "sas_p", "simplest"])
def test_masked_lm_exports_exactly(block_type):
    """SimplifiedForMaskedLM (bidirectional): exact at every shape, and with a padding mask, each padded row equals
    the row alone (the centring term and the softmax both ignore padding keys)."""
    config = tiny_config(block_type, max_position_embeddings=MAX_POSITIONS)
    model = perturb_(SimplifiedForMaskedLM(config)).eval()
    module = Logits(model)
    check_shapes(module, export_onnx(module))
    # right padding (BERT's) keeps the learned positions of each row's tokens: every row also equals itself alone
    session = export_onnx(module, with_mask=True)
    ids, mask = left_padded((33, 20, 5), 33, seed=3)
    ids, mask = ids.flip(-1), mask.flip(-1)
    with torch.no_grad():
        expected = module(ids, mask)
    got = run_onnx(session, ids, mask)
    assert_close_to_eager(got, expected, "right-padded", rows=mask.bool())
    for row, n in enumerate((33, 20, 5)):
        with torch.no_grad():
            own = module(ids[row : row + 1, :n])
        assert_close_to_eager(got[row : row + 1, :n], own, f"row {row} alone ({n} tokens)")


# ---------------------------------------------------------------------------------------------------------------
# Never silently wrong
# ---------------------------------------------------------------------------------------------------------------
class LengthBranch(torch.nn.Module):
    """A shape-dependent Python branch: doubles odd-length inputs. Traced at an odd length, the graph doubles always."""

    def forward(self, input_ids):
        x = input_ids.float()
        return x * 2 if input_ids.shape[1] % 2 else x


def test_shape_specialised_export_fails_loudly():
    """`export_onnx` refuses a graph that would hold only for the sample's lengths (torch's guard error, naming the
    guard); torch's default instead exports it, and the graph is wrong at an even length: why the guards are kept."""
    with pytest.raises(Exception, match=r"(?s)Constraints violated.*length"):
        export_onnx(LengthBranch())
    session = export_onnx(LengthBranch(), keep_guards=False)  # torch's default: the guard becomes a removed assert
    ids = torch.ones(1, 64, dtype=torch.long)
    assert torch.equal(run_onnx(session, ids), 2 * LengthBranch()(ids))  # eager would give 1s: silently wrong


class RunningSum(torch.nn.Module):
    def forward(self, input_ids):
        return running_sum(input_ids.float()[..., None])


def test_running_sum_exports_for_every_length():
    """`running_sum`'s blocked scan (the eager causal centring term) branches on the length; traced, it is `cumsum`,
    so an export with a dynamic length is exact at lengths across and past its blocks."""
    session = export_onnx(RunningSum())
    for length in (1, 5, 33, 64, 200):
        ids = torch.ones(2, length, dtype=torch.long)
        assert torch.equal(run_onnx(session, ids)[0, :, 0], torch.arange(1.0, length + 1.0))


@pytest.mark.slow  # a fresh interpreter and one export: about 20 s on 2 cores
def test_the_docs_logits_snippet_exports_without_a_warning(tmp_path):
    """docs/export.md's `torch.onnx.export` snippet, run as written in a fresh interpreter on a saved model at the
    path it names: no "Exporting a model while it is in training mode" warning (its `Logits` wrapper was never put
    in eval mode), and the saved graph gives eager's logits at another batch and length."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "export.md").read_text()
    snippet = re.search(r"```python\n(.*?)```", page, re.S).group(1)
    assert '"my-model"' in snippet and 'program.save("model.onnx")' in snippet
    model = causal_lm("sas_p")
    model.save_pretrained(tmp_path / "my-model")
    proc = subprocess.run([sys.executable, "-c", snippet], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "training mode" not in proc.stderr, proc.stderr[-3000:]
    session = ort.InferenceSession(str(tmp_path / "model.onnx"), providers=["CPUExecutionProvider"])
    ids = torch.randint(0, VOCAB, (3, 33), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = model(input_ids=ids).logits
    assert_close_to_eager(run_onnx(session, ids, torch.ones_like(ids)), expected, "docs snippet, batch 3, length 33")


# ---------------------------------------------------------------------------------------------------------------
# transformers' own exporter: prefill + decode with a cache
# ---------------------------------------------------------------------------------------------------------------
DECODE_STEPS = 4


def hf_export_for_generation(model):
    """transformers.exporters.OnnxExporter (experimental in 5.24): a `prefill` and a `decode` graph, traced from a
    real `generate` call, every axis dynamic (`OnnxConfig(dynamic=True)`), guards kept as above."""
    exporters = pytest.importorskip("transformers.exporters")
    prompt = torch.randint(1, VOCAB, (2, 7), generator=torch.Generator().manual_seed(0))
    with warnings.catch_warnings(), guards_kept():
        warnings.simplefilter("ignore")
        return exporters.OnnxExporter().export_for_generation(
            model, {"input_ids": prompt, "attention_mask": torch.ones_like(prompt)}, exporters.OnnxConfig(dynamic=True)
        )


def check_prefill_decode(model, exported):
    """Greedy decoding in onnxruntime (prefill, then one decode call per token, the cache passed back in) against
    eager cached forwards on the same tokens (logits at every step) and against `generate` (the tokens)."""
    prefill, decode = exported.runners["prefill"], exported.runners["decode"]
    for batch, length in [(2, 7), (1, 40), (3, 5)]:
        ids = torch.randint(1, VOCAB, (batch, length), generator=torch.Generator().manual_seed(length))
        positions = torch.arange(length).expand(batch, -1)
        out = prefill(input_ids=ids, position_ids=positions, cache=DynamicCache(config=model.config))
        with torch.no_grad():
            ref = model(input_ids=ids, position_ids=positions, cache=DynamicCache(config=model.config), use_cache=True)
        where = f"batch {batch}, prompt {length}"
        assert_close_to_eager(out.logits, ref.logits, f"{where}, prefill")
        cache, ref_cache, tokens = out.cache, ref.cache, ids
        for step in range(DECODE_STEPS):
            token = out.logits[:, -1:].argmax(-1)
            tokens = torch.cat([tokens, token], -1)
            position = torch.full((batch, 1), length + step)
            out = decode(input_ids=token, position_ids=position, cache=cache)
            with torch.no_grad():
                ref = model(input_ids=token, position_ids=position, cache=ref_cache, use_cache=True)
            assert_close_to_eager(out.logits, ref.logits, f"{where}, decode step {step}")
            cache, ref_cache = out.cache, ref.cache
        tokens = torch.cat([tokens, out.logits[:, -1:].argmax(-1)], -1)
        with torch.no_grad():
            generated = model.generate(
                ids, attention_mask=torch.ones_like(ids), max_new_tokens=DECODE_STEPS + 1, do_sample=False
            )
        assert torch.equal(tokens, generated), f"{where}: onnx greedy {tokens.tolist()} != generate"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["llama", *BLOCK_TYPES])
def test_transformers_exporter_prefill_decode(name):
    """Native Llama first (the exporter works on it), then each of our block types, causal, learned positions."""
    model = llama() if name == "llama" else causal_lm(name, pad_token_id=0, eos_token_id=None)
    if name == "llama":
        model.generation_config.pad_token_id, model.generation_config.eos_token_id = 0, None
    check_prefill_decode(model, hf_export_for_generation(model))
