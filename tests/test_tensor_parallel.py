"""Tensor parallelism (`from_pretrained(..., tp_plan="auto")`, docs/tensor_parallel.md).

Fast: the fused projections split by their local widths exactly as unsharded, the plan names only modules that
exist and styles that are registered, and what cannot be sharded is refused with one `ValueError`. Slow: a
2-process `torchrun` (gloo, CPU) run of tests/distributed/tp_check.py loads saved models with `tp_plan="auto"`; the
logits (atol 1e-5) and greedy tokens (identical) equal one unsharded process's, and the parameters are sharded.
A native `LlamaForCausalLM` goes through the same harness first, as its own check.
"""

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import perturb_, tiny_config

from modeling_simplified import BLOCK_TYPES, SimplifiedForCausalLM, SimplifiedForMaskedLM
from modeling_simplified.modeling_simplified import FusedQKV, QKWithValue, _split_parts
from modeling_simplified.tensor_parallel_simplified import ALL_PARALLEL_STYLES, check_tensor_parallel

ROOT = Path(__file__).resolve().parents[1]
TP = 2
#: logits of the sharded run against one process: only the order of float32 sums differs (all-reduces)
ATOL = 1e-5


def _rank_rows(weight: torch.Tensor, parts: int, rank: int, size: int = TP) -> torch.Tensor:
    """Rank `rank`'s rows of a fused weight under `PackedPartsColwise`: its slice of every part, in order."""
    return torch.cat([part.chunk(size)[rank] for part in weight.chunk(parts)])


@pytest.mark.parametrize("block_type", ["pre_ln", "sas"])
def test_fused_projection_splits_by_local_widths(block_type):
    """The local rows of [W^Q; W^K(; W^V)] give, through the module's own split, each rank's heads of q, k (and v):
    the unsharded result's slices; unsharded (any widths, grouped-query ones too) it is the plain split."""
    config = tiny_config(block_type)
    qkv = (FusedQKV(config) if block_type == "pre_ln" else QKWithValue(config, "identity", 1)).eval()
    perturb_(qkv)
    x = torch.randn(2, 5, config.hidden_size)
    with torch.no_grad():
        full = qkv(x)
        parts = len(qkv.split)
        for rank in range(TP):
            local = torch.nn.functional.linear(x, _rank_rows(qkv.proj.weight, parts, rank), None)
            for got, whole in zip(_split_parts(local, qkv.split), full[:parts]):
                torch.testing.assert_close(got, whole.chunk(TP, dim=-1)[rank], atol=0, rtol=0)
    fused = torch.randn(3, 32 + 2 * 16)
    for got, expected in zip(_split_parts(fused, (32, 16, 16)), fused.split((32, 16, 16), dim=-1)):
        assert torch.equal(got, expected)


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        dict(hidden_act="swiglu", attention_bias=True, mlp_bias=True, qk_norm="rmsnorm"),
        dict(frozen_biases=True, attention_bias=True),
    ],
)
def test_plan_names_existing_modules_and_registered_styles(block_type, overrides):
    """Every rule of `base_model_tp_plan` (and the heads' `_tp_plan`) matches a module of the model, and every style
    is registered: transformers would warn about the rest, or refuse the style."""
    import re

    model = SimplifiedForCausalLM(tiny_config(block_type, **overrides))
    names = {re.sub(r"\.\d+(\.|$)", r".*\1", n) for n, _ in model.named_modules()}
    assert set(model.tp_plan) <= names, set(model.tp_plan) - names
    assert all(style in ALL_PARALLEL_STYLES for style in model.tp_plan.values())
    assert model.tp_plan["lm_head"] == "colwise_gather_output"


@pytest.mark.parametrize(
    "overrides, field",
    [
        (dict(num_key_value_heads=2), "num_key_value_heads=2"),
        (dict(num_attention_heads=1, hidden_size=32), "num_attention_heads=1"),
        (dict(intermediate_size=63), "intermediate_size=63"),
        (dict(hidden_act="swiglu", mlp_act_norm=True), "mlp_act_norm=True"),
    ],
)
def test_unshardable_configs_are_refused_with_one_message(overrides, field):
    """`check_tensor_parallel` (run by `from_pretrained` under tensor parallelism, before any weight is read)
    raises one ValueError naming the field, the block type and what can be sharded; the model's own plan resolution
    raises the same."""
    from transformers.distributed import DistributedConfig

    config = tiny_config("pre_ln", **overrides)
    with pytest.raises(ValueError, match=rf"tp_size=2 .*block_type='pre_ln'.*{re.escape(field)}.*It shards every"):
        check_tensor_parallel(config, 2)
    check_tensor_parallel(config, 1)  # one rank: nothing to shard
    model = SimplifiedForCausalLM(config)
    with pytest.raises(ValueError, match=re.escape(field)):
        model._resolve_parallel_plans(DistributedConfig(tp_size=2))


#: saved models the 2-process run loads: (class, block type, overrides) of the family; vocab 97 does not divide by 2
CASES = {
    **{block: (SimplifiedForCausalLM, block, {}) for block in BLOCK_TYPES},
    # gated MLP ([gate; up] packed), biases on every matrix (packed biases sharded per part), rotary, QK norm
    "pre_ln-swiglu-bias-rotary-qknorm": (
        SimplifiedForCausalLM,
        "pre_ln",
        dict(
            hidden_act="swiglu", attention_bias=True, mlp_bias=True, position_embedding_type="rotary", qk_norm="rmsnorm"
        ),
    ),
    # eq. 6 W^V and W^P in every block (replicated), gains shared by the heads, a padded vocabulary
    "sas-reparam-shared-gains": (
        SimplifiedForCausalLM,
        "sas",
        dict(value_mode="reparam", projection_mode="reparam", shaped_gains_per_head=False, pad_vocab_size_multiple=8),
    ),
    # NormFormer's head scale after W^O; a learned W^V beside [W^Q; W^K] (frozen biases)
    "normformer-after-proj-frozen-biases": (
        SimplifiedForCausalLM,
        "normformer",
        dict(head_scale="after_proj", frozen_biases=True, attention_bias=True),
    ),
    "sas_p-masked": (SimplifiedForMaskedLM, "sas_p", {}),
    "refused-gqa": (SimplifiedForCausalLM, "pre_ln", dict(num_key_value_heads=2)),
}
QKV, WO = "attn.qkv.proj.weight", "attn.o_proj.weight"
GAINS = tuple(f"attn.mixing.{g}.weight" for g in ("alpha", "beta", "gamma"))
#: parameters of which every layer must hold a half on each rank (besides the MLP's and the token embedding)
SHARDED = {
    "pre_ln": (QKV, WO),
    "post_ln": (QKV, WO),
    "parallel": (QKV, WO),
    "value_skipinit": (QKV, WO, *GAINS[:2]),
    "sas": (QKV, *GAINS),
    "sas_p": (QKV, *GAINS),
    "simplest": (QKV, *GAINS),
    "normformer": (QKV, WO, "attn.head_scale.weight"),
    "pre_ln-swiglu-bias-rotary-qknorm": (QKV, "attn.qkv.proj.bias", WO, "mlp.fc_in.bias"),
    "sas-reparam-shared-gains": (QKV,),
    "normformer-after-proj-frozen-biases": (QKV, "attn.qkv.value.weight", "attn.qkv.value.bias", WO),
    "sas_p-masked": (QKV, *GAINS),
}
#: replicated: the norms, eq. 6 matrices, gains shared by the heads, NormFormer's head scale after W^O
REPLICATED = ("norm.weight", ".delta", ".alpha", ".beta", "attn_gain", "mlp_gain", "embed_positions")
SHARDED_ALWAYS = ("mlp.fc_in.weight", "mlp.fc_out.weight")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _save_llama(folder: Path) -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=97,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=64,
        tie_word_embeddings=True,
    )
    LlamaForCausalLM(config).save_pretrained(folder)


def _single_process(folder: Path) -> dict:
    """What tp_check.py computes, in this (unsharded) process."""
    sys.path.insert(0, str(ROOT / "tests" / "distributed"))
    try:
        from tp_check import run
    finally:
        sys.path.pop(0)
    return run(folder, None)


@pytest.mark.slow
def test_tensor_parallel_on_two_processes_matches_one_process(tmp_path):
    """`torchrun --nproc_per_node 2` (gloo, CPU) loads every case with `tp_plan="auto"`: same logits (atol 1e-5) and
    greedy tokens as one process; the attention and MLP matrices, per-head gains and the embedding are halved on each
    rank (the norms and eq. 6 matrices replicated); grouped-query attention is refused with the one message."""
    folders = [tmp_path / "llama"]
    _save_llama(folders[0])
    for name, (cls, block_type, overrides) in CASES.items():
        model = perturb_(cls(tiny_config(block_type, **overrides)), seed=len(name))
        model.save_pretrained(tmp_path / name)
        folders.append(tmp_path / name)
    for folder in folders:
        torch.save(torch.randint(0, 96, (2, 7), generator=torch.Generator().manual_seed(3)), folder / "probe.pt")
    out = tmp_path / "out"
    out.mkdir()
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or "torchrun"
    command = [torchrun, "--nproc_per_node", str(TP), "--master_addr", "127.0.0.1", "--master_port", str(_free_port())]
    command += [str(ROOT / "tests" / "distributed" / "tp_check.py"), str(out), *map(str, folders)]
    start = time.perf_counter()
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=900, env={**os.environ, "OMP_NUM_THREADS": "1"}, cwd=ROOT
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    print(f"torchrun: {time.perf_counter() - start:.1f} s for {len(folders)} models")

    refused = torch.load(out / "refused-gqa.pt")
    assert refused["error_type"] == "ValueError", refused
    assert "num_key_value_heads=2 differs from num_attention_heads=4" in refused["error"]
    for folder in folders:
        if folder.name.startswith("refused-"):
            continue
        sharded, single = torch.load(out / f"{folder.name}.pt", weights_only=False), _single_process(folder)
        torch.testing.assert_close(sharded["logits"], single["logits"], atol=ATOL, rtol=0, msg=folder.name)
        if single["tokens"] is not None:
            assert torch.equal(sharded["tokens"], single["tokens"]), folder.name
        shapes = sharded["shapes"]
        halved = {n for n, (full, local) in shapes.items() if local != full}
        for n in halved:  # rank 0 holds the first ceil(1/TP) of one dimension, the other dimensions whole
            changed = [(f, loc) for f, loc in zip(*shapes[n]) if f != loc]
            assert len(changed) == 1 and changed[0][1] == -(-changed[0][0] // TP), (n, shapes[n])
        if folder.name == "llama":
            assert "model.layers.0.self_attn.q_proj.weight" in halved and "model.embed_tokens.weight" in halved
            continue
        for layer in range(2):
            for suffix in (*SHARDED[folder.name], *SHARDED_ALWAYS):
                assert f"model.layers.{layer}.{suffix}" in halved, (folder.name, suffix, sorted(halved))
        assert "model.embed_tokens.weight" in halved
        replicated = [n for n in shapes if any(part in n for part in REPLICATED) and ".mixing." not in n]
        assert replicated and not set(replicated) & halved, (folder.name, set(replicated) & halved)
        if "shared-gains" in folder.name or "after-proj" in folder.name:
            assert not {n for n in halved if ".mixing." in n or "head_scale" in n}, folder.name


@pytest.mark.slow  # torchrun with 2 processes: about 20 s on 2 cores
def test_the_example_shards_an_export_and_matches_one_process(tmp_path, bpe_tokenizer):
    """`torchrun --nproc_per_node 2 examples/tensor_parallel.py EXPORT`, as docs/tensor_parallel.md gives it, on a
    folder of `simplified-export` (its own code, loaded with `trust_remote_code=True`): each rank holds a share of the weights, and the sharded logits and greedy tokens equal one whole
    process's; a model that cannot be sharded fails with the one message."""
    from modeling_simplified.hub_cards.export import export_model

    good = perturb_(SimplifiedForCausalLM(tiny_config("sas_p", vocab_size=len(bpe_tokenizer))))
    export_model(good, tmp_path / "export", tokenizer=bpe_tokenizer)
    gqa = SimplifiedForCausalLM(tiny_config("pre_ln", vocab_size=len(bpe_tokenizer), num_key_value_heads=2))
    export_model(gqa, tmp_path / "gqa", tokenizer=bpe_tokenizer)

    def example(folder):
        torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or "torchrun"
        command = [torchrun, "--nproc_per_node", str(TP), "--master_addr", "127.0.0.1"]
        command += ["--master_port", str(_free_port()), "examples/tensor_parallel.py", str(folder)]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        return subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)

    done = example(tmp_path / "export")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    held = sorted(re.findall(r"rank (\d)/2: holds (\d+)% of the parameters' elements", done.stdout))
    assert [rank for rank, _ in held] == ["0", "1"] and all(50 <= int(share) < 80 for _, share in held), held
    error = re.search(
        r"max \|sharded - whole\| logit: (\S+) \(atol 1e-05\); greedy tokens identical: True", done.stdout
    )
    assert error and float(error.group(1)) <= ATOL, done.stdout
    assert "rank 0 loaded transformers_modules." in done.stdout  # the folder's code, not this checkout's

    refused = example(tmp_path / "gqa")
    assert refused.returncode != 0
    assert "num_key_value_heads=2 differs from num_attention_heads=4" in refused.stderr
