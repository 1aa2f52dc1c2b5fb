"""Stacked LSTMs: the paper's peephole cell (Graves 2013, eqs. 7-11) and torch's nn.LSTM.

Dimension letters used in shape comments throughout ``s2s.model``:
    N  batch (sentences, or sentences x beams while decoding)
    S  source length          T  target length
    E  embedding size         H  hidden size (cells per layer)
    L  layers                 V  vocabulary size

Both stacks take and return the full state as two tensors ``h, c`` of shape (L, N, H), with the
same gate layout as nn.LSTM (input, forget, cell, output), so the same weights can be loaded into
either: with the peepholes at zero the peephole stack computes exactly what nn.LSTM computes.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from s2s.model.fused import lstm_stack, lstm_step
from s2s.precision import matmul_dtype


class PeepholeLSTMCell(nn.Module):
    """One LSTM layer with diagonal peephole connections (Graves 2013, eqs. 7-11).

        i_t = sigma(W_xi x_t + W_hi h_{t-1} + w_ci * c_{t-1} + b_i)
        f_t = sigma(W_xf x_t + W_hf h_{t-1} + w_cf * c_{t-1} + b_f)
        c_t = f_t * c_{t-1} + i_t * tanh(W_xc x_t + W_hc h_{t-1} + b_c)
        o_t = sigma(W_xo x_t + W_ho h_{t-1} + w_co * c_t + b_o)
        h_t = o_t * tanh(c_t)

    Attributes:
        weight_ih: (4H, E_in)   weight_hh: (4H, H)   bias: (4H,)   (gate order i, f, c, o)
        peephole: (3, H) rows w_ci, w_cf, w_co (diagonal weights, hence vectors)
    """

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.hidden_size = hidden_size
        self.weight_ih = nn.Parameter(torch.empty(4 * hidden_size, input_size))
        self.weight_hh = nn.Parameter(torch.empty(4 * hidden_size, hidden_size))
        self.bias = nn.Parameter(torch.empty(4 * hidden_size))
        self.peephole = nn.Parameter(torch.empty(3, hidden_size))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """nn.LSTM's default, U(-1/sqrt(H), 1/sqrt(H)); Seq2Seq.init_weights replaces it (§3.4)."""
        bound = self.hidden_size ** -0.5
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def forward(self, gates_x: Tensor, h: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
        """One time step. gates_x = W_ih x_t + b, precomputed for all steps: (N, 4H)."""
        gates = gates_x + h @ self.weight_hh.t()  # (N, 4H)
        gi, gf, gc, go = gates.chunk(4, dim=1)  # each (N, H)
        i = torch.sigmoid(gi + self.peephole[0] * c)
        f = torch.sigmoid(gf + self.peephole[1] * c)
        c = f * c + i * torch.tanh(gc)
        o = torch.sigmoid(go + self.peephole[2] * c)  # W_co sees c_t, not c_{t-1}
        return o * torch.tanh(c), c


class PeepholeLSTM(nn.Module):
    """A stack of PeepholeLSTMCell layers over a (N, T, E) batch, batch_first like nn.LSTM here."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int):
        super().__init__()
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.cells = nn.ModuleList(
            PeepholeLSTMCell(input_size if k == 0 else hidden_size, hidden_size)
            for k in range(num_layers)
        )

    def forward(self, x: Tensor, state: tuple[Tensor, Tensor] | None = None,
                lengths: Tensor | None = None) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """x: (N, T, E). Returns outputs (N, T, H) and the final (h, c), each (L, N, H).

        With `lengths` (N,), a sequence's state stops changing after its last real step, so the
        final state is the state at its own end (padding at the end is ignored exactly).
        """
        N, T, _ = x.shape
        if state is None:
            zeros = x.new_zeros(self.num_layers, N, self.hidden_size)
            state = (zeros, zeros)
        h_all, c_all = state
        mask = None
        if lengths is not None:
            steps = torch.arange(T, device=x.device)
            mask = (steps[None, :] < lengths[:, None]).unsqueeze(-1)  # (N, T, 1)
        hs, cs = [], []
        layer_in = x
        for k, cell in enumerate(self.cells):
            h, c = h_all[k], c_all[k]  # (N, H)
            gates_x = torch.addmm(cell.bias, layer_in.reshape(N * T, -1), cell.weight_ih.t())
            # unbind once: indexing gates_x[:, t] per step would make each step's backward
            # allocate and add a full (N, T, 4H) gradient, quadratic in T (bench/README.md).
            steps_x = gates_x.view(N, T, -1).unbind(1)  # T x (N, 4H)
            outs = []
            for t in range(T):
                h_new, c_new = cell(steps_x[t], h, c)
                if mask is not None:
                    h_new = torch.where(mask[:, t], h_new, h)
                    c_new = torch.where(mask[:, t], c_new, c)
                h, c = h_new, c_new
                outs.append(h)
            layer_in = torch.stack(outs, dim=1)  # (N, T, H)
            hs.append(h)
            cs.append(c)
        return layer_in, (torch.stack(hs), torch.stack(cs))


def run_padded(rnn: nn.RNNBase, x: Tensor, state=None, lengths: Tensor | None = None):
    """``rnn(x, state)`` for a batch_first torch RNN (LSTM or GRU); with ``lengths`` (N,) over the
    packed batch, so the final state is each sequence's own and padded outputs are zero.
    Returns outputs (N, T, D) and the RNN's final state as torch returns it."""
    if lengths is None:
        return rnn(x, state)
    packed = nn.utils.rnn.pack_padded_sequence(
        x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    out, final = rnn(packed, state)
    out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
    return out, final


class StandardLSTM(nn.Module):
    """torch's nn.LSTM (cuDNN on GPU) behind the same interface as PeepholeLSTM.

    On the CPU the same weights run through ``s2s.model.fused`` instead: ``lstm_stack`` when
    training (the same maths, a faster backward), ``lstm_step`` for single steps (decoding);
    bench/README.md has the numbers. ``fused_cpu = False`` turns both off (benchmarks compare).
    """

    fused_cpu = True

    def __init__(self, input_size: int, hidden_size: int, num_layers: int):
        super().__init__()
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True)

    def forward(self, x: Tensor, state: tuple[Tensor, Tensor] | None = None,
                lengths: Tensor | None = None) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        mm_dtype = matmul_dtype(x)  # bf16 under autocast (s2s.precision), else None
        if self.fused_cpu and x.device.type == "cpu":
            if x.shape[1] == 1 and lengths is None:  # a decoding step
                return lstm_step(self.lstm, x, state, mm_dtype=mm_dtype)
            if (self.training and torch.is_grad_enabled()) or mm_dtype is not None:
                # (in bf16 also when encoding for decoding: nn.LSTM under autocast would keep
                # c in bf16)
                return lstm_stack(self.lstm, x, state, lengths, mm_dtype=mm_dtype)
        out, (h, c) = run_padded(self.lstm, x, state, lengths)
        return out, (h, c)  # (N, T, H), (L, N, H) x 2



@torch.no_grad()
def set_forget_bias(module: nn.Module, value: float) -> None:
    """Set the forget gates' bias of every LSTM layer in `module` (both directions of a
    bidirectional nn.LSTM) to `value`: nn.LSTM adds two biases, so b_ih's forget chunk (gate
    order i, f, g, o) becomes `value` and b_hh's 0; a PeepholeLSTMCell's one bias gets `value`.
    Other parameters, and GRUs, are left as they are."""
    for m in module.modules():
        if isinstance(m, nn.LSTM):
            H = m.hidden_size
            for name, p in m.named_parameters(recurse=False):
                if name.startswith("bias_ih"):
                    p[H : 2 * H] = value
                elif name.startswith("bias_hh"):
                    p[H : 2 * H] = 0.0
        elif isinstance(m, PeepholeLSTMCell):
            H = m.hidden_size
            m.bias[H : 2 * H] = value
