"""Shared pieces of the benchmarks: data (real or synthetic), peak GEMM, memory, tables.

Not a test and not part of the package: `bench/train.py` and `bench/decode.py` import it as a
sibling module (they put `bench/` on sys.path).
"""

from __future__ import annotations

import os
import random
import re
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from s2s.data.batching import load_parallel
from s2s.data.vocab import SPECIALS, Vocab

# The default profile's Multi30k vocabularies (metrics/vocab.json of a default run):
# en 6,163 and fr 6,503 entries, specials included.
DEFAULT_SRC_VOCAB, DEFAULT_TGT_VOCAB = 6163, 6503
# Multi30k train after `prepare` (default profile): words per sentence, mean and sd.
SRC_LEN_MEAN, SRC_LEN_SD = 13.07, 4.01
TGT_PER_SRC, TGT_NOISE_SD = 14.09 / 13.07, 1.65  # fr length ~ 1.078 x en length, sd 4.6 in all
MAX_LEN = 50  # prepare.max_len of the default profile


@dataclass(frozen=True)
class Corpus:
    """Id-encoded sentence pairs and the vocabularies they index.

    pairs: (source ids, target ids) without <bos>/<eos>; src_vocab, tgt_vocab: Vocab objects
    (synthetic ones hold placeholder words); origin: a line saying where the sentences came from.
    """

    pairs: list[tuple[list[int], list[int]]]
    src_vocab: Vocab
    tgt_vocab: Vocab
    origin: str


def synthetic_vocab(size: int, name: str) -> Vocab:
    words = SPECIALS + tuple(f"w{i}" for i in range(size - len(SPECIALS)))
    return Vocab(words, f"synthetic-{name}")


def synthetic_pairs(n: int, *, src_vocab: int, tgt_vocab: int, seed: int = 0,
                    ) -> list[tuple[list[int], list[int]]]:
    """`n` pairs with Multi30k-like lengths (gamma, mean 13.1 source words, target ~1.08x) and
    uniform word ids (the cost of a step does not depend on which words)."""
    rng = random.Random(seed)
    shape = (SRC_LEN_MEAN / SRC_LEN_SD) ** 2
    scale = SRC_LEN_SD ** 2 / SRC_LEN_MEAN
    pairs = []
    for _ in range(n):
        s = min(MAX_LEN, max(1, round(rng.gammavariate(shape, scale))))
        t = min(MAX_LEN, max(1, round(s * TGT_PER_SRC + rng.gauss(0.0, TGT_NOISE_SD))))
        pairs.append(([rng.randrange(len(SPECIALS), src_vocab) for _ in range(s)],
                      [rng.randrange(len(SPECIALS), tgt_vocab) for _ in range(t)]))
    return pairs


def load_corpus(data_dir: Path | None, *, split: str = "train", n_synthetic: int = 4000,
                seed: int = 0) -> Corpus:
    """Real sentences from `<data_dir>/prepared/<split>.tok.{en,fr}` and `<data_dir>/vocab` when
    they exist; else synthetic ones with Multi30k-like lengths."""
    if data_dir is not None:
        prefix = data_dir / "prepared" / f"{split}.tok"
        vocab_dir = data_dir / "vocab"
        files = [prefix.with_name(prefix.name + ".en"), prefix.with_name(prefix.name + ".fr"),
                 vocab_dir / "en.tsv", vocab_dir / "fr.tsv"]
        if all(f.exists() for f in files):
            src_vocab, tgt_vocab = Vocab.load(files[2]), Vocab.load(files[3])
            pairs = load_parallel(prefix, src_vocab, tgt_vocab)
            return Corpus(pairs, src_vocab, tgt_vocab,
                          f"real sentences: {prefix}.{{en,fr}} ({len(pairs)} pairs), "
                          f"vocab {len(src_vocab)}/{len(tgt_vocab)} from {vocab_dir}")
        missing = ", ".join(str(f) for f in files if not f.exists())
        print(f"note: --data {data_dir}: missing {missing}; using synthetic sentences")
    pairs = synthetic_pairs(n_synthetic, src_vocab=DEFAULT_SRC_VOCAB,
                            tgt_vocab=DEFAULT_TGT_VOCAB, seed=seed)
    return Corpus(pairs, synthetic_vocab(DEFAULT_SRC_VOCAB, "en"),
                  synthetic_vocab(DEFAULT_TGT_VOCAB, "fr"),
                  f"synthetic sentences ({len(pairs)} pairs, Multi30k-like lengths: mean "
                  f"{SRC_LEN_MEAN} source words, gamma-distributed; uniform word ids), "
                  f"vocab {DEFAULT_SRC_VOCAB}/{DEFAULT_TGT_VOCAB}")


class Clock:
    """Wall and process CPU seconds of a `with` block (CPU time: all threads of this process).

    On a machine shared with other jobs, wall time measures the load as much as the code; CPU
    time of a single-threaded run is far steadier, so ratios are computed from it. With several
    threads it also counts OpenMP's spin-waiting, and stops being a measure of work."""

    def __enter__(self) -> "Clock":
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        self.wall = time.perf_counter() - self._wall
        self.cpu = time.process_time() - self._cpu


def set_threads(threads: int) -> int:
    """torch.set_num_threads(threads) unless 0 (torch's default); returns the count in use."""
    if threads:
        torch.set_num_threads(threads)
    return torch.get_num_threads()


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def peak_gemm_flops(device: torch.device, *, n: int = 2048, reps: int = 8,
                    dtype: torch.dtype = torch.float32) -> tuple[float, float]:
    """The machine's practical matmul peak at the current thread count, the denominator of MFU:
    the best FLOP/s of an n x n x n torch.mm (2 n^3 FLOPs) in `dtype` over `reps` runs, per wall
    second and per CPU second of this process (the latter barely moved by other jobs' load)."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    out = torch.empty(n, n, device=device, dtype=dtype)
    torch.mm(a, b, out=out)  # warm-up: MKL/oneDNN kernel selection, page faults
    sync(device)
    wall = cpu = 0.0
    for _ in range(reps):
        with Clock() as clock:
            torch.mm(a, b, out=out)
            sync(device)
        wall = max(wall, 2 * n ** 3 / clock.wall)
        cpu = max(cpu, 2 * n ** 3 / max(clock.cpu, 1e-9))
    return wall, cpu


# ---------------------------------------------------------------------------------------------
# Memory. torch allocates CPU tensors with malloc, so RSS is the measure; tracemalloc does not
# see tensors, and ru_maxrss never goes down, so a process that measures several things one after
# the other resets the high-water mark (VmHWM) through /proc/self/clear_refs (Linux >= 4.0).


def _status_kib(key: str) -> int | None:
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return None
    m = re.search(rf"^{key}:\s+(\d+) kB", text, re.M)
    return int(m.group(1)) if m else None


def rss_mib() -> float:
    kib = _status_kib("VmRSS")
    if kib is not None:
        return kib / 1024
    try:
        import psutil
        return psutil.Process().memory_info().rss / 2 ** 20
    except ImportError:
        return float("nan")


def reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS; False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_mib() -> float:
    kib = _status_kib("VmHWM")
    if kib is not None:
        return kib / 1024
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


# A fixed (not glibc's adaptive) mmap threshold makes every tensor over 64 KiB its own mapping,
# returned to the OS when freed: RSS then follows the live tensors, and the high-water mark of a
# step is the step's real peak, not what earlier work left in malloc's free lists. Only the
# memory probe subprocesses run with it: it costs page faults, so timings are taken without it.
MEMORY_PROBE_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "65536"}


def probe_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(MEMORY_PROBE_ENV)
    return env


# ---------------------------------------------------------------------------------------------
# Output


def table(headers: list[str], rows: list[list[str]], *, align: str | None = None) -> str:
    """A plain-text table; `align` has one 'l' or 'r' per column (default: first left)."""
    align = align or "l" + "r" * (len(headers) - 1)
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]

    def line(cells):
        return "  ".join(str(c).ljust(w) if a == "l" else str(c).rjust(w)
                         for c, w, a in zip(cells, widths, align)).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])


def quiet_progress(**kwargs):
    """A disabled tqdm bar, to stand in for s2s.progress.progress inside benchmarks."""
    from tqdm import tqdm
    return tqdm(disable=True, **kwargs)


def cpu_kind() -> str:
    """The CPU and its bf16 engine, with the core count (s2s.precision.cpu_kind)."""
    from s2s.precision import cpu_kind as kind

    return f"{kind()}, {os.cpu_count()} CPUs"


def machine_line(threads: int) -> str:
    cap = torch.backends.cpu.get_cpu_capability()
    return (f"{cpu_kind()}; torch {torch.__version__}, {threads} threads, "
            f"CPU capability {cap}, load average {os.getloadavg()[0]:.2f} at start")
