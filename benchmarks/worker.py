"""The child side of the benchmarks' processes: `python -m benchmarks.worker JOB` builds one job (JSON: `kind` and
its arguments), answers its info, then runs one call per request (`common.Child` drives it, `common.serve` answers).

- `train`: a model's training steps (`common.train_step`, float32 or under bf16 autocast), each call timed here:
  (wall, CPU) seconds;
- `train_config`: the same for a model of a given `SimplifiedConfig` (causal or masked LM) at a given batch × seq;
- `train_memory`: the peak memory growth (KiB) of a training step after the first (AdamW's state already there);
- `attention_memory`: the peak RSS growth (KiB) of one forward + backward of sas_p with an attention
  implementation, at one sequence length (4 blocks, batch 1, vocab 1024).
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace

import torch

from benchmarks.common import (
    Shape,
    build,
    ids,
    malloc_env,
    matmul_flops_per_token,
    optimizer_for,
    serve,
    timed,
    train_step,
)
from modeling_simplified import SimplifiedConfig, SimplifiedForCausalLM, SimplifiedForMaskedLM


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


def _reset_peak(device: torch.device) -> None:
    """Resets the peak: CUDA's allocator statistics, or the peak RSS (VmHWM) through Linux `/proc/self/clear_refs`."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    else:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")


def _used_kb(device: torch.device) -> int:
    return torch.cuda.memory_allocated(device) // 1024 if device.type == "cuda" else _status_kb("VmRSS")


def _peak_kb(device: torch.device) -> int:
    return torch.cuda.max_memory_allocated(device) // 1024 if device.type == "cuda" else _status_kb("VmHWM")


def train(
    name: str,
    shape: Shape,
    device: torch.device,
    compiled: bool = False,
    forward: dict | None = None,
    dtype: str = "float32",
):
    batch = ids(shape, device=device)
    torch.manual_seed(0)
    model = build(name, shape, device=device).train()
    info = {
        "params": sum(p.numel() for p in model.parameters()),
        "flops": matmul_flops_per_token(model, shape),
        "malloc_env": malloc_env(),
    }
    optimizer = optimizer_for(model)
    step = timed(lambda _name, m: train_step(m, optimizer, batch, dtype=dtype, **(forward or {})), device)
    model = torch.compile(model) if compiled else model
    return info, lambda: step(name, model)


def train_memory(name: str, shape: Shape, device: torch.device, fused: bool | None):
    """`fused` None: the model's own head (transformers' classes have no `skip_logits`)."""
    torch.manual_seed(0)
    model = build(name, shape, device=device).train()
    optimizer = optimizer_for(model)
    batch = torch.randint(0, shape.vocab, (shape.batch, shape.seq), device=device)
    head = {} if fused is None else {"skip_logits": fused}

    def step():
        model(input_ids=batch, labels=batch, **head).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step()  # AdamW's state exists from here on, as in every step after the first

    def measure() -> int:
        _reset_peak(device)
        before = _used_kb(device)
        step()
        return _peak_kb(device) - before

    return {}, measure


def attention_memory(attn: str, seq: int, shape: Shape, device: torch.device):
    shape = replace(shape, layers=4, vocab=1024, seq=seq, batch=1)
    torch.manual_seed(0)
    model = build("sas_p", shape, attn=attn, positions=seq).train()
    warm = torch.randint(0, 1024, (1, 16))
    model(input_ids=warm, labels=warm).loss.backward()
    model.zero_grad(set_to_none=True)
    batch = torch.randint(0, 1024, (1, seq))

    def measure() -> int:
        _reset_peak(device)  # a fresh process: its peak is not its parent's
        before = _status_kb("VmRSS")
        model(input_ids=batch, labels=batch).loss.backward()
        return _status_kb("VmHWM") - before

    return {}, measure


def train_config(shape: Shape, device: torch.device, config: dict, task: str, mlm_probability: float = 0.0):
    """`train` for a model of any `SimplifiedConfig` (`config`, its dict) at `shape`'s batch × seq: a causal LM, or
    a masked LM whose labels are a fixed `mlm_probability` of the positions (the rest -100) and whose inputs hold
    the mask id there (the experiments' step time at their own shape)."""
    torch.manual_seed(0)
    config = SimplifiedConfig.from_dict(config)
    model = (SimplifiedForMaskedLM if task == "masked-lm" else SimplifiedForCausalLM)(config).to(device).train()
    batch = ids(replace(shape, vocab=config.vocab_size), vocab_low=1, device=device)
    labels = None
    if task == "masked-lm":
        masked = torch.rand(batch.shape, generator=torch.Generator().manual_seed(1)).to(device) < mlm_probability
        labels, batch = batch.masked_fill(~masked, -100), batch.masked_fill(masked, 0)
    info = {"params": sum(p.numel() for p in model.parameters()), "malloc_env": malloc_env()}
    optimizer = optimizer_for(model)
    return info, lambda: timed(lambda _name, m: train_step(m, optimizer, batch, labels), device)(task, model)


JOBS = {
    "train": train,
    "train_config": train_config,
    "train_memory": train_memory,
    "attention_memory": attention_memory,
}


def setup(job: dict):
    """The job's (info, call): threads and device set, then the job built."""
    job = dict(job)
    torch.set_num_threads(job.pop("threads"))
    device = torch.device(job.pop("device"))
    shape = Shape(**job.pop("shape"))
    return JOBS[job.pop("kind")](shape=shape, device=device, **job)


if __name__ == "__main__":
    serve(lambda: setup(json.loads(sys.argv[1])))
