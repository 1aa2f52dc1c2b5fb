"""About this report: the profile, the test set, the two BLEU columns."""

from __future__ import annotations

from s2s.report.render import Section, fmt
from s2s.report.sections import Context, prose


def sections(ctx: Context) -> list[Section]:
    P, params = prose("about"), ctx.params
    return [Section("About this report", [
        P.about(params.profile, params.data.test.corpus, fmt(ctx.art.bleu.test_sentences)),
        P.about_bleu()])]
