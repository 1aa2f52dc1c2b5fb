"""The model of §2: the peephole cell is exact, reversal is exactly the word order, the contract
holds, and a checkpoint refuses another vocabulary."""

import math
from pathlib import Path

import pytest
import torch
import yaml

from s2s import checkpoint
from s2s.config import ConfigError, load
from s2s.data.vocab import Vocab
from s2s.model.lstm import PeepholeLSTM, PeepholeLSTMCell, StandardLSTM
from s2s.model import build_model
from s2s.model.base import reverse_padded
from s2s.model.seq2seq import Seq2Seq
from s2s.model.seq2seq import RNNConfig


def sigmoid(x):
    return 1 / (1 + math.exp(-x))


def test_peephole_cell_matches_a_hand_computed_step():
    # H = 1, input size 1: every weight is a number, so eqs. 7-11 can be written out by hand.
    cell = PeepholeLSTMCell(1, 1)
    with torch.no_grad():
        cell.weight_ih.copy_(torch.tensor([[0.5], [-0.3], [0.8], [0.1]]))  # i, f, c, o
        cell.weight_hh.copy_(torch.tensor([[0.2], [0.4], [-0.6], [0.7]]))
        cell.bias.copy_(torch.tensor([0.1, 0.2, -0.1, 0.05]))
        cell.peephole.copy_(torch.tensor([[0.3], [-0.2], [0.9]]))  # w_ci, w_cf, w_co
    x, h0, c0 = 1.5, -0.4, 0.6
    i = sigmoid(0.5 * x + 0.2 * h0 + 0.3 * c0 + 0.1)
    f = sigmoid(-0.3 * x + 0.4 * h0 - 0.2 * c0 + 0.2)
    c1 = f * c0 + i * math.tanh(0.8 * x - 0.6 * h0 - 0.1)
    o = sigmoid(0.1 * x + 0.7 * h0 + 0.9 * c1 + 0.05)  # the output gate peeks at the new c
    h1 = o * math.tanh(c1)

    gates_x = torch.tensor([[0.5 * x, -0.3 * x, 0.8 * x, 0.1 * x]]) + cell.bias
    h, c = cell(gates_x, torch.tensor([[h0]]), torch.tensor([[c0]]))
    assert c.item() == pytest.approx(c1, abs=1e-7)
    assert h.item() == pytest.approx(h1, abs=1e-7)


def test_peephole_stack_with_zero_peepholes_equals_nn_lstm():
    torch.manual_seed(0)
    std = StandardLSTM(7, 5, 3)
    peep = PeepholeLSTM(7, 5, 3)
    with torch.no_grad():
        for k, cell in enumerate(peep.cells):
            cell.weight_ih.copy_(getattr(std.lstm, f"weight_ih_l{k}"))
            cell.weight_hh.copy_(getattr(std.lstm, f"weight_hh_l{k}"))
            cell.bias.copy_(getattr(std.lstm, f"bias_ih_l{k}") + getattr(std.lstm, f"bias_hh_l{k}"))
            cell.peephole.zero_()
    x = torch.randn(4, 6, 7)
    lengths = torch.tensor([6, 3, 1, 5])
    out_s, (h_s, c_s) = std(x, lengths=lengths)
    out_p, (h_p, c_p) = peep(x, lengths=lengths)
    torch.testing.assert_close(h_p, h_s, atol=1e-6, rtol=0)
    torch.testing.assert_close(c_p, c_s, atol=1e-6, rtol=0)
    mask = (torch.arange(6)[None, :] < lengths[:, None])[..., None]
    torch.testing.assert_close(out_p * mask, out_s * mask, atol=1e-6, rtol=0)


def test_final_state_ignores_padding():
    torch.manual_seed(1)
    for stack in (StandardLSTM(3, 4, 2), PeepholeLSTM(3, 4, 2)):
        x = torch.randn(1, 3, 3)
        padded = torch.cat([x, torch.randn(1, 4, 3)], dim=1)  # 4 steps of garbage after the end
        _, (h1, c1) = stack(x, lengths=torch.tensor([3]))
        _, (h2, c2) = stack(padded, lengths=torch.tensor([3]))
        torch.testing.assert_close(h1, h2, atol=1e-6, rtol=0)
        torch.testing.assert_close(c1, c2, atol=1e-6, rtol=0)


def test_reversal_is_exactly_the_word_order():
    pad = 0
    src = torch.tensor([[5, 6, 7, 8], [9, 10, pad, pad], [11, pad, pad, pad]])
    rev = reverse_padded(src, torch.tensor([4, 2, 1]))
    assert rev.tolist() == [[8, 7, 6, 5], [10, 9, pad, pad], [11, pad, pad, pad]]


def test_reversed_model_encodes_the_reversed_sentence():
    cfg = RNNConfig(cell="lstm", num_layers=2, hidden_size=8, embed_size=6)
    fwd = Seq2Seq(cfg, src_vocab=20, tgt_vocab=15, pad=0)
    fwd.init_weights(3)
    rev = Seq2Seq(RNNConfig(**{**vars(cfg), "reverse_source": True}), src_vocab=20, tgt_vocab=15,
                  pad=0)
    rev.load_state_dict(fwd.state_dict())
    src = torch.tensor([[4, 5, 6, 7], [8, 9, 0, 0]])
    lengths = torch.tensor([4, 2])
    by_hand = torch.tensor([[7, 6, 5, 4], [9, 8, 0, 0]])
    a, b = rev.encode(src, lengths), fwd.encode(by_hand, lengths)
    torch.testing.assert_close(a.h, b.h, atol=0, rtol=0)
    torch.testing.assert_close(a.c, b.c, atol=0, rtol=0)


def test_uniform_init_range_and_seed():
    cfg = RNNConfig(num_layers=2, hidden_size=16, embed_size=8, init_range=0.08)
    m1 = Seq2Seq(cfg, src_vocab=30, tgt_vocab=25, pad=0)
    m2 = Seq2Seq(cfg, src_vocab=30, tgt_vocab=25, pad=0)
    m1.init_weights(7)
    m2.init_weights(7)
    for (n, p1), p2 in zip(m1.named_parameters(), m2.parameters()):
        assert torch.equal(p1, p2), n
        assert p1.abs().max() <= 0.08
    m2.init_weights(8)
    assert not torch.equal(m1.proj.weight, m2.proj.weight)


# Every architecture and cell the config accepts (peephole is seq2seq only).
ARCHS = [("seq2seq", "lstm", "additive"), ("seq2seq", "peephole", "additive"),
         ("seq2seq", "gru", "additive"), ("cho", "gru", "additive"), ("cho", "lstm", "additive"),
         ("attention", "gru", "additive"), ("attention", "lstm", "additive"),
         ("attention", "lstm", "dot"), ("attention", "gru", "general")]


def tiny_model(arch, cell, attention, *, seed=5, init_range=0.08, reverse_source=True):
    cfg = RNNConfig(arch=arch, cell=cell, attention=attention, num_layers=2, hidden_size=8,
                      embed_size=6, reverse_source=reverse_source, init_range=init_range)
    model = build_model(cfg, src_vocab=20, tgt_vocab=15, pad=0)
    model.init_weights(seed)
    return model.eval()


@pytest.mark.parametrize("arch,cell,attention", ARCHS)
def test_step_by_step_decoding_equals_teacher_forcing(arch, cell, attention):
    model = tiny_model(arch, cell, attention)
    src = torch.tensor([[4, 5, 6], [7, 8, 0]])
    lengths = torch.tensor([3, 2])
    tgt_in = torch.tensor([[2, 9, 10, 11], [2, 12, 13, 0]])
    logits = model(src, lengths, tgt_in)  # (N, T, V)
    state = model.encode(src, lengths)
    for t in range(tgt_in.shape[1]):
        logp, state = model.step(tgt_in[:, t], state)
        torch.testing.assert_close(logp, torch.log_softmax(logits[:, t], -1), atol=1e-6, rtol=0)
    # select reorders, repeats and drops every field of the state: row 0 of the selection is row 1
    sel = state.select(torch.tensor([1, 1, 0]))
    assert type(sel) is type(state) and sel.h.shape == (2, 3, 8)
    logp_sel, _ = model.step(torch.tensor([14, 14, 3]), sel)
    logp_one, _ = model.step(torch.tensor([3, 14]), state)
    torch.testing.assert_close(logp_sel, logp_one[[1, 1, 0]], atol=1e-6, rtol=0)


@pytest.mark.parametrize("arch,cell,attention", ARCHS)
def test_padding_after_the_source_changes_nothing(arch, cell, attention):
    model = tiny_model(arch, cell, attention)
    src = torch.tensor([[4, 5, 6], [7, 8, 0]])
    lengths = torch.tensor([3, 2])
    tgt_in = torch.tensor([[2, 9, 10], [2, 12, 13]])
    # three more padded positions, filled with real words: only `lengths` may say where a source ends
    longer = torch.cat([src, torch.tensor([[9, 10, 11], [12, 13, 14]])], dim=1)
    torch.testing.assert_close(model(longer, lengths, tgt_in), model(src, lengths, tgt_in),
                               atol=1e-6, rtol=0)


@pytest.mark.parametrize("score", ["additive", "dot", "general"])
def test_attention_gives_padded_positions_zero_weight(score):
    model = tiny_model("attention", "lstm", score, seed=9, init_range=1.0)  # peaked weights
    src = torch.tensor([[4, 5, 6, 7, 8], [9, 10, 0, 0, 0], [11, 12, 13, 0, 0]])
    lengths = torch.tensor([5, 2, 3])
    with torch.no_grad():
        _, weights = model.teacher_forced(src, lengths, torch.tensor([[2, 9, 10]] * 3))  # (N, T, S)
    real = torch.arange(5)[None, :] < lengths[:, None]  # (N, S)
    assert torch.all(weights.masked_select(~real[:, None, :].expand_as(weights)) == 0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 3), atol=1e-6, rtol=0)
    assert torch.all(weights.masked_select(real[:, None, :].expand_as(weights)) > 0)
    # the weights depend on the step: the decoder's state is the query
    assert (weights[:, 0] - weights[:, 1]).abs().max() > 0.01


def test_attention_scores_are_the_formulas():
    model = tiny_model("attention", "gru", "additive", seed=2)
    state = model.encode(torch.tensor([[4, 5, 6]]), torch.tensor([3]))
    q = torch.randn(1, 8)
    _, got = model.attend(q, state)
    k = model.key_proj(state.memory[0])  # (S, H)
    e = torch.stack([model.v.weight[0] @ torch.tanh(model.query_proj.weight @ q[0] + k[j])
                     for j in range(3)])
    torch.testing.assert_close(got[0], torch.softmax(e, 0), atol=1e-6, rtol=0)
    dot = tiny_model("attention", "gru", "dot", seed=2)
    state = dot.encode(torch.tensor([[4, 5, 6]]), torch.tensor([3]))
    _, got = dot.attend(q, state)
    e = dot.key_proj(state.memory[0]) @ q[0]  # (S,)
    torch.testing.assert_close(got[0], torch.softmax(e, 0), atol=1e-6, rtol=0)


def test_peephole_cell_is_refused_outside_seq2seq(tmp_path):
    raw = yaml.safe_load(Path("params.yaml").read_text())
    raw["models"]["forward"].update(arch="attention", cell="peephole")
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=r"'models\.forward\.cell' is 'peephole'.*'attention'"):
        load(path)


def _vocab(words, tag):
    return Vocab(("<pad>", "<unk>", "<bos>", "<eos>") + tuple(words), fingerprint=tag)


@pytest.mark.parametrize("arch", ["seq2seq", "attention"])
def test_checkpoint_round_trip_and_vocab_mismatch(tmp_path, arch):
    src, tgt = _vocab("abcdef", "s" * 64), _vocab("uvwxyz", "t" * 64)
    cfg = RNNConfig(arch=arch, num_layers=1, hidden_size=8, embed_size=4)
    model = build_model(cfg, src_vocab=len(src), tgt_vocab=len(tgt), pad=0)
    model.init_weights(1)
    path = tmp_path / "model.pt"
    checkpoint.save(path, model, src_vocab=src, tgt_vocab=tgt, step=3)
    loaded = checkpoint.load_model(path, src_vocab=src, tgt_vocab=tgt)
    for (n, a), b in zip(model.state_dict().items(), loaded.state_dict().values()):
        assert torch.equal(a, b), n
    other = _vocab("abcdef", "x" * 64)
    with pytest.raises(checkpoint.CheckpointError, match=r"model\.pt: trained with another src"):
        checkpoint.load_model(path, src_vocab=other, tgt_vocab=tgt)
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(checkpoint.CheckpointError, match="not a readable checkpoint"):
        checkpoint.load_model(path, src_vocab=src, tgt_vocab=tgt)
    # a pickle of other objects: refused, and never with torch's advice to load it unsafely
    import fractions
    torch.save({"format": checkpoint.FORMAT, "model": fractions.Fraction(1, 3)}, path)
    with pytest.raises(checkpoint.CheckpointError) as e:
        checkpoint.load_model(path, src_vocab=src, tgt_vocab=tgt)
    assert str(e.value) == (f"{path}: not an s2s checkpoint: it holds objects other than tensors "
                            "and plain values, which are not loaded")
