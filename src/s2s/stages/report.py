"""Stage `report`: the paper's tables and figures beside ours, Markdown and self-contained HTML.

Reads
  ``<metrics>/bleu.json`` (required), ``<metrics>/train/<model>.json``,
  ``<metrics>/curves/<model>.csv`` (:data:`s2s.layout.CURVES_DIR`),
  ``<metrics>/prepare.json``, ``<metrics>/vocab.json``,
  ``<translate>/<system>/timing.json``, ``<groups>`` (the evaluate stage's Figure 3 groups),
  ``<manifest>`` (the download stage's data manifest), ``<claims>`` (the claims stage's verdicts,
  rendered as they are) and the parameter file itself (its sha256);
  optional: the attention stage's ``weights.json`` and the analyze stage's folder; and the
  report's own data, :data:`DATA_FILES`: the paper's numbers (``src/s2s/paper.yaml``) and
  the prose (``src/s2s/report/templates/``).
Writes (under ``<out>``, i.e. ``reports/``)
  ``report.md``, ``report.html`` (its first screen: the summary table of the claims),
  ``tables/<key>.{csv,md}`` for each table with a key (summary, table1, table1_other, table2,
  claims, perplexity, models, cost, length, forget_bias, data, vocab: those the profile's
  outputs fill), ``figures/figure3.png``, ``figures/learning_curves.png``, and with the
  optional inputs ``figures/attention.png``, ``figures/cross_attention.png``,
  ``figures/analysis_*.png`` and ``figures/init_reach.png``.

Anything optional that is missing (a system not decoded, no timing) shows up as "not run" with
the reason; nothing is invented. A profile with no rescoring (`rescore.baseline` null) has no
Table 2: it is left out, and the summary lists its claims as not run.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from s2s import arch
from s2s.config import PARAMS_FILE, Params
from s2s.dag import Arg, Stage, command
from s2s.layout import (BLEU_FILE, CLAIMS_OUT, COST_FILE, CURVES_DIR, LENGTH_DROP_FILE,
                        PREPARE_METRICS, TRAIN_DIR, VOCAB_METRICS, ReportPaths, prepared_name,
                        prepared_names)

log = logging.getLogger("s2s.report")

HELP = "reports/report.md and .html"
ARGS = (Arg("--metrics", "metrics", help="the metrics folder it reads"),
        Arg("--translate", "outputs/translate"), Arg("--groups", "outputs/evaluate/figure3.csv"),
        Arg("--manifest", "data/raw/manifest.json"),
        # the sections these feed are left out without them
        Arg("--attention", "outputs/attention/weights.json", optional=True),
        Arg("--analysis", "outputs/analysis", optional=True),
        Arg("--prepared", "data/prepared", optional=True),
        Arg("--cost", COST_FILE, optional=True),
        Arg("--claims", CLAIMS_OUT, help="the claims stage's claims.json"),
        Arg("--out", "reports", writes=True,
            help="folder of the report (report.md, report.html, tables/, figures/)"))
PATHS = ReportPaths  # ARGS as one value, which cli builds and main takes
# The files of s2s the report reads besides its code: the paper's numbers and the prose templates
# (s2s.paper.PAPER_FILE, s2s.report.sections.TEMPLATES_DIR), from the project root.
DATA_FILES = ("src/s2s/paper.yaml", "src/s2s/report/templates")


# what figures/ and tables/ hold: the report's figures (PNG), its tables (CSV and Markdown)
FIGURE_FILES, TABLE_FILES = ("*.png",), ("*.csv", "*.md")


def stages(params: Params) -> list[Stage]:
    from s2s.paper import cost_systems

    attention = params.analysis.attention_system is not None
    cost = len(cost_systems(params)) >= 2
    analysed = bool(params.analysis.models)  # else no analyze stage
    return [command(
        "report", "report", ARGS,
        include=(*(("--analysis",) if analysed else ()), "--prepared",
                 *(("--attention",) if attention else ()), *(("--cost",) if cost else ())),
        parts={"--metrics": (BLEU_FILE, TRAIN_DIR, CURVES_DIR, PREPARE_METRICS, VOCAB_METRICS),
               # the examples
               "--prepared": (*prepared_names("test", "raw"), prepared_name("test", "fr")),
               "--out": ("report.md", "report.html", "tables", "figures")},
        # beside --groups; the words; the parameter file, whose sha256 the provenance prints
        # (it changes with keys no stage of the report reads: seconds to render again)
        deps=(f"outputs/evaluate/{LENGTH_DROP_FILE}", *DATA_FILES, PARAMS_FILE),
        params=("profile", "data", "vocab", "model", "models", "systems", "rescore",
                "evaluate.min_group", "report", *(("timing",) if cost else ())),
        code=arch.modules(params, params.models, part="config"))]  # the models table's words


def cli(args, params) -> None:
    main(params, ReportPaths.from_args(args))


def main(params: Params, paths: ReportPaths) -> dict[str, Path]:
    """Write the report; return the paths written by name."""
    from s2s.io import atomic_write_text, check_out_dir, whole_dir
    from s2s.report.build import build
    from s2s.report.inputs import load
    from s2s.paper import check_answers
    from s2s.report.render import Image, md_table, md_text, to_html, to_markdown

    t0 = time.perf_counter()
    check_answers(params)  # params name rows of the paper's tables, before anything is read
    # figures/ and tables/ are replaced whole: refused where they hold anything a report does
    # not write (a folder of the user's under --out), before anything is read
    for folder, owns in ((paths.figures, FIGURE_FILES), (paths.tables, TABLE_FILES)):
        check_out_dir(folder, owns, what="the report stage",
                      folder=f"its {folder.name}/ folder under --out")
    art = load(params, paths)
    log.info("read %d files: %s", len(art.read), ", ".join(art.read))
    # figures/ and tables/ are each written whole, under a temporary name, and replace the old
    # folders only when complete: no file of an earlier report (a table or figure this profile
    # has not) stays beside the new ones, and a failure leaves the old report as it was
    with whole_dir(paths.figures) as figures, whole_dir(paths.tables) as tables:
        doc = build(params, art, figures)
        # the figures the sections drew, by name (their file's stem), where they will be
        written = {Path(b.rel).stem: paths.figures / Path(b.path).relative_to(figures)
                   for sec in doc.sections for b in sec.blocks if isinstance(b, Image)}
        for name, table in doc.tables().items():
            csv_path, md_path = paths.table(name)
            atomic_write_text(tables / csv_path.name, table.csv_frame.to_csv(index=False))
            # as report.md shows it: the title, what every row shares, the rows, the notes
            lead = f"{md_text(table.lead)}\n\n" if table.lead else ""
            notes = "".join(f"\n{md_text(n)}\n" for n in table.notes)
            atomic_write_text(tables / md_path.name,
                              f"**{md_text(table.title)}**\n\n{lead}{md_table(table.frame)}\n"
                              f"{notes}")
            written[f"{name}_csv"], written[f"{name}_md"] = csv_path, md_path
        markdown, html = to_markdown(doc), to_html(doc)  # the HTML holds the figures' bytes
    written["md"], written["html"] = paths.documents
    atomic_write_text(written["md"], markdown)
    atomic_write_text(written["html"], html)
    log.info("wrote %s in %.1f s", ", ".join(str(p) for p in written.values()),
             time.perf_counter() - t0)
    return written
