"""Gradient reach over training: the same measurement at the snapshots the train stages kept, the
first source words' share per epoch (gradient_reach_training_first.csv), reversed minus
forward with its paired-bootstrap interval (gradient_reach_training_diff.csv) and over the seed
pairs with its t-interval (gradient_reach_seed_pairs.csv), the numbers the reversal claim's
verdict rests on."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from s2s.analysis.outputs import FIRST, Analyses
from s2s.claims.analyses import (EARLY, first_share, interval, over_seeds, over_seeds_words,
                                 reach_basis)
from s2s.report import figures
from s2s.report.render import Image, Section, Table
from s2s.report.sections import fixed, model_label, prose
from s2s.report.sections.analysis import in_report

TITLE = "Gradient reach over training"
FIGURES = {"reach_training": "analysis_gradient_reach_training.png",
           "reach_positions": "analysis_gradient_reach_positions.png"}


def section(a: Analyses, figures_dir: Path, rel_dir: str) -> Section:
    P, training, diff, first = (prose("reach_training"), a.training, a.training_diff,
                                a.training_first)
    if training.empty:
        return Section(TITLE, [P.training_none()])
    labels = {m: model_label(m, bool(df["reverse_source"].iloc[0]))
              for m, df in training.groupby("model", sort=False)}
    share, basis = first_share(diff), reach_basis(diff)
    fig = figures.reach_over_training(first, share, figures_dir / FIGURES["reach_training"],
                                      labels=labels, upto=FIRST)
    fig_p = figures.reach_positions_over_training(
        training, figures_dir / FIGURES["reach_positions"], labels=labels)
    boot = a.meta.gradient_reach_training.bootstrap
    blocks: list = [P.training_text(basis.story, FIRST, boot.samples)]
    if len(share):
        init = share[share["epoch"] == 0]
        early = share[(share["epoch"] > 0) & (share["epoch"] <= EARLY)]
        late = share[(share["epoch"] > EARLY) & ~share.index.isin(basis.rows.index)]
        parts = [("init", init), ("early", early), ("late", late)]
        if basis.part == "end":
            parts.append(("end", basis.rows))
        for part, rows in parts:
            if len(rows):
                blocks.append(P.training_part(part, [
                    P.training_epoch(f"{r['epoch']:g}", r["reversed"], f"{r['reversed_mean']:.3f}",
                                     r["forward"], f"{r['forward_mean']:.3f}", interval(r))
                    for _, r in rows.iterrows()]))
        pairs = first_share(a.seed_pairs)
        if len(pairs):
            names = list(dict.fromkeys(f"{f}/{r}" for f, r in zip(pairs["forward"],
                                                                  pairs["reversed"])))
            blocks.append(P.training_seeds(", ".join(names), [
                over_seeds_words(e, over_seeds(a.seed_pairs, e))
                for e in sorted(set(pairs["epoch"]))]))
        else:
            blocks.append(P.training_no_seeds())
    # the difference is of one pair (analysis.json 'compared'), however many models beside it
    compared = (f"share: {share['reversed'].iloc[0]} - {share['forward'].iloc[0]} [95%]"
                if len(share) else None)
    rows = []
    for epoch, df in first.groupby("epoch", sort=True):
        row = {"epoch": f"{epoch:g}" + (" (initialisation)" if epoch == 0 else "")}
        for _, r in df.iterrows():
            row[f"norm {r['model']}"] = f"{r['norm']:.3g}"
        for _, r in df.iterrows():
            row[f"share {r['model']}"] = fixed(r["share"], 3)
        if len(share):
            d = share[share["epoch"] == epoch]
            row[compared] = interval(d.iloc[0]) if len(d) else "-"
        rows.append(row)
    blocks.append(Table(f"Gradient reach at source positions 1-{FIRST} over training",
                        pd.DataFrame(rows), (P.training_table_note(FIRST),)))
    blocks.append(Image("Gradient reach over training", fig,
                        f"{rel_dir}/{FIGURES['reach_training']}", P.training_caption(FIRST)))
    blocks.append(Image("Gradient reach by position over training", fig_p,
                        f"{rel_dir}/{FIGURES['reach_positions']}", P.positions_caption()))
    return Section(TITLE, blocks)


sections = in_report(section)
