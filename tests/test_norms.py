"""Our CPU RMSNorm (`_RMSNormFunction`: one saved activation, fused reductions) computes exactly `nn.RMSNorm`."""

import pytest
import torch

from modeling_simplified.kernels_simplified import _RMSNormFunction
from modeling_simplified.modeling_simplified import RMSNorm, RMSNormEpsOutside


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
    with torch.no_grad():  # without autograd (decoding) the same arithmetic, outside the autograd Function
        no_grad = ours(x)
    assert no_grad.dtype == dtype and not no_grad.requires_grad
    torch.testing.assert_close(no_grad, results[0][0].detach(), rtol=0, atol=0)


@pytest.mark.parametrize("affine", [True, False])
def test_rmsnorm_takes_the_autograd_function_whenever_a_gradient_is_needed(affine):
    """Frozen weight with an input that needs a gradient (a frozen model's norm under a trainable adapter), and a
    trainable weight with an input that does not (the first layer's norm of embeddings from a frozen table)."""
    gen = torch.Generator().manual_seed(1)
    ours, reference = RMSNorm(8, elementwise_affine=affine), torch.nn.RMSNorm(8, elementwise_affine=affine)
    x = torch.randn(3, 8, generator=gen)
    for module in (ours, reference):
        module.requires_grad_(False)
    inputs = [x.clone().requires_grad_() for _ in range(2)]
    for module, inp in zip((ours, reference), inputs):
        module(inp).square().sum().backward()
    torch.testing.assert_close(inputs[0].grad, inputs[1].grad)
    if affine:
        for module in (ours, reference):
            module.requires_grad_(True)
            module(x).square().sum().backward()
        torch.testing.assert_close(ours.weight.grad, reference.weight.grad)


def test_rmsnorm_function_gradcheck():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 8, dtype=torch.float64, generator=gen, requires_grad=True)
    weight = torch.randn(8, dtype=torch.float64, generator=gen, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, w: _RMSNormFunction.apply(a, w, 1e-6), (x, weight))
    assert torch.autograd.gradcheck(lambda a: _RMSNormFunction.apply(a, None, 1e-6), (x,))


def test_eps_outside_rmsnorm_computes_in_float32_and_rounds_once():
    """The authors' RMSNorm (eps outside the root) on bf16 weights and inputs: the float32 computation rounded once to
    bf16 (its mean of squares is not accumulated or rounded in bf16); float32 is the formula as written, bit for bit."""
    gen = torch.Generator().manual_seed(0)
    norm = RMSNormEpsOutside(32, eps=1e-8)
    with torch.no_grad():
        norm.weight.copy_(torch.rand(32, generator=gen) + 0.5)
    x = 3 * torch.randn(4, 5, 32, generator=gen)
    formula = lambda w, t: w * (t / (t.pow(2).mean(-1, keepdim=True).sqrt() + 1e-8))  # noqa: E731
    with torch.no_grad():
        assert torch.equal(norm(x), formula(norm.weight, x))
        x16, half = x.bfloat16(), norm.to(torch.bfloat16)
        out = half(x16)
        assert out.dtype == torch.bfloat16
        assert torch.equal(out, formula(half.weight.float(), x16.float()).bfloat16())
