"""How fast the depth family's runs can train on this host: training steps of its Pre-LN preset at each depth,
one variable changed at a time against the family's setting (one torch thread per process, two processes at once,
batch 16, float32, eager):

- `threads`: one process with two torch threads against two processes of one thread each (tokens per second of the
  whole host: the family trains independent runs, so two processes may use the cores better than one);
- `batch`: batch 32 against 16 (tokens per second; the family keeps the preset's batch, a recipe constant);
- `bf16`: bf16 autocast against float32;
- `compile`: `torch.compile` of the model's forward against eager, and the compile's own time.

Each figure is the median over rounds of tokens per second (the processes of a measurement timing their rounds
together, once all are warm); the two sides of a comparison run one after the other, their order swapped every
repeat, and each repeat's ratio is kept (the spread). Writes `docs/reproduction/codeparrot-depth/speed.json` with the
host's CPU flags, GEMM peaks and load.

    python -m experiments.depth_speed [--depths 2 8] [--rounds 5] [--steps 20]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benchmarks.common import host_record
from modeling_simplified import SimplifiedForCausalLM
from modeling_simplified.training.presets import load_preset, validate

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "reproduction" / "codeparrot-depth" / "speed.json"
PRESET = "codeparrot-depth-pre_ln"


def ready() -> None:
    """Tell the parent this worker is warm and wait for its go: the processes of a measurement time their rounds
    together, not while another is still importing or compiling."""
    print("ready", flush=True)
    sys.stdin.readline()


def steps_per_second(
    layers: int, batch: int, bf16: bool, compiled: bool, steps: int, rounds: int, barrier: Callable[[], None] = ready
) -> dict[str, Any]:
    """Training steps (forward with labels, backward, AdamW, zero_grad) of the family's Pre-LN at `layers` blocks
    in this process, `rounds` timings of `steps` steps each after two untimed steps (the compile's included in
    `warmup_s`), started when `barrier` returns: by default when every process of the measurement is warm."""
    preset = load_preset(PRESET)
    preset.model["num_hidden_layers"] = layers
    torch.manual_seed(0)
    model = SimplifiedForCausalLM(validate(preset))
    if compiled:
        model.forward = torch.compile(model.forward)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, preset.model["vocab_size"], (batch, preset.data.seq_len))

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    start = time.perf_counter()
    for _ in range(2):
        step()
    warmup = time.perf_counter() - start
    barrier()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(steps):
            step()
        times.append((time.perf_counter() - start) / steps)
    return {"tokens_per_s": [batch * preset.data.seq_len / t for t in times], "warmup_s": warmup}


def _worker(config: dict[str, Any]) -> subprocess.Popen:
    env = {"OMP_NUM_THREADS": str(config["threads"]), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "experiments.depth_speed", "--worker", json.dumps(config)]
    return subprocess.Popen(argv, cwd=REPO, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def measure(configs: list[dict[str, Any]], processes: int = 1) -> list[float]:
    """Each config run `processes` at once, their timed rounds started together; the host's tokens per second (the
    processes' sum), median of rounds."""
    procs = [_worker(c) for c in configs for _ in range(processes)]
    for p in procs:
        assert p.stdout.readline().strip() == "ready"
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    results = [json.loads(p.communicate()[0]) for p in procs]
    per_round = [sum(r) for r in zip(*(x["tokens_per_s"] for x in results))]
    return [statistics.median(per_round), statistics.median(x["warmup_s"] for x in results)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.depth_speed", description=__doc__)
    parser.add_argument("--depths", nargs="+", type=int, default=[2, 8])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=2, help="times each comparison is run, interleaved")
    parser.add_argument("--output", type=Path, default=OUT, help=f"the JSON written (default: {OUT.relative_to(REPO)})")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        config = json.loads(args.worker)
        torch.set_num_threads(config["threads"])
        keys = ("layers", "batch", "bf16", "compiled", "steps", "rounds")
        print(json.dumps(steps_per_second(**{k: config[k] for k in keys})))
        return 0
    base = {"threads": 1, "batch": 16, "bf16": False, "compiled": False, "steps": args.steps, "rounds": args.rounds}
    out: dict[str, Any] = host_record(" ".join(["python -m experiments.depth_speed", *(argv or sys.argv[1:])]))
    for layers in args.depths:
        family = {**base, "layers": layers}
        row: dict[str, Any] = {}
        for repeat in range(args.repeats):
            # (config, its baseline): measured one after the other, the order swapped every repeat
            pairs = {
                "threads: 2 processes x 1 thread / 1 process x 2 threads": (
                    ([family], 2),
                    ([{**family, "threads": 2}], 1),
                ),
                "batch 32 / batch 16": (([{**family, "batch": 32}], 1), ([family], 1)),
                "bf16 / float32": (([{**family, "bf16": True}], 1), ([family], 1)),
                "compiled / eager": (([{**family, "compiled": True}], 1), ([family], 1)),
            }
            for name, (config, baseline) in pairs.items():
                if repeat % 2 == 0:
                    (a, warm_a), (b, _) = measure(*config), measure(*baseline)
                else:
                    (b, _), (a, warm_a) = measure(*baseline), measure(*config)
                row.setdefault(name, {"ratio": [], "compile_s": []})
                row[name]["ratio"].append(a / b)
                if name.startswith("compiled"):
                    row[name]["compile_s"].append(warm_a)
        out[str(layers)] = row
        print(layers, json.dumps(row), flush=True)
    out["load_average_at_end"] = os.getloadavg()
    args.output.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
