"""The analyze stage's five sections from its folder alone (no report around them), in the
report's order; and the file names of their figures."""

from __future__ import annotations

from pathlib import Path

from s2s.analysis.outputs import Analyses
from s2s.report.render import Section
from s2s.report.sections.analysis import (figure2, forget_gates, gradient_reach, memory,
                                          reach_training)

MODULES = (figure2, forget_gates, gradient_reach, reach_training, memory)
FIGURES = {key: name for m in MODULES for key, name in m.FIGURES.items()}  # key -> file name


def render(a: Analyses, figures_dir: Path, *, rel_dir: str = "figures") -> list[Section]:
    """The five sections from the analyze stage's folder `a`; figures written into
    figures_dir, linked as rel_dir/<name> (rel_dir: figures_dir relative to the Markdown file)."""
    return [m.section(a, Path(figures_dir), rel_dir) for m in MODULES]
