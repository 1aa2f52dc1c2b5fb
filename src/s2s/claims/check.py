"""Every verdict the report shows, checked against our numbers: the record the claims stage
writes (:class:`s2s.artifacts.Claims`) and the report renders without recomputing.
"""

from __future__ import annotations

from s2s.artifacts import Claims
from s2s.claims.analyses import analysis_claims
from s2s.claims.forget_bias import forget_bias_verdicts
from s2s.claims.inputs import ClaimInputs
from s2s.claims.paper_claims import baseline_strength, claims
from s2s.config import Params


def check_all(params: Params, found: ClaimInputs) -> Claims:
    """The paper's claims (:mod:`s2s.claims.paper_claims`), then the analyses' (where the
    profile has the analyze stage), Table 2's setting and the forget-bias comparison."""
    checks = claims(params, found.bleu, found.train, found.timing, diff=found.diff,
                    timed=found.cost)
    if found.analysis is not None:
        checks += analysis_claims(found.analysis)
    setting = baseline_strength(params, found.bleu, diff=found.diff)
    forget_bias = tuple(forget_bias_verdicts(params, train=found.train, bleu=found.bleu,
                                             diff=found.diff))
    # after every claim has asked for its bootstraps: were all the hypothesis files there? (the
    # stage's BootstrapDiffs lists those it did not find; a test's function of intervals, none)
    missing = getattr(found.diff, "missing", ())
    return Claims(intervals=found.diff is not None and not missing,
                  claims=tuple(checks), setting=setting, forget_bias=forget_bias)
