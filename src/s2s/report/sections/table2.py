"""Table 2: rescoring the baseline's n-best lists, with the claim that says whether our baseline
is as strong as the paper's."""

from __future__ import annotations

from s2s.report import claims as claims_
from s2s.report import tables
from s2s.report.render import Section, Table
from s2s.report.sections import Context, prose
from s2s.report.sections.table1 import bleu_notes


def sections(ctx: Context) -> list[Section]:
    P, params = prose("table2"), ctx.params
    _, t2 = ctx.bleu_tables
    lead, shown = tables.split_conditions(tables.display_bleu_table(t2))
    table = ctx.add("table2", Table(P.table2_title(), shown,
                                    bleu_notes(ctx) + (P.oracle_note(),), "table2",
                                    lead), t2)
    setting = ctx.setting
    return [Section("Table 2: rescoring", [
        P.table2_setting(setting, claims_.claims_table([setting])["here"].iloc[0],
                         tables.baseline_text(params)), table])]
