"""The models: every model of the profile, what it is, its size, perplexities and speed."""

from __future__ import annotations

import pandas as pd

from s2s.artifacts import TrainMetrics
from s2s.config import Params
from s2s.report.render import NOT_RUN, Section, Table, fmt_frame
from s2s.report.sections import Context, prose


def sections(ctx: Context) -> list[Section]:
    P = prose("models")
    trained = models_table(ctx.params, ctx.art.train)
    table = Table(
        P.models_title(),
        fmt_frame(trained, {"epochs": 2, "target words/s": 0, "train minutes": 1}),
        (P.models_note(),), "models", numbers=trained)
    return [Section("The models", [table])]


def models_table(params: Params, train: dict[str, TrainMetrics]) -> pd.DataFrame:
    """Every model of the profile: what it is, its size, perplexities and training speed."""
    rows = []
    for name in params.models:
        cfg = params.model_config(name)
        m = train.get(name)
        rows.append({"model": name, "architecture": cfg.describe(),
                     "layers x cells": cfg.size(),
                     "source": "reversed" if cfg.reverse_source else "forward",
                     "parameters": m.parameters if m else None,
                     "epochs": m.epochs if m else None,
                     "dev ppl": m.dev_ppl if m else None, "test ppl": m.test_ppl if m else None,
                     "target words/s": m.tgt_words_per_sec if m else None,
                     "precision": m.precision if m else None,
                     # the training loop's time, summed over every resume
                     "train minutes": m.train_seconds / 60 if m else None,
                     "status": "ours" if m else f"{NOT_RUN}: no metrics/train/{name}.json"})
    # a count stays whole where a model has no metrics (None would make the column float)
    return pd.DataFrame(rows).astype({"parameters": "Int64"})
