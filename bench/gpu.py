"""The paper-size model on one CUDA GPU: training words/s in fp32 and bf16 autocast, MFU, memory,
and the projected time of one paper-scale training run. Run through bench/gpu.sh.

Model: 4 x 1000 LSTM encoder and decoder, E 1000, vocab 160k/80k (384M parameters), the step of
``s2s.train`` (``shard_nll``: fp32 through the fused softmax-layer loss, bf16 through autocast
with the loss in fp32; zero_grad, backward, clip_grad_norm_(5), SGD at 0.7), batch 128 of
synthetic sentences with WMT'14-like lengths (348M French words in 12M pairs: ~29 target and ~27
source words per sentence, gamma-distributed, <= 80), in length buckets as s2s.train forms them.

MFU = model FLOPs (bench/train.py's formula: 3 x the matmul FLOPs of the forward pass, real
tokens only) per second over (a) the GPU's nominal dense peak for that dtype where the device is
in NOMINAL, (b) the best torch.mm of 8192^3 measured here. Projected run: 7.5 epochs x 348M
target words / words per second (the paper: ~10 days on 8 GPUs).
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
from train import LR, CLIP, Size, flops_per_target_word, param_count  # noqa: E402

from s2s.model.seq2seq import RNNConfig  # noqa: E402
from s2s.data.batching import epoch_batches  # noqa: E402
from s2s.model.seq2seq import Seq2Seq  # noqa: E402
from s2s.train import shard_nll  # noqa: E402

PAPER = Size("paper", 4, 1000, 1000, 160_000, 80_000)
RUN_WORDS = 7.5 * 348e6  # 7.5 epochs of the paper's 348M French words
# Nominal dense peaks in TFLOP/s (vendor data sheets, no sparsity): fp32 without TF32, bf16.
NOMINAL = {"H200": (67.0, 989.0), "H100 80GB HBM3": (67.0, 989.0), "H100": (51.0, 756.0),
           "A100": (19.5, 312.0), "L40S": (91.6, 362.0), "A10": (31.2, 125.0)}


def wmt_like_pairs(n: int, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        s = min(80, max(1, round(rng.gammavariate(6.0, 27.0 / 6.0))))
        t = min(80, max(1, round(s * 29.0 / 27.0 + rng.gauss(0.0, 3.0))))
        pairs.append(([rng.randrange(4, PAPER.src_vocab) for _ in range(s)],
                      [rng.randrange(4, PAPER.tgt_vocab) for _ in range(t)]))
    return pairs


def mm_peak(dtype: torch.dtype, n: int = 8192, reps: int = 10) -> float:
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    torch.mm(a, b)
    torch.cuda.synchronize()
    best = math.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        torch.mm(a, b)
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return 2 * n ** 3 / best


def nominal_peak(name: str, bf16: bool) -> float | None:
    for key, peaks in NOMINAL.items():
        if key in name:
            return peaks[bf16] * 1e12
    return None


def run(mode: str, pairs, batches, *, warmup: int, steps: int) -> dict:
    device = torch.device("cuda")
    cfg = RNNConfig(cell="lstm", num_layers=PAPER.layers, hidden_size=PAPER.hidden,
                      embed_size=PAPER.embed, reverse_source=True, init_seed=1)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    model = Seq2Seq(cfg, src_vocab=PAPER.src_vocab, tgt_vocab=PAPER.tgt_vocab, pad=0)
    model.init_weights(1)
    model.to(device).train()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=mode == "bf16")
    vocab = common.synthetic_vocab(PAPER.tgt_vocab, "fr")

    def step(idx):
        nll, ntok = shard_nll(model, [pairs[i] for i in idx], vocab=vocab, device=device,
                              autocast=autocast)
        opt.zero_grad(set_to_none=True)
        (nll / len(idx)).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        return ntok

    for idx in batches[:warmup]:
        step(idx)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    words = sum(step(idx) for idx in batches[warmup:warmup + steps])
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    timed = batches[warmup:warmup + steps]
    src = sum(max(len(pairs[i][0]), 1) for idx in timed for i in idx)
    tgt = sum(len(pairs[i][1]) + 1 for idx in timed for i in idx)
    out = {"words": words, "seconds": seconds, "steps": steps,
           "flops_per_word": flops_per_target_word(PAPER, src, tgt),
           "peak_gib": torch.cuda.max_memory_allocated() / 2 ** 30}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=20, help="timed steps per mode")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--modes", default="fp32,bf16")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print(f"bench/gpu.py: no CUDA device (torch {torch.__version__}, "
              f"torch.version.cuda={torch.version.cuda}); this benchmark needs one",
              file=sys.stderr)
        return 2
    name = torch.cuda.get_device_name()
    print(f"bench/gpu.py on {name}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"{torch.cuda.get_device_properties(0).total_memory / 2 ** 30:.0f} GiB")
    pairs = wmt_like_pairs(args.batch * 100)
    lengths = [(len(s), len(t)) for s, t in pairs]
    batches = epoch_batches(len(pairs), lengths, batch_size=args.batch, bucket_batches=100,
                            seed=7, epoch=0)
    print(f"model: paper size, {param_count(PAPER) / 1e6:.1f}M parameters; batch {args.batch}; "
          f"{args.warmup} warm-up + {args.steps} timed steps per mode")
    rows = []
    for mode in [m for m in args.modes.split(",") if m]:
        bf16 = mode == "bf16"
        peak_mm = mm_peak(torch.bfloat16 if bf16 else torch.float32)
        nominal = nominal_peak(name, bf16)
        res = run(mode, pairs, batches, warmup=args.warmup, steps=args.steps)
        wps = res["words"] / res["seconds"]
        achieved = res["flops_per_word"] * wps
        days = RUN_WORDS / wps / 86400
        rows.append([mode, f"{1e3 * res['seconds'] / res['steps']:.0f}", f"{wps:,.0f}",
                     f"{achieved / 1e12:.1f}", f"{peak_mm / 1e12:.1f}",
                     f"{100 * achieved / peak_mm:.1f}",
                     "-" if nominal is None else f"{nominal / 1e12:.0f}",
                     "-" if nominal is None else f"{100 * achieved / nominal:.1f}",
                     f"{res['peak_gib']:.1f}", f"{days:.1f}"])
        print(f"  {mode}: done", flush=True)
    print(common.table(["mode", "ms/step", "tgt words/s", "TFLOP/s", "mm peak", "MFU % (mm)",
                        "nominal", "MFU % (nominal)", "peak GiB", "run days"], rows))
    print("run days: 7.5 epochs x 348M target words at this rate on this one GPU (the paper: "
          "about 10 days on 8 GPUs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
