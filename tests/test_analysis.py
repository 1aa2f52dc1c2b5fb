"""The analyses (s2s.analysis, s2s.report.sections.analysis): the instrumented pass computes what the model
computes, gradient reach is measured in the original word order with nothing leaking into padding,
PCA and the statistics give hand-checked numbers, the stage's folder holds the statistics the
report quotes (each the one its CSVs give), and the report renders them."""

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from s2s import checkpoint, layout
from s2s.artifacts import AnalysisMeta
from s2s.analysis import outputs, probes, run
from s2s.analysis.outputs import read as read_analysis
from s2s.claims import analyses as checks
from s2s.layout import AnalyzePaths
from s2s.stages import analyze as stage
from s2s.data.vocab import Vocab
from s2s.model import build_model
from s2s.report.sections.analysis import every as report
from s2s.model.seq2seq import RNNConfig

from helpers import analysis_markdown, tiny_analysis_project


def tiny(cell="lstm", reverse=False, seed=3, layers=2, V=20, arch="seq2seq"):
    cfg = RNNConfig(arch=arch, cell=cell, num_layers=layers, hidden_size=8, embed_size=6,
                      reverse_source=reverse, init_range=0.5)
    model = build_model(cfg, src_vocab=V, tgt_vocab=V - 3, pad=0)
    model.init_weights(seed)
    if cell == "peephole":  # init_weights draws the peepholes too; make them matter
        with torch.no_grad():
            for c in list(model.encoder.cells) + list(model.decoder.cells):
                c.peephole.uniform_(-1, 1)
    return model.eval()


SRC = torch.tensor([[4, 5, 6, 7, 8], [9, 10, 11, 0, 0], [12, 0, 0, 0, 0]])
LENGTHS = torch.tensor([5, 3, 1])


# --- the instrumented pass -----------------------------------------------------------------------


@pytest.mark.parametrize("cell", ["lstm", "peephole"])
@pytest.mark.parametrize("reverse", [False, True])
def test_instrumented_encoder_reproduces_encode(cell, reverse):
    model = tiny(cell, reverse)
    trace, fed = probes.trace_encoder(model, SRC, LENGTHS)
    state = model.encode(SRC, LENGTHS)
    torch.testing.assert_close(trace.h, state.h, atol=1e-5, rtol=0)
    torch.testing.assert_close(trace.c, state.c, atol=1e-5, rtol=0)
    assert fed[0].tolist() == ([8, 7, 6, 5, 4] if reverse else [4, 5, 6, 7, 8])
    assert trace.forget.shape == (2, 3, 5, 8)
    assert (trace.forget[:, 1, 3:] == 0).all() and (trace.forget[:, 2, 1:] == 0).all()
    assert (trace.forget[:, 0] > 0).all()


@pytest.mark.parametrize("cell", ["lstm", "peephole"])
def test_instrumented_decoder_reproduces_teacher_forcing(cell):
    model = tiny(cell, reverse=True)
    tgt_in = torch.tensor([[2, 5, 6, 7], [2, 8, 0, 0], [2, 0, 0, 0]])
    lengths = torch.tensor([4, 2, 1])
    state = model.encode(SRC, LENGTHS)
    trace = probes.trace_decoder(model, state, tgt_in, lengths)
    feats = model.features(SRC, LENGTHS, tgt_in)  # (N, T, H)
    mask = trace.mask[..., None]
    torch.testing.assert_close(trace.out * mask, feats * mask, atol=1e-5, rtol=0)
    torch.testing.assert_close(trace.h[:, 0], model.decoder(model.tgt_embed(tgt_in[:1]),
                                                            (state.h[:, :1], state.c[:, :1]))[1][0][:, 0],
                               atol=1e-5, rtol=0)


@pytest.mark.parametrize("cell", ["lstm", "peephole"])
def test_recorded_gate_is_the_forget_gate(cell):
    # The final state only checks the arithmetic; this checks that f (not i or o) is recorded:
    # at the first step of layer 1 the state is zero, so f = sigmoid(W_f x + b_f) by hand.
    model = tiny(cell)
    trace, _ = probes.trace_encoder(model, SRC, LENGTHS)
    x = model.src_embed(SRC[:, 0])  # (N, E)
    H = 8
    if cell == "lstm":
        lstm = model.encoder.lstm
        w, b = lstm.weight_ih_l0, lstm.bias_ih_l0 + lstm.bias_hh_l0
    else:
        w, b = model.encoder.cells[0].weight_ih, model.encoder.cells[0].bias
    f = torch.sigmoid(x @ w[H:2 * H].t() + b[H:2 * H])
    torch.testing.assert_close(trace.forget[0, :, 0], f.detach(), atol=1e-6, rtol=0)


def test_forget_stats_and_half_life_by_hand():
    forget = torch.tensor([[[0.1, 0.95], [0.5, 0.5], [0.7, 0.3]]])  # (N=1, T=3, H=2)
    mask = torch.tensor([[True, True, False]])
    boundary = torch.tensor([[False, True, True]])
    inside = torch.tensor([[True, False, False]])
    s = probes.forget_stats(forget, mask, boundary, inside, bins=10)
    assert s.steps == 2 and s.boundary_steps == 1 and s.inside_steps == 1
    assert s.unit_sum.tolist() == pytest.approx([0.6, 1.45])
    assert s.boundary_sum == pytest.approx(1.0) and s.inside_sum == pytest.approx(1.05)
    assert s.hist.sum() == 4 and s.hist[1] == 1 and s.hist[5] == 2 and s.hist[9] == 1
    s2 = s + s
    assert s2.steps == 4 and s2.unit_log_sum.tolist() == pytest.approx(
        [2 * (math.log(0.1) + math.log(0.5)), 2 * (math.log(0.95) + math.log(0.5))])
    assert probes.half_life(0.5) == pytest.approx(1.0)
    assert probes.half_life(0.5 ** 0.1) == pytest.approx(10.0)
    assert probes.half_life(1.0) == math.inf and probes.half_life(0.0) == 0.0


def test_boundaries_are_punctuation_and_the_encoders_first_step_is_neither():
    vocab = Vocab(("<pad>", "<unk>", "<bos>", "<eos>", ",", ".", "man", "'s", "--", "«", "?!"),
                  fingerprint="x")
    assert probes.boundary_table(vocab).tolist() == [False] * 4 + [True, True, False, False,
                                                                   True, True, True]
    assert probes.word_table(vocab).tolist() == [False, True, False, False, False, False, True,
                                                 True, False, False, False]
    tokens = torch.tensor([[5, 6, 4, 7, 0]])
    mask = torch.tensor([[True, True, True, True, False]])
    b, i = probes.step_kinds(tokens, mask, boundary=probes.boundary_table(vocab),
                             word=probes.word_table(vocab), skip_first=True)
    assert b.tolist() == [[False, False, True, False, False]]
    assert i.tolist() == [[False, True, False, True, False]]


@pytest.mark.parametrize("reverse", [False, True])
def test_an_empty_source_adds_no_encoder_step_to_the_forget_gates(reverse):
    """The encoder reads an empty source as one <pad> (collate): that step is no word's, and the
    report's gate statistics exclude padding. It had been counted (steps 13 -> 14)."""
    from s2s.analysis.measures import forget_gates

    words = ("<pad>", "<unk>", "<bos>", "<eos>", *(f"w{i}" for i in range(16)))
    vocab = Vocab(words, fingerprint="x")
    model = tiny(reverse=reverse)
    pairs = [([4, 5, 6, 7], [5, 6]), ([8, 9], [7, 8, 9])]
    kw = dict(src_vocab=vocab, tgt_vocab=Vocab(words[:-3], fingerprint="y"), batch_size=4,
              bins=10)
    with torch.no_grad():
        alone = forget_gates(model, "m", pairs, **kw)
        with_empty = forget_gates(model, "m", [*pairs, ([], [4])], **kw)
    for k in range(2):
        a, b = alone["encoder", k], with_empty["encoder", k]
        assert a.steps == b.steps == 6, (a.steps, b.steps)
        assert b.unit_sum.tolist() == pytest.approx(a.unit_sum.tolist(), abs=1e-12)
        assert b.hist.tolist() == a.hist.tolist()
        assert (b.boundary_steps, b.inside_steps) == (a.boundary_steps, a.inside_steps)
    # the decoder's <bos> and one word of the third reference are steps
    assert with_empty["decoder", 0].steps == alone["decoder", 0].steps + 2


# --- gradient reach ------------------------------------------------------------------------------


@pytest.mark.parametrize("arch,cell", [("seq2seq", "lstm"), ("seq2seq", "peephole"),
                                       ("seq2seq", "gru"), ("attention", "lstm"), ("cho", "gru")])
def test_gradient_reach_is_in_original_order_and_zero_at_padding(arch, cell):
    rev = tiny(cell, reverse=True, arch=arch)
    fwd = build_model(RNNConfig(**{**vars(rev.cfg), "reverse_source": False}), src_vocab=20,
                      tgt_vocab=17, pad=0).eval()
    fwd.load_state_dict(rev.state_dict())
    first = torch.tensor([5, 6, 7])
    g_rev = probes.first_word_gradients(rev, SRC, LENGTHS, first, bos=2)
    by_hand = torch.tensor([[8, 7, 6, 5, 4], [11, 10, 9, 0, 0], [12, 0, 0, 0, 0]])
    g_fwd = probes.first_word_gradients(fwd, by_hand, LENGTHS, first, bos=2)
    for n, L in enumerate(LENGTHS.tolist()):
        torch.testing.assert_close(g_rev[n, :L], g_fwd[n, :L].flip(0), atol=1e-6, rtol=0)
        assert (g_rev[n, L:] == 0).all() and (g_fwd[n, L:] == 0).all()
        assert (g_rev[n, :L] > 0).all()
    # the asymmetry is real: the reversed model's first word is not its last
    assert not torch.allclose(g_rev[0], g_fwd[0])


def test_gradient_of_a_batch_is_each_sentences_own_and_matches_autograd_on_the_model():
    model = tiny("lstm", reverse=True)
    first = torch.tensor([5, 6, 7])
    batch = probes.first_word_gradients(model, SRC, LENGTHS, first, bos=2)
    for n, L in enumerate(LENGTHS.tolist()):
        alone = probes.first_word_gradients(model, SRC[n:n + 1, :L], LENGTHS[n:n + 1],
                                            first[n:n + 1], bos=2)
        torch.testing.assert_close(batch[n, :L], alone[0], atol=1e-6, rtol=0)
    # referee: the model's own forward pass; its words are distinct, so the embedding table's
    # gradient row of word w is the gradient at w's position.
    model.zero_grad()
    logits = model(SRC[:1], LENGTHS[:1], torch.tensor([[2]]))  # (1, 1, V)
    (-torch.log_softmax(logits[0, 0], -1)[5]).backward()
    rows = model.src_embed.weight.grad[SRC[0]].norm(dim=-1)  # (5,), original order
    torch.testing.assert_close(batch[0], rows, atol=1e-6, rtol=0)


def test_reach_sums_average_over_the_sentences_that_have_the_position():
    norms = torch.tensor([[3.0, 1.0, 0.0], [2.0, 2.0, 4.0]])
    s = probes.reach_sums(norms, torch.tensor([2, 3]), positions=4)
    assert s.count.tolist() == [2, 2, 1, 0]
    assert s.norm_sum.tolist() == pytest.approx([5.0, 3.0, 4.0, 0.0])
    assert s.share_sum.tolist() == pytest.approx([0.75 + 0.25, 0.25 + 0.25, 0.5, 0.0])


# --- Figure 2 ------------------------------------------------------------------------------------


def test_pca_matches_the_covariance_eigenvectors_and_is_deterministic():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(12, 5)) * np.array([5.0, 2.0, 0.5, 0.1, 0.1])
    coords, explained = probes.pca_2d(x)
    vals, vecs = np.linalg.eigh(np.cov(x.T))
    order = np.argsort(vals)[::-1]
    assert explained == pytest.approx(vals[order[:2]] / vals.sum())
    proj = (x - x.mean(0)) @ vecs[:, order[:2]]
    assert np.abs(coords) == pytest.approx(np.abs(proj))
    again, _ = probes.pca_2d(x * 1.0)
    assert np.array_equal(coords, again)
    line = np.outer(np.arange(4.0), [1.0, 2.0, 2.0])  # points on a line: one component
    c, e = probes.pca_2d(line)
    assert e == pytest.approx([1.0, 0.0]) and c[:, 0] == pytest.approx([-4.5, -1.5, 1.5, 4.5])


def test_phrases_pair_kinds_distances_and_unk():
    vocab = Vocab(("<pad>", "<unk>", "<bos>", "<eos>", "A", "man", "sees", "dog", "is", "seen",
                   "by", "a"), fingerprint="x")
    groups = probes.phrase_groups(["A man sees a dog | A dog is seen by a man",
                                   ("A dog sees a man",), "A cat sees a man"])
    assert groups[0] == ("A man sees a dog", "A dog is seen by a man")
    phrases = probes.encode_phrases(groups, vocab, lambda s: s)
    assert [p.group for p in phrases] == [0, 0, 1, 2]
    assert phrases[3].unk == ("cat",) and phrases[3].ids[1] == vocab.unk
    kinds = probes.pair_kinds(phrases)
    assert kinds[0, 1] == "paraphrase" and kinds[0, 2] == "swap" and kinds[2, 3] == "other"
    vectors = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 4.0], [3.0, 4.0]])
    d = probes.phrase_distances(vectors, phrases)
    pairs = [1, 4, 5, 17 ** 0.5, 20 ** 0.5, 3]
    mean = sum(pairs) / 6
    assert d["mean_pair_distance"] == pytest.approx(mean)
    assert d["paraphrase_distance"] == pytest.approx(1 / mean)
    assert d["swap_distance"] == pytest.approx(4 / mean)
    assert d["paraphrase_pairs"] == d["swap_pairs"] == 1
    assert np.isnan(d["paraphrase_sd"]) and np.isnan(d["swap_sd"])  # one pair: no spread
    assert d["nn_same_meaning"] == 1.0  # phrases 0 and 1 are each other's nearest
    # two paraphrase pairs (a group of three: 0-1, 0-4, 1-4 are three), their relative spread
    groups = probes.phrase_groups(["A man sees a dog | A dog is seen by a man | a man sees a dog",
                                   ("A dog sees a man",)])
    phrases = probes.encode_phrases(groups, vocab, lambda s: s)
    vectors = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0], [0.0, 4.0]])
    d = probes.phrase_distances(vectors, phrases)
    assert probes.pair_kinds(phrases) == {(0, 1): "paraphrase", (0, 2): "paraphrase",
                                          (1, 2): "paraphrase", (0, 3): "swap", (1, 3): "other",
                                          (2, 3): "other"}  # "a man" is not "A man"
    pairs = [1, 2, 5 ** 0.5, 4, 17 ** 0.5, 2]
    mean = sum(pairs) / 6
    para = np.array([1, 2, 5 ** 0.5]) / mean
    assert d["paraphrase_distance"] == pytest.approx(para.mean())
    assert d["paraphrase_sd"] == pytest.approx(np.std(para, ddof=1))
    assert np.isnan(d["swap_sd"])  # one swap pair


def test_only_lstm_seq2seq_models_are_traced():
    assert probes.traceable(tiny("lstm")) and probes.traceable(tiny("peephole"))
    assert not probes.traceable(tiny("gru"))
    assert not probes.traceable(tiny("lstm", arch="attention"))


def test_representations():
    model = tiny("lstm")
    state = model.encode(SRC, LENGTHS)
    top = probes.sentence_vectors(model, SRC, LENGTHS, representation="top")
    every = probes.sentence_vectors(model, SRC, LENGTHS, representation="all")
    full = probes.sentence_vectors(model, SRC, LENGTHS, representation="state")
    assert top.shape == (3, 8) and every.shape == (3, 16) and full.shape == (3, 32)
    torch.testing.assert_close(every[1], torch.cat([state.h[0, 1], state.h[1, 1]]))
    torch.testing.assert_close(full[1, 16:24], state.c[0, 1])
    torch.testing.assert_close(top, state.h[-1])


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("arch", ["cho", "attention"])
def test_figure2_reads_the_encoders_own_final_state_not_the_decoders_start(arch, reverse):
    """Cho et al.'s and the attention model's decoders start from tanh(W x) of the encoder's
    final state x: Figure 2 draws x, each sentence's as if read alone (no padding)."""
    model = tiny("gru", reverse=reverse, arch=arch)
    top = probes.sentence_vectors(model, SRC, LENGTHS, representation="top")
    assert top.shape == (3, 8 if arch == "cho" else 16)
    for n, length in enumerate(LENGTHS.tolist()):
        alone = SRC[n: n + 1, :length]
        x = model.source(alone, LENGTHS[n: n + 1])  # (1, S, E), in reading order
        if arch == "cho":  # a stack of our own: (h, c) of each layer, (L, 1, H)
            _, (h_n, _) = model.encoder(x, lengths=LENGTHS[n: n + 1])
            want = h_n[-1, 0]
        else:  # nn.GRU, bidirectional: (2L, 1, H), per layer forward then backward
            _, h_n = model.encoder(x)
            want = torch.cat([h_n[-2, 0], h_n[-1, 0]])
        torch.testing.assert_close(top[n], want)
        assert not torch.allclose(top[n, :8], model.encode(alone, LENGTHS[n: n + 1]).h[-1, 0])


# --- the stage and the report --------------------------------------------------------------------


def test_stage_writes_artifacts_and_the_report_renders_them(tmp_path):
    prepared, vocab_dir, models_dir = tiny_analysis_project(tmp_path, {
        name: RNNConfig(num_layers=2, hidden_size=8, embed_size=6, reverse_source=reverse)
        for name, reverse in (("fwd", False), ("rev", True))})
    out = tmp_path / "analysis"
    meta = stage.main(AnalyzePaths(prepared=prepared, vocab=vocab_dir, models=models_dir, out=out),
                      models=["fwd", "rev"],
                      phrases=[("A man is watching a woman.", "A woman is watched by a man."),
                               ("A woman is watching a man.",)],
                      sentences=3, max_position=8, min_length=3, batch_size=2, bins=10)
    assert meta.to_json()["test"] == {"pairs": 4, "gate_sentences": 3, "reach_sentences": 3,
                            "reach_min_length": 3, "sentences_cap": 3}
    assert meta.figure2.phrases[1].unk == ("watched", "by")
    assert AnalysisMeta.read(out / "analysis.json") == meta  # what is written is what is read
    assert json.loads((out / "analysis.json").read_text())["models"]["rev"]["reverse_source"]

    points = pd.read_csv(out / "figure2.csv")
    assert len(points) == 6 and set(points["model"]) == {"fwd", "rev"}
    hist = pd.read_csv(out / "forget_hist.csv")
    assert len(hist) == 2 * 2 * 2 * 10
    summary = pd.read_csv(out / "forget_summary.csv")
    # gates over the first 3 pairs: 7 + 6 + 2 source words, 6 + 3 + 2 (+1 <bos> each) target steps
    enc = summary[summary["stack"] == "encoder"]
    dec = summary[summary["stack"] == "decoder"]
    assert set(enc["steps"]) == {15} and set(dec["steps"]) == {14}
    # boundaries: "." twice and "," once, minus the reversed encoder's first step (a ".")
    assert enc.set_index("model").loc["fwd", "boundary_steps"].tolist() == [3, 3]
    assert enc.set_index("model").loc["rev", "boundary_steps"].tolist() == [1, 1]
    units = pd.read_csv(out / "forget_units.csv")
    assert len(units) == 2 * 2 * 2 * 8
    mean_f = units.groupby(["model", "stack", "layer"])["mean_f"].mean()
    np.testing.assert_allclose(mean_f.loc["fwd", "encoder", 1],
                               enc.set_index(["model", "layer"]).loc[("fwd", 1), "mean_f"],
                               rtol=1e-4)
    reach = pd.read_csv(out / "gradient_reach.csv")
    # sentences 1, 2 and 4 (7, 6 and 7 words; "A woman" is under min_length)
    assert reach[reach["model"] == "fwd"]["sentences"].tolist() == [3, 3, 3, 3, 3, 3, 2, 0]
    assert np.isnan(reach["mean_norm"].iloc[-1])
    share = reach[reach["model"] == "rev"]
    total = (share["mean_share"] * share["sentences"]).sum()
    assert total == pytest.approx(3.0, rel=1e-4)  # each sentence's shares sum to 1

    figures = tmp_path / "report" / "figures"
    md = analysis_markdown(out, figures)
    for key in ("figure2", "forget", "half_life", "reach"):  # no snapshots: no reach over training
        name = report.FIGURES[key]
        png = figures / name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
        assert f"](figures/{name})" in md
    assert md.startswith("## Figure 2")
    assert "| model | PC1 var |" in md and "| position | sentences | norm fwd |" in md
    assert "(read as \\<unk>): by, watched." in md
    nf, sf = run.first_positions(reach, "fwd")
    nr, _ = run.first_positions(reach, "rev")
    assert f"forward (fwd) {nf:.3g} vs reversed (rev) {nr:.3g}" in md
    # the statistic the report quotes is the stage's, and the one its CSV gives, to the last bit
    first = pd.read_csv(out / "gradient_reach_first.csv").set_index("model")
    assert (first.loc["fwd", "mean_norm"], first.loc["fwd", "mean_share"]) == (nf, sf)
    assert first.loc["fwd", "positions"] == outputs.FIRST and first.loc["rev", "reverse_source"]
    stacks = pd.read_csv(out / "forget_stacks.csv")
    pd.testing.assert_frame_equal(stacks, run.forget_stacks(summary), check_exact=True)
    enc_fwd = stacks[(stacks["model"] == "fwd") & (stacks["stack"] == "encoder")].iloc[0]
    assert enc_fwd["layers"] == 2 and enc_fwd["units"] == 16
    assert enc_fwd["mean_f"] == enc.set_index("model").loc["fwd", "mean_f"].mean()
    assert len(report.render(read_analysis(out), figures)) == 5
    assert "No snapshots of training were measured" in md
    # and the end of training's paragraph says what the verdict then rests on
    assert "from the start: no snapshot of training was measured (the analyze stage" in md

    # the claims table's verdicts follow the artifacts, and flip with them
    reach_claim, fig2_claim = checks.analysis_claims(read_analysis(out))
    assert reach_claim.status == "cannot tell"  # no snapshots: no interval, no verdict
    assert f"rev {nr:.3g} vs fwd {nf:.3g}" in reach_claim.evidence
    fig2 = pd.read_csv(out / "figure2_summary.csv")
    # one paraphrase and one swap pair: no spread, no interval, no verdict
    assert fig2[["paraphrase_sd", "swap_sd"]].isna().all(axis=None)
    assert fig2_claim.status == "cannot tell" and fig2_claim.evidence.endswith(
        "(under two pairs of a kind: analysis.phrases needs more), so no verdict")
    # with the pairs' spread (6 of each kind), the intervals decide
    fig2["swap_distance"] = fig2["paraphrase_distance"] + 1.0
    fig2[["paraphrase_sd", "swap_sd", "paraphrase_pairs", "swap_pairs"]] = 0.05, 0.05, 6, 6
    fig2.to_csv(out / "figure2_summary.csv", index=False)
    first = pd.read_csv(out / "gradient_reach_first.csv")  # what the reversal claim reads
    first.loc[first["model"] == "rev", "mean_norm"] = 2 * nf + 1
    first.to_csv(out / "gradient_reach_first.csv", index=False)
    reach_claim, fig2_claim = checks.analysis_claims(read_analysis(out))
    assert (reach_claim.status, fig2_claim.status) == ("cannot tell", "holds")
    assert f"rev {2 * nf + 1:.3g} vs fwd {nf:.3g}" in reach_claim.evidence
    # the file of an analyze stage that wrote no standard deviations still reads: no verdict
    fig2.drop(columns=["paraphrase_sd", "swap_sd"]).to_csv(out / "figure2_summary.csv",
                                                            index=False)
    _, fig2_claim = checks.analysis_claims(read_analysis(out))
    assert fig2_claim.status == "cannot tell" and "rerun it), so no verdict" in \
        fig2_claim.evidence


def test_models_without_lstm_gates_get_figure2_and_gradient_reach_only(tmp_path):
    prepared, vocab_dir, models_dir = tiny_analysis_project(tmp_path, {
        "gru": RNNConfig(cell="gru", num_layers=1, hidden_size=8, embed_size=6),
        "att": RNNConfig(arch="attention", num_layers=1, hidden_size=8, embed_size=6,
                           reverse_source=True)})
    out = tmp_path / "analysis"
    meta = stage.main(AnalyzePaths(prepared=prepared, vocab=vocab_dir, out=out),
                      models={"gru": models_dir / "gru" / "model.pt",
                              "att": models_dir / "att" / "model.pt"},
                      phrases=(), sentences=4, max_position=3, min_length=3)
    assert not meta.models["gru"].forget_gates and not meta.models["att"].forget_gates
    assert meta.figure2.groups == len(probes.MULTI30K_PHRASES)  # no phrases: the default
    assert pd.read_csv(out / "forget_summary.csv").empty
    assert tuple(pd.read_csv(out / "forget_hist.csv").columns) == layout.HIST_COLUMNS
    assert len(pd.read_csv(out / "gradient_reach.csv")) == 6
    md = analysis_markdown(out, tmp_path / "figures")
    assert "No forget gates" in md and "forward (gru)" in md and "reversed (att)" in md
    assert not (tmp_path / "figures" / report.FIGURES["forget"]).exists()


def test_an_empty_test_set_is_refused_naming_the_file(tmp_path):
    """It had failed on "No objects to concatenate", naming nothing."""
    from s2s.data.text import CorpusError

    prepared, vocab_dir, models_dir = tiny_analysis_project(tmp_path, {
        "fwd": RNNConfig(num_layers=1, hidden_size=8, embed_size=6)})
    for side in ("en", "fr"):
        (prepared / f"test.tok.{side}").write_text("")
    out = tmp_path / "analysis"
    with pytest.raises(CorpusError, match=f"^{prepared / 'test.tok.en'}: no test sentences"):
        stage.main(AnalyzePaths(prepared=prepared, vocab=vocab_dir, models=models_dir, out=out),
                   models=["fwd"], phrases=(), sentences=4, max_position=3, min_length=3)
    assert not out.exists()


def test_reach_over_training_and_memory_are_written_and_reported(tmp_path):
    """Snapshots (as the train stage writes them) give gradient_reach_training*.csv, whose
    early rows decide the reversal claim with those of the seed pairs (the replicas fwd2 and
    rev2 measured for them alone); memory rows for LSTM and GRU encoders."""
    configs = {"fwd": RNNConfig(num_layers=2, hidden_size=8, embed_size=6),
               "rev": RNNConfig(num_layers=2, hidden_size=8, embed_size=6, reverse_source=True),
               "gru": RNNConfig(arch="cho", cell="gru", num_layers=1, hidden_size=8,
                                embed_size=6),
               "fwd2": RNNConfig(num_layers=2, hidden_size=8, embed_size=6),
               "rev2": RNNConfig(num_layers=2, hidden_size=8, embed_size=6, reverse_source=True)}
    prepared, vocab_dir, models_dir = tiny_analysis_project(tmp_path, configs)
    with open(prepared / "test.tok.en", "a") as f:  # "a man", "a woman" twice: substitutable
        f.write("A woman is watching a dog .\nA man , a woman .\n")
    with open(prepared / "test.tok.fr", "a") as f:
        f.write("Une femme regarde un chien .\nUn homme , une femme .\n")
    src_vocab, tgt_vocab = Vocab.load(vocab_dir / "en.tsv"), Vocab.load(vocab_dir / "fr.tsv")
    snaps = tmp_path / "snapshots"
    for seed, name in enumerate(("fwd", "rev", "fwd2", "rev2")):
        for epoch, step in ((0.0, 0), (0.5, 3)):
            m = build_model(configs[name], src_vocab=len(src_vocab), tgt_vocab=len(tgt_vocab),
                            pad=0)
            m.init_weights(seed + 10 * step)
            checkpoint.save(snaps / name / f"epoch{epoch:g}.pt", m, src_vocab=src_vocab,
                            tgt_vocab=tgt_vocab, step=step, epoch=epoch)
        (snaps / name / "snapshots.json").write_text(json.dumps({
            "steps_per_epoch": 6, "total_steps": 12, "final_epoch": 2.0,
            "snapshots": [{"epoch": 0.0, "step": 0, "file": "epoch0.pt"},
                          {"epoch": 0.5, "step": 3, "file": "epoch0.5.pt"}]}))
    out = tmp_path / "analysis"
    meta = stage.main(AnalyzePaths(prepared=prepared, vocab=vocab_dir, models=models_dir,
                                   snapshots=snaps, out=out),
                      models=["fwd", "rev"], phrases=(), sentences=6, max_position=8,
                      min_length=3, batch_size=2, bins=10,
                      memory_models=["fwd", "rev", "gru"], memory_steps=5, memory_candidates=5,
                      reach_replicas=["fwd2", "rev2"],
                      seed_pairs=[("fwd", "rev"), ("fwd2", "rev2")], bootstrap=200)
    assert meta.gradient_reach_training.epochs == {m: (0.0, 0.5, 2.0)
                                                   for m in ("fwd", "rev", "fwd2", "rev2")}
    assert meta.gradient_reach_training.seed_pairs == (("fwd", "rev"), ("fwd2", "rev2"))
    assert list(meta.models) == ["fwd", "rev"]  # the replicas are in no other table
    training = pd.read_csv(out / "gradient_reach_training.csv")
    assert tuple(training.columns) == layout.TRAINING_COLUMNS
    assert len(training) == 2 * 3 * 8
    # the end is the final model's own gradient_reach rows
    reach = pd.read_csv(out / "gradient_reach.csv")
    end = training[training["epoch"] == 2.0].drop(columns=["epoch", "step"])
    pd.testing.assert_frame_equal(end.reset_index(drop=True), reach)
    diff = pd.read_csv(out / "gradient_reach_training_diff.csv")
    assert tuple(diff.columns) == layout.TRAINING_DIFF_COLUMNS
    assert diff["epoch"].tolist() == [0.0, 0.0, 0.5, 0.5, 2.0, 2.0]
    share = diff[diff["statistic"] == "first_share"].set_index("epoch")
    first = run.first_over_training(training)
    written = pd.read_csv(out / "gradient_reach_training_first.csv")
    pd.testing.assert_frame_equal(written, first.reset_index(drop=True), check_exact=True)
    first = first.set_index(["model", "epoch"])
    for e in (0.0, 0.5, 2.0):  # the per-sentence means are those of the position table
        assert share.loc[e, "forward_mean"] == pytest.approx(first.loc[("fwd", e), "share"],
                                                             rel=1e-4)
        assert share.loc[e, "lo"] <= share.loc[e, "diff"] <= share.loc[e, "hi"]
        assert share.loc[e, "diff"] == pytest.approx(
            share.loc[e, "reversed_mean"] - share.loc[e, "forward_mean"], abs=1e-5)
    # the seed pairs' table: the first pair's rows are those of the training difference, the
    # replicas' their own (other weights: other numbers)
    pairs = pd.read_csv(out / "gradient_reach_seed_pairs.csv")
    assert tuple(pairs.columns) == layout.TRAINING_DIFF_COLUMNS
    pd.testing.assert_frame_equal(pairs[pairs["forward"] == "fwd"].reset_index(drop=True), diff)
    second = pairs[pairs["forward"] == "fwd2"]
    assert set(second["reversed"]) == {"rev2"} and second["epoch"].tolist() == diff["epoch"].tolist()
    assert not np.allclose(second["diff"], diff["diff"])

    decay = pd.read_csv(out / "memory_decay.csv")
    assert tuple(decay.columns) == layout.DECAY_COLUMNS
    assert sorted(set(zip(decay["model"], decay["layer"]))) == [
        ("fwd", 1), ("fwd", 2), ("gru", 1), ("rev", 1), ("rev", 2)]
    g = decay[decay["model"] == "gru"]
    assert g["mean_abs_dc"].isna().all() and g["update_only_dh"].iloc[0] > 0
    lstm = decay[decay["model"] == "fwd"]
    assert lstm["update_only_dh"].isna().all()
    assert (lstm[lstm["steps_after"] == 0]["forget_only_dc"]
            == lstm[lstm["steps_after"] == 0]["mean_abs_dc"]).all()  # the same start
    assert meta.memory.substituted > 0
    half = pd.read_csv(out / "memory_half_life.csv")
    assert tuple(half.columns) == layout.HALF_LIFE_COLUMNS and len(half) == 5
    shares = pd.read_csv(out / "memory_gate_share.csv")
    assert list(zip(shares["model"], shares["layer"])) == list(zip(half["model"], half["layer"]))
    assert shares["gate_share"].tolist() == [run.gate_share(decay, m, k)
                                             for m, k in zip(half["model"], half["layer"])]

    figures = tmp_path / "report" / "figures"
    md = analysis_markdown(out, figures)
    for key in ("reach_training", "reach_positions", "memory"):
        png = figures / report.FIGURES[key]
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
        assert f"](figures/{report.FIGURES[key]})" in md
    assert "## Gradient reach over training" in md and "## Memory of a one-word change" in md
    assert "| epoch | norm fwd | norm rev |" in md and "| model | layer | half-life c |" in md

    # the reversal claim rests on the trained early snapshots (epoch 0.5 here; epoch 0 is the
    # initialisation, shown as such and never judged), says what comes later, and needs the
    # first pair's bootstrap interval and the interval over the seed pairs to agree
    claim = checks.analysis_claims(read_analysis(out))[0]
    assert "trained, early epoch 0.5 " in claim.evidence and "; later epoch 2 " in claim.evidence
    assert "; at initialisation (reading order) " in claim.evidence
    assert "over seeds, reversed - forward with 95% t-interval: epoch 0.5 " in claim.evidence
    assert "] over 2 seed pairs" in claim.evidence

    def early(table, epoch, diffs, bounds=None):  # first_share at `epoch`, one value a pair
        rows = (table["statistic"] == "first_share") & (table["epoch"] == epoch)
        table.loc[rows, "diff"] = diffs
        if bounds is not None:
            table.loc[rows, ["lo", "hi"]] = bounds

    early(diff, 0.5, 0.2, (0.1, 0.3))
    early(pairs, 0.5, [0.2, 0.22])  # mean 0.21, sd 0.014: 0.21 +- 12.706 * 0.01 = 0.08 to 0.34
    diff.to_csv(out / "gradient_reach_training_diff.csv", index=False)
    pairs.to_csv(out / "gradient_reach_seed_pairs.csv", index=False)
    claim = checks.analysis_claims(read_analysis(out))[0]
    assert claim.status == "holds"
    assert [(d.label, d.over) for d in claim.differences] == [
        ("rev - fwd, epoch 0.5", "test sentences"),
        ("reversed - forward over seeds, epoch 0.5", "2 seed pairs")]
    assert (claim.differences[1].lo, claim.differences[1].hi) == pytest.approx(
        (0.21 - 12.706 * 0.01, 0.21 + 12.706 * 0.01))
    text = analysis_markdown(out, figures)
    assert "Over the seed pairs (forward/reversed, the same seeds: fwd/rev, fwd2/rev2)" in text
    # the seeds disagree: their interval holds 0, so the bootstrap's alone is no verdict
    early(pairs, 0.5, [0.2, -0.1])
    pairs.to_csv(out / "gradient_reach_seed_pairs.csv", index=False)
    assert checks.analysis_claims(read_analysis(out))[0].status == "no significant difference"
    # the initialisation alone cannot make the verdict
    early(pairs, 0.5, [0.2, 0.22])
    early(pairs, 0.0, [0.2, 0.22])
    pairs.to_csv(out / "gradient_reach_seed_pairs.csv", index=False)
    early(diff, 0.0, 0.2, (0.1, 0.3))
    early(diff, 0.5, 0.0, (-0.1, 0.1))
    diff.to_csv(out / "gradient_reach_training_diff.csv", index=False)
    assert checks.analysis_claims(read_analysis(out))[0].status == "no significant difference"
    # a folder of an analyze stage before the seed pairs (or with one pair): no interval over
    # seeds, so no verdict where the bootstrap's excludes 0, and the report says why
    early(diff, 0.5, 0.2, (0.1, 0.3))
    diff.to_csv(out / "gradient_reach_training_diff.csv", index=False)
    pairs[pairs["forward"] == "fwd"].to_csv(out / "gradient_reach_seed_pairs.csv", index=False)
    claim = checks.analysis_claims(read_analysis(out))[0]
    assert claim.status == "cannot tell"
    assert "epoch 0.5 +0.200 over 1 seed pair, no interval" in claim.evidence
    assert "no verdict without an interval over seeds" in claim.evidence
    (out / "gradient_reach_seed_pairs.csv").unlink()
    claim = checks.analysis_claims(read_analysis(out))[0]
    assert claim.status == "cannot tell" and "epoch 0.5 no seed pair measured" in claim.evidence
    assert "One forward and one reversed model were measured over training" in \
        analysis_markdown(out, figures)
    early(diff, 0.5, 0.0, (-0.1, 0.1))  # the bootstrap's holds 0: no seed pair can make it hold
    diff.to_csv(out / "gradient_reach_training_diff.csv", index=False)
    assert checks.analysis_claims(read_analysis(out))[0].status == "no significant difference"


def test_seed_pairs_are_forward_and_reversed_models_that_differ_in_reading_order_alone(
        tmp_path):
    """The default profile's reach measures three seed pairs; an experiment that changes one
    replica's seed or setting unpairs it (the analyze stage leaves it out), and still runs."""
    from s2s import config

    from helpers import profile_dict, write_params

    def pairs(edit=lambda raw: None):
        raw = profile_dict("default")
        edit(raw)
        p = config.load(write_params(tmp_path / "params.yaml", raw))  # the check passes
        return config.seed_pairs(p, (*p.analysis.models, *p.analysis.reach_replicas))

    assert pairs() == [("forward", "reversed_1"), ("forward_2", "reversed_2"),
                       ("forward_3", "reversed_3")]
    assert pairs(lambda raw: raw["models"]["reversed_3"].update(init_seed=14)) == [
        ("forward", "reversed_1"), ("forward_2", "reversed_2")]
    assert pairs(lambda raw: raw["models"]["forward_2"].update(hidden_size=128)) == [
        ("forward", "reversed_1"), ("forward_3", "reversed_3")]
    # reversed_fb1 shares forward's seeds but not its forget bias: no pair of it
    assert pairs(lambda raw: raw["analysis"].update(models=["forward", "reversed_fb1"])) == [
        ("forward_2", "reversed_2"), ("forward_3", "reversed_3")]


def test_figure2s_verdict_rests_on_a_welch_interval_over_the_phrase_pairs():
    """Each model's swaps - paraphrases relative distance with its 95% Welch interval from the
    pairs' means and standard deviations: holds when every one is above 0, does not hold when
    one is below, no significant difference when one holds 0."""
    from s2s.claims.analyses import figure2_claim, pairs_interval

    def row(model, para, swap, sd_p, sd_s, n=6):
        return {"model": model, "paraphrase_distance": para, "swap_distance": swap,
                "paraphrase_sd": sd_p, "swap_sd": sd_s, "paraphrase_pairs": n, "swap_pairs": n}

    # 1.0 apart, sds 0.1 and 0.2 over 6 pairs each: se = sqrt(0.05 / 6); Welch's df =
    # 0.0025 / (0.0017 / 5) = 7.35, floored to 7: t = 2.365
    iv = pairs_interval(row("a", 0.5, 1.5, 0.1, 0.2))
    half = 2.365 * (0.05 / 6) ** 0.5
    assert (iv.lo, iv.hi) == pytest.approx((1.0 - half, 1.0 + half))
    apart = row("a", 0.5, 1.5, 0.1, 0.2)
    assert figure2_claim(pd.DataFrame([apart])).status == "holds"
    got = figure2_claim(pd.DataFrame([apart, row("b", 1.2, 0.9, 0.05, 0.05)]))
    assert got.status == "does not hold"
    assert [d.label for d in got.differences] == ["a swaps - paraphrases", "b swaps - paraphrases"]
    assert got.differences[1].hi < 0 and got.differences[1].over == "phrase pairs"
    assert figure2_claim(pd.DataFrame([apart, row("b", 1.0, 1.1, 0.3, 0.3)])).status == \
        "no significant difference"
    assert "b: paraphrases 1.00 vs swaps 1.10 (swaps - paraphrases +0.10, 95% interval" in \
        figure2_claim(pd.DataFrame([row("b", 1.0, 1.1, 0.3, 0.3)])).evidence
    # a row without an interval beside one that decides: the verdict stands, and the evidence
    # says why that row has none (and not "so no verdict")
    nan = float("nan")
    got = figure2_claim(pd.DataFrame([row("a", 1.2, 0.5, 0.05, 0.05),
                                      row("b", nan, nan, nan, nan)]))
    assert got.status == "does not hold"
    assert got.evidence.endswith("; no interval over the phrase pairs of b (its distances are not "
                                 "numbers (every phrase's vector the same))")
    # an inconsistent row (one pair, yet a spread): no interval, not a division by zero
    assert pairs_interval(row("c", 0.5, 1.5, 0.1, 0.2, n=1)) is None


def test_a_later_column_reads_empty_where_absent_and_is_checked_where_written(tmp_path):
    """figure2_summary.csv's spread columns: a folder of an earlier analyze stage (the published
    run's) reads, with them empty; a file that has them holds numbers there, or is refused."""
    import shutil

    from s2s.analysis import outputs
    from s2s.artifacts import ArtifactError
    from conftest import ROOT

    folder = tmp_path / "analysis"
    shutil.copytree(ROOT / "reports" / "default" / "analysis", folder)
    assert outputs.read(folder).figure2[["paraphrase_sd", "swap_sd"]].isna().all(axis=None)
    table = pd.read_csv(folder / "figure2_summary.csv")
    table["paraphrase_sd"], table["swap_sd"] = 0.25, "x"
    table.to_csv(folder / "figure2_summary.csv", index=False)
    with pytest.raises(ArtifactError, match=r"figure2_summary.csv:2: column 'swap_sd' must be a "
                                            r"number, got 'x'"):
        outputs.read(folder)
    table["swap_sd"] = 0.5
    table.to_csv(folder / "figure2_summary.csv", index=False)
    assert outputs.read(folder).figure2[["paraphrase_sd", "swap_sd"]].values.tolist() == \
        [[0.25, 0.5]] * len(table)
