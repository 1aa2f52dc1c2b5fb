"""The data path at the paper's scale: each data stage's time and peak memory on synthetic corpora
of growing size made of the mirror's real sentences, and a training job's time to its first step,
with the cost per million pairs fitted and extrapolated to the paper's 12M and 40M pairs.

    S2S_MIRROR=../shared/data python bench/scale.py                      # 0.1M, 0.3M, 1M, 3M pairs
    python bench/scale.py --sizes 100000,300000 --threads 1,2            # and the stages' scaling
    python bench/scale.py --sizes 2000,4000 --no-train --work /tmp/x     # a check that it runs

A corpus of N pairs: each pair two real Giga-FrEn pairs of the mirror (of its first 30,000 those
whose sides have 3-40 words and a length ratio within 1.3, which the prepare stage keeps), drawn
at random and joined (English with English, French with French): web and news text, the
vocabulary of a real corpus. The dev and test sets are the mirror's
newstest2012 and newstest2014. Each stage runs as the pipeline runs it (`s2s <stage>` in its own
process, the parameter file the default profile's with the paper's vocabulary sizes and this
data), at each thread count of ``--threads`` (``resources.<stage>.threads``) for sizes up to
``--scaling-max`` and at the largest above; its time is the wall clock of the process, its peak
RSS the largest process of the stage (the pool's workers included, each on its own), its disk
what it wrote. The first step: a process that imports the trainer, opens the ids (mapped, checked
against their record), plans epoch 0's batches, builds the default profile's 2x384 model (timed
apart: it does not grow with the corpus) and takes one training step.

The table goes to bench/README.md with the machine and its load (printed first and last).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
# Nothing here imports torch: a child's peak RSS would count the pages it shares with this
# process between its fork and its exec.

GIGA = "wmt14-train-gigafren-head30k/giga-fren.release2.fixed.head30000"
DEV = ("wmt-newstest2012-2013-fren/newstest2012", "wmt.newstest2012")
TEST = ("wmt14-newstest2014-fren/newstest2014-fren", "multi30k.test_2016_flickr")
TRAIN_ID = "wmt14.giga_fren"  # the raw folder the synthetic corpus takes (plain text)
STAGES = ("prepare", "vocab", "ids")
EXTRAPOLATE = (12_000_000, 40_000_000)  # the paper's pairs; with Giga-FrEn and UN


def mirror() -> Path:
    path = Path(os.environ.get("S2S_MIRROR", ROOT.parent / "shared" / "data"))
    if not (path / f"{GIGA}.en").is_file():
        raise SystemExit(f"bench/scale.py: no {GIGA}.en under {path} (set S2S_MIRROR)")
    return path


def usable_pairs(src: Path) -> tuple[list[str], list[str]]:
    """The Giga-FrEn pairs whose sides are 3-40 words long, at most 1.3 times the other (Giga-FrEn
    is web text, half its first lines misaligned: the prepare stage's ratio filter would remove
    their joins, and the stages after it would see a corpus half the size)."""
    en = (src / f"{GIGA}.en").read_text(encoding="utf-8").splitlines()
    fr = (src / f"{GIGA}.fr").read_text(encoding="utf-8").splitlines()
    keep = [(e, f) for e, f in zip(en, fr)
            if 3 <= len(e.split()) <= 40 and 3 <= len(f.split()) <= 40
            and max(len(e.split()), len(f.split())) <= 1.3 * min(len(e.split()), len(f.split()))]
    return [e for e, _ in keep], [f for _, f in keep]


def make_corpus(work: Path, pairs: int, src: Path) -> None:
    """raw/<corpus>/{en,fr}.txt of `pairs` joined real pairs, and the dev and test sets."""
    en, fr = usable_pairs(src)
    rng = random.Random(pairs)
    folder = work / "raw" / TRAIN_ID
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "en.txt", "w", encoding="utf-8") as fe, \
            open(folder / "fr.txt", "w", encoding="utf-8") as ff:
        for _ in range(pairs):
            a, b = rng.randrange(len(en)), rng.randrange(len(en))
            fe.write(f"{en[a]} {en[b]}\n")
            ff.write(f"{fr[a]} {fr[b]}\n")
    for stem, cid in (DEV, TEST):
        out = work / "raw" / cid
        out.mkdir(parents=True, exist_ok=True)
        for lang in ("en", "fr"):
            shutil.copyfile(src / f"{stem}.{lang}", out / f"{lang}.txt")


def write_params(work: Path, threads: int) -> Path:
    """The default profile, this data, the paper's vocabulary sizes, `threads` for the data
    stages."""
    from s2s.config import resolved

    import yaml

    raw = resolved(ROOT / "profiles" / "default.yaml")
    raw["data"] = {"train": [{"corpus": TRAIN_ID}], "dev": [{"corpus": DEV[1]}],
                   "test": {"corpus": TEST[1]}, "nbest": None}
    raw["vocab"].update(src_size=160_000, tgt_size=80_000, min_count=1)
    raw["prepare"]["max_len"] = 100  # two joined sentences: the pairs are kept
    raw["train"].update(threads=1, device="cpu")
    for stage in STAGES:
        raw["resources"][stage] = {"threads": threads, "mem_mb": 64000, "runtime": 720,
                                   "gpus": 0}
    path = work / f"params-{threads}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path


def run_stage(work: Path, params: Path, stage: str) -> dict:
    """`s2s <stage>` on `work`'s data: wall seconds, the largest process's peak RSS, bytes
    written."""
    args = {"prepare": ["--raw", "raw", "--out", "prepared", "--metrics", "prepare.json"],
            "vocab": ["--prepared", "prepared", "--out", "vocab", "--metrics", "vocab.json"],
            "ids": ["--prepared", "prepared", "--vocab", "vocab", "--out", "ids"]}[stage]
    out = {"prepare": "prepared", "vocab": "vocab", "ids": "ids"}[stage]
    shutil.rmtree(work / out, ignore_errors=True)
    return timed([str(Path(sys.executable).parent / "s2s"), "--params", str(params), stage,
                  *args], work, work / out)


def timed(cmd: list[str], cwd: Path, written: Path | None = None) -> dict:
    """Run `cmd`: its wall seconds, its output, the peak RSS of its largest process (its own or
    a worker's: wait4's usage of the child covers the children it waited for) and the bytes of
    `written`."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+", encoding="utf-8") as log:
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - t0
        log.seek(0)
        out = log.read()
    if proc.returncode:
        raise SystemExit(f"bench/scale.py: {' '.join(cmd)} failed:\n{out[-3000:]}")
    size = 0 if written is None else sum(f.stat().st_size for f in written.rglob("*")
                                         if f.is_file())
    return {"seconds": seconds, "peak_mb": usage.ru_maxrss / 1024, "bytes": size, "out": out}


def first_step(work: Path, params: Path) -> dict:
    """A training job's start-up to its first step, in a process of its own (--first-step)."""
    r = timed([sys.executable, __file__, "--first-step", str(work), "--params", str(params)],
              work)
    return {**json.loads(r["out"].strip().splitlines()[-1]), "seconds": r["seconds"],
            "peak_mb": r["peak_mb"]}


def first_step_here(work: Path, params_path: Path) -> None:
    """Run in the child: the trainer's setup and one step, each part timed, as JSON."""
    import torch

    from s2s import distributed, layout, train
    from s2s.config import load

    t_import = _started()  # the interpreter's start and the imports
    params = load(params_path)
    build = train.build_model
    built = {}

    def timed_build(*a, **k):
        t = time.perf_counter()
        model = build(*a, **k)
        model.init_weights = _timed(model.init_weights, built)
        built["build"] = time.perf_counter() - t
        return model

    train.build_model = timed_build
    t = time.perf_counter()
    paths = layout.TrainPaths(ids=work / "ids", vocab=work / "vocab",
                              model_dir=work / "run" / "model", ckpt_dir=work / "run" / "ckpt",
                              metrics=work / "run" / "m.json", curves=work / "run" / "c.csv")
    r = train.setup(train.TrainJob.of(params, "forward"), paths, world=distributed.World())
    t_setup = time.perf_counter() - t
    t = time.perf_counter()
    order = r.batches_of(0)
    t_plan = time.perf_counter() - t
    t = time.perf_counter()
    batch = next(iter(r.batches(order[:1])))
    train.train_step(r.model, r.opt, batch, batch_size=len(order[0]), lr=r.cfg.lr, cfg=r.cfg,
                     vocab=r.tgt_vocab, device=r.device, autocast=r.autocast)
    t_step = time.perf_counter() - t
    model = built.get("build", 0.0) + built.get("init", 0.0)
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text()
                  .splitlines() if ":" in line)
    kb = {k: int(status[k].split()[0]) for k in ("RssAnon", "RssFile")}
    print(json.dumps({"import": t_import, "setup": t_setup - model, "model": model,
                      "plan": t_plan, "step": t_step, "pairs": len(r.train),
                      "threads": torch.get_num_threads(), "anon_mb": kb["RssAnon"] / 1024,
                      "file_mb": kb["RssFile"] / 1024}))


def _started() -> float:
    """This process's age in seconds (from /proc: its start, in clock ticks since boot)."""
    ticks = os.sysconf("SC_CLK_TCK")
    start = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19]) / ticks
    return float(Path("/proc/uptime").read_text().split()[0]) - start


def _timed(fn, into: dict):
    def wrapper(*a, **k):
        t = time.perf_counter()
        out = fn(*a, **k)
        into["init"] = time.perf_counter() - t
        return out
    return wrapper


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least squares y = a + b * pairs: (a, b)."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    b = 0.0 if sxx == 0 else sum((x - mx) * (y - my) for x, y in points) / sxx
    return my - b * mx, b


def machine() -> str:
    info = Path("/proc/cpuinfo").read_text()
    model = next((ln.split(":", 1)[1].strip() for ln in info.splitlines()
                  if ln.startswith("model name")), "?")
    flags = set(next((ln.split(":", 1)[1].split() for ln in info.splitlines()
                      if ln.startswith("flags")), []))
    engine = ("AMX" if "amx_bf16" in flags else "AVX512-BF16" if "avx512_bf16" in flags
              else "no bf16 engine")
    # family and model tell generations apart where the name does not (AMD EPYC: family 23 is
    # Zen 2, 25 Zen 3 and 4, 26 Zen 5), as s2s.precision.cpu_kind, which imports torch
    ids = [next((ln.split(":", 1)[1].strip() for ln in info.splitlines()
                 if ln.split(":", 1)[0].strip() == key), "?") for key in ("cpu family", "model")]
    return (f"{model} (family {ids[0]}, model {ids[1]}; {engine}), {os.cpu_count()} CPUs, "
            f"load average "
            f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="100000,300000,1000000,3000000",
                    help="pairs of each corpus (comma list)")
    ap.add_argument("--threads", default="2", help="resources.<stage>.threads (comma list)")
    ap.add_argument("--scaling-max", type=int, default=300_000,
                    help="every thread count up to this size, the largest above")
    ap.add_argument("--work", type=Path, default=Path("/tmp/s2s-scale"))
    ap.add_argument("--no-train", action="store_true", help="skip the first training step")
    ap.add_argument("--keep", action="store_true", help="keep each size's files")
    ap.add_argument("--first-step", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--params", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.first_step:
        first_step_here(args.first_step, args.params)
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    threads = sorted(int(t) for t in args.threads.split(","))
    src = mirror()
    print(f"bench/scale.py on {machine()} (start)", flush=True)
    rows, by_stage = [], {}
    for pairs in sizes:
        work = args.work / f"{pairs}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        make_corpus(work, pairs, src)
        for t in (threads if pairs <= args.scaling_max else threads[-1:]):
            params = write_params(work, t)
            for stage in STAGES:
                r = run_stage(work, params, stage)
                rows.append([f"{pairs:,}", stage, str(t), f"{r['seconds']:.1f}",
                             f"{r['seconds'] / pairs * 1e6:.0f}", f"{r['peak_mb']:,.0f}",
                             f"{r['bytes'] / 1e6:,.0f}"])
                if t == threads[-1]:
                    by_stage.setdefault(stage, []).append((pairs, r["seconds"], r["peak_mb"],
                                                           r["bytes"]))
                kept = ""
                if stage == "prepare":
                    totals = json.loads((work / "prepare.json").read_text())["totals"]
                    kept = f" ({totals['train']['lines_out']:,} pairs kept)"
                print(f"  {pairs:,} pairs, {stage}, {t} thread(s): {r['seconds']:.1f} s, "
                      f"peak {r['peak_mb']:,.0f} MB{kept}", flush=True)
        if not args.no_train:
            r = first_step(work, write_params(work, threads[-1]))
            beyond = r["seconds"] - r["model"]
            rows.append([f"{pairs:,}", "first step", "1", f"{r['seconds']:.1f}",
                         f"{beyond / pairs * 1e6:.0f}", f"{r['peak_mb']:,.0f}", "-"])
            by_stage.setdefault("first step", []).append((pairs, beyond, r["peak_mb"], 0))
            print(f"  {pairs:,} pairs, first step: {r['seconds']:.1f} s in all, "
                  f"{beyond:.1f} s beyond the model's construction ({r['model']:.1f} s): "
                  f"interpreter and imports {r['import']:.1f}, ids opened and checked and the "
                  f"rest of the setup {r['setup']:.1f}, epoch 0's plan {r['plan']:.1f}, the "
                  f"step {r['step']:.1f}; resident at the end: {r['anon_mb']:,.0f} MB of its "
                  f"own, {r['file_mb']:,.0f} MB of mapped files (the ids and libraries: page "
                  f"cache that every process on the machine shares)", flush=True)
        if not args.keep:
            shutil.rmtree(work)
    print("\n| pairs | stage | threads | seconds | s per 1M pairs | peak RSS MB | written MB |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print("\nfitted at the largest thread count (least squares over the sizes), extrapolated:")
    print("\n| stage | s per 1M pairs | fixed s | at 12M pairs | at 40M pairs "
          "| peak RSS MB per 1M pairs | peak RSS at 12M / 40M, MB | disk at 12M / 40M, GB |")
    print("|---|---|---|---|---|---|---|---|")
    for stage, points in by_stage.items():
        a, b = fit([(p, s) for p, s, _, _ in points])
        ma, mb = fit([(p, m) for p, _, m, _ in points])
        da, db = fit([(p, d) for p, _, _, d in points])
        at = [a + b * n for n in EXTRAPOLATE]
        mem = [ma + mb * n for n in EXTRAPOLATE]
        disk = [(da + db * n) / 1e9 for n in EXTRAPOLATE]
        print(f"| {stage} | {b * 1e6:.1f} | {a:.1f} | {at[0] / 60:.0f} min | {at[1] / 60:.0f} min "
              f"| {mb * 1e6:,.0f} | {mem[0]:,.0f} / {mem[1]:,.0f} | "
              + ("-" if stage == "first step" else f"{disk[0]:.1f} / {disk[1]:.1f}") + " |")
    print(f"\nbench/scale.py on {machine()} (end)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
