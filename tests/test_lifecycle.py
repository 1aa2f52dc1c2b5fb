"""Stopping the pipeline stops its work (issue 14, class 4): one trainer per checkpoint folder,
SIGTERM writes a final resumable checkpoint and exits 143 with one line, and a trainer does not
outlive the `dvc repro` that started it."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from conftest import BIN, make_project, run
from s2s import checkpoint, config, runguard
from s2s.layout import TrainPaths
from s2s.stages import train as train_stage
from helpers import start, tiny_params_dict, write_params


@pytest.fixture(scope="module")
def long_params(smoke_data, tmp_path_factory) -> tuple[Path, Path]:
    """The tiny 1x16 model for 20 epochs (~2,000 steps, many seconds), no periodic checkpoint:
    only a stop writes one. (params file, data dir)"""
    tmp, _ = smoke_data
    raw = tiny_params_dict()
    raw["train"].update(epochs=20.0, checkpoint_every=100000, eval_every=5.0)
    path = write_params(tmp_path_factory.mktemp("lifecycle") / "params.yaml", raw)
    return path, tmp


def train_args(data: Path, out: Path) -> list[str]:
    return ["train", "forward", "--ids", str(data / "ids"), "--vocab",
            str(data / "vocab"), "--model-dir", str(out / "models" / "forward"), "--ckpt-dir",
            str(out / "checkpoints" / "forward"), "--metrics", str(out / "m.json"),
            "--curves", str(out / "c.csv")]


def wait_for(text: str, log: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_text(errors="replace"):
        assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
        assert time.monotonic() < deadline, log.read_text(errors="replace")[-3000:]
        time.sleep(0.05)


def test_a_second_trainer_on_one_checkpoint_folder_is_refused_naming_the_holder(
        long_params, tmp_path):
    params, data = long_params
    with runguard.FolderLock(tmp_path / "checkpoints" / "forward"):
        proc = run([str(BIN / "s2s"), "--params", str(params), *train_args(data, tmp_path)],
                   tmp_path, check=False, timeout=120)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert f"another trainer (PID {os.getpid()}) is writing {tmp_path / 'checkpoints' / 'forward'}" \
        in last, proc.stderr
    assert not (tmp_path / "models").exists()
    assert not (tmp_path / "checkpoints" / "forward" / "last.pt").exists()


def test_a_lock_left_by_a_dead_trainer_is_taken_over_with_a_log_line(smoke_data, tmp_path,
                                                                     caplog):
    tmp, _ = smoke_data
    params = config.load(write_params(tmp_path / "params.yaml", tiny_params_dict()))
    dead = subprocess.Popen(["true"])
    dead.wait()
    ckpt = tmp_path / "checkpoints" / "forward"
    ckpt.mkdir(parents=True)
    (ckpt / runguard.LOCK_NAME).write_text(f"{dead.pid}\n")
    with caplog.at_level(logging.INFO, logger="s2s.train"):
        train_stage.main(params, "forward", TrainPaths(
            ids=tmp / "ids", vocab=tmp / "vocab", model_dir=tmp_path / "models" / "forward",
            ckpt_dir=ckpt, metrics=tmp_path / "m.json", curves=tmp_path / "c.csv"))
    assert f"took over the lock left by PID {dead.pid}" in caplog.text
    assert (tmp_path / "models" / "forward" / "model.pt").exists()
    with runguard.FolderLock(ckpt):  # released at the end of the run
        pass


def test_sigterm_writes_a_final_checkpoint_and_exits_with_one_line(long_params, tmp_path):
    params, data = long_params
    log = tmp_path / "train.log"
    proc = start([str(BIN / "s2s"), "--params", str(params), *train_args(data, tmp_path)],
                 tmp_path, log)
    wait_for(" parameters (the paper's", log, proc)
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    text = log.read_text(errors="replace")
    assert "Traceback" not in text, text[-3000:]
    last_line = text.strip().splitlines()[-1]
    payload = checkpoint.load_payload(tmp_path / "checkpoints" / "forward" / "last.pt")
    step = payload["step"]
    assert step > 0
    assert f"forward: stopped by SIGTERM at step {step} of 1920; " in last_line, text[-2000:]
    assert "rerun to resume" in last_line
    assert not (tmp_path / "models" / "forward" / "model.pt").exists()


def trainers_in(folder: Path) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline", "cwd"]):
        try:
            argv = p.info["cmdline"] or []  # the s2s script itself, not a shell running it
            if "train" in argv and any(Path(a).name == "s2s" for a in argv) \
                    and p.info["cwd"] == str(folder):
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return found


@pytest.mark.slow
def test_a_signal_while_the_outputs_are_written_still_stops_the_run(smoke_data, tmp_path,
                                                                    monkeypatch):
    """A SIGTERM that comes after the last check for one, as test perplexity and the outputs are
    made, is not swallowed (the run used to end with status 0): the outputs are complete, and the
    run then stops as a signal stops it anywhere else (Stopped, status 143, one line)."""
    import dataclasses
    import json

    from s2s import train

    tmp, params = smoke_data
    params = dataclasses.replace(params, train=dataclasses.replace(
        params.train, epochs=0.125, eval_every=0.0625, threads=1))
    write = train.Run.write_outputs

    def signalled(self, state, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        return write(self, state, **kwargs)

    monkeypatch.setattr(train.Run, "write_outputs", signalled)
    paths = TrainPaths(ids=tmp / "ids", vocab=tmp / "vocab", model_dir=tmp_path / "model",
                       ckpt_dir=tmp_path / "ckpt", metrics=tmp_path / "metrics.json",
                       curves=tmp_path / "curves.csv")
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(runguard.Stopped, match="reversed_1: stopped by SIGTERM as its outputs "
                                               "were written; they are complete") as err:
        train_stage.main(params, "reversed_1", paths)
    assert err.value.exit_status == 128 + signal.SIGTERM
    assert json.loads(paths.metrics.read_text())["steps"] == 12
    assert (paths.model_dir / "model.pt").is_file() and paths.curves.is_file()
    assert signal.getsignal(signal.SIGTERM) is before  # the handler before the run is back


def test_sigterm_to_dvc_repro_stops_its_trainer_with_a_final_checkpoint(long_params, tmp_path):
    params, data = long_params
    proj = make_project(tmp_path / "proj")
    shutil.copy(params, proj / "params.yaml")
    shutil.copytree(data / "prepared", proj / "data" / "prepared")
    shutil.copytree(data / "vocab", proj / "data" / "vocab")
    shutil.copytree(data / "ids", proj / "data" / "ids")
    run([str(BIN / "dvc"), "repro", "-s", "check-params"], proj)
    log = tmp_path / "repro.log"
    proc = start([str(BIN / "dvc"), "repro", "-s", "train-forward"], proj, log)
    try:
        wait_for(" parameters (the paper's", log, proc)
        assert trainers_in(proj), "no trainer seen"
        time.sleep(1.0)
        os.kill(proc.pid, signal.SIGTERM)  # the dvc process only, as `kill <pid>` would
        proc.wait(timeout=60)
        deadline = time.monotonic() + 30
        while trainers_in(proj) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = trainers_in(proj)
        assert not left, f"trainers outlived dvc: {[p.pid for p in left]}"
    finally:
        for p in trainers_in(proj):
            p.kill()
    text = log.read_text(errors="replace")
    assert "forward: stopped by SIGTERM at step " in text, text[-3000:]
    assert checkpoint.load_payload(proj / "checkpoints" / "forward" / "last.pt")["step"] > 0
    lock = proj / "dvc.lock"
    assert not lock.exists() or "train-forward" not in (yaml.safe_load(lock.read_text()) or {}) \
        .get("stages", {})
    with runguard.FolderLock(proj / "checkpoints" / "forward"):  # nobody holds it
        pass


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="tie_to_pipeline: Linux only")
@pytest.mark.parametrize("chain", [
    {"parent": "tini"},  # DVC ran the trainer itself, and a container's init adopted it
    {"parent": "bash", "grandparent": "systemd"},  # behind DVC's shell, adopted by systemd
])
def test_a_pipeline_gone_before_the_trainer_looked_stops_it(monkeypatch, caplog, chain):
    """DVC killed while its trainer still imported torch: the trainer's parent (or its shell's)
    is already the process that adopted it, so neither the parent-death signal nor the watcher
    would ever fire. The reaper's name tells it: the trainer stops at once, with a log line. A
    reaper-named wrapper inside the stage (``dumb-init s2s train``: DVC_STAGE in its
    environment), or DVC alive where the reaper would be, is watched instead."""
    parent, grandparent = os.getppid(), 4242
    names = {parent: chain["parent"], grandparent: chain.get("grandparent", "")}
    watched = grandparent if "grandparent" in chain else parent
    environs = {watched: {"PATH"}}
    kills, watchers = [], []
    monkeypatch.setenv("DVC_STAGE", "train@forward")
    monkeypatch.setattr(runguard.ctypes, "CDLL", lambda *a, **kw: ParentDeathStub())
    monkeypatch.setattr(runguard, "_comm", lambda pid: names.get(pid, ""))
    monkeypatch.setattr(runguard, "_ppid_of", lambda pid: grandparent)
    monkeypatch.setattr(runguard, "_environ", lambda pid: environs.get(pid, set()))
    monkeypatch.setattr(runguard.os, "kill", lambda pid, sig: kills.append((pid, sig)))
    monkeypatch.setattr(runguard.threading, "Thread",
                        lambda **kw: type("Watcher", (), {"start": lambda _: watchers.append(kw)})())
    with caplog.at_level(logging.WARNING, logger="s2s"):
        assert runguard.tie_to_pipeline() is True
    assert kills == [(os.getpid(), signal.SIGTERM)] and watchers == []
    reaper = chain.get("grandparent") or chain["parent"]
    assert f"the pipeline process is gone (PID {watched} is {reaper}): stopping" in caplog.text
    environs[watched] = {"PATH", "DVC_STAGE"}  # a wrapper in the stage, named like a reaper
    assert runguard.tie_to_pipeline() is True
    names[watched], environs[watched] = "dvc", {"PATH"}  # DVC itself, alive
    assert runguard.tie_to_pipeline() is True
    assert kills == [(os.getpid(), signal.SIGTERM)]
    assert [kw["name"] for kw in watchers] == ["s2s-pipeline-watch"] * 2


class ParentDeathStub:
    """libc without its prctl: the test process keeps no parent-death signal."""

    def prctl(self, *args):
        return 0


def test_a_trainer_behind_a_shell_stops_when_the_pipeline_process_dies(long_params, tmp_path):
    """DVC runs `$SHELL -c cmd`; a shell that does not exec its last command stays between DVC
    and the trainer, and outlives DVC: the trainer watches DVC through it."""
    params, data = long_params
    cmd = " ".join([str(BIN / "s2s"), "--params", str(params), *train_args(data, tmp_path)])
    fake_dvc = ("import os, subprocess, sys; "
                f"subprocess.run(['/bin/sh', '-c', {cmd + '; echo shell-still-here'!r}]); "
                "sys.exit(0)")
    log = tmp_path / "train.log"
    proc = start([str(BIN / "python"), "-c", fake_dvc], tmp_path, log, env={"DVC_STAGE": "x"})
    wait_for(" parameters (the paper's", log, proc)
    trainers = trainers_in(tmp_path)
    assert trainers and trainers[0].parent().name() == "sh", [p.parent() for p in trainers]
    time.sleep(0.5)
    os.kill(proc.pid, signal.SIGKILL)  # the pipeline process dies; the shell lives on
    proc.wait(timeout=30)
    deadline = time.monotonic() + 30
    while trainers_in(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = trainers_in(tmp_path)
    for p in left:
        p.kill()
    assert not left, "the trainer outlived the pipeline process"
    text = log.read_text(errors="replace")
    assert "is gone: stopping" in text and "forward: stopped by SIGTERM at step " in text, \
        text[-3000:]
