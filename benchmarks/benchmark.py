"""Benchmark suite (`make bench`): what users compare us on, every figure a ratio measured in the same run.

    python -m benchmarks.benchmark                       # every section, the paper's CodeParrot shape
    python -m benchmarks.benchmark --sections train,mfu  # a subset
    python -m benchmarks.benchmark --quick               # smoke run at a tiny shape
    python -m benchmarks.benchmark --dtype bf16          # bf16: autocast training, bf16-weight inference

Each section is a module of `benchmarks/sections/` (registered in `SECTIONS`), its docstring says what it measures:
train, mfu, generate, precision, quantization, score, kv_cache, memory, step_memory, compile, profile, raptr, packing,
loss, allocator. Results are printed as Markdown tables and written to `--json` with the run's `meta` (date, command,
machine, versions, commit, load, malloc environment, device, shape, rounds, precision, the CPU's flags and the GEMM
peak in float32 and bf16: a host without bf16 units emulates bf16 slowly, so every figure is read against them).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict

import torch

from benchmarks.common import DTYPES, QUICK, TRAIN_WARMUP, Context, Shape, host_record
from benchmarks.sections import SECTIONS

#: sections that run on a CUDA device (`--device cuda`); the others measure the CPU process (RSS, CPU profiler)
CUDA_SECTIONS = tuple(name for name, section in SECTIONS.items() if section.ON_CUDA)
#: sections that measure in bf16 under `--dtype bf16`; the others measure float32 only
BF16_SECTIONS = tuple(name for name, section in SECTIONS.items() if section.BF16)


def sections_help() -> str:
    """Each section's first paragraph, as `--help` lists them."""
    return "\n".join("- " + section.__doc__.split("\n\n")[0].replace("\n", "\n  ") for section in SECTIONS.values())


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, list[str], Context]:
    """The options, the sections to run (in registry order) and the context they run with."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.benchmark",
        description=f"{__doc__}\nSections:\n{sections_help()}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    names = ", ".join(SECTIONS)
    parser.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated, of {names}")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds per comparison, after warm-up")
    parser.add_argument("--quick", action="store_true", help="smoke run: a tiny shape, 2 rounds")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument(
        "--device",
        default="cpu",
        help=f"cpu (default) or a CUDA device, e.g. cuda or cuda:1; on CUDA only {', '.join(CUDA_SECTIONS)} run",
    )
    parser.add_argument(
        "--dtype",
        choices=list(DTYPES),
        default="float32",
        help="float32 (default) or bf16: training steps under bf16 autocast over float32 weights (the Trainer's "
        f"bf16=True), inference with bf16 weights; only {', '.join(BF16_SECTIONS)} run in bf16",
    )
    parser.add_argument("--json", default="benchmark.json", help="where to write the results")
    args = parser.parse_args(argv)
    sections = args.sections.split(",")
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        parser.error(f"--sections: unknown {', '.join(sorted(unknown))}; allowed: {names}")
    device = torch.device(args.device)
    if device.type not in ("cpu", "cuda") or (device.type == "cuda" and not torch.cuda.is_available()):
        parser.error(f"--device: {args.device!r} is not available here; allowed: cpu, or cuda[:N] on a CUDA machine")
    if device.type == "cuda":
        for section in [s for s in sections if s not in CUDA_SECTIONS]:
            print(f"(section {section} skipped on {device}: it measures the CPU process)")
        sections = [s for s in sections if s in CUDA_SECTIONS]
    if args.dtype != "float32":
        for section in [s for s in sections if s not in BF16_SECTIONS]:
            print(f"(section {section} skipped in {args.dtype}: it measures float32 only)")
        sections = [s for s in sections if s in BF16_SECTIONS]
    if args.threads:
        torch.set_num_threads(args.threads)
    shape, rounds = (QUICK, 2) if args.quick else (Shape(), args.rounds)
    context = Context(
        shape=shape, rounds=rounds, device=device, quick=args.quick, threads=torch.get_num_threads(), dtype=args.dtype
    )
    return args, [name for name in SECTIONS if name in sections], context


def main(argv: list[str] | None = None) -> int:
    args, sections, ctx = parse_args(argv)
    command = "python -m benchmarks.benchmark " + " ".join(sys.argv[1:] if argv is None else argv)
    meta = {
        **host_record(command, ctx.device),
        "torch_threads": ctx.threads,
        "device": f"{ctx.device} ({torch.cuda.get_device_name(ctx.device)})" if ctx.device.type == "cuda" else "cpu",
        "shape": asdict(ctx.shape),
        "rounds": ctx.rounds,
        "train_warmup_rounds": TRAIN_WARMUP,
        "dtype": ctx.dtype,
    }
    started = meta["date"]
    print(f"# benchmark {started}: {meta['machine']}, torch {meta['torch']}, {meta['torch_threads']} threads")
    peaks = meta["gemm_peak_gflops"]
    print(
        f"{ctx.dtype}; GEMM peak {peaks['float32']:.0f} GFLOP/s float32, {peaks['bf16']:.0f} GFLOP/s bf16; "
        f"CPU flags: {' '.join(meta['cpu_flags']) or '-'}"
    )
    print(
        f"shape {asdict(ctx.shape)}, {ctx.rounds} timed rounds after warm-up ({TRAIN_WARMUP} rounds of training steps)"
    )
    results: dict = {"meta": meta}
    for name in sections:
        results[name] = SECTIONS[name].run(ctx)
        print("\n" + SECTIONS[name].table(results[name]), flush=True)
    meta["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    meta["load_average_at_end"] = os.getloadavg()
    with open(args.json, "w") as handle:
        json.dump(results, handle, indent=1)
    print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
