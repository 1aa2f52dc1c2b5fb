"""What the claims are checked against, read once (:func:`load`): BLEU, training metrics,
decoding timings (read as the summary and report stages read them,
:func:`s2s.artifacts.read_measured`), the cost claim's timing, the analyses, and the hypothesis
files behind the paired bootstraps (:class:`BootstrapDiffs`).

A required input that is missing (``metrics/bleu.json``) is an error; an optional one is logged as
absent. A file that is there but does not match its record is an error naming the file and the key.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from s2s.analysis import outputs as analysis_outputs
from s2s.analysis.outputs import Analyses
from s2s.artifacts import Bleu, CostTiming, Timing, TrainMetrics, read_measured
from s2s.claims.verdicts import DiffFn
from s2s.config import Params
from s2s.layout import ClaimsPaths, hypothesis_files
from s2s.paper import Ours

log = logging.getLogger("s2s.claims")


@dataclass(frozen=True)
class ClaimInputs:
    """Everything the claims stage reads."""

    bleu: Bleu
    train: dict[str, TrainMetrics]  # by model
    timing: dict[str, Timing]  # by system: the translate stages' timing.json
    analysis: Analyses | None  # the analyze stage's folder, where the profile has one
    cost: CostTiming | None  # the timing stage's cost.json
    diff: DiffFn | None  # the paired bootstraps (with the prepared test references)
    read: list[str]  # every file read, for the log


def load(params: Params, paths: ClaimsPaths) -> ClaimInputs:
    """The claims stage's inputs; with ``paths.prepared``, the paired bootstraps over its
    ``test.tok.fr`` (the hypothesis files are read when a claim asks for one)."""
    read: list[str] = []
    diff = None if paths.prepared is None else BootstrapDiffs(paths, read)
    found = read_measured(paths, params.models, params.systems, read)
    return ClaimInputs(bleu=found.bleu, train=found.train, timing=found.timing,
                       analysis=analysis_outputs.read_if_present(paths.analysis, read),
                       cost=CostTiming.read_if_present(paths.cost, read) if paths.cost else None,
                       diff=diff, read=read)


class BootstrapDiffs:
    """:data:`s2s.claims.verdicts.DiffFn`: the paired bootstrap (sacreBLEU's, tokenised BLEU) of
    two outputs, read from the translate and rescore folders against ``test.tok.fr``; None when
    one is missing (logged, and listed in ``missing``: the claims record then does not say that
    every BLEU difference carries an interval). Each pair is computed once."""

    def __init__(self, paths: ClaimsPaths, read: list[str]):
        self.refs_path = paths.references
        self.paths, self.read = paths, read
        self.missing: list[str] = []  # the outputs whose hypotheses were asked for and not found
        self._refs: list[str] | None = None
        self._cache: dict = {}

    def _path(self, o: Ours) -> Path | None:
        """`o`'s tokenised hypotheses, where they would be; None for a rescoring output where no
        rescore folder was given."""
        if o.kind == "translate":
            stem = self.paths.translation(o.system, o.beam)
        elif self.paths.rescore is not None:
            stem = self.paths.rescoring(o.system)
        else:
            return None
        return hypothesis_files(stem)[0]

    def __call__(self, baseline: Ours, system: Ours):
        from s2s.evaluate.bleu import read_lines
        from s2s.evaluate.significance import paired_bootstrap

        key = (baseline, system)
        if key not in self._cache:
            a, b = self._path(baseline), self._path(system)
            gone = [str(p) if p is not None else f"rescore/{o.system} (no rescore folder given)"
                    for o, p in ((baseline, a), (system, b), (None, self.refs_path))
                    if p is None or not p.is_file()]
            if gone:
                self.missing += [g for g in gone if g not in self.missing]
                log.warning("no paired bootstrap of %s against %s (not found: %s): its verdict "
                            "cannot hold without it (it may still fail on another's interval)",
                            system.label, baseline.label, ", ".join(gone))
                self._cache[key] = None
            else:
                if self._refs is None:
                    self._refs = read_lines(self.refs_path)
                    self.read.append(str(self.refs_path))
                self._cache[key] = paired_bootstrap(
                    read_lines(a), read_lines(b), self._refs, baseline_name=str(a),
                    system_name=str(b), ref_name=str(self.refs_path))
                log.info("paired bootstrap %s vs %s: %s", b, a, self._cache[key].describe())
        return self._cache[key]
