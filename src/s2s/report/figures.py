"""Figures of the report (matplotlib, Agg canvas, no pyplot global state).

* :func:`figure3`: the paper's Figure 3 from *our* group BLEU (``figure3.csv``): left, BLEU by
  source sentence length; right, BLEU by average source-word frequency rank. Two curves: our
  "LSTM" system and our "baseline". The paper's own curves are not data we have and are not drawn.
* :func:`learning_curves`: small multiples of dev (solid) and train (dashed) perplexity per
  epoch, one panel per model; ensemble members share one panel as a band.
* :func:`attention_weights`: heat maps of an attention model's weights on its own translations.

matplotlib is imported here only, and only the report stage imports this module.
"""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

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
    styles = [dict(color="tab:red", marker="o"), dict(color="tab:blue", marker="s", ls="--")]
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
    for ax in axes[(nrows - 1) * ncols:]:
        ax.set_xlabel("epoch", fontsize=9)
    for ax in axes[::ncols]:
        ax.set_ylabel("perplexity (log)", fontsize=9)
    fig.suptitle("Learning curves: dev perplexity (solid) and train perplexity (dashed)",
                 fontsize=11)
    fig.tight_layout()
    return save(fig, path)


def attention_weights(examples: list[dict], path: Path, *, title: str) -> Path:
    """One heat map per example: rows are the target words the model produced (ending in <eos>),
    columns the source words; each row is a distribution over the source (weights sum to 1)."""
    n = max(len(examples), 1)
    cols = min(n, 2)
    rows = -(-n // cols)
    fig = Figure(figsize=(6.2 * cols, 5.4 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    image = None
    for ax, ex in zip(axes, examples):
        image = ax.imshow(ex["weights"], cmap="Greys", vmin=0.0, vmax=1.0, aspect="auto")
        ax.set_xticks(range(len(ex["source"])), ex["source"], rotation=60, ha="right",
                      fontsize=8)
        ax.set_yticks(range(len(ex["target"])), ex["target"], fontsize=8)
        ax.set_title(f"test sentence {ex['index'] + 1}", fontsize=9)
    for ax in axes[len(examples):]:
        ax.axis("off")
    if not examples:
        axes[0].text(0.5, 0.5, "no examples", ha="center", transform=axes[0].transAxes)
    if image is not None:
        fig.colorbar(image, ax=list(axes), shrink=0.6, label="attention weight")
    fig.suptitle(title, fontsize=11)
    return save(fig, path)
