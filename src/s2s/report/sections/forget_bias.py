"""The report's forget-gate-bias section: the gradient at initialisation by forget bias (the
analyze stage's init_reach.csv) and each model trained with an opened forget gate beside the
model of the paper's init it pairs with (its config but `forget_bias`, on the same seeds where
params give it them: what differs is written from the configs, s2s.claims.seeds.design), with
the verdict over seeds the claims stage wrote."""

from __future__ import annotations

import pandas as pd

from s2s.artifacts import Scored
from s2s.claims.forget_bias import pairs, system_of
from s2s.report import figures
from s2s.report.render import Image, Section, Table, fmt_frame
from s2s.report.sections import Context
from s2s.report.sections import prose as _prose


def sections(ctx: Context) -> list[Section]:
    """The section: each pair's numbers, the gradient at initialisation, and the verdicts the
    claims stage judged (:func:`s2s.claims.forget_bias.forget_bias_verdicts`); none where the
    profile has neither a pair nor the analyze stage's init_reach.csv."""
    params, art, fig_dir, prose = ctx.params, ctx.art, ctx.fig_dir, _prose("forget_bias")
    judged = art.claims.forget_bias
    analysis = art.analysis
    init_reach = analysis.init_reach if analysis is not None else None
    found = pairs(params)
    if not found and (init_reach is None or not len(init_reach)):
        return []
    parts: list = []
    stacks = analysis.stacks if analysis is not None else None
    rows, beams = [], []
    for plain, opened in found:
        for model in (plain, opened):
            m = art.train.get(model)
            sys_beam = system_of(params, model)  # the system's widest beam
            e = (art.bleu.entry("translate", *sys_beam) if sys_beam else None)
            beams.append(sys_beam[1] if sys_beam else None)
            f = (stacks[(stacks["model"] == model) & (stacks["stack"] == "encoder")]
                 if stacks is not None else None)
            rows.append({
                "model": model, "forget bias": params.model_config(model).forget_bias,
                "dev ppl": m.dev_ppl if m else None, "test ppl": m.test_ppl if m else None,
                "BLEU": e.bleu_tok if e is not None and isinstance(e, Scored) else None,
                "encoder mean forget gate": (round(float(f["mean_f"].iloc[0]), 3)
                                             if f is not None and len(f) else None)})
    if rows:
        shown = {b for b in beams if b is not None}
        table = pd.DataFrame(rows)
        if len(shown) <= 1:  # one beam for all: it goes into the header
            table = table.rename(columns={"BLEU": "BLEU (tokenized"
                                          + (f", beam {shown.pop()})" if shown else ")")})
        else:
            table = table.rename(columns={"BLEU": "BLEU (tokenized)"})
            table.insert(table.columns.get_loc("BLEU (tokenized)"), "beam", beams)
        # shown as the other tables show them (BLEU and perplexities to 2 decimals); the CSV
        # keeps the numbers as read
        shown_table = fmt_frame(table, {"forget bias": 1, "encoder mean forget gate": 3,
                                        "beam": 0})
        parts.append(Table(prose.forget_bias_title(), shown_table, (), "forget_bias",
                           numbers=table))
    text = prose.forget_bias_text(rows=", ".join(f"{p} (bias 0) and {o}" for p, o in found)
                                  or "no model with a forget bias in this profile",
                                  verdict=" ".join(judged))
    parts.insert(0, text)
    if init_reach is not None and len(init_reach):
        df = init_reach
        fig = figures.init_reach(df, fig_dir / "init_reach.png")

        def at(cell: str, bias: float | None, back: int = 10) -> str:
            sel = df[(df["cell"] == cell) & (df["steps_back"] == back)]
            if bias is not None:
                sel = sel[sel["forget_bias"] == bias]
            return f"{float(sel['relative'].iloc[0]):.1e}" if len(sel) else "n/a"

        parts.append(Image("Gradient at initialisation", fig, "figures/init_reach.png",
                           prose.init_reach_caption(rnn10=at("rnn", None),
                                                    lstm10=at("lstm", 0.0),
                                                    open10=at("lstm", 3.0))))
    return [Section(prose.forget_bias_title(), parts)]
