"""Data: lines per corpus and what each training filter removed; the vocabularies."""

from __future__ import annotations

import pandas as pd

from s2s.artifacts import PrepareMetrics, TrainCounts, VocabMetrics
from s2s.report.render import Section, Table, fmt
from s2s.report.sections import Context, prose


def sections(ctx: Context) -> list[Section]:
    P, art = prose("data"), ctx.art
    blocks: list = []
    if art.prepare:
        blocks.append(Table(P.data_title(), prepare_table(art.prepare), (P.data_note(),),
                            "data"))
    if art.vocab:
        blocks.append(Table(P.vocab_title(), vocab_table(art.vocab), (P.vocab_note(),),
                            "vocab"))
    return [Section("Data", blocks or ["no data metrics found"])]


def prepare_table(prepare: PrepareMetrics) -> pd.DataFrame:
    """One row per split and corpus of metrics/prepare.json."""
    rows = []
    for split, corpora in prepare.splits.items():
        for corpus, c in corpora.items():
            filtered = isinstance(c, TrainCounts)  # dev and test are read whole
            removed = c.removed if filtered else {}
            rows.append({"split": split, "corpus": corpus, "lines in": fmt(c.lines_in),
                         **{f"removed: {k.replace('_', ' ')}": fmt(v) for k, v in removed.items()},
                         "lines out": fmt(c.lines_out),
                         "tokens en": fmt(c.tokens_en) if filtered else "",
                         "tokens fr": fmt(c.tokens_fr) if filtered else ""})
    return pd.DataFrame(rows).fillna("")


def vocab_table(vocab: VocabMetrics) -> pd.DataFrame:
    """One row per side of metrics/vocab.json."""
    rows = []
    for side, v in vocab.sides().items():
        rows.append({"side": side, "vocabulary (with 4 specials)": fmt(v.size),
                     "training word types": fmt(v.train_types),
                     **{f"UNK rate {split}": f"{100 * r:.2f}%" for split, r in v.unk_rate.items()}})
    return pd.DataFrame(rows)
