"""Benchmark suite (`make bench`): what users compare us on, every figure a ratio measured in the same run.

    python -m benchmarks.benchmark                       # everything, the paper's CodeParrot shape
    python -m benchmarks.benchmark --sections train,mfu  # a subset
    python -m benchmarks.benchmark --quick               # smoke run at a tiny shape

Sections (results printed as tables and written to `--json`):
- `train`: training-step time (forward with labels, backward, clipping at 1, fused AdamW on `parameter_groups`,
  `zero_grad`) of every block type at the CodeParrot shape (18 blocks, d=768, 12 heads, MLP 3072, vocab 50257,
  seq 128, batch 8), as ratios to our `pre_ln`, and two anchors of the same shape and attention implementation
  (sdpa): our `pre_ln` against `GPT2LMHeadModel`, and `pre_ln_llama` (our pre_ln with RMSNorm, SwiGLU of width
  8/3·d, rotary positions, tied embeddings) against `LlamaForCausalLM` configured alike, in a group of their own.
  Models are timed round-robin in groups that fit in memory, each model in a process of its own (its own heap; one
  step runs at a time); the order rotates every round; after two warm-up rounds (`TRAIN_WARMUP`), each round gives
  one ratio per model, and the median of those ratios is the figure (their min..max is the spread). The analytic
  matmul-FLOP bound of each ratio (weights of every GEMM, attention scores and mixing) stands next to it.
- `mfu`: model FLOPs utilisation of the training step, as the field uses the term: achieved model FLOP/s (the
  analytic FLOPs of `train` over the median step) / this machine's peak GEMM FLOP/s, one number for all models (the
  best rate of any GEMM the steps run, recorded with its shapes and timed alone); beside it the GEMM-time share (the
  step's GEMMs timed alone / the step), a different quantity.
- `generate`: cached greedy `generate()` tokens/s (prompt 32, 128 new tokens, batch 1 and 8) against
  `GPT2LMHeadModel`.
- `memory`: peak memory growth of forward + backward at sequence 512, 1024, 2048 (batch 1, 4 blocks of the
  CodeParrot width, vocab 1024) for shaped attention through sdpa (no T×T tensor) against the eager reference,
  which materialises the T×T matrices; each measurement in its own process (peak RSS).
- `compile`: the `train` comparison under `torch.compile(model)` (what the Trainer's `torch_compile=True` does),
  for `pre_ln`, `sas`, `sas_p` and `GPT2LMHeadModel`.
- `raptr`: RaPTr's saving: a training step on half the layers (first and last kept) against a full step of the
  same `pre_ln` model, interleaved.
- `packing`: tokens/s of a training step on variable-length sequences (lengths uniform in [seq/8, seq], seq at
  least 128, batch at least 8), padded to the longest of the batch (2-D mask, ignored labels) against one
  padding-free row (`DataCollatorWithFlattening`, `simplified-train --packing`), for `pre_ln` and `sas_p`;
  round-robin, tokens counted without padding.
- `loss`: the fused LM head + cross-entropy of a training step (`skip_logits`, the default in training mode) against
  the unfused head (`skip_logits=False`: the `(tokens, vocab)` logits, their log-softmax and gradient), for `pre_ln`
  and `sas_p`: step time round-robin on the same model, and the peak memory growth of a training step after the
  first (forward, backward, AdamW; its state already allocated) in a fresh process per model and head.
- `allocator`: the `train` step of `GPT2LMHeadModel`, `pre_ln` and `sas_p` under glibc malloc's defaults against
  `MALLOC_KEEP` (no mmap'd blocks, no heap trimming: freed gradients and activations are reused instead of
  page-faulted in again every step), each in a process of its own, round-robin.
- `profile`: the top operators by self CPU time of one eager training step (`torch.profiler`, after the warm-up
  step) of `pre_ln` and `sas_p`: where the time goes that matmul FLOPs do not count.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

import torch
import transformers
from torch.profiler import ProfilerActivity, profile
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import DataCollatorWithFlattening, GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

from modeling_simplified import SimplifiedConfig, SimplifiedForCausalLM, parameter_groups
from modeling_simplified.modeling_simplified import ReparamLinear

from . import raptr

SECTIONS = ("train", "mfu", "generate", "memory", "compile", "profile", "raptr", "packing", "loss", "allocator")
#: train groups: each fits in memory (4 models with AdamW state at the CodeParrot shape is ~11 GB) and has pre_ln
TRAIN_GROUPS = (
    ("gpt2", "pre_ln", "sas_p", "sas"),
    ("pre_ln", "parallel", "value_skipinit", "simplest"),
    ("pre_ln", "post_ln", "normformer"),
    ("llama", "pre_ln_llama"),
)
#: transformers' classes users pick today, each timed against our block configured like it
ANCHORS = {"gpt2": "pre_ln", "llama": "pre_ln_llama"}
ANCHOR_CLASSES = {"gpt2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM"}
COMPILE_GROUP = ("gpt2", "pre_ln", "sas_p", "sas")
#: sections that run on a CUDA device (`--device cuda`); the others measure the CPU process (RSS, CPU profiler)
CUDA_SECTIONS = ("train", "mfu", "generate", "compile", "loss")
#: glibc malloc settings (mallopt(3)) that keep freed memory in the process: no mmap'd blocks, no trimming of the heap.
#: By default glibc returns blocks over 32 MiB (and a heap top over its trim threshold) to the kernel, and every
#: step's gradients, activations and vocabulary-sized buffers are page-faulted in again.
MALLOC_KEEP = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(2**40)}
#: where models and batches live (`--device`)
DEVICE = torch.device("cpu")


def _sync() -> None:
    if DEVICE.type == "cuda":
        torch.cuda.synchronize(DEVICE)


def _ids(shape: Shape, vocab_low: int = 0, batch: int | None = None, seq: int | None = None, seed: int = 0):
    """A fixed batch of token ids on `DEVICE`."""
    size = (shape.batch if batch is None else batch, shape.seq if seq is None else seq)
    return torch.randint(vocab_low, shape.vocab, size, generator=torch.Generator().manual_seed(seed)).to(DEVICE)


@dataclass(frozen=True)
class Shape:
    layers: int = 18
    width: int = 768
    heads: int = 12
    vocab: int = 50257
    seq: int = 128
    batch: int = 8


QUICK = Shape(layers=2, width=64, heads=4, vocab=512, seq=32, batch=2)


def swiglu_width(shape: Shape) -> int:
    """Llama's SwiGLU width, 8/3·d (2048 at d=768): its three matrices hold as many weights as a 4d MLP's two."""
    return 8 * shape.width // 3


def build(name: str, shape: Shape, attn: str = "sdpa", positions: int = 1024) -> torch.nn.Module:
    """`gpt2` (`GPT2LMHeadModel`, no dropout), `llama` (`LlamaForCausalLM`, tied embeddings), `pre_ln_llama` (our
    pre_ln configured like it: RMSNorm with its eps, SwiGLU of its width, rotary positions, no biases) or one of our
    block types, at `shape`."""
    if name == "llama":
        config = LlamaConfig(
            vocab_size=shape.vocab,
            hidden_size=shape.width,
            intermediate_size=swiglu_width(shape),
            num_hidden_layers=shape.layers,
            num_attention_heads=shape.heads,
            num_key_value_heads=shape.heads,
            max_position_embeddings=max(positions, shape.seq),
            rms_norm_eps=1e-6,
            tie_word_embeddings=True,
        )
        model = LlamaForCausalLM(config)
    elif name == "pre_ln_llama":
        config = SimplifiedConfig(
            block_type="pre_ln",
            vocab_size=shape.vocab,
            hidden_size=shape.width,
            num_hidden_layers=shape.layers,
            num_attention_heads=shape.heads,
            intermediate_size=swiglu_width(shape),
            hidden_act="swiglu",
            position_embedding_type="rotary",
            norm_type="rmsnorm",
            norm_eps=1e-6,
            max_position_embeddings=max(positions, shape.seq),
            tie_word_embeddings=True,
        )
        model = SimplifiedForCausalLM(config)
    elif name == "gpt2":
        config = GPT2Config(
            vocab_size=shape.vocab,
            n_embd=shape.width,
            n_layer=shape.layers,
            n_head=shape.heads,
            n_positions=max(positions, shape.seq),
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
        )
        model = GPT2LMHeadModel(config)
    else:
        config = SimplifiedConfig(
            block_type=name,
            vocab_size=shape.vocab,
            hidden_size=shape.width,
            num_hidden_layers=shape.layers,
            num_attention_heads=shape.heads,
            intermediate_size=4 * shape.width,
            max_position_embeddings=max(positions, shape.seq),
        )
        model = SimplifiedForCausalLM(config)
    model.set_attn_implementation(attn)
    return model if DEVICE.type == "cpu" else model.to(DEVICE)


def matmul_flops_per_token(model: torch.nn.Module, shape: Shape) -> float:
    """Analytic training matmul FLOPs per token: 6 × (weights of every GEMM: Linear, Conv1D, eq. 6's reparameterised
    matrices) + attention, `QK^T` and `A·X`, each 2·T·d per token and layer, times 3 (forward and backward)."""
    gemm_weights = sum(
        module.weight.numel()
        for module in model.modules()
        if isinstance(module, (torch.nn.Linear, ReparamLinear)) or type(module).__name__ == "Conv1D"
    )
    return 6 * gemm_weights + 3 * shape.layers * 2 * 2 * shape.seq * shape.width


def train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batch: torch.Tensor, **forward) -> None:
    """One Trainer step: forward with labels (and `forward`'s arguments), backward, clip at 1, AdamW step,
    zero_grad (set to None)."""
    model(input_ids=batch, labels=batch, **forward).loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def optimizer_for(model: torch.nn.Module) -> torch.optim.Optimizer:
    return torch.optim.AdamW(parameter_groups(model, 0.1), lr=1e-4, fused=True)  # the Trainer's adamw_torch_fused


def _stats(times: list[float]) -> dict:
    ordered = sorted(times)
    median = statistics.median(ordered)
    return {"median_s": median, "min_s": ordered[0], "spread": (ordered[-1] - ordered[0]) / median, "times_s": times}


def round_robin(models: dict, run, rounds: int, warmup: int = 1) -> dict[str, dict]:
    """Time every model, one call each per round, the order rotating every round; the first `warmup` rounds are not
    timed. `run(name, model)` returns the call's (wall, CPU) seconds (`timed` measures them in this process, a
    `TrainProcess` in its own). Returns per model the wall times, the median CPU time and their statistics."""
    names = list(models)
    wall = {n: [] for n in names}
    cpu = {n: [] for n in names}
    for r in range(warmup + rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            wall_s, cpu_s = run(name, models[name])
            if r >= warmup:
                wall[name].append(wall_s)
                cpu[name].append(cpu_s)
    return {n: {**_stats(wall[n]), "cpu_median_s": statistics.median(cpu[n])} for n in names}


def timed(fn):
    """`fn(name, model)` as a `round_robin` call timed in this process: (wall, CPU) seconds."""

    def run(name, model):
        _sync()
        start, cpu_start = time.perf_counter(), time.process_time()
        fn(name, model)
        _sync()
        return time.perf_counter() - start, time.process_time() - cpu_start

    return run


class TrainProcess:
    """One model's training steps in a process of its own (a `forkserver` child). Models timed in one process share
    its heap: a step's page faults and allocator state depend on the model that ran before it, and round-robin
    neighbours never change (docs/speed.md). Here each model has its own heap and threads, and the parent runs one
    step at a time, so the models still take turns on the same cores. `step()` returns the step's (wall, CPU)
    seconds, measured in the child."""

    def __init__(
        self, name: str, shape: Shape, compiled: bool = False, env: dict[str, str | None] | None = None, **forward
    ):
        if env is not None:  # a fresh interpreter with these variables set (None: unset); glibc reads MALLOC_* at start
            context = multiprocessing.get_context("spawn")
        else:  # children fork from a server that imported torch once
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload([__name__])
        self.conn, child = context.Pipe()
        args = (child, name, shape, compiled, forward, str(DEVICE), torch.get_num_threads())
        self.process = context.Process(target=_train_worker, args=args, daemon=True)
        saved = dict(os.environ)
        for key, value in (env or {}).items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        try:
            self.process.start()
        finally:
            os.environ.clear()
            os.environ.update(saved)
        child.close()
        self.info = self._receive()  # params and matmul FLOPs per token

    def _receive(self):
        try:
            message = self.conn.recv()
        except EOFError:
            self.process.join()
            raise RuntimeError(f"benchmark worker exited with code {self.process.exitcode}") from None
        if isinstance(message, BaseException):
            raise message
        return message

    def step(self) -> tuple[float, float]:
        self.conn.send("step")
        return self._receive()

    def close(self) -> None:
        self.conn.send(None)
        self.process.join()


#: untimed training steps per model before the timed rounds: the first allocates AdamW's state, and the second was
#: still the slowest of the timed steps in 20 of the 22 model rows of runs 2 and 3 (docs/speed.md)
TRAIN_WARMUP = 2


def round_robin_processes(workers: dict[str, TrainProcess], rounds: int, warmup: int = TRAIN_WARMUP) -> dict[str, dict]:
    """`round_robin` over training steps in `TrainProcess`es, which it closes."""
    try:
        return round_robin(workers, lambda _name, worker: worker.step(), rounds, warmup)
    finally:
        for worker in workers.values():
            worker.close()


def _train_worker(conn, name: str, shape: Shape, compiled: bool, forward: dict, device: str, threads: int) -> None:
    global DEVICE
    DEVICE = torch.device(device)
    torch.set_num_threads(threads)
    try:
        batch = _ids(shape)
        torch.manual_seed(0)
        model = build(name, shape).train()
        info = {
            "params": sum(p.numel() for p in model.parameters()),
            "flops": matmul_flops_per_token(model, shape),
            "malloc_env": _malloc_env(),
        }
        optimizer = optimizer_for(model)
        step = timed(lambda _name, m: train_step(m, optimizer, batch, **forward))
        model = torch.compile(model) if compiled else model
    except BaseException as error:  # reported to the parent, which raises it
        conn.send(error)
        return
    conn.send(info)
    while conn.recv() is not None:
        conn.send(step(name, model))


def ratios(results: dict[str, dict], base: str) -> dict[str, dict]:
    """Speed-up of every model over `base` (base time / model time): the median of the per-round ratios with their
    min..max, and the ratio of the minimum times."""
    out = {}
    for name, r in results.items():
        per_round = [b / t for b, t in zip(results[base]["times_s"], r["times_s"])]
        out[name] = {
            "ratio_median": statistics.median(per_round),
            "ratio_low": min(per_round),
            "ratio_high": max(per_round),
            "ratio_of_min": results[base]["min_s"] / r["min_s"],
        }
    return out


def bench_train(shape: Shape, rounds: int, groups=TRAIN_GROUPS, compiled: bool = False) -> dict:
    """Train-step groups, each timed round-robin; ratios to pre_ln (and pre_ln to gpt2) from the same group."""
    table: dict[str, dict] = {}
    for group in groups:
        for name, row in _train_group(group, shape, rounds, compiled).items():
            if name != "pre_ln" or "pre_ln" not in table:  # pre_ln's row from the first group (with gpt2)
                table[name] = row
    return table


def _train_group(group: tuple[str, ...], shape: Shape, rounds: int, compiled: bool) -> dict[str, dict]:
    workers = {name: TrainProcess(name, shape, compiled) for name in group}
    results = round_robin_processes(workers, rounds, warmup=TRAIN_WARMUP + 1 if compiled else TRAIN_WARMUP)
    flops = {name: w.info["flops"] for name, w in workers.items()}
    params = {name: w.info["params"] for name, w in workers.items()}
    rows = {}
    for name in group:
        rows[name] = {
            **results[name],
            "group": list(group),
            "params_M": params[name] / 1e6,
            "tokens_per_s": shape.batch * shape.seq / results[name]["median_s"],
            "matmul_flops_per_token": flops[name],
        }
        if "pre_ln" in group:
            rows[name]["vs_pre_ln"] = ratios(results, "pre_ln")[name]
            rows[name]["flop_bound_vs_pre_ln"] = flops["pre_ln"] / flops[name]
    for anchor, ours in ANCHORS.items():
        if anchor in group and ours in group:
            rows[ours][f"vs_{anchor}"] = ratios(results, anchor)[ours]
            rows[ours][f"flop_bound_vs_{anchor}"] = flops[anchor] / flops[ours]
    return rows


class _GemmRecorder(TorchDispatchMode):
    """Records the shapes of every GEMM dispatched (mm, addmm, bmm, baddbmm) with their counts."""

    OPS = {"mm", "addmm", "bmm", "baddbmm"}

    def __init__(self):
        super().__init__()
        self.calls: dict[tuple, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name in self.OPS:
            a, b = (args[1], args[2]) if name in ("addmm", "baddbmm") else (args[0], args[1])
            key = (name, tuple(a.shape), tuple(b.shape), a.is_contiguous(), b.is_contiguous())
            self.calls[key] = self.calls.get(key, 0) + 1
        return func(*args, **(kwargs or {}))


def _gemm_flops(key: tuple) -> int:
    _, a, b, _, _ = key
    batch = a[0] if len(a) == 3 else 1
    return 2 * batch * a[-2] * a[-1] * b[-1]


def _time_gemm(key: tuple, repeats: int = 5) -> float:
    """Minimum time of one GEMM of this shape and operand layout, alone."""
    _, a_shape, b_shape, a_contiguous, b_contiguous = key
    a = torch.randn(a_shape if a_contiguous else (*a_shape[:-2], a_shape[-1], a_shape[-2]), device=DEVICE)
    b = torch.randn(b_shape if b_contiguous else (*b_shape[:-2], b_shape[-1], b_shape[-2]), device=DEVICE)
    a = a if a_contiguous else a.transpose(-1, -2)
    b = b if b_contiguous else b.transpose(-1, -2)
    op = torch.bmm if len(a_shape) == 3 else torch.mm
    op(a, b)
    best = float("inf")
    for _ in range(repeats):
        _sync()
        start = time.perf_counter()
        op(a, b)
        _sync()
        best = min(best, time.perf_counter() - start)
    return best


def bench_mfu(shape: Shape, rounds: int, names=("gpt2", "pre_ln", "sas_p")) -> dict:
    """Model FLOPs utilisation as the field uses the term: achieved model FLOP/s (the analytic training FLOPs of the
    `train` section, `matmul_flops_per_token` × tokens, over the median step time) over this machine's peak GEMM
    FLOP/s, one number for every model: the best rate of any GEMM the models' steps run, each recorded with its
    shapes and operand layouts and timed alone. Beside it, the GEMM-time share (the step's GEMMs timed alone over
    the step time), which says how much of a step is matmul, not how fast the matmuls are."""
    results = round_robin_processes({name: TrainProcess(name, shape) for name in names}, rounds)
    batch = _ids(shape)
    calls, flops = {}, {}
    for name in names:  # one at a time in this process: the GEMMs a step dispatches
        torch.manual_seed(0)
        model = build(name, shape).train()
        flops[name] = matmul_flops_per_token(model, shape)
        recorder = _GemmRecorder()
        with recorder:
            train_step(model, optimizer_for(model), batch)
        calls[name] = recorder.calls
        del model
    alone = {key: _time_gemm(key) for key in {key for c in calls.values() for key in c}}
    peak_key = max(alone, key=lambda key: _gemm_flops(key) / alone[key])
    peak = _gemm_flops(peak_key) / alone[peak_key]
    out = {}
    for name in names:
        step = results[name]["median_s"]
        model_flops = flops[name] * shape.batch * shape.seq
        gemm_time = sum(count * alone[key] for key, count in calls[name].items())
        out[name] = {
            "step_median_s": step,
            "model_gflop": model_flops / 1e9,
            "achieved_gflops": model_flops / step / 1e9,
            "peak_gflops": peak / 1e9,
            "peak_gemm": f"{peak_key[0]} {peak_key[1]} x {peak_key[2]}",
            "mfu": model_flops / step / peak,
            "gemm_calls": sum(calls[name].values()),
            "gemm_gflop": sum(count * _gemm_flops(key) for key, count in calls[name].items()) / 1e9,
            "gemm_time_alone_s": gemm_time,
            "gemm_time_share": gemm_time / step,
        }
    return out


def bench_generate(shape: Shape, rounds: int, new_tokens: int = 128, prompt: int = 32, batches=(1, 8)) -> dict:
    """Cached greedy `generate()` tokens/s of gpt2, pre_ln and sas_p, round-robin; ratios to gpt2."""
    torch.manual_seed(0)
    models = {name: build(name, shape).eval() for name in ("gpt2", "pre_ln", "sas_p")}
    out = {}
    for batch_size in batches:
        ids = _ids(shape, vocab_low=1, batch=batch_size, seq=prompt, seed=1)
        kw = dict(
            attention_mask=torch.ones_like(ids),
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            do_sample=False,
            eos_token_id=None,
            pad_token_id=0,
        )

        def run(name, model, ids=ids, kw=kw):
            with torch.no_grad():
                produced = model.generate(ids, **kw)
            assert produced.shape == (ids.shape[0], prompt + new_tokens)

        results = round_robin(models, timed(run), rounds)
        vs = ratios(results, "gpt2")
        out[f"batch_{batch_size}"] = {
            name: {**r, "tokens_per_s": batch_size * new_tokens / r["median_s"], "vs_gpt2": vs[name]}
            for name, r in results.items()
        }
    return out


_MEMORY_CHILD = """
import sys, torch
sys.argv = ["bench"]
from benchmarks.benchmark import Shape, build
attn, seq = {attn!r}, {seq}
shape = Shape(layers=4, width={width}, heads={heads}, vocab=1024, seq=seq, batch=1)
torch.manual_seed(0)
model = build("sas_p", shape, attn=attn, positions=seq).train()
warm = torch.randint(0, 1024, (1, 16))
model(input_ids=warm, labels=warm).loss.backward()
model.zero_grad(set_to_none=True)
ids = torch.randint(0, 1024, (1, seq))
def status_kb(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # resets the peak RSS (VmHWM); a forked process would otherwise inherit its parent's
before = status_kb("VmRSS")
model(input_ids=ids, labels=ids).loss.backward()
print(status_kb("VmHWM") - before)
"""


def bench_memory(shape: Shape, seqs=(512, 1024, 2048)) -> dict:
    """Peak memory growth (MiB, peak RSS over RSS before) of one forward + backward of sas_p at each length: sdpa
    (ours) vs eager (T×T). Each in a fresh process whose peak RSS is reset first (Linux `/proc/self/clear_refs`)."""
    out = {}
    env = {**os.environ, "MALLOC_ARENA_MAX": "1"}
    for seq in seqs:
        row = {}
        for attn in ("sdpa", "eager"):
            code = _MEMORY_CHILD.format(attn=attn, seq=seq, width=shape.width, heads=shape.heads)
            done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
            row[f"{attn}_MiB"] = int(done.stdout.strip().splitlines()[-1]) / 1024
        row["eager_over_sdpa"] = row["eager_MiB"] / max(row["sdpa_MiB"], 1e-9)
        out[str(seq)] = row
    return out


def bench_profile(shape: Shape, names=("pre_ln", "sas_p"), top: int = 12) -> dict:
    """Top operators by self CPU time of one training step (after `TRAIN_WARMUP` steps), per model."""
    batch = torch.randint(0, shape.vocab, (shape.batch, shape.seq), generator=torch.Generator().manual_seed(0))
    out = {}
    for name in names:
        torch.manual_seed(0)
        model = build(name, shape).train()
        optimizer = optimizer_for(model)
        for _ in range(TRAIN_WARMUP):
            train_step(model, optimizer, batch)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            train_step(model, optimizer, batch)
        events = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
        total_ms = sum(e.self_cpu_time_total for e in events) / 1e3
        out[name] = {
            "total_self_ms": total_ms,
            "top": [{"op": e.key, "calls": e.count, "self_ms": e.self_cpu_time_total / 1e3} for e in events[:top]],
        }
        del model, optimizer
    return out


# -- report ------------------------------------------------------------------------------------------------------
def _ratio(r: dict) -> str:
    return f"{r['ratio_median']:.3f} ({r['ratio_low']:.3f}-{r['ratio_high']:.3f}, min {r['ratio_of_min']:.3f})"


def print_train(table: dict, title: str) -> None:
    print(f"\n## {title}")
    print(
        "| model | params M | median step s | min s | spread | CPU s | tokens/s | vs pre_ln: median (range, of mins) "
        "| FLOP bound vs pre_ln |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, r in table.items():
        vs, bound = (_ratio(r["vs_pre_ln"]), f"{r['flop_bound_vs_pre_ln']:.3f}") if "vs_pre_ln" in r else ("-", "-")
        print(
            f"| {name} | {r['params_M']:.1f} | {r['median_s']:.3f} | {r['min_s']:.3f} | {r['spread']:.0%} | "
            f"{r['cpu_median_s']:.2f} | {r['tokens_per_s']:.0f} | {vs} | {bound} |"
        )
    for anchor, ours in ANCHORS.items():
        if f"vs_{anchor}" in table.get(ours, {}):
            r = table[ours]
            print(
                f"\n{ours} vs {ANCHOR_CLASSES[anchor]}: {_ratio(r[f'vs_{anchor}'])}; FLOP bound "
                f"{r[f'flop_bound_vs_{anchor}']:.3f}; parameters {r['params_M']:.2f}M vs {table[anchor]['params_M']:.2f}M"
            )
    print(f"(groups: {', '.join('/'.join(g) for g in dict.fromkeys(tuple(v['group']) for v in table.values()))})")


def print_mfu(table: dict) -> None:
    peak = next(iter(table.values()))
    print(
        f"\n## MFU of the training step: model FLOP/s over this machine's peak GEMM rate, "
        f"{peak['peak_gflops']:.1f} GFLOP/s ({peak['peak_gemm']}, the best of the steps' GEMMs timed alone)"
    )
    print("| model | step s | model GFLOP | achieved GFLOP/s | MFU | GEMM-time share |")
    print("|---|---|---|---|---|---|")
    for name, r in table.items():
        print(
            f"| {name} | {r['step_median_s']:.3f} | {r['model_gflop']:.0f} | {r['achieved_gflops']:.1f} | "
            f"{r['mfu']:.1%} | {r['gemm_time_share']:.1%} |"
        )


def print_generate(table: dict) -> None:
    print("\n## Cached generate(): tokens/s (prompt 32, 128 new tokens, greedy)")
    print("| batch | model | median s | tokens/s | vs GPT2LMHeadModel: median (range, of mins) |")
    print("|---|---|---|---|---|")
    for batch, rows in table.items():
        for name, r in rows.items():
            print(
                f"| {batch.removeprefix('batch_')} | {name} | {r['median_s']:.2f} | {r['tokens_per_s']:.1f} | "
                f"{_ratio(r['vs_gpt2'])} |"
            )


def print_memory(table: dict) -> None:
    print("\n## Peak memory growth of forward + backward, sas_p (4 blocks, batch 1)")
    print("| seq | sdpa (ours) MiB | eager T×T reference MiB | eager / sdpa |")
    print("|---|---|---|---|")
    for seq, r in table.items():
        print(f"| {seq} | {r['sdpa_MiB']:.0f} | {r['eager_MiB']:.0f} | {r['eager_over_sdpa']:.1f}× |")


def bench_raptr(shape: Shape, rounds: int) -> dict:
    """RaPTr's compute saving: a pre_ln training step on a subnetwork of half the layers (first and last kept, App. J
    scales) against a full step of the same model, interleaved (`benchmarks.raptr.bench`)."""
    layers = max(4, shape.layers)
    return raptr.bench(
        layers, shape.width, shape.seq, shape.batch, vocab=shape.vocab, repeats=rounds, block_type="pre_ln"
    )


def print_raptr(r: dict) -> None:
    print(f"\n## RaPTr: a training step on {r['layers_kept']}/{r['num_layers']} layers vs a full step (pre_ln)")
    print("| statistic | full step s | half step s | half / full |")
    print("|---|---|---|---|")
    for stat in ("median", "min"):
        print(f"| {stat} | {r[f'full_{stat}_s']:.3f} | {r[f'half_{stat}_s']:.3f} | {r[f'half_over_full_{stat}']:.3f} |")


def bench_packing(shape: Shape, rounds: int, names=("pre_ln", "sas_p")) -> dict:
    """Padded against padding-free (packed) batches of the same variable-length sequences: real tokens per second
    of one training step each, round-robin on the same model (see the module docstring)."""
    seq, batch = max(shape.seq, 128), max(shape.batch, 8)
    gen = torch.Generator().manual_seed(0)
    lengths = torch.randint(seq // 8, seq + 1, (batch,), generator=gen).tolist()
    seqs = [torch.randint(0, shape.vocab, (n,), generator=gen) for n in lengths]
    ids = torch.zeros(batch, max(lengths), dtype=torch.long)
    mask, labels = torch.zeros_like(ids), torch.full_like(ids, -100)
    for i, s in enumerate(seqs):
        ids[i, : len(s)], mask[i, : len(s)], labels[i, : len(s)] = s, 1, s
    batches = {
        "padded": dict(input_ids=ids, attention_mask=mask, labels=labels),
        "packed": DataCollatorWithFlattening(return_position_ids=True)([{"input_ids": s.tolist()} for s in seqs]),
    }
    tokens = sum(lengths)
    out = {"seq": seq, "batch": batch, "tokens": tokens, "padded_tokens": int(ids.numel())}
    for name in names:
        model = build(name, Shape(**{**asdict(shape), "seq": seq, "batch": batch}))
        optimizer = optimizer_for(model)

        def step(kind, model, optimizer=optimizer):
            model(**batches[kind]).loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        timed_steps = round_robin({"padded": model, "packed": model}, timed(step), rounds)
        out[name] = {kind: {**r, "tokens_per_s": tokens / r["min_s"]} for kind, r in timed_steps.items()}
        out[name]["packed_over_padded"] = ratios(timed_steps, "padded")["packed"]
    return out


def print_packing(r: dict) -> None:
    print(
        f"\n## Packing: {r['batch']} sequences of {r['seq'] // 8}..{r['seq']} tokens ({r['tokens']} real tokens, "
        f"{r['padded_tokens']} padded)"
    )
    print("| model | padded tok/s | packed tok/s | packed / padded (median, min..max) |")
    print("|---|---|---|---|")
    for name, row in r.items():
        if isinstance(row, dict):
            q = row["packed_over_padded"]
            print(
                f"| {name} | {row['padded']['tokens_per_s']:.0f} | {row['packed']['tokens_per_s']:.0f} | "
                f"{q['ratio_median']:.2f} ({q['ratio_low']:.2f}..{q['ratio_high']:.2f}) |"
            )


_TRAIN_MEMORY_CHILD = """
import sys, torch
sys.argv = ["bench"]
import benchmarks.benchmark as bench
from benchmarks.benchmark import Shape, build, optimizer_for
bench.DEVICE = device = torch.device({device!r})
def status_kb(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))
def used_kb():
    return torch.cuda.memory_allocated(device) // 1024 if device.type == "cuda" else status_kb("VmRSS")
def peak_kb():
    return torch.cuda.max_memory_allocated(device) // 1024 if device.type == "cuda" else status_kb("VmHWM")
shape = Shape(**{shape})
torch.manual_seed(0)
model = build({name!r}, shape).train()
optimizer = optimizer_for(model)
ids = torch.randint(0, shape.vocab, (shape.batch, shape.seq), device=device)
def step():
    model(input_ids=ids, labels=ids, skip_logits={fused}).loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
step()  # AdamW's state exists from here on, as in every step after the first
if device.type == "cuda":
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
else:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets the peak RSS (VmHWM)
before = used_kb()
step()
print(peak_kb() - before)
"""


def bench_loss(shape: Shape, rounds: int, names=("pre_ln", "sas_p")) -> dict:
    """The fused head + loss against the logits path: training-step time (round-robin, the same model in two
    processes, one per head) and the peak
    memory growth of a training step after the first (AdamW's state already there) in a fresh process each; glibc
    maps every allocation over 64 KiB on its own, so freed tensors leave the resident set and the peak is theirs."""
    env = {**os.environ, "MALLOC_ARENA_MAX": "1", "MALLOC_MMAP_THRESHOLD_": "65536"}
    out = {}
    for name in names:
        workers = {kind: TrainProcess(name, shape, skip_logits=kind == "fused") for kind in ("logits", "fused")}
        timed_steps = round_robin_processes(workers, rounds)
        row = {kind: dict(r) for kind, r in timed_steps.items()}
        row["fused_speedup"] = ratios(timed_steps, "logits")["fused"]
        for kind in ("logits", "fused"):
            code = _TRAIN_MEMORY_CHILD.format(shape=asdict(shape), name=name, fused=kind == "fused", device=str(DEVICE))
            done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
            row[kind]["peak_MiB"] = int(done.stdout.strip().splitlines()[-1]) / 1024
        row["memory_saving"] = 1 - row["fused"]["peak_MiB"] / row["logits"]["peak_MiB"]
        out[name] = row
    return out


def print_loss(table: dict) -> None:
    print("\n## Fused LM head + cross-entropy vs the logits path (training step)")
    print(
        "| model | logits s (median) | fused s (median) | speed-up (median, min-max, of min) | peak MiB logits → fused |"
    )
    print("|---|---|---|---|---|")
    for name, r in table.items():
        q = r["fused_speedup"]
        print(
            f"| {name} | {r['logits']['median_s']:.3f} | {r['fused']['median_s']:.3f} | {_ratio(q)} | "
            f"{r['logits']['peak_MiB']:.0f} → {r['fused']['peak_MiB']:.0f} "
            f"({-r['memory_saving']:+.0%}) |"
        )


def bench_allocator(shape: Shape, rounds: int, names=("gpt2", "pre_ln", "sas_p")) -> dict:
    """The `train` step of each model under glibc's default malloc against `MALLOC_KEEP` (freed memory kept in the
    process), round-robin, each in a process of its own; per model the speed-up and both step times."""
    out = {}
    for name in names:
        default = {key: None for key in MALLOC_KEEP}
        workers = {
            "default": TrainProcess(name, shape, env=default),
            "keep": TrainProcess(name, shape, env=MALLOC_KEEP),
        }
        malloc_env = {setting: worker.info["malloc_env"] for setting, worker in workers.items()}
        results = round_robin_processes(workers, rounds)
        out[name] = {**results, "keep_speedup": ratios(results, "default")["keep"], "malloc_env": malloc_env}
    return out


def print_allocator(table: dict) -> None:
    settings = " ".join(f"{k}={v}" for k, v in MALLOC_KEEP.items())
    print(f"\n## Training step under glibc malloc's defaults and with freed memory kept in the process ({settings})")
    print("| model | default: median step s | kept: median step s | speed-up: median (range, of mins) |")
    print("|---|---|---|---|")
    for name, r in table.items():
        print(
            f"| {name} | {r['default']['median_s']:.3f} | {r['keep']['median_s']:.3f} | {_ratio(r['keep_speedup'])} |"
        )


def print_profile(table: dict) -> None:
    for name, r in table.items():
        print(
            f"\n## Profile of one eager training step, {name} (self CPU time, all threads: {r['total_self_ms']:.0f} ms)"
        )
        print("| op | calls | self ms | share |")
        print("|---|---|---|---|")
        for e in r["top"]:
            print(f"| {e['op']} | {e['calls']} | {e['self_ms']:.1f} | {e['self_ms'] / r['total_self_ms']:.1%} |")


def _malloc_env() -> dict[str, str]:
    """This process's environment variables that configure glibc malloc."""
    return {key: value for key, value in os.environ.items() if key.startswith("MALLOC_") or key == "GLIBC_TUNABLES"}


def _commit() -> str | None:
    """The checked-out commit (with `+dirty` for uncommitted changes to tracked files), or None outside a git checkout."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout.strip()

    try:
        dirty = git("status", "--porcelain", "--untracked-files=no")
        return git("rev-parse", "--short", "HEAD") + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.benchmark",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated, of {', '.join(SECTIONS)}")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds per comparison, after warm-up")
    parser.add_argument("--quick", action="store_true", help="smoke run: a tiny shape, 2 rounds")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument(
        "--device",
        default="cpu",
        help=f"cpu (default) or a CUDA device, e.g. cuda or cuda:1; on CUDA only {', '.join(CUDA_SECTIONS)} run",
    )
    parser.add_argument("--json", default="benchmark.json", help="where to write the results")
    args = parser.parse_args(argv)
    sections = args.sections.split(",")
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        parser.error(f"--sections: unknown {', '.join(sorted(unknown))}; allowed: {', '.join(SECTIONS)}")
    if args.threads:
        torch.set_num_threads(args.threads)
    global DEVICE
    DEVICE = torch.device(args.device)
    if DEVICE.type not in ("cpu", "cuda") or (DEVICE.type == "cuda" and not torch.cuda.is_available()):
        parser.error(f"--device: {args.device!r} is not available here; allowed: cpu, or cuda[:N] on a CUDA machine")
    if DEVICE.type == "cuda":
        for section in [s for s in sections if s not in CUDA_SECTIONS]:
            print(f"(section {section} skipped on {DEVICE}: it measures the CPU process)")
        sections = [s for s in sections if s in CUDA_SECTIONS]
    shape, rounds = (QUICK, 2) if args.quick else (Shape(), args.rounds)
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    meta = {
        "date": started,
        "command": "python -m benchmarks.benchmark " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.processor() or platform.platform()}",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "commit": _commit(),
        "load_average_at_start": os.getloadavg(),
        "malloc_env": _malloc_env(),
        "torch_threads": torch.get_num_threads(),
        "device": f"{DEVICE} ({torch.cuda.get_device_name(DEVICE)})" if DEVICE.type == "cuda" else "cpu",
        "shape": asdict(shape),
        "rounds": rounds,
        "train_warmup_rounds": TRAIN_WARMUP,
    }
    print(f"# benchmark {started}: {meta['machine']}, torch {meta['torch']}, {meta['torch_threads']} threads")
    print(f"shape {asdict(shape)}, {rounds} timed rounds after warm-up ({TRAIN_WARMUP} rounds of training steps)")
    results: dict = {"meta": meta}
    if "train" in sections:
        results["train"] = bench_train(shape, rounds)
        print_train(results["train"], "Training step, eager (sdpa)")
    if "mfu" in sections:
        results["mfu"] = bench_mfu(shape, max(2, rounds // 2))
        print_mfu(results["mfu"])
    if "generate" in sections:
        results["generate"] = bench_generate(shape, rounds, new_tokens=16 if args.quick else 128)
        print_generate(results["generate"])
    if "memory" in sections:
        results["memory"] = bench_memory(shape, (64, 128) if args.quick else (512, 1024, 2048))
        print_memory(results["memory"])
    if "compile" in sections:
        results["compile"] = bench_train(shape, rounds, groups=(COMPILE_GROUP,), compiled=True)
        print_train(results["compile"], "Training step under torch.compile (inductor)")
    if "profile" in sections:
        results["profile"] = bench_profile(shape)
        print_profile(results["profile"])
    if "raptr" in sections:
        results["raptr"] = bench_raptr(shape, rounds)
        print_raptr(results["raptr"])
    if "packing" in sections:
        results["packing"] = bench_packing(shape, rounds)
        print_packing(results["packing"])
    if "loss" in sections:
        results["loss"] = bench_loss(shape, rounds)
        print_loss(results["loss"])
    if "allocator" in sections:
        results["allocator"] = bench_allocator(shape, rounds)
        print_allocator(results["allocator"])
    meta["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    meta["load_average_at_end"] = os.getloadavg()
    with open(args.json, "w") as handle:
        json.dump(results, handle, indent=1)
    print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
