"""The trainer's own step at the paper's size on one CUDA GPU, for each cell and precision: target
words/s, MFU, peak memory and the projected time of a paper-scale run. Run through bench/gpu.sh.

Model: ``s2s.model.build_model`` of an RNNConfig (``--cells``: `lstm` is nn.LSTM/cuDNN, the
`wmt14` profile's cell; `peephole` is the paper's cell, the `paper` profile's, in its default
schedule, on CUDA its layers as a wavefront; `peephole-layers` the same cell layer after layer,
the schedule before the wavefront), at ``--size``
`paper` (4 x 1000, E 1000, vocab 160k/80k: 384M parameters) or `wmt14` (4 x 512, 80k/40k). The
step is ``s2s.train.train_step`` itself: the trainer's loss, gradient clipping at 5 and SGD at 0.7,
under the precision ``amp`` resolves to (``s2s.precision.choose``, before anything else runs:
fp32 is `amp: false`, bf16 is `amp: true`), on batches of 128 synthetic sentences with
WMT'14-like lengths (348M French words in 12M pairs: ~29 target and ~27 source words per
sentence, gamma-distributed, <= 80) in length buckets as the trainer forms them, collated as the
trainer collates them (``s2s.data.batching.prefetch_batches``: one batch ahead on a side thread,
in pinned memory on CUDA). The first warm-up step runs under the precision check
(``s2s.precision.watch``) and the profiler, which records the recurrent kernels that ran (cuDNN's
``_cudnn_rnn`` or the native per-step ``_thnn_fused_lstm_cell`` a bf16 LSTM falls back to where
torch's cuDNN is older than 9.13). Each row names the device, torch, CUDA and cuDNN, and whether
the peephole step ran compiled (``compiled``: a torch.compile that fails runs eager instead, with
only a log line to say so).

MFU = model FLOPs (bench/train.py's formula: 3 x the matmul FLOPs of the forward pass, real
tokens only) per second over (a) the best torch.mm of 8192^3 measured here in that dtype and (b)
the GPU's nominal dense peak where the device is in NOMINAL. Projected run: 7.5 epochs x 348M
target words / words per second (the paper: about 10 days on 8 GPUs of 2014).

``--device cpu --size tiny`` runs the same code on the CPU at a toy size: a check that the script
works (the tests run it), not a measurement.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import random
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
from train import CLIP, LR, Size, flops_per_target_word, param_count  # noqa: E402

from s2s import precision  # noqa: E402
from s2s.config import TrainConfig  # noqa: E402
from s2s.data.batching import epoch_batches, pair_lengths, prefetch_batches  # noqa: E402
from s2s.io import atomic_write_text  # noqa: E402
from s2s.model import build_model  # noqa: E402
from s2s.model import lstm  # noqa: E402
from s2s.model.seq2seq import RNNConfig  # noqa: E402
from s2s.train import make_optimizer, train_step  # noqa: E402

SIZES = {s.name: s for s in (Size("paper", 4, 1000, 1000, 160_000, 80_000),
                             Size("wmt14", 4, 512, 512, 80_000, 40_000),
                             Size("tiny", 1, 16, 16, 200, 200))}
RUN_WORDS = 7.5 * 348e6  # 7.5 epochs of the paper's 348M French words
# Nominal dense peaks in TFLOP/s (vendor data sheets, no sparsity): fp32 without TF32, bf16.
NOMINAL = {"H200": (67.0, 989.0), "H100 80GB HBM3": (67.0, 989.0), "H100": (51.0, 756.0),
           "A100": (19.5, 312.0), "L40S": (91.6, 362.0), "A10": (31.2, 125.0)}
# The bars for bf16 at the paper's size on one H200 (bench/README.md).
TARGETS = {"lstm": 100_000, "peephole": 50_000}
# Precisions measured: products fp32 (amp false) or bf16 (amp true); `bf16r`: bf16 products and
# the cuDNN recurrence in bf16 too (s2s.precision.plan's `recurrent`), against bf16's TF32 one.
AMP = {"fp32": False, "bf16": True, "bf16r": True}
# --cells: the model's cell, and the peephole stack's schedule (None: its default)
CELLS = {"lstm": ("lstm", None), "peephole": ("peephole", None),
         "peephole-layers": ("peephole", "layers"), "peephole-wavefront": ("peephole", "wavefront")}


def wmt_like_pairs(n: int, size: Size, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        s = min(80, max(1, round(rng.gammavariate(6.0, 27.0 / 6.0))))
        t = min(80, max(1, round(s * 29.0 / 27.0 + rng.gauss(0.0, 3.0))))
        pairs.append(([rng.randrange(4, size.src_vocab) for _ in range(s)],
                      [rng.randrange(4, size.tgt_vocab) for _ in range(t)]))
    return pairs


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def mm_peak(dtype: torch.dtype, device: torch.device, n: int = 8192, reps: int = 10) -> float:
    """FLOP/s of the best of `reps` n^3 products (n = 256 on the CPU: a check only)."""
    n = n if device.type == "cuda" else 256
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    torch.mm(a, b)
    sync(device)
    best = math.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        torch.mm(a, b)
        sync(device)
        best = min(best, time.perf_counter() - t0)
    return 2 * n ** 3 / best


def nominal_peak(name: str, bf16: bool) -> float | None:
    for key, peaks in NOMINAL.items():
        if key in name:
            return peaks[bf16] * 1e12
    return None


def versions(device: torch.device) -> dict:
    """What a row was measured with: the device, torch, CUDA and cuDNN."""
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {"device": (torch.cuda.get_device_name(device) if device.type == "cuda"
                       else precision.cpu_kind()),
            "torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": cudnn}


def recurrent_ops(prof) -> list[str]:
    """The recurrent kernels a profiled step ran, by torch's op names."""
    return sorted({e.key for e in prof.key_averages()
                   if any(w in e.key for w in ("_cudnn_rnn", "lstm", "gru", "rnn_tanh"))})


@contextlib.contextmanager
def compiled_calls():
    """Count, while the block runs, the peephole stack's calls of its compiled step that ran
    compiled ("compiled") and those where compiling failed ("failed": the stack runs eager from
    then on, quietly but for a log line, and a compiled-looking row would be an eager one)."""
    calls = {"compiled": 0, "failed": 0}
    run = lstm._run_compiled

    def counted(step, key, args):
        done = run(step, key, args)
        calls["compiled" if done is not None else "failed"] += 1
        return done

    lstm._run_compiled = counted
    try:
        yield calls
    finally:
        lstm._run_compiled = run


def ran_compiled(calls: dict) -> bool:
    """Whether a row's steps ran the compiled step: some compiled calls, no failed one (a key
    that failed in an earlier row is eager from then on and makes no calls)."""
    return calls["compiled"] > 0 and calls["failed"] == 0


def measure(cell: str, mode: str, size: Size, pairs, batches, *, device: torch.device,
            warmup: int, steps: int) -> dict:
    """Time `steps` trainer steps after `warmup` untimed ones (compilation happens there), the
    batches collated as the trainer collates them; the first step is checked and profiled."""
    if warmup < 1:  # the first step is the check's: it would be in `timed` and not timed
        raise ValueError(f"warmup must be at least 1, got {warmup}")
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    model_cell, schedule = CELLS[cell]
    tcfg = TrainConfig(amp=AMP[mode], batch_size=len(batches[0]), lr=LR, clip_norm=CLIP)
    # the plan first: it sets the TF32 flags everything after it runs under
    chosen = precision.choose(tcfg.amp, device,
                              recurrent=torch.bfloat16 if mode == "bf16r" else None)
    autocast = chosen.autocast()
    cfg = RNNConfig(cell=model_cell, num_layers=size.layers, hidden_size=size.hidden,
                    embed_size=size.embed, reverse_source=True, init_seed=1)
    vocab = common.synthetic_vocab(size.tgt_vocab, "fr")
    model = build_model(cfg, src_vocab=size.src_vocab, tgt_vocab=size.tgt_vocab, pad=vocab.pad)
    model.init_weights(1)
    model.to(device).train()
    for stack in (model.encoder, model.decoder):
        stack.schedule = schedule
    opt = make_optimizer(model, tcfg)
    used = batches[:warmup + steps]
    shares = ([pairs[i] for i in idx] for idx in used)
    on_gpu = device.type == "cuda"
    loader = prefetch_batches(shares, pad=vocab.pad, bos=vocab.bos, eos=vocab.eos, pin=on_gpu,
                              ahead=1 if on_gpu else 0)

    def step(idx, batch) -> int:
        nll, ntok = train_step(model, opt, batch, batch_size=len(idx), lr=LR, cfg=tcfg,
                               vocab=vocab, device=device, autocast=autocast)
        if not math.isfinite(nll):
            raise RuntimeError(f"{cell} {mode}: non-finite loss {nll}")
        return ntok

    with compiled_calls() as calls:
        t0 = time.perf_counter()
        watch = precision.watch(model, chosen)
        kinds = [torch.profiler.ProfilerActivity.CPU]
        with torch.profiler.profile(activities=kinds) as prof:
            step(used[0], next(loader))
        seen = watch.check()  # raises PrecisionMismatch where a layer ran in another dtype
        for idx in used[1:warmup]:
            step(idx, next(loader))
        sync(device)
        warm_seconds = time.perf_counter() - t0
        timed = used[warmup:]
        t0 = time.perf_counter()
        words = sum(step(idx, batch) for idx, batch in zip(timed, loader))
        sync(device)
        seconds = time.perf_counter() - t0
    src = sum(max(len(pairs[i][0]), 1) for idx in timed for i in idx)
    tgt = sum(len(pairs[i][1]) + 1 for idx in timed for i in idx)
    peak = torch.cuda.max_memory_allocated(device) if on_gpu else 0
    return {"cell": cell, "precision": mode, "recorded": chosen.engine, "words": words,
            "seconds": seconds, "steps": len(timed), "warmup_seconds": warm_seconds,
            "flops_per_word": flops_per_target_word(size, src, tgt), "peak_gib": peak / 2 ** 30,
            "recurrent_ops": recurrent_ops(prof), "dtypes_seen": seen,
            # None: nn.LSTM, nothing compiled; False: the peephole step ran eager
            "compiled": ran_compiled(calls) if model_cell == "peephole" else None,
            **versions(device)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cells", default="lstm,peephole",
                    help=f"comma-separated, of {', '.join(CELLS)}")
    ap.add_argument("--modes", default="fp32,bf16",
                    help="precisions: fp32, bf16 (TF32 cuDNN recurrence), bf16r (bf16 cuDNN "
                         "recurrence; CUDA only)")
    ap.add_argument("--fp32-cells", help="the cells measured in fp32 (default: all of --cells)")
    ap.add_argument("--size", default="paper", choices=sorted(SIZES))
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=20, help="timed steps per cell and precision")
    ap.add_argument("--warmup", type=int, default=3,
                    help="untimed steps first, at least 1 (the first is checked and profiled)")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args(argv)
    if args.warmup < 1 or args.steps < 1:
        ap.error(f"--warmup and --steps must be at least 1 (the first step is checked and "
                 f"profiled, untimed), got {args.warmup} and {args.steps}")
    cells = [c for c in args.cells.split(",") if c]
    modes = [m for m in args.modes.split(",") if m]
    fp32_cells = [c for c in (args.fp32_cells or "").split(",") if c]
    for c in cells + fp32_cells:
        if c not in CELLS:
            ap.error(f"--cells: {c!r} is not one of {', '.join(CELLS)}")
    for m in modes:
        if m not in AMP:
            ap.error(f"--modes: {m!r} is not one of {', '.join(AMP)}")
        if m == "bf16r" and args.device != "cuda":
            ap.error("--modes bf16r: the bf16 cuDNN recurrence is a CUDA plan")
    if args.device == "cuda" and not torch.cuda.is_available():
        print(f"bench/gpu.py: no CUDA device (torch {torch.__version__}, "
              f"torch.version.cuda={torch.version.cuda}); this benchmark needs one",
              file=sys.stderr)
        return 2
    device = torch.device(args.device)
    size = SIZES[args.size]
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        memory = torch.cuda.get_device_properties(device).total_memory / 2 ** 30
        print(f"bench/gpu.py on {name}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
              f"cuDNN {torch.backends.cudnn.version()}, {memory:.0f} GiB")
    else:
        name = precision.cpu_kind()
        print(f"bench/gpu.py on the CPU ({name}): a check of the script, not a measurement")
    pairs = wmt_like_pairs(args.batch * (args.warmup + args.steps + 8), size)
    batches = epoch_batches(*pair_lengths(pairs), batch_size=args.batch, bucket_batches=100,
                            seed=7, epoch=0)
    print(f"model: {size.name} size, {param_count(size) / 1e6:.1f}M parameters (nn.LSTM count); "
          f"batch {args.batch}; {args.warmup} warm-up + {args.steps} timed steps each",
          flush=True)
    rows, records = [], []
    for mode in modes:
        dtype = torch.float32 if mode == "fp32" else torch.bfloat16
        # the peak under the mode's own TF32 flags (its plan, applied first): strict fp32 for
        # fp32, where the flags before would have made it TF32's
        precision.choose(AMP[mode], device,
                         recurrent=torch.bfloat16 if mode == "bf16r" else None)
        peak_mm = mm_peak(dtype, device)
        nominal = nominal_peak(name, mode != "fp32") if device.type == "cuda" else None
        for cell in cells:
            if mode == "bf16r" and cell != "lstm":
                continue  # only nn.LSTM runs through cuDNN
            if mode == "fp32" and args.fp32_cells is not None and cell not in fp32_cells:
                continue
            try:
                res = measure(cell, mode, size, pairs, batches, device=device,
                              warmup=args.warmup, steps=args.steps)
            except torch.cuda.OutOfMemoryError:
                longest = max(max(len(pairs[i][0]), len(pairs[i][1])) for b in batches
                              for i in b)
                print(f"  {cell} {mode}: out of GPU memory at batch {args.batch}, sentences up "
                      f"to {longest} words: lower --batch", flush=True)
                rows.append([cell, mode] + ["OOM"] * 10)
                continue
            wps = res["words"] / res["seconds"]
            achieved = res["flops_per_word"] * wps
            hours = RUN_WORDS / wps / 3600
            res.update(words_per_sec=wps, tflops=achieved / 1e12, mm_peak_tflops=peak_mm / 1e12,
                       nominal_tflops=None if nominal is None else nominal / 1e12,
                       run_hours=hours, device=name)
            records.append(res)
            if args.json:  # after every row: a run cut by its deadline keeps what it measured
                # (whole: a kill during the write leaves the previous rows, not half a file)
                atomic_write_text(args.json, json.dumps(records, indent=1) + "\n")
            rows.append([cell, mode, f"{1e3 * res['seconds'] / res['steps']:.0f}", f"{wps:,.0f}",
                         f"{achieved / 1e12:.1f}", f"{100 * achieved / peak_mm:.1f}",
                         "-" if nominal is None else f"{100 * achieved / nominal:.1f}",
                         f"{res['peak_gib']:.1f}", f"{hours:.1f}",
                         f"{res['warmup_seconds']:.0f}",
                         {None: "-", True: "yes", False: "no"}[res["compiled"]],
                         "-" if mode == "fp32" or cell not in TARGETS or device.type != "cuda"
                         else
                         ("met" if wps >= TARGETS[cell] else f"not met ({TARGETS[cell]:,})")])
            ran = {None: "", True: "; step compiled", False: "; step eager"}[res["compiled"]]
            print(f"  {cell} {mode}: {wps:,.0f} target words/s ({res['recorded']}; "
                  f"recurrent ops {', '.join(res['recurrent_ops']) or 'none'}{ran})", flush=True)
    print(common.table(["cell", "precision", "ms/step", "tgt words/s", "TFLOP/s",
                        "MFU % (mm)", "MFU % (nominal)", "peak GiB", "run hours",
                        "warm-up s", "compiled", "bf16 target"], rows))
    print("run hours: 7.5 epochs x 348M target words at this rate on this one GPU (the paper: "
          "about 10 days on 8 GPUs of 2014); warm-up s: the untimed steps, compilation included; "
          "compiled: whether the peephole step ran compiled (no: eager, by default off CUDA or "
          "because torch.compile failed; -: nn.LSTM)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
