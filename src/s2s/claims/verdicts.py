"""The verdict of a claim, and how the differences it rests on make one. No I/O.

A verdict is one of :data:`VERDICTS`: :data:`HOLDS`, :data:`FAILS`, :data:`NO_DIFFERENCE` (the
95% interval of a difference contains 0), :data:`UNKNOWN` (the profile has what the claim rests
on, but the numbers are not there, or a difference has no interval: one seed pair gives none
over seeds, a missing hypothesis file none over test sentences; a point difference alone is
never a verdict) or
:data:`NOT_RUN` (the profile has no system, row or stage the claim rests on: `quick` has no
ensemble, baseline or rescoring). The report renders them as
the claims stage wrote them (:class:`s2s.artifacts.Claim`), and lists the claims not run apart.
"""

from __future__ import annotations

from typing import Any, Callable

from s2s.artifacts import VERDICTS, Claim, ClaimDifference
from s2s.paper import Ours, paper

# (s2s.artifacts.VERDICTS, in the order the summary lists them: what metrics/claims.json may hold)
# NO_DIFFERENCE: the 95% interval contains 0; NOT_RUN: the profile lacks what the claim rests on
HOLDS, FAILS, NO_DIFFERENCE, UNKNOWN, NOT_RUN = VERDICTS

# from s2s.claims.seeds.verdict; None: no interval over seeds (one seed pair), no verdict
SIGN = {1: HOLDS, -1: FAILS, 0: NO_DIFFERENCE, None: UNKNOWN}

BOOTSTRAP = "test sentences"  # what a paired bootstrap resamples: the interval of a BLEU difference

# (baseline, system) -> the paired-bootstrap Difference (s2s.evaluate.significance) of their
# tokenised BLEU, or None when either output is not there; the claims stage builds it from the
# hypothesis files (s2s.claims.inputs.BootstrapDiffs).
DiffFn = Callable[[Ours, Ours], Any]


def claim(key: str, status: str, evidence: str, *, ours: str = "",
          differences: tuple[ClaimDifference, ...] = ()) -> Claim:
    """Claim `key` of paper.yaml (its statement and the paper's numbers) with its verdict."""
    spec = paper().claims[key]
    return Claim(key=key, statement=spec.statement, paper=spec.paper, status=status, ours=ours,
                 differences=differences, evidence=evidence)


def difference(label: str, unit: str, value: float, interval: tuple[float, float] | None = None,
               over: str = "") -> ClaimDifference:
    """A difference, with its 95% interval over `over` where there is one. Without one, `over`
    stays where it says what the value is over (a mean over "1 seed pair", which the report
    must not show as if it were a test-set difference); the bootstrap's is dropped."""
    lo, hi = interval if interval is not None else (None, None)
    return ClaimDifference(label=label, unit=unit, value=float(value),
                           lo=None if lo is None else float(lo),
                           hi=None if hi is None else float(hi),
                           over=over if interval is not None or over != BOOTSTRAP else "")


def sign_of(d) -> int | None:
    """+1 or -1: `d`'s 95% interval is above or below 0; 0: it holds 0; None: there is no
    interval (`d` None: no hypothesis files to resample)."""
    if d is None:
        return None
    return 1 if d.lo > 0 else -1 if d.hi < 0 else 0


# what a claim's evidence adds where a missing paired bootstrap left it without a verdict
NO_BOOTSTRAP = ("no paired bootstrap where the hypotheses or the references were not there "
                "(the claims stage logs which), so no verdict")


def verdict_of(differences: list) -> str:
    """Every difference positive and significant: holds; any significantly negative: does not
    hold; any whose interval holds 0: no significant difference; else, where one has no interval
    (no hypothesis files to resample), cannot tell: a point difference alone is never a verdict,
    as a single seed pair is not (:func:`s2s.claims.seeds.verdict`)."""
    return combined([sign_of(d) for d in differences])


def combined(ways: list[int | None]) -> str:
    """The verdict of a claim that rests on several comparisons, from each one's way (+1 holds,
    -1 does not hold, 0 no significant difference, None no verdict: a bootstrap's
    :func:`sign_of`, or :func:`s2s.claims.seeds.verdict`): any -1, does not hold; else any 0, no
    significant difference; else any None (or no comparison at all), cannot tell; else holds.
    A comparison without a verdict so leaves the claim without one, unless another decides it
    against the claim."""
    if any(w == -1 for w in ways):
        return FAILS
    if any(w == 0 for w in ways):
        return NO_DIFFERENCE
    if not ways or any(w is None for w in ways):
        return UNKNOWN
    return HOLDS
