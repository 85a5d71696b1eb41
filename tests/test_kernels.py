"""The kernels the model calls by name compute what the plain-torch op computes."""

import pytest
import torch
import torch.nn.functional as F

from modeling_simplified.kernels_simplified import linear


@pytest.mark.parametrize("shape", [(1, 8), (1, 1, 8), (8,)])
@pytest.mark.parametrize("biased", [False, True])
def test_linear_one_row_equals_f_linear(shape, biased):
    torch.manual_seed(0)
    x, weight = torch.randn(shape), torch.randn(12, 8)
    bias = torch.randn(12) if biased else None
    with torch.no_grad():
        out = linear(x, weight, bias)
    expected = F.linear(x, weight, bias)
    assert out.shape == expected.shape
    assert out.is_contiguous()  # a strided column would send attention kernels to their slow path
    torch.testing.assert_close(out, expected)


def test_linear_takes_f_linear_where_the_rule_does_not_apply():
    """Several rows, autograd, or a tensor subclass: `F.linear` itself, bit for bit."""
    torch.manual_seed(0)
    weight, bias = torch.randn(12, 8), torch.randn(12)
    rows = torch.randn(3, 8)
    with torch.no_grad():
        assert torch.equal(linear(rows, weight, bias), F.linear(rows, weight, bias))
    one = torch.randn(1, 8, requires_grad=True)
    out = linear(one, weight, bias)
    assert torch.equal(out, F.linear(one, weight, bias))
    out.sum().backward()
    assert one.grad is not None
