"""One constructor for the recurrent stacks every model uses: `cell` picks the paper's peephole
LSTM, nn.LSTM or nn.GRU. Every stack takes and returns the state as a pair (h, c) of (L, N, H)
tensors; a GRU has no cell, so its c is None."""

from __future__ import annotations

from torch import Tensor, nn

from s2s.model.lstm import PeepholeLSTM, StandardLSTM, run_padded


class StandardGRU(nn.Module):
    """torch's nn.GRU (cuDNN on GPU) behind the interface of the LSTM stacks."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int):
        super().__init__()
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.gru = nn.GRU(input_size, hidden_size, num_layers, batch_first=True)

    def forward(self, x: Tensor, state: tuple[Tensor, None] | None = None,
                lengths: Tensor | None = None) -> tuple[Tensor, tuple[Tensor, None]]:
        out, h = run_padded(self.gru, x, None if state is None else state[0], lengths)
        return out, (h, None)  # (N, T, H), (L, N, H)


def make_stack(cell: str, input_size: int, hidden_size: int, num_layers: int) -> nn.Module:
    if cell == "peephole":
        return PeepholeLSTM(input_size, hidden_size, num_layers)
    if cell == "lstm":
        return StandardLSTM(input_size, hidden_size, num_layers)
    if cell == "gru":
        return StandardGRU(input_size, hidden_size, num_layers)
    raise ValueError(f"unknown cell '{cell}' (expected 'lstm', 'peephole' or 'gru')")
