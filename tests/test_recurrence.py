"""The weights of a per-time-step loop under bf16 autocast (s2s.model.recurrence): each one's
gradient is the fp32 sum of its per-step gradients, where autocast's one cached cast would add them
in bf16; the forward pass and every other gradient are those of autocast's own products. On the
CPU (autocast runs bf16 here too, emulated where the CPU has no bf16 engine)."""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch import nn

from s2s.model import build_model, recurrence
from s2s.model.lstm import PeepholeLSTM
from s2s.model.seq2seq import RNNConfig

pytestmark = pytest.mark.usefixtures("one_thread")

BF16 = torch.bfloat16


@pytest.fixture
def seen(monkeypatch):
    """The operands every loop weight's gradient was computed from: [(dY, X)], one per weight."""
    operands = []
    original = recurrence.summed_weight_gradient

    def spy(dy, x):
        operands.append((dy, x))
        return original(dy, x)

    monkeypatch.setattr(recurrence, "summed_weight_gradient", spy)
    return operands


def as_before(monkeypatch):
    """recurrence.steps switched off: every product is autocast's F.linear, as the code was."""
    monkeypatch.setattr(recurrence, "steps", lambda x: contextlib.nullcontext())


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm())


def peephole_run(stack: PeepholeLSTM, x: torch.Tensor, w: torch.Tensor):
    stack.zero_grad()
    x = x.clone().requires_grad_()
    with torch.autocast("cpu", dtype=BF16):
        out, _ = stack(x)
    (out * w).sum().backward()
    return out.detach(), x.grad, {n: p.grad.clone() for n, p in stack.named_parameters()}


def test_a_peephole_layers_recurrent_weight_gets_the_fp32_sum_of_its_step_gradients(
        seen, monkeypatch):
    """The issue's experiment at a smaller size (N 32, H 64, T 50; bench/grad_error.py --loop
    runs N 64, H 256: 8.5e-3 before, 1.3e-7 after): W_hh's gradient against the fp64 sum of the
    same per-step gradients."""
    N, H, T = 32, 64, 50
    torch.manual_seed(0)
    stack = PeepholeLSTM(H, H, 1)
    for p in stack.parameters():
        nn.init.uniform_(p, -0.08, 0.08)
    x, w = torch.randn(N, T, H), torch.randn(N, T, H)
    out, dx, grads = peephole_run(stack, x, w)
    (dy, xs), = seen  # W_hh, the one weight multiplied at every step
    assert dy.shape == (N * T, 4 * H) and xs.shape == (N * T, H) and dy.dtype == BF16
    exact = dy.double().t() @ xs.double()  # (4H, H): the per-step gradients summed in fp64
    assert rel(grads["cells.0.weight_hh"], exact) <= 1e-5
    as_before(monkeypatch)
    out_b, dx_b, grads_b = peephole_run(stack, x, w)
    assert rel(grads_b["cells.0.weight_hh"], exact) > 1e-3  # autocast's bf16 sum
    # the same products forward, the same gradient of the input and of every other weight
    assert torch.equal(out, out_b) and torch.equal(dx, dx_b)
    for name in ("cells.0.weight_ih", "cells.0.bias", "cells.0.peephole"):
        assert torch.equal(grads[name], grads_b[name]), name


# architectures whose training runs a loop of products per step; the loop weights they must share
LOOPS = {
    "seq2seq/cho_gru": (("seq2seq", "cho_gru", "additive"),
                        {"encoder.cells.0.weight_hh_rz", "encoder.cells.0.weight_hh_n",
                         "decoder.cells.1.weight_hh_rz", "decoder.cells.1.weight_hh_n"}),
    "seq2seq/gru": (("seq2seq", "gru", "additive"),  # torch's CPU GRU, written out
                    {"encoder.gru.weight_hh_l0", "decoder.gru.weight_hh_l1"}),
    "attention/gru/additive": (("attention", "gru", "additive"),
                               {"decoder.gru.weight_hh_l0", "decoder.gru.weight_ih_l0",
                                "query_proj.weight", "v.weight", "out_proj.weight",
                                "encoder.weight_hh_l0", "encoder.weight_hh_l0_reverse"}),
    "attention/lstm/general": (("attention", "lstm", "general"),  # the CPU's LSTM steps
                               {"decoder.lstm.weight_hh_l0", "decoder.lstm.weight_ih_l0",
                                "bilinear.weight", "out_proj.weight"}),
    "attention/cho_gru/dot": (("attention", "cho_gru", "dot"),
                              {"decoder.cells.0.weight_hh_rz", "decoder.cells.0.weight_ih",
                               "out_proj.weight"}),
}


def model_gradients(model, batch, *, cache: bool):
    """Every parameter's gradient of a fixed function of the features, under bf16 autocast
    (`cache`: autocast's cast cache, which makes one bf16 copy of each weight per context)."""
    model.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=BF16, cache_enabled=cache):
        feats = model.features(*batch)  # (N, T, H)
    g = torch.Generator().manual_seed(1)
    (feats.float() * torch.randn(feats.shape, generator=g)).sum().backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("name", list(LOOPS))
def test_every_loop_weight_of_a_model_gets_the_fp32_sum_of_its_step_gradients(
        name, seen, monkeypatch):
    (arch, cell, attention), loop_weights = LOOPS[name]
    cfg = RNNConfig(arch=arch, cell=cell, attention=attention, num_layers=2 if arch == "seq2seq"
                    else 1, hidden_size=16, embed_size=12, reverse_source=True, init_seed=3)
    model = build_model(cfg, src_vocab=30, tgt_vocab=31, pad=0)
    model.init_weights(3)
    model.train()
    g = torch.Generator().manual_seed(2)
    N, S, T = 6, 9, 40
    lengths = torch.tensor([9, 9, 7, 5, 3, 1])
    src = torch.randint(3, 30, (N, S), generator=g) * (torch.arange(S) < lengths[:, None])
    batch = (src, lengths, torch.randint(3, 31, (N, T), generator=g))
    got = model_gradients(model, batch, cache=True)
    # every weight a step multiplies went through the loop: its gradient is the fp32 sum of the
    # per-step gradients it saw (summed here in fp64)
    by_shape = {}
    for dy, x in seen:
        by_shape.setdefault((dy.shape[1], x.shape[1]), []).append(dy.double().t() @ x.double())
    params = dict(model.named_parameters())
    exact = {}
    for p_name in loop_weights:
        sums = [s for s in by_shape.get(tuple(params[p_name].shape), [])
                if rel(got[p_name], s) <= 1e-5]
        assert sums, p_name
        exact[p_name] = sums[0]
    with monkeypatch.context() as m:
        as_before(m)
        before = model_gradients(model, batch, cache=True)  # autocast's one cast per weight
        # a cast per use (no cache): each use's gradient rounded to bf16, then added in fp32
        per_use = model_gradients(model, batch, cache=False)
    assert max(rel(before[p], exact[p]) for p in loop_weights) > 1e-3  # the bf16 sums
    assert set(got) == set(per_use)
    for p_name in per_use:  # the same gradients up to their rounding to bf16
        assert rel(got[p_name], per_use[p_name]) <= 1e-2, p_name


def test_outside_autocast_or_a_loop_the_product_is_f_linear_itself():
    torch.manual_seed(0)
    x, w, b = torch.randn(3, 4), torch.randn(5, 4, requires_grad=True), torch.randn(5)
    assert torch.equal(recurrence.linear(x, w, b), nn.functional.linear(x, w, b))
    with recurrence.steps(x):  # no autocast: no loop
        y = recurrence.linear(x, w, b)
        assert torch.equal(y, nn.functional.linear(x, w, b)) and y.grad_fn.name() == "AddmmBackward0"
    with torch.autocast("cpu", dtype=BF16):
        with torch.no_grad(), recurrence.steps(x):
            assert recurrence.linear(x, w, b).grad_fn is None
        with recurrence.steps(x):
            y = recurrence.linear(x, w, b)
            assert torch.equal(y, nn.functional.linear(x, w, b)) and y.dtype == BF16
            assert y.grad_fn.name() == "_StepLinearBackward"


def test_the_loop_benchmark_measures_all_three_ways_against_fp64():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import grad_error

    res = grad_error.loop_weight(batch=8, hidden=16, steps=20, repeats=1)
    before, per_step, now = (res[w]["error"] for w in grad_error.LOOP_WAYS)
    assert now <= 1e-6 < 1e-4 < per_step < before  # the fp32 GEMM, bf16-rounded steps, bf16 sum
    assert all(r["seconds"] > 0 for r in res.values())
    assert recurrence.steps.__name__ == "steps"  # switched back on


@pytest.mark.parametrize("schedule", ["layers", "wavefront"])
def test_the_kept_operands_are_freed_by_reference_counting_after_backward(schedule):
    """Each weight's kept operands (its cast, every step's dY and X) die with the graph, without
    Python's cycle collector: an anchor that held them while its node held it back was a cycle,
    and at the paper's size each step's copies of the weights stayed on the GPU until a
    collection."""
    import gc

    def alive() -> list:
        return [o for o in gc.get_objects()
                if type(o).__module__ == recurrence.__name__ and type(o).__name__ != "Steps"]

    torch.manual_seed(0)
    stack = PeepholeLSTM(16, 16, 2)
    stack.schedule, stack.compiled = schedule, False
    x = torch.randn(4, 12, 16)
    gc.collect()
    gc.disable()
    try:
        assert alive() == []
        with torch.autocast("cpu", dtype=BF16):
            out, (h, c) = stack(x)
        made = len(alive())
        (out.float().sum() + c.float().sum()).backward()
        del out, h, c  # the graph's last holders
        assert made >= 1 and alive() == []
    finally:
        gc.enable()
