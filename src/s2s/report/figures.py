"""Figures of the report (matplotlib, Agg canvas, no pyplot global state).

* :func:`figure3`: the paper's Figure 3 from *our* group BLEU (``figure3.csv``): left, BLEU by
  source sentence length; right, BLEU by average source-word frequency rank. Two curves: our
  "LSTM" system and our "baseline". The paper's own curves are not data we have and are not drawn.
* :func:`learning_curves`: dev perplexity per epoch of every trained model in one chart (solid),
  train perplexity dashed in the same colour.
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


def learning_curves(curves: dict[str, pd.DataFrame], path: Path) -> Path:
    """Dev perplexity (solid, dev evaluations only) and train perplexity (dashed) per epoch."""
    fig = Figure(figsize=(8, 4.5))
    ax = fig.subplots()
    colors = [f"C{i}" for i in range(10)]
    drawn = 0
    for i, (model, df) in enumerate(sorted(curves.items())):
        color = colors[i % len(colors)]
        train = df.dropna(subset=["train_ppl"])
        dev = df.dropna(subset=["dev_ppl"])
        if len(dev):
            ax.plot(dev["epoch"], dev["dev_ppl"], color=color, marker="o", ms=3, lw=1.6,
                    label=model)
            drawn += 1
        if len(train):
            ax.plot(train["epoch"], train["train_ppl"], color=color, ls="--", lw=1.0, alpha=0.8,
                    label=None if len(dev) else model)
            drawn += 1
    if drawn:
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())
        # one entry per model (colour), plus what solid and dashed mean
        ax.plot([], [], color="0.3", lw=1.6, label="dev (solid)")
        ax.plot([], [], color="0.3", lw=1.0, ls="--", label="train (dashed)")
        ax.legend(fontsize=8, ncol=2)
    else:
        ax.text(0.5, 0.5, "no learning curves found", ha="center", transform=ax.transAxes)
    ax.set_xlabel("epoch")
    ax.set_ylabel("perplexity (log scale)")
    ax.set_title("Learning curves: dev perplexity (solid), train perplexity (dashed)", fontsize=11)
    ax.grid(alpha=0.3, which="both")
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
