"""Decoding cost per system and beam, with the claim on the cost of a wider beam."""

from __future__ import annotations

import pandas as pd

from s2s.artifacts import Timing
from s2s.claims.verdicts import NOT_RUN as CLAIM_NOT_RUN, UNKNOWN
from s2s.config import Params
from s2s.report.render import NOT_RUN, Section, Table, fmt_frame
from s2s.report.sections import Context, prose

TITLE = "Decoding cost"
COLUMNS = ["system", "models", "beam", "sentences", "seconds", "sents_per_sec", "ms_per_sentence",
           "device", "threads", "precision", "status"]


def sections(ctx: Context) -> list[Section]:
    P = prose("cost")
    cost = cost_table(ctx.params, ctx.art.timing)
    claim = next(c for c in ctx.art.claims.claims if c.key == "cost")  # inputs checked it
    not_run = claim.status == CLAIM_NOT_RUN
    note = P.cost_note(claim, not not_run and claim.status != UNKNOWN, not_run)
    table = Table(P.cost_title(),
                  fmt_frame(cost, {"seconds": 1, "sents_per_sec": 2, "ms_per_sentence": 1}),
                  (P.cost_sources(), note), "cost",
                  numbers=cost)
    return [Section(TITLE, [table])]


def cost_table(params: Params, timing: dict[str, Timing]) -> pd.DataFrame:
    """Decoding time per system and beam (from each system's timing.json)."""
    rows = []
    for system, scfg in params.systems.items():
        t = timing.get(system)
        for beam in scfg.beams:
            b = t.beams.get(beam) if t else None
            rec = {"system": system, "models": len(scfg.members), "beam": beam,
                   "sentences": None, "seconds": None, "sents_per_sec": None,
                   "ms_per_sentence": None, "device": t.device if t else "-",
                   "threads": t.threads if t else None,
                   "precision": t.precision if t else None,
                   "status": (f"{NOT_RUN}: no timing.json for '{system}'" if not t
                              else f"{NOT_RUN}: no beam {beam} in its timing.json")}
            if b:
                rec.update(sentences=b.sentences, seconds=b.seconds,
                           sents_per_sec=b.sents_per_sec, status="measured",
                           ms_per_sentence=b.ms_per_sentence)
            rows.append(rec)
    # counts stay whole where a system has no timing (None would make the columns float)
    return pd.DataFrame(rows, columns=COLUMNS).astype(
        {c: "Int64" for c in ("models", "beam", "sentences", "threads")})
