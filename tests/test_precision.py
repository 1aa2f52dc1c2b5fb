"""bf16 matmuls (s2s.precision, train.amp, translate.amp): fp32 stays bit for bit what it was, bf16
stays close to fp32, and what must be fp32 (state, loss, n-best scores) is."""

from __future__ import annotations

import contextlib
import functools
import json
import math
import re

import pytest
import torch
from torch import nn

from s2s import precision
from s2s.config import ConfigError, TranslateConfig
from s2s.data.batching import collate
from s2s.decode.beam import beam_search, score_sequences
from s2s.decode.translate import translate
from s2s.losses import linear_cross_entropy
from s2s.model import build_model
from s2s.model.fused import lstm_stack
from s2s.model.seq2seq import RNNConfig
from helpers import EOS, ScriptedModel, A, B
from helpers import Specials, profile_text, tiny_pairs, two_training_steps as _steps

BF16 = torch.bfloat16
CPU = torch.device("cpu")


ARCHS = [("seq2seq", "lstm"), ("seq2seq", "peephole"), ("seq2seq", "gru"), ("cho", "gru"),
         ("attention", "gru"), ("attention", "lstm")]


def tiny_model(arch: str, cell: str):
    cfg = RNNConfig(arch=arch, cell=cell, num_layers=2 if arch == "seq2seq" else 1,
                      hidden_size=16, embed_size=12, reverse_source=True, init_seed=3)
    model = build_model(cfg, src_vocab=30, tgt_vocab=31, pad=0)
    model.init_weights(3)
    return model


def two_training_steps(model, mm_dtype):
    """Two steps of the trainer (tests/helpers.py): the losses, and the weights' sum of |w| after."""
    losses = _steps(model, mm_dtype)
    return losses, float(sum(p.detach().double().abs().sum() for p in model.parameters()))


# Golden values: two fp32 training steps of each tiny seeded model, computed with the code before
# bf16 existed (commit d5edc92). amp: false must keep reproducing them.
GOLDEN = {
    "seq2seq/lstm": ([19.687036514282227, 18.70064926147461], 382.35067093579255),
    "seq2seq/peephole": ([19.685699462890625, 18.71529197692871], 379.3203877661532),
    "seq2seq/gru": ([19.711917877197266, 18.68813705444336], 300.47698670375996),
    "cho/gru": ([19.69442367553711, 18.674766540527344], 241.4270805543074),
    "attention/gru": ([19.69334602355957, 18.6887264251709], 373.76101045430977),
    "attention/lstm": ([19.686580657958984, 18.66912841796875], 451.9225807260955),
}


@pytest.mark.parametrize("arch,cell", ARCHS, ids=[f"{a}/{c}" for a, c in ARCHS])
def test_fp32_training_steps_match_the_golden_values_of_the_code_before_bf16(arch, cell):
    torch.set_num_threads(1)
    losses, weights = two_training_steps(tiny_model(arch, cell), None)
    want_losses, want_weights = GOLDEN[f"{arch}/{cell}"]
    assert losses == pytest.approx(want_losses, rel=1e-6, abs=0)
    assert weights == pytest.approx(want_weights, rel=1e-6, abs=0)


@pytest.mark.parametrize("arch,cell", ARCHS, ids=[f"{a}/{c}" for a, c in ARCHS])
def test_bf16_training_steps_stay_close_to_fp32_and_keep_fp32_weights(arch, cell):
    torch.set_num_threads(1)
    model = tiny_model(arch, cell)
    losses, weights = two_training_steps(model, BF16)
    want_losses, want_weights = GOLDEN[f"{arch}/{cell}"]
    assert all(p.dtype == torch.float32 for p in model.parameters())  # the master weights
    assert losses == pytest.approx(want_losses, rel=5e-3)
    assert weights == pytest.approx(want_weights, rel=5e-3)
    assert losses != want_losses  # the products really ran in bf16


def test_bf16_lstm_layer_is_close_to_fp32_in_outputs_and_every_gradient():
    torch.manual_seed(0)
    lstm = nn.LSTM(32, 48, 2, batch_first=True)
    x = torch.randn(5, 7, 32, requires_grad=True)
    lengths = torch.tensor([7, 3, 5, 1, 6])

    def run(dt):
        x.grad = None
        lstm.zero_grad()
        out, (h, c) = lstm_stack(lstm, x, None, lengths, mm_dtype=dt)
        ((out.float() ** 2).sum() + (h ** 2).sum() + (c ** 3).sum()).backward()
        return [out.float(), h, c, x.grad] + [p.grad for p in lstm.parameters()], (h.dtype,
                                                                                   c.dtype)

    want, _ = run(None)
    got, state_dtypes = run(BF16)
    assert state_dtypes == (torch.float32, torch.float32)  # the state never leaves fp32
    for w, g in zip(want, got):
        assert g.dtype == torch.float32
        err = float((w - g).detach().abs().max() / w.detach().abs().max())
        assert 1e-5 < err < 2e-2  # bf16's 8-bit mantissa: ~0.4% per product, never more
    out, _ = lstm_stack(lstm, x, None, lengths, mm_dtype=BF16)
    assert float(out[1, 3:].detach().abs().max()) == 0.0  # padded outputs are exactly zero


def test_bf16_softmax_layer_loss_is_fp32_and_close():
    torch.manual_seed(0)
    feats = torch.randn(4, 6, 48, requires_grad=True)
    weight = (0.1 * torch.randn(100, 48)).requires_grad_()
    bias = torch.zeros(100, requires_grad=True)
    target = torch.randint(1, 100, (4, 6))
    target[0, 4:] = 0

    def run(dt):
        for t in (feats, weight, bias):
            t.grad = None
        loss = linear_cross_entropy(feats, weight, bias, target, ignore_index=0, mm_dtype=dt)
        loss.backward()
        return [loss.detach(), feats.grad, weight.grad, bias.grad]

    want, got = run(None), run(BF16)
    assert got[0].dtype == torch.float32
    for w, g in zip(want, got):
        assert g.dtype == torch.float32
        assert float((w - g).abs().max() / w.abs().max()) < 1e-2
    assert float(got[1][0, 4:].abs().max()) == 0.0  # ignored positions get no gradient


@pytest.mark.parametrize("arch,cell", ARCHS, ids=[f"{a}/{c}" for a, c in ARCHS])
def test_bf16_search_writes_the_fp32_models_own_scores_in_the_searchs_order(arch, cell):
    """translate.amp: the search runs in bf16, every n-best score is the fp32 model's
    teacher-forced log-prob of that hypothesis, and each list keeps the order the bf16 search
    gave it, so that its first entry is the search's 1-best."""
    torch.set_num_threads(1)
    model = tiny_model(arch, cell).eval()
    sources = [s for s, _ in tiny_pairs()]
    cfg = TranslateConfig(batch_size=2, max_len_a=1.0, max_len_b=4)
    hyps = translate(model, sources, cfg=cfg, beam=4, nbest=3, vocab=Specials, device=CPU,
                     mm_dtype=BF16)
    one = translate(model, sources, cfg=cfg, beam=4, nbest=1, vocab=Specials, device=CPU,
                    mm_dtype=BF16)
    # the same search on the batch translate makes of them (one batch, by length)
    order = sorted(range(len(sources)), key=lambda i: (len(sources[i]), i))
    b = collate([(sources[i], []) for i in order], pad=0, bos=1, eos=2)
    with precision.autocast(CPU, BF16):
        search = beam_search(model, b.src, b.src_lengths, beam=4, nbest=3, bos=1, eos=2, pad=0,
                             max_len=b.src_lengths + 4)
    for i, src in enumerate(sources):
        hs = hyps[i]
        assert hs[0].tokens == one[i][0].tokens
        assert [h.tokens for h in hs] == [h.tokens for h in search[order.index(i)]]
        for h in hs:
            n = len(h.tokens)
            tgt = torch.tensor([list(h.tokens) + [0] * (max(n, 1) - n)])
            exact = score_sequences(model, torch.tensor([src]), torch.tensor([len(src)]), tgt,
                                    torch.tensor([n]), bos=1, eos=2,
                                    finished=torch.tensor([h.finished]))
            assert h.score == pytest.approx(float(exact), rel=1e-6, abs=1e-6)


class NearTie(ScriptedModel):
    """A scripted model whose first step is a near-tie that bf16 and fp32 rank differently:
    A before B under autocast (the search's view), B before A in fp32 (the exact scores). Every
    CPU kind gives the same answer, unlike a real model's rounding."""

    def step(self, prev_tokens, state):
        lprobs, state = super().step(prev_tokens, state)
        if torch.is_autocast_enabled("cpu") and not state.fed[0][1:]:
            lprobs = lprobs.index_select(1, torch.tensor([0, 1, 2, 4, 3, 5]))  # swap A and B
        return lprobs, state


def test_the_first_of_an_nbest_list_is_the_1best_of_the_same_bf16_search_on_a_near_tie():
    tie = NearTie({(): {A: 0.499, B: 0.501}, (A,): {EOS: 1.0}, (B,): {EOS: 1.0}})
    cfg = TranslateConfig(batch_size=2, max_len_a=1.0, max_len_b=4)
    kwargs = dict(cfg=cfg, beam=2, vocab=Specials, device=CPU)
    assert translate(tie, [[0]], nbest=1, **kwargs)[0][0].tokens == (B,)  # fp32: B
    best = translate(tie, [[0]], nbest=1, mm_dtype=BF16, **kwargs)[0]
    listed = translate(tie, [[0]], nbest=2, mm_dtype=BF16, **kwargs)[0]
    assert [h.tokens for h in best] == [(A,)]  # the bf16 search prefers A
    assert [h.tokens for h in listed] == [(A,), (B,)]  # the same search's order, A first
    # with the fp32 scores beside: here out of order by the near-tie, as the README says
    assert [h.score for h in listed] == pytest.approx([math.log(0.499), math.log(0.501)],
                                                      abs=1e-12)


def test_amp_accepts_true_false_and_auto_and_names_the_key_otherwise(tmp_path):

    from s2s import config

    base = profile_text("smoke")

    def load_with(value: str):
        text, n = re.subn(r"^  amp: \S+", f"  amp: {value}", base, flags=re.M)
        assert n == 2  # train.amp and translate.amp
        path = tmp_path / "params.yaml"
        path.write_text(text)
        return config.load(path)

    for value, want in (("true", True), ("false", False), ("auto", "auto")):
        p = load_with(value)
        assert p.train.amp == want and p.translate.amp == want
    with pytest.raises(ConfigError, match=r"params\.yaml: 'train\.amp' must be true or false or "
                                          r"'auto', got str 'bf16'"):
        load_with("bf16")


def test_the_precision_is_chosen_once_with_its_reason():
    assert precision.choose(False, CPU).dtype is None
    assert precision.choose(True, CPU).dtype is BF16
    auto = precision.choose("auto", CPU).dtype
    assert auto == (BF16 if precision.bf16_engine(CPU) else None)
    assert str(precision.choose(False, CPU)) == "fp32 (amp: false)"
    assert precision.choose(False, CPU).name == "fp32" and precision.choose(True, CPU).name == "bf16"
    assert str(precision.choose(True, CPU)).startswith("bf16 matmuls")
    with pytest.raises(ValueError):
        precision.choose("yes", CPU)
    assert precision.autocast(CPU, None).__class__ is contextlib.nullcontext


def test_gru_step_is_nn_grus_step_in_fp32_and_close_in_bf16():
    from s2s.model.stacks import gru_step

    torch.manual_seed(0)
    gru = nn.GRU(20, 16, 2, batch_first=True)
    x, h = torch.randn(3, 1, 20), torch.randn(2, 3, 16)
    want_out, want_h = gru(x, h)
    out, (h_new, c) = gru_step(gru, x, h)
    assert c is None
    torch.testing.assert_close(out, want_out, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(h_new, want_h, rtol=1e-6, atol=1e-6)
    with torch.autocast("cpu", dtype=BF16):
        out, (h_new, _) = gru_step(gru, x, h)
    assert h_new.dtype == torch.float32
    err = float((out - want_out).detach().abs().max())
    assert 1e-5 < err < 2e-2


def tiny_transformer():
    from s2s.arch.transformer import TransformerConfig

    cfg = TransformerConfig(d_model=16, heads=4, kv_heads=2, ff_size=24, encoder_layers=1,
                            decoder_layers=1, dropout=0.0, init_seed=3)
    model = build_model(cfg, src_vocab=30, tgt_vocab=31, pad=0)
    model.init_weights(3)
    return model


# How far a score may move with the batching (README, "Batching"): fp32 products are blocked
# differently for other batch shapes (~1e-6 per step); bf16 products round to 8 bits, and the
# kernels the CPU library picks depend on the number of rows (the Transformer's products over
# sentence x position rows), so a bf16 step's log-probs can move by ~1e-2.
BATCH_TOLERANCE = {None: 1e-4, BF16: 5e-2}


@pytest.mark.parametrize("arch,cell", ARCHS + [("transformer", None)],
                         ids=[f"{a}/{c}" for a, c in ARCHS] + ["transformer"])
@pytest.mark.parametrize("mm_dtype", [None, BF16], ids=["fp32", "bf16"])
def test_outputs_do_not_depend_on_the_batching_beyond_the_stated_tolerance(arch, cell, mm_dtype):
    """The same sentences decoded in batches of 1, 3 and all 24 (one sentence's beams beside
    other sentences, with more or less padding): fp32 gives the same hypotheses with scores
    within 1e-4; bf16 scores of the same hypothesis within 5e-2 (a near-tie can then fall the
    other way: bf16 hypotheses are not compared)."""
    import random

    torch.set_num_threads(1)
    model = (tiny_transformer() if arch == "transformer" else tiny_model(arch, cell)).eval()
    rng = random.Random(5)
    sources = [[rng.randrange(3, 30) for _ in range(rng.randrange(1, 20))] for _ in range(24)]
    runs = []
    for per_batch in (1, 3, 24):  # at beam 12, translate batches batch_size sentences
        cfg = TranslateConfig(batch_size=per_batch, max_len_a=1.0, max_len_b=4)
        runs.append(translate(model, sources, cfg=cfg, beam=12, nbest=1, vocab=Specials,
                              device=CPU, mm_dtype=mm_dtype))
    worst = 0.0
    for a, b in zip(runs[0], runs[-1]):
        if mm_dtype is None:
            assert a[0].tokens == b[0].tokens
        if a[0].tokens == b[0].tokens:
            worst = max(worst, abs(a[0].score - b[0].score))
    print(f"{arch}/{cell} {mm_dtype}: worst score movement {worst:.2e}")
    assert worst <= BATCH_TOLERANCE[mm_dtype], worst
    for a, b in zip(runs[1], runs[-1]):  # and the middle batching
        if a[0].tokens == b[0].tokens:
            assert abs(a[0].score - b[0].score) <= BATCH_TOLERANCE[mm_dtype]


# --- the precision plan: which part runs in which dtype on each device (s2s.precision.plan) ---

FP32, FP16 = torch.float32, torch.float16
H200 = "bf16 tensor cores (sm_90, NVIDIA H200)"

# (amp, device type, bf16 engine, recurrent) -> products' dtype, parts, tf32
PLANS = [
    ((False, "cpu", "AVX512-BF16", None), None,
     {"products": "fp32", "recurrent": "fp32", "state": "fp32", "softmax": "fp32"}, False),
    (("auto", "cpu", "AVX512-BF16", None), BF16,
     {"products": "bf16", "recurrent": "bf16", "state": "fp32", "softmax": "fp32"}, False),
    (("auto", "cpu", None, None), None,
     {"products": "fp32", "recurrent": "fp32", "state": "fp32", "softmax": "fp32"}, False),
    ((True, "cpu", None, None), BF16,
     {"products": "bf16", "recurrent": "bf16", "state": "fp32", "softmax": "fp32"}, False),
    ((False, "cuda", H200, None), None,
     {"products": "fp32", "recurrent": "fp32", "state": "fp32", "softmax": "fp32"}, False),
    (("auto", "cuda", H200, None), BF16,
     {"products": "bf16", "recurrent": "tf32", "state": "fp32", "softmax": "fp32"}, True),
    (("auto", "cuda", H200, FP32), BF16,
     {"products": "bf16", "recurrent": "tf32", "state": "fp32", "softmax": "fp32"}, True),
    (("auto", "cuda", H200, BF16), BF16,
     {"products": "bf16", "recurrent": "bf16", "state": "bf16", "softmax": "fp32"}, True),
    (("auto", "cuda", None, None), None,  # a GPU older than sm_80
     {"products": "fp32", "recurrent": "fp32", "state": "fp32", "softmax": "fp32"}, False),
    ((True, "cuda", None, None), BF16,
     {"products": "bf16", "recurrent": "tf32", "state": "fp32", "softmax": "fp32"}, True),
]


@pytest.mark.parametrize("args,dtype,parts,tf32", PLANS, ids=[str(p[0]) for p in PLANS])
def test_the_plan_names_the_dtype_of_every_part_on_each_device(args, dtype, parts, tf32):
    amp, device_type, engine, recurrent = args
    p = precision.plan(amp, device_type=device_type, engine=engine, recurrent=recurrent)
    assert p.dtype == dtype and p.name == precision.name(dtype)
    assert p.parts() == parts and p.tf32 is tf32
    assert p.device_type == device_type and p.hardware == engine
    assert p.recurrent == (recurrent or FP32) and p.state == p.recurrent
    assert p.engine == (f"{device_type}: {parts['products']} products, {parts['recurrent']} "
                        f"recurrent, {parts['state']} state")
    record = json.loads(json.dumps(p.record()))
    assert record == {"device": device_type, **parts, "tf32": tf32, "hardware": engine,
                      "engine": p.engine}


def test_the_plan_says_why_in_one_phrase():
    cuda = functools.partial(precision.plan, device_type="cuda", engine=H200)
    assert str(cuda(False)) == "fp32 (amp: false; TF32 off)"
    assert str(cuda("auto")) == (f"bf16 matmuls, TF32 recurrence, fp32 state, fp32 weights/loss "
                                 f"({H200}; amp: auto)")
    assert "bf16 recurrence and state" in str(cuda(True, recurrent=BF16))
    cpu = precision.plan(True, device_type="cpu", engine="AVX512-BF16")
    assert str(cpu) == "bf16 matmuls, fp32 weights/state/loss (AVX512-BF16; amp: true)"


def test_the_plan_refuses_a_recurrent_dtype_it_cannot_keep():
    with pytest.raises(ValueError, match="needs bf16 products"):
        precision.plan(False, device_type="cuda", engine=H200, recurrent=BF16)
    with pytest.raises(ValueError, match="off the CPU"):
        precision.plan(True, device_type="cpu", engine=None, recurrent=BF16)
    with pytest.raises(ValueError, match="torch.float32 or torch.bfloat16"):
        precision.plan(True, device_type="cuda", engine=H200, recurrent=FP16)
    with pytest.raises(ValueError, match="amp must be"):
        precision.plan("bf16", device_type="cuda", engine=H200)


def test_a_cpu_runs_fingerprint_keys_are_what_they_were_and_a_cuda_run_adds_its_engine():
    """train.fingerprint adds these: nothing for CPU fp32, matmul_dtype for CPU bf16 (the keys
    a CPU run always had), the engine besides off the CPU; no two plans share them."""
    def entries(*args, **kw):
        return precision.plan(*args, **kw).fingerprint_entries()

    assert entries(False, device_type="cpu", engine="AVX512-BF16") == {}
    assert entries(True, device_type="cpu", engine=None) == {"matmul_dtype": "torch.bfloat16"}
    assert entries("auto", device_type="cuda", engine=H200) == {
        "matmul_dtype": "torch.bfloat16",
        "engine": "cuda: bf16 products, tf32 recurrent, fp32 state"}
    assert entries(False, device_type="cuda", engine=H200) == {
        "engine": "cuda: fp32 products, fp32 recurrent, fp32 state"}
    every = [entries(a, recurrent=r, device_type=d, engine=e) for (a, d, e, r), *_ in PLANS]
    assert len({json.dumps(x, sort_keys=True) for x in every}) == 5  # fp32/bf16 x cpu/cuda + bf16
    # the GPU model is not part of it: an H100 run resumes on an H200
    assert entries("auto", device_type="cuda", engine="bf16 tensor cores (sm_90, H100)") == \
        entries("auto", device_type="cuda", engine=H200)


@pytest.fixture
def tf32_restored():
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def test_a_cuda_plan_sets_tf32_off_where_fp32_is_promised_and_on_in_bf16_mode(tf32_restored):
    """The flags are process settings, readable without a GPU: the cuBLAS matmul and the cuDNN
    RNN settings both follow the plan, and strict_fp32 turns them off for its block only."""
    strict = precision.plan(False, device_type="cuda", engine=H200)
    mixed = precision.plan("auto", device_type="cuda", engine=H200)
    mixed.apply()
    assert precision.tf32_flags() == {"matmul": True, "cudnn_rnn": True}
    strict.apply()
    assert precision.tf32_flags() == {"matmul": False, "cudnn_rnn": False}
    assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
    mixed.apply()
    with mixed.strict_fp32():
        assert precision.tf32_flags() == {"matmul": False, "cudnn_rnn": False}
    assert precision.tf32_flags() == {"matmul": True, "cudnn_rnn": True}
    with pytest.raises(KeyError):
        with mixed.strict_fp32():
            raise KeyError("the flags come back on an error too")
    assert precision.tf32_flags() == {"matmul": True, "cudnn_rnn": True}


def test_a_cpu_plan_leaves_the_cuda_flags_alone(tf32_restored):
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = True, False
    for amp in (False, True, "auto"):
        p = precision.choose(amp, CPU)
        with p.strict_fp32():
            pass
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == (True, False)


def test_the_plans_autocast_serves_every_step_and_nests():
    p = precision.plan(True, device_type="cpu", engine=None)
    cast = p.autocast()
    for _ in range(2):
        with cast:
            assert precision.matmul_dtype(torch.ones(1)) == BF16
            with cast:
                assert precision.matmul_dtype(torch.ones(1)) == BF16
            assert precision.matmul_dtype(torch.ones(1)) == BF16
        assert precision.matmul_dtype(torch.ones(1)) is None
    assert isinstance(precision.plan(False, device_type="cpu", engine=None).autocast(),
                      contextlib.nullcontext)


def test_recurrent_layers_keep_the_cpus_own_paths_unless_a_dtype_is_asked_for():
    x = torch.ones(2, 3)
    assert precision.recurrent_dtype(x) is None  # no autocast
    with precision.autocast(CPU, BF16):
        assert precision.recurrent_dtype(x) is None  # the CPU's own paths
        with precision.recurrent(FP32):
            assert precision.recurrent_dtype(x) == FP32
            with precision.recurrent(BF16):
                assert precision.recurrent_dtype(x) == BF16
            assert precision.recurrent_dtype(x) == FP32
    with precision.recurrent(BF16):
        assert precision.recurrent_dtype(x) is None  # without autocast the layer runs as it is


# --- the recurrent layers' explicit dtypes: the CUDA code path, run on the CPU ---

def _stack(kind: str):
    from s2s.model.lstm import StandardLSTM
    from s2s.model.stacks import StandardGRU

    torch.manual_seed(4)
    if kind == "lstm":
        stack = StandardLSTM(8, 16, 2)
        stack.fused_cpu = False  # nn.LSTM itself, as on CUDA
    else:
        stack = StandardGRU(8, 16, 2)
    return stack.train()


def _run_stack(stack, dtype):
    """outputs, final state and every gradient of a stack over a padded batch with an initial
    state, in fp32 (dtype None) or under bf16 autocast with its recurrent layers in `dtype`."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(4, 6, 8, generator=g, requires_grad=True)
    h0 = torch.randn(2, 4, 16, generator=g, requires_grad=True)
    c0 = torch.randn(2, 4, 16, generator=g, requires_grad=True)
    lengths = torch.tensor([6, 3, 5, 1])
    from s2s.model.lstm import StandardLSTM

    lstm = isinstance(stack, StandardLSTM)
    state = (h0, c0) if lstm else (h0, None)
    stack.zero_grad()
    ctx = contextlib.nullcontext() if dtype is None else precision.recurrent(dtype)
    with precision.autocast(CPU, None if dtype is None else BF16), ctx:
        out, (h, c) = stack(x, state, lengths=lengths)
    loss = (out.float() ** 2).sum() + h.float().sum() + (0 if c is None else (c.float() ** 3).sum())
    inputs = [x, h0] + ([c0] if lstm else [])
    grads = torch.autograd.grad(loss, inputs + list(stack.parameters()))
    return [out, h] + ([c] if lstm else []), grads


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_a_recurrent_layer_asked_for_fp32_under_autocast_is_the_fp32_layer_bit_for_bit(kind):
    stack = _stack(kind)
    want_out, want_grads = _run_stack(stack, None)
    got_out, got_grads = _run_stack(stack, FP32)
    for w, g in zip(want_out + list(want_grads), got_out + list(got_grads)):
        assert g.dtype == FP32
        assert torch.equal(w, g)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_a_recurrent_layer_asked_for_bf16_runs_in_bf16_and_trains_its_fp32_weights(kind):
    stack = _stack(kind)
    want_out, want_grads = _run_stack(stack, None)
    got_out, got_grads = _run_stack(stack, BF16)
    assert all(t.dtype == BF16 for t in got_out)  # output, h (and c): what cuDNN returns
    for w, g in zip(want_out, got_out):
        err = float((w - g.float()).detach().abs().max() / w.detach().abs().max())
        assert 1e-4 < err < 2e-2
    assert all(p.dtype == FP32 for p in stack.parameters())
    for w, g in zip(want_grads, got_grads):
        assert g.dtype == FP32  # the gradients of the fp32 weights and inputs, through the casts
        err = float((w - g).abs().max() / w.abs().max())
        assert 1e-4 < err < 5e-2


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_the_attention_encoder_takes_the_recurrent_dtype_asked_for(cell):
    model = tiny_model("attention", cell).eval()
    src, lengths = torch.tensor([[5, 6, 7, 8], [9, 10, 0, 0]]), torch.tensor([4, 2])
    with torch.no_grad():
        want = model.encode(src, lengths)
        with precision.autocast(CPU, BF16):
            with precision.recurrent(FP32):
                fp32 = model.encode(src, lengths)
            with precision.recurrent(BF16):
                bf16 = model.encode(src, lengths)
    assert fp32.memory.dtype == FP32 and torch.equal(fp32.memory, want.memory)
    assert bf16.memory.dtype == BF16
    err = float((bf16.memory.float() - want.memory).abs().max() / want.memory.abs().max())
    assert 1e-4 < err < 2e-2


# --- the peephole cell: products under autocast, everything else fp32 ---

def test_the_peephole_step_under_bf16_rounds_only_its_products():
    """Under bf16 autocast, the cell's only bf16 values are its two products: the sum of the
    pre-activations, the bias, the peepholes, every sigmoid and tanh, c and h are fp32. The same
    step computed by hand that way is bit for bit what the cell gives."""
    from s2s.model.lstm import PeepholeLSTM, peephole_update

    torch.manual_seed(6)
    stack = PeepholeLSTM(8, 16, 1)
    for p in stack.parameters():
        nn.init.uniform_(p, -1, 1)
    cell = stack.cells[0]
    x, h, c = torch.randn(5, 8), torch.randn(5, 16), torch.randn(5, 16)
    with torch.autocast("cpu", dtype=BF16):
        gates_x = cell.input_products(x)
        h_new, c_new = cell(gates_x, h, c)
    assert gates_x.dtype == h_new.dtype == c_new.dtype == FP32
    want_x = (x.to(BF16) @ cell.weight_ih.to(BF16).t()).float() + cell.bias
    want_gates = want_x + (h.to(BF16) @ cell.weight_hh.to(BF16).t()).float()
    want_h, want_c = peephole_update(want_gates, c, cell.peephole)  # fp32: no autocast here
    assert torch.equal(gates_x, want_x)
    assert torch.equal(h_new, want_h) and torch.equal(c_new, want_c)
    # a tanh in bf16 (as autocast would leave it) is a different number: the test can fail
    assert not torch.equal(torch.tanh(want_gates.to(BF16)).float(), torch.tanh(want_gates))


def test_the_peephole_stack_keeps_its_state_fp32_under_bf16():
    model = tiny_model("seq2seq", "peephole")
    src, lengths = torch.tensor([[5, 6, 7, 8], [9, 10, 0, 0]]), torch.tensor([4, 2])
    with precision.autocast(CPU, BF16):
        out, (h, c) = model.encoder(model.source(src, lengths), lengths=lengths)
    assert out.dtype == h.dtype == c.dtype == FP32


# --- the runtime check: what ran is what the plan records (s2s.precision.watch) ---

BF16_CPU = precision.plan(True, device_type="cpu", engine=None)
FP32_CPU = precision.plan(False, device_type="cpu", engine=None)


@pytest.mark.parametrize("arch,cell", ARCHS, ids=[f"{a}/{c}" for a, c in ARCHS])
@pytest.mark.parametrize("plan", [FP32_CPU, BF16_CPU], ids=["fp32", "bf16"])
def test_a_training_step_passes_the_precision_check(arch, cell, plan):
    torch.set_num_threads(1)
    model = tiny_model(arch, cell)
    watch = precision.watch(model, plan)
    _steps(model, plan.dtype)
    seen = watch.check()
    assert "features" in seen and "features" not in vars(model)  # the wrapper is gone
    stacks = [k for k in seen if k.startswith(("encoder", "decoder"))]
    assert len(stacks) == 2  # both recurrent layers were seen
    for label, dtypes in seen.items():
        for what, dtype in dtypes.items():
            assert dtype in ("fp32", plan.name), (label, what)
            if what in ("h", "c"):
                assert dtype == "fp32", (label, what)
    assert all(not m._forward_hooks for m in model.modules())


def test_an_fp16_recurrence_stops_the_run_with_one_line_naming_the_module():
    """What torch's autocast does to cuDNN RNNs, simulated on the CPU: the recurrent layers run
    in fp16 while the run records bf16 products and fp32 state."""
    model = tiny_model("seq2seq", "lstm")
    for stack in (model.encoder, model.decoder):
        stack.fused_cpu = False
    watch = precision.watch(model, BF16_CPU)
    with precision.recurrent(FP16):
        _steps(model, BF16)
    with pytest.raises(precision.PrecisionMismatch) as err:
        watch.check()
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(
        "precision check: encoder (StandardLSTM) returned its output in float16, where the run "
        "records 'cpu: bf16 products, bf16 recurrent, fp32 state' (expected bf16 or fp32)")
    assert message.endswith("more)")  # h, c, the decoder's and the features' too


@pytest.mark.skipif(precision.bf16_engine(CPU) is None,
                    reason="this CPU has no bf16 engine (AMX or AVX512-BF16): oneDNN has no bf16 "
                           "LSTM to run, and amp: auto trains in fp32 here")
def test_a_bf16_cell_state_where_the_plan_keeps_it_fp32_is_a_mismatch():
    """nn.LSTM over a padded batch under CPU bf16 autocast (oneDNN) keeps c in bf16: the path the
    fused LSTM replaces; the check sees it."""
    model = tiny_model("seq2seq", "lstm").eval()
    model.decoder.fused_cpu = False
    watch = precision.watch(model, BF16_CPU)
    with torch.no_grad(), precision.autocast(CPU, BF16):
        model.features(torch.tensor([[5, 6, 7]]), torch.tensor([3]), torch.tensor([[1, 8, 9]]))
    with pytest.raises(precision.PrecisionMismatch,
                       match=r"^precision check: decoder \(StandardLSTM\) returned its h in "
                             r"bf16, where the run records .* \(expected fp32\)"):
        watch.check()


def test_the_check_wants_fp32_master_weights():
    model = tiny_model("cho", "gru")
    model.proj.to(BF16)
    with pytest.raises(precision.PrecisionMismatch,
                       match=r"parameter proj.weight has its weights in bf16; master weights"):
        precision.watch(model, FP32_CPU).check()


def _attention_lstm() -> nn.Module:
    cfg = RNNConfig(arch="attention", cell="lstm", attention="general", num_layers=1,
                    hidden_size=64, embed_size=32, reverse_source=False, init_seed=3)
    model = build_model(cfg, src_vocab=50, tgt_vocab=51, pad=0)
    model.init_weights(3)
    return model


def test_the_attention_models_lstm_encoder_under_bf16_reads_no_other_sentence():
    """Under bf16 autocast on the CPU torch's packed nn.LSTM ran oneDNN's bf16 LSTM where a
    batch's sources were all of one length (bf16 state) and its fp32 kernel otherwise: a
    sentence's encoding depended on the lengths of the sentences beside it. The encoder now
    runs the fused LSTM, both directions, whatever the lengths."""
    model = _attention_lstm().eval()
    src = torch.randint(3, 50, (3, 7), generator=torch.Generator().manual_seed(0))
    states = []
    for lengths in ([7, 7, 7], [7, 6, 7]):
        lengths = torch.tensor(lengths)
        with torch.no_grad(), torch.autocast("cpu", dtype=BF16):
            states.append(model.encode(src * (torch.arange(7) < lengths[:, None]), lengths))
    (a, b) = states
    assert torch.equal(a.memory[0], b.memory[0]) and torch.equal(a.memory[2], b.memory[2])
    assert torch.equal(a.h[:, 0], b.h[:, 0]) and a.h.dtype == b.h.dtype == torch.float32


def test_the_attention_models_lstm_encoder_sums_its_recurrent_gradients_in_fp32():
    """Its recurrent weights' gradients under bf16 are as close to fp64's at 120 source words
    as at 5: torch's kernel summed the per-step gradients in bf16 on autocast's one cast of the
    weight (relative error 3e-2 at 120 words, 6e-3 at 5, measured on an AVX512-BF16 CPU)."""
    def gradients(model, S, dtype):
        N = 16
        lengths = torch.full((N,), S)
        lengths[3] = S - 2  # a batch of mixed lengths: torch's kernel packs it
        src = torch.randint(3, 50, (N, S), generator=torch.Generator().manual_seed(1))
        tgt = torch.randint(3, 51, (N, 10), generator=torch.Generator().manual_seed(2))
        model.train()
        model.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=BF16, enabled=dtype is not None):
            feats = model.features(src * (torch.arange(S) < lengths[:, None]), lengths, tgt)
        weights = torch.randn(feats.shape, generator=torch.Generator().manual_seed(3),
                              dtype=torch.float64)
        (feats.double() * weights).sum().backward()
        return {n: p.grad.double() for n, p in model.named_parameters() if p.grad is not None}

    for S in (5, 120):
        exact = gradients(_attention_lstm().double(), S, None)
        got = gradients(_attention_lstm(), S, BF16)
        for name in ("encoder.weight_hh_l0", "encoder.weight_hh_l0_reverse"):
            error = ((got[name] - exact[name]).norm() / exact[name].norm()).item()
            assert error < 1e-2, (S, name, error)
