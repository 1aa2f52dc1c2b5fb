"""How far back the gradient reaches at initialisation, before any training: from the last output
of a recurrent layer to each of its inputs, for a vanilla RNN (tanh), an LSTM with the paper's
uniform init, and an LSTM whose forget gates' bias is raised (`forget_bias`, e.g. 3:
sigma(3) = 0.95). Why the LSTM can learn the long dependencies of §3.3 at all, and why reversing
the source, which puts the first source words next to the first target words, helps it.

For each seed, each cell of `hidden` units over `input_size` inputs:
  - every parameter uniform in [-init_range, init_range] (§3.4), from the seed's weight stream
    (the same weights' draws for every cell of the seed, independent of its data stream: one
    generator for both would make each input x_t correlate with the weights that read it); for
    the LSTM with forget bias b, then its forget gates' bias set to b exactly as
    `forget_bias` does in a model (s2s.model.lstm.set_forget_bias: b_ih's forget chunk b, b_hh's
    0); b = 0 leaves the uniform init, as `forget_bias: 0.0` does;
  - inputs x_1 .. x_T ~ N(0, 1) from the seed's data stream, the same for every cell of the seed;
  - a fixed random readout v, a unit vector from the data stream, the same for every cell;
  - g_t = || d (v . h_T) / d x_t ||_2 for t = 1 .. T, all from one backward pass.
The frame holds, per cell and step, the mean and standard deviation of g_t over the seeds and
the mean relative to that at the last step (t = T).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn

from s2s.layout import INIT_REACH_COLUMNS
from s2s.model.lstm import set_forget_bias


def make_cell(cell: str, *, input_size: int, hidden: int, init_range: float,
              forget_bias: float, generator: torch.Generator) -> nn.RNNBase:
    """A one-layer nn.RNN (tanh; `cell` "rnn") or nn.LSTM ("lstm"), batch_first, initialised as
    the module docstring says."""
    if cell == "rnn":
        rnn = nn.RNN(input_size, hidden, 1, nonlinearity="tanh", batch_first=True)
    elif cell == "lstm":
        rnn = nn.LSTM(input_size, hidden, 1, batch_first=True)
    else:
        raise ValueError(f"unknown cell '{cell}' (expected 'rnn' or 'lstm')")
    with torch.no_grad():
        for p in rnn.parameters():
            p.copy_(torch.empty_like(p).uniform_(-init_range, init_range, generator=generator))
    if forget_bias:
        set_forget_bias(rnn, forget_bias)
    return rnn


def input_gradient_norms(rnn: nn.RNNBase, x: Tensor, readout: Tensor) -> Tensor:
    """|| d (readout . h_T) / d x_t ||_2 for t = 1 .. T: x (T, E) one sequence, readout (H,),
    h_T the layer's output at the last step. Returns (T,)."""
    x = x.detach().requires_grad_(True)
    out, _ = rnn(x[None])  # (1, T, H)
    (grad,) = torch.autograd.grad(out[0, -1] @ readout, x)  # (T, E)
    return grad.norm(dim=1)


def seed_draws(seed: int, cells: Sequence[tuple[str, float]], *, hidden: int, input_size: int,
               steps: int, init_range: float) -> tuple[Tensor, Tensor, list[nn.RNNBase]]:
    """Seed `seed`'s inputs (T, E) and unit readout (H,), from its data stream, and one cell per
    (cell, forget bias) of `cells`, each from the start of its weight stream: two independent
    streams (numpy's SeedSequence spawn), as the module docstring says."""
    data_stream, weight_stream = (int(s.generate_state(1, np.uint64)[0])
                                  for s in np.random.SeedSequence(seed).spawn(2))
    data = torch.Generator().manual_seed(data_stream)
    x = torch.randn(steps, input_size, generator=data)
    readout = torch.randn(hidden, generator=data)
    rnns = [make_cell(cell, input_size=input_size, hidden=hidden, init_range=init_range,
                      forget_bias=0.0 if cell == "rnn" else bias,
                      generator=torch.Generator().manual_seed(weight_stream))
            for cell, bias in cells]
    return x, readout / readout.norm(), rnns


def init_reach(*, hidden: int = 256, input_size: int = 256, steps: int = 60, seeds: int = 20,
               forget_biases: Sequence[float] = (0.0, 3.0), init_range: float = 0.08,
               first_seed: int = 0) -> pd.DataFrame:
    """The gradient reaching each of `steps` inputs from the last output at initialisation,
    averaged over `seeds` seeds, for the vanilla RNN and an LSTM per forget bias: one row per
    cell and step with the columns of init_reach.csv (s2s.layout.ANALYSIS_TABLES; forget_bias NaN
    for the RNN; steps_back = steps - step; relative = mean_norm / mean_norm at the last step)."""
    cells = [("rnn", float("nan"))] + [("lstm", float(b)) for b in forget_biases]
    norms = np.empty((len(cells), seeds, steps))
    for s in range(seeds):
        x, readout, rnns = seed_draws(first_seed + s, cells, hidden=hidden,
                                      input_size=input_size, steps=steps, init_range=init_range)
        for c, rnn in enumerate(rnns):
            norms[c, s] = input_gradient_norms(rnn, x, readout).numpy()
    frames = []
    step = np.arange(1, steps + 1)
    for c, (cell, bias) in enumerate(cells):
        mean = norms[c].mean(0)
        frames.append(pd.DataFrame({
            "cell": cell, "forget_bias": bias, "step": step, "steps_back": steps - step,
            "mean_norm": mean, "std_norm": norms[c].std(0), "relative": mean / mean[-1]}))
    return pd.concat(frames, ignore_index=True)[list(INIT_REACH_COLUMNS)]
