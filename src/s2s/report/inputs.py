"""Everything the report reads, loaded once (:func:`load`), as the records of :mod:`s2s.artifacts`
where the pipeline has one: the metrics (read as the summary and claims stages read them,
:func:`s2s.artifacts.read_measured`), the claims stage's record, the analyze stage's folder
(:mod:`s2s.analysis.outputs`), and the report's own inputs (learning curves, Figure 3's groups,
example sentences).

A required input that is missing (``metrics/bleu.json``, the claims) is an error; an optional one is
logged as absent and shows in the report as "not run". A file that is there but does not match its
record is an error naming the file and the key.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pandas as pd

from s2s.analysis import outputs as analysis_outputs
from s2s.analysis.outputs import Analyses
from s2s.artifacts import (ArtifactError, AttentionWeights, Bleu, Claims, CostTiming, Manifest,
                           PrepareMetrics, Timing, TrainMetrics, VocabMetrics, read_measured,
                           read_table)
from s2s.claims.analyses import ANALYSIS_CLAIMS
from s2s.config import Params
from s2s.layout import (CURVE_COLUMNS, DROP_COLUMNS, DROP_NUMBERS, GROUP_COLUMNS, GROUP_NUMBERS,
                        SRC_LANG, ReportPaths, hypothesis_files)
from s2s.paper import paper

log = logging.getLogger("s2s.report")

# Every CSV the report reads is checked by s2s.artifacts.read_table against its columns and
# those that hold numbers (s2s.layout): a file cut mid-row, a missing column or a value that is
# not a number is an error naming the file and line, never drawn from half.


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
    analysis: Analyses | None  # the analyze stage's folder, when there is one
    claims: Claims  # the claims stage's findings, rendered as they are
    read: list[str]
    examples: list[dict] | None = None  # a few test sentences with every system's output
    length_drop: pd.DataFrame | None = None  # the evaluate stage's length_drop.csv
    cost: CostTiming | None = None  # the timing stage's cost.json


def _check_claims(claims: Claims, path, *, analysed: bool) -> None:
    """Every claim of paper.yaml has its verdict in `claims`, the analyses' (ANALYSIS_CLAIMS)
    where the report reads the analyze stage's folder (the claims stage writes each, "not run in
    this profile" where the profile lacks what it rests on): ArtifactError naming the file and
    the missing claims, not a section failing on its own."""
    want = [k for k in paper().claims if analysed or k not in ANALYSIS_CLAIMS]
    missing = [k for k in want if k not in claims.verdicts()]
    if missing:
        raise ArtifactError(f"{path}: no verdict for the claim(s) {', '.join(missing)} of "
                            "paper.yaml; run the claims stage again")


def load(params: Params, paths: ReportPaths) -> Artifacts:
    """What the report renders: every input once, the claims stage's findings
    (``paths.claims``) among them."""
    read: list[str] = []
    found = read_measured(paths, params.models, params.systems, read)
    if not paths.claims.is_file():
        raise FileNotFoundError(f"{paths.claims}: no claims checked; run the claims stage first")
    claims = Claims.read(paths.claims)
    read.append(str(paths.claims))
    curves = {}
    # the profile's models' curves (an older run's of a model since taken out stay unread)
    for p in sorted(p for p in paths.curves.glob("*.csv") if p.stem in params.models):
        read.append(str(p))
        curves[p.stem] = read_table(p, columns=CURVE_COLUMNS, numbers=CURVE_COLUMNS)
    if paths.groups.is_file():
        read.append(str(paths.groups))
        groups = read_table(paths.groups, columns=GROUP_COLUMNS, numbers=GROUP_NUMBERS,
                            dtype={"system": str, "beam": str, "label": str},
                            keep_default_na=False)
    else:
        log.warning("absent: %s", paths.groups)
        groups = pd.DataFrame(columns=list(GROUP_COLUMNS))
    length_drop = None
    if paths.length_drop.is_file():
        read.append(str(paths.length_drop))
        length_drop = read_table(paths.length_drop, columns=DROP_COLUMNS, numbers=DROP_NUMBERS,
                                 dtype={"system": str, "beam": str}, keep_default_na=False)
    else:
        log.warning("absent: %s", paths.length_drop)
    examples = None
    if paths.prepared is not None:
        examples = load_examples(params, paths, read)
    art = Artifacts(bleu=found.bleu, train=found.train, curves=curves, timing=found.timing,
                    groups=groups,
                    prepare=PrepareMetrics.read_if_present(paths.prepare_metrics, read),
                    vocab=VocabMetrics.read_if_present(paths.vocab_metrics, read),
                    manifest=Manifest.read_if_present(paths.manifest, read),
                    attention=AttentionWeights.read_if_present(paths.attention, read)
                    if paths.attention else None,
                    analysis=analysis_outputs.read_if_present(paths.analysis, read),
                    claims=claims, read=read, examples=examples, length_drop=length_drop,
                    cost=CostTiming.read_if_present(paths.cost, read) if paths.cost else None)
    _check_claims(claims, paths.claims, analysed=art.analysis is not None)
    return art


# Example sentences: at these quantiles of the source length, shortest first.
EXAMPLE_QUANTILES = (0.1, 0.4, 0.7, 0.95)


def source_words(src_raw: list[str]) -> list[int]:
    """Each raw test source sentence's length in words as Figure 3 and the length drop count it
    (:func:`s2s.evaluate.buckets.source_lengths`): the whitespace tokens of its Moses
    tokenisation, which is what the prepare stage writes as ``test.tok.en`` from the same
    ``test.raw.en`` (the raw text's own whitespace words would count "grass." as one word where
    Figure 3 counts "grass ." as two)."""
    from s2s.data.text import tokenize_many

    return [len(line.split()) for line in tokenize_many(src_raw, SRC_LANG)]


def load_examples(params: Params, paths: ReportPaths, read: list[str]) -> list[dict] | None:
    """A few test sentences of different lengths: source, reference and every system's output
    (its widest beam, detokenised). None without the raw test files; references of another
    number of lines than the source are an ArtifactError naming both (a system's output of
    another length is left out, said). Lengths (how the sentences
    are picked, and the words each title gives) are :func:`source_words`, Figure 3's."""
    from s2s.evaluate.bleu import read_lines

    src_p, ref_p = paths.source_raw, paths.references_raw
    if not (src_p.is_file() and ref_p.is_file()):
        log.warning("absent: %s or %s (no example translations)", src_p, ref_p)
        return None
    src, ref = read_lines(src_p), read_lines(ref_p)
    read += [str(src_p), str(ref_p)]
    if len(ref) != len(src):  # line i of each is the same sentence: else no example is right
        raise ArtifactError(f"{ref_p} has {len(ref)} lines, {src_p} {len(src)}: the references "
                            "and the source of the example translations must align line by "
                            "line; run the prepare stage again")
    words = source_words(src)
    outputs = {}
    for system, cfg in params.systems.items():
        beam = cfg.widest_beam
        _, p = hypothesis_files(paths.translation(system, beam))
        if not p.is_file():
            log.warning("absent: %s (no example translation of system %s)", p, system)
            continue
        lines = read_lines(p)
        read.append(str(p))
        if len(lines) != len(src):
            log.warning("%s has %d lines, %s %d: system %s is left out of the example "
                        "translations", p, len(lines), src_p, len(src), system)
            continue
        outputs[f"{system} (beam {beam})"] = lines
    order = sorted((words[i], i) for i, s in enumerate(src) if s.strip())
    if not order:
        return []
    picks = sorted({order[min(int(q * len(order)), len(order) - 1)][1]
                    for q in EXAMPLE_QUANTILES}, key=lambda i: (words[i], i))
    return [{"line": i + 1, "words": words[i], "source": src[i],
             "reference": ref[i], "outputs": {k: v[i] for k, v in outputs.items()}}
            for i in picks]
