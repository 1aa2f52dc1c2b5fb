"""The report's first section: what held and what did not, with the numbers."""

from __future__ import annotations

from s2s.report import claims as claims_
from s2s.report.render import Bullets, Section
from s2s.report.sections import Context, prose


def sections(ctx: Context) -> list[Section]:
    P = prose("summary")
    order = [claims_.HOLDS, claims_.FAILS, claims_.NO_DIFFERENCE, claims_.UNKNOWN]
    items = [P.summary_item(c.status, c.claim, c.evidence)
             for status in order for c in ctx.checks if c.status == status]
    items += [P.summary_item(c.status, c.claim, c.evidence) for c in ctx.checks
              if c.status not in order]
    blocks: list = [Bullets(tuple(items))]
    if ctx.art.claims.intervals:
        blocks.append(P.summary_intervals())
    return [Section("Summary", blocks)]
