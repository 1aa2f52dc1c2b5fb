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
    """One line each: profile, parameter file and its sha256, git revision, versions, devices,
    and the data's corpora."""
    devices = sorted({m.device for m in train.values() if m.device})
    dec = sorted({f"{t.device} ({t.threads} threads)" for t in timing.values()})
    return [
        f"profile: {params.profile}",
        f"parameter file: {params.source} (sha256 {_sha256(Path(params.source))})",
        f"git revision: {git_revision(Path(params.source).resolve().parent)}",
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


def git_revision(where: Path) -> str:
    """``git rev-parse HEAD`` in ``where``; "unknown" outside git (or in a repo with no commit)."""
    try:
        res = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True,
                             text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    rev = res.stdout.strip()
    return rev if res.returncode == 0 and rev else "unknown"


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
