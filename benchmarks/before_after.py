"""One workload under two checkouts of this repository, in one run: the speed a change to the hot path costs or gains.

    git worktree add ../before <commit>
    python -m benchmarks.before_after ../before .                  # training steps and generate at the paper's shape
    python -m benchmarks.before_after ../before . --quick          # smoke run at a tiny shape
    python -m benchmarks.before_after ../before . --dtype bf16     # bf16 autocast steps, bf16-weight decoding

Every case runs in a process of its own per checkout (`common.Child`: `python -c`, the checkout as its working
directory and first on `sys.path`, so it imports that checkout's `modeling_simplified` and benchmark helpers); the two processes of a
case take turns, one call at a time, the order alternating every round, after `--warmup` untimed rounds. Figures: the
median of the per-round ratios before / after time (> 1: the change is faster) with their min..max, as `make bench`.

Cases: a training step (`common.train_step`) of `pre_ln` and `sas_p` at the CodeParrot shape (batch 8,
sequence 128) and at sequence 2048 (batch 1); cached greedy `generate` of `sas_p` and `pre_ln` (prompt 32, 128 new
tokens) at batch 1 and 8.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, replace
from pathlib import Path

from benchmarks.common import QUICK, Child, Shape, ratios, round_robin

#: what a worker runs, in its checkout: builds the case once, then times one call per request, speaking `common.Child`'s
#: protocol itself (an older checkout has no `common.serve`, and its helpers in `benchmarks.benchmark`)
_WORKER = """
import json, os, sys, time, torch
try:
    from benchmarks.common import Shape, build, ids, optimizer_for, train_step
except ImportError:
    from benchmarks.benchmark import Shape, build, optimizer_for, train_step, _ids as ids
out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
case = json.loads(sys.argv[1])
shape = Shape(**case["shape"])
torch.manual_seed(0)
model = build(case["model"], shape)
dtype = case.get("dtype", "float32")
if case["kind"] == "train":
    model.train()
    optimizer, batch = optimizer_for(model), ids(shape)
    call = (lambda: train_step(model, optimizer, batch)) if dtype == "float32" else (
        lambda: train_step(model, optimizer, batch, dtype=dtype))
else:
    model.eval().to(getattr(torch, {"bf16": "bfloat16"}.get(dtype, dtype)))
    prompt = ids(shape, vocab_low=1, seq=case["prompt"], seed=1)
    kw = dict(attention_mask=torch.ones_like(prompt), max_new_tokens=case["new_tokens"],
              min_new_tokens=case["new_tokens"], do_sample=False, eos_token_id=None, pad_token_id=0)
    def call():
        with torch.no_grad():
            model.generate(prompt, **kw)
print(json.dumps({"ok": None}), file=out, flush=True)
for _ in sys.stdin:
    start, cpu = time.perf_counter(), time.process_time()
    call()
    print(json.dumps({"ok": [time.perf_counter() - start, time.process_time() - cpu]}), file=out, flush=True)
"""


class Worker(Child):
    """One case in a process of its own, run in `checkout` (first on its `sys.path`)."""

    def __init__(self, checkout: Path, case: dict):
        super().__init__(["-c", _WORKER, json.dumps(case)], cwd=checkout)

    def call(self) -> tuple[float, float]:
        return tuple(self.request())


def cases(shape: Shape, quick: bool, dtype: str = "float32") -> dict[str, dict]:
    """`dtype` "bf16": training steps under bf16 autocast, decoding with bf16 weights."""
    long = replace(shape, seq=256 if quick else 2048, batch=1)
    out = {}
    for model in ("pre_ln", "sas_p"):
        for s in (shape, long):
            out[f"train {model} {s.batch}x{s.seq}"] = {
                "kind": "train",
                "model": model,
                "shape": asdict(s),
                "dtype": dtype,
            }
        for batch in (1, 8):
            out[f"generate {model} batch {batch}"] = {
                "kind": "generate",
                "model": model,
                "shape": asdict(replace(shape, batch=batch)),
                "prompt": 8 if quick else 32,
                "new_tokens": 8 if quick else 128,
                "dtype": dtype,
            }
    return out


def compare(before: Path, after: Path, case: dict, rounds: int, warmup: int) -> dict:
    workers = {"before": Worker(before, case), "after": Worker(after, case)}
    try:
        results = round_robin(workers, lambda _name, worker: worker.call(), rounds, warmup)
    finally:
        for worker in workers.values():
            worker.close()
    speed_up = ratios(results, "before")["after"]  # before time / after time
    return {
        "before_median_s": results["before"]["median_s"],
        "after_median_s": results["after"]["median_s"],
        **{key: speed_up[key] for key in ("ratio_median", "ratio_low", "ratio_high")},
        "times_s": {name: r["times_s"] for name, r in results.items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", type=Path, help="checkout of the code before the change")
    parser.add_argument("after", type=Path, help="checkout of the code after the change")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--only", default="", help="run the cases whose name contains this text")
    parser.add_argument("--quick", action="store_true", help="smoke run: a tiny shape, 2 rounds")
    parser.add_argument("--dtype", choices=("float32", "bf16"), default="float32", help="bf16: autocast / bf16 weights")
    parser.add_argument("--json", default="before_after.json")
    args = parser.parse_args(argv)
    shape, rounds = (QUICK, 2) if args.quick else (Shape(), args.rounds)
    results = {}
    print(f"{'case':34} {'before s':>9} {'after s':>9}  before/after (min..max)")
    for name, case in cases(shape, args.quick, args.dtype).items():
        if args.only not in name:
            continue
        r = results[name] = compare(args.before.resolve(), args.after.resolve(), case, rounds, args.warmup)
        print(
            f"{name:34} {r['before_median_s']:9.3f} {r['after_median_s']:9.3f}  "
            f"{r['ratio_median']:.3f} ({r['ratio_low']:.3f}..{r['ratio_high']:.3f})",
            flush=True,
        )
    Path(args.json).write_text(json.dumps({"rounds": rounds, "dtype": args.dtype, "cases": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
