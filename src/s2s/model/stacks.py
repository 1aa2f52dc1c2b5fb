"""One constructor for the recurrent stacks every model uses: `cell` picks the paper's peephole
LSTM, nn.LSTM, nn.GRU (`gru`) or Cho et al.'s GRU (`cho_gru`, ``s2s.model.gru``). Every stack
takes and returns the state as a pair (h, c) of (L, N, H) tensors; a GRU has no cell, so its c is
None.

Precision of `gru` (the table of ``s2s.precision``): a sequence runs nn.GRU in the dtype of
``s2s.precision.recurrent_dtype``; a single step under autocast runs :func:`gru_step`, the products
in the autocast dtype and the gates and the state in fp32."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from s2s.model.gru import ChoGRU
from s2s.model.recurrence import linear
from s2s.model.lstm import PeepholeLSTM, StandardLSTM, run_padded
from s2s.precision import full, matmul_dtype, recurrent_dtype


class StandardGRU(nn.Module):
    """torch's nn.GRU (cuDNN on GPU) behind the interface of the LSTM stacks."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int):
        super().__init__()
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.gru = nn.GRU(input_size, hidden_size, num_layers, batch_first=True)

    def forward(self, x: Tensor, state: tuple[Tensor, None] | None = None,
                lengths: Tensor | None = None) -> tuple[Tensor, tuple[Tensor, None]]:
        if x.shape[1] == 1 and lengths is None and matmul_dtype(x) is not None:
            return gru_step(self.gru, x, None if state is None else state[0])
        out, h = run_padded(self.gru, x, None if state is None else state[0], lengths,
                            dtype=recurrent_dtype(x))
        return out, (h, None)  # (N, T, H), (L, N, H)


def gru_step(gru: nn.GRU, x: Tensor, h0: Tensor | None) -> tuple[Tensor, tuple[Tensor, None]]:
    """One step of ``gru`` (x: (N, 1, E), h0: (L, N, H)) with its products under autocast (the
    weight casts cached for the context) and the gates and state in fp32; on CUDA nn.GRU under
    autocast would be cuDNN's fp16 GRU. The maths of nn.GRU (the reset gate multiplies
    W_hn h + b_hn):
        r = sigma(W_ir x + b_ir + W_hr h + b_hr)    z = sigma(W_iz x + b_iz + W_hz h + b_hz)
        n = tanh(W_in x + b_in + r * (W_hn h + b_hn))    h' = (1 - z) * n + z * h
    Single steps are what the attention decoder runs, in training and decoding."""
    N = x.shape[0]
    L, H = gru.num_layers, gru.hidden_size
    if h0 is None:
        h0 = x.new_zeros(L, N, H, dtype=torch.float32)
    inp, hs = x[:, 0], []
    for k in range(L):
        h = h0[k]
        # (recurrence.linear: inside a loop over steps, each weight's gradient summed in fp32)
        gx = full(linear(inp, getattr(gru, f"weight_ih_l{k}"),
                         getattr(gru, f"bias_ih_l{k}")))  # (N, 3H)
        gh = full(linear(h, getattr(gru, f"weight_hh_l{k}"),
                         getattr(gru, f"bias_hh_l{k}")))  # (N, 3H)
        xr, xz, xn = gx.chunk(3, 1)
        hr, hz, hn = gh.chunk(3, 1)
        r = torch.sigmoid(xr + hr)
        z = torch.sigmoid(xz + hz)
        n = torch.tanh(xn + r * hn)
        h = torch.lerp(n, h.to(n.dtype), z)  # (1 - z) * n + z * h
        hs.append(h)
        inp = h
    return inp[:, None, :], (torch.stack(hs), None)  # (N, 1, H), (L, N, H)


def make_stack(cell: str, input_size: int, hidden_size: int, num_layers: int) -> nn.Module:
    """The stack of `num_layers` layers of `cell` (one of ``s2s.arch.rnn``'s cells)."""
    stacks = {"lstm": StandardLSTM, "peephole": PeepholeLSTM, "gru": StandardGRU,
              "cho_gru": ChoGRU}
    if cell not in stacks:
        raise ValueError(f"unknown cell '{cell}' (expected one of {', '.join(stacks)})")
    return stacks[cell](input_size, hidden_size, num_layers)
