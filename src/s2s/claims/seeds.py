"""Seeds: which models are replicas of one configuration, how two sides of a comparison pair up,
and the spread over seeds of what a claim compares. No I/O.

Two models are seed replicas when their configs (and training recipes) differ only in
``init_seed`` and ``order_seed``. A comparison of two single-model systems (forward against
reversed, the forget bias's against the paper's init) takes every replica of each side (the
one-model systems of params `systems` whose member is one) and pairs them on their seeds: a pair
shares ``init_seed`` and ``order_seed``, i.e. the same initial weights (where the shapes agree)
and the same minibatch order, so that its difference is the compared setting's alone. The claims
table then gives each side's mean and standard deviation over seeds and a 95% t-interval of the
paired difference; a side that is an ensemble of the other's replicas is one value, paired with
each replica. Rescorers (params ``rescore.rescorers``) whose one model is a seed replica of
another's are grouped alike (:func:`rescorer_replicas`), each paired with the baseline's one
1-best (:func:`against_one_run`).
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from s2s.config import SEEDS, Params, model_record, record_key

# Student's t at 97.5% (two-sided 95%) for 1..30 degrees of freedom, as printed tables give it;
# beyond, computed (:func:`t_quantile`): the normal's 1.96 is not reached (2.0395 at 31, 1.9799 at
# 120), and falling back to it made those intervals some 4% too narrow.
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
        2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
        2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t975(df: int) -> float:
    """Student's t at 97.5% with `df` degrees of freedom (1 or more)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be 1 or more, not {df}")
    return T975[df - 1] if df <= len(T975) else t_quantile(0.975, df)


@functools.lru_cache(maxsize=256)
def t_quantile(p: float, df: int) -> float:
    """The `p` quantile (0.5 < p < 1) of Student's t with `df` degrees of freedom, to 1e-9: the
    root of its distribution function, by bisection (that function is monotone)."""
    tail = 1.0 - p
    lo, hi = 0.0, 1.0
    while _t_upper(hi, df) > tail:  # widen until the root is bracketed
        lo, hi = hi, 2.0 * hi
    while hi - lo > 1e-10:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _t_upper(mid, df) > tail else (lo, mid)
    return (lo + hi) / 2


def _t_upper(t: float, df: int) -> float:
    """P(T > t) for t >= 0 and T Student's t with `df` degrees of freedom: half the regularized
    incomplete beta I_x(df/2, 1/2) at x = df / (df + t^2)."""
    return 0.5 * _beta_inc(df / 2, 0.5, df / (df + t * t))


def _beta_inc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta I_x(a, b), 0 <= x <= 1: its continued fraction where that
    converges fast (x below (a + 1) / (a + b + 2)), else 1 - I_{1-x}(b, a)."""
    if x <= 0.0 or x >= 1.0:
        return 0.0 if x <= 0.0 else 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta, by the modified Lentz method."""
    tiny, eps = 1e-300, 1e-15
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 100_000):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < eps:
            break
    return h


def replica_key(params: Params, model: str) -> str:
    """Equal for two models that differ in their seeds alone."""
    return record_key(params, model, SEEDS)


def seeds_of(params: Params, model: str) -> tuple[int, int]:
    cfg = params.model_config(model)
    return cfg.init_seed, cfg.order_seed


def replicas(params: Params, system: str) -> list[str]:
    """The one-model systems whose member is a seed replica of `system`'s one member, `system`
    first, one system per model: a second system of a model already taken (the same model at
    other beams) is the same seed again, not a replica; [] if `system` is not a one-model
    system."""
    return replicas_among(params, {s: cfg.members for s, cfg in params.systems.items()}, system)


def rescorer_replicas(params: Params, rescorer: str) -> list[str]:
    """The rescorers (params ``rescore.rescorers``) whose one member is a seed replica of
    `rescorer`'s one member, `rescorer` first, one rescorer per model: a second rescorer of a
    model already taken is the same seed again, not a replica; [] if `rescorer` is not a
    one-model rescorer (an ensemble's is one run)."""
    return replicas_among(params, params.rescore.rescorers, rescorer)


def replicas_among(params: Params, units: Mapping[str, Sequence[str]], first: str) -> list[str]:
    """Of `units` (name -> its models), those of one model that is a seed replica of `first`'s one
    model, `first` first, one a model."""
    if len(units.get(first, ())) != 1:
        return []
    key = replica_key(params, units[first][0])
    found, models = [], set()
    for name in [first, *units]:
        members = units[name]
        if len(members) == 1 and members[0] not in models and (
                replica_key(params, members[0]) == key):
            found.append(name)
            models.add(members[0])
    return found


def differences(params: Params, a: str, b: str) -> list[str]:
    """The config and recipe keys in which models `a` and `b` differ, seeds included."""
    ra, rb = model_record(params, a), model_record(params, b)
    return sorted(k for k in ra.keys() | rb.keys() if ra.get(k) != rb.get(k))


def design(params: Params, a: str, b: str) -> str:
    """What differs between the members of one-model systems `a` and `b`, in words derived from
    their configs: "differ in reverse_source only; seeds shared (paired)" or which seeds differ."""
    ma, mb = params.systems[a].members[0], params.systems[b].members[0]
    diff = differences(params, ma, mb)
    setting = [k for k in diff if k not in SEEDS]
    seeds = [k for k in diff if k in SEEDS]
    what = (f"{ma} and {mb} differ in {', '.join(setting)}" if setting
            else f"{ma} and {mb} differ in no setting")
    return what + ("; their seeds differ too (" + ", ".join(seeds) + "): unpaired" if seeds
                   else "; same seeds (paired)")


@dataclass(frozen=True)
class SeedStats:
    """Over seeds: each side's values, and the paired differences (better - worse)."""

    worse: tuple[float, ...]
    better: tuple[float, ...]
    diffs: tuple[float, ...]
    # replicas of either side whose seeds no replica of the other side has (one whose seed an
    # experiment changed): left out of the pairs, and named where the evidence is told
    unpaired: tuple[str, ...] = ()
    # replicas not scored (a failed decode), and the replicas their pairs then left out
    unscored: tuple[str, ...] = ()
    left_out: tuple[str, ...] = ()

    @property
    def one_run(self) -> bool:
        """One side is a single run (an ensemble) paired with each replica of the other: the
        interval is then over those replicas only; another run of the single side would move
        every difference alike, which it cannot see."""
        return self.pairs > 1 and 1 in (len(self.worse), len(self.better))

    @property
    def over(self) -> str:
        """What the interval is over, in words: "3 seed pairs", or "5 replicas against one run"."""
        if self.one_run:
            return f"{self.pairs} replicas against one run"
        return f"{self.pairs} seed pair{'s' if self.pairs != 1 else ''}"

    @property
    def pairs(self) -> int:
        return len(self.diffs)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.diffs)

    @property
    def interval(self) -> tuple[float, float] | None:
        """The 95% t-interval of the mean paired difference; None with fewer than 2 pairs."""
        if self.pairs < 2:
            return None
        half = t975(self.pairs - 1) * statistics.stdev(self.diffs) / math.sqrt(self.pairs)
        return self.mean - half, self.mean + half

    def excludes_zero(self) -> int:
        """+1: the interval is above 0; -1: below; 0: it holds 0 (or there is none)."""
        iv = self.interval
        if iv is None:
            return 0
        return 1 if iv[0] > 0 else -1 if iv[1] < 0 else 0

    def describe(self, better: str, worse: str) -> str:
        """In words, each side named (`better`: the side whose value the differences add)."""
        def side(values):
            if len(values) == 1:
                return f"{values[0]:.2f} (1 seed)"
            return (f"{statistics.fmean(values):.2f} +- {statistics.stdev(values):.2f} "
                    f"({len(values)} seeds)")

        iv = self.interval
        inter = (f"95% interval over {self.over} {iv[0]:+.2f} to {iv[1]:+.2f}"
                 if iv is not None else f"{self.pairs} seed pair: no interval over seeds")
        alone = (f"; {', '.join(self.unpaired)} unpaired (no replica of the other side has "
                 f"{'its' if len(self.unpaired) == 1 else 'their'} init and order seeds)"
                 if self.unpaired else "")
        if self.unscored:
            alone += (f"; {', '.join(self.unscored)} not scored"
                      + (f", so {', '.join(self.left_out)} left out of the pairs"
                         if self.left_out else ""))
        return (f"over seeds: {better} {side(self.better)} vs {worse} {side(self.worse)}; "
                f"paired difference {self.mean:+.2f} ({inter}){alone}")


def paired(params: Params, worse: str, better: str,
           value: Callable[[str], float | None]) -> SeedStats | None:
    """`value` (a number of a one-model system) over the seed replicas of `worse` and `better`,
    paired on their seeds. A side with no replicas (an ensemble) is its one value, paired with
    each replica of the other side. A replica whose value is missing (a failed decode) leaves out
    its pair, not the others. None when neither side has replicas or no pair has both values."""
    rw, rb = replicas(params, worse), replicas(params, better)
    if not rw and not rb:
        return None
    unpaired: list[str] = []
    if rw and rb:
        by_seed = {seeds_of(params, params.systems[s].members[0]): s for s in rb}
        pairs = [(w, by_seed[k]) for w in rw
                 if (k := seeds_of(params, params.systems[w].members[0])) in by_seed]
        taken = {s for pair in pairs for s in pair}
        unpaired = [s for s in (*rw, *rb) if s not in taken]
    elif rw:
        pairs = [(w, better) for w in rw]
    else:
        pairs = [(worse, b) for b in rb]
    values = {s: value(s) for s in {*(rw or [worse]), *(rb or [better])}}
    kept = [(w, b) for w, b in pairs if values[w] is not None and values[b] is not None]
    if not kept:
        return None
    used = {s for pair in kept for s in pair}
    dropped = [s for pair in pairs if pair not in kept for s in pair]
    unscored = tuple(dict.fromkeys(s for s in dropped if values[s] is None))
    left_out = tuple(dict.fromkeys(s for s in dropped if values[s] is not None and s not in used))
    # each side's values: every scored replica but those whose pair a missing score left out
    # (an unpaired replica, of seeds the other side lacks, still counts in its side's)
    def side(systems: list[str]) -> tuple[float, ...]:
        return tuple(values[s] for s in systems if values[s] is not None and s not in left_out)

    return SeedStats(worse=side(rw or [worse]), better=side(rb or [better]),
                     diffs=tuple(values[b] - values[w] for w, b in kept),
                     unpaired=tuple(unpaired), unscored=unscored, left_out=left_out)


def against_one_run(run: float, values: Sequence[float | None], *,
                    run_better: bool) -> SeedStats | None:
    """The seed replicas' `values` of one side (None: a replica not scored, left out), each
    paired with the one run of the other side (an ensemble, the rescored baseline: a side with no
    replicas); `run_better`: the differences are run - replica, else replica - run. None when no
    replica has a value."""
    got = tuple(v for v in values if v is not None)
    if not got:
        return None
    if run_better:
        return SeedStats(worse=got, better=(run,), diffs=tuple(run - v for v in got))
    return SeedStats(worse=(run,), better=got, diffs=tuple(v - run for v in got))


# what a claim's evidence adds where seeds.verdict gives none
NO_SEED_INTERVAL = ("no verdict without an interval over seeds: it needs two seed pairs or more "
                    "(seed replicas, each a one-model system, of every single model compared, "
                    "paired on their init and order seeds)")


# the same, for a rescorer (params rescore.rescorers) compared with the baseline's 1-best
NO_RESCORER_INTERVAL = ("no verdict without an interval over seeds: it needs two seed replicas "
                        "or more of the rescorer's one model, each a one-model rescorer of "
                        "params rescore.rescorers (an ensemble rescorer is one run, as the "
                        "baseline's 1-best is)")


# the same, for a system compared with itself at a wider beam (the wider-beam claim)
NO_BEAM_INTERVAL = ("no verdict without an interval over seeds: it needs two seed replicas or "
                    "more of a one-model system, each a system of params systems decoded at the "
                    "same two beams (an ensemble is one run)")


# the same, for a system compared with the baseline's 1-best (Table 2's setting): replicas of the
# system's one model give an interval against the baseline's one run; an ensemble has none
NO_BASELINE_INTERVAL = ("no verdict without an interval over seeds: it needs two seed replicas or "
                        "more of the compared system's one model, each a one-model system of "
                        "params systems (an ensemble is one run, as the baseline's 1-best is, "
                        "so its difference from the baseline has none)")


def verdict(boot_sign: int | None, seeds: SeedStats | None) -> int | None:
    """+1 holds, -1 does not hold, 0 no significant difference: both the test-sentence bootstrap
    (`boot_sign`: +1/-1 significant, 0 not; None: there is none, its hypothesis files missing)
    and the interval over seeds must exclude 0 the same way. Where one of the two intervals is
    missing, the other holding 0 still says 0; else None, no verdict: a single run cannot say
    how far another run of the recipe lands, however clear the bootstrap over its test
    sentences is, nor the seeds' interval how sure each run's own number is."""
    if seeds is None or seeds.interval is None:
        return 0 if boot_sign == 0 else None
    s = seeds.excludes_zero()
    if boot_sign is None:
        return 0 if s == 0 else None
    return boot_sign if boot_sign == s else 0


def verdict_over_seeds(seeds: SeedStats | None) -> int | None:
    """:func:`verdict` of a measure no test-sentence bootstrap has (a perplexity): the interval
    over seeds alone; None without one."""
    if seeds is None or seeds.interval is None:
        return None
    return seeds.excludes_zero()


def one_model_systems(params: Params, systems: Sequence[str]) -> list[str]:
    return [s for s in systems if s in params.systems and len(params.systems[s].members) == 1]
