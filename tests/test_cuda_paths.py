"""The logic of the CUDA path, on the CPU: what replaces each wait for the device (packing sorted
by lengths on the host, a mask where a check would read the device, the DDP stop vote in the loss
collective), the clipping folded into a fused SGD step, the fp32 products' fallback, and the
perplexity's out-of-memory line. (What only a GPU can show: tests/test_cuda*.py, marked cuda.)"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from s2s import distributed, precision, train
from s2s.config import TrainConfig
from s2s.data.ids import IdCorpus
from s2s.model import build_model
from s2s.model.base import host_lengths, on_host
from s2s.model.gru import ChoGRUCell
from s2s.model.lstm import _run, _run_sorted
from s2s.model.seq2seq import RNNConfig

from helpers import Specials, tiny_pairs

pytestmark = pytest.mark.usefixtures("one_thread")


def tiny_model(arch: str, cell: str):
    cfg = RNNConfig(arch=arch, cell=cell, num_layers=2, hidden_size=16, embed_size=12,
                    reverse_source=True, init_seed=3)
    model = build_model(cfg, src_vocab=30, tgt_vocab=31, pad=0)
    model.init_weights(3)
    return model.train()


@pytest.mark.parametrize("rnn", [nn.LSTM(5, 4, 2, batch_first=True, bidirectional=True),
                                 nn.GRU(5, 4, 1, batch_first=True)], ids=["lstm", "gru"])
@pytest.mark.parametrize("with_state", [False, True], ids=["zeros", "state"])
def test_packing_sorted_on_the_host_gives_what_torchs_own_sorting_gives(rnn, with_state):
    torch.manual_seed(0)
    x = torch.randn(6, 7, 5)
    lengths = torch.tensor([3, 7, 1, 7, 5, 3])  # ties: the order of equal lengths is stable
    state = None
    if with_state:
        D = rnn.num_layers * (2 if rnn.bidirectional else 1)
        state = torch.randn(D, 6, 4)
        if isinstance(rnn, nn.LSTM):
            state = (state, torch.randn(D, 6, 4))
    want_out, want_final = _run(rnn, x, state, lengths)  # the CPU's: enforce_sorted=False
    got_out, got_final = _run_sorted(rnn, x, state, lengths)  # CUDA's, run here
    torch.testing.assert_close(got_out, want_out, rtol=0, atol=1e-6)
    want_final = want_final if isinstance(want_final, tuple) else (want_final,)
    got_final = got_final if isinstance(got_final, tuple) else (got_final,)
    for a, b in zip(got_final, want_final):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    assert float(got_out[2, 1:].abs().max()) == 0.0  # padding stays zero


def test_a_batch_sorted_already_is_packed_as_it_is(monkeypatch):
    rnn = nn.GRU(5, 4, 1, batch_first=True)
    x, lengths = torch.randn(4, 6, 5), torch.tensor([6, 6, 3, 1])
    want = _run(rnn, x, None, lengths)
    monkeypatch.setattr(torch.Tensor, "index_select", None)  # no gather may run
    got = _run_sorted(rnn, x, None, lengths)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)


def test_host_lengths_name_the_cpu_copy_of_that_tensor_only():
    on_device, copy = torch.tensor([3, 1]), torch.tensor([3, 1])
    assert on_host(copy) is copy  # a CPU tensor is its own
    meta = torch.empty(2, dtype=torch.long, device="meta")  # a device tensor read nowhere
    with host_lengths(meta, copy):
        assert on_host(meta) is copy
        with pytest.raises(NotImplementedError):  # another device tensor is copied (a wait)
            on_host(torch.empty(2, dtype=torch.long, device="meta"))
    with pytest.raises(NotImplementedError):
        on_host(meta)
    del on_device


def test_masking_a_batch_without_padding_changes_no_bit_of_chos_gru():
    """Off the CPU Cho's GRU masks every batch given lengths (checking for padding would wait for
    the device): a mask with nothing to hold gives the same bits."""
    torch.manual_seed(0)
    cell = ChoGRUCell(5, 4)
    x, h = torch.randn(6, 3, 5, requires_grad=True), torch.randn(3, 4)
    out, last = cell(x, h)
    masked, masked_last = cell(x, h, torch.ones(6, 3, 1, dtype=torch.bool))
    assert torch.equal(out, masked) and torch.equal(last, masked_last)
    (g,) = torch.autograd.grad(out.sum(), x)
    (g_masked,) = torch.autograd.grad(masked.sum(), x)
    assert torch.equal(g, g_masked)


@pytest.mark.parametrize("clip_norm", [5.0, 1e-3], ids=["unclipped", "clipped"])
def test_a_fused_sgd_with_the_clip_folded_in_takes_the_clipped_step(clip_norm):
    """What make_optimizer gives a model on CUDA (fused SGD), here on the CPU: the same update
    as clip_grad_norm_ and then foreach SGD, up to rounding."""
    cfg = TrainConfig(clip_norm=clip_norm)
    pairs = tiny_pairs()
    weights = []
    for fused in (False, True):
        model = tiny_model("seq2seq", "lstm")
        opt = torch.optim.SGD(model.parameters(), lr=0.7, fused=fused or None)
        train.train_step(model, opt, pairs, batch_size=len(pairs), lr=0.7, cfg=cfg,
                         vocab=Specials, device=torch.device("cpu"),
                         autocast=precision.autocast(torch.device("cpu"), None))
        weights.append({n: p.detach().clone() for n, p in model.named_parameters()})
        if fused:
            assert float(opt.grad_scale) > (1.0 if clip_norm < 1 else 0) and \
                (clip_norm < 1 or float(opt.grad_scale) == 1.0)
    start = {n: p.detach() for n, p in tiny_model("seq2seq", "lstm").named_parameters()}
    for n in weights[0]:
        torch.testing.assert_close(weights[1][n], weights[0][n], rtol=1e-6, atol=1e-8, msg=n)
        if clip_norm < 1:  # clipped to a norm of 1e-3 times lr 0.7: each weight moves a little
            assert float((weights[1][n] - start[n]).norm()) <= 0.7 * clip_norm * 1.001


def test_the_cpu_keeps_its_foreach_sgd():  # (CUDA's fused SGD: tests/test_cuda.py)
    model = tiny_model("seq2seq", "lstm")
    assert not train.make_optimizer(model, TrainConfig()).defaults.get("fused")


def test_one_processs_stop_vote_is_its_own_and_rides_with_the_loss():
    model = tiny_model("seq2seq", "lstm")
    opt = torch.optim.SGD(model.parameters(), lr=0.7)
    for asked in (False, True):
        vote = distributed.StopVote(asks=lambda: asked)
        nll, ntok = train.train_step(model, opt, tiny_pairs(), batch_size=4, lr=0.7,
                                     cfg=TrainConfig(), vocab=Specials,
                                     device=torch.device("cpu"),
                                     autocast=precision.autocast(torch.device("cpu"), None),
                                     vote=vote)
        assert vote.agreed is asked and ntok == 23 and nll > 0


def test_an_fp32_product_overload_torch_lacks_is_tried_once(monkeypatch):
    monkeypatch.setattr(precision, "_OUT_DTYPE", {})
    calls = []

    def lacking():
        calls.append(1)
        raise NotImplementedError("no mm.dtype here")

    assert precision._cuda_out_dtype("mm", lacking) is None
    assert precision._cuda_out_dtype("mm", lacking) is None and len(calls) == 1
    assert precision._cuda_out_dtype("bmm", lambda: "ran") == "ran"

    def broken():
        raise RuntimeError("a real error after it ran once")

    with pytest.raises(RuntimeError, match="a real error"):
        precision._cuda_out_dtype("bmm", broken)
    a, b = torch.randn(3, 4).bfloat16(), torch.randn(4, 2).bfloat16()
    got = precision.fp32_mm(a, b)  # the CPU: widened operands, an fp32 product
    assert got.dtype == torch.float32 and torch.equal(got, a.float() @ b.float())


def test_perplexity_out_of_memory_stops_in_one_line_naming_the_batch(monkeypatch):
    model = tiny_model("seq2seq", "lstm")

    def out_of_memory(*args):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 9.00 GiB. GPU 0 has "
                                     "a total capacity of 139.8 GiB\nmore")

    monkeypatch.setattr(model, "features", out_of_memory)
    with pytest.raises(train.TrainingError) as err:
        train.perplexity(model, IdCorpus.from_pairs(tiny_pairs()), vocab=Specials,
                         device=torch.device("cpu"))
    assert str(err.value) == (
        "perplexity: out of CPU memory on an evaluation batch of 4 pairs, source length 7, "
        "target length 9 (CUDA out of memory. Tried to allocate 9.00 GiB); lower "
        "prepare.max_len, which bounds the lengths, and rerun: training resumes from its last "
        "checkpoint")
    assert model.training  # left in train mode, as after a perplexity
