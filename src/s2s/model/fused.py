"""nn.LSTM's training forward and backward for the CPU, written out: same weights, same maths,
faster backward.

torch's CPU nn.LSTM (oneDNN) spends three times its forward time in backward (bench/README.md).
Here backward walks the recurrence step by step with only what must be sequential (one
(N, 4H) @ (4H, H) GEMM and three element-wise ops per step), and computes everything else over
all time steps at once: the gate derivatives before the loop, and after it the weight gradients
and the input gradient as three large GEMMs over T x N rows:

    dW_hh = dG^T @ H_prev     dW_ih = dG^T @ X     dX = dG @ W_ih     (dG: (T*N, 4H))

`lstm_stack` runs an nn.LSTM's layers (weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k},
bias_hh_l{k}, gate order i, f, g, o) this way; `s2s.model.lstm.StandardLSTM` uses it when it
trains on the CPU. With `lengths`, a sequence's state stops changing after its last real step
(as with pack_padded_sequence): the final state is exact under padding, and outputs at padded
positions are zero, as pad_packed_sequence leaves them.

Dimension letters: see ``s2s.model.lstm``; tensors here are time-major, (T, N, ...).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class _LSTMLayer(torch.autograd.Function):
    """One LSTM layer over a whole sequence.

    Inputs: x (T, N, E) contiguous, h0, c0 (N, H), w_ih (4H, E), w_hh (4H, H), b_ih, b_hh (4H,),
    keep (T, N, 1) float, 1 at real steps and 0 at padding, or None.
    Outputs: h_t for every t (T, N, H) (at padded steps: the held state), final h and c (N, H).
    """

    @staticmethod
    def forward(ctx, x, h0, c0, w_ih, w_hh, b_ih, b_hh, keep):
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
            g[:, : 2 * H].sigmoid_()  # i, f
            g[:, 2 * H : 3 * H].tanh_()  # g
            g[:, 3 * H :].sigmoid_()  # o
            i, f, gg, o = g.chunk(4, 1)
            c = torch.mul(f, cs[t], out=cs[t + 1]).addcmul_(i, gg)
            torch.mul(o, torch.tanh(c, out=tc[t]), out=hs[t + 1])
            if held:  # padded rows keep their state
                m = keep[t].bool()  # (N, 1)
                torch.where(m, cs[t + 1], cs[t], out=cs[t + 1])
                torch.where(m, hs[t + 1], hs[t], out=hs[t + 1])
        ctx.save_for_backward(x, w_ih, w_hh, gates, hs, cs, tc, keep if held else None)
        return hs[1:], hs[T].clone(), cs[T].clone()

    @staticmethod
    def backward(ctx, d_out, d_hT, d_cT):
        x, w_ih, w_hh, gates, hs, cs, tc, keep = ctx.saved_tensors
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
        dGv = dG.view(T, N, 4, H)
        coefv = coef.view(T, N, 4, H)
        dh = d_out[T - 1] + d_hT  # (N, H): dL/dh_t, all paths
        dc = d_cT.clone()  # (N, H): dL/dc_t from later steps
        for t in range(T - 1, -1, -1):
            dc.addcmul_(dh, dc_dh[t])  # + the path through h_t = o tanh(c_t)
            torch.mul(dc[:, None, :], coefv[t, :, :3], out=dGv[t, :, :3])  # i, f, g
            torch.mul(dh, co[t], out=dG[t, :, 3 * H :])  # o
            prev = d_out[t - 1] if t > 0 else None
            if keep is not None:  # at a padded step h_{t-1} = h_t: its gradient passes through
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
        d_x = (flat @ w_ih).view(T, N, E)
        d_w_ih = flat.t() @ x.view(T * N, E)
        d_w_hh = flat.t() @ hs[:-1].reshape(T * N, H)
        d_b = flat.sum(0)
        return d_x, dh, dc, d_w_ih, d_w_hh, d_b, d_b.clone(), None


def lstm_stack(lstm: nn.LSTM, x: Tensor, state: tuple[Tensor, Tensor] | None = None,
               lengths: Tensor | None = None) -> tuple[Tensor, tuple[Tensor, Tensor]]:
    """What ``lstm(x, state)`` (batch_first, unidirectional, no dropout) returns, or with
    ``lengths`` what it returns on the packed batch, after pad_packed_sequence.

    x: (N, T, E); state: (h, c), each (L, N, H), default zeros; lengths: (N,).
    Returns outputs (N, T, H) and the final (h, c), each (L, N, H).
    """
    if lstm.bidirectional or lstm.proj_size or (lstm.dropout and lstm.training):
        raise ValueError("lstm_stack: unidirectional nn.LSTM without projections or dropout only")
    N, T, _ = x.shape
    L, H = lstm.num_layers, lstm.hidden_size
    if state is None:
        zeros = x.new_zeros(L, N, H)
        state = (zeros, zeros)
    keep = None
    if lengths is not None:
        steps = torch.arange(T, device=x.device)
        keep = (steps[:, None] < lengths.to(x.device)[None, :]).to(x.dtype)[:, :, None]  # (T,N,1)
    layer_in = x.transpose(0, 1).contiguous()  # (T, N, E)
    hs, cs = [], []
    for k in range(L):
        layer_in, h, c = _LSTMLayer.apply(
            layer_in, state[0][k], state[1][k], getattr(lstm, f"weight_ih_l{k}"),
            getattr(lstm, f"weight_hh_l{k}"), getattr(lstm, f"bias_ih_l{k}"),
            getattr(lstm, f"bias_hh_l{k}"), keep)
        hs.append(h)
        cs.append(c)
    out = layer_in if keep is None else layer_in * keep  # (T, N, H): zeros at padding
    return out.transpose(0, 1), (torch.stack(hs), torch.stack(cs))  # (N, T, H), (L, N, H) x 2


def lstm_step(lstm: nn.LSTM, x: Tensor, state: tuple[Tensor, Tensor] | None = None
              ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
    """What ``lstm(x, state)`` returns for a single time step, x: (N, 1, E), through
    torch.lstm_cell per layer. On the CPU, nn.LSTM's oneDNN path costs 2x more than this at
    beam search's batch sizes (60 rows: 2.7 vs 1.3 ms for a 2 x 256 stack; bench/README.md)."""
    N = x.shape[0]
    L, H = lstm.num_layers, lstm.hidden_size
    if state is None:
        zeros = x.new_zeros(L, N, H)
        state = (zeros, zeros)
    inp = x[:, 0]  # (N, E)
    hs, cs = [], []
    for k in range(L):
        h, c = torch.lstm_cell(inp, (state[0][k], state[1][k]),
                               getattr(lstm, f"weight_ih_l{k}"), getattr(lstm, f"weight_hh_l{k}"),
                               getattr(lstm, f"bias_ih_l{k}"), getattr(lstm, f"bias_hh_l{k}"))
        hs.append(h)
        cs.append(c)
        inp = h
    return inp[:, None, :], (torch.stack(hs), torch.stack(cs))  # (N, 1, H), (L, N, H) x 2
