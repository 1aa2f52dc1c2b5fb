"""Table 2: rescoring the baseline's n-best lists, with the claim that says whether our baseline
is as strong as the paper's."""

from __future__ import annotations

from s2s.report import tables
from s2s.report.render import Section, Table
from s2s.report.sections import Context, bleu, prose
from s2s.report.sections.paper_claims import here

TITLE = "Table 2: rescoring"


def sections(ctx: Context) -> list[Section]:
    """Table 2, where the profile rescores (params rescore.baseline); the summary names its
    claims as not run where it does not."""
    P, params, art = prose("table2"), ctx.params, ctx.art
    if params.rescore.baseline is None:
        return []
    t2 = tables.table2(params, art.bleu, art.train, art.vocab)
    lead, shown = tables.split_conditions(tables.display_bleu_table(t2))
    notes = bleu.notes(ctx, tables.signatures(params, art.bleu)) + (P.oracle_note(),)
    table = ctx.add("table2", Table(P.table2_title(), shown, notes, "table2", lead), t2)
    setting = art.claims.setting
    return [Section(TITLE, [
        P.table2_setting(setting, here(setting.status), tables.baseline_text(params)), table])]
