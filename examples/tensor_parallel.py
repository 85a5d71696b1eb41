"""Tensor-parallel inference (docs/tensor_parallel.md): every process loads an exported folder or Hub repo of a
causal LM sharded over the processes (`tp_plan="auto"`, with `trust_remote_code=True`, since the folder carries its
code), runs a prompt and greedy `generate`; rank 0 checks the logits and tokens against the model loaded whole.

    torchrun --nproc_per_node 2 examples/tensor_parallel.py runs/demo/export

On the CPU the processes talk over gloo. The number of processes must divide the model's heads and MLP width; a
model that cannot be sharded is refused with one error naming the field.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.distributed as dist
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.distributed import DistributedConfig


def local_numel(param: torch.Tensor) -> int:
    """The elements this rank holds (a sharded parameter is a DTensor)."""
    return param.to_local().numel() if hasattr(param, "to_local") else param.numel()


def run(model, inputs, new_tokens: int, pad_token_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The prompt's logits and the greedy continuation."""
    with torch.no_grad():
        logits = model(**inputs).logits
        tokens = model.generate(
            **inputs, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, pad_token_id=pad_token_id
        )
    return logits, tokens[0, inputs["input_ids"].shape[1] :]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="torchrun --nproc_per_node N examples/tensor_parallel.py", description=__doc__
    )
    parser.add_argument("model", help="an exported folder or Hub repo of a causal LM")
    parser.add_argument("--prompt", default="    def __init__(self, ")
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--atol", type=float, default=1e-5, help="largest logit difference from one whole process")
    args = parser.parse_args(argv)
    if "RANK" not in os.environ:
        parser.error("run it under torchrun, e.g. torchrun --nproc_per_node 2 examples/tensor_parallel.py MODEL")

    tokenizer = AutoTokenizer.from_pretrained(args.model, trust_remote_code=True)
    inputs = tokenizer(args.prompt, return_tensors="pt")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    # the deprecated spelling `from_pretrained(..., tp_plan="auto")` loads the same shards
    sharded = AutoModelForCausalLM.from_pretrained(
        args.model, trust_remote_code=True, distributed_config=DistributedConfig(tp_plan="auto")
    )
    rank, world = dist.get_rank(), dist.get_world_size()
    logits, tokens = run(sharded, inputs, args.new_tokens, pad)
    held = sum(local_numel(p) for p in sharded.parameters()) / sum(p.numel() for p in sharded.parameters())
    print(f"rank {rank}/{world}: holds {held:.0%} of the parameters' elements", flush=True)

    verdict = [None]
    if rank == 0:
        print(f"rank 0 loaded {type(sharded).__module__}.{type(sharded).__name__}")
        whole = AutoModelForCausalLM.from_pretrained(args.model, trust_remote_code=True)
        whole_logits, whole_tokens = run(whole, inputs, args.new_tokens, pad)
        error = (logits - whole_logits).abs().max().item()
        same = torch.equal(tokens, whole_tokens)
        print(f"max |sharded - whole| logit: {error:.2e} (atol {args.atol}); greedy tokens identical: {same}")
        print(args.prompt + tokenizer.decode(tokens, skip_special_tokens=True))
        verdict = [error <= args.atol and same]
    dist.broadcast_object_list(verdict, src=0)
    dist.destroy_process_group()
    return 0 if verdict[0] else 1


if __name__ == "__main__":
    sys.exit(main())
