"""Figure 3 groupings: test sentences grouped by source length and by source-word rarity.

The paper plots BLEU of groups of test sentences against (left) their length in words and (right)
their average word-frequency rank. It does not say how groups were formed, so we choose, and say:

* **Length** = number of whitespace tokens of the tokenized English source. ``length_edges`` (the
  paper's x ticks) are the initial upper bounds: groups ``[min, e1], (e1, e2], ..., (e_last, max]``.
* **Rarity** = mean frequency rank of the source's words. A word's rank is its 1-based position
  among the non-special entries of ``en.tsv`` (most frequent training word = 1); a word not in the
  file (it was cut by the vocabulary size, or never seen in training) gets rank ``V + 1``, V being
  the number of words in the file. A sentence without words has rank 0. The initial groups are
  ``rarity_groups`` quantile groups of that value; ties fall into one group, so groups may differ a
  little in size.
* Then every group with fewer than ``min_group`` sentences is merged with its smaller neighbour,
  the sparsest first, until all hold ``min_group`` (a test set smaller than ``min_group`` gives one
  group). Groups stay contiguous ranges of the value and cover every sentence exactly once.

``lo``/``hi`` are the smallest and largest value found in a group (inclusive); ``mean`` is the
mean value of its sentences, the x position of the group in the figure. A group's ``label`` is
``lo-hi`` (a length group's in words; a rarity group's with the fewest decimals that keep every
group's upper bound apart from the next group's lower bound).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from s2s.evaluate.bleu import bleu_from_stats, sentence_stats_tok
from s2s.io import read_lines
from s2s.layout import BUCKET_COLUMNS, DROP_COLUMNS

SPECIALS = ("<pad>", "<unk>", "<bos>", "<eos>")


@dataclass(frozen=True)
class Grouping:
    """Sentences of one test set split into contiguous groups along one axis.

    Attributes:
        axis: "length" or "rarity".
        values: (N,) the per-sentence value (length in words, or mean frequency rank).
        members: one int array of sentence indices per group, in increasing order of value.
    """

    axis: str
    values: np.ndarray
    members: tuple[np.ndarray, ...]

    def table(self) -> pd.DataFrame:
        """One row per group: axis, label, lo, hi, sentences, mean (no BLEU yet)."""
        spans = [(self.values[idx].min(), self.values[idx].max()) for idx in self.members]
        labels = _labels(self.axis, spans)
        rows = [{"axis": self.axis, "label": label, "lo": _num(lo), "hi": _num(hi),
                 "sentences": len(idx), "mean": float(self.values[idx].mean())}
                for idx, (lo, hi), label in zip(self.members, spans, labels)]
        return pd.DataFrame(rows, columns=list(BUCKET_COLUMNS[:-1]))


def _num(x: float) -> float | int:
    return int(x) if float(x).is_integer() else round(float(x), 2)


def _labels(axis: str, spans: list[tuple[float, float]]) -> list[str]:
    """``lo-hi`` of each group; a rarity group's bounds get the fewest decimals (1 to 4) at which
    no group's upper bound reads the same as the next group's lower bound ("195-286", "286-409"
    would look as if both held 286)."""
    if axis == "length":
        return [f"{int(lo)}" if lo == hi else f"{int(lo)}-{int(hi)}" for lo, hi in spans]
    for decimals in range(1, 5):
        shown = [(f"{lo:.{decimals}f}", f"{hi:.{decimals}f}") for lo, hi in spans]
        if all(a[1] != b[0] for a, b in zip(shown, shown[1:])):
            break
    return [lo if lo == hi else f"{lo}-{hi}" for lo, hi in shown]


# ---------------------------------------------------------------------------------------------
# Per-sentence values


def source_lengths(src_lines: Sequence[str]) -> np.ndarray:
    """Length in words (whitespace tokens) of each tokenized source sentence."""
    return np.array([len(line.split()) for line in src_lines], dtype=np.int64)


def load_ranks(vocab_tsv: str | Path) -> dict[str, int]:
    """word -> 1-based frequency rank, from a ``word<TAB>count`` vocabulary (specials skipped)."""
    ranks: dict[str, int] = {}
    for lineno, line in enumerate(read_lines(Path(vocab_tsv), rstrip=False), 1):
        if not line:
            continue
        word, sep, _count = line.partition("\t")
        if not sep:
            raise ValueError(f"{vocab_tsv}:{lineno}: expected 'word<TAB>count', got {line!r}")
        if word in SPECIALS:
            continue
        ranks.setdefault(word, len(ranks) + 1)
    return ranks


def average_ranks(src_lines: Sequence[str], ranks: dict[str, int]) -> np.ndarray:
    """Mean frequency rank of each sentence's words; out-of-file words count as ``len(ranks)+1``."""
    unk = len(ranks) + 1
    out = np.zeros(len(src_lines), dtype=np.float64)
    for i, line in enumerate(src_lines):
        words = line.split()
        if words:
            out[i] = sum(ranks.get(w, unk) for w in words) / len(words)
    return out


# ---------------------------------------------------------------------------------------------
# Grouping


def _merge_sparse(counts: list[int], min_group: int) -> list[tuple[int, int]]:
    """Merge adjacent bins until each holds min_group; return (first, last) bin spans."""
    spans = [(i, i) for i in range(len(counts))]
    sizes = list(counts)
    while len(spans) > 1 and min(sizes) < min_group:
        i = min(range(len(sizes)), key=lambda k: (sizes[k], k))  # sparsest, leftmost on ties
        if i == 0:
            j = 1
        elif i == len(sizes) - 1:
            j = i - 1
        else:
            j = i - 1 if sizes[i - 1] <= sizes[i + 1] else i + 1
        a, b = min(i, j), max(i, j)
        spans[a:b + 1] = [(spans[a][0], spans[b][1])]
        sizes[a:b + 1] = [sizes[a] + sizes[b]]
    return spans


def group_by_cuts(values: np.ndarray, cuts: Sequence[float], *, axis: str,
                  min_group: int) -> Grouping:
    """Bins ``(-inf, c1], (c1, c2], ..., (c_last, inf)`` of ``values``, sparse bins merged."""
    values = np.asarray(values)
    if len(values) == 0:
        raise ValueError(f"cannot group an empty test set ({axis})")
    cuts = np.unique(np.asarray(cuts, dtype=np.float64))
    bins = np.searchsorted(cuts, values, side="left")  # bin k: cuts[k-1] < v <= cuts[k]
    counts = np.bincount(bins, minlength=len(cuts) + 1).tolist()
    members = []
    for first, last in _merge_sparse(counts, min_group):
        idx = np.flatnonzero((bins >= first) & (bins <= last))
        if len(idx):  # an all-empty span survives only when every bin is empty, impossible here
            members.append(idx)
    return Grouping(axis=axis, values=values, members=tuple(members))


def length_groups(lengths: np.ndarray, *, edges: Sequence[int], min_group: int) -> Grouping:
    """Groups by source length starting from the paper's ticks ``edges`` as upper bounds."""
    return group_by_cuts(lengths, edges, axis="length", min_group=min_group)


def rarity_groups(avg_ranks: np.ndarray, *, groups: int, min_group: int) -> Grouping:
    """``groups`` quantile groups of the average frequency rank, sparse ones merged."""
    qs = [k / groups for k in range(1, groups)]
    cuts = np.quantile(np.asarray(avg_ranks, dtype=np.float64), qs) if qs else []
    return group_by_cuts(avg_ranks, cuts, axis="rarity", min_group=min_group)


def figure3_groupings(src_lines: Sequence[str], ranks: dict[str, int], *, edges: Sequence[int],
                      rarity: int, min_group: int) -> tuple[Grouping, Grouping]:
    """The two groupings of Figure 3 (length, rarity) of one test set."""
    return (length_groups(source_lengths(src_lines), edges=edges, min_group=min_group),
            rarity_groups(average_ranks(src_lines, ranks), groups=rarity, min_group=min_group))


def group_bleu(grouping: Grouping, hyps: Sequence[str], refs: Sequence[str], *,
               hyp_name: str = "hypotheses", ref_name: str = "references") -> pd.DataFrame:
    """Tokenized corpus BLEU of each group: columns axis, label, lo, hi, sentences, mean, bleu."""
    return group_bleu_from_stats(
        grouping, sentence_stats_tok(hyps, refs, hyp_name=hyp_name, ref_name=ref_name))


def group_bleu_from_stats(grouping: Grouping, stats: np.ndarray) -> pd.DataFrame:
    """:func:`group_bleu` from per-sentence statistics (:func:`sentence_stats_tok`)."""
    if len(stats) != len(grouping.values):
        raise ValueError(f"{len(stats)} scored sentences but the grouping covers "
                         f"{len(grouping.values)} test sentences")
    table = grouping.table()
    table["bleu"] = [bleu_from_stats(stats[idx]).score for idx in grouping.members]
    return table


def length_drop(grouping: Grouping, stats: dict[tuple[str, str], np.ndarray],
                reference: tuple[str, str], *, samples: int = 1000,
                seed: int = 12345) -> pd.DataFrame:
    """How much BLEU each output loses from the shortest group of sentences to the longest (the
    first and last groups of the length `grouping`, Figure 3's end points), with 95% intervals
    from a paired bootstrap: each resample draws sentences with replacement within each of the
    two groups, the same sentences for every output, so `drop_minus_reference` (this output's
    drop minus the `reference` output's) has an interval that accounts for the pairing.
    ``stats``: (system, beam) -> per-sentence statistics (:func:`sentence_stats_tok`)."""
    if grouping.axis != "length" or len(grouping.members) < 2:
        return pd.DataFrame(columns=list(DROP_COLUMNS))
    short, long_ = grouping.members[0], grouping.members[-1]
    labels = grouping.table()["label"]
    rng = np.random.default_rng(seed)
    draws = [(rng.choice(short, len(short)), rng.choice(long_, len(long_)))
             for _ in range(samples)]

    def drops(st: np.ndarray) -> tuple[float, np.ndarray]:
        point = bleu_from_stats(st[short]).score - bleu_from_stats(st[long_]).score
        boot = np.array([bleu_from_stats(st[a]).score - bleu_from_stats(st[b]).score
                         for a, b in draws])
        return point, boot

    ref_point, ref_boot = drops(stats[reference]) if reference in stats else (None, None)
    rows = []
    for (system, beam), st in stats.items():
        point, boot = drops(st)
        row = {"system": system, "beam": beam, "short_label": labels.iloc[0],
               "long_label": labels.iloc[-1], "short_bleu": bleu_from_stats(st[short]).score,
               "long_bleu": bleu_from_stats(st[long_]).score, "drop": point,
               "drop_lo": float(np.percentile(boot, 2.5)),
               "drop_hi": float(np.percentile(boot, 97.5)),
               "reference": f"{reference[0]} beam {reference[1]}"}
        if ref_boot is not None:
            diff = boot - ref_boot
            row.update(drop_minus_reference=point - ref_point,
                       diff_lo=float(np.percentile(diff, 2.5)),
                       diff_hi=float(np.percentile(diff, 97.5)))
        rows.append(row)
    return pd.DataFrame(rows, columns=list(DROP_COLUMNS))
