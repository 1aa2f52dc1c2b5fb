"""The claims the analyze stage's tables answer (:class:`s2s.analysis.outputs.Analyses`): the
reversal argument (§3.3: reversing puts the first source words within reach of the first target
word, measured by the gradient reach) and Figure 2 (§3.8: paraphrases land together, word-order
swaps apart). No I/O.
"""

from __future__ import annotations

import pandas as pd

from s2s.analysis.outputs import FIRST, Analyses
from s2s.artifacts import Claim
from s2s.claims.verdicts import (BOOTSTRAP, FAILS, HOLDS, NO_DIFFERENCE, NOT_RUN, UNKNOWN, claim,
                                 difference)

EARLY = 0.5  # the paper's argument is about what SGD finds from the start: epochs <= EARLY
# Epoch 0 is the initialisation: its gradient reach shows the reading order of untrained
# weights, not anything SGD learned, so it is shown (labelled) and never part of a verdict.
# The one sentence every place that gives the verdict uses (claims table, sections, summary):
REACH_STORY = ("the verdict rests on the trained early snapshots (0 < epoch <= {early:g}); "
               "epoch 0 is the initialisation (reading order, nothing learned) and the end of "
               "training is shown beside, not judged")


def interval(r) -> str:
    """A row of gradient_reach_training_diff.csv's difference and its interval, in words."""
    return f"{r['diff']:+.3f} [{r['lo']:+.3f}, {r['hi']:+.3f}]"


def reach_claim(first: pd.DataFrame, diff: pd.DataFrame) -> Claim:
    """The reversal argument's verdict: from the early snapshots (epochs <= EARLY) of
    gradient_reach_training_diff.csv where the over-training measurement is there, with what
    happens later; else from the end of training (gradient_reach_first.csv)."""
    key = "gradient_reach"
    share = diff[diff["statistic"] == "first_share"] if len(diff) else diff
    early = share[(share["epoch"] > 0) & (share["epoch"] <= EARLY)] if len(share) else share
    if len(early):
        # holds when every early snapshot's interval is above 0, as verdict_of judges a claim
        status = (HOLDS if (early["lo"] > 0).all() else FAILS if (early["hi"] < 0).any()
                  else NO_DIFFERENCE)
        init = share[share["epoch"] == 0]
        late = share[share["epoch"] > EARLY]
        r = early.iloc[0]
        evidence = (f"share of -log p(y_1)'s gradient at source positions 1-{FIRST}, "
                    f"{r['reversed']} - {r['forward']} with 95% bootstrap interval: trained, "
                    "early " + "; ".join(f"epoch {x['epoch']:g} {interval(x)}"
                                        for _, x in early.iterrows()))
        if len(init):
            evidence += f"; at initialisation (reading order) {interval(init.iloc[0])}"
        if len(late):
            evidence += "; later " + "; ".join(f"epoch {x['epoch']:g} {interval(x)}"
                                               for _, x in late.iterrows())
        return claim(
            key, status, evidence + "; " + REACH_STORY.format(early=EARLY),
            ours="; ".join(f"epoch {x['epoch']:g}: {x['reversed']} {x['reversed_mean']:.3f} vs "
                           f"{x['forward']} {x['forward_mean']:.3f}" for _, x in early.iterrows()),
            differences=tuple(difference(f"{x['reversed']} - {x['forward']}, epoch "
                                         f"{x['epoch']:g}", "share", x["diff"],
                                         (x["lo"], x["hi"]), BOOTSTRAP)
                              for _, x in early.iterrows()))
    fwd = first[~first["reverse_source"]]
    rev = first[first["reverse_source"]]
    if len(fwd) and len(rev):
        f, r = fwd.iloc[0], rev.iloc[0]
        nf, nr = f["mean_norm"], r["mean_norm"]
        return claim(key, HOLDS if nr > nf else FAILS,
                     f"mean gradient norm of -log p(y_1) at source positions 1-{FIRST} at the "
                     f"end of training (no snapshots): {r['model']} {nr:.3g} vs {f['model']} "
                     f"{nf:.3g} ({nr / nf:.2f}x)",
                     ours=f"{r['model']} {nr:.3g} vs {f['model']} {nf:.3g}",
                     differences=(difference(f"{r['model']} - {f['model']}",
                                             "gradient norm", nr - nf),))
    return claim(key, NOT_RUN, "needs a forward and a reversed model in analysis.models")


def figure2_claim(summary: pd.DataFrame) -> Claim:
    """Figure 2: in every model, paraphrases are closer than word-order swaps (relative
    distances of figure2_summary.csv)."""
    key = "figure2"
    rows = [r for r in summary.to_dict("records")
            if r["paraphrase_pairs"] > 0 and r["swap_pairs"] > 0]
    if not rows:
        return claim(key, UNKNOWN, "no paraphrase and swap pairs among analysis.phrases")
    ok = [r["paraphrase_distance"] < r["swap_distance"] for r in rows]
    return claim(key, HOLDS if all(ok) else FAILS, "; ".join(
        f"{r['model']}: paraphrases {r['paraphrase_distance']:.2f} vs swaps "
        f"{r['swap_distance']:.2f} (relative distance)" for r in rows),
        ours="paraphrases vs swaps: " + "; ".join(
            f"{r['model']} {r['paraphrase_distance']:.2f} vs {r['swap_distance']:.2f}"
            for r in rows),
        differences=tuple(difference(f"{r['model']} swaps - paraphrases", "distance",
                                     r["swap_distance"] - r["paraphrase_distance"])
                          for r in rows))


def analysis_claims(a: Analyses) -> list[Claim]:
    """The analyses' verdicts for the claims table: the reversal argument, then Figure 2."""
    return [reach_claim(a.reach_first, a.training_diff), figure2_claim(a.figure2)]
