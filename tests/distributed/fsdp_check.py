"""FSDP2 on the CPU, for every block type: `torchrun --nproc_per_node 2 tests/distributed/fsdp_check.py OUT_DIR`.

Each rank builds the same tiny causal LM, shards it with `fully_shard` per block and then the root (gloo), and runs
3 AdamW steps on its half of a global batch; the parameters must equal those of 3 steps of one unsharded model on the
whole batch (1e-5). The loss of a rank is the sum over its labelled tokens divided by the global count, times the
world size: FSDP averages the ranks' gradients, so the sharded gradient is the full batch's. The full state dict
gathered from the shards (`get_model_state_dict(..., full_state_dict=True, cpu_offload=True)`) is saved with
`save_pretrained` and reloaded with identical logits. Last, RaPTr's callback must refuse the sharded model.
Prints one line per check; any failure raises (non-zero exit). Run by tests/test_fsdp.py (slow suite).
"""

import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
from torch.distributed.fsdp import fully_shard

from modeling_simplified import BLOCK_TYPES, SimplifiedConfig, SimplifiedForCausalLM
from modeling_simplified.optimization import parameter_groups

STEPS = 3
ROWS, LENGTH = 4, 10


def build(block_type: str) -> SimplifiedForCausalLM:
    """The same perturbed tiny model on every rank (W^Q = 0 at init would make attention context-free)."""
    config = SimplifiedConfig(
        block_type=block_type,
        vocab_size=64,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
    )
    torch.manual_seed(0)
    model = SimplifiedForCausalLM(config)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.05)
    return model


def batches():
    """`STEPS` global batches; some labels ignored so that the ranks hold different numbers of labelled tokens."""
    gen = torch.Generator().manual_seed(2)
    for _ in range(STEPS):
        ids = torch.randint(0, 64, (ROWS, LENGTH), generator=gen)
        labels = torch.where(torch.rand(ROWS, LENGTH, generator=gen) < 0.3, -100, ids)
        yield ids, labels


def train(model, rows: slice, world: int):
    optimizer = torch.optim.AdamW(parameter_groups(model, 0.1), lr=1e-2)
    model.train()
    for ids, labels in batches():
        items = (labels[:, 1:] != -100).sum()  # the causal loss shifts the labels
        loss = model(input_ids=ids[rows], labels=labels[rows], num_items_in_batch=items).loss * world
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return model


def main(out: Path):
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    half = slice(rank * ROWS // world, (rank + 1) * ROWS // world)
    probe = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(3))
    for block_type in BLOCK_TYPES:
        reference = train(build(block_type), slice(None), 1)
        model = build(block_type)
        for layer in model.model.layers:
            fully_shard(layer)
        fully_shard(model)
        train(model, half, world)
        model.eval()
        with torch.no_grad():
            sharded_logits = model(input_ids=probe).logits
        state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        if rank == 0:
            expected = reference.state_dict()
            for name, value in state.items():
                torch.testing.assert_close(value, expected[name], atol=1e-5, rtol=0, msg=lambda m, n=name: f"{n}: {m}")
            gathered = SimplifiedForCausalLM(reference.config)
            gathered.load_state_dict(state)
            gathered.save_pretrained(out / block_type)
            reloaded = SimplifiedForCausalLM.from_pretrained(out / block_type).eval()
            with torch.no_grad():
                logits = reloaded(input_ids=probe).logits
                assert torch.equal(logits, gathered.eval()(input_ids=probe).logits), block_type
            torch.testing.assert_close(logits, sharded_logits, atol=1e-6, rtol=0)
            print(f"{block_type}: sharded == unsharded ({len(state)} tensors), reloaded logits identical", flush=True)
        dist.barrier()

    from modeling_simplified.training.raptr import RaptrSpecError, refuse_sharded

    try:
        refuse_sharded(model)
    except RaptrSpecError as err:
        if rank == 0:
            print(f"raptr: refused: {err}", flush=True)
    else:
        raise AssertionError("RaPTr accepted a model sharded with fully_shard")
    dist.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
