"""Where bf16 autocast pays on this CPU: a training step (forward, backward, AdamW) of small causal models under bf16
autocast over float32 weights (the Trainer's `bf16=True`) against float32, on ONE thread, by width.

    python -m benchmarks.bf16_crossover [--json docs/benchmark/bf16_crossover.json]

The shapes are the `codeparrot-tiny` family's (4 blocks, 32-wide heads, ReLU MLP 4d, vocab 4096, rotary positions,
seq 128) at widths 64 to 768, batch 8 × 128 (and the preset's 32 × 128 at d=128, the width `make demo` trains).
Each round times one step of each precision, alternating which goes first, after `WARMUP` untimed steps of each;
a row reports the median step time of each precision and the median of the per-round ratios bf16 / float32 (above
1: bf16 is slower). `simplified-train --bf16` warns on a CPU at a hidden_size up to the widest one measured slower
(`slower_up_to`; `modeling_simplified.training.cli.BF16_CPU_SLOWER_UP_TO`, checked against the committed JSON by
`tests/test_cli.py`).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path

import torch

from modeling_simplified import SimplifiedConfig, SimplifiedForCausalLM

WIDTHS = (64, 128, 256, 512, 768)
BLOCKS = ("pre_ln", "sas_p")
WARMUP, ROUNDS = 1, 3
SEQ, BATCH = 128, 8


def model_at(block_type: str, width: int) -> SimplifiedForCausalLM:
    config = SimplifiedConfig(
        block_type=block_type,
        vocab_size=4096,
        hidden_size=width,
        num_hidden_layers=4,
        num_attention_heads=width // 32,
        intermediate_size=4 * width,
        hidden_act="relu",
        position_embedding_type="rotary",
    )
    torch.manual_seed(0)
    return SimplifiedForCausalLM(config).train()


def stepper(block_type: str, width: int, batch: int, bf16: bool):
    """One training step of its own model and AdamW, under bf16 autocast or in float32."""
    model = model_at(block_type, width)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, 4096, (batch, SEQ), generator=torch.Generator().manual_seed(0))

    def step() -> float:
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return time.perf_counter() - start

    return step


def measure(block_type: str, width: int, batch: int) -> dict:
    steps = {"float32": stepper(block_type, width, batch, False), "bf16": stepper(block_type, width, batch, True)}
    for step in steps.values():
        for _ in range(WARMUP):
            step()
    times = {name: [] for name in steps}
    for r in range(ROUNDS):
        for name in list(steps)[:: 1 if r % 2 == 0 else -1]:
            times[name].append(steps[name]())
    ratios = [b / f for b, f in zip(times["bf16"], times["float32"])]
    return {
        "block_type": block_type,
        "hidden_size": width,
        "batch": batch,
        "seq": SEQ,
        "float32_s": statistics.median(times["float32"]),
        "bf16_s": statistics.median(times["bf16"]),
        "bf16_over_float32": statistics.median(ratios),
        "per_round": ratios,
    }


def slower_up_to(rows: list[dict]) -> int | None:
    """The widest width measured at batch 8 at which bf16 was slower than float32 for some block (None: none was):
    `simplified-train --bf16` warns on a CPU at that width and below."""
    slower = [r["hidden_size"] for r in rows if r["batch"] == BATCH and r["bf16_over_float32"] > 1]
    return max(slower, default=None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bf16_crossover", description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the rows and the crossover here")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    started = time.time()
    rows = []
    for width in WIDTHS:
        for block_type in BLOCKS:
            rows.append(measure(block_type, width, BATCH))
            print(json.dumps({k: v for k, v in rows[-1].items() if k != "per_round"}), flush=True)
    rows.append(measure("sas_p", 128, 32))
    print(json.dumps({k: v for k, v in rows[-1].items() if k != "per_round"}), flush=True)
    cpu = (
        next(
            (
                line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")
            ),
            platform.processor(),
        )
        if Path("/proc/cpuinfo").exists()
        else ""
    )
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    result = {
        "meta": {
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "commit": commit,
            "torch": torch.__version__,
            "cpu": cpu,
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "threads": torch.get_num_threads(),
            "warmup": WARMUP,
            "rounds": ROUNDS,
            "wall_s": round(time.time() - started, 1),
        },
        "rows": rows,
        "bf16_slower_up_to_hidden_size": slower_up_to(rows),
    }
    print(
        f"bf16 slower up to hidden_size {result['bf16_slower_up_to_hidden_size']} (batch {BATCH} x {SEQ}, one thread)"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
