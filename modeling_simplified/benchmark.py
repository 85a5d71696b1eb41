"""Training-throughput benchmark: our block types against `GPT2LMHeadModel`, in one run, as ratios.

    python -m modeling_simplified.benchmark                      # the paper's CodeParrot shape (18x768, V=50257, T=128)
    python -m modeling_simplified.benchmark --layers 4 --steps 3 # a quick smoke run

Each step is what the Trainer does: forward with labels, backward, gradient clipping, AdamW step, zero_grad. Models
are timed round-robin (one step each per round) so that machine noise hits all of them alike; the median step time
per model is reported, and every ratio is against a baseline measured in the same run.
"""

import argparse
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
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    torch.manual_seed(0)
    names = args.models.split(",")
    models = {name: build(name, args).train() for name in names}
    optimizers = {name: torch.optim.AdamW(parameter_groups(m, 0.1), lr=1e-4, fused=True) for name, m in models.items()}
    batch = torch.randint(0, args.vocab, (args.batch, args.seq))
    times = {name: [] for name in names}
    for round_ in range(args.steps + 1):
        for name in names:
            start = time.perf_counter()
            train_step(models[name], optimizers[name], batch)
            if round_:  # round 0 warms up allocator and kernels
                times[name].append(time.perf_counter() - start)

    print(
        f"shape: {args.layers} layers x {args.width} wide, {args.heads} heads, vocab {args.vocab}, "
        f"batch {args.batch} x seq {args.seq}, torch threads {torch.get_num_threads()}, {args.steps} timed steps"
    )
    print(f"{'model':<10} {'params (M)':>10} {'median step (s)':>16} {'tokens/s':>9}  speed-up vs " + ", ".join(names))
    medians = {name: statistics.median(t) for name, t in times.items()}
    for name in names:
        params = sum(p.numel() for p in models[name].parameters()) / 1e6
        ratios = ", ".join(f"{medians[base] / medians[name]:.3f}" for base in names)
        tokens = args.batch * args.seq / medians[name]
        print(f"{name:<10} {params:>10.1f} {medians[name]:>16.3f} {tokens:>9.0f}  {ratios}")


if __name__ == "__main__":
    main()
