"""Stage `summary`: the run in a few numbers, for DVC's comparison tools.

Reads
  ``<metrics>/bleu.json`` (the evaluate stage), ``<metrics>/train/<model>.json``,
  ``<translate>/<system>/timing.json``, ``<groups>`` (``outputs/evaluate/figure3.csv``).
Writes
  ``<out>`` (``metrics/summary.json``, :class:`s2s.artifacts.Summary`, tracked by git): numbers
  only (tokenised BLEU, test perplexity, minutes), so that ``dvc metrics show/diff`` and
  ``dvc exp show`` print them in a readable width; the text fields stay in ``bleu.json``.
  ``<plots>/figure3_{length,rarity}.csv``: Figure 3's curves as DVC plot data (columns
  ``mean``, ``label``, ``lstm``, ``baseline``: the report's two curves).
"""

from __future__ import annotations

import logging
import time

from s2s.config import Params
from s2s.dag import Arg, Stage, command
from s2s.layout import (BLEU_FILE, GROUP_COLUMNS, GROUP_NUMBERS, SUMMARY_FILE, TRAIN_DIR,
                        SummaryPaths)

log = logging.getLogger("s2s.summary")

HELP = ("the compact numeric metrics/summary.json that git tracks (dvc metrics show/diff, dvc exp "
        "show) and the DVC plot data")
ARGS = (Arg("--metrics", "metrics"), Arg("--translate", "outputs/translate"),
        Arg("--groups", "outputs/evaluate/figure3.csv"),
        Arg("--out", SUMMARY_FILE, writes=True, cache=False, metric=True,
            help="summary.json to write"),
        Arg("--plots", "metrics/plots", writes=True))
PATHS = SummaryPaths  # ARGS as one value, which cli builds and main takes


def stages(params: Params) -> list[Stage]:
    return [command(
        "summary", "summary", ARGS, parts={"--metrics": (BLEU_FILE, TRAIN_DIR)},
        params=("systems", "models", "rescore.baseline", "rescore.rescorers",
                "report.figure3_system", "report.figure3_beam"),
        doc="The run in a few numbers: the only file under metrics/ that git tracks (cache: "
            "false), so\n`dvc metrics diff` and `dvc exp show` compare revisions and experiments.")]


def cli(args, params) -> None:
    main(params, SummaryPaths.from_args(args))


def main(params: Params, paths: SummaryPaths) -> dict:
    from s2s.artifacts import Summary, read_measured, read_table
    from s2s.evaluate.summary import figure3_plots, summarize
    from s2s.io import atomic_write_text

    t0 = time.perf_counter()
    read: list[str] = []
    found = read_measured(paths, params.models, params.systems, read)
    groups = read_table(paths.groups, columns=GROUP_COLUMNS, numbers=GROUP_NUMBERS,
                        dtype={"system": str, "beam": str, "label": str}, keep_default_na=False)
    read.append(str(paths.groups))
    summary = summarize(params, found.bleu, found.train, found.timing)
    Summary.from_json(summary, source=paths.out).write(paths.out)  # checked as `s2s exps` reads it
    written = [str(paths.out)]
    for axis, frame in figure3_plots(params, groups).items():
        path = paths.figure3_plot(axis)
        atomic_write_text(path, frame.to_csv(index=False))
        written.append(str(path))
    log.info("read %s; wrote %s in %.1fs", ", ".join(read), ", ".join(written),
             time.perf_counter() - t0)
    return summary
