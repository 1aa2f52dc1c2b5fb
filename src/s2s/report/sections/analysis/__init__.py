"""The analyze stage's five sections, one module each, in the report's order: Figure 2
(:mod:`.figure2`), the forget gates (:mod:`.forget_gates`), the gradient reach at the end of
training (:mod:`.gradient_reach`) and over it (:mod:`.reach_training`), and the memory of a
one-word change (:mod:`.memory`).

Each module's ``section(analyses, figures_dir, rel_dir)`` renders what the analyze stage wrote
(:class:`s2s.analysis.outputs.Analyses`, its statistics included): its table, its figures
(``figures_dir/analysis_*.png``, linked as ``rel_dir/<name>``) and its prose
(``templates/<module>.j2``); its ``sections(ctx)`` (:func:`in_report`) is that section in the
report (:data:`s2s.report.build.SECTIONS` lists the five). :mod:`.every` makes the five from the
folder alone.
"""


def in_report(section):
    """A module's ``sections(ctx)``: its `section` of the run's analyses, with the report's
    figures folder; none where the profile has no analyze stage."""
    def sections(ctx) -> list:
        a = ctx.art.analysis
        return [] if a is None else [section(a, ctx.fig_dir, "figures")]

    return sections
