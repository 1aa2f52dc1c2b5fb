"""Shared fixtures: the mirror, and one run of the smoke profile through `dvc repro`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MIRROR = Path(os.environ.get("S2S_MIRROR", ROOT.parent / "shared" / "data")).resolve()
BIN = Path(sys.executable).parent  # the environment's scripts: s2s, dvc


def need_mirror() -> Path:
    if not (MIRROR / "README.md").exists():
        pytest.skip(f"no data mirror at {MIRROR} (set S2S_MIRROR)")
    return MIRROR


@pytest.fixture(scope="session")
def mirror() -> Path:
    return need_mirror()


def run(cmd: list[str], cwd: Path, *, check: bool = True, timeout: float = 900,
        env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "S2S_MIRROR": str(MIRROR),
                "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **(env or {})}
    proc = subprocess.run(cmd, cwd=cwd, env=full_env, capture_output=True, text=True,
                          timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n"
                             f"{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    return proc


def make_project(dest: Path, profile: str = "smoke") -> Path:
    """A fresh git+DVC project with this repo's pipeline and the given profile as params.yaml."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("dvc.yaml", ".dvcignore"):
        if (ROOT / name).exists():
            shutil.copy(ROOT / name, dest / name)
    shutil.copytree(ROOT / "profiles", dest / "profiles")
    (dest / ".dvc").mkdir()
    shutil.copy(ROOT / ".dvc" / "config", dest / ".dvc" / "config")
    shutil.copy(ROOT / ".gitignore", dest / ".gitignore")
    # The report stage depends on the report code; give the copy its own.
    shutil.copytree(ROOT / "src" / "s2s" / "report", dest / "src" / "s2s" / "report",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "profiles" / f"{profile}.yaml", dest / "params.yaml")
    run(["git", "init", "-q"], dest)
    run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A"], dest)
    run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"], dest)
    return dest


def run_data_stages(params, tmp: Path, mirror: Path) -> None:
    """download, prepare and vocab of `params` into tmp/{raw,prepared,vocab} (+ metrics json)."""
    from s2s.data import download, prepare, vocab

    download.main(params.data, out_dir=tmp / "raw", mirror=mirror)
    prepare.main(params.data, params.prepare, raw_dir=tmp / "raw", out_dir=tmp / "prepared",
                 metrics_out=tmp / "prepare.json")
    vocab.main(params.vocab, prepared_dir=tmp / "prepared", out_dir=tmp / "vocab",
               metrics_out=tmp / "vocab.json")


@pytest.fixture(scope="session")
def smoke_data(tmp_path_factory, mirror):
    """The smoke profile's data stages, run once for the session: (dir, params). Tests write
    their own outputs into subdirectories of their own names."""
    from s2s import config

    tmp = tmp_path_factory.mktemp("smoke_data")
    params = config.load(ROOT / "profiles" / "smoke.yaml")
    run_data_stages(params, tmp, mirror)
    return tmp, params


@pytest.fixture(scope="session")
def smoke_repo(tmp_path_factory) -> Path:
    """The smoke profile, run end to end once by `dvc repro` (a few minutes on 2 cores)."""
    need_mirror()
    repo = make_project(tmp_path_factory.mktemp("smoke") / "repo")
    t0 = time.perf_counter()
    proc = run([str(BIN / "dvc"), "repro"], repo, timeout=1500)
    (repo / "repro.log").write_text(proc.stdout + proc.stderr)
    print(f"smoke dvc repro: {time.perf_counter() - t0:.0f}s")
    return repo
