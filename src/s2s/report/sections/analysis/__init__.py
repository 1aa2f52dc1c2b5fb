"""The analyze stage's five sections, one module each, in the report's order: Figure 2
(:mod:`.figure2`), the forget gates (:mod:`.forget_gates`), the gradient reach at the end of
training (:mod:`.gradient_reach`) and over it (:mod:`.reach_training`), and the memory of a
one-word change (:mod:`.memory`).

Each module's ``section(analyses, figures_dir, rel_dir)`` renders what the analyze stage wrote
(:class:`s2s.analysis.outputs.Analyses`, its statistics included): its table, its figures
(``figures_dir/analysis_*.png``, linked as ``rel_dir/<name>``) and its prose
(``templates/<module>.j2``).
"""

from __future__ import annotations

from pathlib import Path

from s2s.analysis.outputs import Analyses
from s2s.report.render import Section
from s2s.report.sections import Context
from s2s.report.sections.analysis import (figure2, forget_gates, gradient_reach, memory,
                                          reach_training)

MODULES = (figure2, forget_gates, gradient_reach, reach_training, memory)
FIGURES = {key: name for m in MODULES for key, name in m.FIGURES.items()}  # key -> file name


def render(a: Analyses, figures_dir: Path, *, rel_dir: str = "figures") -> list[Section]:
    """The five sections from the analyze stage's folder `a` alone; figures written into
    figures_dir, linked as rel_dir/<name> (rel_dir: figures_dir relative to the Markdown file)."""
    return [m.section(a, Path(figures_dir), rel_dir) for m in MODULES]


def sections(ctx: Context) -> list[Section]:
    """The five sections, none where the profile has no analyze stage."""
    return [] if ctx.art.analysis is None else render(ctx.art.analysis, ctx.fig_dir)
