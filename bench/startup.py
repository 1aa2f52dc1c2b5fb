"""Start-up cost of every stage: seconds from starting its command to its first log line (the
first line of its own work), and the cost of DVC around it (`dvc status`, a no-op `dvc repro`).

Run inside a finished run (a project whose `dvc repro` has completed, e.g. a smoke run made by
tests/conftest.py's make_project), from any directory:

    .venv/bin/python bench/startup.py --run /work/smoke [--repeat 3]

Each stage's command is the one dvc.yaml gives it, run in a copy of the run (the stage's work is
stopped with SIGTERM as soon as its first line appears, so nothing of the run is touched); the
table gives the median over ``--repeat`` starts (one stage of each kind; ``--all``: every stage) and whether the process imported torch by then
(read from ``/proc/<pid>/maps``, which lists libtorch once it is loaded). The CPU kind and the
load average are printed with it.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from common import cpu_kind  # noqa: E402  (bench/common.py)


def first_line(cmd: list[str], cwd: Path) -> tuple[float, bool]:
    """Seconds until the command writes its first line to stderr, and whether it had loaded
    libtorch by then; the process is stopped right after."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            env=env, start_new_session=True)
    assert proc.stderr is not None
    line = proc.stderr.readline()
    seconds = time.perf_counter() - t0
    try:
        maps = Path(f"/proc/{proc.pid}/maps").read_text()
    except OSError:
        maps = ""
    torch_loaded = "libtorch" in maps
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    proc.wait()
    if not line:
        raise RuntimeError(f"{' '.join(cmd)} wrote nothing to stderr")
    return seconds, torch_loaded


def timed(cmd: list[str], cwd: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, required=True, help="a finished run (dvc repro done)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--all", action="store_true", help="every stage, not one of each kind")
    args = ap.parse_args()
    bindir = Path(sys.executable).parent
    stages = yaml.safe_load((args.run / "dvc.yaml").read_text())["stages"]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "run"
        shutil.copytree(args.run, work, symlinks=True)
        print(f"# CPU: {cpu_kind()}; load average at start: "
              f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print("| stage | command | to first line, s (median) | torch loaded |")
        print("|---|---|---|---|")
        seen = set()
        for name, body in stages.items():
            words = shlex.split(body["cmd"])
            kind = words[1]
            if kind in seen and not args.all:
                continue  # one of each kind
            seen.add(kind)
            cmd = [str(bindir / words[0]), *words[1:]]
            runs = [first_line(cmd, work) for _ in range(args.repeat)]
            print(f"| {name} | `s2s {kind}` | {statistics.median(s for s, _ in runs):.2f} | "
                  f"{'yes' if any(t for _, t in runs) else 'no'} |")
        for tool in (["--help"], ["dag", "check"], ["profile"]):
            times = [timed([str(bindir / "s2s"), *tool], work) for _ in range(args.repeat)]
            print(f"| (tool) | `s2s {' '.join(tool)}` | {statistics.median(times):.2f} | - |")
        for cmd in (["dvc", "status"], ["dvc", "repro"]):
            times = [timed([str(bindir / cmd[0]), *cmd[1:]], work) for _ in range(args.repeat)]
            print(f"| (no-op) | `{' '.join(cmd)}` | {statistics.median(times):.2f} | - |")


if __name__ == "__main__":
    main()
