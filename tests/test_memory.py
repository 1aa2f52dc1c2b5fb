"""The memory of a one-word change (s2s.analysis.memory) and the instrumented passes it uses,
which record every step's state (probes.trace_encoder(..., states=True))."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from s2s import layout
from s2s.analysis import measures, memory, probes
from s2s.model import build_model
from s2s.model.lstm import run_padded
from s2s.model.seq2seq import RNNConfig

SRC = torch.tensor([[4, 5, 6, 7, 8], [9, 10, 11, 0, 0], [12, 0, 0, 0, 0]])
LENGTHS = torch.tensor([5, 3, 1])


def tiny(cell="lstm", reverse=False, arch="seq2seq", layers=2, seed=3):
    cfg = RNNConfig(arch=arch, cell=cell, num_layers=layers, hidden_size=8, embed_size=6,
                    reverse_source=reverse, init_range=0.5)
    model = build_model(cfg, src_vocab=20, tgt_vocab=17, pad=0)
    model.init_weights(seed)
    if cell == "peephole":
        with torch.no_grad():
            for c in model.encoder.cells:
                c.peephole.uniform_(-1, 1)
    return model.eval()


@pytest.mark.parametrize("cell,arch", [("lstm", "seq2seq"), ("peephole", "seq2seq"),
                                       ("gru", "seq2seq"), ("gru", "cho"),
                                       ("cho_gru", "seq2seq"), ("cho_gru", "cho")])
@pytest.mark.parametrize("reverse", [False, True])
def test_the_instrumented_states_are_the_encoders_own(cell, arch, reverse):
    model = tiny(cell, reverse, arch)
    trace, fed = probes.trace_encoder(model, SRC, LENGTHS, states=True)
    x = model.source(SRC, LENGTHS)
    with torch.no_grad():
        out, (h, c) = model.encoder(x, lengths=LENGTHS)  # the model's own pass
    mask = trace.mask
    torch.testing.assert_close(trace.hiddens[-1][mask], out[mask], atol=1e-5, rtol=0)
    torch.testing.assert_close(trace.h, h, atol=1e-5, rtol=0)
    L = model.cfg.num_layers
    last = LENGTHS - 1
    torch.testing.assert_close(trace.hiddens[:, torch.arange(3), last], h, atol=1e-5, rtol=0)
    if cell in ("gru", "cho_gru"):
        assert trace.c is None and trace.cells is None
        assert ((trace.forget > 0) == mask[None, :, :, None].expand(L, -1, -1, 8)).all()
    else:
        torch.testing.assert_close(trace.cells[:, torch.arange(3), last], c, atol=1e-5, rtol=0)
        torch.testing.assert_close(trace.c, c, atol=1e-5, rtol=0)
    if arch == "cho":
        torch.testing.assert_close(trace.h[-1], model.encode(SRC, LENGTHS).summary,
                                   atol=1e-5, rtol=0)


def test_the_recorded_update_gate_is_nn_grus():
    model = tiny("gru", layers=1)
    trace = probes.trace_gru(model.encoder, model.source(SRC, LENGTHS), LENGTHS, states=True)
    gru = model.encoder.gru
    x = model.source(SRC, LENGTHS)[:, 0]  # (N, E), the first step from h = 0
    z = torch.sigmoid(x @ gru.weight_ih_l0[8:16].t() + gru.bias_ih_l0[8:16] + gru.bias_hh_l0[8:16])
    torch.testing.assert_close(trace.forget[0, :, 0], z.detach(), atol=1e-6, rtol=0)
    with torch.no_grad():
        out, _ = run_padded(gru, model.source(SRC, LENGTHS), None, LENGTHS)
    torch.testing.assert_close(trace.out[trace.mask], out[trace.mask], atol=1e-5, rtol=0)


def test_the_recorded_update_gate_is_cho_et_als():
    model = tiny("cho_gru", layers=1)
    trace = probes.trace_encoder(model, SRC, LENGTHS, states=True)[0]
    cell = model.encoder.cells[0]
    x = model.source(SRC, LENGTHS)[:, 0]  # (N, E), the first step from h = 0: z = sigma(W_z x + b_z)
    z = torch.sigmoid(x @ cell.weight_ih[8:16].t() + cell.bias[8:16])
    torch.testing.assert_close(trace.forget[0, :, 0], z.detach(), atol=1e-6, rtol=0)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
@pytest.mark.parametrize("reverse", [False, True])
def test_without_recurrent_weights_the_gate_alone_carries_the_change_exactly(cell, reverse):
    """W_hh = 0 (and no peepholes): after the changed step every gate and candidate is a
    function of the (unchanged) input alone, so c' - c (an LSTM's) or h' - h (a GRU's) is the
    change multiplied by the gate at every step, nothing else."""
    model = tiny(cell, reverse, layers=1).double()
    with torch.no_grad():
        stack = model.encoder.lstm if cell == "lstm" else model.encoder.gru
        stack.weight_hh_l0.zero_()
    sources = [[4, 5, 6, 7, 8, 9, 10], [11, 12, 13, 14]]
    subs = [memory.Substitution(0, 2, 6, 15), memory.Substitution(1, 1, 12, 16)]
    sums = memory.memory_decay(model, sources, subs, pad=0, steps=6)
    count = sums.count.numpy()
    # steps after the change: sentence 0 has 4 (forward) or 2, sentence 1 has 2 or 1
    assert count.tolist() == ([2, 2, 2, 1, 1, 0, 0] if not reverse else [2, 2, 1, 0, 0, 0, 0])
    measured = sums.dc if cell == "lstm" else sums.dh
    torch.testing.assert_close(sums.gate_only, measured, rtol=1e-12, atol=1e-15)
    assert (measured[0, count > 0] > 0).all()
    # with the recurrent weights, the input path changes it
    full = tiny(cell, reverse, layers=1).double()
    s2 = memory.memory_decay(full, sources, subs, pad=0, steps=6)
    meas2 = s2.dc if cell == "lstm" else s2.dh
    torch.testing.assert_close(s2.gate_only[:, 0], meas2[:, 0])  # the same start
    assert not torch.allclose(s2.gate_only[:, 1:3], meas2[:, 1:3])


def test_decay_by_hand_on_one_unit():
    """One sentence, one unit, c and c' given: |c' - c| and the forget-only roll by hand."""
    f = torch.tensor([0.9, 0.5, 0.8, 0.25])[None, None, :, None]  # (L, N, T, H)
    c = torch.tensor([0.0, 1.0, 1.0, 1.0])[None, None, :, None]
    c2 = torch.tensor([0.0, 1.4, 1.3, 1.1])[None, None, :, None]
    h, h2 = c * 0.5, c2 * 0.5
    mask = torch.ones(1, 4, dtype=torch.bool)
    a = probes.GateTrace(f, mask, h[0], h[:, :, -1], c[:, :, -1], h, c)
    b = probes.GateTrace(f, mask, h2[0], h2[:, :, -1], c2[:, :, -1], h2, c2)
    s = memory.decay_sums(a, b, torch.tensor([1]), torch.tensor([4]), steps=4)
    np.testing.assert_allclose(s.dc[0].numpy(), [0.4, 0.3, 0.1, 0, 0], atol=1e-7)
    np.testing.assert_allclose(s.gate_only[0].numpy(), [0.4, 0.4 * 0.8, 0.4 * 0.8 * 0.25, 0, 0],
                               atol=1e-7)
    np.testing.assert_allclose(s.dh[0].numpy(), [0.2, 0.15, 0.05, 0, 0], atol=1e-7)
    assert s.count.tolist() == [1, 1, 1, 0, 0]
    decay, half = measures.memory_frames("m", s, lstm=True)
    assert tuple(decay.columns) == layout.DECAY_COLUMNS
    assert np.isnan(decay["forget_only_dc"].iloc[-1]) and np.isnan(decay["update_only_dh"]).all()
    # 0.4 -> 0.3 -> 0.1: under 0.2 between k = 1 and 2, at 1 + 0.1 / 0.2
    assert half["half_life_c"].iloc[0] == pytest.approx(1.5)
    assert half["half_life_forget_only"].iloc[0] == pytest.approx(1 + 0.12 / (0.32 - 0.08))


def test_half_life():
    assert memory.half_life([1.0, 0.8, 0.4]) == pytest.approx(1.75)
    assert memory.half_life([1.0, 0.9, 0.8]) == math.inf
    assert math.isnan(memory.half_life([0.0, 0.0]))
    f = 0.9
    geometric = memory.half_life([f ** k for k in range(40)])
    assert abs(geometric - math.log(0.5) / math.log(f)) < 0.05


def test_substitutions_keep_the_context_and_change_the_word():
    word = torch.ones(30, dtype=torch.bool)
    word[:4] = False  # specials
    word[29] = False  # punctuation
    # context 5 ("a") is followed by 10, 11, 12; context 6 by 13 only
    sources = [[5, 10, 6, 13, 29], [5, 11, 7], [5, 12, 6, 13], [8, 9]]
    subs = memory.substitutions(sources, word=word, candidates=5, seed=0, min_count=1)
    by = {s.sentence: s for s in subs}
    # sentence 3: the sentence start is followed by 5 (x3) and 8: 8 -> 5
    assert set(by) >= {0, 1, 2}
    for s in subs:
        src = sources[s.sentence]
        assert src[s.position] == s.old and s.new != s.old
        if s.position:  # the new word follows the same context somewhere
            ctx = src[s.position - 1]
            assert any(o[p] == s.new and p and o[p - 1] == ctx for o in sources
                       for p in range(len(o)))
        assert s.position != 3 or s.sentence not in (0, 2)  # 13 is its context's only word
    assert memory.substitutions(sources, word=word, candidates=5, seed=0, min_count=1) == subs
    assert memory.substitutions(sources, word=word, candidates=1, seed=0, min_count=1) == []
    # by default a candidate follows its context at least twice: here only 5 after the start
    # and 13 after 6, each alone
    assert memory.substitutions(sources, word=word, candidates=5, seed=0) == []
    twice = sources + [[5, 10, 7], [5, 11]]  # 10 and 11 now follow 5 twice
    subs = memory.substitutions(twice, word=word, candidates=5, seed=0)
    assert subs and all(s.position == 1 and {s.old, s.new} == {10, 11} for s in subs)
    assert {s.sentence for s in subs} == {0, 1, 4, 5}


def test_unk_is_no_context():
    word = torch.ones(30, dtype=torch.bool)
    word[:4] = False
    sources = [[1, 10], [1, 11], [1, 10], [1, 11]]  # only <unk> before 10 and 11
    assert memory.substitutions(sources, word=word, candidates=5) == []
