"""`allocator`: the `train` step of `GPT2LMHeadModel`, `pre_ln` and `sas_p` under glibc malloc's defaults against
`MALLOC_KEEP` (no mmap'd blocks, no heap trimming: freed gradients and activations are reused instead of page-faulted
in again every step), each in a process of its own, round-robin."""

from __future__ import annotations

from benchmarks.common import Context, format_ratio, ratios, round_robin_processes

ON_CUDA = False
BF16 = False
NAMES = ("gpt2", "pre_ln", "sas_p")
#: glibc malloc settings (mallopt(3)) that keep freed memory in the process: no mmap'd blocks, no trimming of the heap.
#: By default glibc returns blocks over 32 MiB (and a heap top over its trim threshold) to the kernel, and every
#: step's gradients, activations and vocabulary-sized buffers are page-faulted in again.
MALLOC_KEEP = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(2**40)}


def run(ctx: Context) -> dict:
    """Per model the speed-up, both step times and each child's malloc environment."""
    out = {}
    for name in NAMES:
        workers = {
            "default": ctx.train_process(name, env={key: None for key in MALLOC_KEEP}, wait=False),
            "keep": ctx.train_process(name, env=MALLOC_KEEP, wait=False),
        }
        results = round_robin_processes(workers, ctx.rounds)
        malloc_env = {setting: worker.info["malloc_env"] for setting, worker in workers.items()}
        out[name] = {**results, "keep_speedup": ratios(results, "default")["keep"], "malloc_env": malloc_env}
    return out


def table(result: dict) -> str:
    settings = " ".join(f"{k}={v}" for k, v in MALLOC_KEEP.items())
    lines = [
        f"## Training step under glibc malloc's defaults and with freed memory kept in the process ({settings})",
        "| model | default: median step s | kept: median step s | speed-up: median (range, of mins) |",
        "|---|---|---|---|",
    ]
    for name, r in result.items():
        lines.append(
            f"| {name} | {r['default']['median_s']:.3f} | {r['keep']['median_s']:.3f} | "
            f"{format_ratio(r['keep_speedup'])} |"
        )
    return "\n".join(lines)
