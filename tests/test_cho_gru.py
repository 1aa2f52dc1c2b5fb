"""Cho et al.'s GRU (`cell: cho_gru`, s2s.model.gru): it computes eqs. 5-8 of the paper written
out here, differs from nn.GRU's form only by where the reset gate acts, keeps each sequence's own
final state under padding (both directions), runs under bf16 autocast with an fp32 state, and
works in every architecture through the inference contract."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from s2s import checkpoint
from s2s.arch.rnn import CELL_WORDS
from s2s.data.vocab import Vocab
from s2s.model import build_model
from s2s.model.gru import ChoGRU
from s2s.model.seq2seq import RNNConfig
from s2s.model.stacks import make_stack

BF16 = torch.bfloat16


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py


def random_stack(E, H, L, *, bidirectional=False, seed=0, scale=0.5, dtype=torch.float64):
    torch.manual_seed(seed)
    stack = ChoGRU(E, H, L, bidirectional=bidirectional).to(dtype)
    with torch.no_grad():
        for p in stack.parameters():
            p.uniform_(-scale, scale)
    return stack


def cho_equations(cell, xs, h):
    """Eqs. 5-8 of Cho et al. (2014) for one layer, step by step: xs (T, N, E), h (N, H)."""
    H = h.shape[1]
    W_r, W_z, W = cell.weight_ih[:H], cell.weight_ih[H:2 * H], cell.weight_ih[2 * H:]
    U_r, U_z, U = cell.weight_hh_rz[:H], cell.weight_hh_rz[H:], cell.weight_hh_n
    b_r, b_z, b = cell.bias[:H], cell.bias[H:2 * H], cell.bias[2 * H:]
    outs = []
    for x in xs:
        r = torch.sigmoid(x @ W_r.T + h @ U_r.T + b_r)  # eq. 5
        z = torch.sigmoid(x @ W_z.T + h @ U_z.T + b_z)  # eq. 6
        h_tilde = torch.tanh(x @ W.T + (r * h) @ U.T + b)  # eq. 8
        h = z * h + (1 - z) * h_tilde  # eq. 7
        outs.append(h)
    return torch.stack(outs), h


def test_stack_computes_chos_equations_layer_by_layer():
    stack = random_stack(3, 4, 2)
    x = torch.randn(2, 5, 3, dtype=torch.float64)  # (N, T, E)
    h0 = torch.randn(2, 2, 4, dtype=torch.float64)  # (L, N, H)
    out, (h, c) = stack(x, (h0, None))
    assert c is None and out.shape == (2, 5, 4) and h.shape == (2, 2, 4)
    inp, finals = x.transpose(0, 1), []
    for k, cell in enumerate(stack.cells):
        inp, hk = cho_equations(cell, inp, h0[k])
        finals.append(hk)
    torch.testing.assert_close(out, inp.transpose(0, 1), atol=1e-12, rtol=0)
    torch.testing.assert_close(h, torch.stack(finals), atol=1e-12, rtol=0)
    # no state given: zeros
    out0, _ = stack(x)
    want, _ = cho_equations(stack.cells[0], x.transpose(0, 1), torch.zeros(2, 4, dtype=x.dtype))
    want, _ = cho_equations(stack.cells[1], want, torch.zeros(2, 4, dtype=x.dtype))
    torch.testing.assert_close(out0, want.transpose(0, 1), atol=1e-12, rtol=0)


def nn_gru_of(cell, *, reset_open: bool) -> nn.GRU:
    """nn.GRU with the same W, U and b (b_hh = 0); reset_open: both reset gates forced to 1."""
    H = cell.hidden_size
    gru = nn.GRU(cell.weight_ih.shape[1], H, 1, batch_first=True).double()
    with torch.no_grad():
        gru.weight_ih_l0.copy_(cell.weight_ih)
        gru.weight_hh_l0.copy_(torch.cat([cell.weight_hh_rz, cell.weight_hh_n]))
        gru.bias_ih_l0.copy_(cell.bias)
        gru.bias_hh_l0.zero_()
        if reset_open:
            gru.bias_ih_l0[:H] = 50.0  # sigma(50) is 1.0 in float64
    return gru


def test_differs_from_nn_gru_only_where_the_reset_gate_acts():
    stack = random_stack(3, 4, 1, scale=0.8)
    x = torch.randn(3, 6, 3, dtype=torch.float64)
    h0 = torch.randn(1, 3, 4, dtype=torch.float64)
    ours, _ = stack(x, (h0, None))
    theirs, _ = nn_gru_of(stack.cells[0], reset_open=False)(x, h0)
    assert (ours - theirs).abs().max() > 1e-2  # r * (U h) is not U (r * h)
    with torch.no_grad():
        stack.cells[0].bias[:4] = 50.0
    ours, (h, _) = stack(x, (h0, None))
    theirs, h_theirs = nn_gru_of(stack.cells[0], reset_open=True)(x, h0)
    # an open reset gate: the same candidate, and the same update convention z h + (1 - z) h~
    torch.testing.assert_close(ours, theirs, atol=1e-12, rtol=0)
    torch.testing.assert_close(h, h_theirs, atol=1e-12, rtol=0)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_padding_gives_each_sequence_its_own_final_state(bidirectional):
    stack = random_stack(3, 4, 2, bidirectional=bidirectional, seed=1)
    lengths = torch.tensor([5, 2, 4, 1])
    x = torch.randn(4, 5, 3, dtype=torch.float64)
    x_junk = x.clone()
    for n, m in enumerate(lengths):
        x_junk[n, m:] = 100.0  # whatever sits at padded positions must not matter
    out, (h, _) = stack(x_junk, lengths=lengths)
    D = 8 if bidirectional else 4
    assert out.shape == (4, 5, D) and h.shape == (4 if bidirectional else 2, 4, 4)
    for n, m in enumerate(lengths.tolist()):
        alone, (h_alone, _) = stack(x[n:n + 1, :m])  # the sequence by itself, no padding
        torch.testing.assert_close(out[n, :m], alone[0], atol=1e-12, rtol=0)
        torch.testing.assert_close(h[:, n], h_alone[:, 0], atol=1e-12, rtol=0)
        assert torch.all(out[n, m:] == 0)  # as nn.GRU over a packed batch


def test_bidirectional_layer_reads_each_sequence_backwards_too():
    stack = random_stack(3, 4, 2, bidirectional=True, seed=2)
    x = torch.randn(2, 4, 3, dtype=torch.float64)
    out, (h, _) = stack(x)
    xs = x.transpose(0, 1)  # (T, N, E)
    f0, hf0 = cho_equations(stack.cells[0], xs, torch.zeros(2, 4, dtype=x.dtype))
    b0, hb0 = cho_equations(stack.cells[1], xs.flip(0), torch.zeros(2, 4, dtype=x.dtype))
    layer1_in = torch.cat([f0, b0.flip(0)], dim=-1)  # (T, N, 2H)
    f1, hf1 = cho_equations(stack.cells[2], layer1_in, torch.zeros(2, 4, dtype=x.dtype))
    b1, hb1 = cho_equations(stack.cells[3], layer1_in.flip(0), torch.zeros(2, 4, dtype=x.dtype))
    torch.testing.assert_close(out, torch.cat([f1, b1.flip(0)], -1).transpose(0, 1), atol=1e-12,
                               rtol=0)
    torch.testing.assert_close(h, torch.stack([hf0, hb0, hf1, hb1]), atol=1e-12, rtol=0)


def test_bf16_autocast_keeps_the_state_fp32_and_close_to_fp32():
    stack = random_stack(16, 32, 2, seed=3, scale=0.15, dtype=torch.float32)
    x = torch.randn(8, 7, 16, requires_grad=True)
    lengths = torch.tensor([7, 3, 5, 7, 1, 2, 6, 4])
    out, (h, _) = stack(x, lengths=lengths)
    (out.sum() + h.sum()).backward()
    grads = [x.grad.clone()] + [p.grad.clone() for p in stack.parameters()]
    x.grad = None
    stack.zero_grad()
    with torch.autocast("cpu", dtype=BF16):
        out_b, (h_b, _) = stack(x, lengths=lengths)
        step, (h_step, _) = stack(x[:, :1])  # a single step, as the decoders run it
    assert out_b.dtype == h_b.dtype == h_step.dtype == torch.float32
    err = float((out_b - out).detach().abs().max())
    assert 1e-5 < err < 3e-2  # bf16 products: not fp32, but close
    (out_b.sum() + h_b.sum()).backward()
    grads_b = [x.grad] + [p.grad for p in stack.parameters()]
    for g, g_b in zip(grads, grads_b):
        assert g_b.dtype == torch.float32
        assert float((g_b - g).norm() / g.norm()) < 3e-2


def test_single_steps_equal_the_sequence():
    stack = make_stack("cho_gru", 5, 6, 2).double()
    x = torch.randn(3, 4, 5, dtype=torch.float64)
    out, (h, _) = stack(x)
    state = None
    for t in range(4):
        step, state = stack(x[:, t:t + 1], state)
        torch.testing.assert_close(step[:, 0], out[:, t], atol=1e-12, rtol=0)
    torch.testing.assert_close(state[0], h, atol=1e-12, rtol=0)


# The architectures that take a GRU, with Cho et al.'s cell.
ARCHS = [("seq2seq", "additive"), ("cho", "additive"), ("attention", "additive"),
         ("attention", "general")]


def tiny_model(arch, attention="additive", *, seed=5):
    cfg = RNNConfig(arch=arch, cell="cho_gru", attention=attention, num_layers=2, hidden_size=8,
                    embed_size=6, reverse_source=True)
    model = build_model(cfg, src_vocab=20, tgt_vocab=15, pad=0)
    model.init_weights(seed)
    return model.eval()


@pytest.mark.parametrize("arch,attention", ARCHS)
def test_every_architecture_decodes_step_by_step_as_it_is_taught(arch, attention):
    model = tiny_model(arch, attention)
    assert all(p.abs().max() <= 0.08 for p in model.parameters())  # the paper's init, everywhere
    src = torch.tensor([[4, 5, 6], [7, 8, 0]])
    lengths = torch.tensor([3, 2])
    tgt_in = torch.tensor([[2, 9, 10, 11], [2, 12, 13, 0]])
    logits = model(src, lengths, tgt_in)  # (N, T, V)
    state = model.encode(src, lengths)
    assert state.c is None
    for t in range(tgt_in.shape[1]):
        logp, state = model.step(tgt_in[:, t], state)
        torch.testing.assert_close(logp, torch.log_softmax(logits[:, t], -1), atol=1e-6, rtol=0)
    # padding after the source, filled with real words, changes nothing
    longer = torch.cat([src, torch.tensor([[9, 10, 11], [12, 13, 14]])], dim=1)
    torch.testing.assert_close(model(longer, lengths, tgt_in), logits, atol=1e-6, rtol=0)
    # under bf16 autocast: close, with an fp32 state
    with torch.no_grad(), torch.autocast("cpu", dtype=BF16):
        state = model.encode(src, lengths)
        logp, state = model.step(tgt_in[:, 0], state)
    assert state.h.dtype == torch.float32
    assert float((logp - torch.log_softmax(logits[:, 0], -1)).detach().abs().max()) < 3e-2


@pytest.mark.parametrize("arch", ["seq2seq", "attention"])
def test_checkpoint_round_trip(tmp_path, arch):
    src = Vocab(("<pad>", "<unk>", "<bos>", "<eos>") + tuple("abcdefghijklmnop"), "s" * 64)
    tgt = Vocab(("<pad>", "<unk>", "<bos>", "<eos>") + tuple("qrstuvwxyzz"), "t" * 64)
    model = tiny_model(arch)
    checkpoint.save(tmp_path / "m.pt", model, src_vocab=src, tgt_vocab=tgt)
    loaded = checkpoint.load_model(tmp_path / "m.pt", src_vocab=src, tgt_vocab=tgt,
                                   expect=model.cfg)
    assert loaded.cfg.cell == "cho_gru"
    for (n, a), b in zip(model.state_dict().items(), loaded.state_dict().values()):
        assert torch.equal(a, b), n
    # a `gru` (nn.GRU) checkpoint is not a `cho_gru` one
    with pytest.raises(checkpoint.CheckpointError, match="'cell' is 'cho_gru' in the checkpoint"):
        checkpoint.check_identity(tmp_path / "m.pt", checkpoint.load_payload(tmp_path / "m.pt"),
                                  expect=RNNConfig(**{**model.cfg.__dict__, "cell": "gru"}))


def test_the_cell_in_words_and_refusals():
    assert RNNConfig(arch="cho", cell="cho_gru").describe().endswith(CELL_WORDS["cho_gru"])
    # PyTorch's form says so: the report names which GRU each model uses
    assert RNNConfig(arch="cho", cell="gru").describe().endswith(
        "; GRU (PyTorch's form: reset gate after the recurrent product)")
    with pytest.raises(ValueError, match="unknown cell 'gruu'"):
        make_stack("gruu", 2, 2, 1)
    with pytest.raises(ValueError, match="forget_bias 1.0 is for LSTM cells"):
        RNNConfig(cell="cho_gru", forget_bias=1.0)
