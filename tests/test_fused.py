"""The speed paths compute what the plain ones compute: the hand-written CPU LSTM against
nn.LSTM (outputs, final states, every gradient, with padding), the fused softmax-layer loss
against F.cross_entropy, the single-step LSTM, the ensemble's softmax-sum combine against the
logaddexp chain (including probabilities too small for float32), and translate's batching."""

from __future__ import annotations

import functools
import math

import pytest
import torch
from torch import nn

from s2s.config import TranslateConfig
from s2s.data.vocab import SPECIALS, Vocab
from s2s.decode.ensemble import Ensemble
from s2s.decode.translate import translate
from s2s.losses import linear_cross_entropy
from s2s.model.fused import lstm_stack, lstm_step
from s2s.model.lstm import StandardLSTM
from s2s.model.seq2seq import Seq2Seq
from s2s.model.seq2seq import RNNConfig


def _run(fn, lstm, x, state):
    """Outputs, final states and the gradients of a loss that uses all three."""
    leaves = [*lstm.parameters(), x, *(state or ())]
    for p in leaves:
        p.grad = None
    out, (h, c) = fn()
    w = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(1))
    ((out * w).sum() + (h ** 2).sum() + (3 * c).sum()).backward()
    return [out.detach(), h.detach(), c.detach()] + [p.grad.clone() for p in leaves]


def _nn_lstm(lstm, x, state, lengths):
    if lengths is None:
        return lstm(x, state)
    packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    out, final = lstm(packed, state)
    out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
    return out, final


@pytest.mark.parametrize("lengths", [None, [6, 2, 5, 1], [6, 6, 6, 6]],
                         ids=["unpadded", "padded", "full-lengths"])
@pytest.mark.parametrize("with_state", [True, False], ids=["state", "zero-state"])
@pytest.mark.parametrize("directions", [1, 2], ids=["forward", "bidirectional"])
def test_lstm_stack_equals_nn_lstm_with_gradients(lengths, with_state, directions):
    torch.manual_seed(0)
    N, T, E, H, L = 4, 6, 5, 7, 3
    lstm = nn.LSTM(E, H, L, batch_first=True, bidirectional=directions == 2).double()
    x = torch.randn(N, T, E, dtype=torch.double, requires_grad=True)
    state = tuple(torch.randn(L * directions, N, H, dtype=torch.double, requires_grad=True)
                  for _ in range(2)) if with_state else None
    lens = None if lengths is None else torch.tensor(lengths)
    want = _run(lambda: _nn_lstm(lstm, x, state, lens), lstm, x, state)
    got = _run(lambda: lstm_stack(lstm, x, state, lens), lstm, x, state)
    assert len(got) == len(want) == 3 + 4 * L * directions + 1 + (2 if with_state else 0)
    for a, b in zip(got, want):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_standard_lstm_trains_through_the_fused_stack_in_float32():
    torch.manual_seed(1)
    fused, plain = StandardLSTM(8, 16, 2), StandardLSTM(8, 16, 2)
    plain.load_state_dict(fused.state_dict())
    plain.fused_cpu = False
    x = torch.randn(5, 9, 8, requires_grad=True)
    lengths = torch.tensor([9, 3, 7, 1, 9])
    results = []
    for stack in (fused, plain):
        stack.train()
        x.grad = None
        out, (h, c) = stack(x, lengths=lengths)
        (out.square().sum() + h.sum() + c.sum()).backward()
        results.append([out, h, c, x.grad] + [p.grad for p in stack.parameters()])
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_lstm_step_equals_nn_lstm():
    torch.manual_seed(2)
    lstm = nn.LSTM(6, 8, 2, batch_first=True).double()
    x = torch.randn(3, 1, 6, dtype=torch.double)
    state = (torch.randn(2, 3, 8, dtype=torch.double), torch.randn(2, 3, 8, dtype=torch.double))
    for s in (state, None):
        want_out, (want_h, want_c) = lstm(x, s)
        out, (h, c) = lstm_step(lstm, x, s)
        for a, b in ((out, want_out), (h, want_h), (c, want_c)):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_linear_cross_entropy_equals_cross_entropy_with_gradients():
    torch.manual_seed(3)
    N, T, H, V, pad = 3, 5, 8, 11, 0
    feats = torch.randn(N, T, H, dtype=torch.double, requires_grad=True)
    proj = nn.Linear(H, V).double()
    target = torch.randint(1, V, (N, T))
    target[0, 3:] = pad
    target[2, 1:] = pad

    def grads(loss):
        for p in (feats, proj.weight, proj.bias):
            p.grad = None
        (loss / N).backward()
        return [loss.detach()] + [p.grad.clone() for p in (feats, proj.weight, proj.bias)]

    want = grads(nn.functional.cross_entropy(proj(feats).flatten(0, 1), target.flatten(),
                                             ignore_index=pad, reduction="sum"))
    got = grads(linear_cross_entropy(feats, proj.weight, proj.bias, target, ignore_index=pad))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    assert got[1][0, 3:].abs().sum() == 0  # padded positions get no gradient


def _models(k: int, *, scale: float = 0.0) -> list[Seq2Seq]:
    models = []
    for seed in range(k):
        cfg = RNNConfig(cell="lstm", num_layers=2, hidden_size=16, embed_size=8,
                          reverse_source=True, init_seed=seed)
        m = Seq2Seq(cfg, src_vocab=20, tgt_vocab=24, pad=0)
        m.init_weights(seed)
        with torch.no_grad():  # scale > 1: logits hundreds apart, probabilities below 1e-40
            m.proj.bias.copy_(scale * torch.randn(24, generator=torch.Generator().manual_seed(seed)))
        models.append(m.eval())
    return models


@pytest.mark.parametrize("scale", [0.0, 100.0], ids=["ordinary", "underflowing-probabilities"])
def test_ensemble_softmax_sum_equals_the_logaddexp_chain(scale):
    models = _models(3, scale=scale)
    ens = Ensemble(models)
    src = torch.tensor([[5, 6, 7], [8, 9, 0]])
    lengths = torch.tensor([3, 2])
    state = ens.encode(src, lengths)
    prev = torch.tensor([1, 1])
    with torch.no_grad():
        got, _ = ens.step(prev, state)
        lprobs = [m.step(prev, s)[0] for m, s in zip(models, state.members)]
    want = functools.reduce(torch.logaddexp, lprobs) - math.log(3)
    if scale > 1:
        assert want.min() < -200  # far below what exp() of a float32 can hold
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_translate_output_does_not_depend_on_the_batch_size():
    models = _models(2)
    vocab = Vocab(SPECIALS + tuple(f"w{i}" for i in range(24 - len(SPECIALS))), "test")
    g = torch.Generator().manual_seed(4)
    sources = [torch.randint(len(SPECIALS), 20, (int(n),), generator=g).tolist()
               for n in torch.randint(1, 9, (13,), generator=g)]
    for system in (models[0], Ensemble(models)):
        outs = [translate(system, sources, cfg=TranslateConfig(batch_size=b, max_len_b=4),
                          beam=2, nbest=2, vocab=vocab, device=torch.device("cpu"))
                for b in (1, 32)]
        assert outs[0] == outs[1]
