"""BLEU, Figure 3 groups and the evaluate stage, refereed by sacreBLEU's own command line and by
multi-bleu.perl's own output.

Real lines of newstest2014 (the paper's test set) are the references; hypotheses are perturbed
copies (words dropped, swapped, replaced), so every n-gram order has partial matches.

The tokenized BLEU is multi-bleu.perl's number (no smoothing). multi-bleu.perl itself is not in
this repository (its licence keeps it out of our commits); its printed outputs on real files are
stored below as golden values (MULTI_BLEU_GOLDEN), a plain-Python transcription of its counts is
compared on random corpora, and with ``S2S_MULTI_BLEU=/path/to/multi-bleu.perl`` (Moses'
scripts/generic/multi-bleu.perl; needs perl) the script is also run live on the same files.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import re
import shutil
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
from s2s.layout import EvaluatePaths
from s2s.stages.evaluate import main as evaluate_main

MIRROR = Path(os.environ.get("S2S_MIRROR", "/work/shared/data"))
TEST_DIR = MIRROR / "wmt14-newstest2014-fren"
SACREBLEU = Path(sys.executable).with_name("sacrebleu")
PARAMS = Path(__file__).parent / "fixtures" / "report" / "params.yaml"
BLEU_FIXTURES = Path(__file__).parent / "fixtures" / "bleu"
MULTI_BLEU = os.environ.get("S2S_MULTI_BLEU", "")  # path to multi-bleu.perl, for the live test
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
    assert ours == pytest.approx(cli, abs=5e-5)  # every order matches: smoothing changes nothing
    # the exact referee: sacreBLEU unsmoothed, as multi-bleu.perl
    unsmoothed = cli_score(corpus["ref_tok_path"], corpus["hyp_tok_path"], "--tokenize", "none",
                           "--smooth-method", "none", "--force")
    assert ours == pytest.approx(unsmoothed, abs=5e-5)
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


# --- multi-bleu.perl: the paper's scorer, unsmoothed ---------------------------------------------
#
# The references are the first 500 lines of newstest2014's French side, normalised and
# Moses-tokenized as `prepare` does (s2s.data.text.normalize then tokenize), stored in
# tests/fixtures/bleu/ with the English side (see the README there). The hypotheses are derived
# from them below, deterministically.

FILLER = "@@@"  # a token in no reference line


def _drop_every_3rd(words: list[str], rng: random.Random) -> list[str]:
    return [w for i, w in enumerate(words) if i % 3 != 2]


def _drop_one(words: list[str], rng: random.Random) -> list[str]:
    # a realistic partial match: every n-gram order matches, as in a real translation
    if len(words) < 2:
        return words
    i = int(rng.random() * len(words))
    return words[:i] + words[i + 1:]


def _shuffle(words: list[str], rng: random.Random) -> list[str]:
    # sorted by random() keys: Random.random()'s sequence for a seed is guaranteed across
    # Python versions, Random.shuffle's is not
    keys = [rng.random() for _ in words]
    return [w for _, w in sorted(zip(keys, words))]


def _filler_between(words: list[str], rng: random.Random) -> list[str]:
    # every unigram of the reference, no 2-gram of it
    return [x for w in words for x in (w, FILLER)][:-1]


def _filler_every_4th(words: list[str], rng: random.Random) -> list[str]:
    # 1-, 2- and 3-grams of the reference, no 4-gram: every 4 consecutive tokens hold a filler
    return [x for i, w in enumerate(words) for x in ((w, FILLER) if i % 3 == 2 else (w,))]


def _first_half(words: list[str], rng: random.Random) -> list[str]:
    return words[:(len(words) + 1) // 2]


DERIVED = {"identity": lambda w, rng: w, "drop3": _drop_every_3rd, "drop1": _drop_one,
           "shuffle": _shuffle,
           "no2gram": _filler_between, "no4gram": _filler_every_4th, "half": _first_half}


def multi_bleu_files() -> dict[str, list[str]]:
    """name -> lines: the reference ("ref") and every hypothesis scored by MULTI_BLEU_GOLDEN."""
    ref = read_lines(BLEU_FIXTURES / "newstest2014.head500.tok.fr")
    files = {"ref": ref}
    for name, derive in DERIVED.items():
        rng = random.Random(2014)
        files[name] = [" ".join(derive(line.split(), rng)) for line in ref]
    files["blank4"] = ["" if i % 4 == 3 else line for i, line in enumerate(ref)]  # empty lines
    files["english"] = read_lines(BLEU_FIXTURES / "newstest2014.head500.tok.en")  # wrong language
    return files


# multi-bleu.perl's output on those files, verbatim. To reproduce (perl 5.36, Moses'
# scripts/generic/multi-bleu.perl saved outside the repository at /tmp/multi-bleu.perl):
#   python -c "import sys; sys.path.insert(0, 'tests'); import test_bleu as t; import pathlib
#   [pathlib.Path(f'/tmp/mb/{k}.tok.fr').write_text(''.join(x + '\n' for x in v))
#    for k, v in t.multi_bleu_files().items()]"     (after mkdir /tmp/mb)
#   for h in identity drop3 drop1 shuffle no2gram no4gram half blank4 english; do
#     perl /tmp/multi-bleu.perl /tmp/mb/ref.tok.fr < /tmp/mb/$h.tok.fr; done
# or run this file with S2S_MULTI_BLEU=/tmp/multi-bleu.perl (test_multi_bleu_perl_live).
MULTI_BLEU_GOLDEN = {
    "identity":
        "BLEU = 100.00, 100.0/100.0/100.0/100.0 (BP=1.000, ratio=1.000, hyp_len=12795, ref_len=12795)",
    "drop3":
        "BLEU = 0.00, 100.0/52.1/0.0/0.0 (BP=0.625, ratio=0.680, hyp_len=8700, ref_len=12795)",
    "drop1":
        "BLEU = 90.62, 100.0/96.2/92.6/89.1 (BP=0.960, ratio=0.961, hyp_len=12295, ref_len=12795)",
    "shuffle":
        "BLEU = 1.63, 100.0/5.7/0.3/0.0 (BP=1.000, ratio=1.000, hyp_len=12795, ref_len=12795)",
    "no2gram":
        "BLEU = 0.00, 51.0/0.0/0.0/0.0 (BP=1.000, ratio=1.961, hyp_len=25090, ref_len=12795)",
    "no4gram":
        "BLEU = 0.00, 75.8/51.0/25.8/0.0 (BP=1.000, ratio=1.320, hyp_len=16890, ref_len=12795)",
    "half":
        "BLEU = 38.29, 100.0/100.0/100.0/100.0 (BP=0.383, ratio=0.510, hyp_len=6528, ref_len=12795)",
    "blank4":
        "BLEU = 72.27, 100.0/100.0/100.0/100.0 (BP=0.723, ratio=0.755, hyp_len=9658, ref_len=12795)",
    "english":
        "BLEU = 2.18, 18.3/3.6/1.3/0.5 (BP=0.868, ratio=0.876, hyp_len=11211, ref_len=12795)",
}


def multi_bleu_line(score) -> str:
    """A BLEUScore printed the way multi-bleu.perl prints its result."""
    p = score.precisions
    return (f"BLEU = {score.score:.2f}, {p[0]:.1f}/{p[1]:.1f}/{p[2]:.1f}/{p[3]:.1f} "
            f"(BP={score.bp:.3f}, ratio={score.sys_len / score.ref_len:.3f}, "
            f"hyp_len={score.sys_len}, ref_len={score.ref_len})")


def multi_bleu_counts(hyps: list[str], refs: list[str]) -> tuple[float, list[float], float, int,
                                                                   int]:
    """multi-bleu.perl transcribed statement by statement, one reference per line, no sacreBLEU:
    (BLEU 0-100, precisions 0-100, BP, hyp_len, ref_len)."""
    def split(line: str) -> list[str]:  # perl's split: ASCII whitespace runs, no empty fields
        return re.findall(r"[^ \t\n\r\f\v]+", line)

    def ngrams(words: list[str], n: int) -> dict[tuple, int]:  # perl's "$n w1 w2 ..." keys
        out: dict[tuple, int] = {}
        for start in range(len(words) - n + 1):
            key = (n, *words[start:start + n])
            out[key] = out.get(key, 0) + 1
        return out

    correct, total = [0] * 5, [0] * 5
    length_translation = length_reference = 0
    for hyp, ref in zip(hyps, refs):
        words, ref_words = split(hyp), split(ref)
        ref_ngram: dict[tuple, int] = {}
        for n in range(1, 5):  # max count over references, of which there is one
            for key, c in ngrams(ref_words, n).items():
                if ref_ngram.get(key, 0) < c:
                    ref_ngram[key] = c
        length_translation += len(words)
        length_reference += len(ref_words)  # the closest reference's length
        for n in range(1, 5):
            for key, c in ngrams(words, n).items():
                total[n] += c
                if key in ref_ngram:
                    correct[n] += min(c, ref_ngram[key])
    bleu_n = [correct[n] / total[n] if total[n] else 0.0 for n in range(1, 5)]
    if length_reference == 0:
        # perl prints "BLEU = 0, 0/0/0/0 (BP=0, ratio=0, hyp_len=0, ref_len=0)" and exits 1
        return 0.0, [0.0] * 4, 0.0, length_translation, 0
    bp = 1.0
    if length_translation < length_reference:  # (perl dies dividing by 0 when it is 0)
        bp = math.exp(1 - length_reference / length_translation) if length_translation else 0.0

    def my_log(x: float) -> float:
        return math.log(x) if x else -9999999999

    bleu = bp * math.exp(sum(my_log(p) for p in bleu_n) / 4)
    return 100 * bleu, [100 * p for p in bleu_n], bp, length_translation, length_reference


@pytest.mark.parametrize("name", list(MULTI_BLEU_GOLDEN))
def test_tokenized_bleu_prints_multi_bleu_perl_output(name):
    files = multi_bleu_files()
    ours = corpus_bleu_tok(files[name], files["ref"])
    assert multi_bleu_line(ours) == MULTI_BLEU_GOLDEN[name]
    score, precisions, bp, hyp_len, ref_len = multi_bleu_counts(files[name], files["ref"])
    assert ours.score == pytest.approx(score, abs=1e-9)
    assert ours.precisions == pytest.approx(precisions, abs=1e-9)
    assert (ours.bp, ours.sys_len, ours.ref_len) == (pytest.approx(bp, abs=1e-12), hyp_len,
                                                     ref_len)
    # per-sentence statistics (Figure 3 groups) give the same unsmoothed number
    assert bleu_from_stats(sentence_stats_tok(files[name], files["ref"])).score == pytest.approx(
        ours.score, abs=1e-9)


@needs_data
def test_bleu_fixtures_are_the_pipelines_tokenization():
    from s2s.data.text import normalize, tokenize

    for lang in ("fr", "en"):
        raw = read_lines(TEST_DIR / f"newstest2014-fren.{lang}")[:500]
        assert read_lines(BLEU_FIXTURES / f"newstest2014.head500.tok.{lang}") == [
            tokenize(normalize(x), lang) for x in raw]


def test_multi_bleu_golden_cases_cover_what_they_claim():
    files = multi_bleu_files()
    assert len(files["ref"]) == 500 and all(len(v) == 500 for v in files.values())
    assert FILLER not in {w for line in files["ref"] for w in line.split()}
    assert MULTI_BLEU_GOLDEN["identity"].startswith("BLEU = 100.00,")
    for name in ("no2gram", "no4gram"):  # multi-bleu prints 0.00 although unigrams match
        assert MULTI_BLEU_GOLDEN[name].startswith("BLEU = 0.00, ")
        assert corpus_bleu_tok(files[name], files["ref"]).score == 0.0
        # ... where sacreBLEU's default exp smoothing would have given a positive score
        assert BLEU(tokenize="none", force=True).corpus_score(files[name],
                                                              [files["ref"]]).score > 0
    assert "/0.0 (BP=" in MULTI_BLEU_GOLDEN["no4gram"]  # 4-gram precision 0, the others not
    assert "BP=1.000" not in MULTI_BLEU_GOLDEN["half"] + MULTI_BLEU_GOLDEN["blank4"]
    assert sum(not h for h in files["blank4"]) == 125


def test_multi_bleu_counts_equal_corpus_bleu_tok_on_random_corpora():
    rng = random.Random(16)
    zero_with_matches = positive = short = 0
    for trial in range(300):
        vocab = [f"w{i}" for i in range(rng.choice((2, 4, 8, 30)))]
        n_lines = rng.randint(1, 25)
        refs = [" ".join(rng.choices(vocab, k=rng.randint(0, 12))) for _ in range(n_lines)]
        hyps = []
        for ref in refs:
            words = ref.split() if rng.random() < 0.5 else rng.choices(vocab, k=rng.randint(0, 12))
            words = [w for w in words if rng.random() < 0.85]  # drop some words
            if words and rng.random() < 0.3:
                words[rng.randrange(len(words))] = rng.choice(vocab)
            hyps.append(" ".join(words))
        if not any(h.split() for h in hyps):
            continue  # multi-bleu.perl divides by zero there (tested apart: we return 0)
        ours = corpus_bleu_tok(hyps, refs)
        score, precisions, bp, hyp_len, ref_len = multi_bleu_counts(hyps, refs)
        assert ours.score == pytest.approx(score, abs=1e-9), (trial, hyps, refs)
        assert (ours.sys_len, ours.ref_len) == (hyp_len, ref_len)
        if ref_len:
            assert ours.precisions == pytest.approx(precisions, abs=1e-9)
            assert ours.bp == pytest.approx(bp, abs=1e-12)
        zero_with_matches += score == 0 and precisions[0] > 0
        positive += score > 0
        short += hyp_len < ref_len and score > 0
    assert min(zero_with_matches, positive, short) >= 20, (zero_with_matches, positive, short)


def test_unsmoothed_edge_cases():
    # no 4-gram match: 0 (multi-bleu.perl prints 0.00), sacreBLEU's exp smoothing would not
    assert corpus_bleu_tok(["a b c x d"], ["a b c d"]).score == 0.0
    assert BLEU(tokenize="none", force=True).corpus_score(["a b c x d"], [["a b c d"]]).score > 0
    # no 4-gram at all (every line shorter than 4 words): 0 as well
    assert corpus_bleu_tok(["a b c", "d e"], ["a b c", "d e"]).score == 0.0
    # empty hypothesis lines count their reference's length, and nothing else
    score = corpus_bleu_tok(["", "a b c d"], ["a b", "a b c d"])
    assert score.score == pytest.approx(100 * math.exp(1 - 6 / 4), abs=1e-9)
    assert score.precisions == [100.0] * 4
    # where multi-bleu.perl cannot score: all hypotheses empty (it divides by zero), no
    # reference words (it prints "BLEU = 0" and exits 1)
    assert corpus_bleu_tok(["", ""], ["a b c d", "e"]).score == 0.0
    assert corpus_bleu_tok(["a b c d"], [""]).score == 0.0
    for hyps, refs in ((["", "a b c d"], ["a b", "a b c d"]), (["a b c x d"], ["a b c d"])):
        assert corpus_bleu_tok(hyps, refs).score == pytest.approx(
            multi_bleu_counts(hyps, refs)[0], abs=1e-9)


@pytest.mark.skipif(not MULTI_BLEU, reason="set S2S_MULTI_BLEU to multi-bleu.perl to run it live")
@pytest.mark.skipif(shutil.which("perl") is None, reason="no perl")
def test_multi_bleu_perl_live(tmp_path):
    """multi-bleu.perl run now (``perl $S2S_MULTI_BLEU REF < HYP``) on the golden files and on a
    few random corpora: it prints what corpus_bleu_tok gives and what MULTI_BLEU_GOLDEN says."""
    def perl(hyps: list[str], refs: list[str]) -> str:
        ref = write(tmp_path / "ref", refs)
        hyp = write(tmp_path / "hyp", hyps)
        with hyp.open("rb") as stdin:
            out = subprocess.run(["perl", MULTI_BLEU, str(ref)], stdin=stdin,
                                 capture_output=True, check=True)
        return out.stdout.decode("utf-8").strip()

    files = multi_bleu_files()
    for name, golden in MULTI_BLEU_GOLDEN.items():
        printed = perl(files[name], files["ref"])
        assert printed == golden, name
        assert printed == multi_bleu_line(corpus_bleu_tok(files[name], files["ref"])), name
    rng = random.Random(5)
    for _ in range(20):
        refs = [" ".join(rng.choices("abcdef", k=rng.randint(1, 15))) for _ in range(30)]
        hyps = [" ".join(rng.choices("abcdef", k=rng.randint(1, 15))) for _ in range(30)]
        assert perl(hyps, refs) == multi_bleu_line(corpus_bleu_tok(hyps, refs))


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
    # a group's x position in Figure 3 is the mean value of its sentences, not the median (10, 20)
    assert t["mean"].tolist() == pytest.approx([(5 * 1 + 50 * 10) / 55, (50 * 20 + 3 * 100) / 53],
                                               abs=1e-12)
    # a test set smaller than min_group is one group
    assert buckets.length_groups(lengths[:7], edges=(4,), min_group=20).table()[
        "sentences"].tolist() == [7]


def test_rarity_groups_are_cut_at_the_k_over_groups_quantiles():
    """`groups` quantile groups: the cuts are the 1/g, ..., (g-1)/g quantiles, so 100 distinct
    values in 4 groups give 25 each (cuts at 1/5, 2/5, 3/5 would give 20, 20, 20, 40)."""
    g = buckets.rarity_groups(np.arange(100.0), groups=4, min_group=1)
    assert [m.tolist() for m in g.members] == [list(range(k, k + 25)) for k in (0, 25, 50, 75)]
    t = g.table()
    assert t[["lo", "hi", "sentences"]].values.tolist() == [
        [0, 24, 25], [25, 49, 25], [50, 74, 25], [75, 99, 25]]
    assert t["mean"].tolist() == pytest.approx([12.0, 37.0, 62.0, 87.0], abs=1e-12)
    # 3 groups of 99 values: 33 each
    assert [len(m) for m in buckets.rarity_groups(np.arange(99.0), groups=3,
                                                  min_group=1).members] == [33, 33, 33]


def test_rarity_labels_never_show_one_bound_in_two_neighbouring_groups():
    """The published run labelled two groups "195-286" and "286-409" (bounds 285.89 and 286.48)."""
    values = np.array([194.75] * 10 + [285.89] * 10 + [286.48] * 10 + [408.78] * 10)
    g = buckets.rarity_groups(values, groups=2, min_group=1)
    assert g.table()["label"].tolist() == ["194.8-285.9", "286.5-408.8"]
    # bounds equal at one decimal get two
    values = np.array([100.0] * 10 + [285.91] * 10 + [285.94] * 10 + [300.0] * 10)
    assert buckets.rarity_groups(values, groups=2, min_group=1).table()["label"].tolist() == [
        "100.00-285.91", "285.94-300.00"]
    # a group of one value shows it once
    assert buckets.rarity_groups(np.array([3.0] * 5 + [7.3] * 5), groups=2,
                                 min_group=1).table()["label"].tolist() == ["3.0", "7.3"]


def test_ranks_from_vocabulary(tmp_path):
    vocab = write(tmp_path / "en.tsv", ["<pad>\t0", "<unk>\t0", "<bos>\t0", "<eos>\t0",
                                        "the\t10", "cat\t5", "sat\t2"])
    ranks = buckets.load_ranks(vocab)
    assert ranks == {"the": 1, "cat": 2, "sat": 3}
    avg = buckets.average_ranks(["the cat dog", "sat", ""], ranks)
    assert avg.tolist() == [pytest.approx((1 + 2 + 4) / 3), 3.0, 0.0]  # unknown word: V + 1 = 4


def test_a_vocabulary_not_utf8_or_without_counts_is_refused_naming_its_line(tmp_path):
    """The evaluate stage reads the training vocabulary only here: a damaged one is one line
    naming the file and the line, not a bare codec error."""
    vocab = tmp_path / "en.tsv"
    vocab.write_bytes(b"<unk>\t0\nthe\t10\nca\xfe\t3\n")
    with pytest.raises(ValueError, match=rf"^{re.escape(str(vocab))}:3: not valid UTF-8"):
        buckets.load_ranks(vocab)
    vocab.write_text("the\t10\ncat 5\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{re.escape(str(vocab))}:2: expected 'word<TAB>count'"):
        buckets.load_ranks(vocab)


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
    paths = EvaluatePaths(translate=translate, rescore=tmp_path / "rescore", prepared=prepared,
                          vocab=vocab, metrics=out, groups=groups_out)
    metrics = evaluate_main(params, paths)
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
    # length_drop.csv: each output's BLEU on the shortest length group minus on the longest (the
    # first and last rows of its length groups above), against report.figure3_system's
    drop = pd.read_csv(paths.length_drop, dtype={"beam": str}, keep_default_na=False)
    assert sorted(zip(drop.system, drop.beam)) == [("forward", "1"), ("forward", "12"),
                                                   ("reversed", "1"), ("reversed", "12")]
    first, last = sel.iloc[0], sel.iloc[-1]
    short = np.flatnonzero(lengths <= first["hi"])
    long_ = np.flatnonzero(lengths >= last["lo"])
    assert len(short) == first["sentences"] and len(long_) == last["sentences"]
    for _, row in drop.iterrows():
        tok = hyps[row["system"], int(row["beam"])]
        want_short = corpus_bleu_tok([tok[i] for i in short],
                                     [corpus["ref_tok"][i] for i in short]).score
        want_long = corpus_bleu_tok([tok[i] for i in long_],
                                    [corpus["ref_tok"][i] for i in long_]).score
        assert (row["short_label"], row["long_label"]) == (first["label"], last["label"])
        assert (row["short_bleu"], row["long_bleu"]) == pytest.approx((want_short, want_long),
                                                                      abs=1e-9)
        assert row["drop"] == pytest.approx(want_short - want_long, abs=1e-9)
        assert row["drop_lo"] <= row["drop_hi"] and row["reference"] == "reversed beam 12"
    assert drop.set_index(["system", "beam"]).loc[("reversed", "12"), "drop_minus_reference"] \
        == 0.0

    # rescoring outputs in dvc.yaml's layout: one folder per rescore stage; baseline and oracle
    # both come from the oracle stage; 'reversed' was not run
    rescore = tmp_path / "rescore"
    for folder, name in (("forward", "forward"), ("oracle", "baseline"), ("oracle", "oracle")):
        write(rescore / folder / f"{name}.tok.fr", hyps["forward", 12])
        write(rescore / folder / f"{name}.detok.fr",
              read_lines(translate / "forward" / "beam12.detok.fr"))
    metrics = evaluate_main(params, dataclasses.replace(paths, rescore=rescore))
    for name in ("forward", "baseline", "oracle"):
        assert metrics["rescore"][name]["bleu_tok"] == metrics["translate"]["forward"]["12"][
            "bleu_tok"]
    assert metrics["rescore"]["reversed"]["absent"] is True
    groups = pd.read_csv(groups_out, dtype={"beam": str}, keep_default_na=False)
    assert {"rescore/forward", "rescore/baseline", "rescore/oracle"} <= set(groups.system)

    # a truncated output is an error naming the file, never a score
    write(translate / "forward" / "beam1.tok.fr", hyps["forward", 1][:-1])
    with pytest.raises(LineCountError, match=r"forward/beam1\.tok\.fr has 299 lines"):
        evaluate_main(params, paths)


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
    # the intervals, recomputed: the same 200 draws (seed 12345) for both outputs, each draw's
    # difference of drops, then its 2.5th and 97.5th percentiles
    draws = np.random.default_rng(12345)
    draws = [(draws.choice(short, len(short)), draws.choice(long_, len(long_)))
             for _ in range(200)]

    def boot(st):
        return np.array([bleu_from_stats(st[a]).score - bleu_from_stats(st[b]).score
                         for a, b in draws])

    fade, ref = boot(stats[("fading", "12")]), boot(stats[("good", "12")])
    want_lo, want_hi = np.percentile(fade, [2.5, 97.5])
    assert (d.loc["fading", "drop_lo"], d.loc["fading", "drop_hi"]) == pytest.approx(
        (want_lo, want_hi), abs=1e-9)
    want_lo, want_hi = np.percentile(fade - ref, [2.5, 97.5])
    assert (d.loc["fading", "diff_lo"], d.loc["fading", "diff_hi"]) == pytest.approx(
        (want_lo, want_hi), abs=1e-9)
    # against a reference whose drop varies too, the pairing shows: each draw's difference, not
    # the difference of the two sorted lists
    other = [" ".join(r.split()[1:]) for r in refs[:4]] + [
        " ".join(r.split()[: 2 * len(r.split()) // 3]) for r in refs[4:]]
    stats[("other", "12")] = sentence_stats_tok(other, refs)
    d = buckets.length_drop(g, stats, ("fading", "12"), samples=200).set_index("system")
    paired = boot(stats[("other", "12")]) - fade
    assert not np.allclose(np.sort(paired), np.sort(boot(stats[("other", "12")])) - np.sort(fade))
    assert (d.loc["other", "diff_lo"], d.loc["other", "diff_hi"]) == pytest.approx(
        tuple(np.percentile(paired, [2.5, 97.5])), abs=1e-9)


def test_an_edge_length_is_in_the_group_below_and_a_sparse_group_joins_its_smaller_neighbour():
    """Groups are (-inf, e1], (e1, e2], ...: a sentence of exactly e1 words is in the first. A
    group short of min_group merges with the smaller of its two neighbours."""
    import numpy as np

    g = buckets.length_groups(np.array([4] * 30 + [5] * 30), edges=[4], min_group=1)
    assert [len(m) for m in g.members] == [30, 30]
    assert list(g.table()["label"]) == ["4", "5"]
    assert buckets._merge_sparse([50, 5, 30], 20) == [(0, 0), (1, 2)]
    assert buckets._merge_sparse([30, 5, 50], 20) == [(0, 1), (2, 2)]
    assert buckets._merge_sparse([5, 50, 5, 30], 20) == [(0, 1), (2, 3)]
    # ties: the leftmost of the sparsest groups merges first; between equal neighbours, the left
    assert buckets._merge_sparse([5, 30, 5, 30], 20) == [(0, 1), (2, 3)]
    assert buckets._merge_sparse([30, 5, 30], 20) == [(0, 1), (2, 2)]


def test_a_detokenised_hypothesis_with_unk_is_tokenised_back_to_its_tokens():
    """Moses split <unk> into `< unk >`: scoring a system's .detok file gave up to 1 BLEU less
    than its .tok file (published ensemble, beam 1)."""
    from s2s.data.text import detokenize
    from s2s.evaluate.significance import tokenize_lines

    tokens = ["Un <unk> regarde l' eau .", "<unk> , <unk> et un chien .", "Deux <unk>-là ."]
    detok = [detokenize(t, "fr") for t in tokens]
    assert detok[1] == "<unk>, <unk> et un chien."
    assert tokenize_lines(detok) == tokens
    # a stand-in of our own never shows, and text without <unk> is tokenised as prepare does
    assert tokenize_lines(["Un homme regarde l'eau."]) == ["Un homme regarde l' eau ."]


def test_the_difference_interval_is_the_2_5_and_97_5_percentiles_of_paired_resamples(monkeypatch):
    """Each resample's difference is system - baseline on the same sentences (the pairing), and
    the interval cuts 2.5% off each end: with 40 resamples whose differences are 0..39 (the
    baseline's scores in another order than the system's), it is [1, 38]."""
    from types import SimpleNamespace

    from s2s.evaluate import significance

    n = 40
    baseline = [(7 * i) % n for i in range(n)]  # not sorted: pairing them by rank is wrong
    system = [b + i for i, b in enumerate(baseline)]  # the i-th resample's difference is i
    scores = iter([baseline, system])
    monkeypatch.setattr(significance, "_bootstrap_resample", lambda stats, metric, n_samples: (
        None, [SimpleNamespace(score=float(x)) for x in next(scores)]))
    lines = ["a b c d", "e f g h", "i j k l"]
    d = significance.paired_bootstrap(lines, lines, lines, n_samples=n)
    assert (d.lo, d.hi) == (1.0, 38.0)
    assert d.significant and not dataclasses.replace(d, lo=-1.0).significant
    assert dataclasses.replace(d, lo=-0.9, hi=-0.2).significant  # below 0 is significant too
