"""Learning curves: dev and train perplexity per epoch, a panel per model (the largest
ensemble's members in one)."""

from __future__ import annotations

from s2s.config import Params
from s2s.report import figures
from s2s.report.render import Image, Section
from s2s.report.sections import Context, prose


def sections(ctx: Context) -> list[Section]:
    P = prose("learning_curves")
    groups = curve_groups(ctx.params)
    fig = figures.learning_curves(ctx.art.curves, ctx.fig_dir / "learning_curves.png",
                                  groups=groups)
    # a band where a panel holds several members with curves (the figure draws it so)
    band = any(sum(m in ctx.art.curves for m in ms) > 1 for ms in groups.values())
    return [Section("Learning curves", [
        Image("Learning curves", fig, "figures/learning_curves.png",
              P.learning_curves_caption(band))])]


def curve_groups(params: Params) -> dict[str, list[str]]:
    """Learning-curve panels: the largest ensemble's members together, every other model alone."""
    ensembles = [(name, s) for name, s in params.systems.items() if len(s.members) > 1]
    name, ens = max(ensembles, key=lambda x: len(x[1].members), default=(None, None))
    groups: dict[str, list[str]] = {}
    for m in params.models:
        if ens is not None and m in ens.members:
            groups.setdefault(f"{name} members", []).append(m)
        else:
            groups[m] = [m]
    return groups
