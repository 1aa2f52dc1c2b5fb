"""The paper's claims about its tables (``paper.yaml`` ``claims``), each checked against our
numbers, never assumed: reversal (perplexity, BLEU), the ensemble, a wider beam, rescoring, the
cost of an ensemble, and Table 2's setting.

A claim compares the outputs of ours that answer the paper's rows it rests on (params
``report.table1``); its verdict is one of :data:`s2s.claims.verdicts.VERDICTS`. Each claim
carries our numbers in the paper's form and the differences its verdict rests on, with their
intervals. No I/O.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass

from s2s.arch import LSTM_CELLS
from s2s.artifacts import Bleu, Claim, ClaimDifference, CostTiming, Timing, TrainMetrics
from s2s.claims import seeds
from s2s.claims.verdicts import (BOOTSTRAP, NO_BOOTSTRAP, NOT_RUN, SIGN, UNKNOWN, DiffFn,
                                 claim, combined, difference, sign_of)
from s2s.config import Params
from s2s.layout import BASELINE
from s2s.paper import (Ours, answer, baseline_ref, paper, perplexity_models,
                              tokenized_bleu)


def claims(params: Params, bleu: Bleu, train: dict[str, TrainMetrics],
           timing: Mapping[str, Timing], diff: DiffFn | None = None,
           timed: CostTiming | None = None) -> list[Claim]:
    """Each of the paper's main claims, checked against our numbers. With ``diff``, every BLEU
    difference a claim rests on carries its paired-bootstrap 95% interval (tokenised BLEU), and a
    difference whose interval contains 0 is no significant difference. `timing`: the translate
    stages' timing.json by system; `timed`: the timing stage's interleaved repetitions."""
    return [reversal_perplexity(params, train),
            _compare_rows(params, bleu, "reversal_bleu", diff),
            _compare_rows(params, bleu, "ensemble", diff),
            wider_beam(params, bleu, diff),
            rescoring(params, bleu, diff),
            cost_claim(params, timing, timed)]


# --- the claims ----------------------------------------------------------------------------------


def reversal_perplexity(params: Params, train: dict[str, TrainMetrics]) -> Claim:
    """The reversed model's dev perplexity is below the forward model's (§3.3), over seeds: the
    forward and reversed replicas paired on their seeds (:mod:`s2s.claims.seeds`); holds when the
    95% interval over seeds of the paired difference is above 0."""
    key = "reversal_perplexity"
    models = perplexity_models(params)
    fwd, rev = models.get("forward"), models.get("reversed")
    if fwd is None or rev is None:
        return claim(key, NOT_RUN, "no forward and reversed system of ours answers the paper's "
                     "perplexity rows (params report.table1)")
    f, r = train.get(fwd), train.get(rev)
    if f is None or r is None:
        return claim(key, UNKNOWN, f"training metrics of '{fwd}' or '{rev}' missing")
    ev = (f"dev ppl: {fwd} {f.dev_ppl:.2f} vs {rev} {r.dev_ppl:.2f}; "
          f"test ppl: {f.test_ppl:.2f} vs {r.test_ppl:.2f}")
    fs, rs = _system_of(params, fwd), _system_of(params, rev)
    stats = None
    if fs and rs:
        def ppl(system: str) -> float | None:
            m = train.get(params.systems[system].members[0])
            return m.dev_ppl if m else None

        stats = seeds.paired(params, rs, fs, ppl)  # forward - reversed: > 0 where reversal helps
        ev += f"; {seeds.design(params, fs, rs)}"
    diffs = ()
    if stats is not None:
        ev += f"; dev ppl {stats.describe('forward', 'reversed')}"
        diffs = (difference("forward - reversed", "dev ppl", stats.mean, stats.interval,
                            stats.over),)
    way = seeds.verdict_over_seeds(stats)
    if way is None:
        ev += f"; {seeds.NO_SEED_INTERVAL}"
    return claim(key, SIGN[way], ev, ours=f"test ppl {f.test_ppl:.2f} -> {r.test_ppl:.2f}",
                 differences=diffs)


def wider_beam(params: Params, bleu: Bleu, diff: DiffFn | None = None) -> Claim:
    """Every system of ours made of LSTMs (the paper's claim is about its LSTMs; the Transformer's
    beams are in the cost and BLEU tables) decoded at two beam widths or more: the widest against
    the narrowest. One-model systems whose models are seed replicas of one another, decoded at
    the same two beams, are one comparison, judged as :func:`_compare_systems` judges two
    systems: on the test sentences (the paired bootstrap of the group's first system) and over
    seeds (the 95% t-interval of the replicas' gains), both excluding 0 the same way
    (:func:`s2s.claims.seeds.verdict`). A system alone (an ensemble: one run) has no interval
    over seeds: a significant bootstrap gives it no verdict, one holding 0 no significant
    difference. The comparisons combine as :func:`s2s.claims.verdicts.combined` says."""
    key = "wider_beam"
    pairs = []
    if not any(len(s.beams) >= 2 and all(_is_lstm(params, m) for m in s.members)
               for s in params.systems.values()):
        return claim(key, NOT_RUN, "no system of LSTMs is decoded at two beam widths")
    for system, scfg in params.systems.items():
        if not all(_is_lstm(params, m) for m in scfg.members):
            continue
        beams = sorted(k for k in scfg.beams if _tok(bleu, system, k) is not None)
        if len(beams) >= 2:
            pairs.append((system, beams[0], _tok(bleu, system, beams[0]),
                          beams[-1], _tok(bleu, system, beams[-1])))
    if not pairs:
        return claim(key, UNKNOWN, "no system scored at two beam widths")
    by_system = {p[0]: p for p in pairs}
    groups: list[list[str]] = []  # seed replicas decoded at the same two beams, together
    for s, b0, _, b1, _ in pairs:
        if not any(s in g for g in groups):
            alike = {r: params.systems[r].members for r, p in by_system.items()
                     if p[1::2] == (b0, b1) and not any(r in g for g in groups)}
            groups.append(seeds.replicas_among(params, alike, s) or [s])
    better = [p for p in pairs if p[4] > p[2]]
    ds = {g[0]: diff(Ours("translate", g[0], by_system[g[0]][1]),
                     Ours("translate", g[0], by_system[g[0]][3])) if diff else None
          for g in groups}
    parts, diffs, ways, alone = [], [], [], []
    for g in groups:
        (s, b0, x0, b1, x1), d = by_system[g[0]], ds[g[0]]
        part = f"{s}: beam {b0} {x0:.2f} -> beam {b1} {x1:.2f}" + (
            f" ({x1 - x0:+.2f}, 95% CI {d.lo:+.2f} to {d.hi:+.2f})" if d else "")
        part += "".join(f", {r} {by_system[r][2]:.2f} -> {by_system[r][4]:.2f}" for r in g[1:])
        stats = None
        if len(g) > 1:
            stats = seeds.SeedStats(worse=tuple(by_system[r][2] for r in g),
                                    better=tuple(by_system[r][4] for r in g),
                                    diffs=tuple(by_system[r][4] - by_system[r][2] for r in g))
            part += f", {stats.describe(f'beam {b1}', f'beam {b0}')}"
        judged = _judged(f"{s} beam {b1} - beam {b0}", x1 - x0, d, stats,
                         f"{'/'.join(g)} beam {b1} - beam {b0}")
        diffs += judged.differences
        if judged.no_seed_interval:
            alone.append(s)
        parts.append(part)
        ways.append(judged.way)
    status = combined(ways)
    note = ((f"; {', '.join(alone)}: {seeds.NO_BEAM_INTERVAL}" if alone else "")
            + (f"; {NO_BOOTSTRAP}" if status == UNKNOWN and None in ds.values() else ""))
    return claim(key, status,
                 f"higher for {len(better)} of {len(pairs)} systems ({'; '.join(parts)}){note}",
                 ours="; ".join(f"{s} {x0:.2f} at beam {b0} -> {x1:.2f} at beam {b1}"
                                for s, b0, x0, b1, x1 in pairs),
                 differences=tuple(diffs))


def rescoring(params: Params, bleu: Bleu, diff: DiffFn | None = None) -> Claim:
    """Every rescorer of ours made of LSTMs (the paper's claim is about LSTMs) against the
    baseline's own 1-best, one run. Rescorers whose one model is a seed replica of another's
    (:func:`s2s.claims.seeds.rescorer_replicas`: `forward`, `forward_2`, `forward_3`) are one
    comparison, judged as :func:`_compare_systems` judges two systems: on the test sentences (the
    paired bootstrap of the group's first rescorer) and over seeds (the 95% t-interval of the
    replicas' rescored BLEU minus the 1-best, "3 replicas against one run"), both excluding 0
    the same way (:func:`s2s.claims.seeds.verdict`). A group of one rescorer (an ensemble, or a
    model no other rescorer replicates) has no interval over seeds: a significant bootstrap gives
    it no verdict, one holding 0 no significant difference. The groups combine as
    :func:`s2s.claims.verdicts.combined` says: holds when every group holds, does not hold when
    any does not, else no significant difference when any shows none; a group without a verdict
    otherwise leaves the claim without one (cannot tell)."""
    key = "rescoring"
    if params.rescore.baseline is None or not any(
            all(_is_lstm(params, m) for m in members)
            for members in params.rescore.rescorers.values()):
        return claim(key, NOT_RUN, "no baseline n-best lists rescored by LSTMs "
                     "(params rescore)")
    b = tokenized_bleu(bleu, Ours("rescore", BASELINE))
    rescored = [(n, tokenized_bleu(bleu, Ours("rescore", n)))
                for n, members in params.rescore.rescorers.items()
                if all(_is_lstm(params, m) for m in members)]
    scores = {n: x for n, x in rescored if x is not None}
    if b is None or not scores:
        return claim(key, UNKNOWN, "no rescoring output or no baseline 1-best was scored")
    groups: list[list[str]] = []  # the scored rescorers, seed replicas together
    for n in scores:
        if not any(n in g for g in groups):  # a rescorer in one group only, however many share
            groups.append([r for r in seeds.rescorer_replicas(params, n) or [n]
                           if r in scores and (r == n or not any(r in g for g in groups))])
    better = [n for n, x in scores.items() if x > b]
    parts, diffs, ways, boots, alone = [], [], [], [], []
    for g in groups:
        first, x = g[0], scores[g[0]]
        d = diff(Ours("rescore", BASELINE), Ours("rescore", first)) if diff else None
        stats = (seeds.against_one_run(b, [scores[r] for r in g], run_better=False)
                 if len(g) > 1 else None)
        part = f"{first} {x:.2f} ({x - b:+.2f}" + (
            f", 95% CI {d.lo:+.2f} to {d.hi:+.2f}" if d else "") + ")"
        part += "".join(f", {r} {scores[r]:.2f} ({scores[r] - b:+.2f})" for r in g[1:])
        if stats is not None:
            part += f", {stats.describe('/'.join(g), 'baseline 1-best')}"
        judged = _judged(f"{first} - baseline", x - b, d, stats, f"{'/'.join(g)} - baseline")
        diffs += judged.differences
        if judged.no_seed_interval:
            alone.append(first)
        parts.append(part)
        ways.append(judged.way)
        boots.append(d)
    status = combined(ways)
    note = ((f"; {', '.join(alone)}: {seeds.NO_RESCORER_INTERVAL}" if alone else "")
            + (f"; {NO_BOOTSTRAP}" if status == UNKNOWN and None in boots else ""))
    ev = f"baseline 1-best {b:.2f}; " + "; ".join(parts)
    return claim(key, status,
                 f"higher for {len(better)} of {len(scores)} rescorers ({ev}){note}",
                 ours=f"baseline {b:.2f} -> " + ", ".join(f"{n} {x:.2f}"
                                                          for n, x in scores.items()),
                 differences=tuple(diffs))


def baseline_strength(params: Params, bleu: Bleu, diff: DiffFn | None = None) -> Claim:
    """Table 2's setting (paper.yaml ``claims.baseline_strength``): the baseline whose n-best lists
    are rescored is stronger than the system of its first row (a single reversed LSTM) and weaker
    than that of its last (the ensemble of 5). The baseline is one run. Each difference is judged
    as :func:`_compare_systems` judges two systems: its paired-bootstrap interval over the test
    sentences and, where the other side is a one-model system with seed replicas
    (:func:`s2s.claims.seeds.replicas`), the 95% t-interval over those replicas against the
    baseline's one run must exclude 0 the same way (:func:`s2s.claims.seeds.verdict`); a side
    without replicas (the ensemble: one run against one run) has no interval over seeds, so a
    significant bootstrap gives that difference no verdict. Holds when both differences hold,
    does not hold when either does not, is no significant difference when either shows none,
    and cannot tell otherwise (:func:`s2s.claims.verdicts.combined`)."""
    key = "baseline_strength"
    spec_rows = _rows(key)
    ours = [answer(params, "table1", r) for r in spec_rows]
    if any(o is None for o in ours):
        return claim(key, NOT_RUN, _unanswered("output", [r for r, o in zip(spec_rows, ours)
                                                          if o is None]))
    weaker, base, stronger = (baseline_ref(params) if o.kind == "baseline" else o for o in ours)
    scores = [tokenized_bleu(bleu, o) for o in (weaker, base, stronger)]
    if any(s is None for s in scores):
        missing = [_name(o) for o, s in zip((weaker, base, stronger), scores) if s is None]
        return claim(key, UNKNOWN, f"not scored: {', '.join(missing)}")
    lo, b, hi = scores
    ds = [diff(weaker, base), diff(base, stronger)] if diff else [None, None]

    def over_seeds(other: Ours, run_better: bool) -> seeds.SeedStats | None:
        """`other`'s seed replicas (at its beam), each against the baseline's one run."""
        reps = seeds.replicas(params, other.system) if other.kind == "translate" else []
        if len(reps) < 2:
            return None
        return seeds.against_one_run(b, [_tok(bleu, r, other.beam) for r in reps],
                                     run_better=run_better)

    # both gaps must be above 0: base - weaker, stronger - base
    stats = [over_seeds(weaker, True), over_seeds(stronger, False)]
    labels = [f"{_name(base)} - {_name(weaker)}", f"{_name(stronger)} - {_name(base)}"]
    ev = (f"{_name(base)} {b:.2f}: {b - lo:+.2f} against {_name(weaker)} ({lo:.2f}"
          + (f"; 95% CI {ds[0].lo:+.2f} to {ds[0].hi:+.2f}" if ds[0] else "")
          + (f"; {stats[0].describe(_name(base), _name(weaker))}" if stats[0] else "")
          + f"), {b - hi:+.2f} against {_name(stronger)} ({hi:.2f}"
          + (f"; 95% CI {-ds[1].hi:+.2f} to {-ds[1].lo:+.2f}" if ds[1] else "")
          + (f"; {stats[1].describe(_name(stronger), _name(base))}" if stats[1] else "") + ")")
    judged = [_judged(label, value, d, st)
              for label, value, d, st in zip(labels, (b - lo, hi - b), ds, stats)]
    status = combined([j.way for j in judged])
    alone = [label for label, j in zip(labels, judged) if j.no_seed_interval]
    ev += (f"; {' and '.join(alone)}: {seeds.NO_BASELINE_INTERVAL}" if alone else "") + (
        f"; {NO_BOOTSTRAP}" if status == UNKNOWN and None in ds else "")
    return claim(key, status, ev, ours=f"{lo:.2f} < {b:.2f} < {hi:.2f}",
                 differences=tuple(x for j in judged for x in j.differences))


def cost_claim(params: Params, timing: Mapping[str, Timing],
               timed: CostTiming | None = None) -> Claim:
    """Table 1's caption: the ensemble at a narrow beam costs less per sentence than a single
    model at the widest (paper.yaml ``claims.cost.rows``: the ensemble's row, then the single
    models' rows; the first single model that was timed counts). With the timing stage's
    `timed` (its systems decoded in turns, in one process on one thread), holds when the 95%
    t-interval over the repetitions of the paired difference (single - ensemble, ms/sentence) is
    above 0, does not hold when it is below; without it (one timing per system, from the
    translate stages' `timing`), no verdict beyond the two numbers can be given."""
    key = "cost"
    ensemble, *singles = (answer(params, "table1", r) for r in _rows(key))
    if ensemble is None or all(o is None for o in singles):
        first, *others = _rows(key)
        missing = ([first] if ensemble is None else []) + (
            others if all(o is None for o in singles) else [])
        return claim(key, NOT_RUN, _unanswered("output", missing))
    if timed is not None:
        runs = {(t.system, t.beam): t.ms_per_sentence for t in timed.systems}
        e = runs.get((ensemble.system, ensemble.beam)) if ensemble else None
        single = next((o for o in singles if o is not None and (o.system, o.beam) in runs),
                      None)
        if e is not None and single is not None:
            s = runs[(single.system, single.beam)]
            stats = seeds.SeedStats(worse=tuple(s), better=tuple(e),
                                    diffs=tuple(a - b for a, b in zip(s, e)))
            iv = stats.interval
            way = stats.excludes_zero()
            where = (f"the GPU {timed.device} ({timed.precision}" if timed.device else
                     f"{timed.threads} thread{'s' if timed.threads != 1 else ''} ({timed.cpu}, "
                     f"{timed.precision}")
            ev = (f"{_name(ensemble)} {statistics.fmean(e):.2f} +- {_sd(e):.2f} ms/sentence vs "
                  f"{_name(single)} {statistics.fmean(s):.2f} +- {_sd(s):.2f}, {len(e)} "
                  f"repetitions in turns on {where}, {timed.sentences} sentences); difference "
                  f"{stats.mean:+.2f} ms" + (f" (95% interval {iv[0]:+.2f} to {iv[1]:+.2f})"
                                             if iv else ""))
            return claim(key, SIGN[way], ev,
                         ours=f"{_name(ensemble)} {statistics.fmean(e):.2f} vs {_name(single)} "
                              f"{statistics.fmean(s):.2f} ms/sentence",
                         differences=(difference(f"{_name(single)} - {_name(ensemble)}",
                                                 "ms/sentence", stats.mean, iv,
                                                 f"{len(e)} repetitions"),))

    def per_sentence(ours: Ours | None) -> float | None:
        if ours is None or ours.kind != "translate" or ours.system not in timing:
            return None
        b = timing[ours.system].beams.get(ours.beam)
        return None if b is None else b.ms_per_sentence

    e = per_sentence(ensemble)
    single, timed_one = next(((per_sentence(o), o) for o in singles
                              if per_sentence(o) is not None), (None, None))
    if e is None or single is None:
        missing = [w for w, v in ((_name(ensemble), e),
                                  (_single_name(singles), single)) if v is None]
        return claim(key, UNKNOWN, f"no timing for {' and '.join(missing)}")
    why = ("the timing stage's cost.json has no timing of them" if timed is not None else
           "the timing stage gives one")
    return claim(key, UNKNOWN,
                 f"{_name(ensemble)}: {e:.1f} ms/sentence vs {_name(timed_one)}: "
                 f"{single:.1f} ms/sentence, one timing each (the translate stages'): no "
                 f"interval, so no verdict ({why})",
                 ours=f"{_name(ensemble)} {e:.1f} vs {_name(timed_one)} {single:.1f} ms/sentence",
                 differences=(difference(f"{_name(timed_one)} - {_name(ensemble)}",
                                         "ms/sentence", single - e),))


def _sd(values) -> float:
    return statistics.stdev(values) if len(values) > 1 else 0.0


# --- helpers -------------------------------------------------------------------------------------


def _unanswered(what: str, rows: list[str]) -> str:
    """Why a claim is not run: the paper's rows (only those) no `what` of ours answers."""
    return (f"no {what} of ours answers the paper's row{'s' if len(rows) > 1 else ''} "
            + " or ".join(f"'{r}'" for r in rows) + " (params report.table1)")


def _rows(key: str) -> tuple[str, ...]:
    """The Table 1 rows claim `key` of paper.yaml compares."""
    return paper().claims[key].rows


def _compare_rows(params: Params, bleu: Bleu, key: str, diff: DiffFn | None) -> Claim:
    """Claim `key` of paper.yaml: the system answering its second row beats the first's, at the
    widest beam at which both were scored (12 in the paper)."""
    rows = _rows(key)
    worse, better = (answer(params, "table1", r) for r in rows)
    if not all(o is not None and o.kind == "translate" for o in (worse, better)):
        return claim(key, NOT_RUN, _unanswered("system", [
            r for r, o in zip(rows, (worse, better)) if o is None or o.kind != "translate"]))
    return _compare_systems(params, bleu, key, worse.system, better.system, diff)


def _compare_systems(params: Params, bleu: Bleu, key: str, worse: str, better: str,
                     diff: DiffFn | None = None) -> Claim:
    """`better` beats `worse` at their widest common beam: on the test sentences (the paired
    bootstrap of these two systems) and over seeds (their replicas, paired on seeds); holds when
    both 95% intervals are above 0, does not hold when both are below. Without the bootstrap (a
    hypothesis file missing) or without the interval over seeds, no verdict but no significant
    difference where the other holds 0 (:func:`s2s.claims.seeds.verdict`)."""
    beam = common_beam(params, bleu, worse, better)
    if beam is None:
        return claim(key, UNKNOWN, f"no beam at which both '{worse}' and '{better}' were scored")
    lo, hi = _tok(bleu, worse, beam), _tok(bleu, better, beam)
    d = diff(Ours("translate", worse, beam), Ours("translate", better, beam)) if diff else None
    stats = seeds.paired(params, worse, better, lambda s: _tok(bleu, s, beam))
    ev = (f"tokenized BLEU at beam {beam}: {better} {hi:.2f} vs {worse} {lo:.2f} "
          f"({hi - lo:+.2f}" + (f"; {_interval(d)}" if d is not None else "") + ")")
    if stats is not None:
        ev += f"; {stats.describe(better, worse)}"
    if seeds.replicas(params, worse) and seeds.replicas(params, better):
        ev += f"; {seeds.design(params, worse, better)}"
    judged = _judged(f"{better} - {worse}", hi - lo, d, stats)
    if judged.way is None:
        ev += f"; {NO_BOOTSTRAP if d is None else seeds.NO_SEED_INTERVAL}"
    return claim(key, SIGN[judged.way], ev,
                 ours=f"{worse} {lo:.2f} -> {better} {hi:.2f} at beam {beam}",
                 differences=judged.differences)


@dataclass(frozen=True)
class _Judged:
    """One BLEU difference judged on both its intervals (:func:`_judged`)."""
    way: int | None  # +1 holds, -1 does not hold, 0 no significant difference, None no verdict
    differences: tuple[ClaimDifference, ...]  # the bootstrap's, then the seeds' where there are
    no_seed_interval: bool  # no verdict, and no interval over seeds: the claim names it


def _judged(label: str, value: float, d, stats: seeds.SeedStats | None,
            seeds_label: str | None = None) -> _Judged:
    """The difference `label` (`value` BLEU) judged as every claim judges one: on the test
    sentences (`d`, the paired bootstrap's interval; None where its hypothesis files are
    missing) and over seeds (`stats`, labelled `seeds_label`, else `label`), both excluding 0
    the same way (:func:`s2s.claims.seeds.verdict`)."""
    differences = [_bleu_difference(label, value, d)]
    if stats is not None:
        differences.append(difference(seeds_label or label, "BLEU", stats.mean, stats.interval,
                                      stats.over))
    way = seeds.verdict(sign_of(d), stats)
    return _Judged(way, tuple(differences),
                   way is None and (stats is None or stats.interval is None))


def _bleu_difference(label: str, value: float, d) -> ClaimDifference:
    """A tokenized-BLEU difference, with the paired bootstrap's interval where there is one."""
    return difference(label, "BLEU", value, None if d is None else (d.lo, d.hi), BOOTSTRAP)


def _system_of(params: Params, model: str | None) -> str | None:
    """The first one-model system of params `systems` whose member is `model`."""
    return next((s for s, cfg in params.systems.items() if cfg.members == (model,)), None)


def _tok(bleu: Bleu, system: str, beam: int) -> float | None:
    return tokenized_bleu(bleu, Ours("translate", system, beam))


def common_beam(params: Params, bleu: Bleu, a: str, b: str) -> int | None:
    """The widest beam at which both systems were scored."""
    if a not in params.systems or b not in params.systems:
        return None
    beams = set(params.systems[a].beams) & set(params.systems[b].beams)
    beams = [k for k in beams if _tok(bleu, a, k) is not None and _tok(bleu, b, k) is not None]
    return max(beams) if beams else None


def _name(ours: Ours | None) -> str:
    return "an unanswered row" if ours is None else ours.label


def _single_name(singles: list[Ours | None]) -> str:
    beams = sorted({o.beam for o in singles if o is not None})
    return f"a single model at beam {' or '.join(map(str, beams))}" if beams else "a single model"


def _interval(d) -> str:
    return (f"paired-bootstrap 95% CI of the difference {d.lo:+.2f} to {d.hi:+.2f}"
            if d is not None else "")


def _is_lstm(params: Params, model: str) -> bool:
    cfg = params.model_config(model)
    return cfg.arch == "seq2seq" and cfg.cell in LSTM_CELLS
