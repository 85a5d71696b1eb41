"""What every benchmark shares: the shape, the models, the training step, round-robin timing, ratios and their FLOP
bound, the processes models run in, and the `Context` a section runs with."""

from __future__ import annotations

import builtins
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import transformers
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

from modeling_simplified import SimplifiedConfig, SimplifiedForCausalLM, parameter_groups
from modeling_simplified.modeling_simplified import ReparamLinear

#: the checkout these tools run from: the working directory of their child processes
ROOT = Path(__file__).resolve().parent.parent
CPU = torch.device("cpu")
#: untimed training steps per model before the timed rounds: the first allocates AdamW's state, and the second was
#: still the slowest of the timed steps in 20 of the 22 model rows of runs 2 and 3 (docs/speed.md)
TRAIN_WARMUP = 2


@dataclass(frozen=True)
class Shape:
    """The paper's CodeParrot shape by default (18 blocks, d=768, 12 heads, vocab 50257, seq 128, batch 8)."""

    layers: int = 18
    width: int = 768
    heads: int = 12
    vocab: int = 50257
    seq: int = 128
    batch: int = 8


#: the smoke shape of `--quick`
QUICK = Shape(layers=2, width=64, heads=4, vocab=512, seq=32, batch=2)


#: the precisions a run measures (`--dtype`): training under bf16 autocast over float32 weights (the Trainer's
#: `bf16=True`), inference with bf16 weights (`from_pretrained(..., dtype=torch.bfloat16)`)
DTYPES = {"float32": torch.float32, "bf16": torch.bfloat16}


@dataclass(frozen=True)
class Context:
    """What a section runs with: the shape, the timed rounds after warm-up, the device, `--quick`, the torch
    threads of this process and of every child, and the precision (`DTYPES`)."""

    shape: Shape = Shape()
    rounds: int = 5
    device: torch.device = CPU
    quick: bool = False
    threads: int = field(default_factory=torch.get_num_threads)
    dtype: str = "float32"

    def build(self, name: str, shape: Shape | None = None, **kwargs) -> torch.nn.Module:
        """A model with float32 weights (training: the master weights autocast runs over)."""
        return build(name, shape or self.shape, device=self.device, **kwargs)

    def inference_model(self, name: str, shape: Shape | None = None, **kwargs) -> torch.nn.Module:
        """A model in eval mode with weights in this run's precision."""
        return self.build(name, shape, **kwargs).eval().to(DTYPES[self.dtype])

    def ids(self, **kwargs) -> torch.Tensor:
        return ids(self.shape, device=self.device, **kwargs)

    def timed(self, fn: Callable[[str, Any], Any]) -> Callable[[str, Any], tuple[float, float]]:
        return timed(fn, self.device)

    def train_process(self, name: str, shape: Shape | None = None, dtype: str | None = None, **kwargs) -> TrainProcess:
        return TrainProcess(
            name, shape or self.shape, device=self.device, threads=self.threads, dtype=dtype or self.dtype, **kwargs
        )

    def measure(self, job: dict, env: Mapping[str, str | None] | None = None) -> Any:
        """One call of a `benchmarks.worker` job in a fresh process (its own heap: peak memory is its own)."""
        child = Child(worker_args({**job, "device": str(self.device), "threads": self.threads}), env)
        try:
            return child.request()
        finally:
            child.close()


# -- models -------------------------------------------------------------------------------------------------------
def swiglu_width(shape: Shape) -> int:
    """Llama's SwiGLU width, 8/3·d (2048 at d=768): its three matrices hold as many weights as a 4d MLP's two."""
    return 8 * shape.width // 3


def build(
    name: str, shape: Shape, attn: str = "sdpa", positions: int = 1024, device: torch.device = CPU
) -> torch.nn.Module:
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
    return model if device.type == "cpu" else model.to(device)


def ids(
    shape: Shape,
    vocab_low: int = 0,
    batch: int | None = None,
    seq: int | None = None,
    seed: int = 0,
    device: torch.device = CPU,
) -> torch.Tensor:
    """A fixed batch of token ids (`shape`'s batch × seq unless given) on `device`."""
    size = (shape.batch if batch is None else batch, shape.seq if seq is None else seq)
    return torch.randint(vocab_low, shape.vocab, size, generator=torch.Generator().manual_seed(seed)).to(device)


def gemm_weights(model: torch.nn.Module) -> int:
    """The weights of every GEMM (Linear, GPT-2's Conv1D, eq. 6's reparameterised matrices, the tied head): what a
    cached decoding step reads once."""
    return sum(
        module.weight.numel()
        for module in model.modules()
        if isinstance(module, (torch.nn.Linear, ReparamLinear)) or type(module).__name__ == "Conv1D"
    )


def forward_matmul_flops_per_token(model: torch.nn.Module, shape: Shape) -> float:
    """Analytic forward matmul FLOPs per token: 2 × `gemm_weights` + attention, `QK^T` and `A·X`, each 2·T·d per
    token and layer."""
    return 2 * gemm_weights(model) + shape.layers * 2 * 2 * shape.seq * shape.width


def matmul_flops_per_token(model: torch.nn.Module, shape: Shape) -> float:
    """Analytic training matmul FLOPs per token: the forward's, times 3 (forward and backward)."""
    return 3 * forward_matmul_flops_per_token(model, shape)


def optimizer_for(model: torch.nn.Module) -> torch.optim.Optimizer:
    return torch.optim.AdamW(parameter_groups(model, 0.1), lr=1e-4, fused=True)  # the Trainer's adamw_torch_fused


def train_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: torch.Tensor,
    labels: torch.Tensor | None = None,
    dtype: str = "float32",
    **forward,
) -> None:
    """One Trainer step: forward with labels (the batch itself unless given; and `forward`'s arguments) under
    autocast to `dtype` where it is not float32 (as the Trainer's `bf16=True`), backward, clip at 1, AdamW step,
    zero_grad (set to None)."""
    with torch.autocast(batch.device.type, dtype=DTYPES[dtype], enabled=dtype != "float32"):
        loss = model(input_ids=batch, labels=batch if labels is None else labels, **forward).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


# -- the host's capability ---------------------------------------------------------------------------------------
#: the GEMM whose rate is the host's peak in each precision (1024×768 · 768×3072, an MLP
#: matmul of the paper shape at 1024 tokens)
PEAK_GEMM = (1024, 768, 3072)
#: the CPU flags that decide bf16's speed: native bf16 dot products (avx512_bf16, AMX) or emulation
CPU_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8")


def cpu_flags() -> list[str]:
    """Which of `CPU_FLAGS` this CPU has (from /proc/cpuinfo; empty elsewhere)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    line = next((line for line in text.splitlines() if line.startswith("flags")), "")
    have = set(line.split(":", 1)[-1].split())
    return [flag for flag in CPU_FLAGS if flag in have]


def gemm_peaks(device: torch.device = CPU, repeats: int = 7) -> dict[str, float]:
    """GFLOP/s of `PEAK_GEMM` in every precision of `DTYPES`, the best of `repeats` timed calls after one untimed,
    interleaved: the two peaks every speed figure of this host is read against."""
    m, k, n = PEAK_GEMM
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(m, k, generator=gen).to(device), torch.randn(k, n, generator=gen).to(device)
    operands = {name: (a.to(dtype), b.to(dtype)) for name, dtype in DTYPES.items()}
    best = dict.fromkeys(DTYPES, float("inf"))
    for r in range(repeats + 1):
        for name, (x, y) in operands.items():
            sync(device)
            start = time.perf_counter()
            x @ y
            sync(device)
            if r:
                best[name] = min(best[name], time.perf_counter() - start)
    return {name: 2 * m * k * n / seconds / 1e9 for name, seconds in best.items()}


def commit() -> str | None:
    """The checked-out commit (with `+dirty` for uncommitted changes to tracked files), or None outside a git checkout."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True, check=True, cwd=ROOT).stdout.strip()

    try:
        dirty = git("status", "--porcelain", "--untracked-files=no")
        return git("rev-parse", "--short", "HEAD") + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return None


def host_record(command: str, device: torch.device = CPU) -> dict[str, Any]:
    """Where and how a measurement ran, recorded before it starts: date, command, machine, versions, commit, load,
    glibc malloc's environment, the CPU's flags and the GEMM peaks in every precision (every figure of this host is
    read against them). The caller adds `load_average_at_end` when it is done."""
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "command": command,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.processor() or platform.platform()}",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "commit": commit(),
        "load_average_at_start": os.getloadavg(),
        "malloc_env": malloc_env(),
        "cpu_flags": cpu_flags(),
        "gemm_peak_gflops": gemm_peaks(device),
    }


# -- timing and ratios --------------------------------------------------------------------------------------------
def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[str, Any], Any], device: torch.device = CPU) -> Callable[[str, Any], tuple[float, float]]:
    """`fn(name, model)` as a `round_robin` call timed in this process: (wall, CPU) seconds."""

    def run(name, model):
        sync(device)
        start, cpu_start = time.perf_counter(), time.process_time()
        fn(name, model)
        sync(device)
        return time.perf_counter() - start, time.process_time() - cpu_start

    return run


def stats(times: list[float]) -> dict:
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
    return {n: {**stats(wall[n]), "cpu_median_s": statistics.median(cpu[n])} for n in names}


def per_round(base: dict, model: dict) -> list[float]:
    """The speed-up of `model` over `base` in each round they were timed in together (base time / model time)."""
    return [b / t for b, t in zip(base["times_s"], model["times_s"])]


def ratios(results: dict[str, dict], base: str) -> dict[str, dict]:
    """Speed-up of every model over `base` (base time / model time): the median of the per-round ratios with their
    min..max, and the ratio of the minimum times."""
    out = {}
    for name, r in results.items():
        rounds = per_round(results[base], r)
        out[name] = {
            "ratio_median": statistics.median(rounds),
            "ratio_low": min(rounds),
            "ratio_high": max(rounds),
            "ratio_of_min": results[base]["min_s"] / r["min_s"],
        }
    return out


def format_ratio(r: dict) -> str:
    """A `ratios` entry as printed in the tables: median (min-max, ratio of the minimum times)."""
    return f"{r['ratio_median']:.3f} ({r['ratio_low']:.3f}-{r['ratio_high']:.3f}, min {r['ratio_of_min']:.3f})"


# -- child processes ----------------------------------------------------------------------------------------------
def malloc_env() -> dict[str, str]:
    """This process's environment variables that configure glibc malloc."""
    return {key: value for key, value in os.environ.items() if key.startswith("MALLOC_") or key == "GLIBC_TUNABLES"}


_PENDING = object()  # a child's start not answered yet


class Child:
    """A Python process of its own (`python ARGS`), driven by lines: it answers its start and then each request
    with one JSON line, `{"ok": value}` or `{"error": [type, message]}` (`serve` is its side). Its own interpreter,
    heap and threads; `env` sets its variables (None: unset; glibc reads MALLOC_* at start). `info` is what it
    answered at its start, waited for here unless `wait=False` (then on first use, so that several children start
    at once); an error there is raised here (a builtin exception type as itself)."""

    def __init__(
        self, args: Sequence[str], env: Mapping[str, str | None] | None = None, cwd: Path = ROOT, wait: bool = True
    ):
        environ = dict(os.environ)
        for key, value in (env or {}).items():
            if value is None:
                environ.pop(key, None)
            else:
                environ[key] = value
        self.process = subprocess.Popen(
            [sys.executable, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=environ, cwd=cwd
        )
        self._info: Any = _PENDING
        if wait:
            self.wait()

    def wait(self) -> Any:
        """What the child answered at its start, read on the first call."""
        if self._info is _PENDING:
            self._info = self._receive()
        return self._info

    @property
    def info(self) -> Any:
        return self.wait()

    def _receive(self) -> Any:
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"benchmark worker exited with code {self.process.wait()}")
        message = json.loads(line)
        if "error" in message:
            self.close()
            kind, text = message["error"]
            error = getattr(builtins, kind, None)
            if isinstance(error, type) and issubclass(error, Exception):
                raise error(text)
            raise RuntimeError(f"{kind}: {text}")
        return message["ok"]

    def request(self) -> Any:
        self.wait()
        self.process.stdin.write("\n")
        self.process.stdin.flush()
        return self._receive()

    def close(self) -> None:
        if not self.process.stdin.closed:
            self.process.stdin.close()
        self.process.wait()


def serve(setup: Callable[[], tuple[Any, Callable[[], Any]]]) -> None:
    """The child's side of `Child`: answers `setup()`'s info, then `call()` once per request line until stdin
    closes. Anything else the child prints goes to stderr, so stdout carries only the answers."""
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)

    def send(**message) -> None:
        out.write(json.dumps(message) + "\n")
        out.flush()

    try:
        info, call = setup()
        send(ok=info)
        for _ in sys.stdin:
            send(ok=call())
    except Exception as error:  # answered to the parent, which raises it
        send(error=[type(error).__name__, str(error)])


def worker_args(job: dict) -> list[str]:
    """`Child` arguments that run a job of `benchmarks.worker`."""
    return ["-m", "benchmarks.worker", json.dumps(job)]


class TrainProcess(Child):
    """One model's training steps in a process of its own. Models timed in one process share its heap: a step's
    page faults and allocator state depend on the model that ran before it, and round-robin neighbours never change
    (docs/speed.md). Here each model has its own heap and threads, and the parent runs one step at a time, so the
    models still take turns on the same cores. `info` holds the model's parameters, matmul FLOPs per token and the
    child's malloc environment; `step()` returns the step's (wall, CPU) seconds, measured in the child."""

    def __init__(
        self,
        name: str,
        shape: Shape,
        compiled: bool = False,
        env: Mapping[str, str | None] | None = None,
        device: torch.device = CPU,
        threads: int | None = None,
        wait: bool = True,
        dtype: str = "float32",
        **forward,
    ):
        job = {
            "kind": "train",
            "name": name,
            "shape": asdict(shape),
            "compiled": compiled,
            "dtype": dtype,
            "forward": forward,
            "device": str(device),
            "threads": threads or torch.get_num_threads(),
        }
        super().__init__(worker_args(job), env, wait=wait)

    def step(self) -> tuple[float, float]:
        return tuple(self.request())


def round_robin_processes(workers: dict[str, TrainProcess], rounds: int, warmup: int = TRAIN_WARMUP) -> dict[str, dict]:
    """`round_robin` over training steps in `TrainProcess`es, which it closes."""
    try:
        return round_robin(workers, lambda _name, worker: worker.step(), rounds, warmup)
    finally:
        for worker in workers.values():
            worker.close()
