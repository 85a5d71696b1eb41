"""FSDP2 (`torch.distributed.fsdp.fully_shard`) for every block type: no 0-dim parameter anywhere, checkpoints of the
old layout (0-dim gains) load exactly, and (slow) a 2-process gloo run on the CPU matches one process."""

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import tiny_config
from safetensors.torch import load_file

from modeling_simplified import BLOCK_TYPES, SimplifiedForCausalLM, SimplifiedForMaskedLM
from modeling_simplified.optimization import parameter_groups

FIXTURES = Path(__file__).parent / "fixtures" / "scalar_gains"
ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("cls", [SimplifiedForCausalLM, SimplifiedForMaskedLM])
def test_no_parameter_or_buffer_is_zero_dimensional(block_type, cls):
    """fully_shard refuses 0-dim parameters; eq. 6 everywhere and trainable skips are covered too. The 1-element
    gains still get no weight decay."""
    for overrides in ({}, dict(value_mode="reparam", projection_mode="reparam", skip_gains_trainable=True)):
        if overrides and block_type not in ("sas", "sas_p", "simplest"):
            continue
        model = cls(tiny_config(block_type, **overrides))
        zero_dim = [name for name, t in [*model.named_parameters(), *model.named_buffers()] if t.dim() == 0]
        assert zero_dim == []
        no_decay = {id(p) for p in parameter_groups(model, 0.1)[1]["params"]}
        gains = [(n, p) for n, p in model.named_parameters() if p.numel() == 1]
        assert all(id(p) in no_decay for n, p in gains if p.requires_grad), gains


@pytest.mark.parametrize("block_type", sorted(p.name for p in FIXTURES.iterdir()))
def test_a_checkpoint_with_zero_dimensional_gains_loads_exactly(block_type):
    """`tests/fixtures/scalar_gains/<block>/` was saved by the code before the gains became `(1,)`
    (`make_scalar_gain_checkpoints.py`): `from_pretrained` and `load_state_dict` both read it, with the logits that
    code computed."""
    folder = FIXTURES / block_type
    saved = load_file(str(folder / "model.safetensors"))
    assert any(t.dim() == 0 for t in saved.values())  # the fixture really is of the old layout
    expected = load_file(str(folder / "expected.safetensors"))
    model = SimplifiedForCausalLM.from_pretrained(folder)
    assert all(p.dim() > 0 for p in model.parameters())
    with torch.no_grad():
        logits = model(input_ids=expected["input_ids"]).logits
    torch.testing.assert_close(logits, expected["logits"], atol=1e-6, rtol=0)
    fresh = SimplifiedForCausalLM(model.config).eval()
    fresh.load_state_dict(saved, strict=False)  # the lm_head is tied (absent from the file)
    with torch.no_grad():
        torch.testing.assert_close(fresh(input_ids=expected["input_ids"]).logits, expected["logits"], atol=1e-6, rtol=0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_fully_shard_on_two_processes_matches_one_process(tmp_path):
    """`torchrun --nproc_per_node 2` (gloo, CPU) runs tests/distributed/fsdp_check.py: for every block type, 3 AdamW
    steps sharded (fully_shard per block and the root, half the batch per rank) equal 3 steps of one process on the
    whole batch; the gathered full state dict saves and reloads with identical logits; RaPTr refuses a sharded
    model with one message."""
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or "torchrun"
    command = [
        torchrun,
        "--nproc_per_node",
        "2",
        "--master_addr",
        "127.0.0.1",
        "--master_port",
        str(_free_port()),
        str(ROOT / "tests" / "distributed" / "fsdp_check.py"),
        str(tmp_path),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    for block_type in BLOCK_TYPES:
        assert f"{block_type}: sharded == unsharded" in done.stdout, done.stdout
    assert "raptr: refused" in done.stdout
