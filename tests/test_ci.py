"""What CI promises about its services (SLURM, sshd, Chromium): `.ci/services.sh install` asks
apt-get for every package a bare machine lacks (slurmdbd among them: a package of its own on
Debian 12) and fails, naming the cause, where the install fails; every program `.ci/slurm.sh
start` needs is one that install provides; under CI=true a test whose service is missing fails
with the reason, elsewhere it skips; and the run's summary says in one line which services ran."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, services_line

SERVICES_SH = ROOT / ".ci" / "services.sh"
BASH = shutil.which("bash") or "/bin/bash"


def stub_path(tmp_path: Path, apt_get: str) -> Path:
    """A PATH directory holding only what services.sh runs besides its builtins, and an apt-get
    stub with the body `apt_get` (the machine's real programs are not on it: a bare machine)."""
    d = tmp_path / "bin"
    d.mkdir()
    for tool in ("mktemp", "tail", "rm", "cat", "touch", "chmod"):
        (d / tool).symlink_to(shutil.which(tool))
    apt = d / "apt-get"
    apt.write_text(f"#!{BASH}\necho \"$*\" >> {tmp_path / 'apt.log'}\n{apt_get}\n")
    apt.chmod(0o755)
    return d


def services(tmp_path: Path, path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([BASH, str(SERVICES_SH), *args], capture_output=True, text=True,
                          env={"PATH": str(path), "HOME": str(tmp_path)}, timeout=60)


ALL_PACKAGES = ["chromium", "slurm-wlm", "slurmdbd", "munge", "mariadb-server", "openssh-server"]


@pytest.mark.skipif(os.geteuid() != 0, reason="install runs apt-get as root only")
def test_a_bare_machine_gets_every_package_slurmdbd_included_in_one_apt_get(tmp_path):
    # The stub "installs" by putting each package's programs on PATH, as apt would.
    programs = {"chromium": "chromium", "slurm-wlm": "slurmctld slurmd sbatch",
                "slurmdbd": "slurmdbd", "munge": "munged", "mariadb-server": "mariadbd",
                "openssh-server": "sshd"}
    body = ['[ "$1" = install ] || exit 0', 'for p in "$@"; do case $p in']
    body += [f"  {pkg}) for x in {xs}; do touch {tmp_path}/bin/$x; chmod +x {tmp_path}/bin/$x; "
             "done;;" for pkg, xs in programs.items()]
    body += ["esac; done"]
    path = stub_path(tmp_path, "\n".join(body))
    assert services(tmp_path, path, "missing").stdout.split() == ALL_PACKAGES
    proc = services(tmp_path, path, "install")
    assert proc.returncode == 0, proc.stderr
    calls = (tmp_path / "apt.log").read_text().splitlines()
    assert calls == ["update -qq", "install -y -qq " + " ".join(ALL_PACKAGES)]
    assert services(tmp_path, path, "missing").stdout == ""
    # Nothing missing: no apt-get at all.
    assert services(tmp_path, path, "install").returncode == 0
    assert len((tmp_path / "apt.log").read_text().splitlines()) == 2


@pytest.mark.skipif(os.geteuid() != 0, reason="install runs apt-get as root only")
def test_a_failed_install_stops_ci_naming_the_packages_and_apts_reason(tmp_path):
    path = stub_path(tmp_path, '[ "$1" = install ] || exit 0\n'
                               'echo "E: Unable to locate package slurmdbd" >&2; exit 100')
    proc = services(tmp_path, path, "install")
    assert proc.returncode == 1
    assert "could not install chromium slurm-wlm slurmdbd" in proc.stderr
    assert "E: Unable to locate package slurmdbd" in proc.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="install runs apt-get as root only")
def test_an_install_that_leaves_a_program_missing_stops_ci(tmp_path):
    path = stub_path(tmp_path, "exit 0")  # apt-get "succeeds" and installs nothing
    proc = services(tmp_path, path, "install")
    assert proc.returncode == 1
    assert "still missing the programs of: " + " ".join(ALL_PACKAGES) in proc.stderr


def test_every_daemon_slurm_sh_starts_comes_from_a_package_services_sh_installs():
    started = re.search(r"for d in ([\w ]+); do", (ROOT / ".ci" / "slurm.sh").read_text())[1]
    installed = re.findall(r'^\s+"(\S+) \S+"', SERVICES_SH.read_text(), flags=re.M)
    assert {"munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd"} == set(started.split())
    assert set(started.split()) <= set(installed), (started, installed)


PROBE = '''
import pytest

@pytest.mark.service("slurm")
def test_needs_a_cluster():
    pass

def test_needs_nothing():
    pass
'''


def probe(tmp_path: Path, *, ci: str | None) -> subprocess.CompletedProcess:
    """A one-test-file pytest run with this suite's conftest as a plugin and no sbatch on PATH
    (so no SLURM), under CI=`ci`."""
    (tmp_path / "test_probe.py").write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_XDIST_WORKER",
                                                             "PYTEST_ADDOPTS")}
    env.update(PATH=str(tmp_path), PYTHONPATH=str(ROOT / "tests"),
               S2S_SERVICES_REPORT=str(tmp_path / "services.txt"))
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:xdist",
                           "-p", "no:cacheprovider", "-c", os.devnull, "--rootdir", str(tmp_path),
                           "-rfs", "test_probe.py"],
                          cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)


def test_under_ci_a_missing_service_fails_the_test_with_its_reason(tmp_path):
    proc = probe(tmp_path, ci="true")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "1 passed" in out and "1 error" in out, out
    assert "no sbatch" in out and "CI=true" in out, out
    assert (tmp_path / "services.txt").read_text() == (
        "services: SLURM did NOT run (1 failed in setup); sshd: no test asked for it; "
        "Chromium: no test asked for it\n")


def test_outside_ci_a_missing_service_skips_the_test(tmp_path):
    proc = probe(tmp_path, ci=None)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "1 passed" in out and "1 skipped" in out, out
    assert "no sbatch" in out, out
    assert "SLURM did NOT run (1 skipped)" in (tmp_path / "services.txt").read_text()


def test_the_services_line_counts_the_tests_that_ran():
    line = services_line({"slurm": {"a": "passed", "b": "passed", "c": "failed"},
                          "sshd": {"d": "skipped"}})
    assert line == ("services: SLURM ran 3 of 3 tests (1 failed, 2 passed); sshd did NOT run "
                    "(1 skipped); Chromium: no test asked for it")
