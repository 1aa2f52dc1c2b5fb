"""The report's first section, the answer at a glance: one table of the paper's claims, each with
the paper's numbers, ours, the differences its verdict rests on with their 95% intervals, the
verdict (a coloured badge in HTML, the word in Markdown) and a link to the section that shows
its numbers. Everything in it is the claims stage's record (``outputs/claims/claims.json``) as
written; ``tables/summary.csv`` holds its numbers, one row per difference."""

from __future__ import annotations

import pandas as pd

from s2s.artifacts import Claim, ClaimDifference
from s2s.claims.verdicts import (BOOTSTRAP, FAILS, HOLDS, NO_DIFFERENCE, NOT_RUN, UNKNOWN,
                                 VERDICTS)
from s2s.report.render import Badge, Document, Lines, Link, Section, Table, slug
from s2s.report.sections import Context, bleu, cost, paper_claims, perplexity, prose
from s2s.report.sections.analysis import figure2, gradient_reach, reach_training

TITLE = "Summary"
BADGES = {HOLDS: "holds", FAILS: "fails", NO_DIFFERENCE: "unsure", UNKNOWN: "unknown"}
# claim key -> the section that shows the numbers it rests on, and the link's words
DETAILS = {"reversal_perplexity": (perplexity.TITLE, "Perplexity"),
           "reversal_bleu": (bleu.TABLE1, "Table 1"), "ensemble": (bleu.TABLE1, "Table 1"),
           "wider_beam": (bleu.TABLE1, "Table 1"), "rescoring": (bleu.TABLE2, "Table 2"),
           "cost": (cost.TITLE, "Decoding cost"), "figure2": (figure2.TITLE, "Figure 2"),
           "baseline_strength": (bleu.TABLE2, "Table 2")}
OTHERWISE = (paper_claims.TITLE, "Claims")  # a claim no section shows: the claims table
DIGITS = {"share": 3}  # decimals of a difference by its unit; else 2
CSV_COLUMNS = ["key", "claim", "paper", "ours", "verdict", "difference", "unit", "value", "lo",
               "hi", "over"]


def difference_text(d: ClaimDifference) -> str:
    """'reversed - forward: +13.18 BLEU [+12.10, +14.30]', then what the interval is over
    where it is not the test sentences (', 3 seed pairs'); a difference without an interval says
    so, with what the missing one would be over where the claims stage names it
    ('(no interval over 1 seed pair)', else '(no interval)')."""
    if d.unit == "gradient norm":
        def num(x: float) -> str:
            return f"{x:+.3g}"
    else:
        def num(x: float) -> str:
            return f"{x:+.{DIGITS.get(d.unit, 2)}f}"
    text = f"{d.label}: {num(d.value)} {d.unit}"
    if d.lo is not None and d.hi is not None:
        text += f" [{num(d.lo)}, {num(d.hi)}]" + (f", {d.over}" if d.over != BOOTSTRAP else "")
    else:  # e.g. a mean over one seed pair, or the phrase pairs' distances of Figure 2
        text += f" (no interval over {d.over})" if d.over else " (no interval)"
    return text


def in_order(claims: tuple[Claim, ...]) -> list[Claim]:
    """The claims by verdict (VERDICTS' order), each verdict's in the claims stage's order."""
    rank = {v: i for i, v in enumerate(VERDICTS)}
    return sorted(claims, key=lambda c: rank.get(c.status, len(rank)))


def tested(claims: tuple[Claim, ...]) -> tuple[list[Claim], list[Claim]]:
    """The claims this profile tests (in :func:`in_order`), and those it has nothing for
    (:data:`NOT_RUN`), in the claims stage's order."""
    return ([c for c in in_order(claims) if c.status != NOT_RUN],
            [c for c in claims if c.status == NOT_RUN])


def details(ctx: Context, key: str) -> Link:
    """A link to the section that shows claim `key`'s numbers."""
    if key == "gradient_reach":
        a = ctx.art.analysis
        title = (reach_training.TITLE if a is not None and len(a.training)
                 else gradient_reach.TITLE)
        return Link("Gradient reach", slug(title))
    title, words = DETAILS.get(key, OTHERWISE)
    return Link(words, slug(title))


def relink(doc: Document) -> None:
    """Point each summary link whose section the document does not have (an analysis verdict in
    claims.json, the report rendered without --analysis) at the claims table's section instead,
    which words every verdict. Called once the document holds all its sections."""
    anchors = {s.anchor for s in doc.sections}
    column = prose("summary").columns["details"]
    fallback = Link(OTHERWISE[1], slug(OTHERWISE[0]))
    for sec in doc.sections:
        for t in sec.blocks:
            if isinstance(t, Table) and t.key == "summary" and column in t.frame.columns:
                t.frame[column] = [fallback if isinstance(v, Link) and v.anchor not in anchors
                                   else v for v in t.frame[column]]


def arrows(text: str) -> str:
    """'a -> b' with an arrow that does not break across lines."""
    return text.replace(" -> ", "\u00a0\u2192 ")


def sections(ctx: Context) -> list[Section]:
    P, found = prose("summary"), ctx.art.claims
    head = P.columns
    shown, raw = [], []
    run, not_run = tested(found.claims)
    for c in run:
        shown.append({head["claim"]: c.statement, head["paper"]: arrows(c.paper) or "-",
                      head["ours"]: arrows(c.ours) or "-",
                      head["difference"]: Lines(tuple(map(difference_text, c.differences))
                                                or ("-",)),
                      head["verdict"]: Badge(c.status, BADGES.get(c.status, "unknown")),
                      head["details"]: details(ctx, c.key)})
        base = {"key": c.key, "claim": c.statement, "paper": c.paper, "ours": c.ours,
                "verdict": c.status}
        raw += [{**base, "difference": d.label, "unit": d.unit, "value": d.value, "lo": d.lo,
                 "hi": d.hi, "over": d.over} for d in c.differences] or [base]
    notes = ((P.summary_scale(),) + ((P.summary_intervals(),) if found.intervals else ())
             + (P.summary_evidence(),)
             + ((paper_claims.not_run_note(ctx, not_run),) if not_run else ()))
    table = Table(P.summary_title(), pd.DataFrame(shown), notes, "summary",
                  numbers=pd.DataFrame(raw, columns=CSV_COLUMNS))
    return [Section(TITLE, [table])]
