"""Where the report's numbers come from: the parameter file, the code's git revision, the library
versions, the devices, and the data (the download manifest's corpora)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import platform
import subprocess
from pathlib import Path

from s2s.artifacts import Manifest, Timing, TrainMetrics
from s2s.config import Params


def provenance(params: Params, *, train: dict[str, TrainMetrics], timing: dict[str, Timing],
               manifest: Manifest | None) -> list[str]:
    """One line each: profile, parameter file and its sha256, git revision (and the code's, where
    it is not the project's checkout), versions, devices, and the data's corpora."""
    devices = sorted({m.machine() for m in train.values() if m.device})
    dec = sorted({f"{t.device} ({t.threads} thread{'' if t.threads == 1 else 's'})"
                  for t in timing.values()})
    return [
        f"profile: {params.profile}",
        f"parameter file: {params.source} (sha256 {_sha256(Path(params.source))})",
        *revision_lines(Path(params.source).resolve().parent),
        f"python {platform.python_version()}, torch {_version('torch')}, "
        f"sacrebleu {_version('sacrebleu')}, sacremoses {_version('sacremoses')}",
        f"training device(s): {', '.join(devices) or 'unknown'}; "
        f"decoding: {', '.join(dec) or 'unknown'}",
        *[f"data: {line}" for line in manifest_summary(manifest)],
    ]


def manifest_summary(manifest: Manifest | None) -> list[str]:
    """One line per corpus of the download manifest: name, files, lines per side, source."""
    if manifest is None:
        return ["no data manifest found"]
    out = []
    for name, c in manifest.corpora.items():
        lines = ", ".join(f"{side}: {n:,}" for side, n in c.lines.items())
        source = c.source if isinstance(c.source, str) else ", ".join(c.source)
        out.append(f"{name}: {len(c.files)} file(s) with sha256, {lines or '?'} lines, "
                   f"from {source}")
    return out or ["data manifest has no corpora"]


CODE = Path(__file__).resolve().parents[1]  # the s2s package that renders the report


def revision_lines(project: Path, code: Path = CODE) -> list[str]:
    """The git revision of the `project` folder (the parameter file's), marked where the code
    that rendered the report has uncommitted changes; where that code is not the project's
    checkout (an installed package, another clone), a line naming its own revision."""
    rev, top = _git(project, "rev-parse", "HEAD"), _git(project, "rev-parse", "--show-toplevel")
    code_rev = _git(code, "rev-parse", "HEAD")
    # tracked files only: an untracked scratch file is not part of the code
    edited = code_rev is not None and bool(_git(code, "status", "--porcelain",
                                                "--untracked-files=no", "--", "."))
    mark = ", with uncommitted changes to the code" if edited else ""
    if code_rev is not None and top is not None and _git(code, "rev-parse",
                                                         "--show-toplevel") == top:
        return [f"git revision: {rev or 'unknown'}{mark}"]
    return [f"git revision: {rev or 'unknown'}",
            f"code: s2s-repro {_version('s2s-repro')}, "
            + (f"git revision {code_rev}{mark}" if code_rev else "not in a git checkout")]


def _git(where: Path, *args: str) -> str | None:
    """What ``git <args>`` in `where` prints, stripped; None outside git, in a repo with no
    commit, or where git is missing."""
    try:
        res = subprocess.run(["git", *args], cwd=where, capture_output=True, text=True,
                             timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout.strip() if res.returncode == 0 else None


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _sha256(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "unknown (file not readable)"
