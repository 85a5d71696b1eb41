"""Each variant's training-step time at the reproduction's own shape, measured as `make bench` measures the paper
shape (`benchmarks/`): every model in a process of its own, one step at a time, round-robin with the order rotating
every round, untimed warm-up steps first, this machine's torch threads, nothing else training. The training runs'
own times are not used for speed: they run two at a time on shared cores and include evaluations.

A step here is what a Trainer step computes (forward with labels, backward, clipping, fused AdamW; on the masked-LM
side an optimizer step every micro-batch, where the batch ramp's optimizer accumulates and steps less often in the
first 60% of the run); data loading and evaluation are not in it. The loss-vs-time curves put each evaluation at its step times this median step time."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

import torch

from benchmarks.common import TRAIN_WARMUP, Child, Shape, ratios, round_robin, worker_args
from modeling_simplified import SimplifiedConfig

from .planning import Run


def measure(args: argparse.Namespace, runs: dict[str, Run]) -> dict[str, Any]:
    """Per variant, the model a finished run trained (the config of its last checkpoint: the tokenizer's vocabulary
    included) at the run's batch and sequence length, timed `--timing-rounds` rounds: the median step time, its
    min..max and every round's time, and the per-round ratio to pre_ln's (median and range)."""
    workers, shapes = {}, {}
    for name, run in runs.items():
        plan = run.plan(args)
        config = SimplifiedConfig.from_pretrained(run.run_dir / f"checkpoint-{run.steps}")
        shapes[name] = Shape(
            layers=config.num_hidden_layers,
            width=config.hidden_size,
            heads=config.num_attention_heads,
            vocab=config.vocab_size,
            seq=plan.preset.data.seq_len,
            batch=plan.preset.training.per_device_train_batch_size,
        )
        job = {
            "kind": "train_config",
            "shape": dataclasses.asdict(shapes[name]),
            "config": config.to_dict(),
            "task": plan.preset.task,
            "mlm_probability": plan.preset.data.mlm_probability if plan.preset.task == "masked-lm" else 0.0,
            "device": "cpu",
            "threads": torch.get_num_threads(),
        }
        workers[name] = Child(worker_args(job), wait=False)
    try:
        results = round_robin(workers, lambda _name, w: tuple(w.request()), args.timing_rounds, TRAIN_WARMUP)
    finally:
        for worker in workers.values():
            worker.close()
    vs = ratios(results, "pre_ln")
    return {
        "rounds": args.timing_rounds,
        "warmup": TRAIN_WARMUP,
        "threads": torch.get_num_threads(),
        "batch": shapes["pre_ln"].batch,
        "seq": shapes["pre_ln"].seq,
        "variants": {
            name: {
                "seconds_per_step": r["median_s"],
                "min_s": r["min_s"],
                "spread": r["spread"],
                "times_s": r["times_s"],
                "params": workers[name].info["params"],
                "speed_vs_pre_ln": vs[name],
            }
            for name, r in results.items()
        },
    }
