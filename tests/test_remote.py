"""Results from the cluster to the laptop through real DVC remotes: a finished smoke run ("the
cluster", a copy of the `dvc repro` run with its results committed) pushes to a plain-path remote
(a shared filesystem) and to an SSH remote (OpenSSH on localhost, a key made by the test); a fresh
clone ("the laptop") pulls every cached output, finds nothing to run, and regenerates the same
report. Resume points (checkpoints/), no DVC outputs, stay behind. A remote that does not answer
fails the push with DVC's message and touches nothing."""

from __future__ import annotations

import filecmp
import re
import shlex
import shutil
import socket
from pathlib import Path

import pytest
import yaml

from conftest import BIN, run

pytestmark = [pytest.mark.remote, pytest.mark.slow]

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
REVISION = re.compile(rb"git revision: [0-9a-f]{40}")


def dvc(repo: Path, *args: str, check: bool = True, home: Path | None = None):
    return run([str(BIN / "dvc"), *args], repo, check=check, timeout=600,
               env={"HOME": str(home)} if home else None)


@pytest.fixture(scope="module")
def cluster(smoke_run, tmp_path_factory) -> Path:
    """The smoke run, copied, with its results committed as a team would (dvc.lock, metrics)."""
    repo = tmp_path_factory.mktemp("cluster") / "repo"
    shutil.copytree(smoke_run, repo, symlinks=True)
    run(["git", "add", "-A"], repo)
    run([*GIT, "commit", "-qm", "smoke run"], repo)
    return repo


def workspace(repo: Path) -> dict[str, tuple[int, int]]:
    """Every file of the workspace but git's and DVC's own: (size, mtime in ns)."""
    return {str(p.relative_to(repo)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in repo.rglob("*")
            if p.is_file() and p.relative_to(repo).parts[0] not in (".git", ".dvc")}


def report_files(repo: Path) -> list[str]:
    return sorted(str(p.relative_to(repo)) for p in (repo / "reports").rglob("*") if p.is_file())


@pytest.fixture(params=["path", pytest.param("ssh", marks=pytest.mark.service("sshd"))])
def remote(request, tmp_path):
    """(remote URL, HOME for DVC, `dvc remote modify --local` settings) for each kind."""
    if request.param == "path":
        return str(tmp_path / "shared" / "dvc-store"), None, {}
    server = request.getfixturevalue("sshd")
    url = f"ssh://{server.user}@{server.host}:{server.port}{tmp_path / 'ssh-store'}"
    return url, server.home, {"keyfile": str(server.key)}


def test_pushed_results_pull_into_a_fresh_clone_with_nothing_to_rerun(cluster, remote,
                                                                      tmp_path):
    url, home, local = remote
    # The cluster: the remote in the project's config, verified as the README sets it up,
    # committed; its key in the local config.
    dvc(cluster, "remote", "add", "-f", "-d", "team", url)
    dvc(cluster, "remote", "modify", "team", "verify", "true")
    for key, value in local.items():
        dvc(cluster, "remote", "modify", "--local", "team", key, value)
    run([*GIT, "commit", "-q", "--allow-empty", "-am", "team remote"], cluster)
    pushed = dvc(cluster, "push", home=home)
    assert re.search(r"\d+ files? pushed", pushed.stdout + pushed.stderr), pushed.stdout

    # The laptop: clone, the same key, pull.
    laptop = tmp_path / "laptop"
    run(["git", "clone", "-q", str(cluster), str(laptop)], tmp_path)
    for key, value in local.items():
        dvc(laptop, "remote", "modify", "--local", "team", key, value)
    assert not (laptop / "models").exists()
    dvc(laptop, "pull", home=home)
    status = dvc(laptop, "status", home=home).stdout
    assert "up to date" in status, status
    repro = dvc(laptop, "repro", home=home)
    assert "Running stage" not in repro.stdout + repro.stderr, repro.stdout[-3000:]
    # Every cached output came back, byte for byte; the resume points did not travel.
    for out in ("models", "outputs", "snapshots", "data/prepared", "data/vocab"):
        cmp = filecmp.dircmp(cluster / out, laptop / out)
        assert not (cmp.left_only or cmp.right_only or cmp.diff_files), (out, cmp.report())
    assert (cluster / "checkpoints").is_dir() and not (laptop / "checkpoints").exists()

    # The report, written again on the laptop from what came back: the same files and bytes,
    # but for the git revision it names (the laptop's checkout is the later commit that holds
    # the results; the cluster wrote the report before that commit existed).
    before = {f: (laptop / f).read_bytes() for f in report_files(laptop)}
    assert before == {f: (cluster / f).read_bytes() for f in report_files(cluster)}
    cmd = yaml.safe_load((laptop / "dvc.yaml").read_text())["stages"]["report"]["cmd"]
    run(shlex.split(cmd), laptop)
    assert report_files(laptop) == sorted(before)
    head = run(["git", "rev-parse", "HEAD"], laptop).stdout.strip()
    for f, old in before.items():
        new = (laptop / f).read_bytes()
        if new != old:
            assert REVISION.sub(b"", new) == REVISION.sub(b"", old), f
            assert f"git revision: {head}".encode() in new, f


@pytest.mark.service("sshd")
def test_a_remote_that_does_not_answer_fails_the_push_and_touches_nothing(cluster, sshd):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dvc(cluster, "remote", "add", "-f", "nowhere", f"ssh://{sshd.user}@127.0.0.1:{port}/store")
    dvc(cluster, "remote", "modify", "--local", "nowhere", "keyfile", str(sshd.key))
    before = workspace(cluster)
    proc = dvc(cluster, "push", "-r", "nowhere", check=False, home=sshd.home)
    assert proc.returncode != 0
    errors = [line for line in (proc.stdout + proc.stderr).splitlines()
              if line.startswith("ERROR")]
    assert errors and re.search(r"connect|refused", errors[0], re.I), proc.stderr[-2000:]
    assert workspace(cluster) == before
