"""The training loss: summed cross-entropy of the softmax layer, computed without the (N, T, V)
logits tensor of ``proj(features)`` + ``F.cross_entropy``, in row chunks of bounded memory.

``smoothed_cross_entropy`` is the same with label smoothing (Szegedy et al. 2016, as Vaswani et
al. 2017 train): the loss (1 - eps) NLL + eps * mean_v(-log p_v), and the plain NLL beside it.
``summed_nll`` is the evaluation's NLL (perplexity): no gradient, fp32, summed as
``F.cross_entropy`` sums.

``linear_cross_entropy(features, weight, bias, target, ignore_index=pad)`` equals
``F.cross_entropy(F.linear(features, weight, bias).flatten(0, 1), target.flatten(),
ignore_index=pad, reduction="sum")`` up to float rounding, with the same gradients. It is faster
on CPU for two reasons (bench/README.md, "Where the time goes"):

- only the M positions with a real target go through the softmax layer: padded target positions
  cost nothing, where the plain loss computes their logits,
  log-softmax and backward and then multiplies them by zero;
- one (M, V) buffer serves the whole layer: the GEMM writes the logits into it, the log-softmax
  runs in place, and backward turns it into the logits' gradient in place and runs the two
  GEMMs on it. The plain path allocates logits, log-probs, their gradient and the logits'
  gradient, four (M, V) tensors.

Memory: no (C, V) buffer of the softmax layer (logits, log-probs, their gradient) holds more
than ``chunk_bytes`` (default ``CHUNK_BYTES``) of fp32 rows, whatever M; what grows with M is
(M, H) only (the kept features, their gradient). Where all M rows fit in one such chunk on the
CPU, the loss is the one-buffer computation above (and so the same numbers, to the bit, at any
budget that holds them). Otherwise (more rows, or another device, where torch's log-softmax
has no in-place kernel) the rows are streamed: each chunk's logits are computed, turned into its
loss and, in the forward pass already, into its share of the three gradients (of x: its rows;
of the weight and the bias: summed over chunks), and dropped; backward only scales the saved
gradients by the incoming one, which is exact because the loss is a scalar. Besides the chunk,
this holds the (M, H) and (V, H) gradients that backward returns anyway. Recomputing the
chunks' logits in backward instead (saving each row's log-sum-exp) would free the (V, H)
gradient for the rest of the forward pass but costs a fourth GEMM of (M, H) x (H, V), a third
more softmax-layer work.

Dimension letters: see ``s2s.model.lstm``; M = rows with a real target, C = rows of a chunk.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from s2s.precision import fp32_addmm, matmul_dtype

__all__ = ["CHUNK_BYTES", "linear_cross_entropy", "smoothed_cross_entropy", "summed_nll"]

# The largest (C, V) fp32 buffer of the softmax layer: 1 GiB is 3,355 rows at V = 80k, wide
# GEMMs still; at the default profile's V (6.5k) a batch of 64 x 51 targets is one chunk.
CHUNK_BYTES = 1 << 30

_log_softmax_out = torch.ops.aten._log_softmax.out


def _chunk_rows(vocab: int, chunk_bytes: int | None) -> int:
    """Rows per chunk: as many (V,) fp32 rows as `chunk_bytes` holds, at least one."""
    budget = CHUNK_BYTES if chunk_bytes is None else chunk_bytes
    return max(1, budget // (4 * vocab))


def _logits(x: Tensor, weight: Tensor, bias: Tensor, mm_dtype: torch.dtype | None) -> Tensor:
    """(C, V) fp32 logits of x (C, H); with `mm_dtype`, x and weight are already in it. On CUDA
    cuBLAS writes them in fp32 from the bf16 product, the bias added in its epilogue
    (``s2s.precision.fp32_addmm``), where rounding the product to bf16 first would quantise
    logits of 10-20 to steps of 0.06; the CPU keeps its bf16 product (its numbers)."""
    if mm_dtype is None:
        return torch.addmm(bias, x, weight.t())
    if x.device.type == "cuda":
        return fp32_addmm(bias, x, weight.t())
    return torch.mm(x, weight.t()).float().add_(bias)


def _log_softmax_(z: Tensor) -> Tensor:
    """z (C, V) turned into its log-softmax in place (CPU only: the CPU kernel reads a row's max
    and sum before it writes the row; torch's CUDA kernel makes no such promise)."""
    return _log_softmax_out(z, 1, False, out=z)


def _target_lse_(z: Tensor, target: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(z[target], logsumexp(z), sum(exp(z - rowmax))), each (C, 1), of logits z (C, V) and
    targets (C, 1); z is left holding exp(z - rowmax): one buffer on every device."""
    zt = z.gather(1, target)
    m = z.amax(1, keepdim=True)  # (C, 1)
    s = z.sub_(m).exp_().sum(1, keepdim=True)  # (C, 1)
    return zt, s.log().add_(m), s


def _rows(target: Tensor, ignore_index: int, rows: Tensor | None) -> Tensor:
    """(M,) indices into target.flatten() of the positions whose target is not ignore_index."""
    if rows is not None:
        return rows
    return (target.reshape(-1) != ignore_index).nonzero().squeeze(1)  # a host sync on CUDA


def _kept(features: Tensor, target: Tensor, rows: Tensor) -> tuple[Tensor, Tensor]:
    """x (M, H): a copy, so the GEMMs see a contiguous matrix; target (M,)."""
    return (features.reshape(-1, features.shape[-1]).index_select(0, rows),
            target.reshape(-1).index_select(0, rows))


def _wants_grad(*tensors: Tensor) -> bool:
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


class _LinearCrossEntropy(torch.autograd.Function):
    """Summed NLL of ``target`` under ``log_softmax(x @ weight.T + bias)``, all rows at once in
    one (M, V) buffer, CPU only; x: (M, H), weight: (V, H), bias: (V,), target: (M,) -> scalar.
    With ``mm_dtype`` (bf16) the three products take x and weight in that dtype; the logits,
    log-softmax, loss and every gradient returned are fp32 (x's gradient in x's dtype; the
    weight's holds the values of a bf16 product: the CPU's has no fp32 output)."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor, target: Tensor,
                mm_dtype: torch.dtype | None) -> Tensor:
        ctx.x_dtype = x.dtype
        if mm_dtype is not None:
            x, weight = x.to(mm_dtype), weight.to(mm_dtype)
        logp = _log_softmax_(_logits(x, weight, bias, mm_dtype))  # (M, V) log-probs
        nll = -logp.gather(1, target[:, None]).sum()
        ctx.save_for_backward(x, weight, target, logp)
        return nll

    @staticmethod
    def backward(ctx, grad: Tensor):
        x, weight, target, logp = ctx.saved_tensors
        # d nll / d logits = softmax - onehot(target), times the incoming scale; `logp` is not
        # needed after this, so it becomes that gradient in place (a second backward through
        # the same graph is not supported: retain_graph would see the overwritten buffer).
        g = logp.exp_().mul_(grad)  # (M, V)
        g.scatter_add_(1, target[:, None], (-grad).expand(target.shape[0], 1).to(g.dtype))
        db = g.sum(0) if ctx.needs_input_grad[2] else None  # (V,)
        if x.dtype != g.dtype:  # the products in x's (low) dtype, their results back to fp32
            g = g.to(x.dtype)
        dx = (g @ weight).to(ctx.x_dtype) if ctx.needs_input_grad[0] else None  # (M, H)
        dw = (g.t() @ x).to(logp.dtype) if ctx.needs_input_grad[1] else None  # (V, H)
        return dx, dw, db, None, None


class _SmoothedCrossEntropy(torch.autograd.Function):
    """(1 - eps) * summed NLL + eps * summed mean over the vocabulary of -log p, and the summed
    NLL (not differentiated), of ``log_softmax(x @ weight.T + bias)``; shapes, ``mm_dtype`` and
    the one buffer as _LinearCrossEntropy. The gradient of the logits is
    softmax - ((1 - eps) onehot + eps / V)."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor, target: Tensor, epsilon: float,
                mm_dtype: torch.dtype | None) -> tuple[Tensor, Tensor]:
        ctx.x_dtype, ctx.epsilon = x.dtype, epsilon
        if mm_dtype is not None:
            x, weight = x.to(mm_dtype), weight.to(mm_dtype)
        logp = _log_softmax_(_logits(x, weight, bias, mm_dtype))  # (M, V)
        nll = -logp.gather(1, target[:, None]).sum()
        uniform = -logp.sum() / logp.shape[1]  # cross-entropy with the uniform distribution
        ctx.save_for_backward(x, weight, target, logp)
        ctx.mark_non_differentiable(nll)
        return (1 - epsilon) * nll + epsilon * uniform, nll

    @staticmethod
    def backward(ctx, grad: Tensor, _grad_nll: Tensor):
        x, weight, target, logp = ctx.saved_tensors
        eps, V = ctx.epsilon, logp.shape[1]
        g = logp.exp_().mul_(grad).sub_(grad * eps / V)  # (M, V), in place as above
        g.scatter_add_(1, target[:, None],
                       (-(1 - eps) * grad).expand(target.shape[0], 1).to(g.dtype))
        db = g.sum(0) if ctx.needs_input_grad[2] else None  # (V,)
        if x.dtype != g.dtype:
            g = g.to(x.dtype)
        dx = (g @ weight).to(ctx.x_dtype) if ctx.needs_input_grad[0] else None  # (M, H)
        dw = (g.t() @ x).to(logp.dtype) if ctx.needs_input_grad[1] else None  # (V, H)
        return dx, dw, db, None, None, None


class _StreamedCrossEntropy(torch.autograd.Function):
    """(loss, nll) as _SmoothedCrossEntropy (epsilon 0: loss = nll), over chunks of `chunk` rows
    on any device: no (M, V) buffer, gradients computed in forward (`grad`: any are wanted) and
    scaled in backward. Shapes and ``mm_dtype`` as _LinearCrossEntropy."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor, target: Tensor, epsilon: float,
                mm_dtype: torch.dtype | None, chunk: int, grad: bool) -> tuple[Tensor, Tensor]:
        ctx.x_dtype = x.dtype
        want_dx, want_dw, want_db = (grad and w for w in ctx.needs_input_grad[:3])
        (M, H), V = x.shape, weight.shape[0]
        if mm_dtype is not None:
            x, weight = x.to(mm_dtype), weight.to(mm_dtype)
        # the logits' dtype: fp32 (or the weights' own, e.g. fp64 in tests)
        acc = dict(dtype=torch.float32 if mm_dtype is not None else weight.dtype,
                   device=x.device)
        nll = torch.zeros((), **acc)
        uniform = torch.zeros((), **acc)
        dx = torch.empty(M, H, **acc) if want_dx else None
        dw = torch.zeros(V, H, **acc) if want_dw else None
        db = torch.zeros(V, **acc) if want_db else None
        for start in range(0, M, chunk):
            xc, tc = x[start:start + chunk], target[start:start + chunk, None]  # (C, H), (C, 1)
            z = _logits(xc, weight, bias, mm_dtype)  # (C, V)
            zsum = z.sum(1, keepdim=True) if epsilon else None  # (C, 1)
            zt, lse, s = _target_lse_(z, tc)  # z: exp(logits - max)
            nll += (lse - zt).sum()
            if epsilon:
                uniform += (lse - zsum / V).sum()  # sum over rows of mean_v -log p_v
            if not (want_dx or want_dw or want_db):
                continue
            # d loss / d logits = softmax - (1 - eps) onehot(target) - eps / V
            g = z.div_(s)  # (C, V) softmax, in place
            if epsilon:
                g.sub_(epsilon / V)
            g.scatter_add_(1, tc, g.new_full(tc.shape, -(1 - epsilon)))
            if want_db:
                db += g.sum(0)
            if mm_dtype is not None:
                g = g.to(mm_dtype)
            if want_dx:
                dx[start:start + chunk] = g @ weight  # (C, H)
            if want_dw:
                if mm_dtype is None:
                    dw.addmm_(g.t(), xc)
                elif x.device.type == "cuda":
                    dw = fp32_addmm(dw, g.t(), xc)  # (V, H): the chunk's product in fp32 too
                else:
                    dw += g.t() @ xc  # (V, H) in mm_dtype, summed in fp32
        ctx.save_for_backward(dx, dw, db)
        ctx.mark_non_differentiable(nll)
        if not epsilon:
            return nll.clone(), nll
        return (1 - epsilon) * nll + epsilon * uniform, nll

    @staticmethod
    def backward(ctx, grad: Tensor, _grad_nll: Tensor):
        # In place on the saved gradients: a second backward through the same graph is not
        # supported (as in _LinearCrossEntropy).
        dx, dw, db = ctx.saved_tensors
        if dx is not None:
            dx = dx.mul_(grad).to(ctx.x_dtype)
        if dw is not None:
            dw = dw.mul_(grad)
        if db is not None:
            db = db.mul_(grad)
        return dx, dw, db, None, None, None, None, None


def _loss(features: Tensor, weight: Tensor, bias: Tensor, target: Tensor, *, epsilon: float,
          ignore_index: int, rows: Tensor | None, mm_dtype: torch.dtype | None,
          chunk_bytes: int | None) -> tuple[Tensor, Tensor]:
    """(loss, nll) of linear_cross_entropy / smoothed_cross_entropy (epsilon 0: loss = nll).
    Under autocast without `mm_dtype`, the products take autocast's dtype, as the trainer asks
    (``train.shard_loss``): else autocast would make the logits and the loss bf16, and a backward
    outside it would meet bf16 features and the fp32 weight."""
    mm_dtype = mm_dtype or matmul_dtype(features)
    x, t = _kept(features, target, _rows(target, ignore_index, rows))
    chunk = _chunk_rows(weight.shape[0], chunk_bytes)
    if x.device.type == "cpu" and x.shape[0] <= chunk:
        if not epsilon:
            nll = _LinearCrossEntropy.apply(x, weight, bias, t, mm_dtype)
            return nll, nll
        return _SmoothedCrossEntropy.apply(x, weight, bias, t, epsilon, mm_dtype)
    return _StreamedCrossEntropy.apply(x, weight, bias, t, epsilon, mm_dtype, chunk,
                                       _wants_grad(x, weight, bias))


def linear_cross_entropy(features: Tensor, weight: Tensor, bias: Tensor, target: Tensor, *,
                         ignore_index: int, mm_dtype: torch.dtype | None = None,
                         rows: Tensor | None = None, chunk_bytes: int | None = None) -> Tensor:
    """Summed cross-entropy of the softmax layer over the positions whose target is not
    ``ignore_index``. features: (..., H) (e.g. (N, T, H)), weight: (V, H), bias: (V,),
    target: (...) matching features' leading dimensions. Returns an fp32 scalar for fp32
    weights. ``mm_dtype`` (bf16, ``s2s.precision``): the softmax layer's products in that dtype.
    ``rows`` (M,), on features' device: the indices into ``target.flatten()`` of those positions
    where the caller has them (``Batch.target_rows``), which spares a device-to-host sync.
    ``chunk_bytes``: the largest (C, V) fp32 buffer (default ``CHUNK_BYTES``).
    """
    return _loss(features, weight, bias, target, epsilon=0.0, ignore_index=ignore_index,
                 rows=rows, mm_dtype=mm_dtype, chunk_bytes=chunk_bytes)[0]


def smoothed_cross_entropy(features: Tensor, weight: Tensor, bias: Tensor, target: Tensor, *,
                           ignore_index: int, epsilon: float,
                           mm_dtype: torch.dtype | None = None, rows: Tensor | None = None,
                           chunk_bytes: int | None = None) -> tuple[Tensor, Tensor]:
    """(loss, nll): the label-smoothed loss with smoothing `epsilon` and the plain summed NLL,
    over the positions whose target is not ``ignore_index``; arguments as linear_cross_entropy.
    The loss equals ``F.cross_entropy(logits, target, label_smoothing=epsilon, reduction="sum")``
    up to rounding."""
    return _loss(features, weight, bias, target, epsilon=epsilon, ignore_index=ignore_index,
                 rows=rows, mm_dtype=mm_dtype, chunk_bytes=chunk_bytes)


@torch.no_grad()
def summed_nll(features: Tensor, weight: Tensor, bias: Tensor, target: Tensor, *,
               ignore_index: int, rows: Tensor | None = None,
               chunk_bytes: int | None = None) -> Tensor:
    """The summed NLL for evaluation: a scalar in the weights' dtype (fp32), no gradient, no
    autocast dtype; arguments as linear_cross_entropy. On the CPU it equals
    ``F.cross_entropy(F.linear(features, weight, bias).flatten(0, -2), target.flatten(),
    ignore_index=ignore_index, reduction="sum")`` to the bit: each row's logits are computed as
    F.linear computes them on `features`, its log-probs by the same kernel, and the sum is
    ``F.nll_loss``'s over the flattened positions (its summation order depends on where the
    real targets sit, so they are put back in their places in an (N*T, 1) column). Where the
    rows are cut into several chunks, a CPU whose GEMM kernel depends on the number of rows
    (Intel's, on Sapphire Rapids) rounds a chunk's logits otherwise, in their last bits; the
    default budget holds a whole evaluation batch in one chunk."""
    # F.linear adds the bias inside the GEMM (addmm) for 2-D and contiguous 3-D input, and after
    # a plain product otherwise (e.g. an LSTM's unpacked outputs): the two round differently.
    fused_bias = features.dim() == 2 or (features.dim() == 3 and features.is_contiguous())
    with torch.autocast(features.device.type, enabled=False):
        return _summed_nll(features, weight, bias, target, rows=_rows(target, ignore_index, rows),
                           chunk=_chunk_rows(weight.shape[0], chunk_bytes), fused_bias=fused_bias)


def _summed_nll(features: Tensor, weight: Tensor, bias: Tensor, target: Tensor, *, rows: Tensor,
                chunk: int, fused_bias: bool) -> Tensor:
    x, t = _kept(features, target, rows)
    logp = torch.empty(x.shape[0], 1, dtype=weight.dtype, device=x.device)  # (M, 1)
    for start in range(0, x.shape[0], chunk):
        tc = t[start:start + chunk, None]  # (C, 1)
        xc = x[start:start + chunk]  # (C, H)
        if fused_bias:
            z = torch.addmm(bias, xc, weight.t())  # (C, V)
        else:
            z = torch.mm(xc, weight.t()).add_(bias)
        if z.device.type == "cpu":
            logp[start:start + chunk] = _log_softmax_(z).gather(1, tc)
        else:
            zt, lse, _ = _target_lse_(z, tc)
            logp[start:start + chunk] = zt - lse
    flat = target.numel()
    column = logp.new_zeros(flat, 1).index_copy_(0, rows, logp)  # (N*T, 1)
    which = torch.full((flat,), -1, dtype=torch.long, device=x.device).index_fill_(0, rows, 0)
    return F.nll_loss(column, which, ignore_index=-1, reduction="sum")
