"""bench/gpu_check.sh and bench/gpu_twin.py's comparison, on the CPU: the check stops in one line
where .device/ was not carried, its parts share one deadline and the log keeps its last line,
and the CUDA run's loss curve fails beyond its margin from the CPU twin's."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def fake_python(tmp_path: Path) -> Path:
    """A python3 that says CUDA is there and runs nothing else: each part it is asked to run
    succeeds at once, saying what it was asked."""
    py = tmp_path / "python3"
    py.write_text("#!/bin/sh\n"
                  'case "$*" in\n'
                  '  *"cuda.is_available()"*) sleep "${FAKE_PROBE_SECONDS:-0}"; exit 0;;\n'
                  '  *"${FAKE_FAIL:-no such part}"*) echo "failed: $*"; exit 7;;\n'
                  '  *"${FAKE_HANG:-no such part}"*) exec sleep 600;;\n'
                  "esac\n"
                  'echo "ran: $*"\n')
    py.chmod(0o755)
    return py


def check(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "bench/gpu_check.sh"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120,
                          env={**os.environ, "PYTHON": str(fake_python(tmp_path)),
                               "OUT": str(tmp_path / "out"), **env})


def device_folder(tmp_path: Path) -> Path:
    """A .device/ as bench/gpu_pack.sh leaves it, as far as the check looks: the mirror's README
    and a wheel."""
    device = tmp_path / "device"
    (device / "mirror").mkdir(parents=True)
    (device / "mirror" / "README.md").write_text("mirror\n")
    (device / "wheels").mkdir()
    (device / "wheels" / "x-1-py3-none-any.whl").write_text("")
    return device


def test_the_check_without_its_device_folder_stops_in_one_line(tmp_path):
    proc = check(tmp_path, S2S_DEVICE_DIR=str(tmp_path / "no-device"))
    assert proc.returncode == 3
    assert proc.stderr.count("\n") == 1 and proc.stdout == ""
    assert proc.stderr.startswith(f"bench/gpu_check.sh: {tmp_path / 'no-device'} holds no "
                                  "mirror/README.md and wheels/*.whl: run S2S_MIRROR=")


def test_the_checks_parts_share_one_deadline_and_the_log_keeps_its_last_line(tmp_path):
    device = device_folder(tmp_path)
    proc = check(tmp_path, S2S_DEVICE_DIR=str(device), GPU_CHECK_BUDGET="0")
    # no time for any part: each one skipped, and counted as cut by the deadline (exit 4), not
    # as failed (exit 1)
    assert proc.returncode == 4, proc.stdout[-2000:]
    log = (tmp_path / "out" / "check.log").read_text()
    assert len(re.findall(r": SKIPPED \(-?\d+s left of 0s\)", log)) == 4
    assert re.fullmatch(r"=== done in \d+s of 0s, 0 part\(s\) failed, 4 cut by the deadline",
                        log.rstrip().splitlines()[-1])
    assert proc.stdout == log  # everything printed is in the log, the last line too
    proc = check(tmp_path, S2S_DEVICE_DIR=str(device), GPU_CHECK_BUDGET="30")
    log = (tmp_path / "out" / "check.log").read_text()
    assert proc.returncode == 0, log
    # each part gets what is left of the deadline, not its own limit (170 s, 40 s, ...), in the
    # order of their value: the benchmark first, the smoke DAG last
    limits = re.findall(r"^=== (.+?) \(limit (\d+)s, at \d+s\)$", log, flags=re.M)
    assert [name for name, _ in limits] == [
        "bench/gpu.py, paper size", "default profile data", "pytest -m cuda",
        "reversed_1 on CUDA, 150 steps", "CUDA against CPU, loss per step", "smoke DAG on CUDA"]
    assert all(int(limit) <= 30 for _, limit in limits) and int(limits[4][1]) == 20
    assert "ran: bench/gpu_twin.py compare" in log and "--margin 0.03" in log


def test_the_deadline_counts_from_the_scripts_start_its_probes_included(tmp_path):
    """The budget is the whole run's (a device session's time is counted from the start), not
    the parts' alone: a CUDA probe that takes 4 s leaves the first part at most budget - 4 s."""
    device = device_folder(tmp_path)
    proc = check(tmp_path, S2S_DEVICE_DIR=str(device), GPU_CHECK_BUDGET="20",
                 FAKE_PROBE_SECONDS="4")
    log = (tmp_path / "out" / "check.log").read_text()
    assert proc.returncode == 0, log
    limit, at = re.search(r"^=== bench/gpu.py, paper size \(limit (\d+)s, at (\d+)s\)$", log,
                          flags=re.M).groups()
    assert int(at) >= 4 and int(limit) <= 16, log
    done = int(re.search(r"^=== done in (\d+)s of 20s", log, flags=re.M)[1])
    assert done >= 4


def test_a_failed_part_fails_the_check_and_one_cut_by_its_limit_is_told_apart(tmp_path):
    device = device_folder(tmp_path)
    # the smoke DAG hangs past what is left of a 12 s deadline: cut, not failed
    proc = check(tmp_path, S2S_DEVICE_DIR=str(device), GPU_CHECK_BUDGET="12",
                 FAKE_HANG="--profile smoke")
    log = (tmp_path / "out" / "check.log").read_text()
    assert proc.returncode == 4, log
    assert re.search(r"^=== smoke DAG on CUDA: CUT by its limit of \d+s$", log, flags=re.M)
    assert log.rstrip().endswith(", 0 part(s) failed, 1 cut by the deadline")
    # a part that fails (pytest -m cuda, exit 7) fails the check, whatever else was cut
    proc = check(tmp_path, S2S_DEVICE_DIR=str(device), GPU_CHECK_BUDGET="12",
                 FAKE_FAIL="-m pytest -m cuda", FAKE_HANG="--profile smoke")
    log = (tmp_path / "out" / "check.log").read_text()
    assert proc.returncode == 1, log
    assert re.search(r"^=== pytest -m cuda: FAILED \(exit 7\) in \d+s$", log, flags=re.M)
    assert log.rstrip().endswith(", 1 part(s) failed, 1 cut by the deadline")


def twin_csv(path: Path, losses: list[float], engine: str) -> Path:
    rows = ["step,loss,device,precision,engine"]
    rows += [f"{i + 1},{loss:.6f},cpu,fp32,{engine}" for i, loss in enumerate(losses)]
    path.write_text("\n".join(rows) + "\n")
    return path


def test_the_twins_comparison_fails_beyond_its_margin_and_names_the_engines(tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    import gpu_twin

    cpu = twin_csv(tmp_path / "cpu.csv", [5.0] * 100, "cpu: fp32 products, fp32 recurrent, "
                   "fp32 state")
    near = twin_csv(tmp_path / "near.csv", [5.1] * 100, "cuda: bf16 products, tf32 recurrent, "
                    "fp32 state")
    far = twin_csv(tmp_path / "far.csv", [5.0] * 50 + [5.3] * 50, "cuda: bf16 products, tf32 "
                   "recurrent, fp32 state")
    assert gpu_twin.compare(cpu, near, 0.03) == 0  # +2%
    assert gpu_twin.compare(cpu, far, 0.03) == 1  # +6% over the last 50 steps
    assert gpu_twin.compare(cpu, far, 0.07) == 0
