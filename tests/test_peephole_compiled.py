"""The paper's peephole cell with its element-wise step compiled (torch.compile): the same numbers
as the eager cell, one compilation for every batch size, and an eager fallback when compiling
fails. The eager cell's numbers are pinned elsewhere (tests/test_golden.py)."""

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


def _run(stack: PeepholeLSTM, compiled: bool, N: int, T: int = 5):
    """outputs, final state and every gradient over a padded batch of N sequences from a given
    state (one that requires a gradient, as a decoder's does: the compiled step then sees the
    same kind of inputs at every step, and compiles once)."""
    stack.compiled = compiled
    g = torch.Generator().manual_seed(N)
    x = torch.randn(N, T, 6, generator=g, requires_grad=True)
    h0, c0 = (torch.randn(2, N, 8, generator=g, requires_grad=True) for _ in range(2))
    lengths = torch.randint(1, T + 1, (N,), generator=g)
    lengths[0] = T
    out, (h, c) = stack(x, (h0, c0), lengths=lengths)
    loss = (out ** 2).sum() + h.sum() + (c ** 3).sum()
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
    monkeypatch.setattr(lstm, "compiled_step", lambda device_type: f"compiled for {device_type}")
    stack = _stack()
    assert stack._step_function("cpu") is None
    assert stack._step_function("cuda") == "compiled for cuda"
    stack.compiled = True
    assert stack._step_function("cpu") == "compiled for cpu"
    stack.compiled = False
    assert stack._step_function("cuda") is None
