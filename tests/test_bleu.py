"""BLEU, Figure 3 groups and the evaluate stage, refereed by sacreBLEU's own command line.

Real lines of newstest2014 (the paper's test set) are the references; hypotheses are perturbed
copies (words dropped, swapped, replaced), so every n-gram order has partial matches.
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sacrebleu.metrics.bleu import BLEU
from sacremoses import MosesDetokenizer, MosesTokenizer

from s2s.config import load
from s2s.evaluate import buckets
from s2s.evaluate.bleu import (LineCountError, bleu_from_stats, corpus_bleu_sacre,
                               corpus_bleu_tok, read_lines, score_files_sacre, score_files_tok,
                               sentence_bleu_tok, sentence_stats_tok)
from s2s.stages.evaluate import main as evaluate_main

MIRROR = Path(os.environ.get("S2S_MIRROR", "/work/shared/data"))
TEST_DIR = MIRROR / "wmt14-newstest2014-fren"
SACREBLEU = Path(sys.executable).with_name("sacrebleu")
PARAMS = Path(__file__).parent / "fixtures" / "report" / "params.yaml"
N = 300  # test sentences used (the CLI comparisons take about a second each)

needs_data = pytest.mark.skipif(not (TEST_DIR / "newstest2014-fren.fr").is_file(),
                                reason=f"newstest2014 not found under {MIRROR} (set S2S_MIRROR)")


def perturb(line: str, rng: random.Random) -> str:
    """Up to three edits: drop a word, swap two neighbours, replace a word (or none)."""
    words = line.split()
    for _ in range(rng.randrange(4)):
        if len(words) < 3:
            break
        op = rng.randrange(3)
        i = rng.randrange(len(words) - 1)
        if op == 0:
            del words[i]
        elif op == 1:
            words[i], words[i + 1] = words[i + 1], words[i]
        else:
            words[i] = "xyzzy"
    return " ".join(words)


def write(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def cli_score(ref: Path, hyp: Path, *extra: str) -> float:
    out = subprocess.run([str(SACREBLEU), str(ref), "-i", str(hyp), "-b", "-w", "4", *extra],
                         capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict:
    if not (TEST_DIR / "newstest2014-fren.fr").is_file():
        pytest.skip(f"newstest2014 not found under {MIRROR} (set S2S_MIRROR)")
    d = tmp_path_factory.mktemp("bleu")
    raw_fr = read_lines(TEST_DIR / "newstest2014-fren.fr")[:N]
    raw_en = read_lines(TEST_DIR / "newstest2014-fren.en")[:N]
    tok_fr, tok_en = MosesTokenizer(lang="fr"), MosesTokenizer(lang="en")
    ref_tok = [tok_fr.tokenize(x, escape=False, return_str=True) for x in raw_fr]
    src_tok = [tok_en.tokenize(x, escape=False, return_str=True) for x in raw_en]
    rng = random.Random(1409)
    hyp_tok = [perturb(x, rng) for x in ref_tok]
    hyp_raw = [perturb(x, rng) for x in raw_fr]
    return {"dir": d, "ref_tok": ref_tok, "ref_raw": raw_fr, "src_tok": src_tok,
            "hyp_tok": hyp_tok, "hyp_raw": hyp_raw,
            "ref_tok_path": write(d / "ref.tok.fr", ref_tok),
            "ref_raw_path": write(d / "ref.raw.fr", raw_fr),
            "hyp_tok_path": write(d / "hyp.tok.fr", hyp_tok),
            "hyp_raw_path": write(d / "hyp.detok.fr", hyp_raw)}


# --- corpus BLEU against the sacrebleu CLI -------------------------------------------------------


def test_tokenized_bleu_equals_sacrebleu_cli_tokenize_none(corpus):
    ours = corpus_bleu_tok(corpus["hyp_tok"], corpus["ref_tok"]).score
    cli = cli_score(corpus["ref_tok_path"], corpus["hyp_tok_path"], "--tokenize", "none",
                    "--force")
    assert 30 < ours < 90  # a real partial match, not a degenerate 0 or 100
    assert ours == pytest.approx(cli, abs=5e-5)
    assert score_files_tok(corpus["hyp_tok_path"], corpus["ref_tok_path"]).score == ours


def test_sacrebleu_13a_equals_cli_default_and_has_signature(corpus):
    ours = corpus_bleu_sacre(corpus["hyp_raw"], corpus["ref_raw"])
    cli = cli_score(corpus["ref_raw_path"], corpus["hyp_raw_path"])
    assert ours.score.score == pytest.approx(cli, abs=5e-5)
    assert "tok:13a" in ours.signature and "nrefs:1" in ours.signature
    assert "case:mixed" in ours.signature
    again = score_files_sacre(corpus["hyp_raw_path"], corpus["ref_raw_path"])
    assert (again.score.score, again.signature) == (ours.score.score, ours.signature)


def test_tokenized_bleu_is_cased(corpus):
    lower = [h.lower() for h in corpus["hyp_tok"]]
    assert (corpus_bleu_tok(lower, corpus["ref_tok"]).score
            < corpus_bleu_tok(corpus["hyp_tok"], corpus["ref_tok"]).score - 1.0)


# --- exact values by hand ------------------------------------------------------------------------


def test_hand_computed_bleu():
    # the cat sat on the mat / the cat sat on a mat: 1-4 gram precisions 5/6, 3/5, 2/4, 1/3, BP 1
    hyp, ref = "the cat sat on the mat", "the cat sat on a mat"
    assert corpus_bleu_tok([hyp], [ref]).score == pytest.approx(100 * 12 ** -0.25, abs=1e-9)
    assert sentence_bleu_tok(hyp, ref) == pytest.approx(100 * 12 ** -0.25, abs=1e-9)
    # corpus statistics are summed, not averaged: + "a b" vs "a b c" gives precisions 7/8, 4/6,
    # 2/4, 1/3 and a brevity penalty exp(1 - 9/8)
    expected = 100 * math.exp(1 - 9 / 8) * (7 / 8 * 4 / 6 * 2 / 4 * 1 / 3) ** 0.25
    assert corpus_bleu_tok([hyp, "a b"], [ref, "a b c"]).score == pytest.approx(expected, abs=1e-9)
    assert corpus_bleu_tok([ref], [ref]).score == pytest.approx(100.0)


def test_sentence_bleu_equals_sacrebleu_smoothed_sentence_score(corpus):
    metric = BLEU(tokenize="none", effective_order=True)
    pairs = list(zip(corpus["hyp_tok"], corpus["ref_tok"]))[:120]
    pairs += [("", "a b c"), ("a", "a b c"), ("b a", "a b c"), ("x y z w v", "a b c d e")]
    for hyp, ref in pairs:
        assert sentence_bleu_tok(hyp, ref) == pytest.approx(
            metric.sentence_score(hyp, [ref]).score, abs=1e-9), (hyp, ref)
    # exp smoothing: no 4-gram match still gives a positive score
    assert 0 < sentence_bleu_tok("a b c x d", "a b c d") < 100


def test_per_sentence_statistics_reproduce_corpus_bleu_of_any_subset(corpus):
    hyps, refs = corpus["hyp_tok"], corpus["ref_tok"]
    stats = sentence_stats_tok(hyps, refs)
    assert stats.shape == (N, 10)
    assert bleu_from_stats(stats).score == pytest.approx(corpus_bleu_tok(hyps, refs).score,
                                                         abs=1e-9)
    idx = np.random.default_rng(0).choice(N, size=37, replace=False)
    assert bleu_from_stats(stats[idx]).score == pytest.approx(
        corpus_bleu_tok([hyps[i] for i in idx], [refs[i] for i in idx]).score, abs=1e-9)


# --- refusing to score a truncated output --------------------------------------------------------


def test_line_count_mismatch_names_both_files_and_counts(tmp_path):
    ref = write(tmp_path / "ref.tok.fr", ["a b c", "d e f", "g h i"])
    hyp = write(tmp_path / "beam12.tok.fr", ["a b c", "d e f"])
    with pytest.raises(LineCountError) as err:
        score_files_tok(hyp, ref)
    msg = str(err.value)
    assert str(hyp) in msg and str(ref) in msg and "2 lines" in msg and "3" in msg
    with pytest.raises(LineCountError, match="beam12.tok.fr"):
        score_files_sacre(hyp, ref)


def test_read_lines_splits_on_newline_only(tmp_path):
    # U+2028 occurs in news text; splitlines() would make two lines of it, sacreBLEU does not
    p = tmp_path / "x.fr"
    p.write_text("un\u2028deux\ntrois  \n", encoding="utf-8")
    assert read_lines(p) == ["un\u2028deux", "trois"]


# --- Figure 3 groups -----------------------------------------------------------------------------


def test_sparse_groups_are_merged_into_neighbours():
    lengths = np.array([1] * 5 + [10] * 50 + [20] * 50 + [100] * 3)
    g = buckets.length_groups(lengths, edges=(4, 12, 22, 35), min_group=20)
    t = g.table()
    assert t[["label", "lo", "hi", "sentences"]].values.tolist() == [
        ["1-10", 1, 10, 55], ["20-100", 20, 100, 53]]
    # a test set smaller than min_group is one group
    assert buckets.length_groups(lengths[:7], edges=(4,), min_group=20).table()[
        "sentences"].tolist() == [7]


def test_ranks_from_vocabulary(tmp_path):
    vocab = write(tmp_path / "en.tsv", ["<pad>\t0", "<unk>\t0", "<bos>\t0", "<eos>\t0",
                                        "the\t10", "cat\t5", "sat\t2"])
    ranks = buckets.load_ranks(vocab)
    assert ranks == {"the": 1, "cat": 2, "sat": 3}
    avg = buckets.average_ranks(["the cat dog", "sat", ""], ranks)
    assert avg.tolist() == [pytest.approx((1 + 2 + 4) / 3), 3.0, 0.0]  # unknown word: V + 1 = 4


@needs_data
def test_groups_cover_every_sentence_once_and_perfect_bleu_is_100():
    raw = read_lines(TEST_DIR / "newstest2014-fren.en")  # all 3003 sentences
    ref = read_lines(TEST_DIR / "newstest2014-fren.fr")
    counts: dict[str, int] = {}
    for line in raw:
        for w in line.split():
            counts[w] = counts.get(w, 0) + 1
    ranks = {w: i for i, (w, _) in enumerate(sorted(counts.items(), key=lambda x: -x[1]), 1)}
    for g in buckets.figure3_groupings(raw, ranks, edges=(4, 7, 8, 12, 17, 22, 28, 35, 79),
                                       rarity=8, min_group=100):
        sizes = [len(m) for m in g.members]
        assert min(sizes) >= 100 and len(sizes) >= 4, (g.axis, sizes)
        assert np.array_equal(np.sort(np.concatenate(g.members)), np.arange(len(raw)))
        for a, b in zip(g.members, g.members[1:]):  # contiguous, ordered, ties never split
            assert g.values[a].max() < g.values[b].min()
        table = buckets.group_bleu(g, ref, ref)
        assert table["sentences"].sum() == len(raw)
        assert table["bleu"].tolist() == pytest.approx([100.0] * len(table))


# --- the evaluate stage end to end ---------------------------------------------------------------


def test_evaluate_stage_writes_bleu_json_and_groups(corpus, tmp_path):
    params = load(PARAMS)
    prepared, vocab, translate = tmp_path / "prepared", tmp_path / "vocab", tmp_path / "translate"
    write(prepared / "test.tok.fr", corpus["ref_tok"])
    write(prepared / "test.raw.fr", corpus["ref_raw"])
    write(prepared / "test.tok.en", corpus["src_tok"])
    counts: dict[str, int] = {}
    for line in corpus["src_tok"]:
        for w in line.split():
            counts[w] = counts.get(w, 0) + 1
    words = sorted(counts.items(), key=lambda x: (-x[1], x[0]))[:500]
    write(vocab / "en.tsv", [f"{s}\t0" for s in ("<pad>", "<unk>", "<bos>", "<eos>")]
          + [f"{w}\t{c}" for w, c in words])
    detok = MosesDetokenizer(lang="fr")
    rng = random.Random(7)
    hyps = {}
    for system, beam in [("forward", 1), ("forward", 12), ("reversed", 1), ("reversed", 12)]:
        tok = [perturb(x, rng) for x in corpus["ref_tok"]]
        hyps[system, beam] = tok
        write(translate / system / f"beam{beam}.tok.fr", tok)
        write(translate / system / f"beam{beam}.detok.fr", [detok.detokenize(x.split())
                                                            for x in tok])
    # ensemble2 was never decoded and there is no rescore directory: both reported absent
    out = tmp_path / "metrics" / "bleu.json"
    groups_out = tmp_path / "evaluate" / "figure3.csv"
    kw = dict(translate_dir=translate, rescore_dir=tmp_path / "rescore", prepared_dir=prepared,
              vocab_dir=vocab, metrics_out=out, groups_out=groups_out)
    metrics = evaluate_main(params, **kw)
    assert json.loads(out.read_text()) == metrics
    assert metrics["test_sentences"] == N
    for (system, beam), tok in hyps.items():
        entry = metrics["translate"][system][str(beam)]
        assert entry["bleu_tok"] == pytest.approx(corpus_bleu_tok(tok, corpus["ref_tok"]).score,
                                                  abs=1e-4)
        detok_lines = read_lines(translate / system / f"beam{beam}.detok.fr")
        assert entry["bleu_sacre"] == pytest.approx(
            corpus_bleu_sacre(detok_lines, corpus["ref_raw"]).score.score, abs=1e-4)
        assert "tok:13a" in entry["sacre_signature"] and entry["sentences"] == N
    assert metrics["translate"]["ensemble2"]["12"]["absent"] is True
    assert set(metrics["rescore"]) == {"forward", "reversed", "baseline", "oracle"}
    assert all(e["absent"] for e in metrics["rescore"].values())

    groups = pd.read_csv(groups_out, dtype={"beam": str}, keep_default_na=False)
    assert list(groups.columns) == ["system", "beam", "axis", "label", "lo", "hi", "sentences",
                                    "mean", "bleu"]
    for (system, beam, axis), sel in groups.groupby(["system", "beam", "axis"]):
        assert sel["sentences"].sum() == N and sel["sentences"].min() >= params.evaluate.min_group
    # every length group's BLEU is the corpus BLEU of exactly the sentences in its range
    sel = groups[(groups.system == "reversed") & (groups.beam == "12") & (groups.axis == "length")]
    lengths = buckets.source_lengths(corpus["src_tok"])
    for _, g in sel.iterrows():
        idx = np.flatnonzero((lengths >= g["lo"]) & (lengths <= g["hi"]))
        assert len(idx) == g["sentences"]
        assert g["bleu"] == pytest.approx(corpus_bleu_tok(
            [hyps["reversed", 12][i] for i in idx], [corpus["ref_tok"][i] for i in idx]).score,
            abs=1e-9)

    # rescoring outputs in dvc.yaml's layout: one folder per rescore stage; baseline and oracle
    # both come from the oracle stage; 'reversed' was not run
    rescore = tmp_path / "rescore"
    for folder, name in (("forward", "forward"), ("oracle", "baseline"), ("oracle", "oracle")):
        write(rescore / folder / f"{name}.tok.fr", hyps["forward", 12])
        write(rescore / folder / f"{name}.detok.fr",
              read_lines(translate / "forward" / "beam12.detok.fr"))
    metrics = evaluate_main(params, **{**kw, "rescore_dir": rescore})
    for name in ("forward", "baseline", "oracle"):
        assert metrics["rescore"][name]["bleu_tok"] == metrics["translate"]["forward"]["12"][
            "bleu_tok"]
    assert metrics["rescore"]["reversed"]["absent"] is True
    groups = pd.read_csv(groups_out, dtype={"beam": str}, keep_default_na=False)
    assert {"rescore/forward", "rescore/baseline", "rescore/oracle"} <= set(groups.system)

    # a truncated output is an error naming the file, never a score
    write(translate / "forward" / "beam1.tok.fr", hyps["forward", 1][:-1])
    with pytest.raises(LineCountError, match=r"forward/beam1\.tok\.fr has 299 lines"):
        evaluate_main(params, **kw)


def test_length_drop_is_short_minus_long_group_bleu_with_a_paired_interval():
    import numpy as np

    from s2s.evaluate import buckets
    from s2s.evaluate.bleu import bleu_from_stats, sentence_stats_tok

    rng = np.random.default_rng(0)
    vocab = [f"w{i}" for i in range(30)]
    refs = [" ".join(rng.choice(vocab, n)) for n in [3, 4, 3, 5, 20, 25, 22, 30]]
    good = list(refs)  # perfect everywhere
    fading = refs[:4] + [" ".join(r.split()[: len(r.split()) // 2]) for r in refs[4:]]
    lengths = np.array([len(r.split()) for r in refs])
    g = buckets.length_groups(lengths, edges=[5], min_group=1)
    stats = {(s, "12"): sentence_stats_tok(h, refs) for s, h in (("good", good),
                                                                  ("fading", fading))}
    d = buckets.length_drop(g, stats, ("good", "12"), samples=200).set_index("system")
    short, long_ = g.members[0], g.members[-1]
    want = (bleu_from_stats(stats[("fading", "12")][short]).score
            - bleu_from_stats(stats[("fading", "12")][long_]).score)
    assert d.loc["fading", "drop"] == pytest.approx(want) and want > 10
    assert d.loc["good", "drop"] == pytest.approx(0.0)
    assert d.loc["fading", "drop_minus_reference"] == pytest.approx(want)
    assert d.loc["fading", "diff_lo"] <= want <= d.loc["fading", "diff_hi"]
    assert d.loc["good", "diff_lo"] == d.loc["good", "diff_hi"] == 0.0  # paired: no spread
