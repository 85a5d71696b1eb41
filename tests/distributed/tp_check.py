"""Tensor parallelism on the CPU: `torchrun --nproc_per_node 2 tests/distributed/tp_check.py OUT_DIR FOLDER...`.

Each FOLDER holds a saved causal LM (a native `LlamaForCausalLM` as the harness's own check, or a `SimplifiedForCausalLM`)
and `probe.pt` (input ids). Every rank loads it with `from_pretrained(FOLDER, tp_plan="auto")` (gloo), runs the probe
and greedy `generate`; rank 0 writes `OUT_DIR/<folder name>.pt`: the logits, the generated tokens, and for every
parameter its full and local (this rank's) shape. The pytest process (tests/test_tensor_parallel.py) compares them
with one unsharded process. A folder whose name starts with `refused-` must be refused at load time: rank 0 writes the
error's type and message instead.
"""

import sys
from pathlib import Path

import torch
import torch.distributed as dist
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM

from modeling_simplified import SimplifiedConfig  # noqa: F401  (registers the Auto classes and the parallel styles)

NEW_TOKENS = 8


def local_shape(param) -> tuple[int, ...]:
    return tuple(param.to_local().shape) if hasattr(param, "to_local") else tuple(param.shape)


def run(folder: Path, tp_plan):
    """The probe's logits, greedy tokens (causal LMs) and every parameter's full and local shape."""
    config = AutoConfig.from_pretrained(folder)
    masked = any(a.endswith("ForMaskedLM") for a in config.architectures or [])
    auto = AutoModelForMaskedLM if masked else AutoModelForCausalLM
    model = auto.from_pretrained(folder, **({"tp_plan": tp_plan} if tp_plan else {})).eval()
    probe = torch.load(folder / "probe.pt")
    with torch.no_grad():
        logits = model(input_ids=probe).logits
    tokens = None
    if not masked:
        tokens = model.generate(
            probe,
            attention_mask=torch.ones_like(probe),
            max_new_tokens=NEW_TOKENS,
            min_new_tokens=NEW_TOKENS,
            do_sample=False,
            eos_token_id=None,
            pad_token_id=config.vocab_size - 1,
        )
    shapes = {name: (tuple(p.shape), local_shape(p)) for name, p in model.named_parameters()}
    return {"logits": logits, "tokens": tokens, "shapes": shapes}


def main(out: Path, folders: list[Path]):
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    for folder in folders:
        if folder.name.startswith("refused-"):
            try:
                run(folder, "auto")
            except Exception as err:  # noqa: BLE001  (the test checks the type and message)
                result = {"error_type": type(err).__name__, "error": str(err)}
            else:
                result = {"error_type": None, "error": "loaded"}
        else:
            result = run(folder, "auto")
        if rank == 0:
            torch.save(result, out / f"{folder.name}.pt")
            print(f"{folder.name}: done", flush=True)
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]), [Path(p) for p in sys.argv[2:]])
