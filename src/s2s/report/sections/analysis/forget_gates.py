"""The forget gates of the analysed LSTMs: their distribution, each unit's half-life, and at
clause boundaries against inside words (forget_hist.csv, forget_units.csv, forget_summary.csv,
and the per-stack statistics of forget_stacks.csv)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from s2s.analysis.outputs import Analyses
from s2s.report import figures
from s2s.report.render import Image, Section, Table
from s2s.report.sections import fixed, model_label, prose
from s2s.report.sections.analysis import in_report

TITLE = "Forget gates"
FIGURES = {"forget": "analysis_forget_gates.png", "half_life": "analysis_half_life.png"}


def section(a: Analyses, figures_dir: Path, rel_dir: str) -> Section:
    P, meta, summary, stacks = prose("forget_gates"), a.meta, a.forget, a.stacks
    models = meta.models
    if summary.empty:
        return Section(TITLE, [P.forget_none(list(models))])
    fig_h = figures.forget_gates(a.hist, figures_dir / FIGURES["forget"])
    fig_l = figures.half_life(a.units, figures_dir / FIGURES["half_life"])
    blocks: list = [P.forget_text(meta.test.gate_sentences, meta.forget.boundary)]
    rows = []
    for _, s in summary.iterrows():
        rev = models[s["model"]].reverse_source if s["model"] in models else None
        rows.append({"model": s["model"] if rev is None else model_label(s["model"], rev),
                     "stack": s["stack"], "layer": int(s["layer"]), "steps": int(s["steps"]),
                     "mean f": fixed(s["mean_f"]), "at boundaries": fixed(s["boundary_mean_f"]),
                     "inside": fixed(s["inside_mean_f"]),
                     "boundary steps": int(s["boundary_steps"]),
                     "median half-life": fixed(s["median_half_life"], 2),
                     "longest half-life": fixed(s["max_half_life"], 1),
                     "units f > 0.9": fixed(s["units_f_above_0.9"], 2),
                     "units half-life > 10": fixed(s["units_half_life_above_10"], 2)})
    compared = int(stacks["layers_compared"].sum())
    if compared:
        blocks.append(P.forget_boundaries(int(stacks["layers_boundary_lower"].sum()), compared))
    enc = stacks[stacks["stack"] == "encoder"]
    if len(enc):
        long = ", ".join(f"{r['model']} {100 * r['units_half_life_above_10']:.1f}%"
                         for _, r in enc.iterrows())
        top = enc.sort_values("max_half_life").iloc[-1]
        layers = summary[summary["stack"] == "encoder"]
        medians = ", ".join(f"{r['model']} layer {int(r['layer'])} "
                            f"{fixed(r['median_half_life'], 2)}" for _, r in layers.iterrows())
        blocks.append(P.forget_long(long, fixed(top["max_half_life"], 1), top["model"],
                                    int(top["max_half_life_layer"]), medians))
    blocks.append(Table("Forget gates per model, stack and layer", pd.DataFrame(rows)))
    blocks.append(Image("Forget-gate distributions", fig_h, f"{rel_dir}/{FIGURES['forget']}",
                        P.forget_caption()))
    blocks.append(Image("Per-unit half-life", fig_l, f"{rel_dir}/{FIGURES['half_life']}",
                        P.half_life_caption()))
    return Section(TITLE, blocks)


sections = in_report(section)
