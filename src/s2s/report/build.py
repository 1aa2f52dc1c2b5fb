"""The report's document: the sections of :mod:`s2s.report.sections`, each module making its own
from the inputs (:mod:`s2s.report.inputs`, read once, the claims stage's record among them), in
the order of :data:`SECTIONS`; rendered by :mod:`s2s.report.render`, written by
:mod:`s2s.stages.report`. The section modules are imported by name here (not looked up by a
string), so that the report stage's code dependencies (:func:`s2s.dag.code_deps`) hold
every one of them.
"""

from __future__ import annotations

from pathlib import Path

from s2s.config import Params
from s2s.report.inputs import Artifacts
from s2s.report.render import Document
from s2s.report.sections import (Context, about, attention, bleu, cost, data, examples, figure3,
                                 forget_bias, learning_curves, models, paper_claims, perplexity,
                                 provenance, summary)
from s2s.report.sections.analysis import (figure2, forget_gates, gradient_reach, memory,
                                          reach_training)

# The report's sections, in order.
SECTIONS = (summary, about, bleu, paper_claims, examples, perplexity, models, cost,
            figure3, learning_curves, attention, figure2, forget_gates, gradient_reach,
            reach_training, memory, forget_bias, data, provenance)


def build(params: Params, art: Artifacts, fig_dir: Path) -> Document:
    """The report document (its tables for ``tables/``: :meth:`Document.tables`)."""
    ctx = Context(params, art, Path(fig_dir))
    doc = Document(params.report.title)
    for section in SECTIONS:
        doc.sections.extend(section.sections(ctx))
        if section is summary:  # the answer at a glance comes before the contents
            doc.lead = len(doc.sections)
    summary.relink(doc)  # its links, to the sections the document has
    return doc
