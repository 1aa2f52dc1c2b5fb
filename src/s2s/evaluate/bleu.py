"""BLEU two ways, never mixed in one number.

* **Tokenized BLEU, the paper's method** (:func:`corpus_bleu_tok`). The paper scored cased
  ``multi-bleu.perl`` (Moses' ``scripts/generic/multi-bleu.perl``) on Moses-tokenized text, and we
  compute exactly its number: clipped n-gram precisions p1..p4 summed over the corpus, the brevity
  penalty ``exp(1 - r/c)`` when ``c < r`` (``r`` the sum over sentences of the closest reference
  length; one reference here), cased, and **no smoothing**: when some order has no match at all
  the score is 0 (multi-bleu.perl's ``my_log(0) = -9999999999``; it prints ``BLEU = 0.00``).
  sacreBLEU computes the same with its tokenizer and smoothing switched off:
  ``BLEU(tokenize='none', smooth_method='none', force=True)``, i.e.
  ``sacrebleu REF -i HYP --tokenize none --smooth-method none --force`` (``force`` only silences
  the "looks tokenized" warning). sacreBLEU's default ``exp`` smoothing would give a small
  positive number instead of 0 when some order has no match (a tiny Figure 3 group, a broken
  system); on a test corpus that matches some 4-gram the two agree. Tests compare with
  multi-bleu.perl's own output on real files and with a plain reimplementation of its counts.
  Words are split on whitespace as Python's ``str.split`` does; multi-bleu.perl splits on ASCII
  whitespace only, which is the same on the pipeline's text (normalisation makes every Unicode
  space an ASCII one before tokenizing). Where multi-bleu.perl cannot score (an all-empty
  hypothesis file: it divides by zero; no reference words: it exits 1) we return 0.
* **sacreBLEU 13a** (:func:`corpus_bleu_sacre`): detokenized hypotheses against the untokenized
  references, the standard WMT scoring, with its signature (and sacreBLEU's default
  ``exp`` smoothing). It can differ from the tokenized score by 1-2 BLEU and is *not* comparable
  to the paper's numbers.
* **Sentence BLEU** (:func:`sentence_bleu_tok`): tokenized, for oracle selection in n-best lists.
  This one *is* smoothed (``exp``, with effective order): unsmoothed, most single sentences match
  no 4-gram and would all score 0, leaving the oracle nothing to choose between.

Every corpus score first checks that hypotheses and references have the same number of lines:
a decoder that silently dropped sentences must fail loudly, never be scored on a prefix.
"""

from __future__ import annotations

import functools
from collections import Counter
from pathlib import Path
from typing import NamedTuple, Sequence

import numpy as np
from sacrebleu.metrics.bleu import BLEU, BLEUScore

from s2s.io import read_lines  # its default is sacreBLEU's reading of a file

MAX_ORDER = 4  # n-gram order of BLEU (multi-bleu.perl and sacreBLEU default)
# Corpus-level tokenized BLEU: multi-bleu.perl does not smooth (an order with no match gives 0).
CORPUS_SMOOTHING = "none"
# Sentence-level smoothing: Chen & Cherry (2014) method 3, the NIST/mteval "exp" smoothing (the k-th
# n-gram order with no match counts as 1 / (2^k * total)), with effective order (orders a short
# hypothesis cannot have are left out), exactly sacreBLEU's sentence_bleu defaults.
SENTENCE_SMOOTHING = "exp"

TOK_METHOD = ("cased BLEU on Moses-tokenized text, multi-bleu.perl's method: no smoothing "
              "(sacreBLEU --tokenize none --smooth-method none --force): the paper's method")
SACRE_METHOD = "sacreBLEU 13a on detokenized text (not comparable to the paper's numbers)"

__all__ = [
    "BLEUScore", "LineCountError", "SacreScore", "TOK_METHOD", "SACRE_METHOD",
    "check_same_length", "corpus_bleu_tok", "corpus_bleu_sacre", "sentence_bleu_tok",
    "tok_signature", "score_files_tok", "score_files_sacre", "sentence_stats_tok",
    "bleu_from_stats",
]


class LineCountError(ValueError):
    """Hypotheses and references differ in number of lines."""


class SacreScore(NamedTuple):
    """A sacreBLEU score and the signature that says how it was computed."""

    score: BLEUScore
    signature: str


def check_same_length(hyps: Sequence[str], refs: Sequence[str], *,
                      hyp_name: str = "hypotheses", ref_name: str = "references") -> None:
    """Raise :class:`LineCountError` naming both sides and their counts unless they match."""
    if len(hyps) != len(refs):
        raise LineCountError(
            f"refusing to score: {hyp_name} has {len(hyps)} lines but {ref_name} has {len(refs)}; "
            f"a truncated or padded output is never scored (did the decoder drop sentences?)")


def _tok_metric() -> BLEU:
    return BLEU(tokenize="none", smooth_method=CORPUS_SMOOTHING, force=True)


def corpus_bleu_tok(hyps: Sequence[str], refs: Sequence[str], *,
                    hyp_name: str = "hypotheses", ref_name: str = "references") -> BLEUScore:
    """Corpus BLEU of tokenized hypotheses against tokenized references: the paper's method,
    multi-bleu.perl's number (unsmoothed: 0 when some n-gram order has no match)."""
    check_same_length(hyps, refs, hyp_name=hyp_name, ref_name=ref_name)
    return _tok_metric().corpus_score(list(hyps), [list(refs)])


def tok_signature() -> str:
    """sacreBLEU's signature of the tokenized score (``tok:none|smooth:none``), for labelling
    that column."""
    metric = _tok_metric()
    metric.corpus_score(["a"], [["a"]])  # get_signature raises until a score was computed
    return str(metric.get_signature())


def corpus_bleu_sacre(detok_hyps: Sequence[str], raw_refs: Sequence[str], *,
                      hyp_name: str = "hypotheses", ref_name: str = "references") -> SacreScore:
    """Standard sacreBLEU (13a tokenizer, cased, exp smoothing) and its signature string."""
    check_same_length(detok_hyps, raw_refs, hyp_name=hyp_name, ref_name=ref_name)
    metric = BLEU()
    score = metric.corpus_score(list(detok_hyps), [list(raw_refs)])
    # The signature is only complete once a score exists (it needs the number of references).
    return SacreScore(score, str(metric.get_signature()))


def score_files_tok(hyp_path: str | Path, ref_path: str | Path) -> BLEUScore:
    """:func:`corpus_bleu_tok` of two files; a line-count mismatch names both files."""
    return corpus_bleu_tok(read_lines(hyp_path), read_lines(ref_path),
                           hyp_name=str(hyp_path), ref_name=str(ref_path))


def score_files_sacre(hyp_path: str | Path, ref_path: str | Path) -> SacreScore:
    """:func:`corpus_bleu_sacre` of two files; a line-count mismatch names both files."""
    return corpus_bleu_sacre(read_lines(hyp_path), read_lines(ref_path),
                             hyp_name=str(hyp_path), ref_name=str(ref_path))


# ---------------------------------------------------------------------------------------------
# Per-sentence statistics. Oracle selection calls sentence_bleu_tok for every entry of every n-best
# list (3003 x 1000 in the paper's setting), so the reference's n-grams are cached; the counting is
# sacreBLEU's (whitespace tokens, clipped n-gram matches, one reference) and the arithmetic is its
# own BLEU.compute_bleu. Tests check equality with sacreBLEU's sentence_score and corpus_score.


def _ngrams(tokens: Sequence[str]) -> Counter:
    return Counter(tuple(tokens[i:i + n])
                   for n in range(1, MAX_ORDER + 1) for i in range(len(tokens) - n + 1))


@functools.lru_cache(maxsize=4096)
def _ref_stats(ref: str) -> tuple[Counter, int]:
    tokens = ref.split()
    return _ngrams(tokens), len(tokens)


def _stats(hyp: str, ref: str) -> list[int]:
    """sacreBLEU's sufficient statistics of one pair: hyp_len, ref_len, correct[4], total[4]."""
    ref_ngrams, ref_len = _ref_stats(ref.rstrip())
    tokens = hyp.split()
    correct = [0] * MAX_ORDER
    total = [0] * MAX_ORDER
    for gram, count in _ngrams(tokens).items():
        n = len(gram) - 1
        total[n] += count
        if gram in ref_ngrams:
            correct[n] += min(count, ref_ngrams[gram])
    return [len(tokens), ref_len, *correct, *total]


def sentence_stats_tok(hyps: Sequence[str], refs: Sequence[str], *,
                       hyp_name: str = "hypotheses", ref_name: str = "references") -> np.ndarray:
    """(N, 2 + 2*4) per-sentence BLEU statistics on tokenized text, to score many subsets of one
    output (Figure 3 groups) without recounting: :func:`bleu_from_stats` of the rows of a subset
    equals :func:`corpus_bleu_tok` of that subset."""
    check_same_length(hyps, refs, hyp_name=hyp_name, ref_name=ref_name)
    return np.array([_stats(h, r) for h, r in zip(hyps, refs)], dtype=np.int64).reshape(
        len(hyps), 2 + 2 * MAX_ORDER)


def bleu_from_stats(stats: np.ndarray) -> BLEUScore:
    """Corpus BLEU of summed per-sentence statistics, unsmoothed as :func:`corpus_bleu_tok` (a
    group with no 4-gram match scores 0, as multi-bleu.perl would score it)."""
    tot = [int(x) for x in np.asarray(stats).sum(axis=0)]
    return BLEU.compute_bleu(tot[2:2 + MAX_ORDER], tot[2 + MAX_ORDER:], tot[0], tot[1],
                             smooth_method=CORPUS_SMOOTHING, max_ngram_order=MAX_ORDER)


def sentence_bleu_tok(hyp: str, ref: str) -> float:
    """BLEU (0-100) of one tokenized hypothesis against one tokenized reference.

    Smoothed with Chen & Cherry (2014) method 3 (NIST "exp") and effective order, i.e. equal to
    ``BLEU(tokenize='none', effective_order=True).sentence_score(hyp, [ref]).score``. Unlike the
    corpus score this one must be smoothed: one sentence often matches no 4-gram, and unsmoothed
    every such candidate would score 0, so the oracle could not rank them.
    """
    st = _stats(hyp, ref)
    return BLEU.compute_bleu(st[2:2 + MAX_ORDER], st[2 + MAX_ORDER:], st[0], st[1],
                             smooth_method=SENTENCE_SMOOTHING, effective_order=True,
                             max_ngram_order=MAX_ORDER).score
