"""AdamW parameter groups: weight decay on the matrices, never on gains, norms, biases or head scales."""

import pytest
import torch
from conftest import tiny_config

from modeling_simplified import SimplifiedForCausalLM, SimplifiedForMaskedLM, parameter_groups
from modeling_simplified.modeling_simplified import Gain, HeadScale, ReparamLinear

HEADS = {"causal": SimplifiedForCausalLM, "masked": SimplifiedForMaskedLM}


def _never_decayed(model: torch.nn.Module) -> set[int]:
    """ids of the parameters that are gains, norm weights/biases, biases or head scales (by module, not by shape)."""
    ids = set()
    for module in model.modules():
        if isinstance(module, (torch.nn.LayerNorm, torch.nn.RMSNorm, Gain, HeadScale)):
            ids.update(id(p) for p in module.parameters(recurse=False))
        if isinstance(module, ReparamLinear):
            ids.update((id(module.alpha), id(module.beta)))
        bias = getattr(module, "bias", None)
        if isinstance(bias, torch.nn.Parameter):
            ids.add(id(bias))
    return ids


def _unique_trainable(model: torch.nn.Module) -> dict[int, torch.nn.Parameter]:
    return {id(p): p for p in model.parameters() if p.requires_grad}


@pytest.mark.parametrize("head", HEADS)
def test_groups_hold_exactly_the_matrices(block_type, head):
    model = HEADS[head](
        tiny_config(
            block_type, attention_bias=True, mlp_bias=True, residual_scale=block_type in ("pre_ln", "normformer")
        )
    )
    decay, no_decay = parameter_groups(model, weight_decay=0.1)
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    decay_ids = [id(p) for p in decay["params"]]
    no_decay_ids = [id(p) for p in no_decay["params"]]
    trainable = _unique_trainable(model)
    # every trainable parameter appears in exactly one group, once; tied embeddings are one parameter
    assert sorted(decay_ids + no_decay_ids) == sorted(trainable)
    assert set(decay_ids) == {i for i, p in trainable.items() if p.dim() >= 2}
    never = _never_decayed(model)
    assert never and not never & set(decay_ids)
    assert never & set(trainable) <= set(no_decay_ids)
    names = {id(p): n for n, p in model.named_parameters(remove_duplicate=False)}
    assert id(model.get_input_embeddings().weight) in decay_ids
    assert all(names[i] != n for i in no_decay_ids for n in ("lm_head.weight", "mlm_head.decoder.weight"))


def test_tied_embeddings_once_untied_twice():
    tied = SimplifiedForCausalLM(tiny_config("sas"))
    untied = SimplifiedForCausalLM(tiny_config("sas", tie_word_embeddings=False))
    count = lambda m: sum(len(g["params"]) for g in parameter_groups(m, 0.1))  # noqa: E731
    assert tied.lm_head.weight is tied.model.embed_tokens.weight
    assert count(untied) == count(tied) + 1
    assert any(p is untied.lm_head.weight for p in parameter_groups(untied, 0.1)[0]["params"])


def test_frozen_parameters_are_left_out():
    model = SimplifiedForCausalLM(tiny_config("sas", shaped_gains_trainable=False, reparam_gains_trainable=False))
    frozen = {id(p) for p in model.parameters() if not p.requires_grad}
    assert frozen  # α, β, γ and αV, βV
    grouped = {id(p) for g in parameter_groups(model, 0.1) for p in g["params"]}
    assert not frozen & grouped


@pytest.mark.parametrize("block_type", ["sas", "normformer"])
def test_adamw_decays_only_matrices(block_type):
    """With zero gradients an AdamW step only applies decoupled weight decay: matrices shrink by (1 - lr·wd),
    everything else stays put."""
    model = SimplifiedForCausalLM(tiny_config(block_type))
    lr, wd = 0.5, 0.1
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    optimizer = torch.optim.AdamW(parameter_groups(model, wd), lr=lr)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    optimizer.step()
    for name, param in model.named_parameters():
        expected = before[name] * (1 - lr * wd) if param.dim() >= 2 else before[name]
        torch.testing.assert_close(param.detach(), expected, rtol=0, atol=1e-7, msg=name)
