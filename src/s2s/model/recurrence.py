"""The weights a loop over time steps multiplies at every step, with their gradients summed in
fp32 under autocast.

Under ``torch.autocast`` a weight is cast to bf16 once per context (autocast caches the cast of a
leaf that requires a gradient), so every step of a loop multiplies the same bf16 copy, and
autograd adds the T per-step gradients of that copy in bf16, in the cast's input buffer, before
the one cast of the sum to fp32: a relative error of about 1e-2 at T = 50 (N 64, H 256) that
grows with T, in weights whose gradients the precision plan promises in fp32
(``s2s.precision``; bench/README.md, "The weights of a loop").

Inside :func:`steps` (each loop enters it: a peephole LSTM layer, Cho's GRU, the attention
model's teacher-forced decoder, the CPU's single LSTM steps), :func:`linear` runs the product
autocast would run, the same bf16 operands and the same bits, and gives the input the same
gradient; the bf16 operands of each step's weight gradient (the output's gradient dY and the
input X) are kept, and the weight's gradient is computed once, after the last step's backward,
over the rows of all steps:

    dW = dY^T X    (one GEMM, fp32 accumulation and output: s2s.precision.fp32_mm)
    db = dY summed over the rows, in fp32

Outside autocast, without gradients or outside :func:`steps`, :func:`linear` is ``F.linear``
itself: the fp32 path is unchanged to the bit.

:class:`Stacked` does the same for a stack of weights multiplied by a batch of inputs at every step
(the layers of the peephole LSTM's wavefront, one ``bmm`` per step), in any dtype: its product is
always fp32 (from bf16 operands under autocast), and its gradient one batched GEMM after the
loop. A graph whose loop ran under :func:`steps` can be differentiated once (the kept operands
are consumed by the weight's gradient).
"""

from __future__ import annotations

import contextlib
import contextvars

import torch
from torch import Tensor
from torch.nn import functional as F

from s2s.precision import fp32_bmm, fp32_mm, matmul_dtype

__all__ = ["Stacked", "Steps", "linear", "steps"]


class _Shared:
    """One weight (and its bias) of a loop: its cast, and the operands every step's backward
    leaves for it. The anchor (the 0-dim tensor through which every step's product depends on
    the weight: its node runs after every step's backward and turns the kept operands into the
    weight's gradient) is not kept here: its node holds this object, and a reference back would
    be a cycle that only Python's collector frees, with every step's operands in it."""

    __slots__ = ("weight", "bias", "low", "bias_low", "grads", "inputs")

    def __init__(self, weight: Tensor, bias: Tensor | None, dtype: torch.dtype | None):
        self.weight, self.bias = weight, bias
        self.low = weight.detach() if dtype is None else weight.detach().to(dtype)
        self.bias_low = None if bias is None or dtype is None else bias.detach().to(dtype)
        self.grads: list[Tensor] = []  # (R_t, out) or (B, R_t, out) per step, in dtype
        self.inputs: list[Tensor] = []  # (R_t, in) or (B, R_t, in) per step, in dtype


class _Gradient(torch.autograd.Function):
    """weight (and bias) -> a 0-dim anchor; backward: the weight's and the bias's gradients over
    all steps from the operands the steps kept (the anchor's own gradient is never used)."""

    @staticmethod
    def forward(ctx, weight: Tensor, bias: Tensor | None, shared: _Shared) -> Tensor:
        ctx.shared = shared
        ctx.set_materialize_grads(False)
        return weight.new_zeros(())

    @staticmethod
    def backward(ctx, _unused):
        s = ctx.shared
        if not s.grads:
            return None, None, None
        dy, x = _joined(s.grads), _joined(s.inputs)  # (R, out), (R, in)
        s.grads, s.inputs = [], []
        d_w = summed_weight_gradient(dy, x).to(s.weight.dtype)  # (out, in)
        d_b = None
        if s.bias is not None and ctx.needs_input_grad[1]:
            d_b = dy.float().sum(0).to(s.bias.dtype)  # (out,)
        return d_w, d_b, None


def _joined(parts: list[Tensor], dim: int = 0) -> Tensor:
    """The steps' rows as one tensor (no copy for one step)."""
    return torch.cat(parts, dim) if len(parts) > 1 else parts[0]


def summed_weight_gradient(dy: Tensor, x: Tensor) -> Tensor:
    """dY^T X in fp32, dy: (R, out), x: (R, in), both in the products' dtype: the weight's
    gradient over all R rows of all steps (tests wrap it to see the operands)."""
    return fp32_mm(dy.t(), x)


class _StepLinear(torch.autograd.Function):
    """One step's product x @ W^T (+ b) in the loop's dtype, as autocast's F.linear computes it:
    x (..., in) -> (..., out) in that dtype. Backward: x's gradient (dY W, in x's dtype); dY and x
    kept for the weight's gradient (_Gradient)."""

    @staticmethod
    def forward(ctx, x: Tensor, anchor: Tensor, shared: _Shared) -> Tensor:
        ctx.shared, ctx.x_dtype, ctx.x_shape = shared, x.dtype, x.shape
        x2 = x.reshape(-1, x.shape[-1]).to(shared.low.dtype)  # (R, in)
        if shared.bias_low is None:
            y = torch.mm(x2, shared.low.t())
        else:
            y = torch.addmm(shared.bias_low, x2, shared.low.t())
        ctx.save_for_backward(x2)
        return y.view(*x.shape[:-1], y.shape[-1])  # (..., out)

    @staticmethod
    def backward(ctx, grad: Tensor):
        (x2,) = ctx.saved_tensors
        s = ctx.shared
        g = grad.reshape(-1, grad.shape[-1]).to(s.low.dtype)  # (R, out)
        s.grads.append(g)
        s.inputs.append(x2)
        dx = None
        if ctx.needs_input_grad[0]:
            dx = torch.mm(g, s.low).to(ctx.x_dtype).view(ctx.x_shape)  # (..., in)
        return dx, None, None


class Steps:
    """The weights of one loop (:func:`steps`): each cast once, its steps' operands kept for one
    gradient. ``dtype``: the products' dtype (autocast's)."""

    def __init__(self, dtype: torch.dtype):
        self.dtype = dtype
        self._shared: dict[tuple[int, int], tuple[_Shared, Tensor]] = {}  # with its anchor

    def linear(self, x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
        """``F.linear(x, weight, bias)`` under autocast, the weight's gradient as above."""
        if not (torch.is_grad_enabled() and weight.requires_grad
                and matmul_dtype(x) == self.dtype):  # (autocast turned off inside the loop)
            return F.linear(x, weight, bias)
        key = (id(weight), id(bias))
        if key not in self._shared:
            shared = _Shared(weight, bias, self.dtype)
            self._shared[key] = (shared, _Gradient.apply(weight, bias, shared))
        shared, anchor = self._shared[key]
        return _StepLinear.apply(x, anchor, shared)


_ACTIVE: contextvars.ContextVar[Steps | None] = contextvars.ContextVar("s2s_loop_steps",
                                                                      default=None)


@contextlib.contextmanager
def steps(x: Tensor):
    """The block of a loop over time steps on ``x``'s device: under autocast with gradients, the
    :func:`linear` products inside it share their weights' casts and sum their gradients in fp32
    (a block inside another one belongs to the outer loop); otherwise nothing changes."""
    dtype = matmul_dtype(x)
    if dtype is None or not torch.is_grad_enabled() or _ACTIVE.get() is not None:
        yield
        return
    token = _ACTIVE.set(Steps(dtype))
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``F.linear(x, weight, bias)``; inside :func:`steps`, with the weight's gradient over the
    loop's steps summed in fp32 (the same output, in autocast's dtype)."""
    active = _ACTIVE.get()
    if active is None:
        return F.linear(x, weight, bias)
    return active.linear(x, weight, bias)


class Stacked:
    """B weights (B, out, in) that every step of a loop multiplies by B batches of inputs (the
    peephole LSTM's layers at one diagonal of the wavefront): the product in fp32 (from operands
    in ``dtype`` where it is given: autocast's bf16), the weights' gradient over all steps as one
    batched fp32 GEMM after the last step's backward. ``weight`` may be computed (a stack of
    parameters): its gradient flows on through autograd."""

    def __init__(self, weight: Tensor, dtype: torch.dtype | None):
        # the operands apart from the anchor, whose node holds them (no cycle: _Shared says why)
        self.kept = _Shared(weight, None, dtype)
        self.anchor = _StackedGradient.apply(weight, self.kept) if weight.requires_grad else None

    def bmm(self, z: Tensor) -> Tensor:
        """z (B, N, in) -> z @ W^T (B, N, out) in fp32."""
        if self.anchor is None or not torch.is_grad_enabled():
            return fp32_bmm(z.to(self.kept.low.dtype), self.kept.low.transpose(1, 2))
        return _StepBmm.apply(z, self.anchor, self.kept)


class _StackedGradient(torch.autograd.Function):
    """Stacked's weight -> a 0-dim anchor; backward: the weight's gradient over all steps."""

    @staticmethod
    def forward(ctx, weight: Tensor, kept: _Shared) -> Tensor:
        ctx.stacked = kept
        ctx.set_materialize_grads(False)
        return weight.new_zeros(())

    @staticmethod
    def backward(ctx, _unused):
        s = ctx.stacked
        if not s.grads:
            return None, None
        dy, z = _joined(s.grads, 1), _joined(s.inputs, 1)  # (B, R, out), (B, R, in)
        s.grads, s.inputs = [], []
        return fp32_bmm(dy.transpose(1, 2), z).to(s.weight.dtype), None  # (B, out, in)


class _StepBmm(torch.autograd.Function):
    """One step's z @ W^T of a Stacked weight, fp32 out; backward: z's gradient (dY W in the
    operands' dtype, then z's), dY and z kept for the weight."""

    @staticmethod
    def forward(ctx, z: Tensor, anchor: Tensor, stacked: _Shared) -> Tensor:
        ctx.stacked, ctx.z_dtype = stacked, z.dtype
        z_low = z.to(stacked.low.dtype)
        ctx.save_for_backward(z_low)
        return fp32_bmm(z_low, stacked.low.transpose(1, 2))  # (B, N, out)

    @staticmethod
    def backward(ctx, grad: Tensor):
        (z_low,) = ctx.saved_tensors
        s = ctx.stacked
        g = grad.to(s.low.dtype)  # (B, N, out)
        s.grads.append(g)
        s.inputs.append(z_low)
        dz = torch.bmm(g, s.low).to(ctx.z_dtype) if ctx.needs_input_grad[0] else None
        return dz, None, None
