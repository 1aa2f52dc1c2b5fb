"""The report's document: the sections of :mod:`s2s.report.sections`, each module making its own
from the inputs (:mod:`s2s.report.inputs`, read once) and the claims stage's verdicts, in the
order of :data:`s2s.report.sections.ORDER`; rendered by :mod:`s2s.report.render`, written by
:mod:`s2s.stages.report`.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pandas as pd

from s2s.config import Params
from s2s.report import claims as claims_
from s2s.report.inputs import Artifacts
from s2s.report.render import Document, Table
from s2s.report.sections import ORDER, Context


def build(params: Params, art: Artifacts, fig_dir: Path) -> tuple[Document, dict[str, Table],
                                                                      dict[str, pd.DataFrame]]:
    """The report document, its tables for ``tables/*.md`` and their raw frames for ``*.csv``."""
    found = art.claims  # the claims stage's verdicts: rendered here, never recomputed
    ctx = Context(params, art, Path(fig_dir),
                  checks=[claims_.from_record(c) for c in found.claims],
                  setting=claims_.from_record(found.setting))
    doc = Document(params.report.title)
    for name in ORDER:
        module = importlib.import_module(f"s2s.report.sections.{name}")
        doc.sections.extend(module.sections(ctx))
    return doc, ctx.tables, ctx.frames
