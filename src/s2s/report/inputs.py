"""Everything the report reads, loaded once (:func:`load`), as the records of :mod:`s2s.artifacts`
where the pipeline has one; and what the claims stage checks the claims against
(:func:`load_for_claims`), the hypothesis files behind the bootstrap intervals among them.

A required input that is missing (``metrics/bleu.json``) is an error; an optional one is logged as
absent and shows in the report as "not run". A file that is there but does not match its record is
an error naming the file and the key.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from s2s.artifacts import (AnalysisMeta, AttentionWeights, Bleu, Claims, CostTiming, Manifest,
                           PrepareMetrics, Timing, TrainMetrics, VocabMetrics, read_table)
from s2s.config import Params
from s2s.evaluate.outputs import (hypothesis_files, rescore_output, timing_file,
                                  translation)
from s2s.report.paper import Ours

log = logging.getLogger("s2s.report")

GROUP_COLUMNS = ["system", "beam", "axis", "label", "lo", "hi", "sentences", "mean", "bleu"]

# Every CSV the report reads: the columns it uses, and which of them hold numbers. Each file is
# checked by s2s.artifacts.read_table (a file cut mid-row, a missing column or a value that is
# not a number is an error naming the file and line), never drawn from half.
CURVE_COLUMNS = ("step", "epoch", "lr", "train_ppl", "dev_ppl")
LENGTH_DROP = (("system", "beam", "short_label", "long_label", "short_bleu", "long_bleu", "drop",
                "drop_lo", "drop_hi", "reference", "drop_minus_reference", "diff_lo", "diff_hi"),
               ("short_bleu", "long_bleu", "drop", "drop_lo", "drop_hi", "drop_minus_reference",
                "diff_lo", "diff_hi"))
ANALYSIS_TABLES = {  # key: (file, columns, numbers, required)
    "points": ("figure2.csv", ("model", "reverse_source", "group", "phrase", "x", "y"),
               ("x", "y"), True),
    "figure2": ("figure2_summary.csv", ("model", "reverse_source", "representation",
                                        "paraphrase_distance", "paraphrase_pairs",
                                        "swap_distance", "swap_pairs"),
                ("paraphrase_distance", "paraphrase_pairs", "swap_distance", "swap_pairs"), True),
    "hist": ("forget_hist.csv", ("model", "stack", "layer", "bin_lo", "bin_hi", "count",
                                 "density"), ("bin_lo", "bin_hi", "count", "density"), True),
    "units": ("forget_units.csv", ("model", "stack", "layer", "unit", "mean_f", "half_life"),
              ("mean_f", "half_life"), True),
    "forget": ("forget_summary.csv", ("model", "stack", "layer", "mean_f"), ("mean_f",), True),
    "reach": ("gradient_reach.csv", ("model", "reverse_source", "position", "sentences",
                                     "mean_norm", "mean_share"),
              ("position", "sentences", "mean_norm", "mean_share"), True),
    # absent from the artifacts of a stage run before they existed: empty
    "training": ("gradient_reach_training.csv", ("model", "epoch", "position", "mean_share"),
                 ("epoch", "position", "mean_share"), False),
    "training_diff": ("gradient_reach_training_diff.csv", ("epoch", "diff", "lo", "hi"),
                      ("epoch", "diff", "lo", "hi"), False),
    "decay": ("memory_decay.csv", ("model", "stack", "layer", "steps_after", "mean_abs_dc"),
              ("steps_after", "mean_abs_dc"), False),
    "half_life": ("memory_half_life.csv", ("model", "layer"), (), False),
    "init_reach": ("init_reach.csv", ("cell", "forget_bias", "steps_back", "relative"),
                   ("steps_back", "relative"), False),
}


def read_analysis(analysis_dir: Path) -> dict:
    """The analyze stage's artifacts, each checked: its JSON summary as `meta`, its CSVs as
    frames (an optional one that is absent: an empty frame)."""
    d = Path(analysis_dir)
    out: dict = {"meta": AnalysisMeta.read(d / "analysis.json")}
    for key, (file, columns, numbers, required) in ANALYSIS_TABLES.items():
        if required or (d / file).is_file():
            out[key] = read_table(d / file, columns=columns, numbers=numbers)
        else:
            out[key] = pd.DataFrame()
    return out


@dataclass
class Artifacts:
    """Everything the report reads."""

    bleu: Bleu
    train: dict[str, TrainMetrics]  # by model
    curves: dict[str, pd.DataFrame]  # by model: metrics/curves/<model>.csv
    timing: dict[str, Timing]  # by system
    groups: pd.DataFrame  # the evaluate stage's Figure 3 groups
    prepare: PrepareMetrics | None  # metrics/prepare.json
    vocab: VocabMetrics | None  # metrics/vocab.json
    manifest: Manifest | None
    attention: AttentionWeights | None  # the attention stage's weights.json
    analysis: dict | None  # the analyze stage's artifacts (read_analysis), when there are any
    read: list[str]
    diff: Any = None  # claims.DiffFn over the hypothesis files (the claims stage's only)
    examples: list[dict] | None = None  # a few test sentences with every system's output
    length_drop: pd.DataFrame | None = None  # the evaluate stage's length_drop.csv
    cost: CostTiming | None = None  # the timing stage's cost.json
    claims: Claims | None = None  # the claims stage's findings (the report's only)


def load(params: Params, *, metrics_dir: Path, translate_dir: Path, groups_csv: Path,
         manifest: Path, claims: Path, attention: Path | None = None,
         analysis: Path | None = None, prepared_dir: Path | None = None,
         cost: Path | None = None) -> Artifacts:
    """What the report renders: every input once, the claims stage's findings (`claims`)
    among them."""
    read: list[str] = []
    bleu, train = _bleu(metrics_dir, read), _train(metrics_dir, read)
    if not Path(claims).is_file():
        raise FileNotFoundError(f"{claims}: no claims checked; run the claims stage first")
    found = Claims.read(claims)
    read.append(str(claims))
    curves = {}
    for p in sorted((metrics_dir / "curves").glob("*.csv")):
        read.append(str(p))
        curves[p.stem] = read_table(p, columns=CURVE_COLUMNS, numbers=CURVE_COLUMNS)
    if groups_csv.is_file():
        read.append(str(groups_csv))
        groups = read_table(groups_csv, columns=tuple(GROUP_COLUMNS),
                            numbers=("lo", "hi", "sentences", "mean", "bleu"),
                            dtype={"system": str, "beam": str, "label": str},
                            keep_default_na=False)
    else:
        log.warning("absent: %s", groups_csv)
        groups = pd.DataFrame(columns=GROUP_COLUMNS)
    drop_csv = groups_csv.with_name("length_drop.csv")
    length_drop = None
    if drop_csv.is_file():
        read.append(str(drop_csv))
        length_drop = read_table(drop_csv, columns=LENGTH_DROP[0], numbers=LENGTH_DROP[1],
                                 dtype={"system": str, "beam": str}, keep_default_na=False)
    examples = None
    if prepared_dir is not None:
        examples = load_examples(params, Path(prepared_dir), Path(translate_dir), read)
    return Artifacts(bleu=bleu, train=train, curves=curves,
                     timing=_timing(params, translate_dir, read), groups=groups,
                     prepare=PrepareMetrics.read_if_present(metrics_dir / "prepare.json", read),
                     vocab=VocabMetrics.read_if_present(metrics_dir / "vocab.json", read),
                     manifest=Manifest.read_if_present(manifest, read),
                     attention=AttentionWeights.read_if_present(attention, read)
                     if attention else None,
                     analysis=_analysis(analysis, read), read=read, examples=examples,
                     length_drop=length_drop,
                     cost=CostTiming.read_if_present(cost, read) if cost else None,
                     claims=found)


def load_for_claims(params: Params, *, metrics_dir: Path, translate_dir: Path,
                    prepared_dir: Path | None = None, rescore_dir: Path | None = None,
                    analysis: Path | None = None, cost: Path | None = None) -> Artifacts:
    """What the claims stage checks the claims against: BLEU, training metrics, decoding
    timings, the cost claim's timing, the analyses, and (with `prepared_dir`) the hypothesis
    files behind the paired bootstraps; the report's other inputs left empty."""
    read: list[str] = []
    bleu, train = _bleu(metrics_dir, read), _train(metrics_dir, read)
    diff = None
    if prepared_dir is not None:
        diff = BootstrapDiffs(Path(prepared_dir), Path(translate_dir),
                              None if rescore_dir is None else Path(rescore_dir), read)
    return Artifacts(bleu=bleu, train=train, curves={}, timing=_timing(params, translate_dir, read),
                     groups=pd.DataFrame(columns=GROUP_COLUMNS), prepare=None, vocab=None,
                     manifest=None, attention=None, analysis=_analysis(analysis, read),
                     read=read, diff=diff,
                     cost=CostTiming.read_if_present(cost, read) if cost else None)


def _bleu(metrics_dir: Path, read: list[str]) -> Bleu:
    path = metrics_dir / "bleu.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no BLEU metrics; run the evaluate stage first")
    read.append(str(path))
    return Bleu.read(path)


def _train(metrics_dir: Path, read: list[str]) -> dict[str, TrainMetrics]:
    found = (TrainMetrics.read_if_present(p, read)
             for p in sorted((metrics_dir / "train").glob("*.json")))
    return {m.model: m for m in found}


def _timing(params: Params, translate_dir: Path, read: list[str]) -> dict[str, Timing]:
    found = {s: Timing.read_if_present(timing_file(translate_dir, s), read)
             for s in params.systems}
    return {s: t for s, t in found.items() if t is not None}


class BootstrapDiffs:
    """``claims.DiffFn``: the paired bootstrap (sacreBLEU's, tokenised BLEU) of two outputs, read
    from the translate and rescore folders against ``test.tok.fr``; None when one is missing."""

    def __init__(self, prepared_dir: Path, translate_dir: Path, rescore_dir: Path | None,
                 read: list[str]):
        self.refs_path = prepared_dir / "test.tok.fr"
        self.translate_dir, self.rescore_dir, self.read = translate_dir, rescore_dir, read
        self._refs: list[str] | None = None
        self._cache: dict = {}

    def _path(self, o: Ours) -> Path | None:
        if o.kind == "translate":
            stem = translation(self.translate_dir, o.system, o.beam)
        elif self.rescore_dir is not None:
            stem = rescore_output(self.rescore_dir, o.system)
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


# Example sentences: at these quantiles of the source length, shortest first.
EXAMPLE_QUANTILES = (0.1, 0.4, 0.7, 0.95)


def load_examples(params: Params, prepared_dir: Path, translate_dir: Path,
                  read: list[str]) -> list[dict] | None:
    """A few test sentences of different lengths: source, reference and every system's output
    (its widest beam, detokenised). None without the raw test files."""
    from s2s.evaluate.bleu import read_lines

    src_p, ref_p = prepared_dir / "test.raw.en", prepared_dir / "test.raw.fr"
    if not (src_p.is_file() and ref_p.is_file()):
        log.warning("absent: %s or %s (no example translations)", src_p, ref_p)
        return None
    src, ref = read_lines(src_p), read_lines(ref_p)
    read += [str(src_p), str(ref_p)]
    outputs = {}
    for system, cfg in params.systems.items():
        beam = cfg.widest_beam
        _, p = hypothesis_files(translation(translate_dir, system, beam))
        if p.is_file():
            lines = read_lines(p)
            if len(lines) == len(src):
                outputs[f"{system} (beam {beam})"] = lines
    order = sorted((len(s.split()), i) for i, s in enumerate(src) if s.strip())
    if not order:
        return []
    picks = sorted({order[min(int(q * len(order)), len(order) - 1)][1]
                    for q in EXAMPLE_QUANTILES}, key=lambda i: (len(src[i].split()), i))
    return [{"line": i + 1, "words": len(src[i].split()), "source": src[i],
             "reference": ref[i], "outputs": {k: v[i] for k, v in outputs.items()}}
            for i in picks]


def _analysis(path: Path | None, read: list[str]) -> dict | None:
    """The analyze stage's folder, read once, every file checked (:func:`read_analysis`)."""
    if path is None:
        return None
    if not Path(path).is_dir():
        log.warning("absent: %s", path)
        return None
    read.append(f"{path}/")
    return read_analysis(Path(path))
