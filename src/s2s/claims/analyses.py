"""The claims the analyze stage's tables answer (:class:`s2s.analysis.outputs.Analyses`): the
reversal argument (§3.3: reversing puts the first source words within reach of the first target
word, measured by the gradient reach) and Figure 2 (§3.8: paraphrases land together, word-order
swaps apart). No I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from s2s.analysis.outputs import FIRST, Analyses
from s2s.artifacts import Claim
from s2s.claims import seeds
from s2s.claims.seeds import SeedStats, t975
from s2s.claims.verdicts import (BOOTSTRAP, FAILS, HOLDS, NO_DIFFERENCE, NOT_RUN, UNKNOWN, claim,
                                 difference, verdict_of)

EARLY = 0.5  # the paper's argument is about what SGD finds from the start: epochs <= EARLY
# Epoch 0 is the initialisation: its gradient reach shows the reading order of untrained
# weights, not anything SGD learned, so it is shown (labelled) and never part of a verdict.
# The one sentence every place that gives the verdict uses (claims table, sections, summary),
# one per thing the verdict can rest on (ReachBasis):
REACH_STORY = ("the verdict rests on the trained early snapshots (0 < epoch <= {early:g}); "
               "epoch 0 is the initialisation (reading order, nothing learned) and the end of "
               "training is shown beside, not judged")
END_STORY = ("the verdict would rest on trained early snapshots (0 < epoch <= {early:g}), but "
             "none was measured (analysis.snapshots): it rests on the end of training (epoch "
             "{end:g}), which cannot show what SGD finds first; epoch 0, where measured, is the "
             "initialisation (reading order, nothing learned), shown, not judged")
POINT_STORY = ("no snapshot of training was measured (the analyze stage was given no snapshot "
               "folder): the end of training's mean gradient norms are shown, with no interval, "
               "so no verdict (nor could they show what SGD finds first)")


@dataclass(frozen=True)
class ReachBasis:
    """What the reversal argument's verdict rests on: `rows`, the rows of
    gradient_reach_training_diff.csv's first_share that decide it (the trained early snapshots;
    where none was measured, the end of training; no rows: no verdict, gradient_reach_first.csv's
    point values at the end its evidence), `part` ("early", "end" or "point") and `story`, the
    sentence saying so."""

    rows: pd.DataFrame
    part: str
    story: str


def first_share(diff: pd.DataFrame) -> pd.DataFrame:
    """gradient_reach_training_diff.csv's rows of the first source words' share."""
    return diff[diff["statistic"] == "first_share"] if len(diff) else diff


def reach_basis(diff: pd.DataFrame) -> ReachBasis:
    """What the reversal argument's verdict rests on, given gradient_reach_training_diff.csv."""
    share = first_share(diff)
    early = share[(share["epoch"] > 0) & (share["epoch"] <= EARLY)] if len(share) else share
    if len(early):
        return ReachBasis(early, "early", REACH_STORY.format(early=EARLY))
    trained = share[share["epoch"] > 0] if len(share) else share
    if len(trained):
        end = trained["epoch"].max()
        return ReachBasis(trained[trained["epoch"] == end], "end",
                          END_STORY.format(early=EARLY, end=end))
    return ReachBasis(trained, "point", POINT_STORY)


def interval(r) -> str:
    """A row of gradient_reach_training_diff.csv's difference and its interval, in words."""
    return f"{r['diff']:+.3f} [{r['lo']:+.3f}, {r['hi']:+.3f}]"


def over_seeds(seed_pairs: pd.DataFrame, epoch: float) -> SeedStats | None:
    """gradient_reach_seed_pairs.csv's first_share at `epoch` over its seed pairs: each pair's
    forward and reversed mean share and its paired difference (reversed - forward); None where
    no pair was measured there."""
    share = first_share(seed_pairs)
    rows = share[(share["epoch"] == epoch) & share["diff"].notna()] if len(share) else share
    if not len(rows):
        return None
    return SeedStats(worse=tuple(rows["forward_mean"]), better=tuple(rows["reversed_mean"]),
                     diffs=tuple(rows["diff"]))


def over_seeds_words(epoch: float, stats: SeedStats | None) -> str:
    """:func:`over_seeds` at `epoch`, in words: the mean paired difference and its interval."""
    if stats is None:
        return f"epoch {epoch:g} no seed pair measured"
    iv = stats.interval
    return (f"epoch {epoch:g} {stats.mean:+.3f} "
            + (f"[{iv[0]:+.3f}, {iv[1]:+.3f}] over {stats.over}" if iv is not None
               else f"over {stats.over}, no interval"))


# what the evidence adds where no interval over seeds left the reach without a verdict
NO_REACH_SEEDS = ("no verdict without an interval over seeds: it needs two seed pairs or more of "
                  "a forward and a reversed model with snapshots (analysis.reach_replicas names "
                  "the seed replicas of analysis.models measured for it)")


def reach_claim(first: pd.DataFrame, diff: pd.DataFrame,
                seed_pairs: pd.DataFrame | None = None) -> Claim:
    """The reversal argument's verdict (:func:`reach_basis`): from each early snapshot of
    gradient_reach_training_diff.csv (epochs <= EARLY), with what happens later; where none was
    measured, from the end of training; without that table, no verdict: the end of training's
    point values (gradient_reach_first.csv) are its evidence. At each judged epoch, as a system
    comparison is judged (s2s.claims.seeds.verdict), both the bootstrap interval over test
    sentences of the first pair and the t-interval over the seed pairs of `seed_pairs`
    (gradient_reach_seed_pairs.csv) must exclude 0 the same way; one seed pair gives no
    interval over seeds, so no verdict unless the bootstrap's holds 0."""
    key = "gradient_reach"
    basis = reach_basis(diff)
    if basis.part != "point":
        share, judged = first_share(diff), basis.rows
        if (judged["sentences"] == 0).any() or not judged[["lo", "hi"]].notna().all(axis=None):
            return claim(key, UNKNOWN, "no test sentence long enough for the gradient reach was "
                         "measured (the analyze stage's test sentences of at least its minimum "
                         "length): no interval; " + basis.story)
        pairs = seed_pairs if seed_pairs is not None else diff.iloc[0:0]
        stats = {e: over_seeds(pairs, e) for e in judged["epoch"]}
        ways = [seeds.verdict(1 if x["lo"] > 0 else -1 if x["hi"] < 0 else 0, stats[x["epoch"]])
                for _, x in judged.iterrows()]
        status = (HOLDS if all(w == 1 for w in ways) else FAILS if -1 in ways
                  else NO_DIFFERENCE if 0 in ways else UNKNOWN)
        init = share[share["epoch"] == 0]
        late = share[(share["epoch"] > EARLY) & ~share.index.isin(judged.index)]
        r = judged.iloc[0]
        evidence = (f"share of -log p(y_1)'s gradient at source positions 1-{FIRST}, "
                    f"{r['reversed']} - {r['forward']} with 95% bootstrap interval: trained, "
                    + ("early " if basis.part == "early" else "end of training ")
                    + "; ".join(f"epoch {x['epoch']:g} {interval(x)}"
                                for _, x in judged.iterrows())
                    + "; over seeds, reversed - forward with 95% t-interval: "
                    + "; ".join(over_seeds_words(e, st) for e, st in stats.items()))
        if len(init):
            evidence += f"; at initialisation (reading order) {interval(init.iloc[0])}"
        if len(late):  # after the early snapshots; before the end where that decides
            evidence += (("; later " if basis.part == "early" else "; earlier ")
                         + "; ".join(f"epoch {x['epoch']:g} {interval(x)}"
                                     for _, x in late.iterrows()))
        if status == UNKNOWN:
            evidence += "; " + NO_REACH_SEEDS
        return claim(
            key, status, evidence + "; " + basis.story,
            ours="; ".join(f"epoch {x['epoch']:g}: {x['reversed']} {x['reversed_mean']:.3f} vs "
                           f"{x['forward']} {x['forward_mean']:.3f}"
                           for _, x in judged.iterrows()),
            differences=tuple(difference(f"{x['reversed']} - {x['forward']}, epoch "
                                         f"{x['epoch']:g}", "share", x["diff"],
                                         (x["lo"], x["hi"]), BOOTSTRAP)
                              for _, x in judged.iterrows())
            + tuple(difference(f"reversed - forward over seeds, epoch {e:g}", "share", st.mean,
                               st.interval, st.over)
                    for e, st in stats.items() if st is not None))
    fwd = first[~first["reverse_source"]]
    rev = first[first["reverse_source"]]
    if len(fwd) and len(rev):
        f, r = fwd.iloc[0], rev.iloc[0]
        nf, nr = f["mean_norm"], r["mean_norm"]
        if not (pd.notna(nf) and pd.notna(nr)):
            return claim(key, UNKNOWN, "no test sentence long enough for the gradient reach was "
                         "measured: no mean gradient norm; " + basis.story)
        return claim(key, UNKNOWN,
                     f"mean gradient norm of -log p(y_1) at source positions 1-{FIRST} at the "
                     f"end of training: {r['model']} {nr:.3g} vs {f['model']} {nf:.3g} "
                     f"({nr / nf:.2f}x); {basis.story}",
                     ours=f"{r['model']} {nr:.3g} vs {f['model']} {nf:.3g}",
                     differences=(difference(f"{r['model']} - {f['model']}",
                                             "gradient norm", nr - nf),))
    return claim(key, NOT_RUN, "needs a forward and a reversed model in analysis.models")


PAIRS = "phrase pairs"  # what Figure 2's interval is over


@dataclass(frozen=True)
class Interval:
    lo: float
    hi: float


def no_interval(r: dict) -> str | None:
    """Why one model's row of figure2_summary.csv gives no interval over its pairs (None: it
    gives one)."""
    def finite(*keys: str) -> bool:
        return all(isinstance(r.get(k), (int, float)) and math.isfinite(r[k]) for k in keys)

    if min(r["paraphrase_pairs"], r["swap_pairs"]) < 2:
        return "under two pairs of a kind: analysis.phrases needs more"
    if not finite("paraphrase_distance", "swap_distance"):
        return "its distances are not numbers (every phrase's vector the same)"
    if not finite("paraphrase_sd", "swap_sd"):
        return "the analyze stage wrote no standard deviations: rerun it"
    return None


def pairs_interval(r: dict) -> Interval | None:
    """The 95% Welch interval of one model's swaps - paraphrases relative distance, over its
    pairs of each kind (figure2_summary.csv's means and standard deviations); None where
    :func:`no_interval` says why not. The pairs share phrases, so they are not independent
    draws: the interval is the pairs' spread, read as a guide, not a test of the phrase set."""
    if no_interval(r) is not None:
        return None
    sp, ss = r["paraphrase_sd"], r["swap_sd"]
    n_p, n_s = r["paraphrase_pairs"], r["swap_pairs"]
    vp, vs = sp ** 2 / n_p, ss ** 2 / n_s
    diff = r["swap_distance"] - r["paraphrase_distance"]
    if vp + vs == 0:
        return Interval(diff, diff)
    df = (vp + vs) ** 2 / (vp ** 2 / (n_p - 1) + vs ** 2 / (n_s - 1))
    half = t975(max(1, math.floor(df))) * math.sqrt(vp + vs)  # floor: the wider interval
    return Interval(diff - half, diff + half)


def figure2_claim(summary: pd.DataFrame) -> Claim:
    """Figure 2: in every model, paraphrases are closer than word-order swaps (relative
    distances of figure2_summary.csv), each difference with its interval over the phrase pairs
    (:func:`pairs_interval`): holds when every one is above 0, does not hold when one is
    below; without intervals, no verdict."""
    key = "figure2"
    rows = [r for r in summary.to_dict("records")
            if r["paraphrase_pairs"] > 0 and r["swap_pairs"] > 0]
    if not rows:
        return claim(key, UNKNOWN, "no paraphrase and swap pairs among analysis.phrases")
    intervals = [pairs_interval(r) for r in rows]

    def said(r, iv) -> str:
        d = r["swap_distance"] - r["paraphrase_distance"]
        return (f"{r['model']}: paraphrases {r['paraphrase_distance']:.2f} vs swaps "
                f"{r['swap_distance']:.2f} (swaps - paraphrases {d:+.2f}"
                + (f", 95% interval {iv.lo:+.2f} to {iv.hi:+.2f} over the "
                   f"{r['paraphrase_pairs']} and {r['swap_pairs']} pairs" if iv else "") + ")")

    evidence = "relative distances: " + "; ".join(said(r, iv) for r, iv in zip(rows, intervals))
    status = verdict_of(intervals)
    lacking = [r for r, iv in zip(rows, intervals) if iv is None]
    if lacking:
        why = "; ".join(dict.fromkeys(no_interval(r) for r in lacking))
        evidence += (f"; no interval over the phrase pairs of "
                     f"{', '.join(r['model'] for r in lacking)} ({why})"
                     + (", so no verdict" if status == UNKNOWN else ""))
    return claim(key, status, evidence,
                 ours="paraphrases vs swaps: " + "; ".join(
                     f"{r['model']} {r['paraphrase_distance']:.2f} vs {r['swap_distance']:.2f}"
                     for r in rows),
                 differences=tuple(difference(
                     f"{r['model']} swaps - paraphrases", "distance",
                     r["swap_distance"] - r["paraphrase_distance"],
                     None if iv is None else (iv.lo, iv.hi), PAIRS)
                     for r, iv in zip(rows, intervals)))


ANALYSIS_CLAIMS = ("gradient_reach", "figure2")  # the keys analysis_claims gives, in order


def analysis_claims(a: Analyses) -> list[Claim]:
    """The analyses' verdicts for the claims table (ANALYSIS_CLAIMS): the reversal argument,
    then Figure 2."""
    return [reach_claim(a.reach_first, a.training_diff, a.seed_pairs), figure2_claim(a.figure2)]
