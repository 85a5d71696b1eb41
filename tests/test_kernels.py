"""The kernels the model calls by name compute what the plain-torch op computes."""

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from modeling_simplified import kernels_simplified as kernels
from modeling_simplified.kernels_simplified import linear, one_row_16bit, rms_norm, running_sum


class OpRecorder(TorchDispatchMode):
    """The aten ops a call dispatches, by name."""

    def __init__(self):
        super().__init__()
        self.names: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.add(f"aten.{func.overloadpacket.__name__}")
        return func(*args, **(kwargs or {}))


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
    """Several rows, autograd, 16-bit weights, or a tensor subclass: `F.linear` itself, bit for bit."""
    torch.manual_seed(0)
    weight, bias = torch.randn(12, 8), torch.randn(12)
    rows = torch.randn(3, 8)
    with torch.no_grad():
        assert torch.equal(linear(rows, weight, bias), F.linear(rows, weight, bias))
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            x, w, b = (t.to(dtype) for t in (torch.randn(1, 64), torch.randn(96, 64), bias.repeat(8)))
            with OpRecorder() as ops:
                out = linear(x, w, b)
            assert ("aten.repeat" in ops.names) is (dtype == torch.float32)  # W·[x, x]ᵀ for float32 only
            if dtype != torch.float32:
                assert torch.equal(out, F.linear(x, w, b)) and torch.equal(linear(x, w), F.linear(x, w))
    one = torch.randn(1, 8, requires_grad=True)
    out = linear(one, weight, bias)
    assert torch.equal(out, F.linear(one, weight, bias))
    out.sum().backward()
    assert one.grad is not None


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("biased", [False, True])
def test_one_16bit_row_in_a_compiled_graph_is_a_float32_sum_rounded_once(monkeypatch, dtype, biased):
    """Traced, one row with 16-bit weights is `one_row_16bit`: the float32 dot products rounded once to the row's
    dtype, as a GEMM that accumulates in float32 would give them (so within one rounding of `F.linear`'s), in its
    shape; several rows, autograd or autocast keep `F.linear` even when traced."""
    monkeypatch.setattr(kernels, "is_torchdynamo_compiling", lambda: True)
    torch.manual_seed(0)
    x, weight = torch.randn(1, 1, 256).to(dtype), torch.randn(96, 256).to(dtype)
    bias = torch.randn(96).to(dtype) if biased else None
    with torch.no_grad():
        out = linear(x, weight, bias)
        exact = F.linear(*(t if t is None else t.double() for t in (x, weight, bias)))
        assert out.dtype == dtype and out.shape == (1, 1, 96)
        assert torch.equal(out, exact.float().to(dtype))  # float32 sums of 256 products: below one 16-bit rounding
        torch.testing.assert_close(out, F.linear(x, weight, bias), atol=0, rtol=2 * torch.finfo(dtype).eps)
        rows = torch.randn(2, 256).to(dtype)
        assert torch.equal(linear(rows, weight, bias), F.linear(rows, weight, bias))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            assert torch.equal(linear(x, weight, bias), F.linear(x, weight, bias))
    assert torch.equal(linear(x, weight, bias), F.linear(x, weight, bias))  # autograd on


@pytest.mark.slow  # compiles
def test_compiled_one_16bit_row_equals_the_traced_rule():
    """Compiled by inductor (the fused reduction), the same values as the rule computed eagerly."""
    torch.manual_seed(0)
    x, weight = torch.randn(1, 1, 256).to(torch.bfloat16), torch.randn(96, 256).to(torch.bfloat16)
    with torch.no_grad():
        compiled = torch.compile(linear, fullgraph=True)(x, weight)
        torch.testing.assert_close(compiled, one_row_16bit(x, weight), atol=0, rtol=torch.finfo(torch.bfloat16).eps)


# ----------------------------------------------------------------------------------------------------------------
# Under autocast each kernel keeps the dtypes its plain-torch op has there
# ----------------------------------------------------------------------------------------------------------------
def _autocast():
    return torch.autocast("cpu", dtype=torch.bfloat16)


@pytest.mark.parametrize("biased", [False, True])
def test_linear_one_row_under_autocast_is_f_linear(biased):
    """Decoding under autocast: the one-row rule steps aside, so the result is `F.linear`'s, bf16 and bias included."""
    torch.manual_seed(0)
    x, weight, bias = torch.randn(1, 8), torch.randn(12, 8), torch.randn(12) if biased else None
    with torch.no_grad(), _autocast():
        out, expected = linear(x, weight, bias), F.linear(x, weight, bias)
    assert out.dtype == expected.dtype == torch.bfloat16
    assert torch.equal(out, expected)


def test_running_sum_under_autocast_computes_in_its_input_dtype():
    """As `cumsum`, which autocast does not list: the blocked scan's matmuls are not rounded to bf16."""
    x = torch.randn(2, 70, 6, generator=torch.Generator().manual_seed(0)) * 10
    with _autocast():
        inside = running_sum(x)
    assert inside.dtype == torch.float32
    assert torch.equal(inside, running_sum(x))
    torch.testing.assert_close(inside, x.double().cumsum(1).float(), rtol=1e-6, atol=1e-5)


@pytest.mark.filterwarnings("ignore:Mismatch dtype between input and weight")  # (F.rms_norm's unfused path)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm_under_autocast_matches_f_rms_norm(dtype):
    """Forward and backward inside autocast: the dtypes of `F.rms_norm` there (CPU autocast lists neither), the
    same results as outside autocast, bit for bit."""
    gen = torch.Generator().manual_seed(0)
    x = (torch.randn(3, 5, 16, generator=gen) * 4).to(dtype)
    weight = torch.rand(16, generator=gen) + 0.5
    results = []
    for inside in (False, True):
        xi, wi = x.clone().requires_grad_(), weight.clone().requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=inside):
            out = rms_norm(xi, wi, 1e-6)
            expected = F.rms_norm(x, (16,), weight, 1e-6)
            out.backward(torch.ones_like(out))
        assert out.dtype == expected.dtype == dtype
        results.append((out, xi.grad, wi.grad))
    for outside, inside in zip(*results):
        assert torch.equal(inside, outside)
