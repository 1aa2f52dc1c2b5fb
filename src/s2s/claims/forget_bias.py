"""The forget-bias comparison: each model trained with its forget gates opened at initialisation
(`forget_bias`) against the model of the paper's init it pairs with, over seeds; the verdict in
words, which :mod:`s2s.report.sections.forget_bias` renders. No I/O.
"""

from __future__ import annotations

import dataclasses

from s2s.artifacts import Bleu, TrainMetrics
from s2s.claims import seeds
from s2s.claims.paper_claims import common_beam
from s2s.claims.verdicts import DiffFn
from s2s.config import Params
from s2s.paper import Ours, tokenized_bleu


def pairs(params: Params) -> list[tuple[str, str]]:
    """(model of the paper's init, the same model with a forget bias) for every model with one:
    its twin on the same seeds where params have one, else one that differs in its seeds too."""
    out = []
    for name in params.models:
        cfg = params.model_config(name)
        if not (cfg.recurrent and cfg.forget_bias):
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
    """The first one-model system of `model`, and its widest beam."""
    for system, cfg in params.systems.items():
        if cfg.members == (model,):
            return system, cfg.widest_beam
    return None


_WAYS = {1: "helps", -1: "hurts", 0: "no significant difference",
         None: "no verdict (no interval over seeds, or no bootstrap)"}


def forget_bias_verdicts(params: Params, *, train: dict[str, TrainMetrics], bleu: Bleu,
                         diff: DiffFn | None) -> list[str]:
    """The verdict on the first pair of :func:`pairs` (over the seeds of all pairs: the interval
    over seeds of the paired difference, and for BLEU the test-sentence bootstrap, must both
    exclude 0), with its numbers. BLEU is compared at one beam, the widest at which both systems
    were scored."""
    out = []
    for plain, opened in pairs(params)[:1]:
        a, b = system_of(params, plain), system_of(params, opened)
        ma, mb = train.get(plain), train.get(opened)
        if not (ma and mb and a and b):
            continue
        # one beam for both sides, the bootstrap's and every replica's: the widest both were
        # scored at (each side's own widest would compare, say, beam 100 with beam 12)
        beam = common_beam(params, bleu, a[0], b[0])
        d = diff(Ours("translate", a[0], beam), Ours("translate", b[0], beam)) if (
            diff is not None and beam is not None) else None
        ppl = (f"dev perplexity {mb.dev_ppl:.2f} with the gate opened against {ma.dev_ppl:.2f}"
               f" with the paper's init")
        bleu_text = (f"; BLEU at beam {beam} {d.delta:+.2f} (95% CI {d.lo:+.2f} to {d.hi:+.2f}, "
                     f"paired bootstrap)" if d is not None else "")

        def dev(system: str) -> float | None:
            m = train.get(params.systems[system].members[0])
            return m.dev_ppl if m else None

        def tok(system: str) -> float | None:
            return tokenized_bleu(bleu, Ours("translate", system, beam))

        ppl_seeds = seeds.paired(params, b[0], a[0], dev)  # plain - opened: > 0 helps
        # opened - plain; none without a beam both were scored at
        bleu_seeds = seeds.paired(params, a[0], b[0], tok) if beam is not None else None
        boot = None if d is None else ((1 if d.delta > 0 else -1) if d.significant else 0)
        ppl_way = seeds.verdict_over_seeds(ppl_seeds)
        bleu_way = seeds.verdict(boot, bleu_seeds)
        # the two must agree; a measure without a verdict leaves none, unless the other shows
        # no difference
        ways = (ppl_way, bleu_way)
        word = ("helps here" if ways == (1, 1) else "does not help here" if ways == (-1, -1)
                else "cannot be judged here (no interval over seeds, or no bootstrap)"
                if None in ways and 0 not in ways else "makes no clear difference here")
        if ppl_way != bleu_way:  # say which measure fell short
            bleu_said = (_WAYS[bleu_way] if beam is not None else
                         "no beam both were scored at")
            word += f" (BLEU: {bleu_said}; dev perplexity: {_WAYS[ppl_way]})"
        over = "".join(f"; {what} {st.describe(x, y)}" for what, st, x, y in (
            ("dev perplexity", ppl_seeds, "paper's init", "opened"),
            ("BLEU", bleu_seeds, "opened", "paper's init")) if st is not None)
        out.append(f"{opened} vs {plain} ({seeds.design(params, a[0], b[0])}): {ppl}"
                   f"{bleu_text}{over}: opening the gate {word}; a verdict needs dev "
                   f"perplexity and BLEU to agree, each with its interval over seeds (and, for "
                   f"BLEU, the test-sentence bootstrap) excluding 0.")
    return out
