"""The performance kernels of the simplified-transformers model (`modeling_simplified.py` calls them by name): each
computes what a plain-torch composite computes (to float rounding), with fewer saved activations, temporaries or
kernel calls.

- `linear`: `x·Wᵀ + b`, one row on the CPU (batch-1 decoding) as a two-column GEMM, which streams W faster.
- `rms_norm`: RMSNorm on the CPU, one saved activation and one fused reduction per pass.
- `running_sum`: prefix sums over the tokens, the causal running mean of eq. 5's centring term `C·X`.
- `shaped_combination`: eq. 5's `α·X + β·A(X)·X − γ·C·X` from its terms, each gain's gradient one dot product.
- `linear_cross_entropy`: the LM head and cross-entropy fused, a chunk of rows at a time (no logits), with the tied
  head's weight gradient handed to the token embedding (`TiedHeadGradient`).

Under autocast (`torch.autocast`, the Trainer's `bf16=True`) each kernel decides its dtypes explicitly rather than
inheriting them from whichever of its ops autocast happens to list: `linear` and the fused head compute their GEMMs in
the autocast dtype, as `F.linear` does; `rms_norm` and `running_sum` compute in their input's dtype (at least float32
for the norm), as `F.rms_norm` and `cumsum` do; reductions that sum over many tokens (the loss, the head's weight
gradient, the gains' gradients) accumulate in float32 whatever the autocast state of the pass, forward or backward.

Shipped to the Hub next to the modeling file: it imports only torch and transformers.
"""

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from transformers.utils import is_torchdynamo_compiling


def autocast_enabled(device: torch.device) -> bool:
    """Whether autocast is on for `device`'s type; False on the meta device (which autocast does not know: asking
    would raise)."""
    return device.type != "meta" and torch.is_autocast_enabled(device.type)


# ----------------------------------------------------------------------------------------------------------------
# Linear
# ----------------------------------------------------------------------------------------------------------------
def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """`F.linear(x, W, b)`. One float32 row on the CPU without autograd (batch-1 decoding, memory-bound) is computed
    as the first column of `W·[x, x]ᵀ`: the BLAS's GEMM reads W about twice as fast as the matrix-vector product
    that `F.linear` takes for one row (docs/speed.md, Decoding). In bf16 it is the other way round (oneDNN's
    one-row product read bf16 weights 1.1–1.7× as fast as its GEMM with two columns: `benchmarks/gemv.py`), so
    16-bit weights take `F.linear`. A fixed rule by shape, dtype and device, so the same inputs take the same kernel
    in every process; plain tensors only (a DTensor or quantised weight keeps its own). Under autocast, `F.linear`
    itself (its result in the autocast dtype, bias included). In a compiled graph one 16-bit row is `one_row_16bit`."""
    if _one_row_16bit_applies(x, weight):
        return one_row_16bit(x, weight, bias)
    if (
        x.device.type != "cpu"
        or weight.dtype != torch.float32
        or torch.is_grad_enabled()
        or torch.is_autocast_enabled("cpu")
        or is_torchdynamo_compiling()
        or x.numel() != x.shape[-1]
        or type(weight) not in (torch.Tensor, nn.Parameter)
    ):
        return F.linear(x, weight, bias)
    out = torch.mm(weight, x.reshape(1, -1).repeat(2, 1).t())[:, 0]  # a column: stride 2
    out = out.contiguous() if bias is None else out + bias  # (attention kernels want unit-stride heads)
    return out.view(*x.shape[:-1], weight.shape[0])


def _one_row_16bit_applies(x: torch.Tensor, weight: torch.Tensor) -> bool:
    return (
        is_torchdynamo_compiling()
        and x.device.type == "cpu"
        and weight.dtype in (torch.bfloat16, torch.float16)
        and not torch.is_grad_enabled()
        and not torch.is_autocast_enabled("cpu")
        and x.numel() == x.shape[-1]
        and type(weight) in (torch.Tensor, nn.Parameter)
    )


def one_row_16bit(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """`F.linear` of one row with 16-bit weights as a product and a sum over the inputs, in float32, rounded once to
    `x`'s dtype (as oneDNN's GEMM accumulates). Traced, inductor fuses it into one reduction that reads each weight
    once in 16 bits and widens it in registers: about twice the bytes per second of oneDNN's bf16 one-row product on
    a CPU whose bf16 dot products are slower than its float32 ones (compiled batch-1 decoding, docs/inference.md).
    Eager it would materialise the widened weight, so `linear` takes it only in a compiled graph."""
    out = (x.float()[..., None, :] * weight.float()).sum(-1)
    return (out if bias is None else out + bias.float()).to(x.dtype)


# ----------------------------------------------------------------------------------------------------------------
# RMSNorm
# ----------------------------------------------------------------------------------------------------------------
def _rms_norm(x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """`weight·x/sqrt(mean(x²) + eps)` in at least float32 (as `F.rms_norm`), and the `1/sqrt(·)` it used."""
    x32 = x.to(torch.promote_types(x.dtype, torch.float32))
    rstd = torch.linalg.vector_norm(x32, dim=-1, keepdim=True).square_().div_(x.shape[-1]).add_(eps).rsqrt_()
    y = x32 * rstd
    y = y if weight is None else y.mul_(weight)
    return y.to(x.dtype), rstd


class _RMSNormFunction(torch.autograd.Function):
    """`weight·x/sqrt(mean(x²) + eps)` with one saved activation (`x`; the composite op also keeps `x/rms`) and one
    fused reduction (`vector_norm`) per pass; the backward is `rstd·(g − x̂·mean(g·x̂))`, `g = grad·weight`,
    `x̂ = x·rstd`. Dtypes, autocast or not (as `F.rms_norm`, which CPU autocast does not list): computed in at least
    float32, returned in `x`'s dtype; none of its ops is one autocast casts."""

    @staticmethod
    def forward(ctx, x, weight, eps: float):
        y, rstd = _rms_norm(x, weight, eps)
        ctx.save_for_backward(x, rstd, weight)
        return y

    @staticmethod
    def backward(ctx, grad):
        x, rstd, weight = ctx.saved_tensors
        x_hat = x.to(rstd.dtype) * rstd
        grad = grad.to(rstd.dtype)
        grad_weight = None
        if weight is not None and ctx.needs_input_grad[1]:
            grad_weight = (grad * x_hat).flatten(0, -2).sum(0).to(weight.dtype)
        g = grad if weight is None else grad * weight
        dot = (g * x_hat).mean(-1, keepdim=True)
        grad_x = x_hat.mul_(dot).neg_().add_(g).mul_(rstd)
        return grad_x.to(x.dtype), grad_weight, None


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> torch.Tensor:
    """`nn.RMSNorm`'s result on the CPU, where `F.rms_norm` is a composite that saves two activations: through
    `_RMSNormFunction` when autograd records, else by `_rms_norm` directly (an autograd Function's call would cost
    more than a decoding step's arithmetic)."""
    if torch.is_grad_enabled() and (x.requires_grad or (weight is not None and weight.requires_grad)):
        return _RMSNormFunction.apply(x, weight, eps)
    return _rms_norm(x, weight, eps)[0]


# ----------------------------------------------------------------------------------------------------------------
# Running sums (the causal centring term)
# ----------------------------------------------------------------------------------------------------------------
#: Tokens per block of `running_sum`'s blocked scan.
SCAN_BLOCK = 32


def running_sum(x: torch.Tensor) -> torch.Tensor:
    """Prefix sums over the tokens of `x` `(B, T, F)`, as a blocked scan: inside blocks of `SCAN_BLOCK` tokens one
    small lower-triangular matmul, across blocks the running sum of the block totals (recursively). Same result as
    `x.cumsum(1)`, whose eager CPU kernel along a non-last dimension is much slower. Traced (`torch.compile`,
    `torch.export`, ONNX) it is `cumsum`: the scan's branches on the length would be specialised to the sample's.
    Computed in `x`'s dtype, as `cumsum`: autocast would otherwise round the block matmul to 16 bits."""
    if is_torchdynamo_compiling():
        return x.cumsum(1)
    if autocast_enabled(x.device):
        with torch.autocast(x.device.type, enabled=False):
            return running_sum(x)
    batch, length, features = x.shape
    block = min(SCAN_BLOCK, length)
    if length % block:
        return running_sum(F.pad(x, (0, 0, 0, -length % block)))[:, :length]
    blocks = x.view(batch, -1, block, features)
    triangle = torch.ones(block, block, device=x.device, dtype=x.dtype).tril()
    sums = torch.matmul(triangle, blocks)  # (B, blocks, block, F): the sums within each block
    if blocks.shape[1] > 1:
        totals = blocks.sum(2)  # (a reduction: its backward is a broadcast, no zero-filled gradient)
        sums = sums + (running_sum(totals) - totals)[:, :, None]  # plus the totals of the blocks before
    return sums.view(batch, length, features)


# ----------------------------------------------------------------------------------------------------------------
# Shaped attention's combination (eq. 5)
# ----------------------------------------------------------------------------------------------------------------
class _ShapedCombination(torch.autograd.Function):
    """`α·X + β·A(X)·X − γ·C·X` (eq. 5) from its per-head terms `(B, T, H, D)` (`C·X` may be `(B, 1, H, D)`, shared by
    the queries; `None` without centring) and gains `(H, 1)` or `(1, 1)`. One product and two in-place `addcmul`s
    forward; backward, each gain's gradient is one per-head dot product (autograd's composite of `Gain` makes a
    product, a reduction and a broadcast per gain). Saves a term only for its gain's gradient and a gain only for its
    term's (frozen gains keep no activation).

    Dtypes: the result promotes like eager's `α·X + β·AX − γ·CX` (bf16 terms with float32 gains give float32). Terms in
    16 bits (autocast, or bf16 / fp16 weights) come from one attention kernel, `A·X` and `C·X` rounded alike, so their
    difference is formed first: `β·AX − γ·CX` is then exactly 0 where `A = C` and `β = γ`, and the sub-block exactly
    the identity at init. Float32 terms keep the order `α·X + β·AX − γ·CX`: there `C·X` is the running mean, whose
    rounding differs from the kernel's anyway (by ~1e-7), and float32 results stay what they were. The gains'
    gradients (sums over B·T·D) accumulate in float32, with autocast off, whatever state the backward runs in."""

    generate_vmap_rule = True  # torch.func.vmap (per-sample gradients); forward-mode AD is not supported

    @staticmethod
    def forward(values, attended, centred, alpha, beta, gamma):
        if centred is None or attended.dtype.itemsize >= 4:
            out = values * alpha
            out.addcmul_(attended, beta)
            if centred is not None:
                out.addcmul_(centred, gamma, value=-1.0)
            return out
        dtype = values.dtype
        for t in (attended, centred, alpha, beta, gamma):
            dtype = torch.promote_types(dtype, t.dtype)
        out = (attended * beta).to(dtype)
        out.sub_(centred * gamma)  # both products rounded alike: exactly 0 where AX = CX and β = γ
        return out.addcmul_(values, alpha)

    @staticmethod
    def setup_context(ctx, inputs, output):
        terms, gains, needs = inputs[:3], inputs[3:], ctx.needs_input_grad
        ctx.input_meta = [None if t is None else (t.shape, t.dtype) for t in inputs]
        ctx.save_for_backward(
            *(term if needs[3 + i] else None for i, term in enumerate(terms)),
            *(gain if needs[i] else None for i, gain in enumerate(gains)),
        )

    @staticmethod
    def backward(ctx, grad):
        saved = ctx.saved_tensors  # (unpacked once: checkpointing's recomputation allows no second unpack)
        if autocast_enabled(grad.device):  # (a backward called inside autocast: vecdot is listed)
            with torch.autocast(grad.device.type, enabled=False):
                return _ShapedCombination.gradients(ctx, saved, grad)
        return _ShapedCombination.gradients(ctx, saved, grad)

    @staticmethod
    def gradients(ctx, saved: tuple, grad: torch.Tensor) -> tuple:
        """`backward`'s arithmetic (a method of its own: torch.compile traces no call of `backward` from itself)."""
        needs, grads = ctx.needs_input_grad, [None] * 6
        exact = grad.to(torch.promote_types(grad.dtype, torch.float32))  # the gains' sums over B·T·D in float32
        for i, sign in enumerate((1.0, 1.0, -1.0)):
            term, gain = saved[i], saved[3 + i]
            if needs[i]:
                shape, dtype = ctx.input_meta[i]
                grads[i] = (grad * (sign * gain)).sum_to_size(shape).to(dtype)
            if needs[3 + i]:
                dots = torch.linalg.vecdot(exact, term.to(exact.dtype)).sum((0, 1))  # (H,)
                shape, dtype = ctx.input_meta[3 + i]
                grads[3 + i] = (sign * dots[:, None]).sum_to_size(shape).to(dtype)
        return tuple(grads)


def shaped_combination(values, attended, centred, alpha, beta, gamma) -> torch.Tensor:
    """`α·X + β·A(X)·X − γ·C·X` by `_ShapedCombination`; without autograd (decoding) its arithmetic alone, which
    costs less than the Function's call."""
    combine = _ShapedCombination.apply if torch.is_grad_enabled() else _ShapedCombination.forward
    return combine(values, attended, centred, alpha, beta, gamma)


# ----------------------------------------------------------------------------------------------------------------
# Loss: the LM head and cross-entropy fused, a chunk of rows at a time
# ----------------------------------------------------------------------------------------------------------------
LOSS_CHUNK_ELEMENTS = 1 << 23  # logits per chunk (32 MB in float32): a few hundred rows at a 50K vocabulary


class LinearCrossEntropy(torch.autograd.Function):
    """Summed cross-entropy of `x·Wᵀ + b` against `targets`, a chunk of rows at a time, so that neither the
    `(rows, vocab)` logits nor their gradient ever exist whole. The loss is a scalar, so each chunk's gradients
    (softmax − one-hot, times W and times x) are computed in the forward pass and backward only scales them: the
    same three GEMMs as an unfused head, and no vocabulary-sized temporaries (Liger-Kernel's fused linear
    cross-entropy, in plain torch).

    Dtypes: the GEMMs run in `compute_dtype` (None: `x`'s; `linear_cross_entropy` passes autocast's, as `F.linear`
    under autocast computes the logits), the softmax, the loss and the weight and bias gradients in float32; each
    gradient is returned in its input's dtype (float32 master weights get an unrounded float32 gradient)."""

    @staticmethod
    def forward(
        ctx,
        x,
        weight,
        bias,
        targets,
        grad_enabled: bool,
        tied: "TiedHeadGradient | None" = None,
        compute_dtype: torch.dtype | None = None,
    ):
        # (`needs_input_grad` says True under `torch.no_grad()` too: the caller's grad mode decides)
        need_x, need_w, need_b = (need and grad_enabled for need in ctx.needs_input_grad[:3])
        ctx.tied = tied
        x_dtype, weight_dtype, bias_dtype = x.dtype, weight.dtype, None if bias is None else bias.dtype
        if compute_dtype is not None:
            x, weight = x.to(compute_dtype), weight.to(compute_dtype)
            bias = None if bias is None else bias.to(compute_dtype)
        chunk = min(x.shape[0], max(1, LOSS_CHUNK_ELEMENTS // weight.shape[0]))
        # one logits buffer for every chunk, the softmax and its gradient computed in it in place: no fresh
        # vocabulary-sized tensor (and its page faults) per chunk
        logits_buffer = x.new_empty(chunk, weight.shape[0])
        work_buffer = logits_buffer if x.dtype == torch.float32 else logits_buffer.float()
        loss = torch.zeros((), dtype=torch.float32, device=x.device)
        grad_x = torch.empty_like(x) if need_x else None
        # zero-filled before the GEMMs, so that no first-touch page fault falls inside a multithreaded GEMM
        grad_w = torch.zeros(weight.shape, dtype=torch.float32, device=x.device) if need_w else None
        grad_b = torch.zeros_like(bias, dtype=torch.float32) if need_b else None
        for start in range(0, x.shape[0], chunk):
            rows, target = x[start : start + chunk], targets[start : start + chunk, None]
            logits, z = logits_buffer[: rows.shape[0]], work_buffer[: rows.shape[0]]
            if bias is None:
                torch.mm(rows, weight.t(), out=logits)
            else:
                torch.addmm(bias, rows, weight.t(), out=logits)
            if z is not logits:
                z.copy_(logits)
            picked, peak = z.gather(1, target), z.amax(1, keepdim=True)
            total = z.sub_(peak).exp_().sum(1, keepdim=True)  # z = exp(logits − max)
            loss += (total.log() + peak - picked).sum()  # −log softmax at the targets
            if not (need_x or need_w or need_b):
                continue
            grad = z.div_(total)  # d loss / d logits = softmax − one-hot
            grad.scatter_add_(1, target, torch.full_like(picked, -1.0))
            if need_b:
                grad_b += grad.sum(0)
            if need_w:  # from the float32 softmax gradient itself (not rounded to `compute_dtype` and back)
                grad_w.addmm_(grad.t(), rows.float())
            if need_x:
                torch.mm(grad if z is logits else logits.copy_(grad), weight, out=grad_x[start : start + chunk])
        ctx.grads = (
            None if grad_x is None else grad_x.to(x_dtype),
            None if grad_w is None else grad_w.to(weight_dtype),
            None if grad_b is None else grad_b.to(bias_dtype),
        )
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        grads, ctx.grads = ctx.grads, None  # ours alone: scaled in place, no vocabulary-sized copy
        grad_x, grad_w, grad_b = (None if g is None else g.mul_(grad_loss.to(g.dtype)) for g in grads)
        if ctx.tied is not None and grad_w is not None:  # the token embedding's backward adds its rows and returns it
            ctx.tied.grad, grad_w = grad_w, None
        return grad_x, grad_w, grad_b, None, None, None, None


class TiedHeadGradient:
    """The tied head's weight gradient, handed from the fused loss's backward to the token embedding's: the
    embedding adds its rows to it in place and returns the sum as the weight's one gradient. Without this, the
    embedding's backward zero-fills a vocabulary-sized gradient of its own that autograd then adds to the head's."""

    def __init__(self):
        self.grad: torch.Tensor | None = None

    @staticmethod
    def applies(embedding: nn.Embedding, head: nn.Module, input_ids: torch.Tensor | None) -> bool:
        """Token ids through a plain embedding lookup (no `max_norm`, dense, unscaled by frequency; the caller checks
        the module's type) whose weight is the head's, in an eager pass that records gradients. Not where something
        else runs with the module: hooks (the Trainer's NEFTune noise, PEFT's `enable_input_require_grads`) or a
        wrapped forward (accelerate's offloading), which the lookup here would skip."""
        return (
            input_ids is not None
            and torch.is_grad_enabled()
            and not is_torchdynamo_compiling()
            and "forward" not in vars(embedding)
            and not (embedding._forward_hooks or embedding._forward_pre_hooks)
            and not (nn.modules.module._global_forward_hooks or nn.modules.module._global_forward_pre_hooks)
            and embedding.weight is head.weight
            and embedding.weight.requires_grad
            and embedding.max_norm is None
            and not (embedding.sparse or embedding.scale_grad_by_freq)
        )

    def embed(self, embedding: nn.Embedding, input_ids: torch.Tensor) -> torch.Tensor:
        """`F.embedding` of `embedding`'s weight, with the head's gradient added in its backward."""
        return _EmbeddingWithTiedHead.apply(input_ids, embedding.weight, embedding.padding_idx, self)


class _EmbeddingWithTiedHead(torch.autograd.Function):
    """`F.embedding` whose weight gradient is the tied head's (`TiedHeadGradient`) plus the looked-up rows' (the
    padding row excluded, as `nn.Embedding`), summed in place; a zero-filled one only if the head gave none. Dtypes
    (autocast lists no op here): rows in the weight's dtype, the rows' gradients added in the head gradient's (the
    weight's)."""

    @staticmethod
    def forward(ctx, input_ids, weight, padding_idx: int | None, tied: TiedHeadGradient):
        ctx.save_for_backward(input_ids)
        ctx.padding_idx, ctx.tied, ctx.weight_shape = padding_idx, tied, weight.shape
        return F.embedding(input_ids, weight, padding_idx)

    @staticmethod
    def backward(ctx, grad):
        (input_ids,) = ctx.saved_tensors
        head, ctx.tied.grad = ctx.tied.grad, None
        if head is None:
            total = grad.new_zeros(ctx.weight_shape)
        elif head.shape[0] == ctx.weight_shape[0]:
            total = head
        else:  # the head predicts only the vocabulary, not its padded rows
            total = grad.new_zeros(ctx.weight_shape)
            total[: head.shape[0]] = head
        rows, grad = input_ids.reshape(-1), grad.reshape(-1, grad.shape[-1])
        if ctx.padding_idx is not None:
            keep = rows != ctx.padding_idx
            rows, grad = rows[keep], grad[keep]
        return None, total.index_add_(0, rows, grad.to(total.dtype)), None, None


def _vocabulary_rows(t: torch.Tensor | None, vocab_size: int) -> torch.Tensor | None:
    """The first `vocab_size` rows (a padded vocabulary's extra rows are never predicted); no slice when there are
    no extra rows, so the gradient needs no zero-filled copy."""
    return t if t is None or t.shape[0] == vocab_size else t[:vocab_size]


def linear_cross_entropy(
    hidden: torch.Tensor,
    head: nn.Linear,
    targets: torch.Tensor,
    vocab_size: int,
    transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
    num_items_in_batch: torch.Tensor | int | None = None,
    ignore_index: int = -100,
    tied: TiedHeadGradient | None = None,
    **kwargs,
) -> torch.Tensor:
    """The loss of transformers' `ForCausalLMLoss` / `ForMaskedLMLoss` (mean over the labelled tokens, or their sum
    over `num_items_in_batch`) without the logits: only labelled rows go through `transform` and the head, and the
    head's padded vocabulary rows are never predicted. `tied`: the embedding that shares the head's weight takes
    the head's weight gradient from there (`TiedHeadGradient`). In a compiled graph, where selecting the labelled
    rows has a data-dependent shape that does not trace, the logits and `F.cross_entropy` (the compiler fuses them).
    Under autocast the head's GEMMs run in the autocast dtype and the loss in float32, as the unfused head's."""
    weight, bias = _vocabulary_rows(head.weight, vocab_size), _vocabulary_rows(head.bias, vocab_size)
    targets = targets.reshape(-1)
    labelled = targets != ignore_index
    if is_torchdynamo_compiling():
        logits = F.linear(hidden if transform is None else transform(hidden), weight, bias).flatten(0, -2)
        loss = F.cross_entropy(logits.float(), targets, ignore_index=ignore_index, reduction="sum")
    else:
        rows = hidden.reshape(-1, hidden.shape[-1])[labelled]
        rows = rows if transform is None else transform(rows)
        args = (rows, weight, bias, targets[labelled], torch.is_grad_enabled(), tied)
        device = rows.device.type
        if autocast_enabled(rows.device):  # the head's GEMMs in autocast's dtype, as `F.linear`'s; no op cast twice
            with torch.autocast(device, enabled=False):
                loss = LinearCrossEntropy.apply(*args, torch.get_autocast_dtype(device))
        else:
            loss = LinearCrossEntropy.apply(*args)
    denominator = labelled.sum() if num_items_in_batch is None else num_items_in_batch
    if torch.is_tensor(denominator):
        denominator = denominator.to(loss.device)
    return loss / denominator
