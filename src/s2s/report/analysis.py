"""The report's analysis sections, from the `analysis` stage's artifacts (see
:mod:`s2s.stages.analyze`): the paper's Figure 2, forget-gate statistics, gradient reach (at the
end and over training), and the memory of a one-word change.

* :func:`sections` returns report sections (:class:`~s2s.report.render.Section`) with tables,
  figures and text whose every number is read from the artifacts; :func:`markdown` renders them
  alone. Figures are written into ``figures_dir`` as ``analysis_*.png``.

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
    info = meta.figure2
    rep = {"top": "the top layer's final hidden state h",
           "all": "the final hidden states h of all layers, concatenated",
           "state": "the final h and c of all layers, concatenated"}[info.representation]
    unk = sorted({t for p in info.phrases for t in p.unk})
    blocks: list = [
        f"Each phrase is encoded by the model and represented by {rep} "
        f"({int(summary['dim'].iloc[0])} numbers); PCA (per model) projects them to 2-D. "
        "The paper (§3.8, Figure 2): phrases that differ only in word order land apart, while "
        "active and passive paraphrases land together. Phrases of one colour share a meaning; "
        "two phrases of different meanings made of the same words are a word-order swap. "
        "Distances below are Euclidean in the full representation, divided by the mean "
        "distance over all phrase pairs.",
        "Tokens outside the source vocabulary (read as <unk>): "
        + (", ".join(unk) if unk else "none") + ".",
    ]
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
            verdict = "closer than" if p < w else "not closer than"
            claims.append(f"{label}: paraphrases at {p:.2f} are {verdict} word-order swaps at "
                          f"{w:.2f}; {100 * s['nn_same_meaning']:.0f}% of phrases have a "
                          f"nearest neighbour of the same meaning; PC1+PC2 explain "
                          f"{100 * (s['explained_pc1'] + s['explained_pc2']):.0f}% of the "
                          "variance.")
    blocks += claims
    blocks.append(Table("Figure 2 phrases: PCA variance and relative distances",
                        pd.DataFrame(rows)))
    blocks.append(Image("Figure 2 (ours)", fig, f"{rel_dir}/{FIGURES['figure2']}",
                        "2-D PCA of the encoder's final state of each phrase; colour = meaning "
                        "group"))
    return Section("Figure 2: phrase representations (PCA)", blocks)


def _forget_section(hist, units, summary, meta, figures_dir: Path, rel_dir: str) -> Section:
    models = meta.models
    if summary.empty:
        return Section("Forget gates", [
            "No forget gates: none of the analysed models (" + ", ".join(models) + ") is the "
            "paper's encoder-decoder with LSTM cells."])
    fig_h = figures.forget_gates(hist, figures_dir / FIGURES["forget"])
    fig_l = figures.half_life(units, figures_dir / FIGURES["half_life"])
    n = meta.test.gate_sentences
    blocks: list = [
        f"Forget gates recomputed step by step with each model's own weights over {n} test "
        "sentences: the encoder reading the source in the model's own order, the decoder "
        "teacher-forced on the reference; padding excluded. A unit whose forget gate is f keeps "
        "f^n of its memory after n steps, a half-life of ln 0.5 / ln f steps (from the unit's "
        "mean f). Boundary vs inside: "
        + meta.forget.boundary + ".",
    ]
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
        blocks.append(f"The mean forget gate at boundaries is lower than inside in {lower} of "
                      f"{compared} (model, stack, layer) rows: a boundary "
                      f"{'tends to' if 2 * lower > compared else 'does not tend to'} reset the "
                      "memory more than an ordinary word.")
    enc = summary[summary["stack"] == "encoder"]
    if len(enc):
        long = ", ".join(
            f"{m} {100 * (df['units_half_life_above_10'] * df['units']).sum() / df['units'].sum():.1f}%"
            for m, df in enc.groupby("model", sort=False))
        top = enc.sort_values("max_half_life").iloc[-1]
        blocks.append(f"Encoder units whose half-life is above 10 steps: {long}; the longest: "
                      f"{_f(top['max_half_life'], 1)} steps ({top['model']}, layer "
                      f"{int(top['layer'])}). Median half-lives: "
                      + ", ".join(f"{r['model']} layer {int(r['layer'])} "
                                  f"{_f(r['median_half_life'], 2)}" for _, r in enc.iterrows())
                      + " steps.")
    blocks.append(Table("Forget gates per model, stack and layer", pd.DataFrame(rows)))
    blocks.append(Image("Forget-gate distributions", fig_h, f"{rel_dir}/{FIGURES['forget']}",
                        "Density of forget-gate values over the test set"))
    blocks.append(Image("Per-unit half-life", fig_l, f"{rel_dir}/{FIGURES['half_life']}",
                        "Cumulative distribution of the half-life ln 0.5 / ln f of each unit"))
    return Section("Forget gates", blocks)


def _reach_section(reach, meta, figures_dir: Path, rel_dir: str) -> Section:
    labels = {m: _label(m, bool(df["reverse_source"].iloc[0]))
              for m, df in reach[reach["sentences"] > 0].groupby("model", sort=False)}
    fig = figures.gradient_reach(reach, figures_dir / FIGURES["reach"], labels=labels)
    test = meta.test
    blocks: list = [
        f"The paper's argument for reversing the source (§3.3): it puts the first source words "
        "close to the first target words (short-term dependencies), so backpropagation has "
        "an easier time 'establishing communication' between them. Measured on "
        f"{test.reach_sentences} test sentences of at least {test.reach_min_length} words: "
        + meta.gradient_reach.definition + ".",
    ]
    first = {m: first_positions(reach, m) for m in dict.fromkeys(reach["model"])}
    rev = {m: bool(reach[reach["model"] == m]["reverse_source"].iloc[0]) for m in first}
    fwd_models = [m for m in first if not rev[m]]
    rev_models = [m for m in first if rev[m]]
    for f in fwd_models:
        for r in rev_models:
            (nf, sf), (nr, sr) = first[f], first[r]
            ratio = nr / nf if nf > 0 else math.nan
            blocks.append(f"At the end of training, mean gradient norm at source positions "
                          f"1-{FIRST}: forward ({f}) {nf:.3g} vs reversed ({r}) {nr:.3g}, "
                          f"{ratio:.2f}x; share of the sentence's gradient there: {sf:.3f} vs "
                          f"{sr:.3f}: the reversed model's gradients reach the first source words "
                          + ("more" if nr > nf else "less") + " strongly once trained. The "
                          "paper's argument is about optimisation from the start: "
                          + REACH_STORY.format(early=EARLY) + " (section \"Gradient reach over "
                          "training\", and the claims table).")
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
                        "Gradient of -log p(y_1 | source) w.r.t. each source word's embedding, "
                        "by position in the original sentence"))
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
    if training.empty:
        return Section("Gradient reach over training", [
            "No snapshots of training were measured (the train stages of analysis.models keep "
            "them at analysis.snapshots)."])
    labels = {m: _label(m, bool(df["reverse_source"].iloc[0]))
              for m, df in training.groupby("model", sort=False)}
    first = first_over_training(training)
    share = diff[diff["statistic"] == "first_share"] if len(diff) else diff
    fig = figures.reach_over_training(first, share, figures_dir / FIGURES["reach_training"],
                                      labels=labels, upto=FIRST)
    fig_p = figures.reach_positions_over_training(
        training, figures_dir / FIGURES["reach_positions"], labels=labels)
    boot = meta.gradient_reach_training.bootstrap
    blocks: list = [
        "The gradient reach of the section above, measured on the same sentences at snapshots "
        "taken during training (epoch 0: the initialisation, before any update) and at the end. "
        "The paper's argument (§3.3) is about what makes the problem easier for SGD from the "
        f"start, so {REACH_STORY.format(early=EARLY)}; later the model has learned where to "
        "look, whichever order it reads. The difference is reversed "
        f"minus forward of each sentence's share of its gradient at source positions 1-{FIRST}, "
        f"with a 95% interval from {boot.samples} bootstrap resamples of the "
        "sentences (paired: the same sentences for both models).",
    ]
    if len(share):
        init = share[share["epoch"] == 0]
        early = share[(share["epoch"] > 0) & (share["epoch"] <= EARLY)]
        late = share[share["epoch"] > EARLY]
        for part, rows in (("At initialisation (reading order, nothing learned)", init),
                           ("Trained, early (the verdict)", early), ("Later", late)):
            if len(rows):
                blocks.append(f"{part}: " + "; ".join(
                    f"epoch {r['epoch']:g}: {r['reversed_mean']:.3f} reversed vs "
                    f"{r['forward_mean']:.3f} forward, {_interval(r)}"
                    for _, r in rows.iterrows()) + ".")
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
                        f"Gradient of -log p(y_1 | source) at source positions 1-{FIRST} by "
                        "training epoch (symlog axis), and reversed minus forward"))
    blocks.append(Image("Gradient reach by position over training", fig_p,
                        f"{rel_dir}/{FIGURES['reach_positions']}",
                        "Share of the gradient by original source position, one line per "
                        "snapshot (yellow: early, purple: late)"))
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
    info = meta.memory
    models = info.models
    if decay.empty:
        return Section("Memory of a one-word change", [
            "No memory rows: none of analysis.memory_models has an LSTM or GRU encoder."])
    labels = {m: _label(m, v.reverse_source) for m, v in models.items()}
    fig = figures.memory_decay(decay, figures_dir / FIGURES["memory"], labels=labels)
    ex = info.examples
    blocks: list = [
        f"One source word of each of {info.substituted} test sentences (of "
        f"{info.sentences}) is substituted: {info.rule}"
        + (" (e.g. " + "; ".join(f"'{e.old}' -> '{e.new}' at word {e.position}"
                                 for e in ex[:3]) + ")" if ex else "")
        + ". Both versions are encoded, and at each step after the changed word (in the "
        "model's reading order) the mean over units of |c' - c| and |h' - h| is taken, averaged "
        "over the sentences that have that step. Beside it, the first difference rolled forward "
        "through the forget gates alone (d_k = f_k * d_{k-1}, the unchanged run's gates, nothing "
        "fed back): what the forget gate alone would keep. The measured difference fades slower "
        "than the rolled one where the change comes back through the input path (the changed h "
        "feeding the gates and the candidate), faster where that path cancels it. For a GRU "
        "encoder the same is done for h through its update gate z. Half-life: the steps after "
        "which the mean difference first falls under half its value at the changed word "
        "(interpolated; inf: not within "
        f"{info.steps} steps).",
    ]
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
        blocks.append(
            f"{labels.get(r['model'], r['model'])}, layer {int(r['layer'])}: the change in "
            + (f"{what} does not fall to half within {info.steps} steps, "
               if mine == math.inf else f"{what} has a half-life of {_f(mine, 2)} steps, ")
            + f"{_f(alone, 2)} through the {gate} "
            f"alone; summed over the steps after it, the {gate} alone carries "
            f"{_f(share, 2)} of the measured difference"
            + (" (the rest comes back through the input path)." if share < 1 else
               " (the input path cancels part of what it keeps)." if share > 1 else "."))
    blocks.append(Table("Half-lives of a one-word change in the encoder (steps)",
                        pd.DataFrame(rows)))
    blocks.append(Image("Memory of a one-word change", fig, f"{rel_dir}/{FIGURES['memory']}",
                        "Mean |difference| of the encoder's state by steps after a substituted "
                        "word: measured, and rolled through the gate alone"))
    return Section("Memory of a one-word change", blocks)


def sections(a: dict, figures_dir: Path, *, rel_dir: str = "figures") -> list[Section]:
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
