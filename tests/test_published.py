"""The published run (reports/default) is the code's: its report is what the report stage of
this checkout renders from the run's published outputs, which hold everything that stage reads
(the metrics, the claims stage's record, the translations and their timings, Figure 3's groups,
the analyses, the test set, the data manifest). A change to the report's code or prose that is
not republished fails here; `reports/default/README.md` says how to render it again."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from conftest import BIN
from helpers import report_args

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "reports" / "default"


def comparable(report: str) -> list[str]:
    """The report's lines but what says where and from which commit it was rendered: the git
    revision, and the parameter file's path (its sha256 stays)."""
    lines = []
    for line in report.splitlines():
        if line.startswith("- git revision:"):
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
