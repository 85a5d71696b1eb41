"""Our CPU RMSNorm (`_RMSNormFunction`: one saved activation, fused reductions) computes exactly `nn.RMSNorm`."""

import pytest
import torch

from modeling_simplified.modeling_simplified import RMSNorm, _RMSNormFunction


@pytest.mark.parametrize("dtype, atol", [(torch.float64, 1e-12), (torch.float32, 1e-5), (torch.bfloat16, 2e-2)])
@pytest.mark.parametrize("eps", [1e-8, None])
def test_rmsnorm_equals_torch_rmsnorm(dtype, atol, eps):
    gen = torch.Generator().manual_seed(0)
    ours, reference = RMSNorm(32, eps=eps).to(dtype), torch.nn.RMSNorm(32, eps=eps).to(dtype)
    with torch.no_grad():
        ours.weight.copy_(torch.randn(32, generator=gen))
        reference.weight.copy_(ours.weight)
    assert ours.state_dict().keys() == reference.state_dict().keys()
    x = (3 * torch.randn(4, 5, 32, generator=gen)).to(dtype)
    grad = torch.randn(4, 5, 32, generator=gen).to(dtype)
    results = []
    for module in (ours, reference):
        inp = x.clone().requires_grad_()
        out = module(inp)
        out.backward(grad)
        results.append((out, inp.grad, module.weight.grad))
    for a, b in zip(*results):
        assert a.dtype == b.dtype == dtype
        torch.testing.assert_close(a.float(), b.float(), rtol=atol, atol=atol)


def test_rmsnorm_function_gradcheck():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 8, dtype=torch.float64, generator=gen, requires_grad=True)
    weight = torch.randn(8, dtype=torch.float64, generator=gen, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, w: _RMSNormFunction.apply(a, w, 1e-6), (x, weight))
    assert torch.autograd.gradcheck(lambda a: _RMSNormFunction.apply(a, None, 1e-6), (x,))
