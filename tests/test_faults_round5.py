"""Faults, fifth round (issue 45), but for the resume points (tests/test_resume_points.py): a
system loaded by name fed text prepared otherwise than its training text, a job left running by
a killed engine, a lock entry of a reused PID, a lock file of bytes that are not UTF-8, a damaged
object pulled from a DVC remote, and the headline generator's inputs missing, cut or misshapen.
Each is a one-line error naming the file (or a refusal naming the holder), never a traceback or a
silently wrong result. Nothing here runs the pipeline: hand-built checkpoints and projects, DVC's
own commands on a one-stage project, and the published metrics."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from conftest import BIN, ROOT, make_project, need_mirror, run
from helpers import one_line_error, profile_dict, untrained_forward


def s2s(args, cwd: Path, **kw) -> subprocess.CompletedProcess:
    return run([str(BIN / "s2s"), *map(str, args)], cwd, check=False, **kw)


# --- a system loaded by name: its text settings against the checkpoint's --------------------------


def trained_system(tmp_path: Path, *, record_text: bool) -> tuple[Path, Path, Path]:
    """System `forward` of the smoke profile, untrained, in a run's folders (models/, vocab/):
    its checkpoint saved as the trainer saves it (with the text record) or as earlier versions
    did (without). Returns (params.yaml, models dir, vocab dir)."""
    from s2s import config

    params_path = tmp_path / "params.yaml"
    params_path.write_text(yaml.safe_dump(profile_dict("smoke"), sort_keys=False))
    params = config.load(params_path)
    assert params.prepare.lowercase is False
    # cased text: a sentence-initial capital
    models, vocab_dir = untrained_forward(params, tmp_path, words=("The", "man", "."),
                                          record_text=record_text)
    return params_path, models, vocab_dir


@pytest.mark.parametrize("record_text", [True, False], ids=["recorded", "older_checkpoint"])
def test_a_system_loaded_by_name_refuses_params_that_prepare_its_input_otherwise(
        tmp_path, record_text):
    from s2s import api, checkpoint

    params_path, models, vocab = trained_system(tmp_path, record_text=record_text)
    assert api.load("forward", params=params_path, models_dir=models,
                    vocab_dir=vocab).lowercase is False
    params_path.write_text(params_path.read_text().replace("lowercase: false", "lowercase: true"))
    model_pt = models / "forward" / "model.pt"
    with pytest.raises(checkpoint.CheckpointError) as e:
        api.load("forward", params=params_path, models_dir=models, vocab_dir=vocab)
    said = str(e.value)
    assert said.startswith(f"{params_path}: 'prepare.lowercase' is True, but ")
    assert (f"{model_pt} was trained with False" if record_text else
            f"the vocabularies {model_pt} was trained with have capital letters") in said
    assert said.endswith("set it back, or retrain the model with it (`dvc repro train-forward`)")
    # the command line: one line, no translation written
    (tmp_path / "in.txt").write_text("The man .\n")
    out = tmp_path / "out.txt"
    proc = s2s(["--params", params_path, "translate-text", "--system", "forward", "--models",
                models, "--vocab", vocab, "-i", tmp_path / "in.txt", "-o", out], tmp_path)
    one_line_error(proc, "CheckpointError: ", "'prepare.lowercase' is True, but", status=1)
    assert not out.exists()


def test_translate_text_checks_its_files_before_loading_and_reads_a_pipe(tmp_path):
    """-o a folder, or in a folder that is not there, and -i a folder: one line before any model
    is loaded (the system named here does not exist); -i a pipe is read as a file."""
    import threading

    (tmp_path / "in.txt").write_text("The man .\n")
    (tmp_path / "folder").mkdir()
    for flags, says in ((["-i", "in.txt", "-o", "folder"], "-o folder: a folder, not a file"),
                        (["-i", "in.txt", "-o", "typo/out.txt"],
                         "-o typo/out.txt: no folder typo"),
                        (["-i", "folder"], "-i folder: a folder, not a file of sentences"),
                        (["-i", "gone.txt"], "-i gone.txt: no such file")):
        proc = s2s(["translate-text", "--system", "no_such_system", *flags], tmp_path)
        one_line_error(proc, says, status=1)
        assert "no_such_system" not in proc.stderr
    assert not (tmp_path / "typo").exists()  # a mistyped folder is not made
    # a system name where there is neither such an export nor a params file
    proc = s2s(["translate-text", "--system", "ensemble5", "-i", "in.txt"], tmp_path)
    one_line_error(proc, "ensemble5: no export folder of that name here (export.json), and no "
                         "params.yaml to find it as a system in", status=1)
    params_path, models, vocab = trained_system(tmp_path, record_text=True)
    proc = s2s(["--params", params_path, "translate-text", "--system", "nosuch", "-i", "in.txt"],
               tmp_path)
    said = one_line_error(proc, "no system 'nosuch' under 'systems'", status=1)
    assert f"KeyError: {params_path}: no system" in said  # not the message in quotes
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text("The man .\n.\n"))
    writer.start()
    proc = s2s(["--params", params_path, "translate-text", "--system", "forward", "--models",
                models, "--vocab", vocab, "-i", fifo, "-o", "out.txt"], tmp_path)
    writer.join(timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len((tmp_path / "out.txt").read_text().splitlines()) == 2  # a line for each line


# --- the project lock ---------------------------------------------------------------------------


def one_stage_project(dest: Path) -> Path:
    """A git+DVC project with one stage (it writes out.txt): what DVC's own refusal needs."""
    dest.mkdir(parents=True)
    run(["git", "init", "-q"], dest)
    run([str(BIN / "dvc"), "init", "-q"], dest)
    (dest / ".dvc" / "config").write_text("[core]\n    analytics = false\n")
    (dest / "dvc.yaml").write_text("stages:\n  make:\n    cmd: python -c \"open('out.txt', 'w')"
                                   ".write('made\\\\n' * 100)\"\n    outs:\n      - out.txt\n")
    return dest


def rwlock_of(repo: Path) -> str:
    path = repo / ".dvc" / "tmp" / "rwlock"
    return path.read_text() if path.exists() else ""


ENGINE = textwrap.dedent("""\
    # An engine (as Snakemake's onstart holds the project) that starts one job and waits.
    import subprocess, sys, time
    from s2s import projectlock
    projectlock.hold_for_engine("snakemake --cores 1 (a test engine)")
    job = subprocess.Popen([sys.executable, "-c", sys.argv[1]])  # inherits S2S_PROJECT_WRITER
    print(job.pid, flush=True)
    time.sleep(600)
""")
JOB = textwrap.dedent("""\
    # A job of that run (as `s2s train forward` holds the project: cli.main, for_stage)
    import time
    from pathlib import Path
    from s2s import projectlock
    with projectlock.for_stage("s2s train forward"):
        Path("job-started").write_text("")
        time.sleep(600)
""")


def test_a_job_holds_the_project_after_its_engine_is_killed_with_kill_9(tmp_path):
    """Snakemake's own PID killed (not its group): its job runs on, and so does its hold, so a
    `dvc repro` or another writer started then is refused naming the job, not run beside it."""
    from s2s.projectlock import ProjectLock, ProjectLocked

    repo = one_stage_project(tmp_path / "repo")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("S2S_PROJECT_WRITER", None)
    engine = subprocess.Popen([sys.executable, "-c", ENGINE, JOB], cwd=repo, env=env,
                              stdout=subprocess.PIPE, text=True)
    job_pid = int(engine.stdout.readline())
    try:
        deadline = time.monotonic() + 120
        while not (repo / "job-started").exists():
            assert time.monotonic() < deadline and engine.poll() is None, "the job never started"
            time.sleep(0.1)
        engine.kill()  # SIGKILL to the engine alone: the job is not in its way
        engine.wait(timeout=60)
        os.kill(job_pid, 0)  # the job runs on

        with pytest.raises(ProjectLocked) as e:
            ProjectLock(repo, "a second engine").acquire()
        assert f"is being written by PID {job_pid} (s2s train forward)" in str(e.value)
        proc = run([str(BIN / "dvc"), "repro", "make"], repo, check=False)
        assert proc.returncode != 0 and f"(PID {job_pid}): s2s train forward" in proc.stderr, \
            proc.stderr[-2000:]
        assert not (repo / "out.txt").exists()  # refused before it ran anything
    finally:
        engine.kill()
        os.kill(job_pid, 9)
        for _ in range(100):  # reaped by init
            try:
                os.kill(job_pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
    # the job gone, its entry is a dead PID's: the next writer takes the project
    ProjectLock(repo, "after the job").acquire().release()
    assert "s2s project writer" not in rwlock_of(repo)


def test_a_lock_entry_whose_pid_now_runs_another_process_is_dropped_not_named(tmp_path, caplog):
    """An entry of ours records its process's start time: the same PID with another start time
    is another process (here a `sleep`, which must not be named as the holder); a live holder's
    refusal names the lock file and how to clear it."""
    import logging

    from s2s.io import owner_tag
    from s2s.projectlock import ProjectLock, ProjectLocked

    from s2s.projectlock import describe

    repo = one_stage_project(tmp_path / "repo")
    innocent = subprocess.Popen(["sleep", "600"])
    try:
        deadline = time.monotonic() + 30
        while describe(innocent.pid) != "sleep 600":  # until the child has exec'd `sleep`
            assert time.monotonic() < deadline, describe(innocent.pid)
            time.sleep(0.01)
        host = owner_tag().split("p", 1)[0]
        stale = f"s2s download (s2s project writer 0123456789abcdef {host}p{innocent.pid}s1)"
        rwlock = repo / ".dvc" / "tmp" / "rwlock"
        rwlock.parent.mkdir(parents=True, exist_ok=True)
        rwlock.write_text(json.dumps({"write": {str(repo): {"pid": innocent.pid, "cmd": stale}}}))
        with caplog.at_level(logging.INFO, logger="s2s"):
            held = ProjectLock(repo, "s2s check").acquire()
        assert f"dropped the entry of PID {innocent.pid} (s2s download), which ended; its PID " \
               f"now runs another process (sleep 600)" in caplog.text
        assert stale not in rwlock_of(repo)
        try:
            with pytest.raises(ProjectLocked) as e:
                ProjectLock(repo, "a second writer").acquire()
        finally:
            held.release()
    finally:
        innocent.kill()
        innocent.wait()
    said = str(e.value)
    assert f"is being written by PID {os.getpid()} (s2s check)" in said
    assert said.endswith(f"(its entry is in {rwlock}: if no dvc, snakemake or s2s process runs "
                         f"in {repo}, remove that file)")


def test_an_engine_of_another_host_is_respected_not_taken_for_a_dead_pid(tmp_path):
    """A Snakemake engine on a login node holds the project (a shared filesystem); a writer on a
    compute node cannot check its PID. DVC's own check took that PID for a dead one of this host
    and dropped the entry, and the writer wrote beside the engine: it is refused, naming it."""
    from s2s.projectlock import JobEntry, ProjectLock, ProjectLocked

    repo = one_stage_project(tmp_path / "repo")
    pid = 4_000_000  # above any pid_max: no process of this host has it
    engine = ("snakemake --profile workflow/profiles/slurm (s2s project writer "
              f"00112233aabbccdd h0badc0dep{pid}s12345)")
    rwlock = repo / ".dvc" / "tmp" / "rwlock"
    rwlock.parent.mkdir(parents=True, exist_ok=True)
    before = json.dumps({"write": {str(repo): {"pid": pid, "cmd": engine}}})
    rwlock.write_text(before)
    with pytest.raises(ProjectLocked) as e:
        ProjectLock(repo, "s2s train forward").acquire()
    assert str(e.value) == (
        f"{repo} is being written by PID {pid} (snakemake --profile workflow/profiles/slurm) on "
        f"another host, whose processes this one cannot see: one writer per project; start "
        f"writers on the host its engine runs on, or, if nothing of that run is left there, "
        f"remove {rwlock}")
    assert rwlock.read_text() == before  # the engine's entry stands
    # a job of that engine's run on this host takes nothing: the engine's entry stands for it
    with JobEntry(repo, "00112233aabbccdd", "s2s train forward"):
        held = json.loads(rwlock.read_text())
        assert held["write"] == json.loads(before)["write"] and not held.get("read")


def test_a_lock_file_of_bytes_that_are_not_utf8_is_one_line_naming_it(tmp_path):
    """For a writer, a job of an engine run, a stage run by hand and a Snakemake run alike
    (DVC's own `dvc repro` says "'utf-8' codec can't decode byte 0xff" without the file: its
    message, not ours)."""
    from s2s import projectlock

    need_mirror()
    repo = make_project(tmp_path / "repo")
    shutil.copytree(ROOT / "workflow", repo / "workflow",
                    ignore=shutil.ignore_patterns("__pycache__"))
    rwlock = repo / ".dvc" / "tmp" / "rwlock"
    rwlock.parent.mkdir(parents=True, exist_ok=True)
    rwlock.write_bytes(b'\xff\xfe{"write": {}}')
    want = (f"{rwlock}: not UTF-8 text (invalid start byte at byte 0), so not DVC's lock file: "
            f"remove it when no dvc, snakemake or s2s process runs in {repo}")
    proc = s2s(["check", "--out", "metrics/params.json"], repo)
    one_line_error(proc, f"DamagedLockFile: {want}", status=1)
    proc = s2s(["check", "--out", "metrics/params.json"], repo,  # a job of an engine run
               env={projectlock.WRITER_ENV: "0123456789abcdef"})
    one_line_error(proc, f"DamagedLockFile: {want}", status=1)
    proc = run([str(BIN / "snakemake"), "--cores", "1", "check_params"], repo, check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == f"DamagedLockFile: {want}", proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and 'File "' not in proc.stderr
    with pytest.raises(projectlock.DamagedLockFile) as e:
        projectlock.ProjectLock(repo, "a writer").acquire()
    assert str(e.value) == want
    assert rwlock.read_bytes() == b'\xff\xfe{"write": {}}'  # left for the user, as named


# --- a DVC remote set up as the README says: pulls are verified ----------------------------------


def readme_remote_setup(url: str) -> list[list[str]]:
    """The README's commands that set the team remote up, with `url` for the README's."""
    import shlex

    for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("dvc remote add "):
            commands = [shlex.split(c) for c in line.split("&&")]
            break
    else:
        raise AssertionError("README.md sets no DVC remote up")
    setup = [c for c in commands if c[:2] == ["dvc", "remote"]]
    assert setup and setup[0][:3] == ["dvc", "remote", "add"]
    setup[0][-1] = url
    return setup


def test_a_remote_object_damaged_after_the_push_is_refused_by_the_pull(tmp_path):
    """DVC trusts a remote unless it says `verify true`: the damaged file would be checked out
    and `dvc status` would call it up to date."""
    dvc = str(BIN / "dvc")
    cluster = one_stage_project(tmp_path / "cluster")
    run([dvc, "repro", "-q"], cluster)
    store = tmp_path / "store"
    for cmd in readme_remote_setup(str(store)):
        run([dvc, *cmd[1:]], cluster)
    run(["git", "add", "-A"], cluster)
    run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "run"], cluster)
    run([dvc, "push", "-q"], cluster)
    (obj,) = [p for p in store.rglob("*") if p.is_file()]
    data = bytearray(obj.read_bytes())
    data[0] ^= 0x20  # one flipped bit, the file's size and mode unchanged
    obj.chmod(0o644)
    obj.write_bytes(bytes(data))
    obj.chmod(0o444)  # as DVC leaves its objects: read-only

    laptop = tmp_path / "laptop"
    run(["git", "clone", "-q", str(cluster), str(laptop)], tmp_path)
    proc = run([dvc, "pull"], laptop, check=False)
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "Checkout failed for following targets:\nout.txt" in proc.stderr, proc.stderr
    assert not (laptop / "out.txt").exists()


# --- the headline generator: one line naming the file --------------------------------------------


@pytest.fixture
def published(tmp_path) -> Path:
    """The README, params.yaml and tracked metrics of this repository, copied."""
    root = tmp_path / "root"
    (root / "metrics").mkdir(parents=True)
    for rel in ("README.md", "params.yaml", "metrics/summary.json", "metrics/claims.json"):
        shutil.copy(ROOT / rel, root / rel)
    return root


HEADLINE_FAULTS = {  # what is done to the copy -> the file named, and what the line says
    "params_missing": ("params.yaml", None, "params.yaml: parameter file not found"),
    "params_a_list": ("params.yaml", "- models\n- train\n", "params.yaml: expected a mapping"),
    "summary_missing": ("metrics/summary.json", None, "metrics/summary.json: not found"),
    "summary_cut": ("metrics/summary.json", '{"bleu": {"forward"', "metrics/summary.json:1: not "
                                                                   "valid JSON"),
    "summary_of_another_shape": ("metrics/summary.json", '{"bleu": []}',
                                 "metrics/summary.json: 'bleu' must be"),
    "claims_missing": ("metrics/claims.json", None, "metrics/claims.json: not found"),
    "claims_cut": ("metrics/claims.json", '{"ensemble": "ho', "metrics/claims.json:1: not valid "
                                                            "JSON"),
    "claims_a_list": ("metrics/claims.json", "[]", "metrics/claims.json: expected an object of "
                                                   "claim id -> verdict, got list"),
    "claims_empty": ("metrics/claims.json", "{}", "metrics/claims.json: no claim's verdict"),
    "claims_not_a_verdict": ("metrics/claims.json", '{"ensemble": "maybe"}',
                             "metrics/claims.json: 'ensemble' must be a verdict"),
    "readme_without_markers": ("README.md", "# a README\n", "README.md: expected one "
                                                           "'<!-- headline:start -->' line"),
    "readme_missing": ("README.md", None, "README.md: cannot read it (No such file or "
                                          "directory)"),
}


@pytest.mark.parametrize("fault", HEADLINE_FAULTS)
def test_the_headline_generator_stops_in_one_line_naming_the_file(published, fault, capsys,
                                                                   monkeypatch):
    from s2s.report import headline

    rel, text, says = HEADLINE_FAULTS[fault]
    monkeypatch.chdir(published)  # as `python -m s2s.report.headline` runs, from the root
    assert headline.main(["--check"]) == 0, capsys.readouterr().err  # the copy is current
    if text is None:
        (published / rel).unlink()
    else:
        (published / rel).write_text(text, encoding="utf-8")
    before = {p: p.read_bytes() for p in published.rglob("*") if p.is_file()}
    for check in ([], ["--check"]):
        assert headline.main(check) == 2
        err = capsys.readouterr().err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and says in lines[0], err
    assert {p: p.read_bytes() for p in published.rglob("*") if p.is_file()} == before


def test_every_headline_row_names_what_our_system_is():
    """Issue 47: our Table 1/2 baseline is a small GRU encoder-decoder of ours, not phrase-based
    SMT; every row says what ours is, from params."""
    from s2s.config import load
    from s2s.report import headline

    params = load(ROOT / "params.yaml")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = [ln for ln in readme.split(headline.START)[1].split(headline.END)[0].splitlines()
            if ln.startswith("| Table ") or ln.startswith("| test perplexity")]
    assert len(rows) == 16
    cells = {r.split(" | ")[0][2:]: r.split(" | ")[1] for r in rows}
    base = params.model_config(params.systems[params.rescore.baseline].members[0])
    assert (base.arch, base.num_layers, base.hidden_size) == ("cho", 1, 128)
    width = params.systems[params.rescore.baseline].widest_beam
    assert cells["Table 1: Baseline SMT (Schwenk)"] == \
        f"not SMT: Cho et al.'s encoder-decoder (GRU), 1 x 128, beam {width}"
    assert cells["Table 2: Baseline System"].startswith(
        f"not SMT: Cho et al.'s encoder-decoder (GRU), 1 x 128, beam {width}: the first entry")
    assert cells["Table 1: Single reversed LSTM, beam size 12"] == \
        "reversed LSTM, 2 x 384, beam 12"
    assert cells["Table 1: Ensemble of 5 reversed LSTMs, beam size 2"] == \
        "ensemble of 5 reversed LSTMs, 2 x 384, beam 2"
    assert cells["Table 2: Rescoring the baseline 1000-best with a single forward LSTM"] == \
        "forward LSTM, 2 x 384, rescoring the baseline's 100-best lists"
    assert all(c and c != "-" for c in cells.values()), cells


def test_an_error_of_the_code_inside_a_lock_edit_is_its_own_not_a_damaged_lock_file(tmp_path):
    """Only what DVC's reader and writer of the lock file raise is the file's damage: an error
    of the code that edits the entries goes out as it is."""
    from s2s import projectlock

    repo = one_stage_project(tmp_path / "repo")
    with pytest.raises(UnicodeDecodeError, match="the caller's"):
        with projectlock._editing(repo, False):
            raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "the caller's")
    with pytest.raises(KeyError):
        with projectlock._editing(repo, False) as lock:
            lock["no such key"]
    # the file itself damaged: one line naming it
    (repo / ".dvc" / "tmp" / "rwlock").write_bytes(b"\xff\xfe not json")
    with pytest.raises(projectlock.DamagedLockFile, match=r"rwlock"):
        with projectlock._editing(repo, False):
            pass


def test_a_model_params_names_that_dvc_yaml_lacks_stops_the_check_naming_dag_write(tmp_path):
    """`dvc exp run -S models.reversed_6=...` edits params.yaml but not dvc.yaml: the experiment
    would run the old stages and list reversed_6 as not run. The check stage stops it first."""
    need_mirror()
    repo = make_project(tmp_path / "repo")
    params = profile_dict("smoke")
    params["models"]["reversed_6"] = {"reverse_source": True, "init_seed": 16, "order_seed": 116}
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    dvc = {"DVC_STAGE": "dvc.yaml:check-params"}  # what DVC sets for a stage's command
    proc = s2s(["check", "--out", "metrics/params.json"], repo, env=dvc)
    one_line_error(proc, "ConfigError: ", "dvc.yaml is not what ", "params.yaml generates (a "
                   "model, system or rescorer added or removed): run `s2s dag write` first",
                   status=1)
    assert not (repo / "metrics" / "params.json").exists()
    # Snakemake makes its rules from params.yaml: its check job needs no dvc.yaml
    assert s2s(["check", "--out", "metrics/params.json"], repo).returncode == 0
    (repo / "metrics" / "params.json").unlink()
    run([str(BIN / "s2s"), "dag", "write"], repo)
    assert s2s(["check", "--out", "metrics/params.json"], repo, env=dvc).returncode == 0


def test_timing_an_empty_test_set_is_one_line_naming_the_file(tmp_path):
    """It divided by the number of sentences: a ZeroDivisionError traceback."""
    from s2s.config import load

    params_file = tmp_path / "params.yaml"
    params_file.write_text(yaml.safe_dump(profile_dict("smoke"), sort_keys=False))
    _, vocab = untrained_forward(load(params_file), tmp_path, words=("a", "b"), record_text=True)
    prepared = tmp_path / "prepared"
    prepared.mkdir()
    (prepared / "test.tok.en").write_text("")
    out = tmp_path / "cost.json"
    proc = s2s(["--params", params_file, "timing", "--prepared", prepared, "--vocab", vocab,
                "--models", tmp_path / "models", "--out", out], tmp_path)
    one_line_error(proc, f"{prepared / 'test.tok.en'}: no test sentence to time (an empty file)",
                   status=1)
    assert not out.exists()
