"""The memory of a one-word change: how fast the encoder forgets a substituted source word,
measured and through the gate alone (memory_decay.csv, memory_half_life.csv, and the gate's
share of memory_gate_share.csv)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from s2s.analysis.outputs import Analyses
from s2s.arch import LSTM_CELLS
from s2s.report import figures
from s2s.report.render import Image, Section, Table
from s2s.report.sections import fixed, model_label, prose
from s2s.report.sections.analysis import in_report

TITLE = "Memory of a one-word change"
FIGURES = {"memory": "analysis_memory.png"}


def section(a: Analyses, figures_dir: Path, rel_dir: str) -> Section:
    P, info = prose("memory"), a.meta.memory
    models = info.models
    if a.decay.empty:
        return Section(TITLE, [P.memory_none()])
    labels = {m: model_label(m, v.reverse_source) for m, v in models.items()}
    fig = figures.memory_decay(a.decay, figures_dir / FIGURES["memory"], labels=labels)
    blocks: list = [P.memory_text(info.substituted, info.sentences, info.rule,
                                  info.examples[:3], info.steps)]
    shares = {(r["model"], int(r["layer"])): r["gate_share"] for _, r in a.gate_share.iterrows()}
    rows = []
    for _, r in a.half_life.iterrows():
        model, layer = r["model"], int(r["layer"])
        lstm = models[model].cell in LSTM_CELLS if model in models else True
        share = shares[model, layer]
        label = labels.get(model, model)
        rows.append({"model": label, "layer": layer,
                     "half-life c": fixed(r["half_life_c"], 2),
                     "through f alone": fixed(r["half_life_forget_only"], 2),
                     "half-life h": fixed(r["half_life_h"], 2),
                     "h through z alone": fixed(r["half_life_update_only"], 2),
                     "gate alone / measured": fixed(share, 2)})
        what = "c" if lstm else "h"
        gate = "forget gate" if lstm else "update gate"
        mine = r["half_life_c"] if lstm else r["half_life_h"]
        alone = r["half_life_forget_only"] if lstm else r["half_life_update_only"]
        blocks.append(P.memory_layer(label, layer, what, fixed(mine, 2), info.steps,
                                     fixed(alone, 2), gate, fixed(share, 2), share))
    blocks.append(Table("Half-lives of a one-word change in the encoder (steps)",
                        pd.DataFrame(rows),
                        notes=(f"inf: the difference stays above half its first value for the "
                               f"{info.steps} steps measured; -: the cell has no such state "
                               f"(an LSTM has no update gate z, a GRU no memory cell c)",)))
    blocks.append(Image("Memory of a one-word change", fig, f"{rel_dir}/{FIGURES['memory']}",
                        P.memory_caption()))
    return Section(TITLE, blocks)


sections = in_report(section)
