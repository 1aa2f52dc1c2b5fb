"""Figure 2 (§3.8): the phrases' final encoder states in 2-D (PCA), with the variance explained
and the relative distances of paraphrases and word-order swaps (figure2.csv,
figure2_summary.csv)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from s2s.analysis.outputs import Analyses
from s2s.report import figures
from s2s.report.render import Image, Section, Table
from s2s.report.sections import fixed, model_label, prose
from s2s.report.sections.analysis import in_report

TITLE = "Figure 2: phrase representations (PCA)"
FIGURES = {"figure2": "analysis_figure2.png"}


def section(a: Analyses, figures_dir: Path, rel_dir: str) -> Section:
    points, summary, meta = a.points, a.figure2, a.meta
    titles = {m: model_label(m, bool(df["reverse_source"].iloc[0]))
              for m, df in points.groupby("model", sort=False)}
    fig = figures.figure2(points, figures_dir / FIGURES["figure2"], titles=titles)
    P, info = prose("figure2"), meta.figure2
    unk = sorted({t for p in info.phrases for t in p.unk})
    blocks: list = [P.figure2_text(info.representation, int(summary["dim"].iloc[0])),
                    P.figure2_unk(unk)]
    rows, claims = [], []
    for _, s in summary.iterrows():
        label = model_label(s["model"], bool(s["reverse_source"]))
        rows.append({"model": label, "PC1 var": fixed(s["explained_pc1"], 2),
                     "PC2 var": fixed(s["explained_pc2"], 2),
                     "paraphrase dist": fixed(s["paraphrase_distance"], 2),
                     "swap dist": fixed(s["swap_distance"], 2),
                     "nearest neighbour same meaning": fixed(s["nn_same_meaning"], 2),
                     "pairs (para/swap)": f"{s['paraphrase_pairs']}/{s['swap_pairs']}"})
        p, w = s["paraphrase_distance"], s["swap_distance"]
        if math.isfinite(p) and math.isfinite(w):
            digits = 2  # more where two digits would print a tie the words call closer
            while f"{p:.{digits}f}" == f"{w:.{digits}f}" and p != w and digits < 6:
                digits += 1
            claims.append(P.figure2_model(
                label, f"{p:.{digits}f}", p < w, f"{w:.{digits}f}",
                f"{100 * s['nn_same_meaning']:.0f}",
                f"{100 * (s['explained_pc1'] + s['explained_pc2']):.0f}"))
    blocks += claims
    blocks.append(Table("Figure 2 phrases: PCA variance and relative distances",
                        pd.DataFrame(rows)))
    blocks.append(Image("Figure 2 (ours)", fig, f"{rel_dir}/{FIGURES['figure2']}",
                        P.figure2_caption()))
    return Section(TITLE, blocks)


sections = in_report(section)
