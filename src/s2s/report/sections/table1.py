"""Table 1: direct translation, the paper's rows beside ours (and our systems the paper has no
row for)."""

from __future__ import annotations

from s2s.report import tables
from s2s.report.render import Section, Table
from s2s.report.sections import Context, bleu, prose

TITLE = "Table 1: direct translation"


def sections(ctx: Context) -> list[Section]:
    P, art, params = prose("table1"), ctx.art, ctx.params
    t1 = tables.table1(params, art.bleu, art.train, art.vocab)
    other = tables.other_systems(params, art.bleu, art.train, art.vocab)
    lead, shown = tables.split_conditions(tables.display_bleu_table(t1))
    lead_o, shown_o = tables.split_conditions(tables.display_bleu_table(other))
    notes = bleu.notes(ctx, tables.signatures(params, art.bleu))
    main = ctx.add("table1", Table(P.table1_title(), shown, notes, "table1", lead), t1)
    rest = ctx.add("table1_other", Table(P.table1_other_title(), shown_o,
                                         (P.table1_other_note(),), "table1_other", lead_o), other)
    return [Section(TITLE, [main] + ([rest] if len(other) else []))]
