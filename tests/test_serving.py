"""Serving: transformers' continuous batching, `transformers serve`, and the vLLM / SGLang Transformers-backend
contract, each checked against `generate` (greedy tokens, one prompt at a time) on native transformers models first
(the harness's validation) and then on every causal block type.

What continuous batching (transformers 5.24, `generation/continuous_batching/`) does on the CPU, read from its source
and recorded by `test_continuous_batching_matches_generate` (a pre-hook on the causal LM):

- Attention: `ContinuousBatchingManager.switch_to_cb_friendly_attn` keeps `sdpa`, turns `eager` into `paged|eager`
  (`integrations/eager_paged.py`) and would switch to flash-attention 2/3 only where a flash kernel is available
  (never on the CPU); anything else (flex, a custom name) is refused with a `ValueError`. No CUDA graphs, no compile,
  no decode fast path (block tables need flash on CUDA): every step takes the "varlen" path.
- Inputs, per step (`input_outputs.py::get_model_kwargs`): every scheduled token of every request flattened into one
  row, `input_ids` and `position_ids` of shape `(1, tokens)` (positions continue each request's cache; a long prompt
  is prefilled in chunks of at most `max_batch_tokens`, next to other requests' decode tokens), a ready-made 4-D
  additive float `attention_mask` `(1, 1, tokens, cached + tokens)` for sdpa / eager (block-causal over the gathered
  cache; `None` only for flash), `cache=` a `PagedAttentionCache`, `use_cache=False`, `is_causal=False` (the mask
  carries causality; transformers' `merge_with_config_defaults` also copies it into `config.is_causal` for the
  call), `logits_to_keep` (the last token of each request whose prompt is complete), and the cache's own kwargs
  `cu_seq_lens_q`, `cu_seq_lens_k`, `max_length_q`, `max_length_k`, `read_index`, `write_index`, `block_table`,
  `logits_processor_args`. A layer must call `cache.update(k, v, layer_idx, kwargs=kwargs)` with those kwargs (it
  reads them and rewrites `cu_seq_lens_k` / `max_length_k` in place) and gets back `(1, kv_heads, cached + tokens,
  head_dim)` keys and values for the attention call; `create_causal_mask` returns the given 4-D mask as is.
- Results: `generate_batch` never raises for a failing forward: each request's `GenerationOutput.error` carries the
  message, so the tests assert `error is None` first.

The vLLM / SGLang emulation (`test_vllm_contract_matches_generate`) follows vLLM's `model_executor/models/transformers/`
(`__init__.py::vllm_attention_forward`, `base.py::Base.forward` and `create_attention_instances`): the base model built
with `config._attn_implementation = "vllm"`, one flattened row per step, `use_cache=False`, `attention_instances=` a
dict of per-layer attention objects that own the KV cache, no mask function registered (so `create_causal_mask`
returns `None`), the input embedding replaced by a plain one times the old module's `embed_scale` if it has one, and
the logits computed outside the model from the LM head's weight. The registered attention function may be called
more than once per layer and step with the same keys and values (shaped attention's centring term `C·X` as a second
call with zero queries): the cache write is idempotent per (sequence, position), and a second write of different
keys or values for a slot fails the test, since a real engine's cache would then hold the wrong ones.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from conftest import perturb_, tiny_config
from transformers import (
    AttentionInterface,
    AutoModel,
    AutoTokenizer,
    ContinuousBatchingConfig,
    GenerationConfig,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
)
from transformers.utils.import_utils import is_serve_available

from modeling_simplified import BLOCK_TYPES, SimplifiedForCausalLM

NEW_TOKENS = 6
#: prompts of different lengths; the longest (13) is prefilled in two chunks under `max_batch_tokens=8`
PROMPTS = [[5, 6, 7], [10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22], [20], [30, 31, 32, 33, 34]]


def _llama() -> LlamaForCausalLM:
    config = LlamaConfig(
        vocab_size=97,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,  # grouped-query attention: the emulated engine repeats kv heads as vLLM's kernels do
        max_position_embeddings=64,
    )
    return perturb_(LlamaForCausalLM(config), scale=0.3).eval()


def _gpt2(vocab_size: int = 97) -> GPT2LMHeadModel:
    config = GPT2Config(vocab_size=vocab_size, n_embd=32, n_layer=2, n_head=4, n_positions=64)
    return perturb_(GPT2LMHeadModel(config), scale=0.3).eval()  # GPT-2's std-0.02 init repeats one token


def _simplified(block_type: str, **overrides) -> SimplifiedForCausalLM:
    return perturb_(SimplifiedForCausalLM(tiny_config(block_type, **overrides))).eval()


def _reference(model, prompt: list[int], new_tokens: int = NEW_TOKENS) -> list[int]:
    """Greedy tokens of `generate` on one prompt alone (no eos: always `new_tokens` of them)."""
    with torch.no_grad():
        out = model.generate(
            torch.tensor([prompt]), max_new_tokens=new_tokens, do_sample=False, eos_token_id=None, pad_token_id=0
        )
    return out[0, len(prompt) :].tolist()


NATIVE = {"llama": _llama, "gpt2": _gpt2}
CAUSAL_MODELS = [*NATIVE, *BLOCK_TYPES]


def _build(name: str):
    return NATIVE[name]() if name in NATIVE else _simplified(name)


# ----------------------------------------------------------------------------------------------------------------
# 1. transformers' continuous batching
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("attn_implementation", ["sdpa", "eager"])
@pytest.mark.parametrize("name", CAUSAL_MODELS)
def test_continuous_batching_matches_generate(name, attn_implementation):
    """`generate_batch` on four prompts at once (one prefilled in two chunks next to other requests' decode tokens)
    gives each prompt the greedy tokens `generate` gives it alone."""
    model = _build(name)
    model.set_attn_implementation(attn_implementation)
    expected = [_reference(model, p) for p in PROMPTS]

    steps = []

    def record(module, args, kwargs):
        cu = kwargs["cu_seq_lens_q"].tolist()
        steps.append([b - a for a, b in zip(cu, cu[1:])])  # tokens of each request in this step

    hook = model.register_forward_pre_hook(record, with_kwargs=True)
    config = ContinuousBatchingConfig(page_size=4, num_blocks=64, max_batch_tokens=8, max_requests_per_batch=4)
    try:
        out = model.generate_batch(
            inputs=PROMPTS,
            generation_config=GenerationConfig(max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=-1),
            continuous_batching_config=config,
        )
    finally:
        hook.remove()
    results = list(out.values())
    assert [r.error for r in results] == [None] * len(PROMPTS)
    assert [r.generated_tokens for r in results] == expected
    # the harness did schedule a step mixing a decode token (1) with a prefill (> 1)
    assert any(1 in lengths and max(lengths) > 1 for lengths in steps), steps
    assert model.config._attn_implementation == attn_implementation  # restored after the run


# ----------------------------------------------------------------------------------------------------------------
# 3. the vLLM / SGLang Transformers-backend contract, emulated on the CPU
# ----------------------------------------------------------------------------------------------------------------
class _ForwardContext:
    """What the engine knows about the step being run: the sequence and position of every token of the row (vLLM
    keeps it in a global forward context, read by its `Attention` layers, not passed through the model)."""

    sequence_ids: list[int] = []
    positions: list[int] = []


class _EngineAttention:
    """One layer's attention as the engine runs it (vLLM's `Attention(num_heads, head_size, scale, num_kv_heads)`):
    writes the step's keys and values into its own per-sequence cache, then attends causally within each sequence
    over everything cached so far. `impl.scale` is set by the attention function from the model's `scaling`."""

    def __init__(self, context: type[_ForwardContext], num_heads: int, head_size: int, num_kv_heads: int):
        self.context = context
        self.num_heads, self.head_size, self.num_kv_heads = num_heads, head_size, num_kv_heads
        self.impl = SimpleNamespace(scale=head_size**-0.5)
        self.cache: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]] = {}  # (sequence, position) -> k, v
        self.calls = 0

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        tokens = query.shape[0]
        query = query.view(tokens, self.num_heads, self.head_size)
        key = key.view(tokens, self.num_kv_heads, self.head_size)
        value = value.view(tokens, self.num_kv_heads, -1)
        sequences, positions = self.context.sequence_ids, self.context.positions
        assert len(sequences) == tokens, "the attention function got a different number of tokens than the row"
        for i, slot in enumerate(zip(sequences, positions)):  # reshape_and_cache: idempotent per slot
            if slot in self.cache:
                old_k, old_v = self.cache[slot]
                assert torch.equal(old_k, key[i]) and torch.equal(old_v, value[i]), (
                    f"slot {slot} written twice with different keys/values: a second attention call in one layer "
                    "must pass the same k/v (only the queries may differ)"
                )
            self.cache[slot] = (key[i].clone(), value[i].clone())
        out = []
        for i, (seq, pos) in enumerate(zip(sequences, positions)):
            keys = torch.stack([self.cache[(seq, p)][0] for p in range(pos + 1)])  # (kv, heads, d)
            values = torch.stack([self.cache[(seq, p)][1] for p in range(pos + 1)])
            groups = self.num_heads // self.num_kv_heads
            keys, values = keys.repeat_interleave(groups, dim=1), values.repeat_interleave(groups, dim=1)
            scores = torch.einsum("hd,khd->hk", query[i].float(), keys.float()) * self.impl.scale
            out.append(torch.einsum("hk,khd->hd", scores.softmax(-1), values.float()).to(query.dtype))
        return torch.stack(out).reshape(tokens, -1)


def _vllm_attention_forward(module, query, key, value, attention_mask, scaling=None, attention_instances=None, **kw):
    """vLLM's `vllm_attention_forward` (model_executor/models/transformers/__init__.py), shape handling as there:
    `(1, heads, tokens, d)` -> `[tokens, heads * d]`, output `[tokens, heads * d]`."""
    self_attn = attention_instances[module.layer_idx]
    if scaling is not None:
        self_attn.impl.scale = float(scaling)
    hidden = query.shape[-2]
    query, key, value = (x.transpose(1, 2) for x in (query, key, value))
    query, key, value = (x.reshape(hidden, -1) for x in (query, key, value))
    return self_attn.forward(query, key, value), None


@pytest.fixture
def vllm_attention():
    AttentionInterface.register("vllm", _vllm_attention_forward)
    yield
    AttentionInterface._global_mapping.pop("vllm", None)


def _engine_model(lm):
    """The base model as vLLM's `Base.__init__` builds it: `AutoModel.from_config` with `_attn_implementation =
    "vllm"`, the checkpoint's weights, the input embedding replaced (keeping only `embed_scale`)."""
    config = lm.config.__class__.from_dict(lm.config.to_dict())
    config._attn_implementation = "vllm"
    base = AutoModel.from_config(config)
    missing, unexpected = base.load_state_dict(lm.base_model.state_dict(), strict=False)
    assert not unexpected and not missing
    base.eval()
    # vLLM: EncoderOnlyAttention (bidirectional) as soon as any module says is_causal=False
    assert all(getattr(m, "is_causal", True) for m in base.modules())
    old = base.get_input_embeddings()
    new = torch.nn.Embedding(config.vocab_size, config.hidden_size)  # VocabParallelEmbedding(vocab_size, ...)
    with torch.no_grad():
        new.weight.copy_(old.weight)  # refused (shape) for a padded embedding, as vLLM's loader refuses it
    scale = getattr(old, "embed_scale", None)
    if scale is not None:
        new = _Scaled(new, float(scale))
    base.set_input_embeddings(new)
    return base


class _Scaled(torch.nn.Module):
    def __init__(self, embedding: torch.nn.Embedding, scale: float):
        super().__init__()
        self.embedding, self.embed_scale = embedding, scale

    def forward(self, input_ids):
        return self.embedding(input_ids) * self.embed_scale


def _run_engine(lm, base, prompts: list[list[int]], arrivals: list[int], budget: int) -> tuple[list, list]:
    """A tiny scheduler: requests arrive at the given steps; each step schedules, in order, one decode token per
    running request or the next prefill chunk (chunked prefill within a token budget), runs ONE flattened forward,
    and samples greedily from the last token of every request whose known tokens are all computed."""
    config = lm.config
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    layers = {
        i: _EngineAttention(_ForwardContext, config.num_attention_heads, head_dim, kv_heads)
        for i in range(config.num_hidden_layers)
    }
    tokens = [list(p) for p in prompts]
    computed = [0] * len(prompts)
    generated = [[] for _ in prompts]
    schedule_log = []
    head = lm.get_output_embeddings().weight
    for step in range(100):
        if all(len(g) == NEW_TOKENS for g in generated):
            break
        ids, seqs, positions, last = [], [], [], []
        room = budget
        for r in range(len(prompts)):
            if arrivals[r] > step or len(generated[r]) == NEW_TOKENS or room == 0:
                continue
            n = min(len(tokens[r]) - computed[r], room)
            ids += tokens[r][computed[r] : computed[r] + n]
            seqs += [r] * n
            positions += range(computed[r], computed[r] + n)
            computed[r] += n
            room -= n
            if computed[r] == len(tokens[r]):
                last.append((r, len(ids) - 1))
        schedule_log.append([(r, seqs.count(r), len(tokens[r]) > len(prompts[r])) for r in dict.fromkeys(seqs)])
        _ForwardContext.sequence_ids, _ForwardContext.positions = seqs, list(positions)
        with torch.no_grad():
            hidden = base(
                torch.tensor(ids)[None],
                position_ids=torch.tensor(positions)[None],
                use_cache=False,
                attention_instances=layers,
                return_dict=False,
            )[0][0]
            logits = torch.nn.functional.linear(hidden, head)[:, : config.vocab_size]
        for r, index in last:
            token = int(logits[index].argmax())
            generated[r].append(token)
            tokens[r].append(token)
    return generated, schedule_log


@pytest.mark.parametrize("name", ["llama", *BLOCK_TYPES])
def test_vllm_contract_matches_generate(name, vllm_attention):
    """Driven as vLLM's Transformers backend drives a model (one flattened row of all scheduled tokens, the engine's
    attention owning the KV cache), greedy tokens equal `generate` per prompt; one step mixes a decode token of the
    first request with the prefill of the second, and the longest prompt is prefilled in chunks."""
    lm = _llama() if name == "llama" else _simplified(name)
    prompts = [PROMPTS[0], PROMPTS[3], PROMPTS[1]]
    expected = [_reference(lm, p) for p in prompts]
    base = _engine_model(lm)
    generated, log = _run_engine(lm, base, prompts, arrivals=[0, 1, 2], budget=8)
    assert generated == expected
    # step 1: request 0 decodes (1 token, already has output) while request 1 prefills its whole prompt
    assert log[1] == [(0, 1, True), (1, len(prompts[1]), False)]
    assert any(count < len(prompts[2]) for r, count, decoding in sum(log, []) if r == 2 and not decoding)


def test_vllm_refuses_a_padded_vocabulary(vllm_attention):
    """`pad_vocab_size_multiple` gives the embedding more rows than `config.vocab_size`: the engine's embedding (vLLM
    builds it with `config.vocab_size` rows) cannot take those weights, as vLLM's loader refuses them."""
    lm = _simplified("pre_ln", pad_vocab_size_multiple=64)
    assert lm.get_input_embeddings().weight.shape[0] == 128 != lm.config.vocab_size
    with pytest.raises(RuntimeError, match="size"):
        _engine_model(lm)


# ----------------------------------------------------------------------------------------------------------------
# 2. `transformers serve` end to end (OpenAI-compatible HTTP server in a subprocess, loopback only)
# ----------------------------------------------------------------------------------------------------------------
needs_serve = pytest.mark.skipif(
    not is_serve_available(), reason="needs transformers[serving] (fastapi, uvicorn, openai)"
)
SERVE_PROMPTS = ["def foo(x):", "import json\n", "class A", "return self._value"]
#: the workaround for remote-code models (docs/serving.md): the class put where transformers serve looks for it, and a
#: chat request to a tokenizer without a chat template answered 400 with the reason
LAUNCHER = str(Path(__file__).resolve().parents[1] / "examples" / "serve_remote.py")


class ServerExited(RuntimeError):
    """The server process ended before answering /health (its log tail is the message)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never through a proxy


def _post(url: str, body: dict, timeout: float = 60) -> dict:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with _DIRECT.open(request, timeout=timeout) as response:
        return json.loads(response.read())


@contextlib.contextmanager
def _server(folder: str, *args: str, launcher: str | None = None, startup_timeout: float = 120):
    """`transformers serve FOLDER ARGS` (`python LAUNCHER serve FOLDER ARGS` with a launcher) on 127.0.0.1 at a free
    port, offline with its own HF_HOME; yields the base URL (and the log's tail) once /health answers, and always
    stops the process (terminate, then kill) and removes its HF_HOME on the way out."""
    port = _free_port()
    home = tempfile.mkdtemp(prefix="serve-hf-home-")
    env = {
        **os.environ,
        "HF_HOME": home,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HUB_DISABLE_UPDATE_CHECK": "1",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    entry = [sys.executable, launcher] if launcher else [sys.executable, "-m", "transformers.cli.transformers"]
    command = [*entry, "serve", folder, "--host", "127.0.0.1", "--port", str(port), "--device", "cpu", *args]
    log = tempfile.NamedTemporaryFile("w+", prefix="serve-log-", suffix=".txt", delete=False)
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + startup_timeout
        while True:
            if process.poll() is not None:
                log.seek(0)
                raise ServerExited(f"exit code {process.returncode}:\n{log.read()[-3000:]}")
            try:
                with _DIRECT.open(url + "/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"no /health answer within {startup_timeout} s")
            time.sleep(0.5)
        yield SimpleNamespace(url=url, log=lambda: (log.seek(0), log.read()[-3000:])[1])
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)
        log.close()
        os.unlink(log.name)
        shutil.rmtree(home, ignore_errors=True)


def _check_completions(server, folder: str, model, tokenizer):
    """Four concurrent greedy /v1/completions requests; each reply is the decoded text of `generate`'s tokens, and
    as many of them (the OpenAI reply carries text, not ids)."""
    gen = json.dumps({"max_new_tokens": NEW_TOKENS, "do_sample": False, "eos_token_id": None})

    def ask(prompt):
        try:
            return _post(server.url + "/v1/completions", {"model": folder, "prompt": prompt, "generation_config": gen})
        except urllib.error.HTTPError as error:
            raise AssertionError(f"{error} for {prompt!r}; server log:\n{server.log()}") from None

    with concurrent.futures.ThreadPoolExecutor(len(SERVE_PROMPTS)) as pool:
        replies = list(pool.map(ask, SERVE_PROMPTS))
    for prompt, reply in zip(SERVE_PROMPTS, replies):
        ids = tokenizer(prompt)["input_ids"]
        expected = _reference(model, ids)
        assert reply["usage"] == {
            "prompt_tokens": len(ids),
            "completion_tokens": NEW_TOKENS,
            "total_tokens": len(ids) + NEW_TOKENS,
        }
        assert reply["choices"][0]["text"] == tokenizer.decode(expected, skip_special_tokens=True), prompt


CB_ARGS = ("--continuous-batching", "--cb-num-blocks", "64", "--cb-max-batch-tokens", "16")


@needs_serve
@pytest.mark.slow  # a server process per test: about 20 s each on 2 cores
def test_transformers_serve_native_gpt2(tmp_path, bpe_tokenizer):
    """`transformers serve --continuous-batching` on a saved GPT2LMHeadModel and a locally trained tokenizer: four
    concurrent completions each equal `generate` (the harness's validation)."""
    model = _gpt2(len(bpe_tokenizer))
    folder = str(tmp_path / "gpt2")
    model.save_pretrained(folder)
    bpe_tokenizer.save_pretrained(folder)
    with _server(folder, *CB_ARGS) as server:
        _check_completions(server, folder, model, bpe_tokenizer)


def _export_simplified(tmp_path, tokenizer, block_type: str = "sas_p") -> tuple[str, SimplifiedForCausalLM]:
    model = _simplified(block_type, vocab_size=len(tokenizer))
    folder = str(tmp_path / block_type)
    model.save_pretrained(folder)  # writes the code files (register_for_auto_class): a trust_remote_code folder
    tokenizer.save_pretrained(folder)
    return folder, model


@needs_serve
@pytest.mark.slow  # a server process per test: about 20 s each on 2 cores
@pytest.mark.xfail(
    strict=True,
    raises=ServerExited,
    reason="transformers 5.24 transformers/cli/serving/model_manager.py:319 (ModelManager._load_model) does "
    "`getattr(transformers, config.architectures[0])`: AttributeError: module transformers has no attribute "
    "SimplifiedForCausalLM for any remote-code class, even with --trust-remote-code",
)
def test_transformers_serve_remote_code(tmp_path, bpe_tokenizer):
    """`transformers serve --trust-remote-code` on an exported folder, as a user would run it (upstream refuses it
    today; an XPASS here means upstream fixed it: drop the xfail and the launcher from docs/serving.md)."""
    folder, model = _export_simplified(tmp_path, bpe_tokenizer)
    with _server(folder, "--trust-remote-code", *CB_ARGS) as server:
        _check_completions(server, folder, model, bpe_tokenizer)


@needs_serve
@pytest.mark.slow  # a server process per test: about 20 s each on 2 cores
@pytest.mark.parametrize("continuous_batching", [False, True], ids=["sequential", "continuous-batching"])
def test_transformers_serve_remote_code_with_launcher(tmp_path, bpe_tokenizer, continuous_batching):
    """The documented workaround: `python examples/serve_remote.py serve FOLDER --trust-remote-code` (the class from
    the folder's `auto_map`, set on the `transformers` module, then the stock CLI) serves the exported model."""
    folder, model = _export_simplified(tmp_path, bpe_tokenizer)
    args = ("--trust-remote-code", *(CB_ARGS if continuous_batching else ()))
    with _server(folder, *args, launcher=LAUNCHER) as server:
        _check_completions(server, folder, model, bpe_tokenizer)


#: a minimal chat template (docs/serving.md's): each message as "role: content" on its own line, then "assistant:"
TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


@needs_serve
@pytest.mark.slow  # a server process: about 20 s on 2 cores
def test_launcher_answers_a_chat_request_without_a_chat_template_with_400_and_the_reason(tmp_path, bpe_tokenizer):
    """A chat request to an export whose tokenizer has no chat template (as `make demo`'s) got HTTP 500 with the
    body `Internal Server Error` (the reason only in the server's log): the launcher answers 400, as the server
    answers other bad requests, with the reason and what to do; with a template given in the request, or saved with
    the tokenizer, the same request is served, and its reply is `generate`'s greedy tokens on the templated prompt."""
    folder, model = _export_simplified(tmp_path, bpe_tokenizer)
    assert bpe_tokenizer.chat_template is None
    messages = [{"role": "user", "content": "def foo(x):"}]
    gen = json.dumps({"max_new_tokens": NEW_TOKENS, "do_sample": False, "eos_token_id": None})
    with _server(folder, "--trust-remote-code", launcher=LAUNCHER) as server:
        for endpoint, body in [
            ("/v1/chat/completions", {"model": folder, "messages": messages, "generation_config": gen}),
            ("/v1/responses", {"model": folder, "input": "def foo(x):", "generation_config": gen}),
        ]:
            with pytest.raises(urllib.error.HTTPError) as refused:
                _post(server.url + endpoint, body)
            assert refused.value.code == 400, (endpoint, server.log())
            detail = json.loads(refused.value.read())["detail"]
            assert detail.startswith(f"The tokenizer of {folder} has no chat template"), detail
            assert "/v1/completions" in detail and "tokenizer.chat_template" in detail

        body = {"model": folder, "messages": messages, "generation_config": gen}
        given = _post(
            server.url + "/v1/chat/completions", {**body, "chat_template_kwargs": {"chat_template": TEMPLATE}}
        )
        # the template saved with the tokenizer, as docs/serving.md shows it; /reset unloads the model, which the
        # next request loads again from the folder
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
        tokenizer.chat_template = TEMPLATE
        tokenizer.save_pretrained(folder)
        _post(server.url + "/reset", {})
        saved = _post(server.url + "/v1/chat/completions", body)
    ids = bpe_tokenizer.apply_chat_template(messages, chat_template=TEMPLATE, add_generation_prompt=True)["input_ids"]
    expected = _reference(model, ids)
    for reply in (given, saved):
        assert reply["usage"]["prompt_tokens"] == len(ids) and reply["usage"]["completion_tokens"] == NEW_TOKENS
        assert reply["choices"][0]["message"]["content"] == bpe_tokenizer.decode(expected, skip_special_tokens=True)
