"""One workload under two checkouts of this repository, in one run: the speed a change to the hot path costs or gains.

    git worktree add ../before <commit>
    python -m benchmarks.before_after ../before .                  # training steps and generate at the paper's shape
    python -m benchmarks.before_after ../before . --quick          # smoke run at a tiny shape

Every case runs in a process of its own per checkout (`python -c`, the checkout as its working directory and first
on `sys.path`, so it imports that checkout's `modeling_simplified` and `benchmarks.benchmark`); the two processes of a
case take turns, one call at a time, the order alternating every round, after `--warmup` untimed rounds. Figures: the
median of the per-round ratios before / after time (> 1: the change is faster) with their min..max, as `make bench`.

Cases: a training step (`benchmarks.benchmark.train_step`) of `pre_ln` and `sas_p` at the CodeParrot shape (batch 8,
sequence 128) and at sequence 2048 (batch 1); cached greedy `generate` of `sas_p` and `pre_ln` (prompt 32, 128 new
tokens) at batch 1 and 8.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from dataclasses import asdict, replace
from pathlib import Path

from benchmarks.benchmark import QUICK, Shape

#: what a worker runs: builds the case once, then times one call per line it reads, printing (wall, CPU) seconds
_WORKER = """
import json, sys, time, torch
from benchmarks.benchmark import Shape, _ids, build, optimizer_for, train_step
case = json.loads(sys.argv[1])
shape = Shape(**case["shape"])
torch.manual_seed(0)
model = build(case["model"], shape)
if case["kind"] == "train":
    model.train()
    optimizer, batch = optimizer_for(model), _ids(shape)
    call = lambda: train_step(model, optimizer, batch)
else:
    model.eval()
    ids = _ids(shape, vocab_low=1, seq=case["prompt"], seed=1)
    kw = dict(attention_mask=torch.ones_like(ids), max_new_tokens=case["new_tokens"], min_new_tokens=case["new_tokens"],
              do_sample=False, eos_token_id=None, pad_token_id=0)
    def call():
        with torch.no_grad():
            model.generate(ids, **kw)
print("ready", flush=True)
for _ in sys.stdin:
    start, cpu = time.perf_counter(), time.process_time()
    call()
    print(json.dumps([time.perf_counter() - start, time.process_time() - cpu]), flush=True)
"""


class Worker:
    """One case in a `python -c` process of its own, run in `checkout`."""

    def __init__(self, checkout: Path, case: dict):
        self.process = subprocess.Popen(
            [sys.executable, "-c", _WORKER, json.dumps(case)],
            cwd=checkout,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        if self.process.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the worker in {checkout} exited with code {self.process.wait()}")

    def call(self) -> tuple[float, float]:
        self.process.stdin.write("go\n")
        self.process.stdin.flush()
        return tuple(json.loads(self.process.stdout.readline()))

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def cases(shape: Shape, quick: bool) -> dict[str, dict]:
    long = replace(shape, seq=256 if quick else 2048, batch=1)
    out = {}
    for model in ("pre_ln", "sas_p"):
        out[f"train {model} {shape.batch}x{shape.seq}"] = {"kind": "train", "model": model, "shape": asdict(shape)}
        out[f"train {model} {long.batch}x{long.seq}"] = {"kind": "train", "model": model, "shape": asdict(long)}
        for batch in (1, 8):
            out[f"generate {model} batch {batch}"] = {
                "kind": "generate",
                "model": model,
                "shape": asdict(replace(shape, batch=batch)),
                "prompt": 8 if quick else 32,
                "new_tokens": 8 if quick else 128,
            }
    return out


def compare(before: Path, after: Path, case: dict, rounds: int, warmup: int) -> dict:
    workers = {"before": Worker(before, case), "after": Worker(after, case)}
    times = {name: [] for name in workers}
    try:
        for r in range(warmup + rounds):
            for name in ("before", "after") if r % 2 == 0 else ("after", "before"):
                wall, _cpu = workers[name].call()
                if r >= warmup:
                    times[name].append(wall)
    finally:
        for worker in workers.values():
            worker.close()
    per_round = [b / a for b, a in zip(times["before"], times["after"])]
    return {
        "before_median_s": statistics.median(times["before"]),
        "after_median_s": statistics.median(times["after"]),
        "ratio_median": statistics.median(per_round),
        "ratio_low": min(per_round),
        "ratio_high": max(per_round),
        "times_s": times,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", type=Path, help="checkout of the code before the change")
    parser.add_argument("after", type=Path, help="checkout of the code after the change")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--only", default="", help="run the cases whose name contains this text")
    parser.add_argument("--quick", action="store_true", help="smoke run: a tiny shape, 2 rounds")
    parser.add_argument("--json", default="before_after.json")
    args = parser.parse_args(argv)
    shape, rounds = (QUICK, 2) if args.quick else (Shape(), args.rounds)
    results = {}
    print(f"{'case':34} {'before s':>9} {'after s':>9}  before/after (min..max)")
    for name, case in cases(shape, args.quick).items():
        if args.only not in name:
            continue
        r = results[name] = compare(args.before.resolve(), args.after.resolve(), case, rounds, args.warmup)
        print(
            f"{name:34} {r['before_median_s']:9.3f} {r['after_median_s']:9.3f}  "
            f"{r['ratio_median']:.3f} ({r['ratio_low']:.3f}..{r['ratio_high']:.3f})",
            flush=True,
        )
    Path(args.json).write_text(json.dumps({"rounds": rounds, "cases": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
