"""Reading text files line by line (s2s.io.iter_lines, which reads the corpora, the prepared text
the vocab and ids stages count and encode, hypotheses and n-best lists): the time and peak memory
of a file of sentences against a file of the same size that is one line (a corpus that lost its
line breaks), with no LF or with one at its end, at growing sizes. All should take time in
proportion to their size: a reader that searched the whole line read so far for LF at every
block (as it once did) took 4.2 s for a 64 MiB line and 26 s for 256 MiB, in 1 MiB blocks
(bench/README.md).

    python bench/lines.py                              # 16, 64 and 256 MiB, best of 3
    python bench/lines.py --sizes 1,2 --repeat 1       # a check that it runs

Each reading runs in a process of its own (its peak RSS is that process's, from wait4, less
that of a process reading an empty file: what the reading itself held), over a file written to
``--work`` (a temporary folder by default) before any is timed; the line's cap
(s2s.io.MAX_LINE_BYTES, 64 MiB) is raised for the one-line files, which would be refused past
it. "MiB/s" is the size over the best time; "vs lines": the one-line file's MiB/s over that of
the file of sentences of its size (1.0: as fast). The CPU kind and the load average are printed
first: on a machine shared with other jobs every time moves with their load.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scale import machine  # noqa: E402  (bench/scale.py; like it, nothing here imports torch:
# a child's peak RSS would count the pages it shares with this process between fork and exec)

ROOT = Path(__file__).resolve().parents[1]
SENTENCE = b"the committee adopted the report without a vote .\n"  # 50 bytes

READ = """
import sys, time
from pathlib import Path
from s2s.io import iter_lines
path, cap, block = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
t = time.perf_counter()
n = sum(len(b) for b in iter_lines(path, rstrip=False, block_bytes=block, max_line_bytes=cap))
print(time.perf_counter() - t, n)
"""


KINDS = ("sentences", "one line, no LF", "one line, then LF")


def write(path: Path, mib: int, kind: str) -> None:
    """`mib` MiB of sentences, or of words with no LF (one at the end for "then LF")."""
    size = mib << 20
    one_line = kind != "sentences"
    unit = b"w " * 1024 if one_line else SENTENCE * 20
    with open(path, "wb") as f:
        for _ in range(size // len(unit)):
            f.write(unit)
        f.write(unit[: size % len(unit)])
        if kind == "one line, then LF":
            f.write(b"\n")


def read_once(path: Path, cap: int, block: int) -> tuple[float, int, float]:
    """(seconds, lines, peak RSS in MiB) of one reading in a process of its own."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-c", READ, str(path), str(cap), str(block)],
                            env=env, stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"bench/lines.py: reading {path} failed ({proc.returncode})")
    seconds, lines = out.split()
    return float(seconds), int(lines), usage.ru_maxrss / 1024


def main() -> None:
    from s2s.io import MAX_LINE_BYTES

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="16,64,256", help="comma list of file sizes in MiB")
    ap.add_argument("--repeat", type=int, default=3, help="readings of each file (best taken)")
    ap.add_argument("--block-bytes", type=int, default=1 << 22,
                    help="iter_lines' block (the pipeline's default: 4 MiB)")
    ap.add_argument("--work", type=Path, help="folder for the files (default: a temporary one)")
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    if any(s < 1 for s in sizes) or a.repeat < 1:
        raise SystemExit("bench/lines.py: --sizes and --repeat must be at least 1")
    t0 = time.perf_counter()
    print(f"bench/lines.py on {machine()} (start); blocks of {a.block_bytes:,} bytes", flush=True)
    with tempfile.TemporaryDirectory(dir=a.work) as tmp:
        files = {}
        for mib in sizes:
            for k, kind in enumerate(KINDS):
                path = Path(tmp) / f"{mib}-{k}.txt"
                write(path, mib, kind)
                files[mib, kind] = path
        empty = Path(tmp) / "empty.txt"
        empty.write_bytes(b"")
        base = min(read_once(empty, MAX_LINE_BYTES, a.block_bytes)[2] for _ in range(2))
        rows, rates = [], {}
        for (mib, kind), path in files.items():
            one_line = kind != "sentences"
            cap = max(MAX_LINE_BYTES, (mib << 20) + 1) if one_line else MAX_LINE_BYTES
            runs = [read_once(path, cap, a.block_bytes) for _ in range(a.repeat)]
            best = min(r[0] for r in runs)
            rates[mib, kind] = mib / best
            rows.append([kind, f"{mib}",
                         f"{runs[0][1]:,}", f"{best:.3f}", f"{mib / best:,.0f}",
                         f"{max(r[2] for r in runs) - base:,.0f}",
                         f"{rates[mib, kind] / rates[mib, 'sentences']:.2f}" if one_line
                         else ""])
    print("\n| file | MiB | lines | seconds (best) | MiB/s | peak RSS MiB over start | "
          "vs lines |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print(f"\n(a process that reads an empty file peaks at {base:,.0f} MiB: the interpreter and "
          f"its imports)\nbench/lines.py on {machine()} (end); {time.perf_counter() - t0:.0f} s "
          "in all")


if __name__ == "__main__":
    main()
