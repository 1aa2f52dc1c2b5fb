"""The pipeline on a real SLURM cluster (in CI a one-node one that .ci/slurm.sh starts), through
`snakemake --profile workflow/profiles/slurm`, one SLURM job per stage: the data stages write the
data `dvc repro` writes; from the local Snakemake run of the smoke profile with two models' outputs
removed, the jobs of those trainings and of every stage that reads them (every kind of stage after
the data) write the metrics `dvc repro` writes; a training job killed at its time limit resumes in
the job Snakemake resubmits and ends with an uninterrupted run's weights to the bit; `srun -n 2`
starts two data-parallel ranks that end with one process's weights; a job sbatch refuses fails
with sbatch's reason and leaves no output.

The jobs go to the user's default account and partition (``S2S_SLURM_ACCOUNT``,
``S2S_SLURM_PARTITION`` choose others), set on the command line as a site would, never by
editing the profile. Skipped where no SLURM controller answers (failed under CI=true).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import time
import warnings
from pathlib import Path

import pytest
import torch
import yaml

from conftest import BIN, project, run, service_missing
from helpers import profile_dict, start, write_params
from test_snakemake import RUN_FIELDS, dvc_stages, metrics_of, rule_name

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.service("slurm")]


@dataclasses.dataclass(frozen=True)
class Site:
    account: str
    partition: str


def _query(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="session")
def site() -> Site:
    """This cluster's account and partition for the jobs (the module's service mark has checked
    that a controller answers)."""
    sinfo = _query(["sinfo", "-h", "-o", "%P"])
    partition = os.environ.get("S2S_SLURM_PARTITION") or next(
        (p[:-1] for p in sinfo.stdout.split() if p.endswith("*")), "")
    account = os.environ.get("S2S_SLURM_ACCOUNT") or _query(
        ["sacctmgr", "-n", "-P", "show", "user", os.environ.get("USER") or _whoami(),
         "format=DefaultAccount"]).stdout.strip()
    if not partition or not account:
        service_missing("slurm", f"no default partition ({partition!r}) or account "
                        f"({account!r}): set S2S_SLURM_PARTITION and S2S_SLURM_ACCOUNT")
    return Site(account=account, partition=partition)


def _whoami() -> str:
    return _query(["id", "-un"]).stdout.strip()


def submit(repo: Path, site: Site, targets: tuple[str, ...] = (), *options: str,
           timeout: int = 1800, check: bool = True) -> subprocess.CompletedProcess:
    """`snakemake --profile workflow/profiles/slurm` with the site's account and partition and
    status checks 2 s after a submission (the profile's 10 s would only slow the tests). Bounded
    by `timeout -k`: on SIGTERM Snakemake waits for its running jobs. Jobs left in the queue
    (a timeout, a failed test) are cancelled, and processes of its jobs that outlive them are
    killed (kill_left_behind): under CI=true the test then fails naming them."""
    cmd = ["timeout", "-k", "30", str(timeout), str(BIN / "snakemake"), *targets,
           "--profile", "workflow/profiles/slurm",
           "--default-resources", f"slurm_account={site.account}",
           f"slurm_partition={site.partition}",
           "--slurm-init-seconds-before-status-checks", "2", *options]
    try:
        proc = run(cmd, repo, check=check, timeout=timeout + 60, env={"OMP_NUM_THREADS": "1"})
    finally:  # also after a failure, which is then the one reported
        cancel_jobs_in(repo)
        left = kill_left_behind(repo)
    if left:
        said = "processes of the test's SLURM jobs outlived them (killed): " + "; ".join(left)
        if os.environ.get("CI") == "true":
            pytest.fail(said)
        warnings.warn(said)
    return proc


def cancel_jobs_in(workdir: Path) -> None:
    queue = _query(["squeue", "-h", "-o", "%i %Z"]).stdout.split("\n")
    ids = [line.split()[0] for line in queue
           if line.strip() and Path(line.split(maxsplit=1)[1]) == workdir]
    if ids:
        _query(["scancel", *ids])


@functools.cache
def kill_wait() -> int:
    """Seconds SLURM waits between a job's SIGTERM and its SIGKILL (KillWait; 30 by default)."""
    said = re.search(r"^KillWait\s*=\s*(\d+)", _query(["scontrol", "show", "config"]).stdout,
                     re.M)
    return int(said[1]) if said else 30


def _ancestors() -> set[int]:
    """This process and every process above it."""
    pids, pid = set(), os.getpid()
    while pid > 1 and pid not in pids:
        pids.add(pid)
        try:
            # the parent PID is the second field after the command name, which is in parentheses
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            break
    return pids


def processes_in(workdir: Path) -> dict[int, str]:
    """PID -> command line of every process working in `workdir` or below (the jobs of a
    submission run there), this test's own process and its ancestors left out."""
    root, mine, found = workdir.resolve(), _ancestors(), {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) in mine:
            continue
        try:
            cwd = Path(os.readlink(proc / "cwd"))
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                errors="replace").strip()
        except OSError:  # gone, a zombie, or another user's
            continue
        if cwd == root or root in cwd.parents:
            found[int(proc.name)] = cmdline or f"[{proc.name}]"
    return found


def kill_left_behind(workdir: Path) -> list[str]:
    """Processes of the jobs run in `workdir` that outlive them: given KillWait and 10 s to end
    after the jobs were cancelled (SLURM's own SIGTERM, then SIGKILL), then killed. Each as
    'PID command line'; none where SLURM ended every process of its jobs. A job-step Snakemake
    re-parented to PID 1 once outlived its job for good (see ProctrackType in .ci/slurm.sh)."""
    deadline = time.monotonic() + kill_wait() + 10
    left = processes_in(workdir)
    while left and time.monotonic() < deadline:
        time.sleep(1)
        left = processes_in(workdir)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:  # ended meanwhile
            pass
    return [f"{pid} {cmdline}" for pid, cmdline in left.items()]


def submitted(log: str) -> list[tuple[str, str]]:
    """(rule, SLURM job id) of every submission in a Snakemake log, in order."""
    return [(rule, job) for job, rule in
            re.findall(r"submitted with SLURM jobid (\d+) \(log: .*/rule_(\w+)/", log)]


def job_states(ids: list[str]) -> dict[str, str]:
    """SLURM's final state of each job (the accounting database's)."""
    out = _query(["sacct", "-X", "-n", "-P", "-j", ",".join(ids), "-o", "JobID,State"]).stdout
    return dict(line.split("|")[:2] for line in out.split() if "|" in line)


# ---------------------------------------------------------------------------------------------
# The smoke DAG on SLURM, from two models on


# Removed from the local Snakemake run of the smoke profile, so that the SLURM run trains them
# again: the paper's LSTM (reversed source) and the Transformer. What reads them is every kind of
# stage after the data (their decoding alone, in an ensemble of two and of five, rescoring,
# BLEU, the analyses, the attention maps, the timing, the exports, the claims and the report):
# 16 of the smoke DAG's 54 stages. The data stages are SLURM jobs in `timed_out`, below. The
# whole DAG as SLURM jobs read the workflow 76 times more (each job twice, in its batch script
# and in its step), for stages the local run and `dvc repro` have shown to write the same.
RETRAINED = ("train-reversed_1", "train-transformer")
DATA_STAGES = ("check-params", "download", "prepare", "vocab", "ids")


def descendants(repo: Path, stages: tuple[str, ...]) -> set[str]:
    """`stages` and every stage that reads their outputs, directly or not: DVC's own DAG
    (`dvc dag --dot`), not the workflow's."""
    dot = run([str(BIN / "dvc"), "dag", "--dot"], repo).stdout
    edges = re.findall(r'^"([^"]+)" -> "([^"]+)";$', dot, re.M)
    assert edges, dot[:2000]
    found, todo = set(stages), list(stages)
    while todo:
        stage = todo.pop()
        for a, b in edges:
            if a == stage and b not in found:
                found.add(b)
                todo.append(b)
    return found


def outputs(repo: Path) -> dict[str, list[str]]:
    """Each stage's outputs as dvc.yaml lists them."""
    stages = yaml.safe_load((repo / "dvc.yaml").read_text())["stages"]
    return {name: [next(iter(o)) if isinstance(o, dict) else o
                   for key in ("outs", "metrics", "plots") for o in spec.get(key, [])]
            for name, spec in stages.items()}


def remove_outputs(repo: Path, stage: str) -> None:
    """A training stage's outputs and its resume point: its job starts afresh."""
    cmd = yaml.safe_load((repo / "dvc.yaml").read_text())["stages"][stage]["cmd"]
    paths = outputs(repo)[stage] + re.findall(r"--ckpt-dir (\S+)", cmd)
    assert len(paths) >= 4, (stage, paths)  # model, metrics, curves, resume point
    for path in map(repo.joinpath, paths):
        assert path.exists(), path
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()


def files_of(repo: Path, paths: list[str]) -> dict[str, tuple[int, int]]:
    """(inode, modification time in ns) of each of `paths` and of every file inside them: a file
    written anew, in place or replaced, changes one of them."""
    found = {}
    for path in map(repo.joinpath, paths):
        for p in [path, *(sorted(path.rglob("*")) if path.is_dir() else [])]:
            if p.exists():
                found[str(p.relative_to(repo))] = (p.stat().st_ino, p.stat().st_mtime_ns)
    return found


@dataclasses.dataclass(frozen=True)
class SlurmRun:
    repo: Path
    log: str
    before: dict[str, dict[str, tuple[int, int]]]  # stage -> files_of its outputs, before the run


@pytest.fixture(scope="module")
def slurm_run(site, snakemake_repo, tmp_path_factory) -> SlurmRun:
    """A copy of the local Snakemake run of the smoke profile, less the outputs of RETRAINED,
    run again through the SLURM profile."""
    repo = tmp_path_factory.mktemp("slurm") / "repo"
    shutil.copytree(snakemake_repo, repo, symlinks=True)  # with the times Snakemake compares
    for stage in RETRAINED:
        remove_outputs(repo, stage)
    before = {stage: files_of(repo, paths) for stage, paths in outputs(repo).items()}
    t0 = time.perf_counter()
    proc = submit(repo, site, timeout=1800, check=False)
    (repo / "snakemake.log").write_text(proc.stdout + proc.stderr)  # in place of the local run's
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
    print(f"smoke DAG from two models on, on SLURM: {time.perf_counter() - t0:.0f}s")
    return SlurmRun(repo, proc.stdout + proc.stderr, before)


def test_what_reads_two_retrained_models_is_slurm_jobs_and_the_metrics_are_dvcs(slurm_run,
                                                                                 request):
    repo = slurm_run.repo
    jobs = submitted(slurm_run.log)
    wanted = descendants(repo, RETRAINED)
    # one job each, none resubmitted, nothing the two models do not reach
    assert sorted(rule for rule, _ in jobs) == sorted(rule_name(s) for s in wanted)
    assert len(wanted) == 16
    kinds = {s.split("-")[0] for s in dvc_stages(repo) if s not in DATA_STAGES}
    assert {s.split("-")[0] for s in wanted} == kinds  # every kind of stage after the data
    states = job_states([job for _, job in jobs])
    assert set(states.values()) == {"COMPLETED"}, states
    # The jobs wrote their stages' files anew, and not one file of another stage
    for stage, paths in outputs(repo).items():
        now, then = files_of(repo, paths), slurm_run.before[stage]
        if stage in wanted:
            assert now and not now.items() & then.items(), (stage, now.items() & then.items())
        else:
            assert now == then, stage
    # The third engine: what `dvc repro` wrote (and so what the local Snakemake run writes,
    # tests/test_snakemake.py), down to every number but the run's own timings.
    # The dvc repro run asked for only now (see test_snakemake_writes_the_metrics_dvc_writes).
    ours, theirs = metrics_of(repo), metrics_of(request.getfixturevalue("smoke_run"))
    assert "metrics/bleu.json" in ours and ours.keys() == theirs.keys()
    for name in ours:
        assert ours[name] == theirs[name], name


def test_after_dvc_commit_dvc_has_nothing_to_do(slurm_run):
    run([str(BIN / "dvc"), "commit", "-f"], slurm_run.repo)
    status = run([str(BIN / "dvc"), "status"], slurm_run.repo).stdout
    assert "up to date" in status, status
    dry = run([str(BIN / "snakemake"), "-n"], slurm_run.repo)
    assert "Nothing to be done" in dry.stdout + dry.stderr


# ---------------------------------------------------------------------------------------------
# A training job past its time limit


def long_training(raw: dict) -> dict:
    """The smoke profile's training, long enough (~150 s on one idle core of the CI machine, twice
    the 60-90 s after which SLURM, checking limits every 30 s, kills a one-minute job) to outlive
    its limit on a faster host too. The rate still changes the weights at the end (halved 5
    times), so a resume that went wrong late would show; no periodic checkpoint, so the only
    resume point is the one written on SIGTERM."""
    raw["train"].update(epochs=40.0, decay_start=20.0, decay_every=4.0, eval_every=4.0,
                        checkpoint_every=10**6)
    return raw


@dataclasses.dataclass(frozen=True)
class TimedOut:
    repo: Path
    data_log: str  # Snakemake's output of the data stages' run
    log: str  # of the training's run
    reference: Path  # the uninterrupted training's folder


@pytest.fixture(scope="module")
def timed_out(tmp_path_factory, site) -> TimedOut:
    """The data stages as SLURM jobs, then one model's training job given one minute (15 on
    its retry) beside the same training run uninterrupted outside SLURM."""
    repo = project(tmp_path_factory.mktemp("timelimit") / "repo")
    write_params(repo / "params.yaml", long_training(profile_dict("smoke")))
    # The data stages first, so that only the training job is submitted after them.
    data = submit(repo, site, ("data/ids",), timeout=900)
    ref = repo.parent / "reference"
    ref.mkdir()
    # The reference trains in a copy of the project: a stage run by hand is a writer of its
    # project, which the Snakemake run holds (one writer per project: s2s.projectlock).
    twin = repo.parent / "twin"
    shutil.copytree(repo, twin, ignore=shutil.ignore_patterns(".snakemake"))
    reference = start([str(BIN / "s2s"), "--params", str(twin / "params.yaml"), "train",
                       "forward", "--ids", "data/ids", "--vocab", "data/vocab",
                       "--model-dir", str(ref / "model"), "--ckpt-dir", str(ref / "ckpt"),
                       "--metrics", str(ref / "metrics.json"), "--curves",
                       str(ref / "curves.csv"), "--snapshots", str(ref / "snapshots")],
                      twin, ref / "train.log", env={"OMP_NUM_THREADS": "1"})
    try:
        t0 = time.perf_counter()
        proc = submit(repo, site, ("models/forward",), "--set-resources",
                      "train_forward:runtime=1 if attempt == 1 else 15", timeout=1200,
                      check=False)
        print(f"time-limited training on SLURM: {time.perf_counter() - t0:.0f}s")
        assert reference.wait(timeout=900) == 0, (ref / "train.log").read_text()[-3000:]
    finally:
        if reference.poll() is None:
            # started in a session of its own: its whole group (the trainer's workers too)
            try:
                os.killpg(reference.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            reference.wait()
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]
    return TimedOut(repo, data.stdout + data.stderr, out, ref)


def test_the_data_stages_are_slurm_jobs_and_write_the_data_dvc_writes(timed_out, request):
    repo = timed_out.repo
    jobs = submitted(timed_out.data_log)
    assert sorted(rule for rule, _ in jobs) == sorted(rule_name(s) for s in DATA_STAGES)
    assert set(job_states([job for _, job in jobs]).values()) == {"COMPLETED"}
    # The files the training reads, and the data stages' metrics, as `dvc repro` wrote them
    # (the training's values differ from the smoke profile's here; the data's do not)
    smoke = request.getfixturevalue("smoke_run")
    for folder in ("data/raw", "data/prepared", "data/vocab", "data/ids"):
        ours = {p.relative_to(repo): p.read_bytes() for p in (repo / folder).rglob("*")
                if p.is_file() and p.name != ".snakemake_timestamp"}
        theirs = {p.relative_to(smoke): p.read_bytes() for p in (smoke / folder).rglob("*")
                  if p.is_file()}
        assert ours and ours.keys() == theirs.keys(), folder
        for name in ours:
            assert ours[name] == theirs[name], name
    for name in ("metrics/params.json", "metrics/prepare.json", "metrics/vocab.json"):
        assert json.loads((repo / name).read_text()) == json.loads((smoke / name).read_text())


def test_a_job_killed_at_its_time_limit_resumes_in_its_retry(timed_out):
    repo = timed_out.repo
    jobs = submitted(timed_out.log)
    assert [rule for rule, _ in jobs] == ["train_forward", "train_forward"], jobs
    first, retry = (job for _, job in jobs)
    assert job_states([first, retry]) == {first: "TIMEOUT", retry: "COMPLETED"}
    # SLURM's own word in the first job's log (kept: it failed), then the retry resumed from
    # the step where SIGTERM stopped it: no periodic checkpoint exists, so that resume point
    # was written on SIGTERM, before SIGKILL.
    first_log = (repo / ".snakemake" / "slurm_logs" / "rule_train_forward" /
                 f"{first}.log").read_text()
    assert "DUE TO TIME LIMIT" in first_log, first_log[-2000:]
    resumed = re.search(r"resuming from \S+ at step (\d+) of (\d+)",
                        (repo / "logs" / "train_forward.log").read_text())
    assert resumed, (repo / "logs" / "train_forward.log").read_text()[-2000:]
    assert 0 < int(resumed[1]) < int(resumed[2])


def test_the_resumed_job_ends_with_the_uninterrupted_weights(timed_out):
    repo, ref = timed_out.repo, timed_out.reference
    for name in ("model.pt", "best.pt"):
        got = torch.load(repo / "models" / "forward" / name, weights_only=True)["model"]
        want = torch.load(ref / "model" / name, weights_only=True)["model"]
        assert got.keys() == want.keys()
        for k in want:
            assert torch.equal(got[k], want[k]), (name, k)
    snapshots = sorted(p.name for p in (ref / "snapshots").iterdir())
    assert snapshots == sorted(p.name for p in (repo / "snapshots" / "forward").iterdir()
                               if p.name != ".snakemake_timestamp")
    for name in snapshots:
        assert (repo / "snapshots" / "forward" / name).read_bytes() == \
            (ref / "snapshots" / name).read_bytes(), name
    got = json.loads((repo / "metrics" / "train" / "forward.json").read_text())
    want = json.loads((ref / "metrics.json").read_text())
    assert {k: v for k, v in got.items() if k not in RUN_FIELDS} == \
        {k: v for k, v in want.items() if k not in RUN_FIELDS}
    assert (repo / "metrics" / "curves" / "forward.csv").read_text() == \
        (ref / "curves.csv").read_text()


# ---------------------------------------------------------------------------------------------
# Data-parallel ranks started by srun


def test_srun_ranks_train_as_one_process(smoke_data, site, tmp_path):
    data, _ = smoke_data
    raw = profile_dict("smoke")
    # As tests/test_ddp.py: 12 steps, one thread per rank, fp32.
    raw["train"].update(epochs=0.125, eval_every=0.0625, threads=1, amp=False)
    params = write_params(tmp_path / "params.yaml", raw)

    def train(out: str, *launcher: str) -> subprocess.CompletedProcess:
        return run([*launcher, str(BIN / "s2s"), "--params", str(params), "train", "reversed_1",
                    "--ids", str(data / "ids"), "--vocab", str(data / "vocab"),
                    "--model-dir", f"{out}/model", "--ckpt-dir", f"{out}/ckpt",
                    "--metrics", f"{out}/metrics.json", "--curves", f"{out}/curves.csv"],
                   tmp_path, env={"OMP_NUM_THREADS": "1"}, timeout=600)

    train("one")
    two = train("two", "srun", "-n", "2", "--mem-per-cpu=1000", "-t", "10", "--kill-on-bad-exit=1",
                "-A", site.account, "-p", site.partition)
    log = two.stdout + two.stderr
    assert "rank 0 of 2" in log and "rank 1 of 2" in log, log[-3000:]  # their places from SLURM
    one_m = json.loads((tmp_path / "one" / "metrics.json").read_text())
    two_m = json.loads((tmp_path / "two" / "metrics.json").read_text())
    assert two_m["processes"] == 2 and "processes" not in one_m
    assert two_m["steps"] == one_m["steps"] == 12
    a = torch.load(tmp_path / "one" / "model" / "model.pt", weights_only=True)["model"]
    b = torch.load(tmp_path / "two" / "model" / "model.pt", weights_only=True)["model"]
    for k in a:  # tests/test_ddp.py's tolerance: 12 SGD steps amplify summation-order differences
        torch.testing.assert_close(b[k], a[k], rtol=1e-4, atol=1e-5, msg=k)


# ---------------------------------------------------------------------------------------------
# Jobs sbatch refuses


@pytest.fixture(scope="module")
def small_repo(tmp_path_factory) -> Path:
    return project(tmp_path_factory.mktemp("refused") / "repo")


@pytest.mark.parametrize("resource, sbatch_says", [
    ("check_params:mem_mb=100000000", "Memory specification can not be satisfied"),
    ("check_params:slurm_partition='nosuch'", "invalid partition specified: nosuch"),
])
def test_a_job_sbatch_refuses_fails_naming_the_rule_and_why(small_repo, site, resource,
                                                           sbatch_says):
    proc = submit(small_repo, site, ("metrics/params.json",), "--set-resources", resource,
                  timeout=300, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert re.search(rf"^Error in rule check_params:\n\s+message: SLURM sbatch failed\. The "
                     rf"error message was 'sbatch: error: {re.escape(sbatch_says)}", out, re.M), \
        out[-3000:]
    failed = [line for line in out.splitlines() if line.startswith("s2s: rule check_params")]
    assert failed and sbatch_says in failed[0], out[-3000:]
    assert not (small_repo / "metrics" / "params.json").exists()
    rule_log = small_repo / "logs" / "check_params.log"  # Snakemake makes it before submitting
    assert not rule_log.exists() or rule_log.stat().st_size == 0
