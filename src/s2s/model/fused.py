"""nn.LSTM's training forward and backward for the CPU, written out: same weights, same maths,
faster backward.

torch's CPU nn.LSTM (oneDNN) spends several times its forward time in backward (bench/README.md).
Here backward walks the recurrence step by step with only what must be sequential (one
(N, 4H) @ (4H, H) GEMM and three element-wise ops per step), and computes everything else over
all time steps at once: the gate derivatives before the loop, and after it the weight gradients
and the input gradient as three large GEMMs over T x N rows:

    dW_hh = dG^T @ H_prev     dW_ih = dG^T @ X     dX = dG @ W_ih     (dG: (T*N, 4H))

`lstm_stack` runs an nn.LSTM's layers (weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k},
bias_hh_l{k}, gate order i, f, g, o; and their ``_reverse`` twins, of a bidirectional one) this
way; `s2s.model.lstm.StandardLSTM` uses it when it trains on the CPU, and
`s2s.model.lstm.run_padded` for any nn.LSTM under autocast on the CPU (the attention model's
encoder). With `lengths`, a sequence's state stops changing after its last real step
(as with pack_padded_sequence): the final state is exact under padding, and outputs at padded
positions are zero, as pad_packed_sequence leaves them.

With ``mm_dtype=torch.bfloat16`` (``train.amp``, ``s2s.precision``) every product above runs in
bf16 on bf16 copies of the weights, the layer input and h, and returns to fp32 at once: the gates,
c, h and all element-wise maths are fp32, and so are the weight gradients' tensors, so SGD
updates fp32 master weights. Their values are the bf16 products': the CPU library's bf16 matrix
product sums in fp32 but returns bf16 (it has no fp32 output), so each weight gradient is rounded
to bf16 once a step (a relative 2^-9, not summed over steps).
The layer's output sequence is bf16 (its consumers only multiply it).

Dimension letters: see ``s2s.model.lstm``; tensors here are time-major, (T, N, ...).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from s2s.model.recurrence import linear


class _LSTMLayer(torch.autograd.Function):
    """One LSTM layer over a whole sequence.

    Inputs: x (T, N, E) contiguous, h0, c0 (N, H), w_ih (4H, E), w_hh (4H, H), b_ih, b_hh (4H,),
    keep (T, N, 1) float, 1 at real steps and 0 at padding, or None.
    Outputs: h_t for every t (T, N, H) (at padded steps: the held state), final h and c (N, H).
    """

    @staticmethod
    def forward(ctx, x, h0, c0, w_ih, w_hh, b_ih, b_hh, keep, mm_dtype):
        if mm_dtype is not None:
            return _LSTMLayer._forward_low(ctx, x, h0, c0, w_ih, w_hh, b_ih, b_hh, keep, mm_dtype)
        T, N, E = x.shape
        H = w_hh.shape[1]
        # gates[t] holds step t's pre-activations, then (in place) its activations i, f, g, o.
        gates = torch.addmm(b_ih + b_hh, x.view(T * N, E), w_ih.t()).view(T, N, 4 * H)
        hs = x.new_empty(T + 1, N, H)  # hs[t] = h before step t; hs[1:] is the output
        cs = x.new_empty(T + 1, N, H)
        tc = x.new_empty(T, N, H)  # tanh(c_t)
        hs[0], cs[0] = h0, c0
        held = keep is not None and bool((keep == 0).any())
        for t in range(T):
            g = gates[t].addmm_(hs[t], w_hh.t())  # (N, 4H)
            _cell(g, cs, hs, tc, t, H)
            if held:  # padded rows keep their state
                _hold(keep[t], cs, hs, t)
        ctx.mm_dtype = None
        ctx.save_for_backward(x, w_ih, w_hh, gates, hs, cs, tc, keep if held else None)
        return hs[1:], hs[T].clone(), cs[T].clone()

    @staticmethod
    def _forward_low(ctx, x, h0, c0, w_ih, w_hh, b_ih, b_hh, keep, dt):
        """forward with the two products in `dt` (bf16): weights and the layer input cast once,
        h kept in `dt` beside its fp32 value for the next step's product; the pre-activations,
        gates, c and h themselves in fp32. The output sequence is in `dt` (the next layer and
        the softmax layer only multiply it); the final h and c are fp32."""
        T, N, E = x.shape
        H = w_hh.shape[1]
        x_d, w_ih_d, w_hh_d = x.to(dt), w_ih.to(dt), w_hh.to(dt)
        gates = torch.mm(x_d.view(T * N, E), w_ih_d.t()).float().add_(b_ih + b_hh)
        gates = gates.view(T, N, 4 * H)
        hs = h0.new_empty(T + 1, N, H)
        cs = h0.new_empty(T + 1, N, H)
        tc = h0.new_empty(T, N, H)
        hs_d = x_d.new_empty(T + 1, N, H)  # hs in dt: the recurrent product's input, the output
        hs[0], cs[0] = h0, c0
        hs_d[0] = h0
        held = keep is not None and bool((keep == 0).any())
        for t in range(T):
            g = gates[t].add_(torch.mm(hs_d[t], w_hh_d.t()))  # (N, 4H) fp32 += dt
            _cell(g, cs, hs, tc, t, H)
            if held:
                _hold(keep[t], cs, hs, t)
            hs_d[t + 1].copy_(hs[t + 1])
        ctx.mm_dtype, ctx.x_dtype = dt, x.dtype
        ctx.save_for_backward(x_d, w_ih_d, w_hh_d, gates, hs_d, cs, tc, keep if held else None)
        return hs_d[1:], hs[T].clone(), cs[T].clone()

    @staticmethod
    def backward(ctx, d_out, d_hT, d_cT):
        x, w_ih, w_hh, gates, hs, cs, tc, keep = ctx.saved_tensors
        dt = ctx.mm_dtype  # None: fp32; else x, w_ih, w_hh and hs are in dt (_forward_low)
        T, N, E = x.shape
        H = w_hh.shape[1]
        # All that does not depend on the incoming gradient, over all steps at once:
        # coef (T, N, 4H) = d gate pre-activation / d c_t for i, f, g (times c_t's gradient) and
        # / d h_t for o (times h_t's gradient); dc_dh = d c_t / d h_t through h = o tanh(c).
        i, f, g, o = gates.chunk(4, 2)  # each (T, N, H)
        coef = torch.empty_like(gates)
        ci, cf, cg, co = coef.chunk(4, 2)
        torch.mul(g, i * (1 - i), out=ci)  # d(i g)/d pre_i
        torch.mul(cs[:-1], f * (1 - f), out=cf)  # d(f c_prev)/d pre_f
        torch.mul(i, 1 - g * g, out=cg)  # d(i g)/d pre_g
        torch.mul(tc, o * (1 - o), out=co)  # d(o tanh c)/d pre_o
        dc_dh = o * (1 - tc * tc)  # (T, N, H)
        f_step = f
        if keep is not None:  # a padded step changes nothing: no gate gradient, c passes through
            coef.mul_(keep)
            dc_dh.mul_(keep)
            f_step = torch.where(keep.bool(), f, 1.0)
        dG = torch.empty_like(gates)  # (T, N, 4H) gradients of the gate pre-activations
        dG_d = None if dt is None else gates.new_empty(gates.shape, dtype=dt)  # dG in dt
        dGv = dG.view(T, N, 4, H)
        coefv = coef.view(T, N, 4, H)
        dh = d_out[T - 1] + d_hT  # (N, H): dL/dh_t, all paths
        dc = d_cT.clone()  # (N, H): dL/dc_t from later steps
        for t in range(T - 1, -1, -1):
            dc.addcmul_(dh, dc_dh[t])  # + the path through h_t = o tanh(c_t)
            torch.mul(dc[:, None, :], coefv[t, :, :3], out=dGv[t, :, :3])  # i, f, g
            torch.mul(dh, co[t], out=dG[t, :, 3 * H :])  # o
            prev = d_out[t - 1] if t > 0 else None
            if dt is not None:  # the product in dt, accumulated into fp32
                back = torch.mm(dG_d[t].copy_(dG[t]), w_hh)  # (N, H) in dt
                if keep is not None:
                    dh_prev = torch.addcmul(dh, dh, keep[t], value=-1).add_(back)
                else:
                    dh_prev = back.float()
                if prev is not None:
                    dh_prev.add_(prev)
            elif keep is not None:  # at a padded step h_{t-1} = h_t: its gradient passes through
                dh_prev = torch.addcmul(dh, dh, keep[t], value=-1)  # dh * (1 - keep)
                dh_prev.addmm_(dG[t], w_hh)
                if prev is not None:
                    dh_prev.add_(prev)
            elif prev is not None:
                dh_prev = torch.addmm(prev, dG[t], w_hh)
            else:
                dh_prev = dG[t] @ w_hh
            dc.mul_(f_step[t])
            dh = dh_prev
        flat = dG.view(T * N, 4 * H)
        d_b = flat.sum(0)
        if dt is not None:
            flat_d = dG_d.view(T * N, 4 * H)
            d_x = (flat_d @ w_ih).view(T, N, E).to(ctx.x_dtype)
            d_w_ih = (flat_d.t() @ x.view(T * N, E)).float()
            d_w_hh = (flat_d.t() @ hs[:-1].reshape(T * N, H)).float()
            return d_x, dh, dc, d_w_ih, d_w_hh, d_b, d_b.clone(), None, None
        d_x = (flat @ w_ih).view(T, N, E)
        d_w_ih = flat.t() @ x.view(T * N, E)
        d_w_hh = flat.t() @ hs[:-1].reshape(T * N, H)
        return d_x, dh, dc, d_w_ih, d_w_hh, d_b, d_b.clone(), None, None


def _cell(g: Tensor, cs: Tensor, hs: Tensor, tc: Tensor, t: int, H: int) -> None:
    """Step t's gates from its pre-activations g (N, 4H), in place, then c_{t+1} and h_{t+1}."""
    g[:, : 2 * H].sigmoid_()  # i, f
    g[:, 2 * H : 3 * H].tanh_()  # g
    g[:, 3 * H :].sigmoid_()  # o
    i, f, gg, o = g.chunk(4, 1)
    c = torch.mul(f, cs[t], out=cs[t + 1]).addcmul_(i, gg)
    torch.mul(o, torch.tanh(c, out=tc[t]), out=hs[t + 1])


def _hold(keep_t: Tensor, cs: Tensor, hs: Tensor, t: int) -> None:
    """Rows whose step t is padding keep their state: keep_t (N, 1) is 0 there."""
    m = keep_t.bool()  # (N, 1)
    torch.where(m, cs[t + 1], cs[t], out=cs[t + 1])
    torch.where(m, hs[t + 1], hs[t], out=hs[t + 1])


def lstm_stack(lstm: nn.LSTM, x: Tensor, state: tuple[Tensor, Tensor] | None = None,
               lengths: Tensor | None = None, *, mm_dtype: torch.dtype | None = None
               ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
    """What ``lstm(x, state)`` (batch_first, no dropout, either direction) returns, or with
    ``lengths`` what it returns on the packed batch, after pad_packed_sequence.

    x: (N, T, E); state: (h, c), each (L * directions, N, H), default zeros; lengths: (N,).
    Returns outputs (N, T, H * directions) and the final (h, c), each (L * directions, N, H).
    ``mm_dtype`` (bf16, ``s2s.precision``): the matrix products in that dtype, the state, gates
    and gradients of the weights in fp32; the outputs are then in ``mm_dtype``, h and c fp32.
    A backward direction reads each sequence's own steps last to first (padding stays behind
    them), as torch's packed LSTM does.
    """
    if lstm.proj_size or (lstm.dropout and lstm.training):
        raise ValueError("lstm_stack: nn.LSTM without projections or dropout only")
    N, T, _ = x.shape
    L, H, D = lstm.num_layers, lstm.hidden_size, 2 if lstm.bidirectional else 1
    state_dtype = x.dtype if mm_dtype is None else torch.float32
    if state is None:
        zeros = x.new_zeros(L * D, N, H, dtype=state_dtype)
        state = (zeros, zeros)
    keep = None
    if lengths is not None:
        steps = torch.arange(T, device=x.device)
        keep = (steps[:, None] < lengths.to(x.device)[None, :]).to(state_dtype)[:, :, None]  # (T,N,1)
    layer_in = x.transpose(0, 1).contiguous()  # (T, N, E)
    hs, cs = [], []
    for k in range(L):
        outs = []
        for d in range(D):
            suffix = f"_l{k}" + ("_reverse" if d else "")
            inp = layer_in if d == 0 else reverse_steps(layer_in, lengths)
            out, h, c = _LSTMLayer.apply(
                inp, state[0][k * D + d], state[1][k * D + d],
                *(getattr(lstm, f"{name}{suffix}") for name in (
                    "weight_ih", "weight_hh", "bias_ih", "bias_hh")), keep, mm_dtype)
            outs.append(out if d == 0 else reverse_steps(out, lengths))
            hs.append(h)
            cs.append(c)
        layer_in = outs[0] if D == 1 else torch.cat(outs, dim=-1)  # (T, N, H * D)
    # (T, N, H * D): zeros at padding
    out = layer_in if keep is None else layer_in * keep.to(layer_in.dtype)
    return out.transpose(0, 1), (torch.stack(hs), torch.stack(cs))  # (N, T, HD), (LD, N, H) x 2


def reverse_steps(x: Tensor, lengths: Tensor | None) -> Tensor:
    """x (T, N, D) with each column's first lengths[n] steps reversed; padding stays in place."""
    if lengths is None:
        return x.flip(0)
    T = x.shape[0]
    pos = torch.arange(T, device=x.device)[:, None]  # (T, 1)
    rev = lengths.to(x.device)[None, :] - 1 - pos  # (T, N)
    index = torch.where(rev >= 0, rev, pos.expand_as(rev))  # padded steps map to themselves
    return x.gather(0, index[:, :, None].expand_as(x))


def lstm_step(lstm: nn.LSTM, x: Tensor, state: tuple[Tensor, Tensor] | None = None, *,
              mm_dtype: torch.dtype | None = None) -> tuple[Tensor, tuple[Tensor, Tensor]]:
    """What ``lstm(x, state)`` returns for a single time step, x: (N, 1, E), through
    torch.lstm_cell per layer: cheaper on the CPU than nn.LSTM's oneDNN path at beam search's
    batch sizes (bench/README.md).

    ``mm_dtype`` (under ``torch.autocast``, ``s2s.precision``): the two products in that dtype
    through ``F.linear``, so autocast casts each weight once per context; the gates, c and h in
    fp32 (torch.lstm_cell has no autocast rule: it would run in fp32 throughout)."""
    N = x.shape[0]
    L, H = lstm.num_layers, lstm.hidden_size
    if state is None:
        zeros = x.new_zeros(L, N, H, dtype=x.dtype if mm_dtype is None else torch.float32)
        state = (zeros, zeros)
    inp = x[:, 0]  # (N, E)
    hs, cs = [], []
    for k in range(L):
        weights = (getattr(lstm, f"weight_ih_l{k}"), getattr(lstm, f"weight_hh_l{k}"),
                   getattr(lstm, f"bias_ih_l{k}"), getattr(lstm, f"bias_hh_l{k}"))
        if mm_dtype is None:
            h, c = torch.lstm_cell(inp, (state[0][k], state[1][k]), *weights)
        else:
            h, c = _lstm_cell_low(inp, state[0][k], state[1][k], *weights)
        hs.append(h)
        cs.append(c)
        inp = h
    return inp[:, None, :], (torch.stack(hs), torch.stack(cs))  # (N, 1, H), (L, N, H) x 2


def _lstm_cell_low(x: Tensor, h: Tensor, c: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor,
                   b_hh: Tensor) -> tuple[Tensor, Tensor]:
    """torch.lstm_cell with its products under autocast and the rest in fp32. x: (N, E),
    h, c: (N, H) fp32. Returns h, c (N, H) fp32."""
    # (recurrence.linear: inside a loop over steps, each weight's gradient summed in fp32)
    gates = linear(x, w_ih, b_ih).float()
    gates = gates.add_(linear(h, w_hh, b_hh))  # (N, 4H) fp32
    i, f, g, o = gates.chunk(4, 1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c
