"""Batches made ahead on a side thread (s2s.data.batching.prefetch, prefetch_batches), what a
Batch carries so that a training step needs no device-to-host sync but its NLL read, and the
trainer's step on a batch collated ahead giving the same numbers as on id pairs."""

from __future__ import annotations

import threading

import pytest
import torch
import torch.nn.functional as F

from s2s.config import TrainConfig
from s2s.data.batching import collate, prefetch, prefetch_batches
from s2s.losses import linear_cross_entropy, summed_nll
from s2s.model import build_model
from s2s.model.seq2seq import RNNConfig
from s2s.train import train_step

from helpers import CPU, Specials, tiny_pairs

pytestmark = pytest.mark.usefixtures("one_thread")

def CUDA(test):  # noqa: N802 - a marker: skipped without CUDA, run by `pytest -m cuda`
    return pytest.mark.cuda(pytest.mark.skipif(not torch.cuda.is_available(),
                                               reason="no CUDA device")(test))


def prefetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("s2s-prefetch")]


def test_prefetch_makes_the_next_item_while_the_caller_works_on_this_one():
    made = {i: threading.Event() for i in range(4)}

    def make(i):
        made[i].set()
        return i * 10

    it = prefetch(range(4), make, ahead=1)
    got = [next(it)]
    assert made[1].wait(timeout=10)  # made while the caller holds item 0
    assert not made[3].is_set()  # and no further than `ahead`
    got += list(it)
    assert got == [0, 10, 20, 30]
    assert not prefetch_threads()


def test_prefetch_ahead_zero_makes_each_item_when_asked():
    calls = []
    it = prefetch(range(3), lambda i: calls.append(i) or i, ahead=0)
    assert next(it) == 0 and calls == [0]
    assert list(it) == [1, 2] and calls == [0, 1, 2]
    with pytest.raises(ValueError, match="ahead must be >= 0, got -1"):
        next(prefetch(range(3), lambda i: i, ahead=-1))


def test_an_error_while_making_an_item_is_raised_at_that_item():
    def make(i):
        if i == 2:
            raise ValueError("bad pair 2")
        return i

    it = prefetch(range(5), make, ahead=2)
    assert [next(it), next(it)] == [0, 1]
    with pytest.raises(ValueError, match="bad pair 2"):
        next(it)
    assert not prefetch_threads()


def test_closing_the_iterator_early_stops_the_side_thread():
    calls = []
    it = prefetch(range(100), lambda i: calls.append(i) or i, ahead=2)
    assert next(it) == 0
    it.close()
    assert not prefetch_threads()
    assert len(calls) <= 4  # the one returned, two ahead, at most one being made


def test_prefetched_batches_are_the_collated_ones_and_none_for_an_empty_share():
    pairs = tiny_pairs()
    shares = [pairs[:2], [], pairs[2:], pairs]
    got = list(prefetch_batches(shares, pad=Specials.pad, bos=Specials.bos, eos=Specials.eos,
                                pin=False))
    assert got[1] is None
    for share, b in zip([shares[0], shares[2], shares[3]], [got[0], got[2], got[3]]):
        want = collate(share, pad=Specials.pad, bos=Specials.bos, eos=Specials.eos)
        for field in ("src", "src_lengths", "tgt_in", "tgt_out", "target_rows",
                      "src_lengths_cpu"):
            assert torch.equal(getattr(b, field), getattr(want, field)), field
        assert b.ntokens == want.ntokens


def test_a_batch_knows_its_target_rows_and_keeps_its_lengths_on_the_cpu():
    pairs = [([5, 6, 7], [8, 9]), ([], [9, 10, 11]), ([5], [])]
    b = collate(pairs, pad=0, bos=1, eos=2)
    assert b.tgt_out.tolist() == [[8, 9, 2, 0], [9, 10, 11, 2], [2, 0, 0, 0]]
    assert b.target_rows.tolist() == [0, 1, 2, 4, 5, 6, 7, 8] and b.ntokens == 8
    assert b.src_lengths.tolist() == [3, 1, 1]  # an empty source reads one <pad>
    assert b.src_lengths_cpu is b.src_lengths  # one tensor on a CPU batch
    moved = b.to(CPU)
    assert moved.src_lengths_cpu is b.src_lengths and moved.target_rows is b.target_rows


def test_a_step_on_a_batch_collated_ahead_is_the_step_on_its_pairs_to_the_bit():
    cfg = RNNConfig(cell="lstm", num_layers=2, hidden_size=16, embed_size=12,
                    reverse_source=True, init_seed=3)

    def two_steps(collated: bool):
        model = build_model(cfg, src_vocab=30, tgt_vocab=31, pad=0)
        model.init_weights(3)
        model.train()
        opt = torch.optim.SGD(model.parameters(), lr=0.7)
        pairs = tiny_pairs()
        shares = [pairs, pairs[1:]]
        batches = list(prefetch_batches(shares, pad=0, bos=1, eos=2, pin=False)) if collated \
            else shares
        out = []
        for share, b in zip(shares, batches):
            out.append(train_step(model, opt, b, batch_size=len(share), lr=0.7,
                                  cfg=TrainConfig(), vocab=Specials, device=CPU,
                                  autocast=torch.autocast("cpu", enabled=False)))
        return out, [p.detach().clone() for p in model.parameters()]

    (nll_a, w_a), (nll_b, w_b) = two_steps(False), two_steps(True)
    assert nll_a == nll_b
    assert all(torch.equal(a, b) for a, b in zip(w_a, w_b))


def test_an_empty_share_steps_with_zero_loss():
    model = build_model(RNNConfig(cell="lstm", num_layers=1, hidden_size=8, embed_size=8,
                                  init_seed=1), src_vocab=30, tgt_vocab=31, pad=0)
    opt = torch.optim.SGD(model.parameters(), lr=0.7)
    for empty in ([], None):
        nll, ntok = train_step(model, opt, empty, batch_size=4, lr=0.7, cfg=TrainConfig(),
                               vocab=Specials, device=CPU,
                               autocast=torch.autocast("cpu", enabled=False))
        assert (nll, ntok) == (0.0, 0)


# --- on a GPU (skipped without CUDA) -------------------------------------------------------------

@CUDA
def test_on_cuda_a_batch_is_copied_from_pinned_memory_with_its_lengths_left_on_the_cpu():
    b = collate(tiny_pairs(), pad=Specials.pad, bos=Specials.bos, eos=Specials.eos)
    pinned = b.pin_memory()
    assert pinned.src.is_pinned() and pinned.src_lengths_cpu.is_pinned()
    for start in (b, pinned):  # an unpinned batch is pinned on the way
        moved = start.to(torch.device("cuda"))
        assert moved.src.is_cuda and moved.target_rows.is_cuda and moved.src_lengths.is_cuda
        assert moved.src_lengths_cpu.device.type == "cpu"
        for field in ("src", "src_lengths", "tgt_in", "tgt_out", "target_rows"):
            assert torch.equal(getattr(moved, field).cpu(), getattr(b, field)), field
        assert moved.to(torch.device("cuda")).src is moved.src  # already there: no copy


@CUDA
@pytest.mark.parametrize("mm_dtype", [None, torch.bfloat16])
def test_on_cuda_the_streamed_loss_equals_cross_entropy_and_holds_one_chunk(mm_dtype):
    cuda = torch.device("cuda")
    g = torch.Generator().manual_seed(0)
    N, T, H, V = 64, 50, 256, 32000
    feats = torch.randn(N, T, H, generator=g).to(cuda).requires_grad_()
    weight = (0.05 * torch.randn(V, H, generator=g)).to(cuda).requires_grad_()
    bias = torch.zeros(V, device=cuda, requires_grad=True)
    target = torch.randint(1, V, (N, T), generator=g)
    target[:, 40:] = 0
    rows = (target.flatten() != 0).nonzero().squeeze(1).to(cuda)
    target = target.to(cuda)
    budget = 32 << 20  # 262 rows of V: 12 chunks

    def grads(loss):
        for t in (feats, weight, bias):
            t.grad = None
        loss.backward()
        return [loss.detach()] + [t.grad for t in (feats, weight, bias)]

    logits = F.linear(feats if mm_dtype is None else feats.to(mm_dtype).float(),
                      weight if mm_dtype is None else weight.to(mm_dtype).float(), bias)
    want = grads(F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=0,
                                 reduction="sum"))
    del logits
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    with torch.autocast("cuda", dtype=mm_dtype, enabled=mm_dtype is not None):
        loss = linear_cross_entropy(feats, weight, bias, target, ignore_index=0,
                                    mm_dtype=mm_dtype, rows=rows, chunk_bytes=budget)
    got = grads(loss)
    peak = torch.cuda.max_memory_allocated() - base
    M = rows.numel()
    assert peak < 2 * budget + 4 * 4 * (M * H + V * H) < 4 * M * V  # no (M, V) buffer
    tol = 1e-4 if mm_dtype is None else 2e-2
    for a, b in zip(got, want):
        assert float((a.float() - b.float()).abs().max()) <= tol * float(b.abs().max())
    nll = summed_nll(feats.detach(), weight.detach(), bias.detach(), target, ignore_index=0,
                     rows=rows, chunk_bytes=budget)
    if mm_dtype is None:
        torch.testing.assert_close(nll, want[0], rtol=1e-5, atol=0)


@CUDA
def test_on_cuda_copying_a_batch_and_the_loss_with_its_rows_never_wait_for_the_device():
    """torch's sync debug mode raises at any device-to-host wait: none in the pinned copy, the
    streamed loss over the batch's rows, or its backward (the trainer's one wait is its NLL
    read)."""
    cuda = torch.device("cuda")
    pinned = collate(tiny_pairs(), pad=Specials.pad, bos=Specials.bos,
                     eos=Specials.eos).pin_memory()
    N, T = pinned.tgt_out.shape
    feats = torch.randn(N, T, 16, device=cuda, requires_grad=True)
    weight = torch.randn(31, 16, device=cuda, requires_grad=True)
    bias = torch.zeros(31, device=cuda, requires_grad=True)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        b = pinned.to(cuda)
        loss = linear_cross_entropy(feats, weight, bias, b.tgt_out, ignore_index=Specials.pad,
                                    rows=b.target_rows)
        (loss / N).backward()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    want = F.cross_entropy(F.linear(feats, weight, bias).flatten(0, 1),
                           b.tgt_out.flatten(), ignore_index=Specials.pad, reduction="sum")
    torch.testing.assert_close(loss, want, rtol=1e-5, atol=1e-5)
