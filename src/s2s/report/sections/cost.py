"""Decoding cost per system and beam, with the claim on the cost of a wider beam."""

from __future__ import annotations

from s2s.claims.verdicts import UNKNOWN
from s2s.report import tables
from s2s.report.render import Section, Table
from s2s.report.sections import Context, prose

TITLE = "Decoding cost"


def sections(ctx: Context) -> list[Section]:
    P = prose("cost")
    cost = tables.cost_table(ctx.params, ctx.art.timing)
    claim = next(c for c in ctx.art.claims.claims if c.key == "cost")
    table = ctx.add("cost", Table(
        P.cost_title(),
        tables.fmt_frame(cost, {"seconds": 1, "sents_per_sec": 2, "ms_per_sentence": 1}),
        (P.cost_note(claim, claim.status != UNKNOWN),), "cost"), cost)
    return [Section(TITLE, [table])]
