"""The paper's peephole cell with its element-wise step compiled (torch.compile): the same numbers
as the eager cell, one compilation for every batch size, and an eager fallback when compiling
fails; and its layers as a wavefront (CUDA's default schedule): the same numbers as layer after
layer, in T + L - 1 sequential steps instead of L x T. The eager cell's numbers are pinned
elsewhere (tests/test_golden.py)."""

from __future__ import annotations

import logging

import pytest
import torch
from torch import nn

from s2s.model import lstm
from s2s.model.lstm import PeepholeLSTM

pytestmark = pytest.mark.usefixtures("one_thread")


def _stack() -> PeepholeLSTM:
    torch.manual_seed(0)
    stack = PeepholeLSTM(6, 8, 2)
    for p in stack.parameters():
        nn.init.uniform_(p, -0.5, 0.5)  # peepholes large enough to matter
    return stack


def _run(stack: PeepholeLSTM, compiled: bool, N: int, T: int = 5, *, schedule: str = "layers",
         amp: bool = False):
    """outputs, final state and every gradient over a padded batch of N sequences from a given
    state (one that requires a gradient, as a decoder's does: the compiled step then sees the
    same kind of inputs at every step, and compiles once); `amp`: under bf16 autocast."""
    stack.compiled, stack.schedule = compiled, schedule
    g = torch.Generator().manual_seed(N)
    x = torch.randn(N, T, 6, generator=g, requires_grad=True)
    h0, c0 = (torch.randn(2, N, 8, generator=g, requires_grad=True) for _ in range(2))
    lengths = torch.randint(1, T + 1, (N,), generator=g)
    lengths[0] = T
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
        out, (h, c) = stack(x, (h0, c0), lengths=lengths)
    loss = (out.float() ** 2).sum() + h.sum() + (c ** 3).sum()
    return [out, h, c, *torch.autograd.grad(loss, [x, h0, c0, *stack.parameters()])]


def test_the_compiled_step_agrees_with_the_eager_cell_and_compiles_once_for_any_batch_size(
        monkeypatch):
    from torch._dynamo.utils import counters

    monkeypatch.setattr(lstm, "_COMPILED", {})
    monkeypatch.setattr(lstm, "_COMPILED_RAN", set())
    stack = _stack()
    for N in (4, 7):  # the second batch size must not compile again
        got = _run(stack, True, N)
        if N == 4:
            graphs = counters["stats"]["unique_graphs"]
            assert graphs >= 1
        want = _run(stack, False, N)
        assert len(got) == len(want) == 3 + 3 + 8
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert counters["stats"]["unique_graphs"] == graphs
    assert lstm._COMPILED["cpu"] is not None  # it did not fall back


def test_the_compiled_wave_step_agrees_with_the_eager_wavefront_and_compiles_once(monkeypatch):
    """CUDA's default schedule, compiled (here by the CPU's inductor): the same numbers as the
    eager wavefront, forward and backward, and a new batch size or length compiles nothing new
    (each diagonal's inputs are fresh tensors of one shape per batch)."""
    from torch._dynamo.utils import counters

    monkeypatch.setattr(lstm, "_COMPILED", {})
    monkeypatch.setattr(lstm, "_COMPILED_RAN", set())
    stack = _stack()
    graphs = None
    for N, T in ((4, 6), (7, 9)):
        got = _run(stack, True, N, T, schedule="wavefront")
        if graphs is None:
            graphs = counters["stats"]["unique_graphs"]
            assert graphs >= 1
        want = _run(stack, False, N, T, schedule="wavefront")
        assert len(got) == len(want) == 3 + 3 + 8
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert counters["stats"]["unique_graphs"] == graphs
    assert lstm._COMPILED[lstm._key("cpu", lstm._wave_step)] is not None  # no fallback


def test_a_failing_compiler_falls_back_to_the_eager_cell_with_one_log_line(monkeypatch, caplog):
    def broken(*args):
        raise RuntimeError("no C++ compiler\nmore detail")

    monkeypatch.setattr(lstm, "_COMPILED", {"cpu": broken})
    monkeypatch.setattr(lstm, "_COMPILED_RAN", set())
    stack = _stack()
    want = _run(stack, False, 4)
    with caplog.at_level(logging.WARNING, logger="s2s.model.lstm"):
        first = _run(stack, True, 4)
        second = _run(stack, True, 4)
    for a, b, c in zip(want, first, second):
        assert torch.equal(a, b) and torch.equal(a, c)  # the eager cell, bit for bit
    assert [r.getMessage() for r in caplog.records] == [
        "peephole LSTM: torch.compile failed (RuntimeError: no C++ compiler); running eager"]
    assert lstm._COMPILED["cpu"] is None


def test_the_step_is_compiled_on_cuda_by_default_and_eager_on_the_cpu(monkeypatch):
    monkeypatch.setattr(lstm, "compiled_step",
                        lambda device_type, fn=None: f"compiled for {device_type}")
    stack = _stack()
    assert stack._step_function("cpu") is None
    assert stack._step_function("cuda") == "compiled for cuda"
    stack.compiled = True
    assert stack._step_function("cpu") == "compiled for cpu"
    stack.compiled = False
    assert stack._step_function("cuda") is None


@pytest.mark.parametrize("N,T", [(4, 5), (7, 2), (3, 1)], ids=["T5", "T2", "T1"])
def test_the_wavefront_computes_what_the_layers_compute_one_after_the_other(N, T):
    stack = _stack()
    want = _run(stack, False, N, T)
    got = _run(stack, False, N, T, schedule="wavefront")
    for a, b in zip(got, want):  # outputs, h, c, the gradients of x, h0, c0 and every weight
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_the_wavefront_in_float64_is_the_layers_to_float64_rounding():
    """A float64 stack (the reference checks') stays float64 through the wavefront's batched
    products: they went through the fp32 product of 16-bit operands and came back off by 1e-8."""
    stack = _stack().double()
    g = torch.Generator().manual_seed(3)
    x = torch.randn(4, 7, 6, generator=g, dtype=torch.float64, requires_grad=True)
    lengths = torch.tensor([7, 3, 5, 1])
    runs = {}
    for schedule in ("layers", "wavefront"):
        stack.schedule = schedule
        out, (h, c) = stack(x, lengths=lengths)
        assert out.dtype == h.dtype == torch.float64
        loss = (out ** 2).sum() + h.sum() + (c ** 3).sum()
        runs[schedule] = [out, h, c, *torch.autograd.grad(loss, [x, *stack.parameters()])]
    for a, b in zip(runs["wavefront"], runs["layers"]):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_the_wavefront_in_bf16_is_as_close_to_fp32_as_the_layers_and_sums_in_fp32(monkeypatch):
    from s2s.model import recurrence

    stack = _stack()
    exact = _run(stack, False, 6, 9)
    operands = []
    summed = recurrence.fp32_bmm

    def spy(a, b):
        operands.append((a, b))
        return summed(a, b)

    monkeypatch.setattr(recurrence, "fp32_bmm", spy)
    wave = _run(stack, False, 6, 9, schedule="wavefront", amp=True)
    layers = _run(stack, False, 6, 9, amp=True)

    def err(run):
        return max(float((a.float() - b).norm() / b.norm()) for a, b in zip(run, exact))

    assert 1e-4 < err(wave) < 2e-2 and 1e-4 < err(layers) < 2e-2  # bf16 products, both
    # one batched product per diagonal (T + L - 1 = 10) in bf16, and after the loop one
    # batched GEMM of all diagonals' operands: the stacked weights' gradient (L, 4H, 2H)
    steps, (dy_t, z) = operands[:-1], operands[-1]
    assert len(steps) == 10 and all(a.dtype == torch.bfloat16 for a, _ in steps)
    assert dy_t.shape == (2, 4 * 8, 10 * 6) and z.shape == (2, 10 * 6, 2 * 8)


def test_the_wavefront_runs_t_plus_l_minus_1_steps_where_the_layers_run_l_times_t(monkeypatch):
    calls = {"wave": 0, "layer": 0}
    wave, masked = lstm._wave_step, lstm._masked_step

    def count(name, fn):
        def counted(*args):
            calls[name] += 1
            return fn(*args)
        return counted

    monkeypatch.setattr(lstm, "compiled_step", lambda device_type, fn=None: count(
        "wave" if fn is wave else "layer", wave if fn is wave else masked))
    monkeypatch.setattr(lstm, "_COMPILED_RAN", {"cpu", "cpu:_wave_step"})  # no warm-up call
    stack = _stack()  # L = 2
    _run(stack, True, 4, 5)
    _run(stack, True, 4, 5, schedule="wavefront")
    assert calls == {"layer": 2 * 5, "wave": 5 + 2 - 1}


def test_the_schedule_is_the_wavefront_on_cuda_for_sequences_and_layers_elsewhere():
    stack = _stack()  # 2 layers
    assert stack._schedule("cuda", 30) == "wavefront" and stack._schedule("cuda", 2) == "wavefront"
    assert stack._schedule("cuda", 1) == "layers"  # a decoding step
    assert stack._schedule("cpu", 30) == "layers"
    stack.schedule = "wavefront"
    assert stack._schedule("cpu", 30) == "wavefront"
    assert PeepholeLSTM(6, 8, 1)._schedule("cuda", 30) == "layers"  # one layer: nothing to overlap
    stack.schedule = "diagonal"
    with pytest.raises(ValueError, match="'layers' or 'wavefront', got 'diagonal'"):
        stack._schedule("cuda", 30)
