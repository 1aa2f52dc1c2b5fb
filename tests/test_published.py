"""The published run (reports/default) is the code's: its report is what the report stage of
this checkout renders from the run's published outputs, which hold everything that stage reads
(the metrics, the claims stage's record, the translations and their timings, Figure 3's groups,
the analyses, the test set, the data manifest). A change to the report's code or prose that is
not republished fails here; `reports/default/README.md` says how to render it again."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from conftest import BIN
from helpers import report_args

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "reports" / "default"


def comparable(report: str) -> list[str]:
    """The report's lines but what says where and from which commit it was rendered: the git
    revision, and the parameter file's path (its sha256 stays)."""
    lines = []
    for line in report.splitlines():
        if line.startswith(("- git revision:", "- code:")):  # the code's, where installed apart
            continue
        lines.append(re.sub(r"^- parameter file: \S+ \(", "- parameter file: (", line))
    return lines


def test_the_published_report_is_what_this_code_renders_from_the_published_outputs(tmp_path):
    proc = subprocess.run([str(BIN / "s2s"), *report_args(PUBLISHED, tmp_path / "report")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = comparable((tmp_path / "report" / "report.md").read_text(encoding="utf-8"))
    want = comparable((PUBLISHED / "report.md").read_text(encoding="utf-8"))
    assert len(got) > 200
    diff = [(i, a, b) for i, (a, b) in enumerate(zip(want, got)) if a != b]
    assert got == want, f"{len(diff)} lines differ, the first: {diff[:3]}"
    for table in ("table1.csv", "table2.csv", "claims.csv"):
        assert (tmp_path / "report" / "tables" / table).read_text() == \
            (PUBLISHED / "tables" / table).read_text(), table


def test_the_report_replaces_its_folders_whole_and_a_failure_leaves_the_old_ones(tmp_path,
                                                                                  monkeypatch):
    """tables/ and figures/ are written under temporary names and replace the old folders when
    complete: a file of an earlier report (another profile's Table 2) does not stay beside the
    new ones, and a report that fails midway leaves the old one whole and no temporary folder."""
    from s2s.config import load
    from s2s.layout import ReportPaths
    from s2s.stages import report as stage

    P, out = PUBLISHED, tmp_path / "report"
    paths = ReportPaths(metrics=P / "metrics", translate=P / "outputs" / "translate",
                        groups=P / "metrics" / "figure3.csv",
                        manifest=P / "data" / "raw" / "manifest.json",
                        attention=P / "analysis" / "attention_weights.json",
                        analysis=P / "analysis", prepared=P / "data" / "prepared",
                        cost=P / "timing" / "cost.json",
                        claims=P / "outputs" / "claims" / "claims.json", out=out)
    params = load(P / "params.yaml")
    for old in (out / "tables" / "stale.csv", out / "figures" / "stale.png"):
        old.parent.mkdir(parents=True, exist_ok=True)
        old.write_text("an earlier report's")
    written = stage.main(params, paths)
    assert not (out / "tables" / "stale.csv").exists()
    assert not (out / "figures" / "stale.png").exists()
    assert sorted(p.name for p in (out / "tables").iterdir()) == sorted(
        p.name for p in (P / "tables").iterdir())
    assert all(p.is_file() for p in written.values())
    before = {p: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}

    def fail(doc):
        raise OSError("No space left on device")

    monkeypatch.setattr("s2s.report.render.to_html", fail)
    with pytest.raises(OSError, match="No space left"):
        stage.main(params, paths)
    assert {p: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()} == before
    assert sorted(p.name for p in out.iterdir()) == ["figures", "report.html", "report.md",
                                                      "tables"]


@pytest.mark.parametrize("foreign", ["figures/notes.pdf", "tables/drafts/", "figures/.git/"])
def test_the_report_refuses_figures_or_tables_folders_holding_what_it_does_not_write(
        tmp_path, foreign):
    """figures/ and tables/ under --out are replaced whole: an --out whose figures/ or tables/
    is a folder of the user's (a PDF, a subfolder) is refused before anything is read, naming
    it, and left as it was; one holding only PNGs, CSVs and Markdown files, as a report writes,
    is replaced (the test above)."""
    from s2s.config import load
    from s2s.io import OutDirError
    from s2s.layout import ReportPaths
    from s2s.stages import report as stage

    P, out = PUBLISHED, tmp_path / "report"
    paths = ReportPaths(metrics=P / "metrics", translate=P / "outputs" / "translate",
                        groups=P / "metrics" / "figure3.csv",
                        manifest=P / "data" / "raw" / "manifest.json",
                        claims=P / "outputs" / "claims" / "claims.json", out=out)
    mine = out / foreign
    if foreign.endswith("/"):
        mine.mkdir(parents=True)
        (mine / "keep.txt").write_text("mine")
    else:
        mine.parent.mkdir(parents=True)
        mine.write_text("mine")
    (out / "figures").mkdir(exist_ok=True)
    (out / "figures" / "old.png").write_text("an earlier report's")
    before = {p: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    folder, name = foreign.split("/")[:2]
    with pytest.raises(OutDirError) as e:
        stage.main(load(P / "params.yaml"), paths)
    assert str(e.value) == (f"{out / folder}: holds {name}, which the report stage does not "
                            f"write, and it replaces its {folder}/ folder under --out whole: "
                            f"name a folder of its own, or remove it")
    assert {p: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()} == before
    assert not (out / "report.md").exists()


def test_the_forget_bias_table_names_the_beam_each_bleu_is_at(tmp_path):
    """Each model's BLEU is its system's at its widest beam: one beam for all goes into the
    header (the published 'beam 12'); where the systems' widest beams differ, a column says
    which (it said 'beam 12' whatever they were)."""
    import dataclasses

    from s2s.config import load
    from s2s.layout import ReportPaths
    from s2s.report.inputs import load as load_inputs
    from s2s.report.sections import Context
    from s2s.report.sections import forget_bias

    P = PUBLISHED
    params = load(P / "params.yaml")
    paths = ReportPaths(metrics=P / "metrics", translate=P / "outputs" / "translate",
                        groups=P / "metrics" / "figure3.csv",
                        manifest=P / "data" / "raw" / "manifest.json", analysis=P / "analysis",
                        claims=P / "outputs" / "claims" / "claims.json", out=tmp_path)
    art = load_inputs(params, paths)

    def table(p):
        (section,) = forget_bias.sections(Context(p, art, tmp_path))
        return next(b for b in section.blocks if getattr(b, "key", None) == "forget_bias")

    published = table(params)
    assert "BLEU (tokenized, beam 12)" in published.frame.columns
    # shown to 2 decimals as the other tables (it showed 20.9162), the CSV's numbers as read
    row = published.frame.iloc[0]
    assert (row["model"], row["dev ppl"], row["BLEU (tokenized, beam 12)"]) == (
        "reversed_1", "7.42", "20.92")
    assert published.numbers.iloc[0]["BLEU (tokenized, beam 12)"] == pytest.approx(20.9162,
                                                                                   abs=1e-4)
    systems = dict(params.systems)
    systems["reversed_fb1"] = dataclasses.replace(systems["reversed_fb1"], beams=(2,))
    got = table(dataclasses.replace(params, systems=systems)).frame
    assert "BLEU (tokenized)" in got.columns
    beams = dict(zip(got["model"], got["beam"]))
    assert beams["reversed_fb1"] == "2" and beams["reversed_1"] == "12"


def test_an_output_missing_or_short_is_left_out_of_the_examples_and_said(tmp_path, caplog):
    """The example translations show every system's output at its widest beam: one absent, or
    with another number of lines than the test set, is left out with a warning naming the file
    (it was dropped silently)."""
    import logging
    import shutil

    from s2s.config import load
    from s2s.layout import ReportPaths
    from s2s.report.inputs import load_examples

    P = PUBLISHED
    translate = tmp_path / "translate"
    shutil.copytree(P / "outputs" / "translate", translate)
    (translate / "gru" / "beam12.detok.fr").unlink()
    short = translate / "attention" / "beam12.detok.fr"
    short.write_text("".join(short.read_text(encoding="utf-8").splitlines(True)[:-1]),
                     encoding="utf-8")
    paths = ReportPaths(metrics=P / "metrics", translate=translate,
                        groups=P / "metrics" / "figure3.csv",
                        manifest=P / "data" / "raw" / "manifest.json",
                        prepared=P / "data" / "prepared",
                        claims=P / "outputs" / "claims" / "claims.json", out=tmp_path / "out")
    params = load(P / "params.yaml")
    with caplog.at_level(logging.WARNING, logger="s2s"):
        examples = load_examples(params, paths, [])
    shown = {name.split(" (")[0] for name in examples[0]["outputs"]}
    assert shown == set(params.systems) - {"gru", "attention"}
    said = [r.getMessage() for r in caplog.records]
    assert f"absent: {translate / 'gru' / 'beam12.detok.fr'} (no example translation of system " \
           f"gru)" in said
    assert (f"{short} has 999 lines, {P / 'data' / 'prepared' / 'test.raw.en'} 1000: system "
            f"attention is left out of the example translations") in said
