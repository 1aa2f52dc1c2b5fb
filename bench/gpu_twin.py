"""The first steps of one model of a project's params, trained by the trainer's own setup and step
on a device, its loss per step written to a CSV; or two such CSVs (a CUDA run and its CPU twin)
compared. For the GPU check (bench/gpu_check.sh): does CUDA training follow the CPU's curve?

    gpu_twin.py train PROJECT --model reversed_1 --steps 150 --device cuda --out cuda.csv
    gpu_twin.py compare cpu.csv cuda.csv --margin 0.03

PROJECT holds params.yaml and the data stages' outputs (data/ids, data/vocab). Both runs
start from the same initial weights and see the same batches (the model's seeds); they differ by
their devices' rounding, and where `amp` resolves to bf16 by that device's bf16 kernels. The
comparison fails (exit status 1) where the mean loss of the last 50 shared steps differs by more
than ``--margin`` (relative, default 3%: bf16 against fp32 moves it by about 1%, a wrong
gradient by far more); it names the two engines compared (each CSV records its run's plan).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import math
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402

from s2s import distributed  # noqa: E402
from s2s.config import load  # noqa: E402
from s2s.data.batching import collate_ids  # noqa: E402
from s2s.layout import TrainPaths  # noqa: E402
from s2s.train import TrainJob, lr_at, setup, train_step  # noqa: E402


def train(project: Path, model: str, steps: int, device: str, out: Path) -> None:
    params = load(project / "params.yaml")
    params = dataclasses.replace(params, train=dataclasses.replace(params.train, device=device))
    paths = TrainPaths(ids=project / "data" / "ids", vocab=project / "data" / "vocab",
                       model_dir=out.parent / f"{out.stem}-model",
                       ckpt_dir=out.parent / f"{out.stem}-ckpt",
                       metrics=out.parent / f"{out.stem}.json",
                       curves=out.parent / f"{out.stem}-curves.csv")
    r = setup(TrainJob.of(params, model), paths, world=distributed.World())
    print(f"{model} on {r.device}: {r.chosen}", flush=True)
    rows, step, t0 = [], 0, time.perf_counter()
    while step < steps:
        for idx in r.batches_of(step // r.steps_per_epoch)[step % r.steps_per_epoch:]:
            if step >= steps:
                break
            lr = lr_at(step, r.steps_per_epoch, r.cfg)
            batch = collate_ids(r.train, idx, pad=r.tgt_vocab.pad, bos=r.tgt_vocab.bos,
                                eos=r.tgt_vocab.eos)  # the trainer's own batch of them
            nll, ntok = train_step(r.model, r.opt, batch,
                                   batch_size=len(idx), lr=lr, cfg=r.cfg, vocab=r.tgt_vocab,
                                   device=r.device, autocast=r.autocast)
            step += 1
            rows.append((step, nll / ntok))
    seconds = time.perf_counter() - t0
    with open(out, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["step", "loss", "device", "precision", "engine"])
        w.writerows((s, f"{loss:.6f}", str(r.device), r.chosen.name, r.chosen.engine)
                    for s, loss in rows)
    print(f"{steps} steps in {seconds:.1f}s; loss per target word: step 1 {rows[0][1]:.4f}, "
          f"step {steps} {rows[-1][1]:.4f}; wrote {out}", flush=True)


def read(path: Path) -> tuple[dict[int, float], str]:
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    engine = rows[0].get("engine") or f"{rows[0]['device']} {rows[0]['precision']}"
    return {int(r["step"]): float(r["loss"]) for r in rows}, engine


def compare(a: Path, b: Path, margin: float = 0.03) -> int:
    x, name_x = read(a)
    y, name_y = read(b)
    steps = sorted(set(x) & set(y))
    if not steps:
        print(f"{a} and {b} share no step")
        return 1
    print(f"loss per target word, {name_x} ({a.name}) vs {name_y} ({b.name})")
    print(f"{'step':>6} {name_x:>14} {name_y:>14} {'rel. diff':>10}")
    for s in sorted({steps[0], *[k for k in (10, 25, 50, 100, 150, 200) if k in x and k in y],
                     steps[-1]}):
        print(f"{s:>6} {x[s]:>14.4f} {y[s]:>14.4f} {(y[s] - x[s]) / x[s]:>+10.2%}")
    last = steps[-min(50, len(steps)):]
    mx, my = statistics.fmean(x[s] for s in last), statistics.fmean(y[s] for s in last)
    diff = (my - mx) / mx
    print(f"mean of the last {len(last)} steps: {mx:.4f} vs {my:.4f} ({diff:+.2%}); "
          f"perplexity {math.exp(mx):.1f} vs {math.exp(my):.1f}")
    if not math.isfinite(diff) or abs(diff) > margin:
        print(f"FAILED: {name_y} is {diff:+.2%} from {name_x} over the last {len(last)} steps, "
              f"beyond the margin of {margin:.0%}")
        return 1
    print(f"within the margin of {margin:.0%}: {name_y} against {name_x}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train")
    t.add_argument("project", type=Path)
    t.add_argument("--model", default="reversed_1")
    t.add_argument("--steps", type=int, default=150)
    t.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    t.add_argument("--threads", type=int, default=0)
    t.add_argument("--out", type=Path, required=True)
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    c.add_argument("--margin", type=float, default=0.03,
                   help="the largest relative difference of the last 50 steps' mean loss")
    args = ap.parse_args(argv)
    if args.command == "compare":
        return compare(args.a, args.b, args.margin)
    if args.threads:
        torch.set_num_threads(args.threads)
    train(args.project, args.model, args.steps, args.device, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
