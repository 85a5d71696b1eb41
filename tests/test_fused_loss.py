"""The fused LM head + cross-entropy (`linear_cross_entropy`) gives transformers' loss and gradients without the
logits: every block type, both heads, tied and untied, ignored labels, a padded vocabulary, `num_items_in_batch`;
with tied weights the head's weight gradient is summed into the token embedding's (`TiedHeadGradient`)."""

import pytest
import torch
from conftest import perturb_, tiny_config

from modeling_simplified import SimplifiedForCausalLM, SimplifiedForMaskedLM
from modeling_simplified import kernels_simplified as kernels

HEADS = {"causal": SimplifiedForCausalLM, "masked": SimplifiedForMaskedLM}


def _loss_and_gradients(model, skip_logits: bool, **inputs):
    model.zero_grad()
    out = model(**inputs, skip_logits=skip_logits)
    out.loss.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    return out, grads


def _batch(vocab_size: int, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab_size, (3, 12), generator=gen)
    labels = ids.clone()
    labels[0, :5] = -100  # ignored tokens at the start, the end, and one whole ignored row
    labels[1, 9:] = -100
    labels[2] = torch.where(torch.rand(12, generator=gen) < 0.5, labels[2], -100)
    mask = torch.ones_like(ids)
    mask[1, 10:] = 0
    return dict(input_ids=ids, attention_mask=mask, labels=labels)


def _assert_same(fused, reference):
    (out_f, grads_f), (out_r, grads_r) = fused, reference
    assert out_f.logits is None and out_r.logits is not None
    torch.testing.assert_close(out_f.loss, out_r.loss, rtol=0, atol=1e-5)
    assert grads_f.keys() == grads_r.keys() and len(grads_r) > 0
    for name in grads_r:
        torch.testing.assert_close(grads_f[name], grads_r[name], rtol=0, atol=1e-5, msg=name)


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("tied", [True, False])
def test_fused_loss_and_gradients_equal_the_reference(block_type, head, tied):
    config = tiny_config(block_type, vocab_size=61, pad_vocab_size_multiple=16, tie_word_embeddings=tied)
    model = perturb_(HEADS[head](config)).train()
    inputs = _batch(config.vocab_size)
    _assert_same(_loss_and_gradients(model, True, **inputs), _loss_and_gradients(model, False, **inputs))


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize(
    "embedding",
    [dict(pad_token_id=0), dict(scale_embedding=True), dict(pad_vocab_size_multiple=16)],
    ids=["padding row", "scaled", "padded vocabulary"],
)
def test_tied_head_gradient_summed_in_the_embedding_backward(head, embedding):
    """Tied weights: the fused loss hands the head's weight gradient to the token embedding's backward, which adds
    its rows in place. Gradients equal the logits path's with a padding row (it gets the head's gradient only), a
    scaled embedding and a padded vocabulary, over two backward passes accumulated into `.grad`."""
    config = tiny_config("sas_p", vocab_size=61, tie_word_embeddings=True, **embedding)
    model = perturb_(HEADS[head](config)).train()
    batches = [_batch(config.vocab_size, seed) for seed in (0, 1)]
    for batch in batches:
        batch["input_ids"][:, :2] = 0  # token 0: the padding row where there is one

    def accumulated(skip_logits: bool) -> dict[str, torch.Tensor]:
        model.zero_grad()
        for batch in batches:
            model(**batch, skip_logits=skip_logits).loss.backward()
        return {name: p.grad.clone() for name, p in model.named_parameters()}

    fused, reference = accumulated(True), accumulated(False)
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight
    for name in reference:
        torch.testing.assert_close(fused[name], reference[name], rtol=0, atol=1e-5, msg=name)


@pytest.mark.parametrize("head", HEADS)
def test_tied_head_gradient_needs_no_vocabulary_sized_zero_fill(head):
    """The point of `TiedHeadGradient`: the embedding's backward zero-fills no vocabulary-sized gradient of its own
    (the logits path, profiled alike, does: the check can fail)."""
    config = tiny_config("pre_ln", vocab_size=512, tie_word_embeddings=True)
    model = HEADS[head](config).train()
    inputs = _batch(config.vocab_size)
    vocabulary_sized = [config.vocab_size, config.hidden_size]

    def ancestors(event):
        while event.cpu_parent is not None:
            event = event.cpu_parent
            yield event.name

    def fills(skip_logits: bool) -> int:
        """Vocabulary-sized fills in the embedding's backward (the fused loss zero-fills the head's gradient once,
        before its GEMMs, which then need no page faults: that one is the gradient itself, not a second one)."""
        with torch.profiler.profile(record_shapes=True) as prof:
            model(**inputs, skip_logits=skip_logits).loss.backward()
        model.zero_grad()
        return sum(
            event.name in ("aten::fill_", "aten::zero_")
            and list(event.input_shapes[0]) == vocabulary_sized
            and any("mbedding" in name for name in ancestors(event))
            for event in prof.events()
        )

    assert fills(skip_logits=False) > 0
    assert fills(skip_logits=True) == 0


def test_embedding_forward_hooks_still_run_with_tied_weights():
    """A forward hook on the token embedding (the Trainer's NEFTune noise is one) runs in the fused path too: the
    tied gradient's own lookup steps aside, and loss and gradients equal the logits path's."""
    config = tiny_config("pre_ln", tie_word_embeddings=True)
    model = perturb_(SimplifiedForCausalLM(config)).train()
    calls = []

    def shift(module, args, output):
        calls.append(module)
        return output + 0.5

    model.get_input_embeddings().register_forward_hook(shift)
    inputs = _batch(config.vocab_size)
    _assert_same(_loss_and_gradients(model, True, **inputs), _loss_and_gradients(model, False, **inputs))
    assert len(calls) == 2


@pytest.mark.parametrize("head", HEADS)
def test_fused_loss_with_num_items_in_batch_and_small_chunks(head, monkeypatch):
    """The summed loss over `num_items_in_batch` (the Trainer's gradient-accumulation denominator), computed over
    many chunks (one row each) and with a bias on the decoder (the masked head)."""
    monkeypatch.setattr(kernels, "LOSS_CHUNK_ELEMENTS", 1)
    config = tiny_config("sas_p", vocab_size=61)
    model = perturb_(HEADS[head](config)).train()
    inputs = _batch(config.vocab_size, seed=1) | dict(num_items_in_batch=torch.tensor(40))
    _assert_same(_loss_and_gradients(model, True, **inputs), _loss_and_gradients(model, False, **inputs))


def test_fused_loss_takes_shift_labels():
    config = tiny_config("pre_ln")
    model = perturb_(SimplifiedForCausalLM(config)).train()
    inputs = _batch(config.vocab_size)
    shift_labels = torch.nn.functional.pad(inputs["labels"], (0, 1), value=-100)[:, 1:].contiguous()
    shift_labels[0, -3:] = -100
    inputs = {k: v for k, v in inputs.items() if k != "labels"} | dict(
        labels=inputs["labels"], shift_labels=shift_labels
    )
    _assert_same(_loss_and_gradients(model, True, **inputs), _loss_and_gradients(model, False, **inputs))


@pytest.mark.parametrize("head", HEADS)
def test_logits_only_skipped_in_training_with_labels(head):
    """The default: training steps with labels skip the logits; evaluation, and training without labels, return
    them; `skip_logits=False` returns them in training too."""
    config = tiny_config("sas")
    model = HEADS[head](config)
    inputs = _batch(config.vocab_size)
    model.train()
    assert model(**inputs).logits is None
    assert model(**inputs, skip_logits=False).logits is not None
    assert model(input_ids=inputs["input_ids"]).logits is not None
    model.eval()
    with torch.no_grad():
        evaluated = model(**inputs)
        fused = model(**inputs, skip_logits=True)
    assert evaluated.logits.shape[-1] == config.vocab_size
    torch.testing.assert_close(fused.loss, evaluated.loss, rtol=0, atol=1e-5)


def test_trainer_label_smoothing_uses_the_logits(tmp_path):
    """With `label_smoothing_factor` the Trainer pops the labels and smooths the loss on the logits itself: the
    model must return them (it does, without labels), and the step trains."""
    from transformers import Trainer, TrainingArguments

    config = tiny_config("sas_p")
    model = SimplifiedForCausalLM(config)
    ids = torch.randint(0, config.vocab_size, (8, 12), generator=torch.Generator().manual_seed(0))
    data = [dict(input_ids=row, labels=row) for row in ids]
    args = TrainingArguments(
        tmp_path, max_steps=2, per_device_train_batch_size=4, label_smoothing_factor=0.1, use_cpu=True, report_to=[]
    )
    before = [p.detach().clone() for p in model.parameters()]
    result = Trainer(model=model, args=args, train_dataset=data).train()
    assert torch.isfinite(torch.tensor(result.training_loss))
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("chunk_elements", [1, 50, 1 << 23])
def test_linear_cross_entropy_equals_float64_cross_entropy(bias, chunk_elements, monkeypatch):
    """The in-place softmax in one reused chunk buffer: loss and all three gradients equal `F.cross_entropy` on the
    logits computed in float64, for one, several and uneven chunks."""
    monkeypatch.setattr(kernels, "LOSS_CHUNK_ELEMENTS", chunk_elements)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(23, 16, generator=gen, requires_grad=True)
    weight = torch.randn(37, 16, generator=gen, requires_grad=True)
    b = torch.randn(37, generator=gen, requires_grad=True) if bias else None
    targets = torch.randint(0, 37, (23,), generator=gen)
    loss = kernels.LinearCrossEntropy.apply(x, weight, b, targets, True)
    (2.5 * loss).backward()
    leaves = [t for t in (x, weight, b) if t is not None]
    fused_grads = [t.grad.clone() for t in leaves]
    for t in leaves:
        t.grad = None
    logits = torch.nn.functional.linear(x.double(), weight.double(), None if b is None else b.double())
    reference = torch.nn.functional.cross_entropy(logits, targets, reduction="sum")
    (2.5 * reference).backward()
    torch.testing.assert_close(loss.double(), reference, rtol=1e-6, atol=1e-5)
    for fused, t in zip(fused_grads, leaves):
        torch.testing.assert_close(fused, t.grad, rtol=1e-5, atol=1e-5)


def test_linear_cross_entropy_bfloat16_matches_the_logits_path():
    """bf16 inputs: the loss is computed in float32 from bf16 logits, as the unfused path upcasts them."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(9, 16, generator=gen).bfloat16().requires_grad_()
    weight = torch.randn(33, 16, generator=gen).bfloat16().requires_grad_()
    targets = torch.randint(0, 33, (9,), generator=gen)
    loss = kernels.LinearCrossEntropy.apply(x, weight, None, targets, True)
    loss.backward()
    assert loss.dtype == torch.float32 and x.grad.dtype == weight.grad.dtype == torch.bfloat16
    x_ref, w_ref = x.detach().clone().requires_grad_(), weight.detach().clone().requires_grad_()
    reference = torch.nn.functional.cross_entropy((x_ref @ w_ref.t()).float(), targets, reduction="sum")
    reference.backward()
    torch.testing.assert_close(loss, reference, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(x.grad.float(), x_ref.grad.float(), rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(weight.grad.float(), w_ref.grad.float(), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("bias", [False, True])
def test_linear_cross_entropy_under_autocast_computes_like_the_unfused_head(bias):
    """The Trainer's `bf16=True`: float32 rows and head under autocast. The fused head computes its logits in bf16,
    as `F.linear` under autocast does, and the loss in float32: the unfused head's loss to float32 rounding (not the
    float32 head's, which differs by bf16's); the gradients come back float32 for the float32 master weights."""
    gen = torch.Generator().manual_seed(0)
    hidden = torch.randn(2, 11, 16, generator=gen)
    head = torch.nn.Linear(16, 37, bias=bias)
    targets = torch.randint(0, 37, (2, 11), generator=gen)
    targets[0, :3] = -100
    results = []
    for fused in (True, False):
        x = hidden.clone().requires_grad_()
        head.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            if fused:
                loss = kernels.linear_cross_entropy(x, head, targets, 37)
            else:
                logits = head(x)
                assert logits.dtype == torch.bfloat16
                loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), targets.flatten())
        loss.backward()
        results.append((loss.detach(), x.grad, *(p.grad for p in head.parameters())))
    with torch.no_grad():
        float32_loss = torch.nn.functional.cross_entropy(head(hidden).flatten(0, 1), targets.flatten())
    (fused_loss, *fused_grads), (unfused_loss, *unfused_grads) = results
    assert fused_loss.dtype == torch.float32
    torch.testing.assert_close(fused_loss, unfused_loss, rtol=1e-6, atol=1e-6)
    assert (fused_loss - float32_loss).abs() > 1e-5  # the logits really were bf16
    for ours, reference in zip(fused_grads, unfused_grads):
        assert ours.dtype == torch.float32
        torch.testing.assert_close(ours, reference, rtol=2e-2, atol=2e-3)
