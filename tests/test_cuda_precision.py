"""The precision plan on a GPU (`pytest -m cuda`; skipped without CUDA): every recurrent stack
trains and decodes in the dtypes the plan records (never fp16), the TF32 flags follow the plan,
bf16 stays close to fp32, the explicit bf16 recurrence trains, the compiled peephole step and its
wavefront agree with the eager cell, the loss's logits are fp32 from the bf16 product, and beam
search's stable top-k on CUDA is the CPU's. CUDA runs are not bit for bit reproducible (cuDNN's RNN backward,
cuBLAS's reductions), so every comparison here has a tolerance.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from s2s import precision
from s2s.config import TrainConfig, TranslateConfig
from s2s.decode.translate import translate
from s2s.model import build_model, lstm
from s2s.model.lstm import PeepholeLSTM
from s2s.model.seq2seq import RNNConfig
from s2s.train import train_step
from helpers import Specials, tiny_pairs

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

CUDA = torch.device("cuda")
FP32, BF16, FP16 = torch.float32, torch.bfloat16, torch.float16

# every recurrent stack: lstm (cuDNN), peephole (eager products, compiled step), gru (cuDNN,
# gru_step for single steps), cho_gru; the attention model's bidirectional cuDNN encoders
ARCHS = [("seq2seq", "lstm"), ("seq2seq", "peephole"), ("seq2seq", "gru"),
         ("seq2seq", "cho_gru"), ("attention", "lstm"), ("attention", "gru")]
IDS = [f"{a}/{c}" for a, c in ARCHS]


@pytest.fixture(autouse=True)
def tf32_restored():
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def bf16_plan(**kw) -> precision.Precision:
    chosen = precision.choose("auto", CUDA, **kw)
    if chosen.dtype is None:
        pytest.skip(f"no bf16 tensor cores on {torch.cuda.get_device_name()}")
    return chosen


def tiny_model(arch: str, cell: str, hidden: int = 32):
    cfg = RNNConfig(arch=arch, cell=cell, num_layers=2 if arch == "seq2seq" else 1,
                    hidden_size=hidden, embed_size=24, reverse_source=True, init_seed=3)
    model = build_model(cfg, src_vocab=30, tgt_vocab=31, pad=0)
    model.init_weights(3)
    return model.to(CUDA).train()


def step(model, chosen: precision.Precision) -> float:
    """One update by the trainer's own step under `chosen`; the batch's mean NLL."""
    opt = torch.optim.SGD(model.parameters(), lr=0.7)
    pairs = tiny_pairs()
    nll, _ = train_step(model, opt, pairs, batch_size=len(pairs), lr=0.7, cfg=TrainConfig(),
                        vocab=Specials, device=CUDA, autocast=chosen.autocast())
    return nll / len(pairs)


@pytest.mark.parametrize("arch,cell", ARCHS, ids=IDS)
def test_a_bf16_training_step_runs_in_the_dtypes_the_plan_records(arch, cell):
    chosen = bf16_plan()
    assert chosen.parts() == {"products": "bf16", "recurrent": "tf32", "state": "fp32",
                              "softmax": "fp32"}
    model = tiny_model(arch, cell)
    watch = precision.watch(model, chosen)
    assert torch.isfinite(torch.tensor(step(model, chosen)))
    seen = watch.check()  # raises PrecisionMismatch on any other dtype
    assert {k.split(" ")[0] for k in seen} >= {"encoder", "decoder", "features"}
    for label, dtypes in seen.items():
        assert "float16" not in dtypes.values(), (label, dtypes)
        for what in ("h", "c"):
            assert dtypes.get(what, "fp32") == "fp32", (label, what)
        if label.endswith(("(StandardLSTM)", "(StandardGRU)", "(LSTM)", "(GRU)")):
            assert dtypes["output"] == "fp32", label  # cuDNN in fp32, autocast off
    assert all(p.dtype == FP32 and p.grad.dtype == FP32 for p in model.parameters()
               if p.grad is not None)


@pytest.mark.parametrize("arch,cell", ARCHS, ids=IDS)
def test_bf16_decoding_runs_in_the_dtypes_the_plan_records(arch, cell):
    chosen = bf16_plan()
    model = tiny_model(arch, cell).eval()
    watch = precision.watch(model, chosen)
    sources = [s for s, _ in tiny_pairs()]
    hyps = translate(model, sources, cfg=TranslateConfig(batch_size=2, max_len_a=1.0,
                                                         max_len_b=4),
                     beam=3, nbest=1, vocab=Specials, device=CUDA, mm_dtype=chosen.dtype)
    assert len(hyps) == len(sources)
    seen = watch.check()
    assert any(k.startswith("decoder") for k in seen)
    assert all("float16" not in d.values() for d in seen.values()), seen


def test_torchs_autocast_would_run_cudnn_lstm_in_fp16_and_the_check_stops_it(monkeypatch):
    """The defect the explicit dtypes fix: nn.LSTM under torch.autocast(cuda, bf16) is cuDNN in
    fp16. With the explicit dtype switched off, the precision check names the layer."""
    chosen = bf16_plan()
    raw = nn.LSTM(8, 8, batch_first=True).to(CUDA)
    with torch.autocast("cuda", dtype=BF16):
        out, (h, c) = raw(torch.randn(2, 3, 8, device=CUDA))
    if out.dtype != FP16:
        pytest.skip(f"this torch runs cuDNN LSTMs under bf16 autocast in {out.dtype}")
    monkeypatch.setattr(lstm, "recurrent_dtype", lambda x: None)  # as the code was
    model = tiny_model("seq2seq", "lstm")
    watch = precision.watch(model, chosen)
    step(model, chosen)
    with pytest.raises(precision.PrecisionMismatch,
                       match=r"^precision check: encoder \(StandardLSTM\) returned its output "
                             r"in float16, where the run records 'cuda: bf16 products, tf32 "
                             r"recurrent, fp32 state'"):
        watch.check()


def test_the_tf32_flags_follow_the_plan():
    precision.choose(False, CUDA)
    assert precision.tf32_flags() == {"matmul": False, "cudnn_rnn": False}
    assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
    chosen = bf16_plan()
    assert precision.tf32_flags() == {"matmul": True, "cudnn_rnn": True}
    with chosen.strict_fp32():
        assert precision.tf32_flags() == {"matmul": False, "cudnn_rnn": False}
    assert precision.tf32_flags() == {"matmul": True, "cudnn_rnn": True}


def test_fp32_promised_is_fp32_in_cudnns_lstm_and_in_cublas():
    """amp false: a cuDNN LSTM and a matmul agree with fp64 to fp32's rounding (TF32's 10-bit
    mantissa would be off by ~1e-3)."""
    precision.choose(False, CUDA)
    torch.manual_seed(0)
    rnn = nn.LSTM(512, 512, 2, batch_first=True)
    x = torch.randn(16, 20, 512)
    want, _ = rnn.double()(x.double())
    rnn = rnn.float().to(CUDA)
    got, _ = rnn(x.to(CUDA))
    assert float((got.double().cpu() - want).abs().max()) < 1e-5
    a, b = torch.randn(256, 1024), torch.randn(1024, 256)
    prod = (a.to(CUDA) @ b.to(CUDA)).double().cpu()
    assert float(((prod - a.double() @ b.double()).abs() / 32).max()) < 1e-5


@pytest.mark.parametrize("arch,cell", ARCHS, ids=IDS)
def test_bf16_training_stays_close_to_fp32(arch, cell):
    fp32 = step(tiny_model(arch, cell), precision.choose(False, CUDA))
    bf16 = step(tiny_model(arch, cell), bf16_plan())
    assert bf16 == pytest.approx(fp32, rel=5e-3)
    assert bf16 != fp32  # the products really ran in bf16


@pytest.mark.parametrize("arch,cell", [("seq2seq", "lstm"), ("seq2seq", "gru"),
                                       ("attention", "lstm")], ids=["lstm", "gru", "attention"])
def test_the_explicit_bf16_recurrence_trains_and_is_recorded(arch, cell):
    chosen = bf16_plan(recurrent=BF16)
    assert chosen.parts()["recurrent"] == "bf16" and chosen.state == BF16
    model = tiny_model(arch, cell)
    watch = precision.watch(model, chosen)
    bf16 = step(model, chosen)
    seen = watch.check()
    recurrent = [d for k, d in seen.items() if k.endswith(("(StandardLSTM)", "(StandardGRU)",
                                                            "(LSTM)", "(GRU)"))]
    assert recurrent and all(d["output"] == "bf16" for d in recurrent)
    fp32 = step(tiny_model(arch, cell), precision.choose(False, CUDA))
    assert bf16 == pytest.approx(fp32, rel=1e-2)


@pytest.mark.parametrize("autocast", [False, True], ids=["fp32", "bf16"])
def test_the_compiled_peephole_step_agrees_with_the_eager_cell(autocast):
    assert lstm.compiled_step("cuda") is not None  # Triton is there: the step compiles
    torch.manual_seed(0)
    stack = PeepholeLSTM(24, 64, 2).to(CUDA)
    for p in stack.parameters():
        nn.init.uniform_(p, -0.5, 0.5)
    # the step the default schedule runs at T = 9 (the wavefront's, on CUDA)
    wave = stack._schedule("cuda", 9) == "wavefront"
    key = lstm._key("cuda", lstm._wave_step if wave else lstm._masked_step)

    def run(compiled: bool | None, N: int):
        stack.compiled = compiled
        g = torch.Generator().manual_seed(N)
        x = torch.randn(N, 9, 24, generator=g).to(CUDA).requires_grad_()
        lengths = torch.randint(1, 10, (N,), generator=g)
        lengths[0] = 9
        with precision.autocast(CUDA, BF16 if autocast else None):
            out, (h, c) = stack(x, lengths=lengths.to(CUDA))
        assert out.dtype == h.dtype == c.dtype == FP32
        loss = (out ** 2).sum() + h.sum() + (c ** 3).sum()
        return [out, h, c, *torch.autograd.grad(loss, [x, *stack.parameters()])]

    # bf16: Triton's tanh and sigmoid differ from eager's by about an fp32 ulp, which flips the
    # bf16 rounding of about one h element in 20,000 at the next step's product, moving its gates
    # by about 1e-3: bf16 is compared at bf16's tolerance, fp32 at fp32's
    tol = dict(rtol=2e-2, atol=2e-3) if autocast else dict(rtol=1e-4, atol=1e-5)
    for N in (8, 5):  # an uneven last batch reuses the compiled kernels
        got, want = run(None, N), run(False, N)  # None: compiled on CUDA
        # a failed compile falls back to eager with a log line only: eager against eager
        assert lstm._COMPILED[key] is not None and key in lstm._COMPILED_RAN
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, **tol)


@pytest.mark.parametrize("autocast", [False, True], ids=["fp32", "bf16"])
def test_the_compiled_wavefront_agrees_with_the_eager_layers(autocast):
    """CUDA's default schedule of the peephole stack (its layers as a wavefront, the step
    compiled) against layer after layer, eager: the same maths, to each precision's rounding."""
    torch.manual_seed(0)
    stack = PeepholeLSTM(24, 64, 3).to(CUDA)
    for p in stack.parameters():
        nn.init.uniform_(p, -0.3, 0.3)

    def run(schedule: str, compiled: bool | None):
        stack.schedule, stack.compiled = schedule, compiled
        g = torch.Generator().manual_seed(1)
        x = torch.randn(8, 11, 24, generator=g).to(CUDA).requires_grad_()
        lengths = torch.randint(1, 12, (8,), generator=g)
        lengths[0] = 11
        with precision.autocast(CUDA, BF16 if autocast else None):
            out, (h, c) = stack(x, lengths=lengths.to(CUDA))
        loss = (out ** 2).sum() + h.sum() + (c ** 3).sum()
        return [out, h, c, *torch.autograd.grad(loss, [x, *stack.parameters()])]

    got, want = run("wavefront", None), run("layers", False)
    key = lstm._key("cuda", lstm._wave_step)  # a failed compile would have run eager
    assert lstm._COMPILED[key] is not None and key in lstm._COMPILED_RAN
    tol = dict(rtol=3e-2, atol=3e-3) if autocast else dict(rtol=1e-4, atol=1e-5)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, **tol)


def test_the_softmax_layers_logits_are_fp32_from_the_bf16_product():
    """On CUDA the loss's logits come from cuBLAS in fp32 (out_dtype): the loss is the fp64 one
    of the same bf16 operands to fp32's rounding, where bf16 logits would be off by ~1e-3."""
    from s2s.losses import linear_cross_entropy

    torch.manual_seed(0)
    x = torch.randn(2, 300, 64, device=CUDA)
    w, b = torch.randn(5000, 64, device=CUDA) * 0.5, torch.randn(5000, device=CUDA)
    target = torch.randint(1, 5000, (2, 300), device=CUDA)
    got = linear_cross_entropy(x, w, b, target, ignore_index=0, mm_dtype=BF16)
    logits = x.to(BF16).double() @ w.to(BF16).double().t() + b.double()
    want = nn.functional.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=0,
                                       reduction="sum")
    assert precision._OUT_DTYPE.get("addmm") is True  # this torch has the overload
    assert abs(float(got) / float(want) - 1) < 1e-5


def test_beam_searchs_stable_topk_on_cuda_is_the_cpus():
    from s2s.decode.beam import _topk_stable

    g = torch.Generator().manual_seed(0)
    x = (torch.randint(-40, 40, (64, 24000), generator=g).float() / 16)  # many ties
    x[:, ::7] = float("-inf")
    want = _topk_stable(x, 24)  # the CPU's window
    got = _topk_stable(x.to(CUDA), 24)  # CUDA's int64 keys, no wait for the device
    assert torch.equal(got[1].cpu(), want[1]) and torch.equal(got[0].cpu(), want[0])

