"""What the report's sections share: numbers formatted for a rendered table, the BLEU entry of an
output (:mod:`s2s.artifacts`' ``metrics/bleu.json``), and the decoding-cost table; no I/O, no
plotting. The paper's two BLEU tables are :mod:`s2s.report.sections.bleu`'s.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from s2s.artifacts import Bleu, BleuEntry, Scored, Timing
from s2s.config import Params

NOT_RUN = "not run"


def fmt(x: Any, nd: int = 2) -> str:
    """A number for a rendered table; '-' for a missing one."""
    if x is None or (isinstance(x, float) and x != x):
        return "-"
    if isinstance(x, float):
        return f"{x:.{nd}f}"
    if isinstance(x, int):
        return f"{x:,}"
    return str(x)


def bleu_entry(bleu: Bleu, kind: str, system: str, beam: int | None = None) -> BleuEntry | None:
    """The entry of bleu.json for a translation (system, beam) or a rescoring output, or None."""
    if kind == "translate":
        return bleu.translation(system, beam)
    return bleu.rescoring(system)


def scored(entry: BleuEntry | None) -> bool:
    return isinstance(entry, Scored)


# --- decoding cost -------------------------------------------------------------------------------


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
    return pd.DataFrame(rows)


def fmt_frame(df: pd.DataFrame, nd: dict[str, int]) -> pd.DataFrame:
    """`df` for a rendered table: each number by :func:`fmt`, with `nd` digits for its column
    (default 2); strings as they are."""
    out = df.copy().astype(object)
    for col in out.columns:
        out[col] = [fmt(v, nd.get(col, 2)) if not isinstance(v, str) else v for v in df[col]]
    return out
