"""The paper's claims, checked: the claims stage's verdicts with their evidence, as it wrote
them."""

from __future__ import annotations

import pandas as pd

from s2s.artifacts import Claim
from s2s.claims.verdicts import NO_DIFFERENCE, NOT_RUN, UNKNOWN
from s2s.report.render import Section, Table
from s2s.report.sections import Context, prose

TITLE = "The paper's claims, checked"


def here(status: str) -> str:
    """A verdict as the claims table words it: holds and does not hold are at this scale."""
    return status + ("" if status in (UNKNOWN, NO_DIFFERENCE, NOT_RUN) else " at this scale")


def claims_table(items: tuple[Claim, ...]) -> pd.DataFrame:
    """claim, verdict here, the numbers it rests on: one row per claim."""
    return pd.DataFrame([{"claim": c.claim, "here": here(c.status), "numbers": c.evidence}
                         for c in items])


def not_run_note(ctx: Context, claims: list[Claim]) -> str:
    """One line naming the claims the profile does not test (:data:`NOT_RUN`)."""
    return (f"Not run in this profile (`{ctx.params.profile}` has no system or stage they rest "
            f"on): " + "; ".join(c.statement for c in claims) + ".")


def sections(ctx: Context) -> list[Section]:
    P, found = prose("paper_claims"), ctx.art.claims
    run = tuple(c for c in found.claims if c.status != NOT_RUN)
    not_run = [c for c in found.claims if c.status == NOT_RUN]
    table = Table(P.claims_title(), claims_table(run),
                  ((P.bootstrap_note(),) if found.intervals else ())
                  + ((not_run_note(ctx, not_run),) if not_run else ()), "claims")
    return [Section(TITLE, [P.claims_intro(), table])]
