"""The softmax layer's loss (s2s.losses) at the profiles' sizes: time of forward + backward, the
largest buffer and the peak of live memory, for the one-buffer loss (every row in one chunk, as
the CPU trains today) beside the streamed one (rows in chunks of ``--chunk-mib``), on the CPU.

    .venv/bin/python bench/loss.py [--quick] [--threads 1] [--chunk-mib 64] [--sizes default,paper]

Each row: M target rows (a batch's real positions), H features, V words, fp32 or bf16 products;
ms is the median over ``--repeat`` runs of forward + backward; "largest" and "peak" come from the
profiler's allocator events (every allocation, kernels' own temporaries included), peak relative
to the memory live before the loss. The CPU kind and the load average are printed with it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
from torch._C._profiler import _EventType
from torch.profiler import ProfilerActivity, profile

from common import DEFAULT_TGT_VOCAB, cpu_kind  # noqa: E402  (bench/common.py)
from s2s.losses import linear_cross_entropy

# (name, M, H, V): the default profile's batch of 64 x ~15 and its longest (64 x 51); the
# paper's batch of 128 x 30 at the paper's H and V
SIZES = [("default, mean batch", 64 * 15, 384, DEFAULT_TGT_VOCAB),
         ("default, longest batch", 64 * 51, 384, DEFAULT_TGT_VOCAB),
         ("paper, batch 128 x 30", 128 * 30, 1000, 80000)]
QUICK = [("quick", 512, 64, 2000)]


def problem(M: int, H: int, V: int):
    g = torch.Generator().manual_seed(0)
    feats = torch.randn(M, H, generator=g, requires_grad=True)
    weight = (0.05 * torch.randn(V, H, generator=g)).requires_grad_()
    bias = torch.zeros(V, requires_grad=True)
    target = torch.randint(4, V, (M,), generator=g)
    return feats, weight, bias, target


def step(inputs, *, mm_dtype, chunk_bytes):
    """A function running forward + backward once, its gradients freed before (outside the
    measured time and memory: its previous gradients would be freed inside it)."""
    feats, weight, bias, target = inputs

    def run():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mm_dtype is not None):
            loss = linear_cross_entropy(feats, weight, bias, target, ignore_index=0,
                                        mm_dtype=mm_dtype, chunk_bytes=chunk_bytes)
        loss.backward()

    def fresh():
        for t in (feats, weight, bias):
            t.grad = None
        return run
    return fresh


def memory(run) -> tuple[int, int]:
    """(largest allocation, peak live bytes over those before) while `run` runs."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        run()

    def walk(nodes):
        for n in nodes:
            yield n
            yield from walk(n.children)

    allocs = sorted((n for n in walk(prof.profiler.kineto_results.experimental_event_tree())
                     if n.tag == _EventType.Allocation), key=lambda n: n.start_time_ns)
    # (frees are events too, of negative size)
    start = allocs[0].extra_fields.total_allocated - allocs[0].extra_fields.alloc_size
    return (max(n.extra_fields.alloc_size for n in allocs),
            max(n.extra_fields.total_allocated for n in allocs) - start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="one small size, one repeat (seconds)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads; 0: torch's default")
    ap.add_argument("--chunk-mib", type=float, default=None,
                    help="the streamed rows' budget: the largest (C, V) fp32 buffer, MiB "
                         "(default 64; --quick: 0.5, 8 chunks)")
    ap.add_argument("--sizes", default="default,paper", help="comma list of default, paper")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    sizes, repeat = (QUICK, 1) if args.quick else (SIZES, args.repeat)
    if not args.quick:
        sizes = [s for s in sizes if s[0].split(",")[0] in args.sizes.split(",")]
    args.chunk_mib = args.chunk_mib or (0.5 if args.quick else 64.0)
    budget = int(args.chunk_mib * (1 << 20))
    print(f"bench/loss.py{' --quick' if args.quick else ''} on {cpu_kind()}; torch "
          f"{torch.__version__}, {torch.get_num_threads()} threads, load average "
          f"{os.getloadavg()[0]:.2f} at start; streamed chunks of {args.chunk_mib:g} MiB")
    header = ["size", "M", "H", "V", "products", "loss", "chunks", "ms", "largest MiB",
              "peak MiB"]
    rows = []
    for name, M, H, V in sizes:
        inputs = problem(M, H, V)
        for mm_dtype in (None, torch.bfloat16):
            for kind, chunk_bytes in (("one buffer", 4 * M * V), ("streamed", budget)):
                fresh = step(inputs, mm_dtype=mm_dtype, chunk_bytes=chunk_bytes)
                fresh()()  # warm-up
                times = []
                for _ in range(repeat):
                    run = fresh()
                    t0 = time.perf_counter()
                    run()
                    times.append(time.perf_counter() - t0)
                largest, peak = memory(fresh())
                chunks = -(-M // max(1, chunk_bytes // (4 * V)))
                rows.append([name, M, H, V, "fp32" if mm_dtype is None else "bf16", kind,
                             chunks, f"{1000 * statistics.median(times):.0f}",
                             f"{largest / 2**20:.1f}", f"{peak / 2**20:.1f}"])
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    for r in [header, ["-" * w for w in widths]] + rows:
        print("  ".join(str(c).rjust(w) if i else str(c).ljust(w)
                        for i, (c, w) in enumerate(zip(r, widths))))
    print(f"load average {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
