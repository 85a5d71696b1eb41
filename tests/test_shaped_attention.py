"""Shaped attention (paper eq. 5): identity at initialisation, and the fused path against a T×T reference."""

import pytest
import torch
from conftest import TINY, perturb_, tiny_config
from transformers.masking_utils import create_bidirectional_mask, create_causal_mask

import modeling_simplified.modeling_simplified as modeling
from modeling_simplified import SimplifiedModel
from modeling_simplified.compat_simplified import CACHE_FIELD
from modeling_simplified.kernels_simplified import _ShapedCombination
from modeling_simplified.modeling_simplified import RunningMean

SHAPED = ("value_skipinit", "sas", "sas_p", "simplest")
PADDINGS = ("none", "left", "right")
SEQ_LEN = 7


def _padding_mask(padding: str, batch: int = 3) -> torch.Tensor | None:
    """`(B, T)` mask, 1 = real token; rows 1 and 2 are padded on the given side (by 2 and 4 tokens)."""
    if padding == "none":
        return None
    mask = torch.ones(batch, SEQ_LEN, dtype=torch.long)
    for row, n_pad in ((1, 2), (2, 4)):
        if padding == "left":
            mask[row, :n_pad] = 0
        else:
            mask[row, SEQ_LEN - n_pad :] = 0
    return mask


def _attention_mask(model: SimplifiedModel, x: torch.Tensor, mask_2d: torch.Tensor | None):
    """The mask SimplifiedModel.forward would build for the current attention implementation."""
    if model.config.is_causal:  # (no position_ids: the model passes none to the mask)
        return create_causal_mask(config=model.config, inputs_embeds=x, attention_mask=mask_2d, **{CACHE_FIELD: None})
    return create_bidirectional_mask(config=model.config, inputs_embeds=x, attention_mask=mask_2d)


CENTRES = ("running_mean", "attention")


def _centre(centre: str, mask_2d: torch.Tensor | None) -> dict:
    """The attention's `running_mean` argument: C·X as the model's running mean, or (None) the zero-query call."""
    return {"running_mean": RunningMean(mask_2d) if centre == "running_mean" else None}


def _real(mask_2d: torch.Tensor | None, x: torch.Tensor) -> torch.Tensor:
    return torch.ones(x.shape[:2], dtype=torch.bool) if mask_2d is None else mask_2d.bool()


def _capture_mixing(attn):
    """Record the per-head output of the mixing `(α I + β A − γ C) X` and its input values X."""
    seen = {}

    def hook(module, args, kwargs, output):
        seen["values"] = kwargs["current_values"].transpose(1, 2)  # current values (B, H, T, D) -> (B, T, H, D)
        seen["mixed"] = output[0]  # (B, T, H, D)

    return seen, attn.mixing.register_forward_hook(hook, with_kwargs=True)


@pytest.mark.parametrize("centre", CENTRES)
@pytest.mark.parametrize("attn_implementation", ["sdpa", "eager"])
@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "bidirectional"])
@pytest.mark.parametrize("block_type", SHAPED)
def test_identity_at_init(block_type, causal, padding, attn_implementation, centre):
    """W^Q = 0 and β = γ make every shaped attention sub-block exactly the identity on each head."""
    model = SimplifiedModel(tiny_config(block_type, is_causal=causal, num_hidden_layers=3)).eval()
    model.set_attn_implementation(attn_implementation)
    mask_2d = _padding_mask(padding)
    gen = torch.Generator().manual_seed(0)
    for layer in model.layers:
        attn = layer.attn
        x = torch.randn(3, SEQ_LEN, TINY["hidden_size"], generator=gen)
        real = _real(mask_2d, x)
        seen, handle = _capture_mixing(attn)
        with torch.no_grad():
            out, _ = attn(x, attention_mask=_attention_mask(model, x, mask_2d), **_centre(centre, mask_2d))
        handle.remove()
        assert (seen["mixed"][real] - seen["values"][real]).abs().max() <= 1e-6
        if block_type != "value_skipinit":  # identity values and projections: the whole sub-block is the identity
            assert (out[real] - x[real]).abs().max() <= 1e-6


def reference_matrix(attn, x: torch.Tensor, mask_2d: torch.Tensor | None, causal: bool) -> torch.Tensor:
    """`α I + β A − γ C` per head, `(B, H, T, T)`, from the module's weights with nothing fused."""
    batch, seq_len, d = x.shape
    heads, head_dim = attn.num_heads, d // attn.num_heads
    split = lambda t: t.view(batch, seq_len, heads, head_dim).transpose(1, 2)  # noqa: E731
    w = attn.qkv.proj.weight
    q, k = split(x @ w[:d].T), split(x @ w[d : 2 * d].T)
    allowed = _real(mask_2d, x)[:, None, None, :].expand(batch, 1, seq_len, seq_len)
    if causal:
        allowed = allowed & torch.ones(seq_len, seq_len, dtype=torch.bool).tril()
    logits = (q @ k.transpose(-1, -2)) / head_dim**0.5
    a = logits.masked_fill(~allowed, float("-inf")).softmax(-1).nan_to_num(0.0)
    c = allowed.float() / allowed.float().sum(-1, keepdim=True).clamp(min=1)
    mixing = attn.mixing
    gain = lambda g: g.weight.expand(heads)[None, :, None, None]  # noqa: E731
    gamma = gain(mixing.gamma) if mixing.gamma is not None else 0.0
    return gain(mixing.alpha) * torch.eye(seq_len) + gain(mixing.beta) * a - gamma * c


def reference_attention(attn, x, mask_2d, causal) -> tuple[torch.Tensor, torch.Tensor]:
    """The sub-block output `W^P · (M_h · X_h W^V_h)_h` and the matrix `M`."""
    batch, seq_len, d = x.shape
    heads = attn.num_heads
    matrix = reference_matrix(attn, x, mask_2d, causal)
    values = attn.qkv(x)[2].view(batch, seq_len, heads, d // heads).transpose(1, 2)
    mixed = (matrix @ values).transpose(1, 2).reshape(batch, seq_len, d)
    return attn.o_proj(mixed), matrix


def _perturbed_model(block_type: str, causal: bool, seed: int = 0) -> SimplifiedModel:
    """Large enough weights that A is far from uniform; random per-head α, β, γ."""
    torch.manual_seed(seed)
    model = perturb_(SimplifiedModel(tiny_config(block_type, is_causal=causal)), scale=0.3, seed=seed).eval()
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for layer in model.layers:
            for gain in (layer.attn.mixing.alpha, layer.attn.mixing.beta, layer.attn.mixing.gamma):
                if gain is not None:
                    gain.weight.copy_(torch.rand(gain.weight.shape, generator=gen) * 1.5 + 0.25)
    return model


@pytest.mark.parametrize("centre", CENTRES)
@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "bidirectional"])
@pytest.mark.parametrize("block_type", SHAPED)
def test_sdpa_matches_reference(block_type, causal, padding, centre):
    """The running mean and the zero-query attention call both give eq. 5's `α I + β A − γ C` exactly."""
    model = _perturbed_model(block_type, causal)
    assert model.config._attn_implementation == "sdpa"
    mask_2d = _padding_mask(padding)
    gen = torch.Generator().manual_seed(2)
    for layer in model.layers:
        x = torch.randn(3, SEQ_LEN, TINY["hidden_size"], generator=gen)
        real = _real(mask_2d, x)
        with torch.no_grad():
            out, _ = layer.attn(x, attention_mask=_attention_mask(model, x, mask_2d), **_centre(centre, mask_2d))
            expected, matrix = reference_attention(layer.attn, x, mask_2d, causal)
        # the reference is not degenerate: attention is far from uniform and from the identity
        assert (matrix - torch.eye(SEQ_LEN)).abs().amax() > 0.1
        assert (out[real] - expected[real]).abs().max() <= 1e-5


@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "bidirectional"])
@pytest.mark.parametrize("block_type", SHAPED)
def test_eager_output_attentions_is_effective_matrix(block_type, causal, padding):
    """`output_attentions=True` under eager attention returns `α I + β A − γ C`, and eager equals sdpa."""
    model = _perturbed_model(block_type, causal)
    mask_2d = _padding_mask(padding)
    ids = torch.randint(0, TINY["vocab_size"], (3, SEQ_LEN), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        sdpa_out = model(input_ids=ids, attention_mask=mask_2d).last_hidden_state
    model.set_attn_implementation("eager")
    inputs, handles = [], []
    for layer in model.layers:
        handles.append(
            layer.attn.register_forward_pre_hook(lambda m, args, kw: inputs.append(args[0]), with_kwargs=True)
        )
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask_2d, output_attentions=True)
    for h in handles:
        h.remove()
    real = _real(mask_2d, ids)
    assert len(out.attentions) == len(model.layers) == len(inputs)
    for layer, x, weights in zip(model.layers, inputs, out.attentions):
        assert weights.shape == (3, model.config.num_attention_heads, SEQ_LEN, SEQ_LEN)
        with torch.no_grad():
            expected = reference_matrix(layer.attn, x, mask_2d, causal)
        diff = (weights - expected).abs().amax(dim=(1, 3))  # (B, Tq)
        assert diff[real].max() <= 1e-5
    assert (out.last_hidden_state[real] - sdpa_out[real]).abs().max() <= 1e-5


def test_softmax_attention_unchanged_by_shaping_code():
    """Pre-LN attention is plain softmax attention: β = 1, α = γ = 0 in the same reference."""
    torch.manual_seed(0)
    model = perturb_(SimplifiedModel(tiny_config("pre_ln", is_causal=True)), scale=0.3).eval()
    mask_2d = _padding_mask("left")
    x = torch.randn(3, SEQ_LEN, TINY["hidden_size"])
    attn = model.layers[0].attn
    batch, seq_len, d = x.shape
    w = attn.qkv.proj.weight
    split = lambda t: t.view(batch, seq_len, attn.num_heads, -1).transpose(1, 2)  # noqa: E731
    q, k, v = split(x @ w[:d].T), split(x @ w[d : 2 * d].T), split(x @ w[2 * d :].T)
    allowed = mask_2d.bool()[:, None, None, :] & torch.ones(seq_len, seq_len, dtype=torch.bool).tril()
    a = ((q @ k.transpose(-1, -2)) * attn.scaling).masked_fill(~allowed, float("-inf")).softmax(-1).nan_to_num(0.0)
    expected = attn.o_proj((a @ v).transpose(1, 2).reshape(batch, seq_len, d))
    with torch.no_grad():
        out, _ = attn(x, attention_mask=_attention_mask(model, x, mask_2d), running_mean=RunningMean(mask_2d))
    real = mask_2d.bool()
    assert (out[real] - expected[real]).abs().max() <= 1e-5


@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "bidirectional"])
@pytest.mark.parametrize("block_type", SHAPED)
def test_sdpa_gradients_match_eager_matrix(block_type, causal, padding):
    """Training gradients of the fused mixing (sdpa, running mean, `_ShapedCombination`) equal those through eager
    attention's `(B, H, T, T)` matrix `α I + β A − γ C` for every parameter, the gains α, β, γ included."""
    mask_2d = _padding_mask(padding)
    ids = torch.randint(0, TINY["vocab_size"], (3, SEQ_LEN), generator=torch.Generator().manual_seed(5))
    weights = torch.randn(3, SEQ_LEN, TINY["hidden_size"], generator=torch.Generator().manual_seed(6))
    real = _real(mask_2d, ids)
    grads = {}
    for implementation in ("sdpa", "eager"):
        model = _perturbed_model(block_type, causal)
        model.set_attn_implementation(implementation)
        out = model(input_ids=ids, attention_mask=mask_2d).last_hidden_state
        (out * weights)[real].sum().backward()
        grads[implementation] = {n: p.grad for n, p in model.named_parameters() if p.requires_grad}
    gains = [n for n in grads["sdpa"] if ".mixing." in n]
    assert gains and all(grads["sdpa"][n] is not None and grads["sdpa"][n].abs().sum() > 0 for n in gains)
    assert grads["sdpa"].keys() == grads["eager"].keys()
    for name, grad in grads["sdpa"].items():
        assert (grad - grads["eager"][name]).abs().max() <= 1e-4 * (1 + grad.abs().max()), name


@pytest.mark.parametrize("centring", ["per_token", "shared", "none"])
@pytest.mark.parametrize("gain_shape", [(4, 1), (1, 1)], ids=["per_head", "shared_gain"])
def test_shaped_combination_gradcheck(centring, gain_shape):
    """`_ShapedCombination`'s hand-written backward against finite differences (float64): per-head and shared
    gains, a per-token `C·X`, one shared by the queries (bidirectional, `(B, 1, H, D)`), and none (Value-SkipInit)."""
    gen = torch.Generator().manual_seed(0)
    rand = lambda *shape: torch.randn(*shape, generator=gen, dtype=torch.float64).requires_grad_()  # noqa: E731
    values, attended = rand(2, 3, 4, 5), rand(2, 3, 4, 5)
    centred = {"per_token": rand(2, 3, 4, 5), "shared": rand(2, 1, 4, 5), "none": None}[centring]
    gains = [rand(*gain_shape) for _ in range(3)]
    gamma = None if centred is None else gains[2]
    assert torch.autograd.gradcheck(_ShapedCombination.apply, (values, attended, centred, gains[0], gains[1], gamma))


def test_shaped_combination_keeps_each_input_dtype():
    """bf16 activations with float32 gains (autocast's mixed precision): the output promotes like eager's `addcmul`,
    and each gradient comes back in its input's dtype."""
    terms = [torch.randn(2, 3, 4, 5, dtype=torch.bfloat16, requires_grad=True) for _ in range(3)]
    gains = [torch.rand(4, 1, requires_grad=True) for _ in range(3)]
    out = _ShapedCombination.apply(*terms, *gains)
    expected = gains[0] * terms[0] + gains[1] * terms[1] - gains[2] * terms[2]
    assert out.dtype == expected.dtype == torch.float32
    assert torch.allclose(out, expected)
    out.sum().backward()
    assert [t.grad.dtype for t in terms] == [torch.bfloat16] * 3
    assert [g.grad.dtype for g in gains] == [torch.float32] * 3


@pytest.mark.parametrize("trainable_gains", [True, False], ids=["trainable", "frozen"])
def test_shaped_combination_saves_only_what_its_backward_reads(trainable_gains):
    """Frozen gains (`shaped_gains_trainable=False`) keep no activation for the backward: a term is saved only for its
    gain's gradient, a gain only for its term's."""
    terms = [torch.randn(2, 3, 4, 5, requires_grad=True) for _ in range(3)]
    gains = [torch.rand(4, 1, requires_grad=trainable_gains) for _ in range(3)]
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(tuple(t.shape)) or t, lambda t: t):
        out = _ShapedCombination.apply(*terms, *gains)
    assert saved.count((2, 3, 4, 5)) == (3 if trainable_gains else 0)
    assert saved.count((4, 1)) == 3
    out.sum().backward()
    expected = [torch.ones(2, 3, 4, 5) * g * sign for g, sign in zip(gains, (1, 1, -1))]
    for term, grad in zip(terms, expected):
        torch.testing.assert_close(term.grad, grad.detach())


def test_shaped_combination_per_sample_gradients_with_vmap():
    """`torch.func.vmap(torch.func.grad(...))` (per-sample gradients of the gains) through the function equals the
    composite `α·X + β·A − γ·C`."""
    gen = torch.Generator().manual_seed(3)
    terms = [torch.randn(6, 1, 3, 4, 5, generator=gen) for _ in range(3)]  # 6 samples of batch 1
    gains = tuple(torch.rand(4, 1, generator=gen) for _ in range(3))
    weight = torch.randn(1, 3, 4, 5, generator=gen)

    def per_sample_gradients(fn):
        loss = lambda g, v, a, c: (fn(v, a, c, *g) * weight).sum()  # noqa: E731
        return torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0, 0))(gains, *terms)

    composite = lambda v, a, c, al, be, ga: al * v + be * a - ga * c  # noqa: E731
    per_sample = [per_sample_gradients(fn) for fn in (_ShapedCombination.apply, composite)]
    for ours, reference in zip(*per_sample):
        assert ours.shape == (6, 4, 1)
        torch.testing.assert_close(ours, reference)


# ----------------------------------------------------------------------------------------------------------------
# bf16: the identity at init, exactly
# ----------------------------------------------------------------------------------------------------------------
PRECISIONS = ("autocast", "bf16_weights")


def _bf16_mixing_at_init(block_type, causal, padding, attn_implementation, precision, training=False):
    """Every layer's mixing input X and output, `(B, T, H, D)`, of a model at init run in `precision`, on the real
    tokens; `padding` "packed" gives one row of three sequences (positions restarting, no mask). `training`: a
    training forward (gradients recorded), else an inference one."""
    torch.manual_seed(0)
    config = tiny_config(block_type, is_causal=causal, hidden_size=128, num_hidden_layers=2)
    model = SimplifiedModel(config).train(training)
    model.set_attn_implementation(attn_implementation)
    if precision == "bf16_weights":
        model = model.to(torch.bfloat16)
    ids = torch.randint(0, TINY["vocab_size"], (3, SEQ_LEN), generator=torch.Generator().manual_seed(1))
    inputs = {"input_ids": ids, "attention_mask": _padding_mask(padding) if padding != "packed" else None}
    if padding == "packed":
        inputs = {"input_ids": ids[:1], "position_ids": torch.tensor([[0, 1, 0, 1, 2, 0, 1]])}
    seen = []
    handles = [layer.attn.mixing.register_forward_hook(_recorder(seen), with_kwargs=True) for layer in model.layers]
    with torch.set_grad_enabled(training), torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "autocast"):
        model(**inputs)
    for handle in handles:
        handle.remove()
    real = _real(inputs.get("attention_mask"), inputs["input_ids"])
    return [(values[real].detach(), mixed[real].detach()) for values, mixed in seen]


def _recorder(seen: list):
    def hook(module, args, kwargs, output):
        seen.append((kwargs["current_values"].transpose(1, 2), output[0]))

    return hook


@pytest.mark.parametrize(("precision", "training"), [("autocast", False), ("autocast", True), ("bf16_weights", False)])
@pytest.mark.parametrize("padding", (*PADDINGS, "packed"))
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "bidirectional"])
@pytest.mark.parametrize("block_type", SHAPED)
def test_identity_at_init_in_bf16_is_exact(block_type, causal, padding, precision, training):
    """bf16 autocast (the Trainer's `bf16=True`, in training and in inference) and bf16 weights, sdpa: at init
    (W^Q = 0, β = γ) every shaped attention sub-block returns its input X bit for bit. `A·X` and `C·X` come from the
    same attention kernel in the same dtype (so they are equal where A = C), and eq. 5 forms `β·AX − γ·CX` first
    (exactly 0), then adds `α·X`. (The running mean, in float32, and sdpa, in bf16, used to differ by up to 0.0625
    here.)"""
    if padding == "packed" and not causal:
        pytest.skip("packed rows are a causal-LM layout")
    seen = _bf16_mixing_at_init(block_type, causal, padding, "sdpa", precision, training)
    assert len(seen) == 2
    for values, mixed in seen:
        expected_dtype = (
            torch.bfloat16 if precision == "bf16_weights" else torch.promote_types(values.dtype, torch.float32)
        )
        assert mixed.dtype == expected_dtype
        assert torch.equal(mixed, values.to(mixed.dtype))


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("block_type", SHAPED)
def test_eager_identity_at_init_in_bf16(block_type, padding, precision):
    """Eager attention's effective matrix `α·I + (β·A − γ·C)` is exactly `I` at init in bf16, so bf16 weights give X
    bit for bit. Under autocast eager's product of that matrix with X is a bf16 matmul (autocast lists `matmul`): the
    output is X rounded once to bf16, exactly, and nothing more."""
    for values, mixed in _bf16_mixing_at_init(block_type, True, padding, "eager", precision):
        assert torch.equal(mixed.to(values.dtype), values.to(torch.bfloat16).to(values.dtype))
        if precision == "bf16_weights":
            assert torch.equal(mixed, values)


@pytest.mark.parametrize("kv_heads", [4, 2], ids=["mha", "gqa"])
@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "bidirectional"])
def test_kernel_centring_gradient_is_the_kernels(monkeypatch, causal, padding, kv_heads):
    """In training, the kernel's `C·X` (16 bits) is differentiated by `RunningMean.adjoint` (`_KernelCentre`), not by
    the kernel's backward: every parameter's gradient equals the kernel's own, in float64 (the kernel path forced),
    for causal and bidirectional models, padded rows and grouped-query heads. Queries are drawn non-zero (A ≠ C)."""
    monkeypatch.setattr(modeling, "_attends_in_full_precision", lambda query: False)
    ids = torch.randint(0, TINY["vocab_size"], (3, SEQ_LEN), generator=torch.Generator().manual_seed(1))

    def gradients(own_kernels: frozenset) -> dict:
        monkeypatch.setattr(modeling, "OWN_KERNELS", own_kernels)
        torch.manual_seed(0)
        values = {} if kv_heads == 4 else {"value_mode": "linear", "first_layer_value_mode": "linear"}  # (GQA's need)
        config = tiny_config("sas", is_causal=causal, num_key_value_heads=kv_heads, **values)
        model = SimplifiedModel(config).double().train()
        perturb_(model)
        centres = []
        for layer in model.layers:
            layer.attn.mixing.register_forward_hook(
                lambda m, args, kwargs, out: centres.append(type(kwargs["centre"].grad_fn).__name__), with_kwargs=True
            )
        model(ids, attention_mask=_padding_mask(padding)).last_hidden_state.square().sum().backward()
        return centres, {name: p.grad for name, p in model.named_parameters() if p.grad is not None}

    closed_form, expected = gradients(modeling.OWN_KERNELS), gradients(frozenset())
    assert closed_form[0] == ["_KernelCentreBackward"] * 2 and "_KernelCentreBackward" not in expected[0]
    assert closed_form[1].keys() == expected[1].keys()
    for name, grad in expected[1].items():
        torch.testing.assert_close(closed_form[1][name], grad, rtol=1e-9, atol=1e-12, msg=name)


def test_bf16_centring_uses_the_attention_kernel_and_float32_the_running_mean(monkeypatch):
    """Which centring each precision takes: float32 keeps the O(T) running mean (its results are unchanged); bf16,
    autocast or weights, never calls it."""
    calls, running_mean = [], RunningMean.__call__
    monkeypatch.setattr(
        RunningMean,
        "__call__",
        lambda self, values, causal: calls.append(values.dtype) or running_mean(self, values, causal),
    )
    model = SimplifiedModel(tiny_config("sas")).eval()
    ids = torch.arange(1, 8)[None]
    with torch.no_grad():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            model(ids)
        model.to(torch.bfloat16)(ids)
        assert calls == []
        model.float()(ids)
    assert calls == [torch.float32] * model.config.num_hidden_layers


def test_shaped_combination_in_bf16_cancels_equal_terms_exactly():
    """16-bit terms: `β·AX − γ·CX` is formed first, so equal terms with equal gains leave exactly `α·X`, for every
    value of the gains (float32 gains, autocast's case, and bf16 gains alike), per-token or shared `C·X`."""
    gen = torch.Generator().manual_seed(0)
    values = torch.randn(2, 5, 4, 8, generator=gen) * 3
    attended = torch.randn(2, 5, 4, 8, generator=gen).bfloat16()
    for gain_dtype, value_dtype in ((torch.float32, torch.float32), (torch.bfloat16, torch.bfloat16)):
        alpha, beta = (torch.rand(4, 1, generator=gen).to(gain_dtype) + 0.5 for _ in range(2))
        x = values.to(value_dtype)
        for centred in (attended, attended[:, :1].expand(2, 5, 4, 8).contiguous()):
            out = _ShapedCombination.apply(x, centred, centred, alpha, beta, beta.clone())
            assert torch.equal(out, (x * alpha).to(out.dtype))


def test_shaped_combination_gain_gradients_are_float32_inside_autocast():
    """A backward run inside autocast (CPU autograd runs it on the caller's thread) still sums the gains' gradients
    in float32 (autocast would round `vecdot` to bf16): the same gradients as outside, bit for bit."""
    gen = torch.Generator().manual_seed(0)
    terms = [torch.randn(2, 9, 4, 8, generator=gen).bfloat16() for _ in range(3)]
    grad = torch.randn(2, 9, 4, 8, generator=gen)
    results = []
    for inside in (False, True):
        gains = [torch.rand(4, 1, generator=torch.Generator().manual_seed(i)).requires_grad_() for i in range(3)]
        out = _ShapedCombination.apply(*terms, *gains)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=inside):
            out.backward(grad)
        results.append([g.grad for g in gains])
    for outside, inside in zip(*results):
        assert inside.dtype == torch.float32 and torch.equal(inside, outside)
