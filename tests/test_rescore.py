"""Rescoring's prefix-tree scorer (s2s.decode.rescore.lstm_scores) against the definition: each
hypothesis teacher-forced on its own (s2s.decode.beam.score_sequences), for every architecture and
an ensemble, in float64, over n-best lists with shared prefixes, duplicates, an empty hypothesis,
a one-hypothesis list and lists longer than a batch."""

from __future__ import annotations

import random

import pytest
import torch

from s2s.data.vocab import SPECIALS, Vocab
from s2s.decode.beam import score_sequences
from s2s.decode.ensemble import Ensemble
from s2s.decode.rescore import Candidate, lstm_scores
from s2s.model import build_model
from s2s.model.seq2seq import RNNConfig
from s2s.model.transformer import TransformerConfig

WORDS = tuple(f"w{i}" for i in range(6))
VOCAB = Vocab(SPECIALS + WORDS, "test-rescore")
V = len(VOCAB)
ATOL = 1e-10  # float64: the tree sums the same step log-probs in the same order


def model(kind: str, seed: int):
    if kind == "transformer":
        cfg = TransformerConfig(d_model=8, heads=2, kv_heads=1, ff_size=12, encoder_layers=1,
                                decoder_layers=2, dropout=0.0, max_positions=32)
    else:
        arch, cell = kind.split("_", 1)
        cfg = RNNConfig(arch=arch, cell=cell, num_layers=2, hidden_size=8, embed_size=8,
                        init_range=0.7)  # wide: the scores depend on the source
    m = build_model(cfg, src_vocab=V, tgt_vocab=V, pad=VOCAB.pad)
    m.init_weights(seed)
    return m.double().eval()


KINDS = ["seq2seq_lstm", "seq2seq_peephole", "cho_cho_gru", "attention_gru", "transformer"]


def nbest_lists(seed: int) -> tuple[list[Candidate], list[list[int]]]:
    """Sources of lengths 1-6 and, per sentence, hypotheses grown from a few stems (so that they
    share prefixes), with a duplicate, an empty hypothesis and a one-hypothesis list, shuffled
    across sentences."""
    rng = random.Random(seed)
    sources = [[rng.randrange(4, V) for _ in range(n)] for n in (3, 1, 6, 3, 4)]
    cands = []
    for s in range(len(sources)):
        stems = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3))) for _ in range(3)]
        hyps = [(stem + " " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 4)))).strip()
                for stem in stems for _ in range(4)]
        if s == 1:
            hyps = hyps[:1]
        else:
            hyps += [hyps[0], ""]  # a duplicate, an empty hypothesis
        cands += [Candidate(s, h, -1.0) for h in hyps]
    rng.shuffle(cands)
    return cands, sources


@torch.no_grad()
def one_by_one(m, cands, sources) -> list[float]:
    out = []
    for c in cands:
        src = torch.tensor([sources[c.sentence]])
        tgt = VOCAB.encode(c.text)
        out.append(float(score_sequences(m, src, torch.tensor([src.size(1)]),
                                         torch.tensor([tgt or [VOCAB.eos]]),
                                         torch.tensor([len(tgt)]), bos=VOCAB.bos,
                                         eos=VOCAB.eos)[0]))
    return out


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("batch_size", [1, 7, 1000])
def test_prefix_tree_scores_equal_teacher_forcing_one_hypothesis_at_a_time(kind, batch_size):
    m = model(kind, seed=3)
    cands, sources = nbest_lists(seed=KINDS.index(kind))
    got = lstm_scores(m, cands, sources, vocab=VOCAB, src_pad=VOCAB.pad, batch_size=batch_size,
                      device=torch.device("cpu"), desc="test")
    want = one_by_one(m, cands, sources)
    assert got == pytest.approx(want, abs=ATOL)
    assert len(set(round(x, 6) for x in want)) > len(cands) // 2  # the scores tell hyps apart
    dup = [i for i, c in enumerate(cands) if c.sentence == 0]
    texts = [cands[i].text for i in dup]
    twice = next(t for t in texts if texts.count(t) > 1)
    assert len({got[i] for i in dup if cands[i].text == twice}) == 1


def test_an_ensemble_of_mixed_architectures_scores_as_its_combined_steps():
    ens = Ensemble([model("seq2seq_lstm", 1), model("attention_gru", 2), model("transformer", 3)],
                   combine="mean_prob")
    cands, sources = nbest_lists(seed=9)
    got = lstm_scores(ens, cands, sources, vocab=VOCAB, src_pad=VOCAB.pad, batch_size=10,
                      device=torch.device("cpu"), desc="test")
    assert got == pytest.approx(one_by_one(ens, cands, sources), abs=ATOL)


def test_the_empty_hypothesis_scores_the_eos_probability():
    m = model("seq2seq_lstm", 5)
    sources = [[4, 5, 6]]
    got = lstm_scores(m, [Candidate(0, "", 0.0)], sources, vocab=VOCAB, src_pad=VOCAB.pad,
                      batch_size=4, device=torch.device("cpu"), desc="test")
    with torch.no_grad():
        lprobs, _ = m.step(torch.tensor([VOCAB.bos]), m.encode(torch.tensor(sources),
                                                                torch.tensor([3])))
    assert got == pytest.approx([float(lprobs[0, VOCAB.eos])], abs=ATOL)


def test_rescoring_picks_the_best_weighted_sum_and_the_first_of_a_tie():
    """(1 - w) * the baseline's score + w * the LSTM's: w 0 is the baseline's own 1-best, w 1
    the LSTM's, w 0.5 the paper's average; a tie keeps the list's earlier candidate."""
    from s2s.decode.rescore import pick

    lists = [[Candidate(0, "a", -1.0), Candidate(0, "b", -3.0)],
             [Candidate(1, "c", -2.0), Candidate(1, "d", -2.0), Candidate(1, "e", -9.0)]]
    lstm = [-5.0, -1.0, -4.0, -4.0, -0.5]
    assert pick(lists, lstm, weight=0.0) == ["a", "c"]  # c and d tie: the first
    assert pick(lists, lstm, weight=1.0) == ["b", "e"]
    # w 0.5: a -3, b -2; c -3, d -3, e -4.75
    assert pick(lists, lstm, weight=0.5) == ["b", "c"]
    assert pick(lists, lstm, weight=0.25) == ["a", "c"]  # a -1.75, b -2.5


def test_an_nbest_list_with_moses_word_alignments_is_read_by_its_score_field(tmp_path):
    """Moses's -print-alignment-info-in-n-best adds a 5th field, the word alignment, after the
    score: the score is the 4th field (the last was read, and the alignment refused as "score
    must be a number"). Fewer or more fields, or a 4th that is no number, name file and line."""
    from s2s.data.text import CorpusError
    from s2s.decode.rescore import read_nbest

    path = tmp_path / "test.nbest"
    path.write_text("0 ||| le chat ||| lstm=-1.5 ||| -1.5 ||| 0-0 1-1\n"
                    "0 ||| un chat ||| lstm=-2.5 ||| -2.5\n"
                    "1 ||| oui ||| lstm=-0.5 ||| -0.5 ||| 0-0 \n"
                    "1 ||| non ||| lstm=-0.7 ||| -0.7 ||| \n", encoding="utf-8")  # no alignment
    assert read_nbest(path, sentences=2) == [
        [Candidate(0, "le chat", -1.5), Candidate(0, "un chat", -2.5)],
        [Candidate(1, "oui", -0.5), Candidate(1, "non", -0.7)]]
    for line, message in (
            ("1 ||| oui ||| lstm=-0.5 ||| 0-0 1-1 ||| -0.5",
             "sentence id and score (fields 1 and 4) must be numbers, got '1' and '0-0 1-1'"),
            ("1 ||| oui ||| -0.5", "(4 fields), got 3"),
            ("1 ||| oui ||| lstm=-0.5 ||| -0.5 ||| 0-0 ||| x", "(4 fields), got 6; only a word "
                                                               "alignment may follow the score")):
        path.write_text(f"0 ||| le chat ||| lstm=-1.5 ||| -1.5\n{line}\n", encoding="utf-8")
        with pytest.raises(CorpusError) as e:
            read_nbest(path, sentences=2)
        assert str(e.value).startswith(f"{path}:2: ") and message in str(e.value)


def test_no_tokenized_sentence_holds_the_nbest_separator():
    """An n-best line is split on ' ||| ': a hypothesis holding it would read as more fields.
    The tokenizer never writes it, whatever the raw text holds."""
    from s2s.data.text import tokenize

    for lang in ("en", "fr"):
        for raw in ("a ||| b", "a|||b", "||| x |||", "x ||||| y"):
            assert "|||" not in tokenize(raw, lang), (lang, raw)


def test_a_source_or_hypothesis_longer_than_a_transformers_positions_is_refused_first(tmp_path):
    """The rescorer writes every hypothesis with an <eos>: n tokens take n + 1 positions. Up to
    the limit it scores (a hypothesis of max_positions - 1 tokens, a source of max_positions);
    one more is refused before a model loads, naming the file and the line or sentence, where
    the scorer had stopped mid-stage on the positions' error. A recurrent rescorer has no limit."""
    from s2s.decode.rescore import check_lengths

    m = model("transformer", 3)  # max_positions 32
    limit = m.cfg.max_tokens()
    nbest, source = tmp_path / "test.nbest", tmp_path / "test.tok.en"
    fits = [Candidate(0, " ".join(["w1"] * (limit - 1)), -1.0), Candidate(1, "w2", -1.0)]
    sources = [[4] * limit, [5] * 3]
    check_lengths([[fits[0]], [fits[1]]], sources, configs=[m.cfg], nbest=nbest, source=source)
    got = lstm_scores(m, fits, sources, vocab=VOCAB, src_pad=VOCAB.pad, batch_size=8,
                      device=torch.device("cpu"), desc="")
    assert got == pytest.approx(one_by_one(m, fits, sources), abs=ATOL)

    long = Candidate(1, " ".join(["w3"] * limit), -2.0)
    with pytest.raises(ValueError) as e:
        check_lengths([[fits[0]], [fits[1], long]], sources, configs=[m.cfg], nbest=nbest,
                      source=source)
    assert str(e.value).startswith(
        f"{nbest}: sentence 1: a hypothesis of {limit} tokens ({limit + 1} with the <eos> it is "
        f"scored with): longer than the {limit} positions")
    with pytest.raises(ValueError) as e:
        check_lengths([[fits[0]], [fits[1]]], [[4] * limit, [5] * (limit + 1)],
                      configs=[m.cfg], nbest=nbest, source=source)
    assert str(e.value).startswith(f"{source}:2: {limit + 1} tokens: longer than the {limit} ")
    # the old way: the scorer ran into the positions' error part-way through the stage
    with pytest.raises(ValueError, match="max_positions"):
        lstm_scores(m, [long], sources, vocab=VOCAB, src_pad=VOCAB.pad, batch_size=8,
                    device=torch.device("cpu"), desc="")
    lstm = model("seq2seq_lstm", 3)
    check_lengths([[long]], [[4] * 500], configs=[lstm.cfg, lstm.cfg], nbest=nbest,
                  source=source)


def oracle_stage(tmp_path):
    """The rescore stage `oracle` on two sentences' 3-best lists: (the references, the lists, a
    call that runs the stage and returns what it returns, the stage's folder)."""
    from pathlib import Path

    from s2s.config import load
    from s2s.layout import RescorePaths
    from s2s.stages.rescore import main as rescore_main

    params = load(Path(__file__).parent / "fixtures" / "report" / "params.yaml")
    assert params.data.nbest is None and params.rescore.baseline == "reversed"
    refs = ["le chat noir est assis sur le tapis rouge .",
            "nous avons mangé une très bonne soupe hier soir ."]
    nbest = [
        [("le chien est sur le lit .", -1.0),  # the baseline's best: shares little
         ("le chat noir est assis sur le tapis rouge .", -2.0),  # the reference
         ("le chat est assis sur le tapis .", -3.0)],
        [("nous avons mangé une soupe hier .", -1.5),
         ("ils boivent du café .", -2.5),
         ("nous avons mangé une très bonne soupe hier soir .", -3.5)]]  # the reference, last
    prepared = tmp_path / "prepared"
    prepared.mkdir()
    (prepared / "test.tok.en").write_text("the black cat sat on the red mat .\n"
                                          "we ate a very good soup last night .\n",
                                          encoding="utf-8")
    (prepared / "test.tok.fr").write_text("".join(r + "\n" for r in refs), encoding="utf-8")
    widest = params.systems["reversed"].widest_beam
    listing = tmp_path / "translate" / "reversed" / f"beam{widest}.nbest"
    listing.parent.mkdir(parents=True)
    listing.write_text("".join(f"{i} ||| {h} ||| lstm={s} ||| {s}\n"
                               for i, cands in enumerate(nbest) for h, s in cands),
                       encoding="utf-8")
    out = tmp_path / "rescore" / "oracle"
    paths = RescorePaths(translate=tmp_path / "translate", raw=tmp_path / "raw",
                         prepared=prepared, vocab=tmp_path / "vocab", models=tmp_path / "models",
                         out=out)
    return refs, nbest, lambda: rescore_main(params, "oracle", paths), out


def test_the_oracle_picks_each_sentences_best_bleu_candidate_and_the_baseline_its_first(tmp_path):
    """The rescore stage's `oracle`: per sentence the n-best candidate with the best sentence
    BLEU against the reference (here the reference itself, listed second and third, never
    first), and the baseline's own 1-best (the first candidate, whatever the others score)."""
    refs, nbest, run, out = oracle_stage(tmp_path)
    assert run() == {"sentences": 2, "candidates": 6}
    assert (out / "oracle.tok.fr").read_text(encoding="utf-8").splitlines() == refs
    assert (out / "baseline.tok.fr").read_text(encoding="utf-8").splitlines() == [
        cands[0][0] for cands in nbest]
    assert (out / "oracle.detok.fr").read_text(encoding="utf-8").splitlines() == [
        "le chat noir est assis sur le tapis rouge.",
        "nous avons mangé une très bonne soupe hier soir."]


def test_a_rescore_run_killed_between_its_writes_leaves_no_file_of_an_earlier_run(tmp_path,
                                                                                 monkeypatch):
    """Run by hand (DVC and Snakemake remove a stage's outputs first), a rescore stage removes
    its earlier run's outputs before it writes the first: killed after one write, its folder
    holds that file alone, which the evaluate stage reports absent, never a new `.tok.fr`
    beside an old `.detok.fr` that it would score as one output."""
    from s2s import io

    _, _, run, out = oracle_stage(tmp_path)
    out.mkdir(parents=True)
    for name in ("baseline", "oracle"):
        for kind in ("tok", "detok"):
            (out / f"{name}.{kind}.fr").write_text("an earlier run's\nlines\n", encoding="utf-8")
    writes, write = [], io.atomic_write_lines

    def killed_after_one(path, lines, **kwargs):
        if writes:
            raise KeyboardInterrupt
        writes.append(path)
        return write(path, lines, **kwargs)

    monkeypatch.setattr(io, "atomic_write_lines", killed_after_one)
    with pytest.raises(KeyboardInterrupt):
        run()
    assert sorted(p.name for p in out.iterdir()) == ["baseline.tok.fr"] == [w.name for w in writes]
    assert "earlier" not in (out / "baseline.tok.fr").read_text(encoding="utf-8")
