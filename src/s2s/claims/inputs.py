"""What the claims are checked against, read once (:func:`load`): BLEU, training metrics,
decoding timings, the cost claim's timing, the analyses, and the hypothesis files behind the
paired bootstraps (:class:`BootstrapDiffs`). The report reads the same metrics through
:func:`read_bleu`, :func:`read_train` and :func:`read_timing`.

A required input that is missing (``metrics/bleu.json``) is an error; an optional one is logged as
absent. A file that is there but does not match its record is an error naming the file and the key.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from s2s.analysis import outputs as analysis_outputs
from s2s.analysis.outputs import Analyses
from s2s.artifacts import Bleu, CostTiming, Timing, TrainMetrics
from s2s.claims.verdicts import DiffFn
from s2s.config import Params
from s2s.layout import ClaimsPaths, bleu_file, hypothesis_files, timing_file, train_metrics_files
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
    return ClaimInputs(bleu=read_bleu(paths.metrics, read), train=read_train(paths.metrics, read),
                       timing=read_timing(params, paths.translate, read),
                       analysis=analysis_outputs.read_if_present(paths.analysis, read),
                       cost=CostTiming.read_if_present(paths.cost, read) if paths.cost else None,
                       diff=diff, read=read)


def read_bleu(metrics_dir: Path, read: list[str]) -> Bleu:
    """``<metrics_dir>/bleu.json``: required."""
    path = bleu_file(metrics_dir)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no BLEU metrics; run the evaluate stage first")
    read.append(str(path))
    return Bleu.read(path)


def read_train(metrics_dir: Path, read: list[str]) -> dict[str, TrainMetrics]:
    """``<metrics_dir>/train/*.json`` by model."""
    found = (TrainMetrics.read_if_present(p, read)
             for p in train_metrics_files(metrics_dir))
    return {m.model: m for m in found}


def read_timing(params: Params, translate_dir: Path, read: list[str]) -> dict[str, Timing]:
    """Each system's ``timing.json`` under `translate_dir`, where there is one."""
    found = {s: Timing.read_if_present(timing_file(translate_dir, s), read)
             for s in params.systems}
    return {s: t for s, t in found.items() if t is not None}


class BootstrapDiffs:
    """:data:`s2s.claims.verdicts.DiffFn`: the paired bootstrap (sacreBLEU's, tokenised BLEU) of
    two outputs, read from the translate and rescore folders against ``test.tok.fr``; None when
    one is missing. Each pair is computed once."""

    def __init__(self, paths: ClaimsPaths, read: list[str]):
        self.refs_path = paths.references
        self.paths, self.read = paths, read
        self._refs: list[str] | None = None
        self._cache: dict = {}

    def _path(self, o: Ours) -> Path | None:
        if o.kind == "translate":
            stem = self.paths.translation(o.system, o.beam)
        elif self.paths.rescore is not None:
            stem = self.paths.rescoring(o.system)
        else:
            return None
        tok, _ = hypothesis_files(stem)
        return tok if tok.is_file() else None

    def __call__(self, baseline: Ours, system: Ours):
        from s2s.evaluate.bleu import read_lines
        from s2s.evaluate.significance import paired_bootstrap

        key = (baseline, system)
        if key not in self._cache:
            a, b = self._path(baseline), self._path(system)
            if a is None or b is None or not self.refs_path.is_file():
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
