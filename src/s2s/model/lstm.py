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

from s2s.model import recurrence
from s2s.model.base import on_host
from s2s.model.fused import lstm_stack, lstm_step
from s2s.model.gru import gru_sequence
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
        # one bf16 copy of the weight for the whole loop, its gradient summed over the steps in
        # fp32 (s2s.model.recurrence)
        return full(recurrence.linear(h, self.weight_hh))

    def preactivations(self, gates_x: Tensor, h: Tensor) -> Tensor:
        """gates_x + W_hh h_{t-1} in fp32 in one kernel where it can: (N, 4H). (An fp32 plus a
        bf16 tensor adds in fp32: the bf16 product is exact in fp32.)"""
        if matmul_dtype(h) is None:
            return torch.addmm(gates_x, h, self.weight_hh.t())
        return gates_x + recurrence.linear(h, self.weight_hh)

    def input_products(self, x: Tensor) -> Tensor:
        """W_ih x_t + b for every step at once: x (N*T, E_in) -> (N*T, 4H) fp32."""
        if matmul_dtype(x) is None:
            return torch.addmm(self.bias, x, self.weight_ih.t())
        return full(F.linear(x, self.weight_ih)) + self.bias  # the bias added in fp32


def peephole_update(gates: Tensor, c: Tensor, peephole: Tensor) -> tuple[Tensor, Tensor]:
    """The element-wise part of a peephole step: gates (N, 4H) pre-activations (i, f, c, o),
    c (N, H) the cell state before it, peephole (3, H). Returns h_t and c_t, (N, H) each.
    (Leading dimensions broadcast: the wavefront's (L, N, 4H) gates with (3, L, 1, H) peepholes.)"""
    gi, gf, gc, go = gates.chunk(4, dim=-1)  # each (N, H)
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


def _wave_step(y: Tensor, gx0: Tensor, bias: Tensor, h: Tensor, c: Tensor, peephole: Tensor,
               keep: Tensor, z_dtype: torch.dtype | None) -> tuple[Tensor, Tensor, Tensor]:
    """One diagonal of the wavefront (:meth:`PeepholeLSTM._wavefront`; what its compiled step
    computes), every layer at once: y (L, N, 4H) the layers' products [h below; h] @ [W_ih; W_hh]^T
    (layer 0's "below" half is zero: its input products are gx0 (N, 4H), computed for all steps
    at once, its bias in them), bias (L, 1, 4H) the other layers' biases (layer 0's row zero),
    h, c (L, N, H), peephole (3, L, 1, H), keep (L, N, 1) False where a layer has no step at this
    diagonal (before its first, after its last, or padding): it holds its h and c. Returns h, c
    and the next diagonal's product input (:func:`_wave_input`)."""
    gates = y + bias
    gates = torch.cat([gates[:1] + gx0, gates[1:]])  # (L, N, 4H)
    h_new, c_new = peephole_update(gates, c, peephole)
    h = torch.where(keep, h_new, h)
    c = torch.where(keep, c_new, c)
    return h, c, _wave_input(h, z_dtype)


def _wave_input(h: Tensor, z_dtype: torch.dtype | None) -> Tensor:
    """[h of the layer below; h] (L, N, 2H) from h (L, N, H), layer 0's below half zero, in
    z_dtype (the products' dtype; None: h's)."""
    below = torch.cat([torch.zeros_like(h[:1]), h[:-1]])  # (L, N, H)
    z = torch.cat([below, h], dim=-1)
    return z if z_dtype is None else z.to(z_dtype)


# (device type, step) -> the compiled step, or None where compiling is unavailable or failed;
# the key of _masked_step is the device type alone
_COMPILED: dict[str, object] = {}
_COMPILED_RAN: set[str] = set()  # keys whose compiled step has run once, forward and backward


def _key(device_type: str, fn) -> str:
    return device_type if fn is _masked_step else f"{device_type}:{fn.__name__}"


def compiled_step(device_type: str, fn=None):
    """`fn` (default :func:`_masked_step`; :func:`_wave_step`) compiled for `device_type`
    (dynamic shapes: a new batch size does not recompile), or None where torch.compile cannot run
    here (logged once)."""
    fn = fn or _masked_step
    key = _key(device_type, fn)
    if key not in _COMPILED:
        _COMPILED[key] = torch.compile(fn, dynamic=True)
        if device_type == "cuda":
            from torch.utils._triton import has_triton

            if not has_triton():
                _COMPILED[key] = None
                log.warning("peephole LSTM: Triton is not installed, so the step cannot be "
                            "compiled; running eager")
    return _COMPILED[key]


def _run_compiled(step, key: str, args) -> tuple[Tensor, ...] | None:
    """step(*args); None if the first call, which compiles, fails: then `key` runs eager from
    now on (one log line). With gradients, the first call runs the compiled step forward and
    backward on copies of its inputs first, since torch compiles the backward lazily, at the
    first ``backward()``, where a failure could no longer fall back. A failure after a first
    success is raised."""
    if key in _COMPILED_RAN:
        return step(*args)
    try:
        if torch.is_grad_enabled():  # a warm-up on copies, forward and backward
            copies = [a.detach().clone().requires_grad_(a.requires_grad)
                      if isinstance(a, Tensor) else a for a in args]
            outputs = [r for r in step(*copies) if r.requires_grad]
            inputs = [a for a in copies if isinstance(a, Tensor) and a.requires_grad]
            if outputs and inputs:
                torch.autograd.grad(outputs, inputs, [torch.ones_like(r) for r in outputs],
                                    allow_unused=True)
        result = step(*args)
    except Exception as e:  # noqa: BLE001 -- whatever the compiler raised: run eager instead
        _COMPILED[key] = None
        first = str(e).splitlines()[0] if str(e) else ""
        log.warning("peephole LSTM: torch.compile failed (%s: %s); running eager",
                    type(e).__name__, first)
        return None
    if torch.is_grad_enabled():  # (without gradients the backward is still to be compiled)
        _COMPILED_RAN.add(key)
    return result


class PeepholeLSTM(nn.Module):
    """A stack of PeepholeLSTMCell layers over a (N, T, E) batch, batch_first like nn.LSTM here.

    ``compiled``: None (the element-wise part of each step compiled on CUDA, eager elsewhere),
    True or False to force either (tests, benchmarks).

    ``schedule``: the order of the L x T layer-steps. "layers": each layer over all T steps, then
    the next (one product and one element-wise step per layer-step, L x T in a row). "wavefront":
    at diagonal d every layer k takes its step d - k at once, T + L - 1 diagonals of one batched
    product (``bmm`` of the L layers' [h below; h] by their [W_ih; W_hh]) and one element-wise step
    over all layers: on a GPU, where each layer-step is a few small kernels launched by the host,
    about L times fewer launches (bench/gpu.py measures both). The same maths: the layers agree to
    float rounding (tests/test_peephole_compiled.py). None: the wavefront on CUDA for sequences of
    at least L steps (a single decoding step stays "layers"), "layers" elsewhere (the CPU's
    numbers, which the golden tests pin)."""

    compiled: bool | None = None
    schedule: str | None = None

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
        with recurrence.steps(x):  # under autocast: each W_hh's gradient summed in fp32
            if self._schedule(x.device.type, T) == "wavefront":
                return self._wavefront(x, h_all, c_all, lengths)
            return self._layers(x, h_all, c_all, lengths)

    def _schedule(self, device_type: str, T: int) -> str:
        if self.schedule not in (None, "layers", "wavefront"):
            raise ValueError(f"PeepholeLSTM.schedule must be None, 'layers' or 'wavefront', got "
                             f"{self.schedule!r}")
        if self.num_layers == 1:
            return "layers"
        if self.schedule is None:
            return "wavefront" if device_type == "cuda" and T >= self.num_layers else "layers"
        return self.schedule

    def _wavefront(self, x: Tensor, h_all: Tensor, c_all: Tensor, lengths: Tensor | None
                   ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """forward as a wavefront (see the class docstring): diagonal d runs layer k's step
        t = d - k for every k at once; a layer with no step at d holds its state."""
        N, T, _ = x.shape
        L, H = self.num_layers, self.hidden_size
        D = T + L - 1  # diagonals
        cells = self.cells
        first = cells[0].input_products(x.reshape(N * T, -1)).view(N, T, 4 * H)  # bias in
        steps_x = first.unbind(1)  # T x (N, 4H) (unbind once: see _layers)
        w = cells[0].weight_hh
        weight = torch.stack([torch.cat([w.new_zeros(4 * H, H) if k == 0 else cell.weight_ih,
                                         cell.weight_hh], dim=1)
                              for k, cell in enumerate(cells)])  # (L, 4H, 2H)
        bias = torch.stack([torch.zeros_like(cells[0].bias)]
                           + [cell.bias for cell in cells[1:]])[:, None, :]  # (L, 1, 4H)
        peephole = torch.stack([cell.peephole for cell in cells], dim=1)[:, :, None, :]  # (3,L,1,H)
        z_dtype = matmul_dtype(x)  # the products' dtype under autocast, else None
        product = recurrence.Stacked(weight, z_dtype)  # its gradient one bmm after the loop
        t = torch.arange(D, device=x.device)[:, None] - torch.arange(L, device=x.device)  # (D, L)
        live = ((t >= 0) & (t < T))[:, :, None]  # (D, L, 1): layer k's step d - k exists
        if lengths is not None:
            live = live & (t[:, :, None] < lengths.to(x.device)[None, None, :])  # (D, L, N)
        # fresh tensors, never views at an offset (the compiled step's guards: see _layers)
        keeps = [m.clone() for m in live.expand(D, L, N)[..., None].unbind(0)]  # D x (L, N, 1)
        step = self._step_function(x.device.type, _wave_step)
        key = _key(x.device.type, _wave_step)
        h, c = h_all.clone(), c_all.clone()  # (L, N, H)
        z = _wave_input(h, z_dtype)  # (L, N, 2H)
        outs = []
        for d in range(D):
            y = product.bmm(z)  # (L, N, 4H) fp32
            args = (y, steps_x[min(d, T - 1)], bias, h, c, peephole, keeps[d], z_dtype)
            done = None if step is None else _run_compiled(step, key, args)
            if done is None:  # eager (or compiling failed: eager from here on)
                step = None
                done = _wave_step(*args)
            h, c, z = done
            if d >= L - 1:
                outs.append(h[L - 1])  # the top layer's step d - (L - 1)
        return torch.stack(outs, dim=1), (h, c)  # (N, T, H), (L, N, H) x 2

    def _layers(self, x: Tensor, h_all: Tensor, c_all: Tensor, lengths: Tensor | None
                ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """forward's layers one after the other, each a loop over the T steps."""
        N, T, _ = x.shape
        mask = None
        if lengths is not None:
            steps = torch.arange(T, device=x.device)
            mask = (steps[None, :] < lengths[:, None]).unsqueeze(-1)  # (N, T, 1)
        step = self._step_function(x.device.type)
        keeps = None
        if step is not None:
            # fresh tensors, never views at an offset: the compiled step's guards would otherwise
            # specialise on storage offsets and recompile for the first steps
            keeps = ([x.new_ones(N, 1, dtype=torch.bool)] * T if mask is None
                     else [m.clone() for m in mask.unbind(1)])  # T x (N, 1)
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
                    done = _run_compiled(step, _key(x.device.type, _masked_step), (
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

    def _step_function(self, device_type: str, fn=None):
        """The compiled step (`fn`, default _masked_step) to use on `device_type`, or None for the
        eager one."""
        if self.compiled is False or (self.compiled is None and device_type != "cuda"):
            return None
        return compiled_step(device_type, fn)


def run_padded(rnn: nn.RNNBase, x: Tensor, state=None, lengths: Tensor | None = None, *,
               dtype: torch.dtype | None = None, torch_kernel: bool = False):
    """``rnn(x, state)`` for a batch_first torch RNN (LSTM or GRU); with ``lengths`` (N,) over the
    packed batch, so the final state is each sequence's own and padded outputs are zero.
    Returns outputs (N, T, D) and the RNN's final state as torch returns it.

    ``dtype`` (``s2s.precision.recurrent_dtype``): run with autocast off on x's device, the input
    and the state in `dtype`, and the weights too (a differentiable copy, so their gradients reach
    the weights in their own dtype); outputs and state come back in `dtype`. None: as it is.
    (Under autocast torch would run a cuDNN RNN in fp16 whatever the autocast dtype.)

    On the CPU under autocast an nn.LSTM runs as ``s2s.model.fused.lstm_stack`` (bf16 products,
    fp32 state), and an nn.GRU with gradients as ``s2s.model.gru.gru_sequence``: torch's kernels
    would sum their weights' per-step gradients in bf16 (s2s.model.recurrence), and its LSTM
    kernel, where a batch's sequences are all of one length, runs oneDNN's bf16 LSTM, whose
    state is bf16: a sentence's numbers would depend on the lengths of those beside it.
    ``torch_kernel``: torch's kernel nonetheless (``StandardLSTM.fused_cpu = False``, which
    benchmarks compare)."""
    if dtype is None:
        mm_dtype = matmul_dtype(x) if x.device.type == "cpu" and not torch_kernel else None
        if mm_dtype is not None and isinstance(rnn, nn.LSTM):
            result = lstm_stack(rnn, x, state, lengths, mm_dtype=mm_dtype)
        elif mm_dtype is not None and isinstance(rnn, nn.GRU) and torch.is_grad_enabled():
            result = gru_sequence(rnn, x, state, lengths)
        else:
            return _run(rnn, x, state, lengths)
        for hook in rnn._forward_hooks.values():  # what calling the module would run
            hook(rnn, (x, state), result)  # (s2s.precision.watch sees it)
        return result
    with torch.autocast(x.device.type, enabled=False):
        x = x.to(dtype)
        if state is not None:
            state = (tuple(s.to(dtype) for s in state) if isinstance(state, tuple)
                     else state.to(dtype))
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
    if x.device.type == "cpu":
        packed = nn.utils.rnn.pack_padded_sequence(
            x, lengths, batch_first=True, enforce_sorted=False)
        out, final = call(packed, state)
        out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
        return out, final
    return _run_sorted(call, x, state, on_host(lengths))


def _run_sorted(call, x: Tensor, state, lengths: Tensor):
    """What _run returns, the batch sorted here by its lengths (on the CPU): off the CPU,
    torch's own sorting (``enforce_sorted=False``) copies the order to the device and its
    inverse back, two waits for the device per call; here the order travels once, without a
    wait. The rows are each their own sequence: their order changes no number but by the
    kernels' rounding. A batch already sorted (a check on the host) is packed as it is."""
    if bool((lengths[:-1] >= lengths[1:]).all()):
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True,
                                                   enforce_sorted=True)
        out, final = call(packed, state)
        out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
        return out, final
    sorted_lengths, order = torch.sort(lengths, descending=True, stable=True)
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(len(order))
    if x.device.type == "cuda":
        order, inverse = (t.pin_memory().to(x.device, non_blocking=True)
                          for t in (order, inverse))
    packed = nn.utils.rnn.pack_padded_sequence(
        x.index_select(0, order), sorted_lengths, batch_first=True, enforce_sorted=True)
    out, final = call(packed, _rows(state, order))
    out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
    return out.index_select(0, inverse), _rows(final, inverse)


def _rows(state, index: Tensor):
    """An RNN state (h, or (h, c), each (L, N, H), or None) with its batch rows `index`."""
    if state is None:
        return None
    if isinstance(state, tuple):
        return tuple(s.index_select(1, index) for s in state)
    return state.index_select(1, index)


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
        out, (h, c) = run_padded(self.lstm, x, state, lengths, dtype=recurrent_dtype(x),
                                 torch_kernel=not self.fused_cpu)
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
