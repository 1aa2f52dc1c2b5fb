"""The run in a few numbers (metrics/summary.json) and Figure 3's DVC plot data: the
library of :mod:`s2s.stages.summary`.
"""

from __future__ import annotations

import pandas as pd

from s2s.artifacts import Bleu, Scored, Timing, TrainMetrics
from s2s.config import Params
from s2s.layout import BASELINE, rescore_system


def summarize(params: Params, bleu: Bleu, train: dict[str, TrainMetrics],
              timing: dict[str, Timing]) -> dict:
    """The numbers of :data:`summary.json <s2s.evaluate.summary>` (absent entries left out)."""
    def r(x):
        return None if x is None else round(float(x), 2)

    out = {"bleu": {}, "rescore": {}, "ppl": {}, "minutes": {}}
    for system, scfg in params.systems.items():
        scores = {f"b{b}": r(e.bleu_tok) for b in scfg.beams
                  if isinstance(e := bleu.translation(system, b), Scored)}
        if scores:
            out["bleu"][system] = scores
    for name, e in bleu.rescore.items():
        if isinstance(e, Scored):
            out["rescore"][name] = r(e.bleu_tok)
    for model in params.models:
        if model in train:
            out["ppl"][model] = r(train[model].test_ppl)
    # the training loops' time, summed over every resume (a stage's wall_seconds is its last
    # run's: seconds, where it found the model trained)
    train_s = [m.train_seconds for m in train.values()]
    decode_s = [b.seconds for t in timing.values() for b in t.beams.values()]
    if train_s:
        out["minutes"]["train"] = r(sum(train_s) / 60)
    if decode_s:
        out["minutes"]["decode"] = r(sum(decode_s) / 60)
    return out


def figure3_plots(params: Params, groups: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Figure 3's two curves per axis (the report's): ``report.figure3_system`` at
    ``report.figure3_beam``, and the baseline's rescoring 1-best (else its own translation)."""
    lstm = (groups["system"] == params.report.figure3_system) & (
        groups["beam"] == str(params.report.figure3_beam))
    base = groups["system"] == rescore_system(BASELINE)
    if not base.any():
        b = params.rescore.baseline
        widest = str(params.systems[b].widest_beam) if b in params.systems else ""
        base = (groups["system"] == b) & (groups["beam"] == widest)
    out = {}
    for axis in ("length", "rarity"):
        a = groups[(groups["axis"] == axis) & lstm][["label", "mean", "bleu"]].rename(
            columns={"bleu": "lstm"})
        bl = groups[(groups["axis"] == axis) & base][["label", "bleu"]].rename(
            columns={"bleu": "baseline"})
        out[axis] = a.merge(bl, on="label", how="left")[["mean", "label", "lstm", "baseline"]]
    return out
