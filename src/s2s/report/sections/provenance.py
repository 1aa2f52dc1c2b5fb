"""Provenance: the run's parameter file, code, data and machines (s2s.report.provenance)."""

from __future__ import annotations

from s2s.report.provenance import provenance
from s2s.report.render import Bullets, Section
from s2s.report.sections import Context


def sections(ctx: Context) -> list[Section]:
    art = ctx.art
    return [Section("Provenance", [Bullets(tuple(provenance(
        ctx.params, train=art.train, timing=art.timing, manifest=art.manifest)))])]
