"""Example translations: source, reference and every system's output for a few test sentences
of different lengths."""

from __future__ import annotations

import pandas as pd

from s2s.report.render import Section, Table, Verbatim
from s2s.report.sections import Context, prose


def sections(ctx: Context) -> list[Section]:
    if not ctx.art.examples:
        return []
    P = prose("examples")
    blocks: list = [P.examples_intro()]
    for ex in ctx.art.examples:
        # the sentences are the corpus's and the models' text: Verbatim, no Markdown read in them
        rows = [(P.example_rows["source"], Verbatim(ex["source"])),
                (P.example_rows["reference"], Verbatim(ex["reference"])),
                *((name, Verbatim(out)) for name, out in ex["outputs"].items())]
        blocks.append(Table(P.example_title(ex["line"], ex["words"]),
                            pd.DataFrame(rows, columns=["", "text"])))
    return [Section("Example translations", blocks)]
