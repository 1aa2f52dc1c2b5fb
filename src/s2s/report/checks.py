"""Every verdict the report shows, checked against our numbers by the claims stage
(:mod:`s2s.stages.claims`): the paper's claims (:mod:`s2s.report.claims`), the analyses'
(gradient reach over training, Figure 2) and the forget-bias comparison, and Table 2's setting.
The report renders them (:class:`s2s.artifacts.Claims`) beside its sections, which use the same
constants and words (:data:`REACH_STORY`); no figure is drawn here.
"""

from __future__ import annotations

import dataclasses
import math

import pandas as pd

from s2s.artifacts import ClaimRecord, Claims
from s2s.config import Params
from s2s.report import seeds, tables
from s2s.report.claims import (FAILS, HOLDS, NO_DIFFERENCE, UNKNOWN, Claim, baseline_strength,
                               claims)
from s2s.report.inputs import Artifacts
from s2s.report.paper import Ours

FIRST = 3  # "the first source words": positions 1..FIRST (measures.FIRST)
EARLY = 0.5  # the paper's argument is about what SGD finds from the start: epochs <= EARLY
# Epoch 0 is the initialisation: its gradient reach shows the reading order of untrained
# weights, not anything SGD learned, so it is shown (labelled) and never part of a verdict.
# The one sentence every place that gives the verdict uses (claims table, sections, summary):
REACH_STORY = ("the verdict rests on the trained early snapshots (0 < epoch <= {early:g}); "
               "epoch 0 is the initialisation (reading order, nothing learned) and the end of "
               "training is shown beside, not judged")


def check_all(params: Params, art: Artifacts) -> Claims:
    """Every verdict the report shows, with its numbers: the paper's claims, the analyses'
    (with `art.analysis`), Table 2's setting and the forget-bias comparison; the claims stage's
    output (:class:`s2s.artifacts.Claims`), which the report renders without recomputing."""
    checks = claims(params, art.bleu, art.train, tables.cost_table(params, art.timing),
                    diff=art.diff, timed=art.cost)
    if art.analysis is not None:
        checks += analysis_claims(art.analysis)
    setting = dataclasses.replace(baseline_strength(params, art.bleu, diff=art.diff),
                                  key="baseline_strength")

    def record(c: Claim) -> ClaimRecord:
        return ClaimRecord(key=c.key, claim=c.claim, status=c.status, evidence=c.evidence)

    return Claims(intervals=art.diff is not None, claims=tuple(map(record, checks)),
                  setting=record(setting),
                  forget_bias=tuple(forget_bias_verdicts(params, art)))


# --- the analyses' claims ------------------------------------------------------------------------


def first_positions(reach: pd.DataFrame, model: str, upto: int = FIRST) -> tuple[float, float]:
    """Mean gradient norm and mean share over (sentence, position) at positions 1..upto."""
    sel = reach[(reach["model"] == model) & (reach["position"] <= upto) & (reach["sentences"] > 0)]
    n = sel["sentences"].sum()
    if n == 0:
        return math.nan, math.nan
    return (float((sel["mean_norm"] * sel["sentences"]).sum() / n),
            float((sel["mean_share"] * sel["sentences"]).sum() / n))


def interval(r) -> str:
    return f"{r['diff']:+.3f} [{r['lo']:+.3f}, {r['hi']:+.3f}]"


def reach_claim(reach: pd.DataFrame, diff: pd.DataFrame) -> Claim:
    """The reversal argument's verdict: from the early snapshots (epochs <= EARLY) where the
    over-training measurement is there, with what happens later; else from the end of
    training."""
    claim = ("Reversal brings the first source words within reach of the first target word "
             "(§3.3: 'short term dependencies')")
    share = diff[diff["statistic"] == "first_share"] if len(diff) else diff
    early = share[(share["epoch"] > 0) & (share["epoch"] <= EARLY)] if len(share) else share
    if len(early):
        above = int((early["lo"] > 0).sum())
        below = int((early["hi"] < 0).sum())
        status = (HOLDS if above and not below else FAILS if below else NO_DIFFERENCE)
        init = share[share["epoch"] == 0]
        late = share[share["epoch"] > EARLY]
        r = early.iloc[0]
        evidence = (f"share of -log p(y_1)'s gradient at source positions 1-{FIRST}, "
                    f"{r['reversed']} - {r['forward']} with 95% bootstrap interval: trained, "
                    "early " + "; ".join(f"epoch {x['epoch']:g} {interval(x)}"
                                        for _, x in early.iterrows()))
        if len(init):
            evidence += f"; at initialisation (reading order) {interval(init.iloc[0])}"
        if len(late):
            evidence += "; later " + "; ".join(f"epoch {x['epoch']:g} {interval(x)}"
                                               for _, x in late.iterrows())
        return Claim(claim, status, evidence + "; " + REACH_STORY.format(early=EARLY))
    reverse = reach.groupby("model", sort=False)["reverse_source"].first()
    fwd = [m for m, r in reverse.items() if not r]
    rev = [m for m, r in reverse.items() if r]
    if fwd and rev:
        (nf, _), (nr, _) = first_positions(reach, fwd[0]), first_positions(reach, rev[0])
        return Claim(claim, HOLDS if nr > nf else FAILS,
                     f"mean gradient norm of -log p(y_1) at source positions 1-{FIRST} at the "
                     f"end of training (no snapshots): {rev[0]} {nr:.3g} vs {fwd[0]} {nf:.3g} "
                     f"({nr / nf:.2f}x)")
    return Claim(claim, UNKNOWN, "needs a forward and a reversed model in analysis.models")


def analysis_claims(a: dict) -> list[Claim]:
    """The analyses' verdicts for the report's claims table: the reversal argument (gradient
    reach) and Figure 2 (paraphrases together, word-order swaps apart), from the artifacts
    (:func:`s2s.report.inputs.read_analysis`)."""
    fig2 = a["figure2"]
    out = [dataclasses.replace(reach_claim(a["reach"], a["training_diff"]), key="gradient_reach")]
    claim = ("Figure 2: phrases of one meaning (active/passive) land together, word-order swaps "
             "apart")
    rows = [r for r in fig2.to_dict("records")
            if r["paraphrase_pairs"] > 0 and r["swap_pairs"] > 0]
    if rows:
        ok = [r["paraphrase_distance"] < r["swap_distance"] for r in rows]
        out.append(Claim(claim, HOLDS if all(ok) else FAILS, "; ".join(
            f"{r['model']}: paraphrases {r['paraphrase_distance']:.2f} vs swaps "
            f"{r['swap_distance']:.2f} (relative distance)" for r in rows), key="figure2"))
    else:
        out.append(Claim(claim, UNKNOWN, "no paraphrase and swap pairs among analysis.phrases",
                         key="figure2"))
    return out


# --- the forget-bias comparison ------------------------------------------------------------------


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


def system_of(params: Params, model: str) -> tuple[str, int] | None:
    for system, cfg in params.systems.items():
        if cfg.members == (model,):
            return system, cfg.widest_beam
    return None


def forget_bias_verdicts(params: Params, art: "Artifacts") -> list[str]:
    """The verdict on the first pair of :func:`pairs` (over the seeds of all pairs: the interval
    over seeds of the paired difference, and for BLEU the test-sentence bootstrap, must both
    exclude 0), with its numbers; computed by the claims stage, rendered by
    :mod:`s2s.report.sections.forget_bias`."""
    out = []
    for plain, opened in pairs(params)[:1]:
        a, b = system_of(params, plain), system_of(params, opened)
        d = art.diff(Ours("translate", *a), Ours("translate", *b)) if (
            art.diff is not None and a and b) else None
        ma, mb = art.train.get(plain), art.train.get(opened)
        if not (ma and mb and a and b):
            continue
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
        out.append(f"{opened} vs {plain} ({seeds.design(params, a[0], b[0])}): {ppl}"
                   f"{bleu}{over}: opening the gate {word} (both the interval over "
                   f"seeds and, for BLEU, the test-sentence bootstrap must exclude 0).")
    return out
