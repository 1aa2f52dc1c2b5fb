"""Source reversal and perplexity: the forward model and a reversed one beside the paper's test
perplexities (§3.3)."""

from __future__ import annotations

import pandas as pd

from s2s.artifacts import TrainMetrics
from s2s.config import Params
from s2s.paper import paper, perplexity_models
from s2s.report.render import NOT_RUN, Section, Table, fmt_frame
from s2s.report.sections import Context, prose

TITLE = "Source reversal and perplexity"


def sections(ctx: Context) -> list[Section]:
    P = prose("perplexity")
    ppl = perplexity_table(ctx.params, ctx.art.train)
    # the paper's perplexities to the digit it prints them with (5.8, 4.7)
    table = Table(P.perplexity_title(), fmt_frame(ppl, {"epochs": 2, "paper's test ppl": 1}),
                  (P.perplexity_note(),), "perplexity", numbers=ppl)
    return [Section(TITLE, [table])]


def perplexity_table(params: Params, train: dict[str, TrainMetrics]) -> pd.DataFrame:
    """Dev and test perplexity of the forward model and a reversed one, beside the paper's."""
    rows = []
    for p, model in zip(paper().perplexity, perplexity_models(params).values()):
        m = train.get(model or "")
        why = (f"no system answers report.table1.{p.row}" if model is None
               else f"no metrics/train/{model}.json")
        rows.append({"source order": p.source_order, "model": model or "-",
                     "dev ppl": m.dev_ppl if m else None,
                     "best dev ppl": m.best_dev_ppl if m else None,
                     "test ppl": m.test_ppl if m else None, "epochs": m.epochs if m else None,
                     "paper's test ppl": p.test_ppl,
                     "status": "ours" if m else f"{NOT_RUN}: {why}"})
    return pd.DataFrame(rows)
