"""The report's sections, one module each (in order: :data:`s2s.report.build.SECTIONS`).

A section module owns everything of its part of the report: its tables (built from the inputs'
records, their numbers formatted by :func:`s2s.report.render.fmt`), its figure (drawn by
:mod:`s2s.report.figures`), and its prose, the macros of its own template
``templates/<module>.j2``. Each has one function, ``sections(ctx) -> list[Section]``: none where
its inputs are absent (an optional stage not in the profile); the analyze stage's five are the
modules of :mod:`s2s.report.sections.analysis`. A table that is also written to
``reports/tables/`` has a key (:class:`s2s.report.render.Table`). Every number a section shows was
computed by an earlier stage (the claims and their intervals by the claims stage, the analyses'
statistics by the analyze stage); a section only selects, formats and words them.

:func:`s2s.report.build.build` calls them in order. This package's ``__init__`` imports neither
the figures nor a section module, so that importing one section module loads only what it uses.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from s2s.config import Params
    from s2s.report.inputs import Artifacts

TEMPLATES_DIR = Path(__file__).resolve().parents[1] / "templates"


@dataclass(frozen=True)
class Context:
    """What every section reads: the params, the inputs (read once, :mod:`s2s.report.inputs`;
    the claims stage's record among them, ``art.claims``), and where figures go."""

    params: Params
    art: Artifacts
    fig_dir: Path


def fixed(v: float | None, digits: int = 3) -> str:
    """A statistic with `digits` decimals; 'inf' for an infinite one (a half-life that never
    falls to half), '-' for a missing one."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "inf" if isinstance(v, float) and v == math.inf else "-"
    return f"{v:.{digits}f}"


def model_label(model: str, reverse: bool) -> str:
    """A model's name, with the order it reads the source in where the name does not say it."""
    direction = "reversed" if reverse else "forward"
    return model if direction in model else f"{model} ({direction})"


class Prose:
    """The macros of a section's template, each returning one paragraph (whitespace folded),
    and the template's mappings (``status_heads``, ``example_rows``)."""

    def __init__(self, module: Any):
        self._module = module

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name)
        if not callable(value):
            return value
        return lambda *args, **kwargs: " ".join(str(value(*args, **kwargs)).split())


@functools.cache
def prose(name: str) -> Prose:
    """The prose of section module `name` (``templates/<name>.j2``), with the paper's numbers as
    ``paper``."""
    import jinja2

    from s2s.paper import paper

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES_DIR),
                             undefined=jinja2.StrictUndefined, autoescape=False)
    return Prose(env.get_template(f"{name}.j2").make_module({"paper": paper()}))
