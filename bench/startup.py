"""Start-up cost of every stage: seconds from starting its command to its first log line (the
first line of its own work), what its whole process imports and what that costs, and the cost of
DVC around it (`dvc status`, a no-op `dvc repro`, and the first stage forced through `dvc repro
-s -f`: DVC's cost per stage is that minus the stage's own, most of it reading and rewriting
dvc.lock, which grows with the stages and their dependencies).

Run inside a finished run (a project whose `dvc repro` has completed, e.g. a smoke run made by
tests/conftest.py's make_project), from any directory:

    .venv/bin/python bench/startup.py --run /work/smoke [--repeat 3] [--stages check-params,summary]

Each stage's command is the one dvc.yaml gives it, run in a copy of the run. "to first line":
the stage's work is stopped with SIGTERM as soon as its first line appears (the median over
``--repeat`` starts; one stage of each kind, ``--all``: every stage), with whether the process had
loaded libtorch by then (read from ``/proc/<pid>/maps``). "imports": the stage run once more to
its end under ``python -X importtime`` (in the copy, so nothing of the run changes): the seconds
its process spent importing, in all and in the heavy libraries (torch, torch._dynamo, which
torch.optim's first optimizer imports, pandas, matplotlib, sacremoses, sacrebleu), whatever the
stage imports lazily after its first line included. The CPU kind and the load average are printed
with it: on a machine shared with other jobs every number moves with their load.
"""

from __future__ import annotations

import argparse
import os
import re
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
    # A stage stopped while it holds the project lock can leave DVC's lock file half-written;
    # this copy is the benchmark's own and nothing else runs in it, so start the next one clean.
    (cwd / ".dvc" / "tmp" / "rwlock").unlink(missing_ok=True)
    if not line:
        raise RuntimeError(f"{' '.join(cmd)} wrote nothing to stderr")
    return seconds, torch_loaded


# What a stage's imports cost, by library (the first, outermost import of each).
HEAVY = ("torch", "torch._dynamo", "pandas", "matplotlib", "sacremoses", "sacrebleu")


def imports(cmd: list[str], cwd: Path) -> tuple[float, dict[str, float]]:
    """Seconds the command's process spent importing (the top-level imports of
    ``-X importtime``), in all and by :data:`HEAVY` library, running to its end."""
    proc = subprocess.run([sys.executable, "-X", "importtime", *cmd], cwd=cwd,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        tail = [ln for ln in proc.stderr.splitlines() if not ln.startswith("import time:")]
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {' '.join(tail[-2:])}")
    total, heavy = 0, {}
    for line in proc.stderr.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \|( *)(\S+)$", line)
        if m is None:
            continue
        micro, depth, module = int(m[1]), len(m[2]), m[3]
        if depth == 1:  # a top-level import: its cumulative time holds the nested ones
            total += micro
        if module in HEAVY and module not in heavy:
            heavy[module] = micro / 1e6
    return total / 1e6, heavy


def timed(cmd: list[str], cwd: Path) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): "
                           f"{proc.stderr.strip().splitlines()[-1:]}")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, required=True, help="a finished run (dvc repro done)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--all", action="store_true", help="every stage, not one of each kind")
    ap.add_argument("--stages", help="comma list of the stages to measure (default: one of each "
                                     "kind)")
    ap.add_argument("--no-dvc", action="store_true", help="skip the DVC rows")
    args = ap.parse_args()
    chosen = None if args.stages is None else args.stages.split(",")
    bindir = Path(sys.executable).parent
    # DVC runs each stage's `s2s ...` through the shell: this interpreter's s2s, not another
    os.environ["PATH"] = f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"
    stages = yaml.safe_load((args.run / "dvc.yaml").read_text())["stages"]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "run"
        shutil.copytree(args.run, work, symlinks=True)
        print(f"# CPU: {cpu_kind()}; load average at start: "
              f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print("| stage | command | to first line, s (median) | torch loaded | imports, s | "
              + " | ".join(HEAVY) + " |")
        print("|---|---|---|---|---|" + "---|" * len(HEAVY))
        seen = set()
        unknown = sorted(set(chosen or ()) - set(stages))
        if unknown:
            raise SystemExit(f"--stages: no stage {unknown[0]} in {args.run}/dvc.yaml")
        for name, body in stages.items():
            words = shlex.split(body["cmd"])
            kind = words[1]
            if chosen is not None and name not in chosen:
                continue
            if chosen is None and kind in seen and not args.all:
                continue  # one of each kind
            seen.add(kind)
            cmd = [str(bindir / words[0]), *words[1:]]
            runs = [first_line(cmd, work) for _ in range(args.repeat)]
            total, heavy = imports(cmd, work)
            print(f"| {name} | `s2s {kind}` | {statistics.median(s for s, _ in runs):.2f} | "
                  f"{'yes' if any(t for _, t in runs) else 'no'} | {total:.2f} | "
                  + " | ".join(f"{heavy[h]:.2f}" if h in heavy else "-" for h in HEAVY) + " |")
        dash = " | -" * (1 + len(HEAVY))
        for tool in (["--help"], ["dag", "check"], ["profile"]):
            times = [timed([str(bindir / "s2s"), *tool], work) for _ in range(args.repeat)]
            print(f"| (tool) | `s2s {' '.join(tool)}` | {statistics.median(times):.2f} | -{dash} |")
        if args.no_dvc:
            return
        # A fresh copy: a stage stopped above may have begun replacing its outputs, which a
        # no-op `dvc repro` would then rerun. One cheap stage forced through DVC: DVC's own
        # cost per stage is that minus the stage's.
        work = Path(tmp) / "run-dvc"
        shutil.copytree(args.run, work, symlinks=True)
        first = next(iter(stages))
        for cmd in (["dvc", "status"], ["dvc", "repro"], ["dvc", "repro", "-s", "-f", first]):
            times = [timed([str(bindir / cmd[0]), *cmd[1:]], work) for _ in range(args.repeat)]
            print(f"| (DVC) | `{' '.join(cmd)}` | {statistics.median(times):.2f} | -{dash} |")


if __name__ == "__main__":
    main()
