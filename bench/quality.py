"""Quality of `amp: auto` (bf16 products where the CPU has a bf16 engine) against fp32: full
trainings of the default profile's 2 x 384 LSTMs, paired on their seeds.

    python bench/quality.py --data DEFRUN/data --out /tmp/quality            # 2 seeds x 2 x 2
    python bench/quality.py --data DEFRUN/data --out /tmp/quality --jobs 1   # one at a time
    python bench/quality.py --out /tmp/quality --collect                     # the table only

Each run is `s2s train` of one model in a params file written to OUT from the project's
params.yaml (the default profile: its data, vocabulary, model, the paper's 7.5-epoch schedule),
with one model per side x seed x precision: `q_<rev|fwd>_<fp32|auto>_s<seed>`, reverse_source
true or false, init_seed = seed and order_seed = 100 + seed (the default profile's reversed_1 and
forward are seed 11, reversed_2 and forward_2 seed 12), `train.amp` false or auto. The fp32 and
auto runs of a side and seed start from the same weights and see the same minibatches in the
same order, so their difference is the precision's alone. `--jobs` runs that many trainings side
by side, each on one thread (two 1-thread jobs use two cores best, bench/README.md); a run whose
metrics file exists is not run again, and one that was stopped resumes from its checkpoint
(`s2s train` does), so the command can be rerun until the table is complete.

The table: every run (the precision `auto` chose, from its own log of the choice, its training
words/s and minutes, final and best dev perplexity, test perplexity, all evaluated in fp32), then
per side the mean final dev perplexity of each precision over the seeds both have, the paired
relative differences auto/fp32 - 1 per seed, and the relative difference of the two means
(mean auto / mean fp32 - 1): the bar is that within 2%. Two seeds give no interval worth the
name; the per-seed differences are printed so the spread can be read beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SIDES = {"rev": True, "fwd": False}
PRECISIONS = {"fp32": False, "auto": "auto"}


def run_name(side: str, precision: str, seed: int) -> str:
    return f"q_{side}_{precision}_s{seed}"


def write_params(out: Path, params: Path, sides: list[str], precisions: list[str],
                 seeds: list[int]) -> list[str]:
    """OUT/params.yaml: `params` with the runs as its models (one thread each); their names."""
    p = yaml.safe_load(params.read_text())
    if p.get("profile") != "default":
        raise SystemExit(f"{params}: profile {p.get('profile')!r}; this benchmark trains the "
                         "default profile's models (expected profile: default)")
    p["train"]["threads"] = 1
    # fp32 decoding, one thread: a BLEU difference is then the training precision's alone
    p["translate"].update(amp=False, threads=1)
    names = []
    for side in sides:
        for seed in seeds:
            for prec in precisions:
                name = run_name(side, prec, seed)
                p["models"][name] = {"reverse_source": SIDES[side], "init_seed": seed,
                                     "order_seed": 100 + seed,
                                     "train": {"amp": PRECISIONS[prec]}}
                p["systems"][name] = {"members": [name], "beams": [12]}
                names.append(name)
    text = yaml.safe_dump(p, sort_keys=False)
    target = out / "params.yaml"
    if not target.exists() or target.read_text() != text:
        tmp = target.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(target)
    return names


def run_jobs(out: Path, tasks: list[tuple[str, list[str], Path]], jobs: int, what: str) -> None:
    """Run each task (name, `s2s` arguments, the file it makes) whose file is absent, `jobs` at
    a time, each logging to OUT/logs/<name>.<what>.txt; stops at the first failure (after the
    running ones end)."""
    todo = [(name, args) for name, args, made in tasks if not made.exists()]
    (out / "logs").mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    running: list[tuple[str, subprocess.Popen, float]] = []
    failed: list[str] = []
    while todo or running:
        while todo and len(running) < jobs and not failed:
            name, args = todo.pop(0)
            cmd = [sys.executable, "-m", "s2s.cli", "--params", "params.yaml", *args]
            with open(out / "logs" / f"{name}.{what}.txt", "a") as log:
                print(f"{time.strftime('%H:%M:%S')} {what} {name} (log: {log.name})", flush=True)
                running.append((name, subprocess.Popen(cmd, cwd=out, env=env, stdout=log,
                                                       stderr=subprocess.STDOUT), time.time()))
        if failed and not running:
            break
        time.sleep(2)
        for item in list(running):
            name, proc, t0 = item
            if proc.poll() is None:
                continue
            running.remove(item)
            if proc.returncode:
                failed.append(name)
                print(f"{what} {name} failed (exit {proc.returncode}); see "
                      f"{out}/logs/{name}.{what}.txt", flush=True)
            else:
                print(f"{time.strftime('%H:%M:%S')} {what} {name}: done in "
                      f"{(time.time() - t0) / 60:.1f} min", flush=True)
    if failed:
        raise SystemExit(f"{what} failed: {', '.join(failed)}")


def train_and_decode(out: Path, data: Path, names: list[str], jobs: int) -> None:
    """`s2s train` every run, then `s2s translate` its test set at beam 12 in fp32."""
    vocab = ["--vocab", str(data / "vocab")]
    run_jobs(out, [(n, ["train", n, "--ids", str(data / "ids"), *vocab],
                    out / "metrics" / "train" / f"{n}.json") for n in names], jobs, "train")
    where = ["--prepared", str(data / "prepared"), *vocab]
    run_jobs(out, [(n, ["translate", n, *where, "--models", "models", "--out", f"outputs/{n}"],
                    out / "outputs" / n / "beam12.tok.fr") for n in names], jobs, "translate")


def read_run(out: Path, name: str) -> dict | None:
    path = out / "metrics" / "train" / f"{name}.json"
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise SystemExit(f"{path}: not JSON ({e})") from None


def hypotheses(out: Path, name: str) -> list[str] | None:
    """The run's test translation at beam 12 (Moses-tokenised), if it was decoded."""
    from s2s.io import read_lines

    path = out / "outputs" / name / "beam12.tok.fr"
    return read_lines(path) if path.exists() else None


def report(out: Path, data: Path | None, sides: list[str], precisions: list[str],
           seeds: list[int]) -> str:
    """The table of every run, then per side the paired differences (see the module's doc);
    BLEU only with `data` (its test references)."""
    from s2s.evaluate import significance
    from s2s.io import read_lines

    refs = None if data is None else read_lines(data / "prepared" / "test.tok.fr")
    rows, lines = [], []
    runs: dict[tuple[str, str, int], dict] = {}
    hyps: dict[tuple[str, str, int], list[str]] = {}
    for side in sides:
        for seed in seeds:
            for prec in precisions:
                name = run_name(side, prec, seed)
                m = read_run(out, name)
                if m is None:
                    rows.append([name, "not run", "", "", "", "", "", ""])
                    continue
                runs[side, prec, seed] = m
                h = None if refs is None else hypotheses(out, name)
                if h is not None:
                    hyps[side, prec, seed] = h
                b = None if h is None else significance.score(h, refs, tokenized=True).bleu_tok
                rows.append([name, m["precision"], f"{m['tgt_words_per_sec']:,.0f}",
                             f"{m['train_seconds'] / 60:.1f}", f"{m['dev_ppl']:.3f}",
                             f"{m['best_dev_ppl']:.3f}", f"{m['test_ppl']:.3f}",
                             "" if b is None else f"{b:.2f}"])
    lines.append(common.table(["run", "precision", "tgt words/s", "train min", "dev ppl",
                               "best dev", "test ppl", "BLEU b12"], rows))
    if not {"fp32", "auto"} <= set(precisions):
        return "\n".join(lines)
    summary, bootstrap = [], []
    for side in sides:
        both = [s for s in seeds if (side, "fp32", s) in runs and (side, "auto", s) in runs]
        if not both:
            continue
        fp = [runs[side, "fp32", s]["dev_ppl"] for s in both]
        au = [runs[side, "auto", s]["dev_ppl"] for s in both]
        summary.append([side, ",".join(map(str, both)), f"{statistics.mean(fp):.3f}",
                        f"{statistics.mean(au):.3f}",
                        " ".join(f"{a / f - 1:+.1%}" for a, f in zip(au, fp)),
                        f"{statistics.mean(au) / statistics.mean(fp) - 1:+.1%}"])
        for s in both:
            if (side, "fp32", s) in hyps and (side, "auto", s) in hyps:
                diff = significance.paired_bootstrap(
                    hyps[side, "fp32", s], hyps[side, "auto", s], refs,
                    baseline_name=run_name(side, "fp32", s),
                    system_name=run_name(side, "auto", s), ref_name="test")
                bootstrap.append(f"  {side} s{s}: {diff.describe()}")
    if summary:
        lines += ["", common.table(["side", "seeds", "fp32 mean dev ppl", "auto mean dev ppl",
                                    "auto/fp32 - 1 per seed", "of the means"], summary)]
    if bootstrap:
        lines += ["", "test BLEU (beam 12, fp32 decoding), auto - fp32, paired bootstrap "
                      "(1000 resamples, 95%):", *bootstrap]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="the runs' folder (made if absent)")
    ap.add_argument("--data", type=Path, help="a default run's data/ (prepared/, vocab/, ids/)")
    ap.add_argument("--params", type=Path, default=ROOT / "params.yaml")
    ap.add_argument("--seeds", default="11,12")
    ap.add_argument("--sides", default="rev,fwd", help="rev and/or fwd")
    ap.add_argument("--precisions", default="fp32,auto")
    ap.add_argument("--jobs", type=int, default=2, help="trainings side by side, 1 thread each")
    ap.add_argument("--collect", action="store_true", help="print the table of what has run")
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    sides = args.sides.split(",")
    precisions = args.precisions.split(",")
    for given, known, flag in ((sides, SIDES, "--sides"), (precisions, PRECISIONS, "--precisions")):
        if bad := [x for x in given if x not in known]:
            ap.error(f"{flag}: unknown {', '.join(bad)} (expected {', '.join(known)})")
    args.out.mkdir(parents=True, exist_ok=True)
    print(common.machine_line(1))
    if not args.collect:
        if args.data is None or not all((args.data / d).is_dir() for d in ("prepared", "ids")):
            ap.error("--data: a folder with the prepare, vocab and ids stages' outputs "
                     "(prepared/, vocab/, ids/) of a default run")
        names = write_params(args.out, args.params, sides, precisions, seeds)
        train_and_decode(args.out, args.data, names, args.jobs)
    print(report(args.out, args.data, sides, precisions, seeds))


if __name__ == "__main__":
    main()
