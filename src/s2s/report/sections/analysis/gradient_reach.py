"""Gradient reach at the end of training: how much of the first target word's gradient reaches
each source word, by its position in the original sentence (gradient_reach.csv), and at the
first source words (gradient_reach_first.csv), forward against reversed."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from s2s.analysis.outputs import FIRST, Analyses
from s2s.claims.analyses import reach_basis
from s2s.report import figures
from s2s.report.render import Image, Section, Table
from s2s.report.sections import fixed, model_label, prose
from s2s.report.sections.analysis import in_report

TITLE = "Gradient reach by source position"
FIGURES = {"reach": "analysis_gradient_reach.png"}


def section(a: Analyses, figures_dir: Path, rel_dir: str) -> Section:
    reach, meta = a.reach, a.meta
    labels = {m: model_label(m, bool(df["reverse_source"].iloc[0]))
              for m, df in reach[reach["sentences"] > 0].groupby("model", sort=False)}
    fig = figures.gradient_reach(reach, figures_dir / FIGURES["reach"], labels=labels)
    P, test = prose("gradient_reach"), meta.test
    blocks: list = [P.reach_text(test.reach_sentences, test.reach_min_length,
                                 meta.gradient_reach.definition)]
    first = {r["model"]: r for _, r in a.reach_first.iterrows()}
    story = reach_basis(a.training_diff).story
    fwd_models = [m for m, r in first.items() if not r["reverse_source"]]
    rev_models = [m for m, r in first.items() if r["reverse_source"]]
    for f in fwd_models:
        for r in rev_models:
            nf, sf = first[f]["mean_norm"], first[f]["mean_share"]
            nr, sr = first[r]["mean_norm"], first[r]["mean_share"]
            if not all(math.isfinite(x) for x in (nf, sf, nr, sr)):
                continue  # no test sentence long enough: no comparison, the text says how many
            ratio = nr / nf if nf > 0 else math.nan
            blocks.append(P.reach_end(FIRST, f, f"{nf:.3g}", r, f"{nr:.3g}", f"{ratio:.2f}",
                                      f"{sf:.3f}", f"{sr:.3f}", *reach_direction(nf, nr, sf, sr),
                                      story))
    wide = reach.pivot_table(index="position", columns="model", values=["mean_norm", "mean_share"],
                             sort=False)
    count = reach.groupby("position")["sentences"].max()
    rows = []
    for pos in wide.index:
        row = {"position": int(pos), "sentences": int(count.loc[pos])}
        for m in first:
            row[f"norm {m}"] = fixed(wide.loc[pos, ("mean_norm", m)], 4)
        for m in first:
            row[f"share {m}"] = fixed(wide.loc[pos, ("mean_share", m)], 3)
        rows.append(row)
    blocks.append(Table("Gradient reach by original source position", pd.DataFrame(rows)))
    blocks.append(Image("Gradient reach", fig, f"{rel_dir}/{FIGURES['reach']}",
                        P.reach_caption()))
    return Section(TITLE, blocks)


def reach_direction(forward_norm: float, reversed_norm: float, forward_share: float,
                    reversed_share: float) -> tuple[str, str]:
    """The reversed model's gradient norm and share at the first source words against the
    forward one's, each 'higher', 'lower' or 'equal' on the digits the text prints it with: the
    text says 'more' or 'less' strongly only where the two agree."""
    def word(f: float, r: float, digits: str) -> str:
        f, r = float(f"{f:{digits}}"), float(f"{r:{digits}}")
        return "higher" if r > f else "lower" if r < f else "equal"

    return (word(forward_norm, reversed_norm, ".3g"), word(forward_share, reversed_share, ".3f"))


sections = in_report(section)
