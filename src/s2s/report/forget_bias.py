"""The report's forget-gate-bias section: the gradient at initialisation by forget bias (the
analyze stage's init_reach.csv) and each model trained with an opened forget gate beside the
model of the paper's init it pairs with (its config but `forget_bias`, on the same seeds where
params give it them: what differs is written from the configs, s2s.report.seeds.design), with
the verdict over seeds."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd

from s2s.config import Params
from s2s.report import figures, seeds, tables
from s2s.report.inputs import Artifacts
from s2s.report.paper import Ours
from s2s.report.render import Image, Section, Table


def pairs(params: Params) -> list[tuple[str, str]]:
    """(model of the paper's init, the same model with a forget bias) for every model with one."""
    out = []
    for name in params.models:
        cfg = params.model_config(name)
        if not getattr(cfg, "forget_bias", 0.0):
            continue
        plain = dataclasses.replace(cfg, forget_bias=0.0)
        same_seeds = next((m for m in params.models if m != name
                           and params.model_config(m) == plain), None)
        twin = same_seeds or next((m for m in params.models if m != name and dataclasses.replace(
            params.model_config(m), init_seed=plain.init_seed, order_seed=plain.order_seed)
                     == plain), None)
        if twin is not None:
            out.append((twin, name))
    return out


def _system_of(params: Params, model: str) -> tuple[str, int] | None:
    for system, cfg in params.systems.items():
        if cfg.members == (model,):
            return system, cfg.widest_beam
    return None


def section(params: Params, art: Artifacts, fig_dir: Path, prose) -> Section | None:
    analysis = art.analysis
    init_reach = analysis["init_reach"] if analysis is not None else None
    found = pairs(params)
    if not found and (init_reach is None or not len(init_reach)):
        return None
    parts: list = []
    forget = analysis["forget"] if analysis is not None else None
    rows, verdicts = [], []
    primary = found[:1]  # the first pair carries the verdict, over the seeds of all pairs
    for plain, opened in found:
        for model in (plain, opened):
            m = art.train.get(model)
            sys_beam = _system_of(params, model)
            e = (tables.bleu_entry(art.bleu, "translate", *sys_beam) if sys_beam else None)
            f = (forget[(forget["model"] == model) & (forget["stack"] == "encoder")]
                 if forget is not None else None)
            rows.append({
                "model": model, "forget bias": params.model_config(model).forget_bias,
                "dev ppl": m.dev_ppl if m else None, "test ppl": m.test_ppl if m else None,
                "BLEU (tokenized, beam 12)": e.bleu_tok if e is not None and tables.scored(e)
                else None,
                "encoder mean forget gate": (round(float(f["mean_f"].mean()), 3)
                                             if f is not None and len(f) else None)})
        if (plain, opened) not in primary:
            continue
        a, b = _system_of(params, plain), _system_of(params, opened)
        d = art.diff(Ours("translate", *a), Ours("translate", *b)) if (
            art.diff is not None and a and b) else None
        ma, mb = art.train.get(plain), art.train.get(opened)
        if ma and mb and a and b:
            ppl = (f"dev perplexity {mb.dev_ppl:.2f} with the gate opened against {ma.dev_ppl:.2f}"
                   f" with the paper's init")
            bleu = (f"; BLEU {d.delta:+.2f} (95% CI {d.lo:+.2f} to {d.hi:+.2f}, paired bootstrap)"
                    if d is not None else "")

            def dev(system: str) -> float | None:
                m = art.train.get(params.systems[system].members[0])
                return m.dev_ppl if m else None

            def tok(system: str) -> float | None:
                e = tables.bleu_entry(art.bleu, "translate", system, b[1])
                return e.bleu_tok if e is not None and tables.scored(e) else None

            ppl_seeds = seeds.paired(params, b[0], a[0], dev)  # plain - opened: > 0 helps
            bleu_seeds = seeds.paired(params, a[0], b[0], tok)  # opened - plain
            boot = None if d is None else ((1 if d.delta > 0 else -1) if d.significant else 0)
            ppl_way, bleu_way = seeds.verdict(None, ppl_seeds), seeds.verdict(boot, bleu_seeds)
            word = ("helps here" if ppl_way == bleu_way == 1 else "does not help here"
                    if ppl_way == bleu_way == -1 else "makes no clear difference here")
            over = "".join(f"; {what} {st.describe(x, y)}" for what, st, x, y in (
                ("dev perplexity", ppl_seeds, "paper's init", "opened"),
                ("BLEU", bleu_seeds, "opened", "paper's init")) if st is not None)
            verdicts.append(f"{opened} vs {plain} ({seeds.design(params, a[0], b[0])}): {ppl}"
                            f"{bleu}{over}: opening the gate {word} (both the interval over "
                            f"seeds and, for BLEU, the test-sentence bootstrap must exclude 0).")
    if rows:
        parts.append(Table(prose.forget_bias_title(), pd.DataFrame(rows), (), "forget_bias"))
    text = prose.forget_bias_text(rows=", ".join(f"{p} (bias 0) and {o}" for p, o in found)
                                  or "no model with a forget bias in this profile",
                                  verdict=" ".join(verdicts))
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
    return Section(prose.forget_bias_title(), parts)
