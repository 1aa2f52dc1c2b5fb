"""Figures of the report (matplotlib, Agg canvas, no pyplot global state).

* :func:`figure3`: the paper's Figure 3 from *our* group BLEU (``figure3.csv``): left, BLEU by
  source sentence length; right, BLEU by average source-word frequency rank. Our "LSTM" system,
  our "baseline" and the compared models, each curve in a style of its own (:func:`curve_styles`).
  The paper's own curves are not data we have and are not drawn.
* :func:`learning_curves`: small multiples of dev (solid) and train (dashed) perplexity per
  epoch, one panel per model; ensemble members share one panel as a band.
* :func:`attention_weights`: heat maps of an attention model's weights on its own translations.
* the analyses' (:mod:`s2s.report.sections.analysis`): :func:`figure2` (the paper's Figure 2, PCA of the
  phrases' encodings), :func:`forget_gates` and :func:`half_life` (forget-gate statistics),
  :func:`gradient_reach`, :func:`reach_over_training` and :func:`reach_positions_over_training`
  (the same at the snapshots of training), :func:`memory_decay` (a one-word change's fade).

Every matplotlib call of the project is here, and only the report stage imports this module.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import LogLocator, MaxNLocator, NullFormatter, ScalarFormatter

from s2s.artifacts import AttentionExample
from s2s.io import atomic_open

PNG_META = {"Software": None}  # keep the files free of the matplotlib version stamp
DPI = 110


def save(fig: Figure, path: Path) -> Path:
    """Render with the Agg canvas and write through a temporary file and a rename."""
    path = Path(path)
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata=PNG_META)
    with atomic_open(path, "wb") as f:
        f.write(buf.getvalue())
    return path


# Figure 3's first curves (our LSTM, the baseline, the first two compared models), then more:
# every curve gets a style of its own (up to the colours and markers here, then they repeat).
_COLORS = ("tab:red", "tab:blue", "tab:green", "tab:purple", "tab:orange", "tab:brown",
           "tab:pink", "tab:gray", "tab:olive", "tab:cyan")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "h", "<")
_LINES = ("-", "--", "-.", ":")


def curve_styles(n: int) -> list[dict]:
    """`n` line styles for curves drawn on one panel, none left out."""
    return [dict(color=_COLORS[i % len(_COLORS)], marker=_MARKERS[i % len(_MARKERS)],
                 ls=_LINES[i % len(_LINES)]) for i in range(n)]


def figure3(groups: pd.DataFrame, curves: list[tuple[str, str, str]], path: Path, *,
            note: str = "") -> Path:
    """Two panels of group BLEU. ``curves``: (legend label, system, beam) rows of ``groups``
    (beam '' for rescoring outputs). Missing curves are listed in the panel instead of drawn."""
    fig = Figure(figsize=(11, 4.2))
    axes = fig.subplots(1, 2)
    titles = {"length": ("BLEU by sentence length", "source sentence length (words); "
                         "point at the group's mean"),
              "rarity": ("BLEU by average word-frequency rank",
                         "average frequency rank of the source words; point at the group's mean")}
    styles = curve_styles(len(curves))
    beam = groups["beam"].fillna("").astype(str) if len(groups) else groups.get("beam")
    for ax, axis in zip(axes, ("length", "rarity")):
        absent = []
        for (label, system, b), style in zip(curves, styles):
            sel = groups[(groups["system"] == system) & (beam == str(b)) & (groups["axis"] == axis)]
            if sel.empty:
                absent.append(label)
                continue
            sel = sel.sort_values("mean")
            ax.plot(sel["mean"], sel["bleu"], label=label, lw=1.8, ms=5, **style)
            if axis == "length":
                ax.set_xticks(list(sel["mean"]), list(sel["label"]), rotation=45, fontsize=8)
        title, xlabel = titles[axis]
        ax.set_title(title, fontsize=11)
        ax.set_xlabel(xlabel, fontsize=9)
        ax.set_ylabel("BLEU (tokenized, per group)", fontsize=9)
        ax.grid(alpha=0.3)
        if absent:
            ax.text(0.02, 0.02, "no data: " + ", ".join(absent), transform=ax.transAxes,
                    fontsize=8, color="0.4")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=9, loc="best")
    if note:
        fig.text(0.5, 0.005, note, ha="center", va="bottom", fontsize=8, color="0.35")
    fig.tight_layout(rect=(0, 0.05 if note else 0, 1, 1))
    return save(fig, path)


def learning_curves(curves: dict[str, pd.DataFrame], path: Path, *,
                    groups: dict[str, list[str]] | None = None) -> Path:
    """Small multiples, one panel per model or group of models: dev perplexity (solid, dots) and
    train perplexity (dashed) per epoch, on one shared log scale. A group of several members (the
    reversed ensemble's) is drawn as a band (min to max over members) around their median."""
    groups = groups or {m: [m] for m in sorted(curves)}
    groups = {g: [m for m in ms if m in curves] for g, ms in groups.items()}
    groups = {g: ms for g, ms in groups.items() if ms}
    if not groups:
        fig = Figure(figsize=(8, 2.5))
        ax = fig.subplots()
        ax.text(0.5, 0.5, "no learning curves found", ha="center", transform=ax.transAxes)
        ax.set_axis_off()
        return save(fig, path)
    ncols = min(3, len(groups))
    nrows = -(-len(groups) // ncols)
    fig = Figure(figsize=(3.6 * ncols, 2.7 * nrows))
    axes = fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False).ravel()
    for ax, (group, members) in zip(axes, groups.items()):
        for col, color, ls in (("dev_ppl", "C0", "-"), ("train_ppl", "C1", "--")):
            frames = [curves[m].dropna(subset=[col]).set_index("epoch")[col] for m in members]
            frames = [f for f in frames if len(f)]
            if not frames:
                continue
            label = "dev" if col == "dev_ppl" else "train"
            if len(frames) == 1:
                f = frames[0]
                ax.plot(f.index, f.values, color=color, ls=ls, lw=1.5,
                        marker="o" if col == "dev_ppl" else None, ms=3, label=label)
            else:
                both = pd.concat(frames, axis=1)
                ax.fill_between(both.index, both.min(axis=1), both.max(axis=1), color=color,
                                alpha=0.25, lw=0, label=f"{label}: min-max of {len(frames)}")
                ax.plot(both.index, both.median(axis=1), color=color, ls=ls, lw=1.5,
                        marker="o" if col == "dev_ppl" else None, ms=3,
                        label=f"{label}: median")
        ax.set_title(group if len(members) == 1 else f"{group} ({len(members)} members)",
                     fontsize=10)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    for ax in axes[len(groups):]:
        ax.set_axis_off()
    axes[0].set_yscale("log")
    axes[0].yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    axes[0].yaxis.set_major_formatter(ScalarFormatter())
    axes[0].yaxis.set_minor_formatter(NullFormatter())
    for i, ax in enumerate(axes[:len(groups)]):
        if i + ncols >= len(groups):  # nothing drawn below it: the bottom of its column
            ax.xaxis.set_tick_params(labelbottom=True)
            ax.set_xlabel("epoch", fontsize=9)
    for ax in axes[::ncols]:
        ax.set_ylabel("perplexity (log)", fontsize=9)
    fig.suptitle("Learning curves: dev perplexity (solid) and train perplexity (dashed)",
                 fontsize=11)
    fig.tight_layout()
    return save(fig, path)


def attention_weights(examples: Sequence[AttentionExample], path: Path, *, title: str) -> Path:
    """One heat map per example: rows are the target words the model produced (ending in <eos>),
    columns the source words; each row is a distribution over the source (weights sum to 1)."""
    n = max(len(examples), 1)
    cols = min(n, 2)
    rows = -(-n // cols)
    fig = Figure(figsize=(6.2 * cols, 5.4 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    image = None
    for ax, ex in zip(axes, examples):
        image = ax.imshow(ex.weights, cmap="Greys", vmin=0.0, vmax=1.0, aspect="auto")
        ax.set_xticks(range(len(ex.source)), ex.source, rotation=60, ha="right",
                      fontsize=8)
        ax.set_yticks(range(len(ex.target)), ex.target, fontsize=8)
        ax.set_title(f"test sentence {ex.index + 1}", fontsize=9)
    for ax in axes[len(examples):]:
        ax.axis("off")
    if not examples:
        axes[0].text(0.5, 0.5, "no examples", ha="center", transform=axes[0].transAxes)
    if image is not None:
        fig.colorbar(image, ax=list(axes), shrink=0.6, label="attention weight")
    fig.suptitle(title, fontsize=11)
    return save(fig, path)


# --- the analyses (s2s.report.sections.analysis) ---------------------------------------------


def init_reach(df: pd.DataFrame, path: Path) -> Path:
    """The gradient reaching each input at initialisation, relative to the last one's, by how
    many steps back it is (log scale): one line per cell (vanilla RNN, LSTM per forget bias)."""
    fig = Figure(figsize=(7.5, 4.2))
    ax = fig.subplots()
    for (cell, bias), sel in df.groupby(["cell", "forget_bias"], dropna=False, sort=False):
        label = "vanilla RNN (tanh)" if cell == "rnn" else f"LSTM, forget bias {bias:g}"
        sel = sel.sort_values("steps_back")
        ax.plot(sel["steps_back"], sel["relative"], label=label, lw=1.6)
    ax.set_yscale("log")
    ax.set_xlabel("steps back from the last output", fontsize=9)
    ax.set_ylabel("gradient norm / the last input's (mean over seeds)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save(fig, path)


# --- figures -------------------------------------------------------------------------------------


def figure2(points: pd.DataFrame, path: Path, *, titles: dict[str, str]) -> Path:
    """One panel per model: the phrases' 2-D PCA coordinates, coloured by meaning group (as in the
    paper's Figure 2), one marker per phrase of a group, and a legend that names every phrase
    (labels written beside the points overlap where paraphrases land close together)."""
    models = list(dict.fromkeys(points["model"]))
    markers = "osD^vP*X"
    fig = Figure(figsize=(5.2 * max(len(models), 1), 6.4))
    axes = np.atleast_1d(fig.subplots(1, max(len(models), 1)))
    handles = {}
    for ax, model in zip(axes, models):
        sel = points[points["model"] == model]
        seen: dict[int, int] = {}
        for _, row in sel.iterrows():
            g = int(row["group"])
            k = seen.get(g, 0)
            seen[g] = k + 1
            color = f"C{(g - 1) % 10}"
            h = ax.scatter([row["x"]], [row["y"]], color=color, marker=markers[k % len(markers)],
                           s=46, zorder=3, edgecolors="white", linewidths=0.5)
            handles.setdefault(row["phrase"], h)
        x0, x1 = sel["x"].min(), sel["x"].max()
        y0, y1 = sel["y"].min(), sel["y"].max()
        dx, dy = (x1 - x0) or 1.0, (y1 - y0) or 1.0
        ax.set_xlim(x0 - 0.1 * dx, x1 + 0.1 * dx)
        ax.set_ylim(y0 - 0.1 * dy, y1 + 0.1 * dy)
        ax.set_title(titles.get(model, model), fontsize=11)
        ax.set_xlabel("PC1", fontsize=9)
        ax.set_ylabel("PC2", fontsize=9)
        ax.grid(alpha=0.3)
    fig.legend(list(handles.values()), list(handles), loc="lower center", fontsize=8,
               ncol=2 if len(handles) > 6 else 1, frameon=False,
               title="phrase (colour: meaning group; marker: paraphrase)", title_fontsize=8)
    rows = -(-len(handles) // (2 if len(handles) > 6 else 1))
    fig.tight_layout(rect=(0, min(0.05 + 0.032 * rows, 0.5), 1, 1))
    return save(fig, path)


def forget_gates(hist: pd.DataFrame, path: Path) -> Path:
    """Density of forget-gate values: rows encoder/decoder, one column per layer, one step line
    per model."""
    stacks = [s for s in ("encoder", "decoder") if s in set(hist["stack"])]
    layers = sorted(set(hist["layer"]))
    # one colour per model in every panel (a panel may lack a model: a shallower one's layers)
    colours = {m: f"C{i % 10}" for i, m in enumerate(dict.fromkeys(hist["model"]))}
    fig = Figure(figsize=(4.2 * len(layers), 3.2 * len(stacks)))
    axes = np.atleast_2d(fig.subplots(len(stacks), len(layers), squeeze=False))
    handles = {}
    for r, stack in enumerate(stacks):
        for c, layer in enumerate(layers):
            ax = axes[r, c]
            sel = hist[(hist["stack"] == stack) & (hist["layer"] == layer)]
            for model, df in sel.groupby("model", sort=False):
                handles.setdefault(model, ax.stairs(
                    df["density"].to_numpy(), np.append(df["bin_lo"].to_numpy(),
                                                        df["bin_hi"].iloc[-1]),
                    color=colours[model], lw=1.4, label=model))
            ax.set_title(f"{stack}, layer {layer}", fontsize=10)
            ax.set_xlim(0, 1)
            ax.set_xlabel("forget gate value", fontsize=8)
            ax.set_ylabel("density", fontsize=8)
            ax.grid(alpha=0.3)
    axes[0, 0].legend([handles[m] for m in colours if m in handles],
                      [m for m in colours if m in handles], fontsize=8)
    fig.tight_layout()
    return save(fig, path)


def half_life(units: pd.DataFrame, path: Path) -> Path:
    """Per unit, the half-life its mean forget gate implies: cumulative share of units, log x."""
    stacks = [s for s in ("encoder", "decoder") if s in set(units["stack"])]
    fig = Figure(figsize=(5.2 * len(stacks), 3.8))
    axes = np.atleast_1d(fig.subplots(1, len(stacks)))
    styles = ["-", "--", ":", "-."]
    models = list(dict.fromkeys(units["model"]))
    for ax, stack in zip(axes, stacks):
        for i, model in enumerate(models):
            for layer in sorted(set(units["layer"])):
                sel = units[(units["model"] == model) & (units["stack"] == stack)
                            & (units["layer"] == layer)]
                if sel.empty:
                    continue
                hl = np.sort(np.clip(sel["half_life"].to_numpy(dtype=float), 1e-2, 1e4))
                ax.step(hl, np.arange(1, len(hl) + 1) / len(hl), where="post", color=f"C{i}",
                        ls=styles[(layer - 1) % len(styles)], lw=1.3,
                        label=f"{model}, layer {layer}")
        ax.set_xscale("log")
        ax.set_title(f"{stack}: half-life ln 0.5 / ln f of each unit", fontsize=10)
        ax.set_xlabel("half-life (steps, log scale; clipped to [0.01, 10^4])", fontsize=8)
        ax.set_ylabel("share of units with a shorter half-life", fontsize=8)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return save(fig, path)


def gradient_reach(reach: pd.DataFrame, path: Path, *, labels: dict[str, str]) -> Path:
    """Gradient norm (left) and share of the sentence's gradient (right) by source position."""
    fig = Figure(figsize=(11, 4.2))
    axes = fig.subplots(1, 2)
    for i, (model, df) in enumerate(reach.groupby("model", sort=False)):
        df = df[df["sentences"] > 0]
        label = labels.get(model, model)
        style = dict(color=f"C{i}", marker="o" if i % 2 == 0 else "s", ms=4, lw=1.6)
        axes[0].plot(df["position"], df["mean_norm"], label=label, **style)
        axes[1].plot(df["position"], df["mean_share"], label=label, **style)
    axes[0].set_yscale("log")
    for ax in axes:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes[0].set_ylabel("mean ||d loss(y_1) / d embedding|| (log)", fontsize=9)
    axes[1].set_ylabel("mean share of the sentence's gradient norm", fontsize=9)
    for ax, title in zip(axes, ("Gradient of the first target word's loss",
                                "The same, as a share of each sentence's total")):
        ax.set_xlabel("source position in the original sentence (1 = first word)", fontsize=9)
        ax.set_title(title, fontsize=11)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=9)
    fig.tight_layout()
    return save(fig, path)


def reach_over_training(first: pd.DataFrame, diff: pd.DataFrame, path: Path, *,
                        labels: dict[str, str], upto: int) -> Path:
    """Over training epochs: the mean gradient norm (left, log) and the mean share (middle) at
    source positions 1..upto per model (first: model, epoch, norm, share), and reversed -
    forward of the share with its bootstrap interval (right; diff: epoch, diff, lo, hi)."""
    fig = Figure(figsize=(14, 4.2))
    axes = fig.subplots(1, 3)
    for i, (model, df) in enumerate(first.groupby("model", sort=False)):
        style = dict(color=f"C{i}", marker="o" if i % 2 == 0 else "s", ms=4, lw=1.6,
                     label=labels.get(model, model))
        axes[0].plot(df["epoch"], df["norm"], **style)
        axes[1].plot(df["epoch"], df["share"], **style)
    axes[0].set_yscale("log")
    axes[0].set_ylabel(f"mean gradient norm at positions 1-{upto} (log)", fontsize=9)
    axes[1].set_ylabel(f"mean share of the gradient at positions 1-{upto}", fontsize=9)
    if len(diff):
        axes[2].errorbar(diff["epoch"], diff["diff"],
                         yerr=[diff["diff"] - diff["lo"], diff["hi"] - diff["diff"]],
                         color="C2", marker="o", ms=4, capsize=3, lw=1.4,
                         label="reversed - forward (95% bootstrap interval)")
    axes[2].axhline(0, color="0.4", lw=0.8)
    axes[2].set_ylabel(f"difference of the share at positions 1-{upto}", fontsize=9)
    epochs = sorted(set(first["epoch"]))
    for ax, title in zip(axes, ("Gradient of -log p(y_1) at the first source words",
                                "The same, as a share of the sentence's total",
                                "Reversed minus forward")):
        ax.set_xlabel("training epoch (0: initialisation; symlog axis)", fontsize=9)
        ax.set_xscale("symlog", linthresh=0.25)
        ax.set_xticks(epochs, [f"{e:g}" for e in epochs], fontsize=8)
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_title(title, fontsize=11)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    fig.tight_layout()
    return save(fig, path)


def reach_positions_over_training(training: pd.DataFrame, path: Path, *,
                                  labels: dict[str, str]) -> Path:
    """One panel per model: the mean share of the gradient by original source position, one
    line per epoch (yellow: early, purple: late)."""
    models = list(dict.fromkeys(training["model"]))
    fig = Figure(figsize=(5.5 * len(models), 4.0))
    axes = np.atleast_1d(fig.subplots(1, len(models), sharey=True))
    epochs = sorted(set(training["epoch"]))
    for ax, model in zip(axes, models):
        for j, epoch in enumerate(epochs):
            df = training[(training["model"] == model) & (training["epoch"] == epoch)
                          & (training["sentences"] > 0)]
            if df.empty:
                continue
            ax.plot(df["position"], df["mean_share"], lw=1.5, label=f"epoch {epoch:g}",
                    color=colormaps["viridis"](0.9 * (1 - j / max(len(epochs) - 1, 1))))
        ax.set_title(labels.get(model, model), fontsize=11)
        ax.set_xlabel("source position in the original sentence (1 = first word)", fontsize=9)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("mean share of the sentence's gradient norm", fontsize=9)
    fig.tight_layout()
    return save(fig, path)


def memory_decay(decay: pd.DataFrame, path: Path, *, labels: dict[str, str]) -> Path:
    """One panel per (model, layer): the mean |difference| of the encoder's state after a
    one-word change, by steps after it (log y): c measured (solid), c rolled through the forget
    gates alone (dashed), h measured (dotted); for a GRU, h measured and rolled through its
    update gate."""
    panels = list(dict.fromkeys(zip(decay["model"], decay["layer"])))
    cols = min(len(panels), 4)
    rows = -(-len(panels) // cols)
    fig = Figure(figsize=(4.2 * cols, 3.4 * rows))
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).ravel()
    for ax, (model, layer) in zip(axes, panels):
        df = decay[(decay["model"] == model) & (decay["layer"] == layer)
                   & (decay["sentences"] > 0)]
        k = df["steps_after"]
        lines = (("mean_abs_dc", "|c' - c|", "-", "C0"),
                 ("forget_only_dc", "through f alone", "--", "C0"),
                 ("mean_abs_dh", "|h' - h|", ":", "C3"),
                 ("update_only_dh", "h through z alone", "--", "C3"))
        for col, label, ls, color in lines:
            y = df[col].to_numpy(dtype=float)
            if np.isfinite(y).any():
                ax.plot(k, y, ls=ls, color=color, lw=1.5, label=label)
        ax.set_yscale("log")
        ax.set_title(f"{labels.get(model, model)}, layer {int(layer)}", fontsize=10)
        ax.set_xlabel("steps after the changed word", fontsize=8)
        ax.set_ylabel("mean |difference| per unit (log)", fontsize=8)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    fig.tight_layout()
    return save(fig, path)
