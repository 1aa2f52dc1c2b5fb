"""The paper's claims, checked: the claims stage's verdicts with their evidence."""

from __future__ import annotations

from s2s.report import claims as claims_
from s2s.report.render import Section, Table
from s2s.report.sections import Context, prose


def sections(ctx: Context) -> list[Section]:
    P = prose("paper_claims")
    table = ctx.add("claims", Table(P.claims_title(), claims_.claims_table(ctx.checks),
                                    ((P.bootstrap_note(),) if ctx.art.claims.intervals else ()),
                                    "claims"))
    return [Section("The paper's claims, checked", [P.claims_intro(), table])]
