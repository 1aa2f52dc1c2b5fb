"""Stage `summary`: the run in a few numbers, for DVC's comparison tools.

Reads
  ``<metrics_dir>/bleu.json`` (the evaluate stage), ``<metrics_dir>/train/<model>.json``,
  ``<translate_dir>/<system>/timing.json``, ``groups_csv`` (``outputs/evaluate/figure3.csv``).
Writes
  ``out`` (``metrics/summary.json``, tracked by git, ``cache: false``): numbers only, so that
  ``dvc metrics show/diff`` and ``dvc exp show`` print them in a readable width::

      {"bleu": {system: {"b<beam>": tokenised BLEU}},   # the paper's method
       "rescore": {name: tokenised BLEU},               # Table 2, baseline and oracle included
       "ppl": {model: test perplexity},
       "minutes": {"train": all models, "decode": all systems and beams}}

  The text fields (method, signatures) stay in ``bleu.json``.
  ``<plots_dir>/figure3_{length,rarity}.csv``: Figure 3's curves as DVC plot data (columns
  ``mean``, ``label``, ``lstm``, ``baseline``: the report's two curves).
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


def main(params: Params, *, metrics_dir: Path, translate_dir: Path, groups_csv: Path,
         out: Path, plots_dir: Path) -> dict:
    t0 = time.perf_counter()
    read: list[str] = []
    bleu = _json(Path(metrics_dir) / "bleu.json", read)
    if bleu is None:
        raise FileNotFoundError(f"{Path(metrics_dir) / 'bleu.json'}: no BLEU metrics; run the "
                                f"evaluate stage first")
    train = {m: t for m in params.models
             if (t := _json(Path(metrics_dir) / "train" / f"{m}.json", read)) is not None}
    timing = {s: t for s in params.systems
              if (t := _json(Path(translate_dir) / s / "timing.json", read)) is not None}
    summary = summarize(params, bleu, train, timing)
    atomic_write_json(Path(out), summary)
    written = [str(out)]
    groups = pd.read_csv(groups_csv, dtype={"system": str, "beam": str, "label": str},
                         keep_default_na=False)
    read.append(str(groups_csv))
    for axis, frame in figure3_plots(params, groups).items():
        path = Path(plots_dir) / f"figure3_{axis}.csv"
        atomic_write_text(path, frame.to_csv(index=False))
        written.append(str(path))
    log.info("read %s; wrote %s in %.1fs", ", ".join(read), ", ".join(written),
             time.perf_counter() - t0)
    return summary
