"""The run in a few numbers (metrics/summary.json) and Figure 3's DVC plot data: the
library of :mod:`s2s.stages.summary`.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pandas as pd

from s2s.config import Params
from s2s.io import atomic_write_json, atomic_write_text

log = logging.getLogger("s2s.summary")


def _json(path: Path, read: list[str]) -> dict | None:
    if not path.is_file():
        log.warning("absent: %s", path)
        return None
    read.append(str(path))
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None


def summarize(params: Params, bleu: dict, train: dict[str, dict],
              timing: dict[str, dict]) -> dict:
    """The numbers of :data:`summary.json <s2s.evaluate.summary>` (absent entries left out)."""
    def r(x):
        return None if x is None else round(float(x), 2)

    out = {"bleu": {}, "rescore": {}, "ppl": {}, "minutes": {}}
    for system, scfg in params.systems.items():
        beams = bleu.get("translate", {}).get(system, {})
        scores = {f"b{b}": r(beams[str(b)]["bleu_tok"]) for b in scfg.beams
                  if "bleu_tok" in beams.get(str(b), {})}
        if scores:
            out["bleu"][system] = scores
    for name, e in bleu.get("rescore", {}).items():
        if "bleu_tok" in e:
            out["rescore"][name] = r(e["bleu_tok"])
    for model in params.models:
        ppl = train.get(model, {}).get("test_ppl")
        if ppl is not None:
            out["ppl"][model] = r(ppl)
    train_s = [m["wall_seconds"] for m in train.values() if m.get("wall_seconds") is not None]
    decode_s = [b["seconds"] for t in timing.values() for b in (t.get("beams") or {}).values()]
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
    base = groups["system"] == "rescore/baseline"
    if not base.any():
        b = params.rescore.baseline
        widest = str(max(params.systems[b].beams)) if b in params.systems else ""
        base = (groups["system"] == b) & (groups["beam"] == widest)
    out = {}
    for axis in ("length", "rarity"):
        a = groups[(groups["axis"] == axis) & lstm][["label", "mean", "bleu"]].rename(
            columns={"bleu": "lstm"})
        bl = groups[(groups["axis"] == axis) & base][["label", "bleu"]].rename(
            columns={"bleu": "baseline"})
        out[axis] = a.merge(bl, on="label", how="left")[["mean", "label", "lstm", "baseline"]]
    return out
