"""Initialisation: the forget-gate bias (`forget_bias`), the config record that keeps old
checkpoints and fingerprints what they were, and the gradient reaching each input step at
initialisation (s2s.analysis.init_reach): exact against finite differences of the cells written
out, and the measured numbers pinned."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from s2s import checkpoint
from s2s.analysis.init_reach import init_reach, input_gradient_norms, make_cell, seed_draws
from s2s.layout import INIT_REACH_COLUMNS as COLUMNS
from s2s.config import ConfigError, load
from s2s.data.vocab import Vocab
from s2s.model import build_model, config_from_dict, config_record
from s2s.model.lstm import PeepholeLSTMCell
from s2s.model.seq2seq import RNNConfig
from s2s.model.transformer import TransformerConfig


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py


# ---------------------------------------------------------------------------------------------
# forget_bias


def lstm_biases(model):
    """(name, b_ih or the peephole bias, b_hh or None, H) of every LSTM layer of `model`."""
    out = []
    for mname, m in model.named_modules():
        if isinstance(m, torch.nn.LSTM):
            for pname, p in m.named_parameters(recurse=False):
                if pname.startswith("bias_ih"):
                    out.append((f"{mname}.{pname}", p, getattr(m, pname.replace("ih", "hh")),
                                m.hidden_size))
        elif isinstance(m, PeepholeLSTMCell):
            out.append((f"{mname}.bias", m.bias, None, m.hidden_size))
    return out


@pytest.mark.parametrize("arch,cell,layers", [("seq2seq", "lstm", 2), ("seq2seq", "peephole", 2),
                                              ("cho", "lstm", 1), ("attention", "lstm", 2)])
def test_forget_bias_sets_the_forget_gates_of_every_lstm_layer(arch, cell, layers):
    def model(forget_bias):
        cfg = RNNConfig(arch=arch, cell=cell, num_layers=layers, hidden_size=6, embed_size=5,
                        forget_bias=forget_bias)
        m = build_model(cfg, src_vocab=12, tgt_vocab=13, pad=0)
        m.init_weights(4)
        return m

    paper, raised = model(0.0), model(1.0)
    biases = lstm_biases(raised)
    # encoder and decoder, every layer (both directions of the attention encoder)
    assert len(biases) == {"seq2seq": 2 * layers, "cho": 2, "attention": 3 * layers}[arch]
    touched = set()
    for name, b_ih, b_hh, H in biases:
        assert torch.all(b_ih[H:2 * H] == 1.0), name
        touched.add(name)
        if b_hh is not None:  # nn.LSTM adds b_ih + b_hh: together they are the forget bias
            assert torch.all(b_hh[H:2 * H] == 0.0), name
            touched.add(name.replace("ih", "hh"))
    for (name, p0), p1 in zip(paper.named_parameters(), raised.parameters()):
        if name in touched:  # the other gates keep the uniform init
            H = p0.shape[0] // 4
            keep = torch.cat([torch.arange(H), torch.arange(2 * H, 4 * H)])
            assert torch.equal(p0[keep], p1[keep]), name
            assert p0[H:2 * H].abs().max() <= 0.08
        else:
            assert torch.equal(p0, p1), name


def test_forget_bias_is_for_lstm_cells_only():
    with pytest.raises(ValueError, match="cell 'gru' has no forget gate"):
        RNNConfig(arch="cho", cell="gru", forget_bias=1.0)


def test_the_issue_16_params_lines_load(tmp_path):
    raw = yaml.safe_load(Path("profiles/default.yaml").read_text())
    raw["models"]["reversed_fb1"] = {"reverse_source": True, "forget_bias": 1.0, "init_seed": 61,
                                     "order_seed": 161}
    raw["models"]["gru"]["cell"] = "cho_gru"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    p = load(tmp_path / "params.yaml")
    cfg = p.model_config("reversed_fb1")
    assert (cfg.forget_bias, cfg.reverse_source, cfg.cell) == (1.0, True, "lstm")
    assert config_record(cfg)["forget_bias"] == 1.0
    assert p.model_config("gru").cell == "cho_gru" and p.model_config("gru").arch == "cho"
    raw["models"]["gru"]["forget_bias"] = 1.0  # a GRU has no forget gate
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=r"models\.gru.*forget_bias"):
        load(tmp_path / "params.yaml")


# ---------------------------------------------------------------------------------------------
# The config record: old checkpoints and fingerprints unchanged

# arch/cell -> (sha256 of the checkpoint file, its payload digest, sha256 of the JSON of its
# config as train.fingerprint and api.params_fingerprint hash it), computed with the code at
# commit 8e07715, before RNNConfig had forget_bias, with torch 2.13.0. Do not regenerate them.
BEFORE = {
    "seq2seq/lstm": ("a43bee153c95c3f28ff0c014d84ccdf92983dd7cbdcd083d1f48e4af6c8024ed",
                     "272ff5fcda892a3031e64adad5ad1a5272bf69fdaf8e9d5d7ddc361c9eaaa2e3",
                     "f0605e04d74c56bfeeac8d4019ed50d44cac11a410f1cf9db35da8025c9efb6e"),
    "seq2seq/peephole": ("3dea126b32238cad6639017c128ffa0c2adeba2f63dcd0c56e73893e905501e0",
                         "37a8a0a53222e49e9e77fd487137171f3e42a01d47dcfada40a18fb24fb6ebb1",
                         "a6ddf7f6fa2fe9f4ff04a51b21c95a30bb316cd84d48c9a55b656cdebeaefc4a"),
    "seq2seq/gru": ("9967d4591b7f8a6f8541adc8ff9be07f99a690a40fb197e6352ab30f3d8350fc",
                    "ac99187370f8676a19668f5cfe8e6ac6e101555db9f9c633c816f0d2ee25e975",
                    "19fbfaf817d39eab138e72d83d6787f04f3a952e329ce7ea10c28113df587d3e"),
    "cho/gru": ("ae98e9f66cde1b209641b1c490d87d5a1d8807cda7e65530e56946fa66a76920",
                "8d3f66befa6a0f65cb84b58b0fc59477d7522c4c9835081e1af9e7a4134a4ddf",
                "ac6364851e2b20f723adc5630aa9f890228d613f385297cfdd88471faaaabc8a"),
    "cho/lstm": ("a49372a76516c0df4c897893735295feeabdb8b418123c9de98b00a4c77585ff",
                 "48dd79f29c3a1f996cdb204ea1255d66f8008f9867271f9b7088e091f5af4cb7",
                 "2e6b048aeac629b0caea68816d01fe6a8d862bdbea317fa8469066c8a3733636"),
    "attention/lstm": ("86f3270413b7bd50e0f081731defbb05e3cba650452af39385ed8d6dcc69c854",
                       "ce3cc313be365e7af678b2652548efa5a9efe44ce91d137e5c21723981cc369d",
                       "f1852ab9d0d625c8c4f6d8c4b83fd9f945c240800a885ccd2d71526b23a06bf6"),
    "attention/gru": ("3709757983701efe97affabbd98c7b540af6323cd2c7efc19b14c8f92c54e4cd",
                      "1d241804e8960e00489d8bfaccb267f83bae8a392a2f2c70e6bceb6ccb61bb82",
                      "6b592bb62f93e7fc3eb2fb120fbf8e084f3600bdb27c3438a88429c42f0e85cc"),
}
SRC = Vocab(("<pad>", "<unk>", "<bos>", "<eos>") + tuple("abcdef"), fingerprint="s" * 64)
TGT = Vocab(("<pad>", "<unk>", "<bos>", "<eos>") + tuple("uvwxyz"), fingerprint="t" * 64)


def pinned_model(name, **extra):
    # interned, as the literals they were written as when pinned: pickle writes a second
    # reference to the same str object (the field name 'attention' and the arch "attention")
    # as a back-reference, so the file's bytes, though not its contents, depend on identity
    arch, cell = map(sys.intern, name.split("/"))
    cfg = RNNConfig(arch=arch, cell=cell, num_layers=2 if arch == "seq2seq" else 1,
                    hidden_size=8, embed_size=4, reverse_source=True, init_seed=3, **extra)
    model = build_model(cfg, src_vocab=len(SRC), tgt_vocab=len(TGT), pad=0)
    model.init_weights(3)
    return model


@pytest.mark.parametrize("name", list(BEFORE))
def test_a_model_without_forget_bias_saves_the_checkpoint_it_saved_before(tmp_path, name):
    file_sha, digest, config_sha = BEFORE[name]
    model = pinned_model(name)
    path = tmp_path / "m.pt"
    checkpoint.save(path, model, src_vocab=SRC, tgt_vocab=TGT, name="x", step=3)
    payload = checkpoint.load_payload(path)
    assert "forget_bias" not in payload["config"]
    assert payload["digest"] == digest  # config, weights and everything else, as before
    record = json.dumps(config_record(model.cfg), sort_keys=True).encode()
    assert hashlib.sha256(record).hexdigest() == config_sha  # the fingerprints' input
    if torch.__version__.split("+")[0] == "2.13.0":  # torch's zip writer makes the bytes
        assert hashlib.sha256(path.read_bytes()).hexdigest() == file_sha
    checkpoint.check_identity(path, payload, expect=model.cfg, name="x")


def test_config_record_leaves_out_later_fields_at_their_default(tmp_path):
    paper = RNNConfig(num_layers=1, hidden_size=8, embed_size=4)
    raised = RNNConfig(num_layers=1, hidden_size=8, embed_size=4, forget_bias=1.0)
    assert "forget_bias" not in config_record(paper)
    assert config_record(raised)["forget_bias"] == 1.0
    assert config_from_dict(config_record(paper)) == paper  # a missing field takes its default
    assert config_from_dict(config_record(raised)) == raised
    t = TransformerConfig()
    assert config_record(t) == dataclasses.asdict(t)  # no later fields
    # a checkpoint is refused by params that differ in forget_bias, either way
    for saved, params in ((paper, raised), (raised, paper)):
        model = build_model(saved, src_vocab=len(SRC), tgt_vocab=len(TGT), pad=0)
        model.init_weights(1)
        checkpoint.save(tmp_path / "m.pt", model, src_vocab=SRC, tgt_vocab=TGT, name="fb")
        payload = checkpoint.load_payload(tmp_path / "m.pt")
        checkpoint.check_identity(tmp_path / "m.pt", payload, expect=saved, name="fb")
        with pytest.raises(checkpoint.CheckpointError, match="forget_bias"):
            checkpoint.check_identity(tmp_path / "m.pt", payload, expect=params, name="fb")
    loaded = checkpoint.load_model(tmp_path / "m.pt", src_vocab=SRC, tgt_vocab=TGT, expect=raised)
    assert loaded.cfg.forget_bias == 1.0


# ---------------------------------------------------------------------------------------------
# init_reach


def sigmoid(x):
    return 1 / (1 + math.exp(-x))


def rnn_last(rnn, xs):
    """h_T of the vanilla RNN written out: h_t = tanh(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh)."""
    W, U = rnn.weight_ih_l0.tolist(), rnn.weight_hh_l0.tolist()
    b = [p + q for p, q in zip(rnn.bias_ih_l0.tolist(), rnn.bias_hh_l0.tolist())]
    h = [0.0] * len(U)
    for x in xs:
        h = [math.tanh(sum(w * v for w, v in zip(W[j], x)) + sum(u * v for u, v in zip(U[j], h))
                       + b[j]) for j in range(len(U))]
    return h


def lstm_last(lstm, xs):
    """h_T of the LSTM written out (gate order i, f, g, o as nn.LSTM): c = f c + i g,
    h = o tanh(c)."""
    W, U = lstm.weight_ih_l0.tolist(), lstm.weight_hh_l0.tolist()
    b = [p + q for p, q in zip(lstm.bias_ih_l0.tolist(), lstm.bias_hh_l0.tolist())]
    H = len(U[0])
    h, c = [0.0] * H, [0.0] * H
    for x in xs:
        a = [sum(w * v for w, v in zip(W[j], x)) + sum(u * v for u, v in zip(U[j], h)) + b[j]
             for j in range(4 * H)]
        i = [sigmoid(v) for v in a[:H]]
        f = [sigmoid(v) for v in a[H:2 * H]]
        g = [math.tanh(v) for v in a[2 * H:3 * H]]
        o = [sigmoid(v) for v in a[3 * H:]]
        c = [f[j] * c[j] + i[j] * g[j] for j in range(H)]
        h = [o[j] * math.tanh(c[j]) for j in range(H)]
    return h


@pytest.mark.parametrize("cell,forget_bias", [("rnn", 0.0), ("lstm", 0.0), ("lstm", 3.0)])
def test_input_gradients_equal_finite_differences_of_the_cells_written_out(cell, forget_bias):
    T, E, H = 6, 2, 3
    rnn = make_cell(cell, input_size=E, hidden=H, init_range=0.7, forget_bias=forget_bias,
                    generator=torch.Generator().manual_seed(2)).double()
    g = torch.Generator().manual_seed(3)
    x = torch.randn(T, E, generator=g, dtype=torch.float64)
    v = torch.randn(H, generator=g, dtype=torch.float64)
    got = input_gradient_norms(rnn, x, v)
    last = rnn_last if cell == "rnn" else lstm_last
    xs = x.tolist()

    def readout(xs):
        return sum(a * b for a, b in zip(last(rnn, xs), v.tolist()))

    eps = 1e-6
    want = []
    for t in range(T):
        grad = []
        for e in range(E):
            up = [row[:] for row in xs]
            down = [row[:] for row in xs]
            up[t][e] += eps
            down[t][e] -= eps
            grad.append((readout(up) - readout(down)) / (2 * eps))
        want.append(math.sqrt(sum(d * d for d in grad)))
    torch.testing.assert_close(got, torch.tensor(want, dtype=torch.float64), rtol=1e-6, atol=1e-12)
    assert got[0] > 0 and got[-1] > 0


def test_make_cell_is_the_papers_init_then_the_forget_bias():
    lstm = make_cell("lstm", input_size=5, hidden=4, init_range=0.08, forget_bias=3.0,
                     generator=torch.Generator().manual_seed(0))
    assert torch.all(lstm.bias_ih_l0[4:8] == 3.0) and torch.all(lstm.bias_hh_l0[4:8] == 0.0)
    others = [lstm.weight_ih_l0, lstm.weight_hh_l0, lstm.bias_ih_l0[:4], lstm.bias_ih_l0[8:]]
    assert all(0 < p.abs().max() <= 0.08 for p in others)
    same = make_cell("lstm", input_size=5, hidden=4, init_range=0.08, forget_bias=0.0,
                     generator=torch.Generator().manual_seed(0))
    assert torch.equal(same.weight_hh_l0, lstm.weight_hh_l0)
    assert same.bias_ih_l0[4:8].abs().max() <= 0.08  # 0: the uniform init untouched


@pytest.fixture(scope="module")
def reach():
    torch.set_num_threads(1)
    return init_reach()  # 256 units, 60 steps, 20 seeds: about a second


def relative(frame, cell, forget_bias=None):
    rows = frame[frame.cell == cell]
    if forget_bias is not None:
        rows = rows[rows.forget_bias == forget_bias]
    return rows.set_index("steps_back").relative


def test_init_reach_frame(reach):
    assert list(reach.columns) == list(COLUMNS) and len(reach) == 3 * 60
    assert reach.groupby(["cell", "forget_bias"], dropna=False).size().tolist() == [60, 60, 60]
    last = reach[reach.steps_back == 0]
    assert (last.step == 60).all() and (last.relative == 1.0).all()
    assert ((reach.std_norm > 0) & (reach.std_norm < reach.mean_norm)).all()
    assert reach[reach.cell == "rnn"].forget_bias.isna().all()


def test_each_seeds_inputs_are_independent_of_the_weights_that_read_them():
    """One generator seeded alike for the inputs and the weights made x_t correlate with the
    input weights that read it (r about -0.34, element by element), pushing unit t's gate at
    step t far from the init's: the data and weight streams are independent, every cell of a
    seed has the same weights' draws, and init_reach measures those draws."""
    cells = [("rnn", float("nan")), ("lstm", 0.0), ("lstm", 3.0)]
    for seed in range(3):
        x, readout, rnns = seed_draws(seed, cells, hidden=64, input_size=64, steps=60,
                                      init_range=0.08)
        assert x.shape == (60, 64) and float(readout.norm()) == pytest.approx(1.0)
        for rnn in rnns:
            w = rnn.weight_ih_l0.detach()[:60]  # row t: unit t's (first gate's) input weights
            assert abs(np.corrcoef(w.flatten(), x.flatten())[0, 1]) < 0.05
            assert abs(float((w * x).sum(1).mean())) < 0.1  # its pre-activation at step t
        assert torch.equal(rnns[0].weight_ih_l0, rnns[1].weight_ih_l0[:64])
        assert torch.equal(rnns[1].weight_hh_l0, rnns[2].weight_hh_l0)
        assert not torch.equal(rnns[1].bias_ih_l0, rnns[2].bias_ih_l0)  # the forget bias
    x, readout, rnns = seed_draws(7, cells, hidden=64, input_size=64, steps=60, init_range=0.08)
    one = init_reach(hidden=64, input_size=64, seeds=1, first_seed=7, forget_biases=(0.0, 3.0))
    for c, rnn in enumerate(rnns):
        got = one["mean_norm"].to_numpy()[60 * c:60 * (c + 1)]
        np.testing.assert_allclose(got, input_gradient_norms(rnn, x, readout).numpy(),
                                   rtol=1e-6)


def test_init_reach_measured(reach):
    """The numbers at the paper's init (measured: steps_back 10 / 30 / 59, relative to the last
    step): RNN 1.8e-3 / 6.7e-9 / 8.1e-17, LSTM 5.6e-3 / 4.5e-7 / 5.8e-13, LSTM with forget bias 3
    0.43 / 0.41 / 0.75 (it does not decay: the early steps get more, their cell state being
    smaller)."""
    rnn, lstm = relative(reach, "rnn"), relative(reach, "lstm", 0.0)
    lstm3 = relative(reach, "lstm", 3.0)
    # per step, the gradient shrinks by 0.53 (RNN) and 0.62 (LSTM, f = sigma(~0) = 0.5)
    assert 0.50 < (rnn[59] / rnn[10]) ** (1 / 49) < 0.56
    assert 0.59 < (lstm[59] / lstm[10]) ** (1 / 49) < 0.65
    assert 1e-17 < rnn[59] < 1e-15 and 1e-13 < lstm[59] < 1e-11
    # the RNN's reach decays fastest, the raised forget bias keeps it: from 2 steps back on,
    # RNN < LSTM < LSTM with forget bias 3, at every step
    back = range(2, 60)
    assert all(rnn[k] < lstm[k] < lstm3[k] for k in back)
    assert 0.35 < lstm3[30] < 0.45 and 0.55 < lstm3[59] < 0.85 and lstm3.min() > 0.3
    assert lstm3[59] / lstm[59] > 1e11
