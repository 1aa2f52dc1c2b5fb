"""The GRU of Cho et al. (2014), "Learning phrase representations using RNN encoder-decoder for
statistical machine translation", eqs. 5-8 (§2.3), as a stack behind the interface of
``s2s.model.stacks`` (`cell: cho_gru`).

    r  = sigma(W_r x + U_r h + b_r)          reset gate (eq. 5)
    z  = sigma(W_z x + U_z h + b_z)          update gate (eq. 6)
    h~ = tanh(W x + U (r * h) + b)           candidate (eq. 8)
    h' = z * h + (1 - z) * h~                (eq. 7: z keeps the old state)

torch's nn.GRU (`cell: gru`) applies the reset gate after the recurrent product,
n = tanh(W_in x + b_in + r * (W_hn h + b_hn)); here r scales h before U, as in the paper, so a
unit whose reset gate is shut drops the previous state from its candidate altogether. The paper
writes no biases; there is one per gate (b_r, b_z, b), which under the paper's uniform init are
uniform like every other parameter.

The input products of all steps are one matmul before the loop; each step runs one recurrent
matmul for r and z together and one for U (r * h). Under bf16 autocast the products run in bf16
and the gates and the state in fp32 (``s2s.precision``).

With `lengths`, a sequence's state stops changing after its last real step, so the final state is
its own; outputs at padded positions are zero, as nn.GRU over a packed batch leaves them.

Dimension letters: see ``s2s.model.lstm``; tensors inside are time-major, (T, N, ...).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from s2s.model import recurrence
from s2s.model.fused import reverse_steps
from s2s.model.recurrence import linear
from s2s.precision import full, matmul_dtype


class ChoGRUCell(nn.Module):
    """The parameters of one GRU layer (one direction), in the paper's names.

    Attributes:
        weight_ih: (3H, E_in) rows W_r, W_z, W      bias: (3H,) b_r, b_z, b
        weight_hh_rz: (2H, H) rows U_r, U_z         weight_hh_n: (H, H) U
    """

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.hidden_size = hidden_size
        self.weight_ih = nn.Parameter(torch.empty(3 * hidden_size, input_size))
        self.weight_hh_rz = nn.Parameter(torch.empty(2 * hidden_size, hidden_size))
        self.weight_hh_n = nn.Parameter(torch.empty(hidden_size, hidden_size))
        self.bias = nn.Parameter(torch.empty(3 * hidden_size))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """nn.GRU's default, U(-1/sqrt(H), 1/sqrt(H)); EncoderDecoder.init_weights replaces it."""
        bound = self.hidden_size ** -0.5
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def forward(self, x: Tensor, h: Tensor, keep: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """The layer over a sequence: x (T, N, E_in), h (N, H) the state before it, keep (T, N, 1)
        bool, False at padded steps (None: no padding). Returns every step's h (T, N, H) (at a
        padded step, the held state) and the final h (N, H)."""
        H = self.hidden_size
        gx = full(linear(x, self.weight_ih)) + self.bias  # (T, N, 3H), fp32
        # unbind once: indexing gx[t] per step would make each step's backward allocate and add a
        # full (T, N, 3H) gradient (see s2s.model.lstm)
        # (split and chunk, not slices: their backward joins the pieces' gradients, where a
        # slice's would fill a zero tensor and add into it)
        gx_rz, gx_n = gx.split([2 * H, H], dim=-1)
        steps_rz, steps_n = gx_rz.unbind(0), gx_n.unbind(0)  # T x (N, 2H), T x (N, H)
        outs = []
        for t in range(x.shape[0]):
            rz = torch.sigmoid(steps_rz[t] + full(linear(h, self.weight_hh_rz)))  # (N, 2H)
            r, z = rz.chunk(2, dim=1)  # (N, H) each
            n = torch.tanh(steps_n[t] + full(linear(r * h, self.weight_hh_n)))  # (N, H)
            h_new = torch.lerp(n, h, z)  # z * h + (1 - z) * n
            h = h_new if keep is None else torch.where(keep[t], h_new, h)
            outs.append(h)
        return torch.stack(outs), h  # (T, N, H), (N, H)


class ChoGRU(nn.Module):
    """A stack of ChoGRUCell layers over a (N, T, E) batch, batch_first, with the interface of the
    LSTM stacks: state and final state (h, None), h (L * directions, N, H). Bidirectional (the
    attention encoder), layer k reads [forward; backward] outputs of layer k - 1 and the final
    states are ordered as nn.GRU orders them: layer 0 forward, layer 0 backward, layer 1 ...

    Attributes: cells: L (x 2 if bidirectional) ChoGRUCell, in that order.
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int, *,
                 bidirectional: bool = False):
        super().__init__()
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.directions = 2 if bidirectional else 1
        self.cells = nn.ModuleList(
            ChoGRUCell(input_size if k == 0 else hidden_size * self.directions, hidden_size)
            for k in range(num_layers) for _ in range(self.directions))

    def forward(self, x: Tensor, state: tuple[Tensor, None] | None = None,
                lengths: Tensor | None = None) -> tuple[Tensor, tuple[Tensor, None]]:
        """x: (N, T, E). Returns outputs (N, T, D) (D = H x directions) and (h, None), h the
        final state of every layer and direction, (L * directions, N, H)."""
        N, T, _ = x.shape
        h0 = state[0] if state is not None else None
        if h0 is None:
            # fp32 under autocast: the state is fp32 whatever the products' dtype
            dtype = torch.float32 if matmul_dtype(x) is not None else x.dtype
            h0 = x.new_zeros(len(self.cells), N, self.hidden_size, dtype=dtype)
        keep = None
        # (on the CPU the check is free; elsewhere it would wait for the device: mask always,
        # which holds no real step's state)
        if lengths is not None and (lengths.device.type != "cpu" or bool((lengths < T).any())):
            steps = torch.arange(T, device=x.device)
            keep = (steps[:, None] < lengths.to(x.device)[None, :])[:, :, None]  # (T, N, 1)
        with recurrence.steps(x):  # under autocast: each U's gradient summed in fp32
            return self._layers(x, h0, keep, lengths)

    def _layers(self, x: Tensor, h0: Tensor, keep: Tensor | None, lengths: Tensor | None
                ) -> tuple[Tensor, tuple[Tensor, None]]:
        layer_in = x.transpose(0, 1)  # (T, N, E)
        finals = []
        for k in range(self.num_layers):
            outs = []
            for d in range(self.directions):
                j = k * self.directions + d
                if d == 0:
                    out, h = self.cells[j](layer_in, h0[j], keep)
                else:  # the backward direction reads each sequence from its last real step
                    out, h = self.cells[j](reverse_steps(layer_in, lengths), h0[j], keep)
                    out = reverse_steps(out, lengths)
                outs.append(out)
                finals.append(h)
            layer_in = outs[0] if self.directions == 1 else torch.cat(outs, dim=-1)  # (T, N, D)
        if keep is not None:
            layer_in = layer_in * keep  # zeros at padded positions
        return layer_in.transpose(0, 1), (torch.stack(finals), None)  # (N, T, D), (L*dirs, N, H)


def gru_sequence(gru: nn.GRU, x: Tensor, h0: Tensor | None = None,
                 lengths: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """What ``s2s.model.lstm.run_padded(gru, x, h0, lengths)`` returns for a batch_first nn.GRU
    (any layers, either direction), written out step by step so that under autocast each
    recurrent weight's gradient is summed over the steps in fp32 (``s2s.model.recurrence``):
    torch's CPU kernel runs its per-step products under autocast's one cast of each weight, whose
    gradients autograd then adds in bf16. The products in autocast's dtype, the gates and the
    state in fp32, as :func:`s2s.model.stacks.gru_step` computes one step; with `lengths` (N,)
    each sequence's final state is its own and outputs at padded positions are zero.

    x: (N, T, E), h0: (L * directions, N, H) or None. Returns outputs (N, T, D), D = H x
    directions, and the final state (L * directions, N, H)."""
    if gru.dropout and gru.training:
        raise ValueError("gru_sequence: nn.GRU without dropout only")
    N, T, _ = x.shape
    L, H, D = gru.num_layers, gru.hidden_size, 2 if gru.bidirectional else 1
    if h0 is None:
        h0 = x.new_zeros(L * D, N, H, dtype=torch.float32)
    keep = None
    if lengths is not None:
        steps = torch.arange(T, device=x.device)
        keep = (steps[:, None] < lengths.to(x.device)[None, :])[:, :, None]  # (T, N, 1)
    layer_in = x.transpose(0, 1)  # (T, N, E)
    finals = []
    with recurrence.steps(x):
        for k in range(L):
            outs = []
            for d in range(D):
                suffix = f"_l{k}" + ("_reverse" if d else "")
                w_ih, w_hh, b_ih, b_hh = (getattr(gru, f"{name}{suffix}") for name in (
                    "weight_ih", "weight_hh", "bias_ih", "bias_hh"))
                inp = layer_in if d == 0 else reverse_steps(layer_in, lengths)
                gx = full(torch.nn.functional.linear(inp, w_ih, b_ih))  # (T, N, 3H): once
                h, out = h0[k * D + d].float(), []
                for t, gx_t in enumerate(gx.unbind(0)):  # (unbind once: see ChoGRUCell)
                    gh = full(linear(h, w_hh, b_hh))  # (N, 3H)
                    xr, xz, xn = gx_t.chunk(3, 1)
                    hr, hz, hn = gh.chunk(3, 1)
                    r = torch.sigmoid(xr + hr)
                    z = torch.sigmoid(xz + hz)
                    n = torch.tanh(xn + r * hn)
                    h_new = torch.lerp(n, h, z)  # (1 - z) * n + z * h
                    h = h_new if keep is None else torch.where(keep[t], h_new, h)
                    out.append(h)
                out = torch.stack(out)  # (T, N, H)
                outs.append(out if d == 0 else reverse_steps(out, lengths))
                finals.append(h)
            layer_in = outs[0] if D == 1 else torch.cat(outs, dim=-1)  # (T, N, D)
    if keep is not None:
        layer_in = layer_in * keep  # zeros at padded positions
    return layer_in.transpose(0, 1), torch.stack(finals)  # (N, T, D), (L * D, N, H)
