"""`mfu`: model FLOPs utilisation of the training step, as the field uses the term: achieved model FLOP/s (the
analytic FLOPs of `train` over the median step) / this machine's peak GEMM FLOP/s, one number for all models (the best
rate of any GEMM the steps run in the run's precision, recorded with its shapes and timed alone); beside it the GEMM-time share (the step's
GEMMs timed alone / the step), a different quantity."""

from __future__ import annotations

import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from benchmarks.common import (
    DTYPES,
    Context,
    matmul_flops_per_token,
    optimizer_for,
    round_robin_processes,
    sync,
    train_step,
)

ON_CUDA = True
BF16 = True
NAMES = ("gpt2", "pre_ln", "sas_p")


class GemmRecorder(TorchDispatchMode):
    """Records the shapes of every GEMM dispatched (mm, addmm, bmm, baddbmm) with their counts."""

    OPS = {"mm", "addmm", "bmm", "baddbmm"}

    def __init__(self):
        super().__init__()
        self.calls: dict[tuple, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name in self.OPS:
            a, b = (args[1], args[2]) if name in ("addmm", "baddbmm") else (args[0], args[1])
            key = (name, tuple(a.shape), tuple(b.shape), a.is_contiguous(), b.is_contiguous(), str(a.dtype))
            self.calls[key] = self.calls.get(key, 0) + 1
        return func(*args, **(kwargs or {}))


def gemm_flops(key: tuple) -> int:
    _, a, b, *_ = key
    batch = a[0] if len(a) == 3 else 1
    return 2 * batch * a[-2] * a[-1] * b[-1]


def time_gemm(key: tuple, device: torch.device, repeats: int = 5) -> float:
    """Minimum time of one GEMM of this shape and operand layout, alone."""
    _, a_shape, b_shape, a_contiguous, b_contiguous, dtype = key
    dtype = getattr(torch, dtype.removeprefix("torch."))
    a = torch.randn(a_shape if a_contiguous else (*a_shape[:-2], a_shape[-1], a_shape[-2]), device=device, dtype=dtype)
    b = torch.randn(b_shape if b_contiguous else (*b_shape[:-2], b_shape[-1], b_shape[-2]), device=device, dtype=dtype)
    a = a if a_contiguous else a.transpose(-1, -2)
    b = b if b_contiguous else b.transpose(-1, -2)
    op = torch.bmm if len(a_shape) == 3 else torch.mm
    op(a, b)
    best = float("inf")
    for _ in range(repeats):
        sync(device)
        start = time.perf_counter()
        op(a, b)
        sync(device)
        best = min(best, time.perf_counter() - start)
    return best


def in_precision(gemms: dict[tuple, float], dtype: torch.dtype) -> list[tuple]:
    """The recorded GEMMs computed in `dtype`: the peak is the run's precision's (a bf16 step also runs a few float32
    GEMMs, e.g. closed-form gradients accumulated in float32, and on a host whose float32 GEMMs are the faster, one of
    them would set a peak the step's bf16 GEMMs cannot reach)."""
    return [key for key in gemms if key[5] == str(dtype)]


def run(ctx: Context) -> dict:
    """Steps timed round-robin in processes of their own (half the rounds, at least 2), then each model's GEMMs
    recorded in this process, one model at a time, and timed alone."""
    shape = ctx.shape
    workers = {name: ctx.train_process(name, wait=False) for name in NAMES}
    results = round_robin_processes(workers, max(2, ctx.rounds // 2))
    batch = ctx.ids()
    calls, flops = {}, {}
    for name in NAMES:
        torch.manual_seed(0)
        model = ctx.build(name).train()
        flops[name] = matmul_flops_per_token(model, shape)
        recorder = GemmRecorder()
        with recorder:
            train_step(model, optimizer_for(model), batch, dtype=ctx.dtype)
        calls[name] = recorder.calls
        del model
    alone = {key: time_gemm(key, ctx.device) for key in {key for c in calls.values() for key in c}}
    peak_key = max(in_precision(alone, DTYPES[ctx.dtype]), key=lambda key: gemm_flops(key) / alone[key])
    peak = gemm_flops(peak_key) / alone[peak_key]
    out = {}
    for name in NAMES:
        step = results[name]["median_s"]
        model_flops = flops[name] * shape.batch * shape.seq
        gemm_time = sum(count * alone[key] for key, count in calls[name].items())
        out[name] = {
            "step_median_s": step,
            "model_gflop": model_flops / 1e9,
            "achieved_gflops": model_flops / step / 1e9,
            "peak_gflops": peak / 1e9,
            "peak_gemm": f"{peak_key[0]} {peak_key[1]} x {peak_key[2]} {peak_key[5].removeprefix('torch.')}",
            "mfu": model_flops / step / peak,
            "gemm_calls": sum(calls[name].values()),
            "gemm_gflop": sum(count * gemm_flops(key) for key, count in calls[name].items()) / 1e9,
            "gemm_time_alone_s": gemm_time,
            "gemm_time_share": gemm_time / step,
        }
    return out


def table(result: dict) -> str:
    peak = next(iter(result.values()))
    lines = [
        f"## MFU of the training step: model FLOP/s over this machine's peak GEMM rate, "
        f"{peak['peak_gflops']:.1f} GFLOP/s ({peak['peak_gemm']}, the best of the steps' GEMMs timed alone, in the "
        "run's precision)",
        "| model | step s | model GFLOP | achieved GFLOP/s | MFU | GEMM-time share |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in result.items():
        lines.append(
            f"| {name} | {r['step_median_s']:.3f} | {r['model_gflop']:.0f} | {r['achieved_gflops']:.1f} | "
            f"{r['mfu']:.1%} | {r['gemm_time_share']:.1%} |"
        )
    return "\n".join(lines)
