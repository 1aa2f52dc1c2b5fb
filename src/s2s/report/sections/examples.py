"""Example translations: source, reference and every system's output for a few test sentences
of different lengths."""

from __future__ import annotations

import pandas as pd

from s2s.report.render import Section, Table
from s2s.report.sections import Context, prose


def sections(ctx: Context) -> list[Section]:
    if not ctx.art.examples:
        return []
    P = prose("examples")
    blocks: list = [P.examples_intro()]
    for ex in ctx.art.examples:
        rows = [(P.example_rows["source"], ex["source"]),
                (P.example_rows["reference"], ex["reference"]), *ex["outputs"].items()]
        blocks.append(Table(P.example_title(ex["line"], ex["words"]),
                            pd.DataFrame(rows, columns=["", "text"])))
    return [Section("Example translations", blocks)]
