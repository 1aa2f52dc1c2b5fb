"""Stage `report`: the paper's tables and figures beside ours, Markdown and self-contained HTML.

Reads
  ``<metrics_dir>/bleu.json`` (required), ``<metrics_dir>/train/<model>.json``,
  ``<metrics_dir>/curves/<model>.csv`` (:data:`s2s.layout.CURVES_DIR`),
  ``<metrics_dir>/prepare.json``, ``<metrics_dir>/vocab.json``,
  ``<translate_dir>/<system>/timing.json``, ``groups_csv`` (the evaluate stage's Figure 3 groups),
  ``manifest`` (the download stage's data manifest), ``claims`` (the claims stage's verdicts,
  rendered as they are) and the parameter file itself (its sha256);
  optional: the attention stage's ``weights.json`` and the analyze stage's folder; and the
  report's own data, :data:`DATA_FILES`: the paper's numbers (``src/s2s/paper.yaml``) and
  the prose (``src/s2s/report/templates/``).
Writes (under ``out_dir``, i.e. ``reports/``)
  ``report.md``, ``report.html`` (its first screen: the summary table of the claims),
  ``tables/{summary,table1,table1_other,table2,perplexity,models,cost,claims}.{csv,md}``,
  ``figures/figure3.png``, ``figures/learning_curves.png``, and with the optional inputs
  ``figures/attention.png`` and ``figures/analysis_*.png``.

Anything optional that is missing (a system not decoded, no timing, no rescoring) shows up as
"not run" with the reason; nothing is dropped and nothing is invented.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from s2s import arch
from s2s.config import Params
from s2s.dag import Arg, Stage, command
from s2s.layout import (BLEU_FILE, CLAIMS_OUT, COST_FILE, CURVES_DIR, TRAIN_DIR, prepared_name,
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
# The files of s2s the report reads besides its code: the paper's numbers and the prose templates
# (s2s.paper.PAPER_FILE, s2s.report.sections.TEMPLATES_DIR), from the project root.
DATA_FILES = ("src/s2s/paper.yaml", "src/s2s/report/templates")


def stages(params: Params) -> list[Stage]:
    from s2s.paper import cost_systems

    attention = params.analysis.attention_system is not None
    cost = len(cost_systems(params)) >= 2
    return [command(
        "report", "report", ARGS,
        include=("--analysis", "--prepared",
                 *(("--attention",) if attention else ()), *(("--cost",) if cost else ())),
        parts={"--metrics": (BLEU_FILE, TRAIN_DIR, CURVES_DIR, "prepare.json", "vocab.json"),
               # the examples
               "--prepared": (*prepared_names("test", "raw"), prepared_name("test", "fr")),
               "--out": ("report.md", "report.html", "tables", "figures")},
        deps=("outputs/evaluate/length_drop.csv", *DATA_FILES),  # beside --groups; the words
        params=("profile", "data", "vocab", "model", "models", "systems", "rescore",
                "evaluate.min_group", "report", *(("timing",) if cost else ())),
        code=arch.modules(params, params.models, part="config"))]  # the models table's words


def cli(args, params) -> None:
    main(params, metrics_dir=args.metrics, translate_dir=args.translate, groups_csv=args.groups,
         manifest=args.manifest, claims=args.claims, out_dir=args.out, attention=args.attention,
         analysis=args.analysis, prepared_dir=args.prepared, cost=args.cost)


def main(params: Params, *, metrics_dir: Path, translate_dir: Path, groups_csv: Path,
         manifest: Path, claims: Path, out_dir: Path, attention: Path | None = None,
         analysis: Path | None = None, prepared_dir: Path | None = None,
         cost: Path | None = None) -> dict[str, Path]:
    """Write the report; return the paths written by name."""
    from s2s.io import atomic_write_text
    from s2s.report.build import build
    from s2s.report.inputs import load
    from s2s.paper import check_answers
    from s2s.report.render import Image, md_table, to_html, to_markdown

    t0 = time.perf_counter()
    check_answers(params)  # params name rows of the paper's tables, before anything is read
    metrics_dir, translate_dir, out_dir = Path(metrics_dir), Path(translate_dir), Path(out_dir)
    art = load(params, metrics_dir=metrics_dir, translate_dir=translate_dir,
               groups_csv=Path(groups_csv), manifest=Path(manifest), claims=Path(claims),
               attention=attention, analysis=analysis, prepared_dir=prepared_dir, cost=cost)
    log.info("read %d files: %s", len(art.read), ", ".join(art.read))
    fig_dir = out_dir / "figures"
    doc = build(params, art, fig_dir)
    # the figures the sections drew, by name (their file's stem)
    written = {Path(b.rel).stem: b.path for sec in doc.sections for b in sec.blocks
               if isinstance(b, Image)}
    for name, table in doc.tables().items():
        csv_path, md_path = out_dir / "tables" / f"{name}.csv", out_dir / "tables" / f"{name}.md"
        atomic_write_text(csv_path, table.csv_frame.to_csv(index=False))
        notes = "".join(f"\n{n}\n" for n in table.notes)
        atomic_write_text(md_path, f"**{table.title}**\n\n{md_table(table.frame)}\n{notes}")
        written[f"{name}_csv"], written[f"{name}_md"] = csv_path, md_path
    written["md"], written["html"] = out_dir / "report.md", out_dir / "report.html"
    atomic_write_text(written["md"], to_markdown(doc))
    atomic_write_text(written["html"], to_html(doc))
    log.info("wrote %s in %.1f s", ", ".join(str(p) for p in written.values()),
             time.perf_counter() - t0)
    return written
