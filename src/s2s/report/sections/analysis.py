"""The report's analysis sections, from the `analysis` stage's artifacts (see
:mod:`s2s.stages.analyze`): the paper's Figure 2, forget-gate statistics, gradient reach (at the
end and over training), and the memory of a one-word change.

* :func:`sections` returns the report's five sections (:class:`~s2s.report.render.Section`)
  with tables, figures and text whose every number is read from the artifacts, none where the
  profile has no analyze stage; :func:`render` makes them from the artifacts alone. Figures are
  written into ``figures_dir`` as ``analysis_*.png``.

The figures are drawn by :mod:`s2s.report.figures` (the only module that calls matplotlib).
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from s2s.report import figures
from s2s.report.checks import EARLY, FIRST, REACH_STORY, first_positions
from s2s.report.checks import interval as _interval
from s2s.report.render import Image, Section, Table
from s2s.report.sections import Context, prose

FIGURES = {"figure2": "analysis_figure2.png", "forget": "analysis_forget_gates.png",
           "half_life": "analysis_half_life.png", "reach": "analysis_gradient_reach.png",
           "reach_training": "analysis_gradient_reach_training.png",
           "reach_positions": "analysis_gradient_reach_positions.png",
           "memory": "analysis_memory.png"}


def _label(model: str, reverse: bool) -> str:
    direction = "reversed" if reverse else "forward"
    return model if direction in model else f"{model} ({direction})"


def _f(v: float, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "inf" if isinstance(v, float) and v == math.inf else "-"
    return f"{v:.{digits}f}"


# --- sections ------------------------------------------------------------------------------------


def _figure2_section(points, summary, meta, figures_dir: Path, rel_dir: str) -> Section:
    titles = {m: _label(m, bool(df["reverse_source"].iloc[0]))
              for m, df in points.groupby("model", sort=False)}
    fig = figures.figure2(points, figures_dir / FIGURES["figure2"], titles=titles)
    P, info = prose("analysis"), meta.figure2
    unk = sorted({t for p in info.phrases for t in p.unk})
    blocks: list = [P.figure2_text(info.representation, int(summary["dim"].iloc[0])),
                    P.figure2_unk(unk)]
    rows, claims = [], []
    for _, s in summary.iterrows():
        label = _label(s["model"], bool(s["reverse_source"]))
        rows.append({"model": label, "PC1 var": _f(s["explained_pc1"], 2),
                     "PC2 var": _f(s["explained_pc2"], 2),
                     "paraphrase dist": _f(s["paraphrase_distance"], 2),
                     "swap dist": _f(s["swap_distance"], 2),
                     "nearest neighbour same meaning": _f(s["nn_same_meaning"], 2),
                     "pairs (para/swap)": f"{s['paraphrase_pairs']}/{s['swap_pairs']}"})
        p, w = s["paraphrase_distance"], s["swap_distance"]
        if math.isfinite(p) and math.isfinite(w):
            claims.append(P.figure2_model(
                label, f"{p:.2f}", p < w, f"{w:.2f}", f"{100 * s['nn_same_meaning']:.0f}",
                f"{100 * (s['explained_pc1'] + s['explained_pc2']):.0f}"))
    blocks += claims
    blocks.append(Table("Figure 2 phrases: PCA variance and relative distances",
                        pd.DataFrame(rows)))
    blocks.append(Image("Figure 2 (ours)", fig, f"{rel_dir}/{FIGURES['figure2']}",
                        P.figure2_caption()))
    return Section("Figure 2: phrase representations (PCA)", blocks)


def _forget_section(hist, units, summary, meta, figures_dir: Path, rel_dir: str) -> Section:
    P, models = prose("analysis"), meta.models
    if summary.empty:
        return Section("Forget gates", [P.forget_none(list(models))])
    fig_h = figures.forget_gates(hist, figures_dir / FIGURES["forget"])
    fig_l = figures.half_life(units, figures_dir / FIGURES["half_life"])
    blocks: list = [P.forget_text(meta.test.gate_sentences, meta.forget.boundary)]
    rows = []
    lower = 0
    compared = 0
    for _, s in summary.iterrows():
        rev = models[s["model"]].reverse_source if s["model"] in models else None
        b, i = s["boundary_mean_f"], s["inside_mean_f"]
        if math.isfinite(b) and math.isfinite(i):
            compared += 1
            lower += b < i
        rows.append({"model": s["model"] if rev is None else _label(s["model"], rev),
                     "stack": s["stack"], "layer": int(s["layer"]), "steps": int(s["steps"]),
                     "mean f": _f(s["mean_f"]), "at boundaries": _f(b), "inside": _f(i),
                     "boundary steps": int(s["boundary_steps"]),
                     "median half-life": _f(s["median_half_life"], 2),
                     "longest half-life": _f(s["max_half_life"], 1),
                     "units f > 0.9": _f(s["units_f_above_0.9"], 2),
                     "units half-life > 10": _f(s["units_half_life_above_10"], 2)})
    if compared:
        blocks.append(P.forget_boundaries(lower, compared))
    enc = summary[summary["stack"] == "encoder"]
    if len(enc):
        long = ", ".join(
            f"{m} {100 * (df['units_half_life_above_10'] * df['units']).sum() / df['units'].sum():.1f}%"
            for m, df in enc.groupby("model", sort=False))
        top = enc.sort_values("max_half_life").iloc[-1]
        medians = ", ".join(f"{r['model']} layer {int(r['layer'])} "
                            f"{_f(r['median_half_life'], 2)}" for _, r in enc.iterrows())
        blocks.append(P.forget_long(long, _f(top["max_half_life"], 1), top["model"],
                                    int(top["layer"]), medians))
    blocks.append(Table("Forget gates per model, stack and layer", pd.DataFrame(rows)))
    blocks.append(Image("Forget-gate distributions", fig_h, f"{rel_dir}/{FIGURES['forget']}",
                        P.forget_caption()))
    blocks.append(Image("Per-unit half-life", fig_l, f"{rel_dir}/{FIGURES['half_life']}",
                        P.half_life_caption()))
    return Section("Forget gates", blocks)


def _reach_section(reach, meta, figures_dir: Path, rel_dir: str) -> Section:
    labels = {m: _label(m, bool(df["reverse_source"].iloc[0]))
              for m, df in reach[reach["sentences"] > 0].groupby("model", sort=False)}
    fig = figures.gradient_reach(reach, figures_dir / FIGURES["reach"], labels=labels)
    P, test = prose("analysis"), meta.test
    blocks: list = [P.reach_text(test.reach_sentences, test.reach_min_length,
                                 meta.gradient_reach.definition)]
    first = {m: first_positions(reach, m) for m in dict.fromkeys(reach["model"])}
    rev = {m: bool(reach[reach["model"] == m]["reverse_source"].iloc[0]) for m in first}
    fwd_models = [m for m in first if not rev[m]]
    rev_models = [m for m in first if rev[m]]
    for f in fwd_models:
        for r in rev_models:
            (nf, sf), (nr, sr) = first[f], first[r]
            ratio = nr / nf if nf > 0 else math.nan
            blocks.append(P.reach_end(FIRST, f, f"{nf:.3g}", r, f"{nr:.3g}", f"{ratio:.2f}",
                                      f"{sf:.3f}", f"{sr:.3f}", nr > nf,
                                      REACH_STORY.format(early=EARLY)))
    wide = reach.pivot_table(index="position", columns="model", values=["mean_norm", "mean_share"],
                             sort=False)
    count = reach.groupby("position")["sentences"].max()
    rows = []
    for pos in wide.index:
        row = {"position": int(pos), "sentences": int(count.loc[pos])}
        for m in first:
            row[f"norm {m}"] = _f(wide.loc[pos, ("mean_norm", m)], 4)
        for m in first:
            row[f"share {m}"] = _f(wide.loc[pos, ("mean_share", m)], 3)
        rows.append(row)
    blocks.append(Table("Gradient reach by original source position", pd.DataFrame(rows)))
    blocks.append(Image("Gradient reach", fig, f"{rel_dir}/{FIGURES['reach']}",
                        P.reach_caption()))
    return Section("Gradient reach by source position", blocks)


def first_over_training(training: pd.DataFrame, upto: int = FIRST) -> pd.DataFrame:
    """Per model and epoch: the mean gradient norm over (sentence, position) at positions
    1..upto (as first_positions) and the mean over sentences of the share of the sentence's
    gradient that reaches positions 1..upto (together); columns model, reverse_source, epoch,
    norm, share."""
    rows = []
    for (model, epoch), df in training.groupby(["model", "epoch"], sort=False):
        norm, _ = first_positions(df, model, upto)
        sel = df[(df["position"] <= upto) & (df["sentences"] > 0)]
        n = int(df.loc[df["position"] == 1, "sentences"].sum())
        share = float((sel["mean_share"] * sel["sentences"]).sum() / n) if n else math.nan
        rows.append({"model": model, "reverse_source": bool(df["reverse_source"].iloc[0]),
                     "epoch": float(epoch), "norm": norm, "share": share})
    return pd.DataFrame(rows, columns=["model", "reverse_source", "epoch", "norm", "share"]
                        ).sort_values(["model", "epoch"], kind="stable")


def _training_section(training, diff, meta, figures_dir: Path, rel_dir: str) -> Section:
    P = prose("analysis")
    if training.empty:
        return Section("Gradient reach over training", [P.training_none()])
    labels = {m: _label(m, bool(df["reverse_source"].iloc[0]))
              for m, df in training.groupby("model", sort=False)}
    first = first_over_training(training)
    share = diff[diff["statistic"] == "first_share"] if len(diff) else diff
    fig = figures.reach_over_training(first, share, figures_dir / FIGURES["reach_training"],
                                      labels=labels, upto=FIRST)
    fig_p = figures.reach_positions_over_training(
        training, figures_dir / FIGURES["reach_positions"], labels=labels)
    boot = meta.gradient_reach_training.bootstrap
    blocks: list = [P.training_text(REACH_STORY.format(early=EARLY), FIRST, boot.samples)]
    if len(share):
        init = share[share["epoch"] == 0]
        early = share[(share["epoch"] > 0) & (share["epoch"] <= EARLY)]
        late = share[share["epoch"] > EARLY]
        for part, rows in (("init", init), ("early", early), ("late", late)):
            if len(rows):
                blocks.append(P.training_part(part, [
                    P.training_epoch(f"{r['epoch']:g}", f"{r['reversed_mean']:.3f}",
                                     f"{r['forward_mean']:.3f}", _interval(r))
                    for _, r in rows.iterrows()]))
    rows = []
    for epoch, df in first.groupby("epoch", sort=True):
        row = {"epoch": f"{epoch:g}" + (" (initialisation)" if epoch == 0 else "")}
        for _, r in df.iterrows():
            row[f"norm {r['model']}"] = f"{r['norm']:.3g}"
        for _, r in df.iterrows():
            row[f"share {r['model']}"] = _f(r["share"], 3)
        if len(share):
            d = share[share["epoch"] == epoch]
            row["share: reversed - forward [95%]"] = _interval(d.iloc[0]) if len(d) else "-"
        rows.append(row)
    blocks.append(Table(f"Gradient reach at source positions 1-{FIRST} over training",
                        pd.DataFrame(rows)))
    blocks.append(Image("Gradient reach over training", fig,
                        f"{rel_dir}/{FIGURES['reach_training']}",
                        P.training_caption(FIRST)))
    blocks.append(Image("Gradient reach by position over training", fig_p,
                        f"{rel_dir}/{FIGURES['reach_positions']}",
                        P.positions_caption()))
    return Section("Gradient reach over training", blocks)


def explained(decay: pd.DataFrame, model: str, layer: int) -> float:
    """The share of the measured difference after the change (steps 1..K, summed) that the
    gate alone carries: sum of the rolled difference / sum of the measured one (c for an LSTM,
    h for a GRU); above 1, the input path cancels part of what the gate keeps."""
    df = decay[(decay["model"] == model) & (decay["layer"] == layer)
               & (decay["steps_after"] >= 1) & (decay["sentences"] > 0)]
    lstm = df["mean_abs_dc"].notna().any()
    measured = df["mean_abs_dc" if lstm else "mean_abs_dh"].sum()
    rolled = df["forget_only_dc" if lstm else "update_only_dh"].sum()
    return float(rolled / measured) if measured > 0 else math.nan


def _memory_section(decay, half, meta, figures_dir: Path, rel_dir: str) -> Section:
    P, info = prose("analysis"), meta.memory
    models = info.models
    if decay.empty:
        return Section("Memory of a one-word change", [P.memory_none()])
    labels = {m: _label(m, v.reverse_source) for m, v in models.items()}
    fig = figures.memory_decay(decay, figures_dir / FIGURES["memory"], labels=labels)
    blocks: list = [P.memory_text(info.substituted, info.sentences, info.rule,
                                  info.examples[:3], info.steps)]
    rows = []
    for _, r in half.iterrows():
        lstm = r["model"] not in models or models[r["model"]].cell not in ("gru", "cho_gru")
        share = explained(decay, r["model"], int(r["layer"]))
        rows.append({"model": labels.get(r["model"], r["model"]), "layer": int(r["layer"]),
                     "half-life c": _f(r["half_life_c"], 2),
                     "through f alone": _f(r["half_life_forget_only"], 2),
                     "half-life h": _f(r["half_life_h"], 2),
                     "h through z alone": _f(r["half_life_update_only"], 2),
                     "gate alone / measured": _f(share, 2)})
        what = "c" if lstm else "h"
        gate = "forget gate" if what == "c" else "update gate"
        mine = r["half_life_c"] if what == "c" else r["half_life_h"]
        alone = r["half_life_forget_only"] if what == "c" else r["half_life_update_only"]
        blocks.append(P.memory_layer(labels.get(r["model"], r["model"]), int(r["layer"]), what,
                                     _f(mine, 2), info.steps, _f(alone, 2), gate, _f(share, 2),
                                     share))
    blocks.append(Table("Half-lives of a one-word change in the encoder (steps)",
                        pd.DataFrame(rows)))
    blocks.append(Image("Memory of a one-word change", fig, f"{rel_dir}/{FIGURES['memory']}",
                        P.memory_caption()))
    return Section("Memory of a one-word change", blocks)


def sections(ctx: Context) -> list[Section]:
    """The five sections, from the inputs' analysis artifacts (none without them)."""
    return [] if ctx.art.analysis is None else render(ctx.art.analysis, ctx.fig_dir)


def render(a: dict, figures_dir: Path, *, rel_dir: str = "figures") -> list[Section]:
    """The analysis sections from the analyze stage's artifacts `a` (read once by
    :func:`s2s.report.inputs.read_analysis`); figures written into figures_dir, linked as
    rel_dir/<name> (rel_dir: figures_dir relative to the Markdown file)."""
    figures_dir = Path(figures_dir)
    return [_figure2_section(a["points"], a["figure2"], a["meta"], figures_dir, rel_dir),
            _forget_section(a["hist"], a["units"], a["forget"], a["meta"], figures_dir, rel_dir),
            _reach_section(a["reach"], a["meta"], figures_dir, rel_dir),
            _training_section(a["training"], a["training_diff"], a["meta"], figures_dir,
                              rel_dir),
            _memory_section(a["decay"], a["half_life"], a["meta"], figures_dir, rel_dir)]
