"""Training-throughput benchmark: our block types against `GPT2LMHeadModel`, in one run, as ratios.

    python -m modeling_simplified.benchmark                      # the paper's CodeParrot shape (18x768, V=50257, T=128)
    python -m modeling_simplified.benchmark --layers 4 --steps 3 # a quick smoke run

Each step is what the Trainer does: forward with labels, backward, gradient clipping, AdamW step, zero_grad. Models
are timed round-robin (one step each per round) so that machine noise hits all of them alike; the median step time
per model is reported, and every ratio is against a baseline measured in the same run.
"""

import argparse
import json
import statistics
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel

from modeling_simplified import SimplifiedConfig, SimplifiedForCausalLM, parameter_groups


def build(name: str, args) -> torch.nn.Module:
    if name == "gpt2":
        config = GPT2Config(
            vocab_size=args.vocab,
            n_embd=args.width,
            n_layer=args.layers,
            n_head=args.heads,
            n_positions=max(1024, args.seq),
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
        )
        return GPT2LMHeadModel(config)
    config = SimplifiedConfig(
        block_type=name,
        vocab_size=args.vocab,
        hidden_size=args.width,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        intermediate_size=4 * args.width,
    )
    return SimplifiedForCausalLM(config)


def matmul_flops_per_token(model: torch.nn.Module, seq: int, layers: int, width: int) -> float:
    """Analytic matmul FLOPs of one training token: 6 x (weights in Linear/Conv1D GEMMs) + attention scores and mixing.

    Forward is 2 FLOPs per weight per token, backward twice that; QK^T and A.X each cost 2*T*d per token and layer
    (full, not causal-halved, as SDPA computes it on CPU).
    """
    gemm_weights = sum(
        module.weight.numel()
        for module in model.modules()
        if isinstance(module, torch.nn.Linear) or type(module).__name__ == "Conv1D"
    )
    return 6 * gemm_weights + 3 * layers * 2 * 2 * seq * width


def train_step(model, optimizer, batch) -> None:
    loss = model(input_ids=batch, labels=batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="gpt2,pre_ln,sas,sas_p", help="comma-separated: gpt2 and block types")
    parser.add_argument("--layers", type=int, default=18)
    parser.add_argument("--width", type=int, default=768)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--vocab", type=int, default=50257)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=6, help="timed rounds (after one warm-up round)")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 layers, 2 timed steps")
    parser.add_argument("--json", default="benchmark.json", help="where to write the results")
    args = parser.parse_args(argv)
    if args.quick:
        args.layers, args.steps = 2, 2
    if args.threads:
        torch.set_num_threads(args.threads)

    torch.manual_seed(0)
    names = args.models.split(",")
    models = {name: build(name, args).train() for name in names}
    optimizers = {name: torch.optim.AdamW(parameter_groups(m, 0.1), lr=1e-4, fused=True) for name, m in models.items()}
    batch = torch.randint(0, args.vocab, (args.batch, args.seq))
    times = {name: [] for name in names}
    cpu_times = {name: [] for name in names}
    for round_ in range(args.steps + 1):
        for name in names:
            start, cpu_start = time.perf_counter(), time.process_time()
            train_step(models[name], optimizers[name], batch)
            if round_:  # round 0 warms up allocator and kernels
                times[name].append(time.perf_counter() - start)
                cpu_times[name].append(time.process_time() - cpu_start)

    base = "pre_ln" if "pre_ln" in names else names[0]
    flops = {name: matmul_flops_per_token(models[name], args.seq, args.layers, args.width) for name in names}
    results = {}
    for name in names:
        t = sorted(times[name])
        results[name] = {
            "params_M": sum(p.numel() for p in models[name].parameters()) / 1e6,
            "median_s": statistics.median(t),
            "min_s": t[0],
            "max_s": t[-1],
            "cpu_median_s": statistics.median(cpu_times[name]),
            "tokens_per_s_median": args.batch * args.seq / statistics.median(t),
            "matmul_flops_per_token": flops[name],
        }
    for name in names:
        r, b = results[name], results[base]
        r[f"speedup_vs_{base}_median"] = b["median_s"] / r["median_s"]
        r[f"speedup_vs_{base}_min"] = b["min_s"] / r["min_s"]
        r[f"flop_bound_vs_{base}"] = b["matmul_flops_per_token"] / r["matmul_flops_per_token"]
    print(
        f"shape: {args.layers} layers x {args.width} wide, {args.heads} heads, vocab {args.vocab}, "
        f"batch {args.batch} x seq {args.seq}, torch threads {torch.get_num_threads()}, {args.steps} timed rounds "
        f"(round robin, 1 warm-up)"
    )
    print(
        f"{'model':<8} {'params M':>8} {'median s':>9} {'min s':>7} {'spread':>7} {'cpu s':>7} {'tok/s':>6} "
        f"{'vs ' + base + ' med':>12} {'min':>6} {'FLOP bound':>10}"
    )
    for name in names:
        r = results[name]
        spread = (r["max_s"] - r["min_s"]) / r["median_s"]
        print(
            f"{name:<8} {r['params_M']:>8.1f} {r['median_s']:>9.3f} {r['min_s']:>7.3f} {spread:>6.0%} "
            f"{r['cpu_median_s']:>7.3f} {r['tokens_per_s_median']:>6.0f} {r[f'speedup_vs_{base}_median']:>12.3f} "
            f"{r[f'speedup_vs_{base}_min']:>6.3f} {r[f'flop_bound_vs_{base}']:>10.3f}"
        )
    with open(args.json, "w") as handle:
        json.dump({"args": vars(args), "torch_threads": torch.get_num_threads(), "results": results}, handle, indent=2)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
