"""The softmax layer's loss in row chunks (s2s.losses): the same values and gradients as
F.cross_entropy whatever the chunking, bounded buffers for any number of rows, the evaluation's
NLL equal to F.cross_entropy's to the bit on the CPU, and the trainer's perplexity unchanged."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch._C._profiler import _EventType
from torch.profiler import ProfilerActivity, profile

from s2s import losses
from s2s.data.batching import collate
from s2s.data.ids import IdCorpus
from s2s.losses import linear_cross_entropy, smoothed_cross_entropy, summed_nll
from s2s.model import build_model
from s2s.model.seq2seq import RNNConfig
from s2s.train import perplexity

from helpers import Specials, tiny_pairs

pytestmark = pytest.mark.usefixtures("one_thread")

BF16 = torch.bfloat16
PAD = 0


def problem(*, N=6, T=9, H=16, V=50, dtype=torch.float32, seed=0):
    """Features (N, T, H), weight (V, H), bias (V,), targets (N, T) with padded tails."""
    g = torch.Generator().manual_seed(seed)
    feats = torch.randn(N, T, H, generator=g, dtype=dtype)
    weight = 0.3 * torch.randn(V, H, generator=g, dtype=dtype)
    bias = 0.1 * torch.randn(V, generator=g, dtype=dtype)
    target = torch.randint(1, V, (N, T), generator=g)
    target[0, 4:] = PAD
    target[N // 2, 1:] = PAD
    return feats, weight, bias, target


def loss_and_grads(fn, feats, weight, bias, scale=1 / 3):
    """fn(f, w, b) -> loss; the loss and the gradients of loss * scale (a batch mean's scale)."""
    f, w, b = (t.clone().requires_grad_() for t in (feats, weight, bias))
    loss = fn(f, w, b)
    (loss * scale).backward()
    return [loss.detach(), f.grad, w.grad, b.grad]


def reference(target, epsilon=0.0, mm_dtype=None):
    """F.cross_entropy of proj(features), with the products' operands in `mm_dtype` if given."""
    def fn(f, w, b):
        if mm_dtype is not None:  # the bf16 products, accumulated and returned in fp32
            logits = F.linear(f.to(mm_dtype).float(), w.to(mm_dtype).float(), b)
        else:
            logits = F.linear(f, w, b)
        return F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=PAD,
                               reduction="sum", label_smoothing=epsilon)
    return fn


def ours(target, *, epsilon=0.0, mm_dtype=None, chunk_bytes=None, rows=None):
    def fn(f, w, b):
        if epsilon:
            return smoothed_cross_entropy(f, w, b, target, ignore_index=PAD, epsilon=epsilon,
                                          mm_dtype=mm_dtype, chunk_bytes=chunk_bytes,
                                          rows=rows)[0]
        return linear_cross_entropy(f, w, b, target, ignore_index=PAD, mm_dtype=mm_dtype,
                                    chunk_bytes=chunk_bytes, rows=rows)
    return fn


def chunk_of(rows: int, V: int) -> int:
    """The budget that holds `rows` fp32 rows of V."""
    return 4 * V * rows


@pytest.mark.parametrize("epsilon", [0.0, 0.1])
@pytest.mark.parametrize("rows_per_chunk", [1, 7, 32])
def test_chunked_loss_equals_cross_entropy_in_fp64(epsilon, rows_per_chunk):
    feats, weight, bias, target = problem(dtype=torch.float64)
    want = loss_and_grads(reference(target, epsilon), feats, weight, bias)
    got = loss_and_grads(ours(target, epsilon=epsilon, chunk_bytes=chunk_of(rows_per_chunk, 50)),
                         feats, weight, bias)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    assert got[1][0, 4:].abs().max() == 0  # padded positions get no gradient


@pytest.mark.parametrize("epsilon", [0.0, 0.1])
def test_chunked_loss_equals_cross_entropy_in_fp32(epsilon):
    feats, weight, bias, target = problem(seed=1)
    want = loss_and_grads(reference(target, epsilon), feats, weight, bias)
    got = loss_and_grads(ours(target, epsilon=epsilon, chunk_bytes=chunk_of(5, 50)),
                         feats, weight, bias)
    for a, b in zip(got, want):
        assert a.dtype == torch.float32
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("epsilon", [0.0, 0.1])
def test_chunked_loss_with_bf16_products_is_fp32_and_close(epsilon):
    """bf16 products: the chunked loss is the one-chunk loss up to bf16's rounding of the
    products' outputs, far closer than to the fp32 loss."""
    feats, weight, bias, target = problem(seed=2, H=48, V=100)
    exact = loss_and_grads(reference(target, epsilon, mm_dtype=BF16), feats, weight, bias)
    fp32 = loss_and_grads(reference(target, epsilon), feats, weight, bias)
    with torch.autocast("cpu", dtype=BF16):
        got = loss_and_grads(ours(target, epsilon=epsilon, mm_dtype=BF16,
                                  chunk_bytes=chunk_of(4, 100)), feats, weight, bias)
        one = loss_and_grads(ours(target, epsilon=epsilon, mm_dtype=BF16), feats, weight, bias)
    for g, o, e, f in zip(got, one, exact, fp32):
        assert g.dtype == torch.float32
        scale = float(e.abs().max())
        assert float((g - e).abs().max()) / scale < 1e-2  # bf16 outputs: ~0.4% per product
        assert float((g - o).abs().max()) / scale < 1e-2
    # the bf16 products make a difference the test can see
    assert float((got[2] - fp32[2]).abs().max()) > 1e-4 * float(fp32[2].abs().max())


@pytest.mark.parametrize("epsilon", [0.0, 0.1])
def test_features_made_bf16_by_autocast_alone_backpropagate_outside_it(epsilon):
    """Called under autocast without mm_dtype, the features bf16 and the weight fp32, the loss
    had come out bf16 and a backward outside autocast stopped on "expected m1 and m2 to have the
    same dtype"; it gives what mm_dtype=bf16 gives (the trainer's call), an fp32 loss."""
    feats, weight, bias, target = problem()

    def grads(mm_dtype):
        x = feats.clone().requires_grad_()
        w, b = weight.clone().requires_grad_(), bias.clone().requires_grad_()
        with torch.autocast("cpu", dtype=BF16):
            h = x * 1.0 + 0.0  # bf16 features, as a layer under autocast gives them
            h = torch.matmul(h, torch.eye(h.shape[-1]))
            assert h.dtype == BF16
            if epsilon:
                loss = smoothed_cross_entropy(h, w, b, target, ignore_index=PAD,
                                              epsilon=epsilon, mm_dtype=mm_dtype)[0]
            else:
                loss = linear_cross_entropy(h, w, b, target, ignore_index=PAD,
                                            mm_dtype=mm_dtype)
        loss.backward()
        return loss.detach(), x.grad, w.grad, b.grad

    got = grads(None)
    assert got[0].dtype == torch.float32
    for a, b in zip(got, grads(BF16)):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_one_chunk_on_the_cpu_is_the_one_buffer_loss_to_the_bit():
    """Every budget that holds all rows gives the same numbers (the one-buffer path), so the
    default budget changes no number of a batch it holds; one row fewer streams the rows."""
    feats, weight, bias, target = problem(seed=3)
    M = int((target != PAD).sum())
    for epsilon in (0.0, 0.1):
        default = loss_and_grads(ours(target, epsilon=epsilon), feats, weight, bias)
        exact_fit = loss_and_grads(ours(target, epsilon=epsilon, chunk_bytes=chunk_of(M, 50)),
                                   feats, weight, bias)
        streamed = loss_and_grads(ours(target, epsilon=epsilon,
                                       chunk_bytes=chunk_of(M - 1, 50)), feats, weight, bias)
        assert all(torch.equal(a, b) for a, b in zip(default, exact_fit))
        assert not all(torch.equal(a, b) for a, b in zip(default, streamed))  # other ops
        for a, b in zip(streamed, default):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("chunk_rows", [None, 3])
def test_rows_from_collate_give_the_masks_numbers_to_the_bit(chunk_rows):
    """The kept positions handed over by the batch (no device-to-host sync) and the ones the
    loss finds from the targets give the same loss and gradients."""
    b = collate(tiny_pairs(), pad=Specials.pad, bos=Specials.bos, eos=Specials.eos)
    N, T = b.tgt_out.shape
    assert torch.equal(b.target_rows, (b.tgt_out.flatten() != PAD).nonzero().squeeze(1))
    assert b.target_rows.numel() == b.ntokens
    g = torch.Generator().manual_seed(4)
    feats, weight, bias = torch.randn(N, T, 8, generator=g), torch.randn(31, 8, generator=g), \
        torch.randn(31, generator=g)
    budget = None if chunk_rows is None else chunk_of(chunk_rows, 31)
    for epsilon in (0.0, 0.1):
        mask = loss_and_grads(ours(b.tgt_out, epsilon=epsilon, chunk_bytes=budget),
                              feats, weight, bias)
        given = loss_and_grads(ours(b.tgt_out, epsilon=epsilon, chunk_bytes=budget,
                                    rows=b.target_rows), feats, weight, bias)
        assert all(torch.equal(a, c) for a, c in zip(mask, given))


def test_label_smoothed_nll_is_the_plain_loss_and_not_differentiated():
    feats, weight, bias, target = problem(seed=5)
    budget = chunk_of(4, 50)
    f = feats.clone().requires_grad_()
    loss, nll = smoothed_cross_entropy(f, weight, bias, target, ignore_index=PAD, epsilon=0.1,
                                       chunk_bytes=budget)
    plain = linear_cross_entropy(feats, weight, bias, target, ignore_index=PAD,
                                 chunk_bytes=budget)
    assert torch.equal(nll, plain) and not nll.requires_grad and loss.requires_grad
    assert float(loss.detach()) > float(nll)  # smoothing adds the cross-entropy with the uniform


def test_streamed_loss_without_gradient_skips_the_gradient_work():
    feats, weight, bias, target = problem(seed=6)
    budget = chunk_of(4, 50)
    with_grad = ours(target, chunk_bytes=budget)(*(t.clone().requires_grad_()
                                                   for t in (feats, weight, bias)))
    with torch.no_grad():
        without = ours(target, chunk_bytes=budget)(feats.clone().requires_grad_(), weight, bias)
    assert torch.equal(with_grad.detach(), without) and not without.requires_grad


# --- memory: the largest buffer, counted -------------------------------------------------------

def allocations(fn) -> tuple[int, int]:
    """(largest single CPU allocation, peak of the live bytes over the ones before) while fn
    runs, as the profiler's allocator events record them (kernels' own temporaries included)."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    largest, peak, start = 0, 0, None

    def walk(nodes):
        for n in nodes:
            yield n
            yield from walk(n.children)

    events = sorted((n for n in walk(prof.profiler.kineto_results.experimental_event_tree())
                     if n.tag == _EventType.Allocation), key=lambda n: n.start_time_ns)
    for n in events:
        size, total = n.extra_fields.alloc_size, n.extra_fields.total_allocated
        if start is None:
            start = total - size
        largest = max(largest, size)
        peak = max(peak, total - start)
    assert events, "the profiler recorded no allocation"
    return largest, peak


@pytest.mark.parametrize("epsilon,mm_dtype", [(0.0, None), (0.1, None), (0.0, BF16)])
def test_the_largest_buffer_is_bounded_by_the_chunk_budget(epsilon, mm_dtype):
    """M = 4,000 rows of V = 1,000: (M, V) in fp32 is 16 MB; with a 256 KiB budget no buffer of
    forward and backward is larger than that, where the one-buffer loss allocates 16 MB."""
    M, H, V, budget = 4000, 8, 1000, 256 << 10
    g = torch.Generator().manual_seed(7)
    feats = torch.randn(M, H, generator=g, requires_grad=True)
    weight = (0.1 * torch.randn(V, H, generator=g)).requires_grad_()
    bias = torch.zeros(V, requires_grad=True)
    target = torch.randint(1, V, (M,), generator=g)

    def step(chunk_bytes):
        for t in (feats, weight, bias):  # freed here, not inside the measured run
            t.grad = None

        def run():
            ctx = torch.autocast("cpu", dtype=mm_dtype) if mm_dtype else torch.autocast(
                "cpu", enabled=False)
            with ctx:
                loss = ours(target, epsilon=epsilon, mm_dtype=mm_dtype,
                            chunk_bytes=chunk_bytes)(feats, weight, bias)
            loss.backward()
        return run

    largest, peak = allocations(step(budget))
    assert largest <= budget
    assert peak < 4 * budget + 8 * 4 * (M * H + V * H)  # a few chunks, plus the (M, H) and (V, H)
    one_largest, one_peak = allocations(step(4 * M * V))  # the one-buffer loss of today
    assert one_largest >= 4 * M * V > 60 * budget
    assert one_peak > 4 * peak


def test_the_evaluation_nll_is_bounded_by_the_chunk_budget():
    N, T, H, V, budget = 40, 100, 8, 1000, 256 << 10
    g = torch.Generator().manual_seed(8)
    feats, weight, bias = torch.randn(N, T, H, generator=g), torch.randn(V, H, generator=g), \
        torch.zeros(V)
    target = torch.randint(1, V, (N, T), generator=g)
    largest, _ = allocations(lambda: summed_nll(feats, weight, bias, target, ignore_index=PAD,
                                                chunk_bytes=budget))
    assert largest <= budget < 4 * N * T * V // 60


# --- the evaluation's NLL and the trainer's perplexity -----------------------------------------

@pytest.mark.parametrize("rows_per_chunk", [None, 1, 13])
def test_summed_nll_is_cross_entropys_to_the_bit_on_the_cpu(rows_per_chunk):
    for seed, (N, T, V) in enumerate([(64, 23, 997), (5, 51, 311), (64, 3, 2000)]):
        feats, weight, bias, target = problem(N=N, T=T, H=32, V=V, seed=seed)
        target[1:, T // 2:] = PAD  # most rows padded: the sum's order depends on where they sit
        want = F.cross_entropy(F.linear(feats, weight, bias).flatten(0, 1), target.flatten(),
                               ignore_index=PAD, reduction="sum")
        budget = None if rows_per_chunk is None else chunk_of(rows_per_chunk, V)
        got = summed_nll(feats, weight, bias, target, ignore_index=PAD, chunk_bytes=budget)
        assert got.dtype == torch.float32 and float(got) == float(want)
        rows = (target.flatten() != PAD).nonzero().squeeze(1)
        assert float(summed_nll(feats, weight, bias, target, ignore_index=PAD, rows=rows,
                                chunk_bytes=budget)) == float(want)


@pytest.mark.parametrize("contiguous", [True, False])
def test_summed_nll_computes_the_logits_as_f_linear_does(contiguous):
    """F.linear adds the bias inside the GEMM for contiguous features and after it otherwise
    (an LSTM's unpacked outputs are a transposed view); at H = 384 the two differ in the last
    bit, and so would the perplexity."""
    feats, weight, bias, target = problem(N=12, T=9, H=384, V=40, seed=11)
    if not contiguous:
        feats = feats.transpose(0, 1).contiguous().transpose(0, 1)  # (N, T, H), strides (H, N*H, 1)
    assert feats.is_contiguous() == contiguous
    want = F.cross_entropy(F.linear(feats, weight, bias).flatten(0, 1), target.flatten(),
                           ignore_index=PAD, reduction="sum")
    for budget in (None, chunk_of(7, 40)):
        got = summed_nll(feats, weight, bias, target, ignore_index=PAD, chunk_bytes=budget)
        assert float(got) == float(want)
    other = F.linear(feats.contiguous() if not contiguous else feats.transpose(0, 1).contiguous()
                     .transpose(0, 1), weight, bias)  # the other way of adding the bias
    assert not torch.equal(other, F.linear(feats, weight, bias))  # the case is a real one


def test_the_one_buffer_log_prob_of_other_devices_is_the_log_softmax():
    """Off the CPU, summed_nll and the streamed loss take each target's log-prob as
    z[target] - logsumexp(z) in one buffer (torch's log-softmax is in place on the CPU only)."""
    feats, weight, bias, target = problem(N=7, T=4, H=16, V=3000, seed=9)
    z = F.linear(feats, weight, bias).flatten(0, 1)  # (28, V)
    t = target.flatten()[:, None].clamp(min=1)
    want = torch.log_softmax(z, 1).gather(1, t)
    zt, lse, s = losses._target_lse_(z.clone(), t)
    torch.testing.assert_close(zt - lse, want, rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(s.log() + z.amax(1, keepdim=True), lse)


def old_perplexity(model, pairs, *, batch_size=64) -> float:
    """The trainer's perplexity as it was computed for the published run: full (N, T, V)
    logits, F.cross_entropy per batch, the batches added as Python floats."""
    model.eval()
    nll, ntok = 0.0, 0
    with torch.no_grad():
        # the batches of eval_batches as it was: sorted by (source, target length, index)
        order = sorted(range(len(pairs)), key=lambda i: (len(pairs[i][0]), len(pairs[i][1]), i))
        for idx in (order[k: k + batch_size] for k in range(0, len(order), batch_size)):
            b = collate([pairs[i] for i in idx], pad=Specials.pad, bos=Specials.bos,
                        eos=Specials.eos)
            logits = model(b.src, b.src_lengths, b.tgt_in)  # (N, T, V)
            nll += F.cross_entropy(logits.flatten(0, 1).float(), b.tgt_out.flatten(),
                                   ignore_index=Specials.pad, reduction="sum").item()
            ntok += b.ntokens
    model.train()
    return math.exp(nll / ntok)


def eval_pairs(n=150, seed=10):
    g = torch.Generator().manual_seed(seed)
    return [([int(x) for x in torch.randint(3, 60, (int(torch.randint(1, 18, (1,), generator=g)),),
                                            generator=g)],
             [int(x) for x in torch.randint(3, 70, (int(torch.randint(1, 20, (1,), generator=g)),),
                                            generator=g)])
            for _ in range(n)]


@pytest.mark.parametrize("arch,cell", [("seq2seq", "lstm"), ("seq2seq", "peephole"),
                                       ("attention", "gru"), ("cho", "cho_gru")])
@pytest.mark.parametrize("budget_rows", [None, 5])
def test_perplexity_is_the_published_computations_to_the_bit(arch, cell, budget_rows,
                                                             monkeypatch):
    """At H = 256 and logits of a trained model's size (tens), where the two ways of adding
    the softmax layer's bias (above) change the perplexity's last digits."""
    cfg = RNNConfig(arch=arch, cell=cell, num_layers=2 if arch == "seq2seq" else 1,
                    hidden_size=256, embed_size=16, reverse_source=True, init_seed=4)
    model = build_model(cfg, src_vocab=60, tgt_vocab=70, pad=0)
    model.init_weights(4)
    with torch.no_grad():
        model.proj.weight.mul_(40.0)
        model.proj.bias.copy_(2 * torch.randn(70, generator=torch.Generator().manual_seed(3)))
    pairs = eval_pairs()
    want = old_perplexity(model, pairs, batch_size=16)
    if budget_rows is not None:
        monkeypatch.setattr(losses, "CHUNK_BYTES", chunk_of(budget_rows, 70))
    got = perplexity(model, IdCorpus.from_pairs(pairs), vocab=Specials,
                     device=torch.device("cpu"), batch_size=16)
    if budget_rows is None or gemm_rows_are_independent(H=256, V=70):
        assert got == want
    else:  # a chunk's rows come from a GEMM of fewer rows, which this CPU rounds otherwise
        assert got == pytest.approx(want, rel=1e-6) and got != want
    assert got > 70  # worse than uniform: the scaled layer is confidently wrong
    assert model.training


def gemm_rows_are_independent(*, H: int, V: int) -> bool:
    """Whether this CPU's fp32 GEMM gives a row the same bits whatever rows are computed with
    it. On the AMD kinds it does; Intel's (oneDNN/MKL on Sapphire Rapids) picks its kernel by
    the number of rows, so the logits of a chunk of 5 rows differ in their last bits from the
    same rows' in a batch of 16 x T, and the published perplexity is kept to the bit only
    where the batch is one chunk (CHUNK_BYTES' default holds a whole evaluation batch)."""
    g = torch.Generator().manual_seed(0)
    x, w, b = torch.randn(80, H, generator=g), torch.randn(V, H, generator=g), torch.randn(V)
    whole = torch.addmm(b, x, w.t())
    return all(torch.equal(torch.addmm(b, x[i:i + 5], w.t()), whole[i:i + 5])
               for i in range(0, 80, 5))


def test_bench_loss_quick_prints_its_table():
    """bench/loss.py starts and prints a row per loss, the streamed one within its budget."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    proc = subprocess.run([sys.executable, str(root / "bench" / "loss.py"), "--quick"],
                          capture_output=True, text=True, timeout=300, check=True)
    rows = [line.split() for line in proc.stdout.splitlines() if line.startswith("quick")]
    assert len(rows) == 4
    for row in rows:
        chunks, largest = int(row[-4]), float(row[-2])
        assert (chunks, largest <= 0.5) == ((8, True) if row[-5] == "streamed" else (1, False))
