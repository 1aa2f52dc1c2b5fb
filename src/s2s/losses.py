"""The training loss: summed cross-entropy of the softmax layer, computed without the (N, T, V)
logits tensor of ``proj(features)`` + ``F.cross_entropy``.

``smoothed_cross_entropy`` is the same with label smoothing (Szegedy et al. 2016, as Vaswani et
al. 2017 train): the loss (1 - eps) NLL + eps * mean_v(-log p_v), and the plain NLL beside it.

``linear_cross_entropy(features, weight, bias, target, ignore_index=pad)`` equals
``F.cross_entropy(F.linear(features, weight, bias).flatten(0, 1), target.flatten(),
ignore_index=pad, reduction="sum")`` up to float rounding, with the same gradients. It is faster
on CPU for two reasons (bench/README.md, "Where the time goes"):

- only the M positions with a real target go through the softmax layer: padded target positions
  (9% of a bucketed Multi30k batch) cost nothing, where the plain loss computes their logits,
  log-softmax and backward and then multiplies them by zero;
- one (M, V) buffer serves the whole layer: the GEMM writes the logits into it, the log-softmax
  runs in place, and backward turns it into the logits' gradient in place and runs the two
  GEMMs on it. The plain path allocates logits, log-probs, their gradient and the logits'
  gradient, four (M, V) tensors (at the paper's V = 80k and M = 128 x 30: 1.2 GB each).

Dimension letters: see ``s2s.model.lstm``; M = rows with a real target.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["linear_cross_entropy", "smoothed_cross_entropy"]

_log_softmax_out = torch.ops.aten._log_softmax.out


class _LinearCrossEntropy(torch.autograd.Function):
    """Summed NLL of ``target`` under ``log_softmax(x @ weight.T + bias)``; x: (M, H),
    weight: (V, H), bias: (V,), target: (M,) -> scalar. With ``mm_dtype`` (bf16) the three
    products take x and weight in that dtype; the logits, log-softmax, loss and every gradient
    returned are fp32 (x's gradient in x's dtype)."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor, target: Tensor,
                mm_dtype: torch.dtype | None) -> Tensor:
        ctx.x_dtype = x.dtype
        if mm_dtype is None:
            logp = torch.addmm(bias, x, weight.t())  # (M, V) logits
        else:
            x, weight = x.to(mm_dtype), weight.to(mm_dtype)
            logp = torch.mm(x, weight.t()).float().add_(bias)  # (M, V) fp32 logits
        if logp.device.type == "cpu":
            # In place: the CPU kernel reads a row's max and sum before it writes the row.
            _log_softmax_out(logp, 1, False, out=logp)  # (M, V) log-probs
        else:
            logp = torch.log_softmax(logp, 1)
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


def linear_cross_entropy(features: Tensor, weight: Tensor, bias: Tensor, target: Tensor, *,
                         ignore_index: int, mm_dtype: torch.dtype | None = None) -> Tensor:
    """Summed cross-entropy of the softmax layer over the positions whose target is not
    ``ignore_index``. features: (..., H) (e.g. (N, T, H)), weight: (V, H), bias: (V,),
    target: (...) matching features' leading dimensions. Returns an fp32 scalar for fp32
    weights. ``mm_dtype`` (bf16, ``s2s.precision``): the softmax layer's products in that dtype.
    """
    keep = target != ignore_index  # (...)
    x = features[keep]  # (M, H): a copy, so the GEMMs see a contiguous matrix
    return _LinearCrossEntropy.apply(x, weight, bias, target[keep], mm_dtype)


class _SmoothedCrossEntropy(torch.autograd.Function):
    """(1 - eps) * summed NLL + eps * summed mean over the vocabulary of -log p, and the summed
    NLL (not differentiated), of ``log_softmax(x @ weight.T + bias)``; shapes and ``mm_dtype`` as
    _LinearCrossEntropy. The gradient of the logits is softmax - ((1 - eps) onehot + eps / V)."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor, target: Tensor, epsilon: float,
                mm_dtype: torch.dtype | None) -> tuple[Tensor, Tensor]:
        ctx.x_dtype, ctx.epsilon = x.dtype, epsilon
        if mm_dtype is None:
            logp = torch.addmm(bias, x, weight.t())  # (M, V) logits
        else:
            x, weight = x.to(mm_dtype), weight.to(mm_dtype)
            logp = torch.mm(x, weight.t()).float().add_(bias)  # (M, V) fp32 logits
        logp = torch.log_softmax(logp, 1)  # (M, V)
        nll = -logp.gather(1, target[:, None]).sum()
        uniform = -logp.sum() / logp.shape[1]  # cross-entropy with the uniform distribution
        ctx.save_for_backward(x, weight, target, logp)
        ctx.mark_non_differentiable(nll)
        return (1 - epsilon) * nll + epsilon * uniform, nll

    @staticmethod
    def backward(ctx, grad: Tensor, _grad_nll: Tensor):
        x, weight, target, logp = ctx.saved_tensors
        eps, V = ctx.epsilon, logp.shape[1]
        g = logp.exp().mul_(grad).sub_(grad * eps / V)  # (M, V)
        g.scatter_add_(1, target[:, None],
                       (-(1 - eps) * grad).expand(target.shape[0], 1).to(g.dtype))
        db = g.sum(0) if ctx.needs_input_grad[2] else None  # (V,)
        if x.dtype != g.dtype:
            g = g.to(x.dtype)
        dx = (g @ weight).to(ctx.x_dtype) if ctx.needs_input_grad[0] else None  # (M, H)
        dw = (g.t() @ x).to(logp.dtype) if ctx.needs_input_grad[1] else None  # (V, H)
        return dx, dw, db, None, None, None


def smoothed_cross_entropy(features: Tensor, weight: Tensor, bias: Tensor, target: Tensor, *,
                           ignore_index: int, epsilon: float,
                           mm_dtype: torch.dtype | None = None) -> tuple[Tensor, Tensor]:
    """(loss, nll): the label-smoothed loss with smoothing `epsilon` and the plain summed NLL,
    over the positions whose target is not ``ignore_index``; arguments as linear_cross_entropy.
    The loss equals ``F.cross_entropy(logits, target, label_smoothing=epsilon, reduction="sum")``
    up to rounding."""
    keep = target != ignore_index  # (...)
    return _SmoothedCrossEntropy.apply(features[keep], weight, bias, target[keep], epsilon,
                                       mm_dtype)
