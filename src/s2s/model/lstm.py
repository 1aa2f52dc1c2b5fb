"""Stacked LSTMs: the paper's peephole cell (Graves 2013, eqs. 7-11) and torch's nn.LSTM.

Dimension letters used in shape comments throughout ``s2s.model``:
    N  batch (sentences, or sentences x beams while decoding)
    S  source length          T  target length
    E  embedding size         H  hidden size (cells per layer)
    L  layers                 V  vocabulary size

Both stacks take and return the full state as two tensors ``h, c`` of shape (L, N, H), with the
same gate layout as nn.LSTM (input, forget, cell, output), so the same weights can be loaded into
either: with the peepholes at zero the peephole stack computes exactly what nn.LSTM computes.

Precision: the peephole stack runs its two products under autocast and everything else in fp32;
``StandardLSTM`` (and every nn.LSTM/nn.GRU run through :func:`run_padded`) takes the dtype of
:func:`s2s.precision.recurrent_dtype` (the table of ``s2s.precision``).

The element-wise part of a peephole step (everything but the recurrent product) can run compiled
(``torch.compile``, one fused kernel forward and one backward, batch size dynamic):
``PeepholeLSTM.compiled`` is None (compiled on CUDA, eager elsewhere), True or False. Compiled and
eager agree to rounding; the eager CPU path is the reference.
"""

from __future__ import annotations

import logging
import warnings

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from s2s.model.fused import lstm_stack, lstm_step
from s2s.precision import full, matmul_dtype, recurrent_dtype

log = logging.getLogger(__name__)


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
        """One time step. gates_x = W_ih x_t + b, precomputed for all steps: (N, 4H) fp32;
        h, c: (N, H) fp32."""
        return peephole_update(gates_x + self.recurrent_product(h), c, self.peephole)

    def recurrent_product(self, h: Tensor) -> Tensor:
        """W_hh h_{t-1}: (N, 4H), in fp32 whatever dtype autocast ran the product in."""
        if matmul_dtype(h) is None:
            return h @ self.weight_hh.t()
        # F.linear hands autocast the weight itself, whose cast it caches for the context
        return full(F.linear(h, self.weight_hh))

    def preactivations(self, gates_x: Tensor, h: Tensor) -> Tensor:
        """gates_x + W_hh h_{t-1} in fp32 in one kernel where it can: (N, 4H). (An fp32 plus a
        bf16 tensor adds in fp32: the bf16 product is exact in fp32.)"""
        if matmul_dtype(h) is None:
            return torch.addmm(gates_x, h, self.weight_hh.t())
        return gates_x + F.linear(h, self.weight_hh)

    def input_products(self, x: Tensor) -> Tensor:
        """W_ih x_t + b for every step at once: x (N*T, E_in) -> (N*T, 4H) fp32."""
        if matmul_dtype(x) is None:
            return torch.addmm(self.bias, x, self.weight_ih.t())
        return full(F.linear(x, self.weight_ih)) + self.bias  # the bias added in fp32


def peephole_update(gates: Tensor, c: Tensor, peephole: Tensor) -> tuple[Tensor, Tensor]:
    """The element-wise part of a peephole step: gates (N, 4H) pre-activations (i, f, c, o),
    c (N, H) the cell state before it, peephole (3, H). Returns h_t and c_t, (N, H) each."""
    gi, gf, gc, go = gates.chunk(4, dim=1)  # each (N, H)
    i = torch.sigmoid(gi + peephole[0] * c)
    f = torch.sigmoid(gf + peephole[1] * c)
    c = f * c + i * torch.tanh(gc)
    o = torch.sigmoid(go + peephole[2] * c)  # W_co sees c_t, not c_{t-1}
    return o * torch.tanh(c), c


def _masked_step(gates: Tensor, h: Tensor, c: Tensor, peephole: Tensor,
                 keep: Tensor) -> tuple[Tensor, Tensor]:
    """What the compiled step computes: peephole_update, then rows whose `keep` (N, 1) bool is
    False hold their h and c (padding)."""
    h_new, c_new = peephole_update(gates, c, peephole)
    return torch.where(keep, h_new, h), torch.where(keep, c_new, c)


# device type -> the compiled step, or None where compiling is unavailable or failed
_COMPILED: dict[str, object] = {}
_COMPILED_RAN: set[str] = set()  # device types whose compiled step has run once


def compiled_step(device_type: str):
    """:func:`_masked_step` compiled for `device_type` (dynamic shapes: a new batch size does not
    recompile), or None where torch.compile cannot run here (logged once)."""
    if device_type not in _COMPILED:
        _COMPILED[device_type] = torch.compile(_masked_step, dynamic=True)
        if device_type == "cuda":
            from torch.utils._triton import has_triton

            if not has_triton():
                _COMPILED[device_type] = None
                log.warning("peephole LSTM: Triton is not installed, so the step cannot be "
                            "compiled; running eager")
    return _COMPILED[device_type]


def _run_compiled(step, device_type: str, args) -> tuple[Tensor, Tensor] | None:
    """step(*args); None if the first call, which compiles, fails: then this device type runs
    eager from now on (one log line). A failure after a first success is raised."""
    if device_type in _COMPILED_RAN:
        return step(*args)
    try:
        result = step(*args)
    except Exception as e:  # noqa: BLE001 -- whatever the compiler raised: run eager instead
        _COMPILED[device_type] = None
        first = str(e).splitlines()[0] if str(e) else ""
        log.warning("peephole LSTM: torch.compile failed (%s: %s); running eager",
                    type(e).__name__, first)
        return None
    _COMPILED_RAN.add(device_type)
    return result


class PeepholeLSTM(nn.Module):
    """A stack of PeepholeLSTMCell layers over a (N, T, E) batch, batch_first like nn.LSTM here.

    ``compiled``: None (the element-wise part of each step compiled on CUDA, eager elsewhere),
    True or False to force either (tests, benchmarks)."""

    compiled: bool | None = None

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
        step = self._step_function(x.device.type)
        if step is not None:
            # fresh tensors, never views at an offset: the compiled step's guards would otherwise
            # specialise on storage offsets and recompile for the first steps
            keeps = [x.new_ones(N, 1, dtype=torch.bool)] * T if mask is None else \
                [m.clone() for m in mask.unbind(1)]  # T x (N, 1)
        hs, cs = [], []
        layer_in = x
        for k, cell in enumerate(self.cells):
            h, c = h_all[k], c_all[k]  # (N, H)
            gates_x = cell.input_products(layer_in.reshape(N * T, -1))  # (N*T, 4H)
            # unbind once: indexing gates_x[:, t] per step would make each step's backward
            # allocate and add a full (N, T, 4H) gradient, quadratic in T (bench/README.md).
            steps_x = gates_x.view(N, T, -1).unbind(1)  # T x (N, 4H)
            if step is not None:
                h, c = h.clone(), c.clone()
            outs = []
            for t in range(T):
                if step is not None:
                    done = _run_compiled(step, x.device.type, (
                        cell.preactivations(steps_x[t], h), h, c, cell.peephole, keeps[t]))
                    if done is None:  # compiling failed: eager from here on
                        step = None
                    else:
                        h, c = done
                        outs.append(h)
                        continue
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

    def _step_function(self, device_type: str):
        """The compiled step to use on `device_type`, or None for the eager cell."""
        if self.compiled is False or (self.compiled is None and device_type != "cuda"):
            return None
        return compiled_step(device_type)


def run_padded(rnn: nn.RNNBase, x: Tensor, state=None, lengths: Tensor | None = None, *,
               dtype: torch.dtype | None = None):
    """``rnn(x, state)`` for a batch_first torch RNN (LSTM or GRU); with ``lengths`` (N,) over the
    packed batch, so the final state is each sequence's own and padded outputs are zero.
    Returns outputs (N, T, D) and the RNN's final state as torch returns it.

    ``dtype`` (``s2s.precision.recurrent_dtype``): run with autocast off on x's device, the input
    and the state in `dtype`, and the weights too (a differentiable copy, so their gradients reach
    the weights in their own dtype); outputs and state come back in `dtype`. None: as it is.
    (Under autocast torch would run a cuDNN RNN in fp16 whatever the autocast dtype.)"""
    if dtype is None:
        return _run(rnn, x, state, lengths)
    with torch.autocast(x.device.type, enabled=False):
        x = x.to(dtype)
        if state is not None:
            state = tuple(s.to(dtype) for s in state) if isinstance(state, tuple) \
                else state.to(dtype)
        if all(p.dtype == dtype for p in rnn.parameters()):
            return _run(rnn, x, state, lengths)
        weights = {n: p.to(dtype) for n, p in rnn.named_parameters()}

        def call(inp, hx):
            with warnings.catch_warnings():
                # the copies are not one contiguous cuDNN buffer: cuDNN copies them into one
                warnings.filterwarnings("ignore", message="RNN module weights are not part")
                return torch.func.functional_call(rnn, weights, (inp, hx))

        return _run(call, x, state, lengths)


def _run(call, x: Tensor, state, lengths: Tensor | None):
    if lengths is None:
        return call(x, state)
    packed = nn.utils.rnn.pack_padded_sequence(
        x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    out, final = call(packed, state)
    out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
    return out, final


class StandardLSTM(nn.Module):
    """torch's nn.LSTM (cuDNN on GPU) behind the same interface as PeepholeLSTM.

    On the CPU the same weights run through ``s2s.model.fused`` instead: ``lstm_stack`` when
    training (the same maths, a faster backward), ``lstm_step`` for single steps (decoding);
    bench/README.md has the numbers. ``fused_cpu = False`` turns both off (benchmarks compare).
    Elsewhere nn.LSTM runs in the dtype of ``s2s.precision.recurrent_dtype`` (see the module
    docstring).
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
        out, (h, c) = run_padded(self.lstm, x, state, lengths, dtype=recurrent_dtype(x))
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
