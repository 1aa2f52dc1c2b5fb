"""A profile's whole DAG on a CUDA GPU, without DVC or Snakemake: every stage's own command, run as
soon as the stages it reads from have finished, several at a time. For the GPU check
(bench/gpu_check.sh) on a machine that has torch but not the pipeline's engines.

The project is a fresh folder holding this checkout's ``src/`` and ``profiles/`` and the profile as
``params.yaml``, with `train.device` and `translate.device` set to ``--device``. Each stage runs as
``python -m s2s.cli <its arguments>`` (never through a shell), its output in ``logs/<stage>.log``.
Prints one line per stage (seconds, status) and the run's metrics/summary.json; exit status 1 if a
stage failed (the stages that read from it are skipped).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from s2s import dag, pipeline  # noqa: E402
from s2s.config import load, resolved  # noqa: E402


def make_project(dest: Path, profile: str, device: str) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copytree(ROOT / "src", dest / "src", ignore=shutil.ignore_patterns("__pycache__"),
                    dirs_exist_ok=True)
    shutil.copytree(ROOT / "profiles", dest / "profiles", dirs_exist_ok=True)
    raw = resolved(ROOT / "profiles" / f"{profile}.yaml")
    raw.setdefault("train", {})["device"] = device
    raw.setdefault("translate", {})["device"] = device
    (dest / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return dest


def needs(stages: list[dag.Stage]) -> dict[str, set[str]]:
    """For each stage, the stages whose outputs it reads."""
    owner = {o.path: s.name for s in stages for o in s.outs if not o.persist}
    return {s.name: {owner[p] for p in dag.inputs(s, stages) if p in owner} - {s.name}
            for s in stages}


def run_stage(stage: dag.Stage, project: Path) -> tuple[str, int, float]:
    argv = shlex.split(stage.cmd)
    if argv[0] != "s2s":
        raise ValueError(f"stage {stage.name}: not an s2s command: {stage.cmd}")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(project / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])}
    (project / "logs").mkdir(exist_ok=True)
    t0 = time.perf_counter()
    with open(project / "logs" / f"{stage.name}.log", "w", encoding="utf-8") as log:
        rc = subprocess.call([sys.executable, "-m", "s2s.cli", *argv[1:]], cwd=project, env=env,
                             stdout=log, stderr=subprocess.STDOUT)
    return stage.name, rc, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("project", type=Path, help="a new folder for the run")
    ap.add_argument("--profile", default="smoke")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--jobs", type=int, default=8, help="stages at once")
    ap.add_argument("--only", help="stop after these stages (comma list) and what they need")
    args = ap.parse_args(argv)
    project = make_project(args.project.resolve(), args.profile, args.device)
    stages = pipeline.generate(load(project / "params.yaml"))
    deps = needs(stages)
    if args.only:
        wanted, todo = set(), [n for n in args.only.split(",") if n]
        while todo:
            name = todo.pop()
            if name not in deps:
                ap.error(f"--only: no stage {name!r}")
            if name not in wanted:
                wanted.add(name)
                todo += deps[name]
        stages = [s for s in stages if s.name in wanted]
    by_name = {s.name: s for s in stages}
    done: set[str] = set()
    failed: set[str] = set()
    running: dict[concurrent.futures.Future, str] = {}
    t0 = time.perf_counter()
    print(f"{len(stages)} stages of profile {args.profile} on {args.device}, {args.jobs} at once, "
          f"in {project}", flush=True)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        pending = [s.name for s in stages]
        while pending or running:
            for name in list(pending):
                if deps[name] & failed:
                    pending.remove(name)
                    failed.add(name)
                    print(f"  {name}: skipped (an input failed)", flush=True)
                elif deps[name] <= done and len(running) < args.jobs:
                    pending.remove(name)
                    running[pool.submit(run_stage, by_name[name], project)] = name
            if not running:
                break
            finished, _ = concurrent.futures.wait(running, return_when="FIRST_COMPLETED")
            for future in finished:
                name, rc, seconds = future.result()
                del running[future]
                (done if rc == 0 else failed).add(name)
                status = "ok" if rc == 0 else f"FAILED (exit {rc}; logs/{name}.log)"
                print(f"  {name}: {seconds:.1f}s {status}", flush=True)
                if rc:
                    tail = (project / "logs" / f"{name}.log").read_text(errors="replace")
                    print("    " + "\n    ".join(tail.strip().splitlines()[-5:]), flush=True)
    print(f"{len(done)} stages ok, {len(failed)} failed or skipped, "
          f"{time.perf_counter() - t0:.0f}s", flush=True)
    summary = project / "metrics" / "summary.json"
    if summary.exists():
        print(json.dumps(json.loads(summary.read_text()), indent=1)[:4000])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
