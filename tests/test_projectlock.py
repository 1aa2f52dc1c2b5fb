"""One project, one writer (s2s.projectlock): `dvc repro`, a Snakemake run and a stage run by hand
refuse each other in one line naming the holder, before anything is deleted; the jobs of one
Snakemake run still run side by side; a dead holder is dropped; the download stage removes only
the temporaries of a run that is gone. Plus Snakemake's workflow-read errors as one line.

The engines run the smoke profile's data stages only (download, prepare, vocab: seconds), which
is where two engines destroyed each other's work (tests/conftest.py `smoke_data` is the
undisturbed run they are compared with)."""

from __future__ import annotations

import logging

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import BIN, MIRROR, ROOT, make_project, need_mirror, run
from helpers import start


def project(dest: Path) -> Path:
    """A git+DVC project of the smoke profile with the workflow: both engines can run it."""
    repo = make_project(dest)
    shutil.copytree(ROOT / "workflow", repo / "workflow",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return repo


def tool(name: str) -> str:
    return str(BIN / name)


def snakemake(repo: Path, *args: str, check: bool = False) -> subprocess.CompletedProcess:
    return run([tool("snakemake"), *args], repo, check=check, timeout=600)


def last_line(proc: subprocess.CompletedProcess) -> str:
    return (proc.stderr.strip().splitlines() or [""])[-1]


def same_files(a: Path, b: Path) -> list[str]:
    """The relative paths whose bytes differ between two folders (or exist in one only), but
    Snakemake's marker of a directory it wrote, which DVC ignores too (.dvcignore)."""
    def files(root: Path) -> set[Path]:
        return {p.relative_to(root) for p in root.rglob("*")
                if p.is_file() and p.name != ".snakemake_timestamp"}

    files = files(a) | files(b)
    return sorted(str(f) for f in files if not ((a / f).is_file() and (b / f).is_file()
                                                and (a / f).read_bytes() == (b / f).read_bytes()))


@pytest.fixture
def repo(tmp_path) -> Path:
    need_mirror()
    return project(tmp_path / "repo")


# ---------------------------------------------------------------------------------------------
# Two engines at once


def wait_for_writer(repo: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    """Until `proc` holds the project (its entry in DVC's rwlock)."""
    rwlock = repo / ".dvc" / "tmp" / "rwlock"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if rwlock.exists() and f'"pid": {proc.pid}' in rwlock.read_text():
            return
        time.sleep(0.1)
    raise AssertionError(f"PID {proc.pid} never held {repo}")


@pytest.mark.slow
@pytest.mark.parametrize("first", ["neither", "snakemake"])
def test_dvc_repro_and_snakemake_started_together_leave_one_writer_and_an_undisturbed_result(
        repo, smoke_data, tmp_path, first):
    """Started at once (DVC usually wins here: it reaches its first stage before Snakemake has
    read the workflow), and with Snakemake first, so that DVC is the one refused."""
    t0 = time.perf_counter()
    sm = start([tool("snakemake"), "--cores", "1", "vocab"], repo, tmp_path / "sm.log")
    if first == "snakemake":
        wait_for_writer(repo, sm)
    dvc = start([tool("dvc"), "repro", "vocab"], repo, tmp_path / "dvc.log")
    status = {"dvc": dvc.wait(timeout=600), "snakemake": sm.wait(timeout=600)}
    logs = {k: (tmp_path / f"{'sm' if k == 'snakemake' else k}.log").read_text()
            for k in status}
    # One of them wrote the project, the other refused: each runs for seconds after its start,
    # so two runs started together always meet (both succeeding would mean both wrote at once).
    assert sorted(status.values())[0] == 0 and sum(map(bool, status.values())) == 1, logs
    if first == "snakemake":
        assert status == {"dvc": 255, "snakemake": 0}, logs
    if status["snakemake"]:  # refused at its start, in one line naming DVC, before any job
        assert logs["snakemake"].strip().splitlines()[-1].startswith("ProjectLocked: "), logs
        assert f"PID {dvc.pid} (" in logs["snakemake"] and "dvc repro vocab" in logs["snakemake"]
        assert "rule download" not in logs["snakemake"]
    if status["dvc"]:  # refused by DVC's own check, naming the run, before deleting anything
        assert re.search(rf"is busy, it is being blocked by:\s+\(PID {sm.pid}\): snakemake "
                         rf"--cores 1 vocab", logs["dvc"]), logs
        assert "Running stage" not in logs["dvc"]
    print(f"two engines at once: {time.perf_counter() - t0:.1f}s, exit status {status}")

    run([tool("dvc"), "commit", "-f", "--with-deps", "vocab"], repo)
    dvc_status = run([tool("dvc"), "status", "--with-deps", "vocab"], repo).stdout
    assert "Data and pipelines are up to date" in dvc_status, dvc_status
    data, _ = smoke_data
    for mine, undisturbed in (("data/raw", "raw"), ("data/prepared", "prepared"),
                              ("data/vocab", "vocab")):
        assert same_files(repo / mine, data / undisturbed) == [], mine
    for name in ("prepare.json", "vocab.json"):
        assert (repo / "metrics" / name).read_bytes() == (data / name).read_bytes(), name
    leftovers = [p for p in repo.rglob("*") if ".tmp" in p.name and ".dvc" not in p.parts
                 and ".snakemake" not in p.parts and ".git" not in p.parts]
    assert leftovers == []
    rwlock = repo / ".dvc" / "tmp" / "rwlock"
    assert "s2s project writer" not in (rwlock.read_text() if rwlock.exists() else "")


@pytest.mark.slow
def test_a_held_project_is_refused_by_every_writer_naming_the_holder_before_any_deletion(repo):
    from dvc.fs import localfs
    from dvc.lock import make_lock
    from dvc.rwlock import rwlock

    from s2s.projectlock import ProjectLock

    run([tool("s2s"), "check", "--out", "metrics/params.json"], repo)  # by hand: lock, release
    made = repo / "metrics" / "params.json"
    me = f"PID {os.getpid()}"
    with ProjectLock(repo, "a test holding the project"):
        proc = run([tool("dvc"), "repro", "-f", "check-params"], repo, check=False)
        assert proc.returncode != 0
        assert f"(PID {os.getpid()}): a test holding the project" in proc.stderr, proc.stderr
        proc = snakemake(repo, "--cores", "1", "-f", "check_params")
        assert proc.returncode == 1
        assert last_line(proc).startswith("ProjectLocked: ") and \
            f"{me} (a test holding the project)" in last_line(proc), proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr and 'File "' not in proc.stderr
        proc = run([tool("s2s"), "check", "--out", "metrics/params.json"], repo, check=False)
        assert proc.returncode == 1 and "ProjectLocked" in proc.stderr
        assert f"is being written by {me} (a test holding the project)" in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        # `dvc exp run` wrote its -S value into params.yaml and stashed the workspace before
        # its first stage found the project held: its experiments' lock is held too
        params = (repo / "params.yaml").read_bytes()
        proc = run([tool("dvc"), "exp", "run", "-S", "report.title=Another"], repo, check=False)
        assert proc.returncode != 0
        assert "'workspace' is busy" in proc.stderr and \
            f"(PID {os.getpid()}): a test holding the project" in proc.stderr, proc.stderr
        assert (repo / "params.yaml").read_bytes() == params
        assert run(["git", "diff", "--stat", "HEAD"], repo).stdout == ""  # nothing tracked
        assert made.is_file()  # nobody deleted what they would have rewritten

    # DVC between two stages holds its repository lock; inside a stage, its rwlock entries
    tmp = repo / ".dvc" / "tmp"
    dvc_lock = make_lock(str(tmp / "lock"), tmp_dir=str(tmp))
    dvc_lock.lock()
    try:
        proc = run([tool("s2s"), "check", "--out", "metrics/params.json"], repo, check=False)
    finally:
        dvc_lock.unlock()
    assert proc.returncode == 1 and f"is being written by {me} (" in proc.stderr, proc.stderr
    with rwlock(str(tmp), localfs, "dvc repro", [str(repo / "params.yaml")], [str(made)], False):
        proc = snakemake(repo, "--cores", "1", "-f", "check_params")
    assert proc.returncode == 1 and f"{me} (dvc repro)" in last_line(proc), proc.stderr[-2000:]
    assert made.is_file()
    # free again: the hand run takes the lock and leaves no entry behind
    run([tool("s2s"), "check", "--out", "metrics/params.json"], repo)
    assert "s2s project writer" not in (tmp / "rwlock").read_text()


def test_a_running_experiment_refuses_a_writer_which_leaves_no_entry_behind(repo):
    """`dvc exp run` holding the workspace in its experiments' lock (as it stashes it): a writer
    is refused naming it, and takes its own entry in the project's lock back out."""
    from s2s.projectlock import ProjectLock, ProjectLocked

    holder = subprocess.Popen(
        [sys.executable, "-c", "import os, sys, time\nfrom dvc.fs import localfs\n"
         "from dvc.rwlock import rwlock\nos.makedirs(sys.argv[1], exist_ok=True)\n"
         "with rwlock(sys.argv[1], localfs, 'dvc exp run -S x=1', [], ['workspace'], False):\n"
         "    print('held', flush=True)\n    time.sleep(600)\n",
         str(repo / ".dvc" / "tmp" / "exps")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ProjectLocked) as e:
            ProjectLock(repo, "s2s check (a test)").acquire()
        assert f"is being written by PID {holder.pid} (dvc exp run -S x=1)" in str(e.value)
        assert f"its entry is in {repo / '.dvc' / 'tmp' / 'exps' / 'rwlock'}: " in str(e.value)
        assert "s2s check (a test)" not in (repo / ".dvc" / "tmp" / "rwlock").read_text()
    finally:
        holder.kill()
        holder.wait(timeout=60)
    with ProjectLock(repo, "the next writer"):  # free once the experiment is gone
        pass


def test_a_lock_whose_entry_was_cleared_by_hand_is_released_with_a_warning(repo, caplog):
    """A refusal tells another user how to clear .dvc/tmp/rwlock; DVC on another host drops a PID
    it cannot see. The holder's release then met DVC's assertion: a stage that had done its work
    ended in a traceback."""
    from s2s.projectlock import ProjectLock

    lock = ProjectLock(repo, "s2s prepare (a test)").acquire()
    (repo / ".dvc" / "tmp" / "rwlock").unlink()
    with caplog.at_level(logging.WARNING, logger="s2s"):
        lock.release()
    assert "this run's entry was gone from" in caplog.text
    with ProjectLock(repo, "the next writer"):  # and the project is free
        pass


def test_the_jobs_of_one_engine_run_run_side_by_side_and_a_dead_holder_is_dropped(repo):
    from s2s.projectlock import WRITER_ENV, ProjectLock

    engine = ProjectLock(repo, "snakemake (a test)").acquire()
    try:
        jobs = [subprocess.Popen([tool("s2s"), "check", "--out", f"metrics/{n}.json"], cwd=repo,
                                 env={**os.environ, WRITER_ENV: engine.token},
                                 stderr=subprocess.PIPE, text=True) for n in ("a", "b")]
        errors = [j.communicate(timeout=120)[1] for j in jobs]
        assert [j.returncode for j in jobs] == [0, 0], errors
        outsider = run([tool("s2s"), "check", "--out", "metrics/c.json"], repo, check=False)
        assert outsider.returncode == 1 and "ProjectLocked" in outsider.stderr
    finally:
        engine.release()

    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom pathlib import Path\n"
         "from s2s.projectlock import ProjectLock\n"
         "ProjectLock(Path(sys.argv[1]), 'doomed').acquire()\nprint('held', flush=True)\n"
         "time.sleep(600)\n", str(repo)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    holder.kill()  # SIGKILL: no release
    holder.wait(timeout=60)
    assert "doomed" in (repo / ".dvc" / "tmp" / "rwlock").read_text()
    proc = run([tool("s2s"), "check", "--out", "metrics/d.json"], repo)
    assert (repo / "metrics" / "d.json").is_file(), proc.stderr
    assert "doomed" not in (repo / ".dvc" / "tmp" / "rwlock").read_text()


# ---------------------------------------------------------------------------------------------
# Temporaries name their owner


def test_the_download_stage_removes_only_the_temporaries_of_a_run_that_is_gone(tmp_path):
    from s2s.config import CorpusRef, DataConfig
    from s2s.io import owner_tag
    from s2s.stages import download as download_stage

    need_mirror()
    out = tmp_path / "raw"
    out.mkdir()
    dead = subprocess.Popen(["true"])
    dead.wait()
    mine = owner_tag()
    host, pid_start = mine.split("p", 1)
    reused = f"{host}p{os.getpid()}s1"  # this PID, another start time: a recycled PID
    names = {
        "live": f".tmp-multi30k.val-{mine}-0a0a0a0a",  # another engine's, still writing
        "other_host": f".tmp-multi30k.val-h0000beefp{os.getpid()}s1-0b0b0b0b",
        "dead": f".tmp-multi30k.val-{owner_tag(dead.pid)}-0c0c0c0c",
        "recycled": f".tmp-multi30k.val-{reused}-0d0d0d0d",
        "older_version": ".tmp-multi30k.val-0e0e0e0e",  # no owner recorded
    }
    for name in names.values():
        (out / name).mkdir()
        (out / name / "en.txt.part").write_text("half\n")
    data = DataConfig(train=(), dev=(), test=CorpusRef("multi30k.val"))
    download_stage.main(data, out_dir=out, mirror=MIRROR)
    left = {p.name for p in out.iterdir()}
    assert names["live"] in left and names["other_host"] in left
    assert not {names[k] for k in ("dead", "recycled", "older_version")} & left
    assert (out / "multi30k.val" / "en.txt").is_file() and (out / "manifest.json").is_file()


# ---------------------------------------------------------------------------------------------
# Snakemake's workflow-read errors


def test_snakemake_with_a_mistyped_params_key_ends_in_one_line_without_frames(tmp_path):
    repo = project(tmp_path / "repo")
    params = repo / "params.yaml"
    params.write_text(params.read_text().replace("\n  epochs:", "\n  epochz:", 1))
    proc = snakemake(repo, "-n")
    assert proc.returncode == 1
    out = proc.stdout + proc.stderr
    assert 'File "' not in out and "Traceback" not in out and ' in file "' not in out, out
    assert last_line(proc).startswith("ConfigError: params.yaml: unknown key 'train.epochz'")


def test_two_processes_fetching_into_one_download_cache_take_turns(tmp_path):
    """The cache is shared by every project: the second process waits, then finds the file
    whole in the cache (one request), and no one appends to the other's .part."""
    import hashlib

    from conftest import RangeServer

    body = bytes(range(256)) * 2400  # 600 KB, sent slowly: the two overlap
    with RangeServer() as server:
        server.files["/b.bin"] = body
        server.delay = 0.02
        code = ("import sys\nfrom pathlib import Path\nfrom s2s.data.http import fetch\n"
                "from s2s.data.sources import Remote\n"
                "path, info = fetch(Remote(sys.argv[1], sha256=sys.argv[2]), Path(sys.argv[3]))\n"
                "print(path.read_bytes() == Path(sys.argv[4]).read_bytes(), info['verified'])\n")
        (tmp_path / "body").write_bytes(body)
        args = [server.url("/b.bin"), hashlib.sha256(body).hexdigest(), str(tmp_path / "cache"),
                str(tmp_path / "body")]
        procs = [subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(2)]
        outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert [o.strip() for o, _ in outs] == ["True sha256", "True sha256"]
    assert server.requests == [("/b.bin", None)]  # downloaded once, whole
    cached = list((tmp_path / "cache").iterdir())
    assert len(cached) == 1 and cached[0].name.endswith("-b.bin")  # the file, no .part
