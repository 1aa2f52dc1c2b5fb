"""Scoring a hypothesis file both ways, and paired bootstrap resampling between two systems.

Both BLEU methods of :mod:`s2s.evaluate.bleu`: tokenised BLEU (the paper's, ``--tokenize none``
on Moses-tokenised text) and sacreBLEU 13a (detokenised text). A detokenised hypothesis file
(what users have, and ``beam<K>.detok.fr``) is Moses-tokenised by the very function `prepare`
uses, as are its references; a tokenised one (``--tokenized``) is detokenised for sacreBLEU.

Paired bootstrap resampling (Koehn 2004) is sacreBLEU's own: its ``PairedTest`` gives each
system's bootstrap mean, 95% half-width and the p-value of the difference, exactly what
``sacrebleu REF -i BASE SYS --paired-bs`` prints (seed 12345, sacreBLEU's default). The 95%
interval of the *difference* comes from the same resamples: sacreBLEU's ``_bootstrap_resample``
draws the same indices for both systems when given the same seed, and the interval is read off
the sorted differences the way its ``estimate_ci`` reads a score's (the 1/40 quantiles).
Intervals are on tokenised BLEU, the column comparable with the paper.
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
from sacrebleu.metrics.bleu import BLEU
from sacrebleu.significance import PairedTest, _bootstrap_resample

from s2s.evaluate.bleu import (CORPUS_SMOOTHING, check_same_length, corpus_bleu_sacre,
                               corpus_bleu_tok)
from s2s.io import read_lines

SEED = 12345  # sacreBLEU's default SACREBLEU_SEED: our intervals equal its CLI's
N_SAMPLES = 1000  # sacreBLEU's default number of bootstrap resamples
MIN_SAMPLES = 40  # fewer: the 95% interval would be the whole range of the resamples


@dataclass(frozen=True)
class Scores:
    """Both BLEU scores of one hypothesis file."""

    bleu_tok: float
    bleu_sacre: float
    sacre_signature: str
    tok_signature: str
    sentences: int


@dataclass(frozen=True)
class Difference:
    """System minus baseline in tokenised BLEU, with its paired-bootstrap 95% interval.

    Attributes:
        baseline, system: the two scores (tokenised BLEU).
        delta: system - baseline.
        lo, hi: the 95% interval of the difference over the resamples.
        p_value: sacreBLEU's paired-bootstrap p-value of the difference (1 where no resample
            differs at all).
        baseline_mean, baseline_ci, system_mean, system_ci: sacreBLEU's bootstrap mean and 95%
            half-width of each system (as its CLI prints ``μ = mean ± ci``).
        samples, seed: resamples drawn and their seed.
    """

    baseline: float
    system: float
    delta: float
    lo: float
    hi: float
    p_value: float
    baseline_mean: float
    baseline_ci: float
    system_mean: float
    system_ci: float
    samples: int
    seed: int

    @property
    def significant(self) -> bool:
        """The interval excludes 0."""
        return self.lo > 0 or self.hi < 0

    def describe(self) -> str:
        what = "significant" if self.significant else "no significant difference"
        return (f"{self.delta:+.2f} BLEU (95% CI {self.lo:+.2f} to {self.hi:+.2f}, "
                f"p = {self.p_value:.3f}: {what})")

    def as_dict(self) -> dict:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in asdict(self).items()}


# A word Moses keeps whole, standing in for <unk> while a line is tokenised.
_UNK_STAND_IN = "s2sunkstandin"


def tokenize_lines(lines: Sequence[str], lang: str = "fr") -> list[str]:
    """Moses tokenisation exactly as `prepare` applies it (the same function), but for the
    vocabulary's <unk> in a hypothesis (a translation's detokenised text holds it): Moses splits
    it into `< unk >`, three tokens no reference has, so a system scored from its .detok file
    lost up to 1 BLEU against its .tok file. It is tokenised
    as a word and comes back as <unk>. Detokenisation does not always invert: an `l' <unk>` it
    left apart comes back `l ' <unk>` (1 line of the published ensemble's 1,000: 25.03 from its
    .detok file, 25.04 from its .tok file, which is what the evaluate stage scores)."""
    from s2s.data.text import tokenize_many
    from s2s.data.vocab import UNK

    held = [line.replace(UNK, _UNK_STAND_IN) for line in lines]
    return [line.replace(_UNK_STAND_IN, UNK) for line in tokenize_many(held, lang)]


def both_forms(lines: Sequence[str], *, tokenized: bool, lang: str = "fr") -> tuple[list[str],
                                                                                    list[str]]:
    """(tokenised, detokenised) forms of hypothesis or reference lines."""
    from s2s.data.text import detokenize

    if tokenized:
        return list(lines), [detokenize(s, lang) for s in lines]
    return tokenize_lines(lines, lang), list(lines)


def score(hyps: Sequence[str], refs: Sequence[str], *, tokenized: bool = False,
          hyp_name: str = "hypotheses", ref_name: str = "references") -> Scores:
    """Tokenised BLEU and sacreBLEU 13a of ``hyps`` against ``refs`` (both detokenised, or both
    Moses-tokenised with ``tokenized``)."""
    from s2s.evaluate.bleu import tok_signature

    check_same_length(hyps, refs, hyp_name=hyp_name, ref_name=ref_name)
    if not hyps:
        raise ValueError(f"{hyp_name} and {ref_name}: no sentences (empty files): nothing to "
                         f"score")
    h_tok, h_raw = both_forms(hyps, tokenized=tokenized)
    r_tok, r_raw = both_forms(refs, tokenized=tokenized)
    bt = corpus_bleu_tok(h_tok, r_tok, hyp_name=hyp_name, ref_name=ref_name)
    bs = corpus_bleu_sacre(h_raw, r_raw, hyp_name=hyp_name, ref_name=ref_name)
    return Scores(bt.score, bs.score.score, bs.signature, tok_signature(), len(hyps))


@contextlib.contextmanager
def _seed(seed: int) -> Iterator[None]:
    """sacreBLEU reads its seed from the environment; set it for the call only."""
    old = os.environ.get("SACREBLEU_SEED")
    os.environ["SACREBLEU_SEED"] = str(seed)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("SACREBLEU_SEED", None)
        else:
            os.environ["SACREBLEU_SEED"] = old


def paired_bootstrap(baseline: Sequence[str], system: Sequence[str], refs: Sequence[str], *,
                     n_samples: int = N_SAMPLES, seed: int = SEED, baseline_name: str = "baseline",
                     system_name: str = "system", ref_name: str = "references") -> Difference:
    """Paired bootstrap of ``system`` against ``baseline`` on *tokenised* lines (tokenised BLEU),
    all three the same length (the names are the files, for the error when they are not)."""
    if isinstance(n_samples, bool) or not isinstance(n_samples, int) or n_samples < MIN_SAMPLES:
        raise ValueError(f"n_samples must be an integer >= {MIN_SAMPLES} (the 95% interval cuts "
                         f"2.5% of the resamples off each end), got {n_samples!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 1:
        # sacreBLEU's PairedTest takes a seed of 0 for none: its p-value and means would come
        # from fresh random resamples, not from those of the interval, under "seed 0"
        raise ValueError(f"the bootstrap's seed must be an integer >= 1, got {seed!r}")
    check_same_length(baseline, refs, hyp_name=baseline_name, ref_name=ref_name)
    check_same_length(system, refs, hyp_name=system_name, ref_name=ref_name)
    if not refs:
        raise ValueError("paired bootstrap: no sentences (empty files)")
    baseline, system, refs = list(baseline), list(system), list(refs)
    logging.getLogger("sacrebleu").setLevel(logging.WARNING)  # its per-step INFO lines
    with _seed(seed):
        # unsmoothed, as the tokenised BLEU column (multi-bleu.perl's method: s2s.evaluate.bleu)
        metric = BLEU(tokenize="none", force=True, smooth_method=CORPUS_SMOOTHING)
        _, results = PairedTest([("baseline", baseline), ("system", system)], {"BLEU": metric},
                                [refs], test_type="bs", n_samples=n_samples)()
        bl, sy = results["BLEU"]
        # The same resamples again (same seed, same indices) for the difference's interval.
        m = BLEU(tokenize="none", force=True, smooth_method=CORPUS_SMOOTHING)
        _, bl_scores = _bootstrap_resample(m._extract_corpus_statistics(baseline, [refs]), m,
                                           n_samples)
        _, sy_scores = _bootstrap_resample(m._extract_corpus_statistics(system, [refs]), m,
                                           n_samples)
    diffs = np.sort(np.array([s.score for s in sy_scores]) - np.array([s.score
                                                                         for s in bl_scores]))
    k = n_samples // 40
    # sacreBLEU counts the resamples whose centred difference is strictly above the observed
    # one: with no difference in any resample (the same output twice) it gives 1 / (n + 1),
    # which would read as significant; nothing differs, so p is 1
    p_value = 1.0 if not diffs.any() else float(sy.p_value)
    return Difference(baseline=float(bl.score), system=float(sy.score),
                      delta=float(sy.score - bl.score), lo=float(diffs[k]),
                      hi=float(diffs[n_samples - k - 1]), p_value=p_value,
                      baseline_mean=float(bl.mean), baseline_ci=float(bl.ci),
                      system_mean=float(sy.mean), system_ci=float(sy.ci), samples=n_samples,
                      seed=seed)


@dataclass(frozen=True)
class FileScores:
    """What ``s2s score`` reports: both scores of each hypothesis file (the baseline first) and,
    given a second file, its paired bootstrap against the first."""

    ref: str
    tokenized: bool
    scores: dict[str, Scores]  # file -> its scores
    baseline: str
    system: str | None = None
    diff: Difference | None = None  # system - baseline

    def as_dict(self) -> dict:
        """The ``--json`` output."""
        out = {"references": self.ref, "tokenized_input": self.tokenized,
               "scores": {f: vars(s) for f, s in self.scores.items()}}
        if self.diff is not None:
            out["paired_bootstrap"] = {"baseline": self.baseline, "system": self.system,
                                       "metric": "tokenised BLEU", **self.diff.as_dict()}
        return out

    def describe(self) -> str:
        """The text output: a table of both scores, their signatures, the difference."""
        width = max(len(f) for f in self.scores)
        lines = [f"{'file':<{width}}  BLEU tokenised  sacreBLEU 13a  sentences"]
        lines += [f"{f:<{width}}  {sc.bleu_tok:14.2f}  {sc.bleu_sacre:13.2f}  {sc.sentences:9d}"
                  for f, sc in self.scores.items()]
        first = next(iter(self.scores.values()))
        lines += [f"BLEU tokenised: {first.tok_signature} (the paper's method)",
                  f"sacreBLEU 13a:  {first.sacre_signature}"]
        if self.diff is not None:
            baseline, system, d = self.baseline, self.system, self.diff.as_dict()
            lines += [f"paired bootstrap ({d['samples']} resamples, seed {d['seed']}), tokenised "
                      f"BLEU: {system} - {baseline} = {self.diff.describe()}",
                      f"  {baseline}: mean {d['baseline_mean']:.2f} +- {d['baseline_ci']:.2f}; "
                      f"{system}: mean {d['system_mean']:.2f} +- {d['system_ci']:.2f}"]
        return "\n".join(lines)


def score_files(hyp: Path, ref: Path, *, system: Path | None = None, tokenized: bool = False,
                samples: int = N_SAMPLES, seed: int = SEED) -> FileScores:
    """Both scores of `hyp` (and `system`) against `ref`, one sentence per line, and with
    `system` the paired bootstrap of `system` against `hyp` on tokenised BLEU. A UTF-8
    byte-order mark at the start of a file is not part of its first line."""
    # a leading byte-order mark is dropped, as prepare drops it from the corpora (s2s.data.text):
    # kept, it is glued to the first word and costs that word's n-grams
    refs, hyps = read_lines(ref, strip_bom=True), read_lines(hyp, strip_bom=True)
    sys_lines = read_lines(system, strip_bom=True) if system else None
    texts = {str(hyp): hyps, **({str(system): sys_lines} if system else {})}
    scores = {f: score(lines, refs, tokenized=tokenized, hyp_name=f, ref_name=str(ref))
              for f, lines in texts.items()}
    diff = None
    if system:
        if tokenized:
            base_tok, sys_tok, ref_tok = hyps, sys_lines, refs
        else:
            base_tok, sys_tok, ref_tok = (tokenize_lines(x) for x in (hyps, sys_lines, refs))
        diff = paired_bootstrap(base_tok, sys_tok, ref_tok, n_samples=samples,
                                baseline_name=str(hyp), system_name=str(system),
                                ref_name=str(ref), seed=seed)
    return FileScores(ref=str(ref), tokenized=tokenized, scores=scores, baseline=str(hyp),
                      system=str(system) if system else None, diff=diff)
