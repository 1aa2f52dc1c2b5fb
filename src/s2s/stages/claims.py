"""Stage `claims`: every verdict of the report, checked against our numbers, with its intervals
(the checks are :mod:`s2s.claims`').

Reads:  ``<metrics>/bleu.json``, ``<metrics>/train/<model>.json``,
        ``<translate>/<system>/timing.json`` and the hypothesis files under ``<translate>`` and
        ``<rescore>`` with ``<prepared>/test.tok.fr`` (the paired bootstraps over test
        sentences); optional: the analyze stage's folder (the analyses' claims) and the timing
        stage's ``cost.json`` (the cost claim); params `systems`, `models`, `model`, `rescore`,
        `report.table1`, `report.table2` (which outputs answer the paper's rows), `timing`.
Writes: ``<out>`` (``outputs/claims/claims.json``, :class:`s2s.artifacts.Claims`): each claim
        with the paper's numbers and ours, the differences it rests on with their intervals, its
        verdict and its evidence in words, which the report renders; ``<verdicts>``
        (``metrics/claims.json``): claim id -> verdict, the metric `dvc exp show` and `s2s exps`
        compare (git-tracked).

The report reads only the first, so re-rendering it (a title, a template, a figure) recomputes no
bootstrap; a verdict changes only when a number it rests on does.
"""

from __future__ import annotations

import logging
import time

from s2s import arch
from s2s.config import Params
from s2s.dag import Arg, Stage, command
from s2s.layout import (BLEU_FILE, CLAIMS_OUT, COST_FILE, TRAIN_DIR, VERDICTS_FILE, ClaimsPaths,
                        prepared_name)

log = logging.getLogger("s2s.claims")

HELP = "check the paper's claims against our numbers, with their intervals (the report's input)"
ARGS = (Arg("--metrics", "metrics", help="the metrics folder it reads"),
        Arg("--translate", "outputs/translate"),
        Arg("--rescore", "outputs/rescore", optional=True,
            help="the rescore stages' folder, where the profile rescores (rescore.baseline)"),
        Arg("--prepared", "data/prepared"),
        Arg("--analysis", "outputs/analysis", optional=True),
        Arg("--cost", COST_FILE, optional=True),
        Arg("--out", CLAIMS_OUT, writes=True, help="claims.json to write"),
        # cached but for the verdicts, which git tracks so that every experiment's can be compared
        Arg("--verdicts", VERDICTS_FILE, writes=True, cache=False, metric=True,
            help="claim id -> verdict (JSON), the metric experiments compare"))
PATHS = ClaimsPaths  # ARGS as one value, which cli builds and main takes


def stages(params: Params) -> list[Stage]:
    from s2s.paper import cost_systems

    cost = len(cost_systems(params)) >= 2
    analysed = bool(params.analysis.models)  # else no analyze stage
    return [command(
        "claims", "claims", ARGS,
        include=(*(("--analysis",) if analysed else ()), *(("--cost",) if cost else ()),
                 *(("--rescore",) if params.rescore.baseline is not None else ())),
        parts={"--metrics": (BLEU_FILE, TRAIN_DIR), "--prepared": (prepared_name("test", "fr"),)},
        deps=("src/s2s/paper.yaml",),  # the claims and the rows they rest on
        params=("model", "models", "systems", "rescore", "report.table1", "report.table2",
                *(("timing",) if cost else ())),
        code=arch.modules(params, params.models, part="config"),  # the configs compared
        doc="Every verdict of the report with the numbers it rests on (paired bootstraps over "
            "test sentences,\nintervals over seeds): the report renders them, so re-rendering "
            "it recomputes none.")]


def cli(args, params) -> None:
    main(params, ClaimsPaths.from_args(args))


def main(params: Params, paths: ClaimsPaths):
    """Check every claim; write ``paths.out`` (and the verdicts); return the Claims record."""
    from s2s.claims import inputs
    from s2s.claims.check import check_all
    from s2s.io import atomic_write_json
    from s2s.paper import check_answers

    t0 = time.perf_counter()
    check_answers(params)  # params name rows of the paper's tables, before anything is read
    art = inputs.load(params, paths)
    found = check_all(params, art)
    found.write(paths.out)
    written = [str(paths.out)]
    if paths.verdicts is not None:
        atomic_write_json(paths.verdicts, found.verdicts())
        written.append(str(paths.verdicts))
    for c in (*found.claims, found.setting):
        log.info("%s: %s", c.key, c.status)
    log.info("read %d files: %s; wrote %s in %.1f s", len(art.read), ", ".join(art.read),
             ", ".join(written), time.perf_counter() - t0)
    return found
