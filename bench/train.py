"""Training throughput of our real training step: target words/s, model FLOPs, MFU, memory.

    python bench/train.py --quick                     # seconds per row: checks the benchmark runs
    python bench/train.py --data /tmp/defrun/data     # real Multi30k batches, both sizes
    python bench/train.py --sizes default --profile   # + torch.profiler breakdown of one step

One step is ``s2s.train.train_step``, the function the trainer calls per minibatch (collate,
teacher forcing, the fused softmax-layer loss summed over tokens, / sentences in the batch,
zero_grad, backward, clip_grad_norm_(5), SGD step at lr 0.7): `OurStep` calls it, so the timed
step is the trainer's. Extra default-size rows:
"(equal-length batches)" = our step on the reference's batches; "(unfused)" = the step before
s2s.losses and s2s.model.fused (nn.LSTM, proj + F.cross_entropy over all positions).

Rows: model size (`default`: 2 x 384, E 384 (the default profile's LSTMs), the Multi30k vocabularies; `paper`: 4 x 1000, E 1000,
vocab 160k/80k) x cell (`lstm`: nn.LSTM; `peephole`: our PeepholeLSTM), and a naive reference at
the default size: nn.Embedding + nn.LSTM encoder/decoder + nn.Linear + cross-entropy on batches of
equal-length sentences (no padding, no packing, no collate), same loss, clipping and SGD. The
default rows are timed in interleaved rounds (each round runs every row on the same batches, in
rotated order) so that a change in the machine's load hits all rows alike; "vs ref" is the median
over rounds of the per-round ratio of words per CPU second (process CPU time is far steadier than
wall time on a machine shared with other jobs; with more than one thread it also counts OpenMP
spin-waiting). Words/s, GFLOP/s and MFU are from wall time.

FLOPs per target word (matmuls only, the usual MFU convention: gate non-linearities, peepholes,
embedding lookups, the softmax's exp/normalisation and the optimizer are not counted):

    F_lstm(E, H, L) = sum_{l=1..L} 2 * 4H * (E_l + H),   E_1 = E, E_l = H for l > 1
                      (one token through one L-layer stack: W_ih x and W_hh h of the 4 gates)
    F_fwd  = S_tok * F_lstm  +  T_tok * (F_lstm + 2 * H * V_tgt)     (encoder, decoder, softmax)
    F_word = 3 * F_fwd / T_tok                  (backward = 2 x forward: inputs' and weights' grads)

S_tok, T_tok: real source tokens and real target tokens (y_1 .. y_n <eos>) of the timed batches;
padding is not counted, so work spent on padding shows as lower MFU. Default size, 2 x 384
(V_tgt 6503): F_lstm = 4.72 M, softmax 4.99 M, F_word ~ 41.4 M at Multi30k's S/T = 13.1/15.1
(2 x 256: 2.10 M, 3.33 M, 21.8 M). Paper size
(V_tgt 80k): F_lstm = 64 M, softmax 160 M, F_word ~ 838 M.

MFU = F_word x words/s / peak, the peak being the best 2048^3 torch.mm of this same run at the
same thread count in the row's dtype (fp32 rows: fp32 peak; bf16 rows: bf16 peak, so a bf16 row's
MFU says how much of the bf16 matrix engine it uses), measured before and after the rows. On a
CPU without a bf16 engine, bf16 is emulated and the bf16 peak is a 512^3 product's (the peak line
says which).

Precision (`--precisions fp32,bf16`): every row in each. Our bf16 rows run s2s.train's step under
`train.amp` (s2s.precision: bf16 products in the fused LSTM and loss, fp32 state, loss, weights and
SGD); the reference's bf16 rows wrap its forward and loss in `torch.autocast("cpu", bfloat16)`, the
textbook recipe. Each row runs under its precision's plan (s2s.precision.plan, `amp` = bf16),
applied before each of its steps, as the rows run interleaved: on CUDA an fp32 row is strict fp32
(torch's defaults would run cuDNN's fp32 LSTM in TF32) and a bf16 row keeps TF32 for its fp32
parts, as s2s.train does; off CUDA applying a plan changes nothing. "vs ref" is always against the
fp32 reference. "cpu MFU" is the
same ratio per CPU second of this process (model FLOPs / CPU s over GEMM FLOPs / CPU s): on a
machine shared with other jobs wall-clock MFU moves with their load, this one far less.

Memory: each row is built and run for a few steps in a separate probe process whose malloc
returns every tensor over 64 KiB to the OS when freed (MALLOC_MMAP_THRESHOLD_), so RSS follows
the live tensors; "peak MiB" is that process's RSS high-water mark during model construction and
one step, minus its RSS just before: weights + gradients + activations + temporaries (on CUDA:
torch.cuda.max_memory_allocated instead). The paper rows are also timed in that process (their
tensors are mmapped either way): one untimed step, then one timed step.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

from s2s import precision  # noqa: E402
from s2s.config import TrainConfig  # noqa: E402
from s2s.data.batching import collate, epoch_batches, pair_lengths  # noqa: E402
from s2s.model.seq2seq import RNNConfig, Seq2Seq  # noqa: E402
from s2s.train import make_optimizer, train_step  # noqa: E402

LR = 0.7  # the paper's SGD rate; params.yaml train.lr
CLIP = 5.0  # train.clip_norm
BUCKET_BATCHES = 100  # train.bucket_batches


@dataclass(frozen=True)
class Size:
    name: str
    layers: int
    hidden: int
    embed: int
    src_vocab: int
    tgt_vocab: int


@dataclass(frozen=True)
class Row:
    size: Size
    impl: str  # one of IMPLS
    cell: str  # "lstm" (nn.LSTM) or "peephole" (PeepholeLSTM)
    batch: int
    precision: str = "fp32"  # or "bf16": s2s.precision for ours, torch.autocast for the reference

    @property
    def label(self) -> str:
        bf16 = " bf16" if self.precision == "bf16" else ""
        return f"{self.size.name}/{self.cell}{bf16}{IMPLS[self.impl]}"

    @property
    def dtype(self) -> torch.dtype | None:
        return torch.bfloat16 if self.precision == "bf16" else None


# Row kinds: the suffix of their label.
IMPLS = {
    "ours": "",  # s2s.train's step on its bucketed, padded batches
    "ours-equal": " (equal-length batches)",  # the same step on the reference's batches
    "unfused": " (unfused)",  # the step before s2s.losses / s2s.model.fused: nn.LSTM everywhere,
    #                           proj + F.cross_entropy over all positions
    "reference": " (reference)",
}


def lstm_flops(embed: int, hidden: int, layers: int) -> int:
    """Matmul FLOPs of one token through an L-layer stack (see the module docstring)."""
    return sum(2 * 4 * hidden * ((embed if k == 0 else hidden) + hidden) for k in range(layers))


def flops_per_target_word(size: Size, src_tokens: int, tgt_tokens: int) -> float:
    f_lstm = lstm_flops(size.embed, size.hidden, size.layers)
    forward = src_tokens * f_lstm + tgt_tokens * (f_lstm + 2 * size.hidden * size.tgt_vocab)
    return 3 * forward / tgt_tokens


def param_count(size: Size) -> int:
    E, H, L = size.embed, size.hidden, size.layers
    stack = sum(4 * H * ((E if k == 0 else H) + H) + 8 * H for k in range(L))  # nn.LSTM: 2 biases
    return (size.src_vocab + size.tgt_vocab) * E + 2 * stack + H * size.tgt_vocab + size.tgt_vocab


# ---------------------------------------------------------------------------------------------
# The two steps


_PROFILING = False  # set by profile_steps


def phase(name: str):
    """A record_function label around a part of the step, while profiling; else nothing."""
    return torch.profiler.record_function(name) if _PROFILING else contextlib.nullcontext()


class OurStep:
    """One iteration of the trainer on a Seq2Seq of `row`'s size and cell, as one process runs
    it: `s2s.train.train_step` itself (collate, forward, loss, zero_grad, backward, clipping,
    the optimizer's step).

    impl "ours-equal" feeds it the reference's equal-length batches; "unfused" replaces
    shard_nll's fused loss and CPU LSTM by nn.LSTM and proj + F.cross_entropy (the step as it
    was before them)."""

    def __init__(self, row: Row, corpus: common.Corpus, device: torch.device, seed: int = 1):
        s = row.size
        cfg = RNNConfig(cell=row.cell, num_layers=s.layers, hidden_size=s.hidden,
                          embed_size=s.embed, reverse_source=True, init_seed=seed)
        self.model = Seq2Seq(cfg, src_vocab=s.src_vocab, tgt_vocab=s.tgt_vocab,
                             pad=corpus.src_vocab.pad)
        self.model.init_weights(seed)
        self.model.to(device).train()
        self.unfused = row.impl == "unfused"
        if self.unfused:
            for stack in (self.model.encoder, self.model.decoder):
                stack.fused_cpu = False  # a no-op for PeepholeLSTM
        self.equal = ReferenceStep.equal_length(corpus) if row.impl == "ours-equal" else None
        self.cfg = TrainConfig(lr=LR, clip_norm=CLIP)  # the paper's recipe
        self.opt = make_optimizer(self.model, self.cfg)
        self.pairs, self.vocab, self.device = corpus.pairs, corpus.tgt_vocab, device
        self.autocast = precision.autocast(device, row.dtype)  # what s2s.train passes
        self.plan = row_plan(row.precision, device)

    def __call__(self, idx: list[int]) -> int:
        self.plan.apply()  # on CUDA the TF32 flags of this row's precision
        vocab, model, opt = self.vocab, self.model, self.opt
        pairs = self.equal(idx) if self.equal else [self.pairs[i] for i in idx]
        if not self.unfused:  # the trainer's own step, as s2s.train.run calls it
            nll, ntok = train_step(model, opt, pairs, batch_size=len(idx), lr=LR, cfg=self.cfg,
                                   vocab=vocab, device=self.device, autocast=self.autocast)
            if not math.isfinite(nll):
                raise RuntimeError(f"non-finite loss {nll / len(idx)}")
            common.sync(self.device)
            return ntok
        for group in opt.param_groups:
            group["lr"] = LR
        with phase("forward+loss"):
            b = collate(pairs, pad=vocab.pad, bos=vocab.bos, eos=vocab.eos).to(self.device)
            logits = model(b.src, b.src_lengths, b.tgt_in)  # (N, T, V)
            nll = nn.functional.cross_entropy(logits.flatten(0, 1), b.tgt_out.flatten(),
                                              ignore_index=vocab.pad, reduction="sum")
            ntok = b.ntokens
            loss = nll / len(idx)
            if not torch.isfinite(loss):
                raise RuntimeError(f"non-finite loss {loss.item()}")
        with phase("zero_grad"):
            opt.zero_grad(set_to_none=True)
        with phase("backward"):
            loss.backward()
        with phase("clip_grad_norm"):
            nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        with phase("optimizer_step"):
            opt.step()
        common.sync(self.device)
        nll.item()
        return ntok


class NaiveSeq2Seq(nn.Module):
    """The textbook model: embeddings, an nn.LSTM encoder whose final (h, c) starts an nn.LSTM
    decoder, a linear softmax layer. No packing, no masking, no source reversal."""

    def __init__(self, size: Size):
        super().__init__()
        self.src_embed = nn.Embedding(size.src_vocab, size.embed)
        self.tgt_embed = nn.Embedding(size.tgt_vocab, size.embed)
        self.encoder = nn.LSTM(size.embed, size.hidden, size.layers, batch_first=True)
        self.decoder = nn.LSTM(size.embed, size.hidden, size.layers, batch_first=True)
        self.proj = nn.Linear(size.hidden, size.tgt_vocab)

    def forward(self, src, tgt_in):
        _, state = self.encoder(self.src_embed(src))  # (L, N, H) x 2
        out, _ = self.decoder(self.tgt_embed(tgt_in), state)  # (N, T, H)
        return self.proj(out)  # (N, T, V)


def _fit(ids: list[int], n: int) -> list[int]:
    """`ids` cut or repeated to length n."""
    ids = ids or [0]
    return (ids * (n // len(ids) + 1))[:n]


def row_plan(prec: str, device: torch.device) -> precision.Precision:
    """The precision a row of `prec` ("fp32" or "bf16") runs under: s2s.train's for `train.amp`
    = bf16. Applied before each step of the row: the rows run interleaved, and a plan applied
    once would hold for the next row too."""
    return precision.plan(prec == "bf16", device_type=device.type,
                          engine=precision.bf16_engine(device))


class ReferenceStep:
    """The naive step on batches of equal-length sentences: for each of our batches, N sentences
    of its mean source length and mean target length (so about the same words per batch)."""

    def __init__(self, row: Row, corpus: common.Corpus, device: torch.device, seed: int = 1):
        torch.manual_seed(seed)
        self.model = NaiveSeq2Seq(row.size)
        with torch.no_grad():
            for p in self.model.parameters():
                p.uniform_(-0.08, 0.08)
        self.model.to(device).train()
        self.cfg = TrainConfig(lr=LR, clip_norm=CLIP)  # the paper's recipe
        self.opt = make_optimizer(self.model, self.cfg)
        self.pairs, self.vocab, self.device = corpus.pairs, corpus.tgt_vocab, device
        self.equal = self.equal_length(corpus)
        self._cache: dict[tuple[int, ...], tuple] = {}
        # bf16: the textbook recipe, one context manager around forward and loss
        self.autocast = torch.autocast(device.type, dtype=torch.bfloat16,
                                       enabled=row.precision == "bf16")
        self.plan = row_plan(row.precision, device)

    @staticmethod
    def equal_length(corpus: common.Corpus):
        """A function of a batch's indices: its N sentences cut or repeated to the batch's mean
        source and target length, as (source ids, target ids) pairs."""
        def pairs_of(idx: list[int]) -> list[tuple[list[int], list[int]]]:
            pairs = [corpus.pairs[i] for i in idx]
            n = len(pairs)
            S = max(1, round(sum(len(s) for s, _ in pairs) / n))
            T = max(1, round(sum(len(t) + 1 for _, t in pairs) / n))  # + <eos>
            return [(_fit(s, S), _fit(t, T - 1)) for s, t in pairs]
        return pairs_of

    def rows_of(self, idx: list[int]):
        key = tuple(idx)
        if key not in self._cache:
            pairs = self.equal(idx)
            self._cache[key] = ([s for s, _ in pairs], [[self.vocab.bos] + t for _, t in pairs],
                                [t + [self.vocab.eos] for _, t in pairs])
        return self._cache[key]

    def __call__(self, idx: list[int]) -> int:
        self.plan.apply()  # on CUDA the TF32 flags of this row's precision
        src_rows, in_rows, out_rows = self.rows_of(idx)
        src = torch.tensor(src_rows, device=self.device)  # (N, S)
        tgt_in = torch.tensor(in_rows, device=self.device)  # (N, T)
        tgt_out = torch.tensor(out_rows, device=self.device)  # (N, T)
        with self.autocast:
            logits = self.model(src, tgt_in)
            loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), tgt_out.flatten(),
                                               reduction="sum") / len(src_rows)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(self.model.parameters(), CLIP)
        self.opt.step()
        common.sync(self.device)
        loss.item()
        return tgt_out.numel()


def make_runner(row: Row, corpus: common.Corpus, device: torch.device):
    return (ReferenceStep if row.impl == "reference" else OurStep)(row, corpus, device)


def batch_plan(corpus: common.Corpus, batch_size: int, n: int, seed: int = 7) -> list[list[int]]:
    """The first n minibatches of a training epoch, as s2s.train would form them (length buckets
    of `bucket_batches` batches, shuffled), cycling if the corpus has fewer."""
    batches = epoch_batches(*pair_lengths(corpus.pairs), batch_size=batch_size,
                            bucket_batches=BUCKET_BATCHES, seed=seed, epoch=0)
    return [batches[k % len(batches)] for k in range(n)]


def batch_stats(corpus: common.Corpus, batches: list[list[int]]) -> dict:
    """Real source/target tokens and the share of padded positions on each side."""
    src_tok = tgt_tok = src_pos = tgt_pos = 0
    for idx in batches:
        s = [max(len(corpus.pairs[i][0]), 1) for i in idx]
        t = [len(corpus.pairs[i][1]) + 1 for i in idx]
        src_tok, tgt_tok = src_tok + sum(s), tgt_tok + sum(t)
        src_pos, tgt_pos = src_pos + len(idx) * max(s), tgt_pos + len(idx) * max(t)
    return {"src_tokens": src_tok, "tgt_tokens": tgt_tok,
            "src_pad": 1 - src_tok / src_pos, "tgt_pad": 1 - tgt_tok / tgt_pos}


# ---------------------------------------------------------------------------------------------
# Timing


def time_interleaved(runners: dict[str, object], batches: list[list[int]], *, warmup: int,
                     rounds: int, per_round: int) -> dict[str, dict]:
    """Time every runner on the same batches, round-robin; order rotated each round."""
    names = list(runners)
    for name in names:
        for k in range(warmup):
            runners[name](batches[k])
    per: dict[str, list[tuple[int, common.Clock]]] = {n: [] for n in names}
    for r in range(rounds):
        chunk = batches[warmup + r * per_round: warmup + (r + 1) * per_round]
        for name in names[r % len(names):] + names[: r % len(names)]:
            with common.Clock() as clock:
                words = sum(runners[name](idx) for idx in chunk)
            per[name].append((words, clock))
    return {n: {"words": sum(w for w, _ in v), "seconds": sum(c.wall for _, c in v),
                "cpu_seconds": sum(c.cpu for _, c in v),
                "round_rates": [w / c.cpu for w, c in v], "steps": rounds * per_round}
            for n, v in per.items()}


def run_probe(rows: list[Row], corpus: common.Corpus, device: torch.device, *, mem_steps: int,
              timed: dict[str, int]) -> dict[str, dict]:
    """Per row, in this (probe) process: peak RSS over building the model and `mem_steps` steps;
    then, for rows named in `timed`, that many more steps timed."""
    # One step of a tiny model of every kind first: one-time allocations of the libraries (oneDNN
    # primitives, MKL buffers, autograd engine) then count against no row.
    for impl, cell, prec in {(r.impl, r.cell, r.precision) for r in rows}:
        tiny = Row(Size("tiny", 1, 8, 8, len(corpus.src_vocab), len(corpus.tgt_vocab)), impl, cell,
                   4, prec)
        make_runner(tiny, corpus, device)(batch_plan(corpus, 4, 1)[0])
    out = {}
    for row in rows:
        batches = batch_plan(corpus, row.batch, mem_steps + timed.get(row.label, 0))
        gc.collect()
        base = common.rss_mib()
        exact = common.reset_peak_rss()
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
            base = torch.cuda.memory_allocated(device) / 2 ** 20
        runner = make_runner(row, corpus, device)
        for idx in batches[:mem_steps]:
            runner(idx)
        peak = (torch.cuda.max_memory_allocated(device) / 2 ** 20 if device.type == "cuda"
                else common.peak_rss_mib())
        res = {"peak_mib": peak - base, "exact": exact}
        if row.label in timed:
            with common.Clock() as clock:
                words = sum(runner(idx) for idx in batches[mem_steps:])
            res.update(words=words, seconds=clock.wall, cpu_seconds=clock.cpu,
                       steps=timed[row.label], **batch_stats(corpus, batches[mem_steps:]))
        out[row.label] = res
        del runner
        gc.collect()
    return out


def probe_subprocess(args, rows: list[Row], timed: dict[str, int], mem_steps: int) -> dict:
    cmd = [sys.executable, __file__, "--_probe", json.dumps({
        "rows": [asdict(r) for r in rows], "timed": timed, "mem_steps": mem_steps})]
    cmd += ["--threads", str(args.threads), "--device", args.device]
    if args.data:
        cmd += ["--data", str(args.data)]
    proc = subprocess.run(cmd, env=common.probe_env(), capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"probe failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("PROBE ")][-1]
    return json.loads(line[len("PROBE "):])


# ---------------------------------------------------------------------------------------------
# Profile


def profile_steps(row: Row, corpus: common.Corpus, device: torch.device, *, steps: int,
                  warmup: int = 2) -> str:
    """torch.profiler over `steps` steps (after `warmup` steps): time per phase of the step,
    per part of the model (the fused LSTM layers' and loss's autograd Functions, forward and
    backward), then the operators with the most self CPU time."""
    from torch.profiler import ProfilerActivity, profile

    runner = OurStep(row, corpus, device)
    batches = batch_plan(corpus, row.batch, steps + warmup)
    for idx in batches[:warmup]:
        runner(idx)
    global _PROFILING
    _PROFILING = True
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for idx in batches[warmup:]:
            runner(idx)
    wall = (time.perf_counter() - t0) / steps * 1e3
    _PROFILING = False
    ev = {e.key: e for e in prof.key_averages()}

    def ms(key):
        return ev[key].cpu_time_total / 1e3 / steps if key in ev else 0.0

    phases = ["forward+loss", "zero_grad", "backward", "clip_grad_norm", "optimizer_step"]
    total = sum(ms(p) for p in phases)
    parts = {"forward+loss": [("LSTM layers (4)", "_LSTMLayer"),
                              ("softmax layer + loss", "_LinearCrossEntropy")],
             "backward": [("LSTM layers (4)", "_LSTMLayerBackward"),
                          ("softmax layer + loss", "_LinearCrossEntropyBackward")]}
    rows = []
    for p in phases:
        rows.append([p, f"{ms(p):.1f}", f"{100 * ms(p) / total:.1f}"])
        rest = ms(p)
        for name, key in parts.get(p, []):
            if key in ev:
                rows.append([f"  {name}", f"{ms(key):.1f}", f"{100 * ms(key) / total:.1f}"])
                rest -= ms(key)
        if p in parts:
            rows.append(["  other (collate, embeddings, reversal, ...)", f"{rest:.1f}",
                         f"{100 * rest / total:.1f}"])
    out = [f"profile of {row.label}, batch {row.batch}: {steps} steps, {wall:.0f} ms/step wall "
           f"(profiled), phases sum {total:.0f} ms/step",
           common.table(["phase", "ms/step", "%"], rows)]
    top = sorted((e for e in prof.key_averages() if e.key not in phases
                  and not e.key.startswith(("ProfilerStep", "_LSTMLayer", "_LinearCrossEntropy",
                                            "autograd::engine"))),
                 key=lambda e: -e.self_cpu_time_total)[:15]
    out.append(common.table(
        ["operator (top self CPU)", "calls/step", "self ms/step", "%"],
        [[e.key[:60], f"{e.count / steps:.0f}", f"{e.self_cpu_time_total / 1e3 / steps:.1f}",
          f"{100 * e.self_cpu_time_total / 1e3 / steps / total:.1f}"] for e in top]))
    return "\n\n".join(out)


# ---------------------------------------------------------------------------------------------


def _peak_size(device: torch.device, prec: str) -> tuple[int, int]:
    """The n of the n^3 torch.mm a precision's peak is measured on, and its runs (each taken
    before and after the rows): 2048^3, 8 runs; for bf16 without a bf16 engine, which is emulated
    and takes minutes at 2048, 512^3, 2 runs."""
    if prec == "bf16" and device.type == "cpu" and precision.bf16_engine(device) is None:
        return 512, 2
    return 2048, 8


def _peak(device: torch.device, prec: str) -> tuple[float, float]:
    row_plan(prec, device).apply()  # fp32's peak under strict fp32 on CUDA, as its rows run
    n, reps = _peak_size(device, prec)
    return common.peak_gemm_flops(device, dtype=torch.bfloat16 if prec == "bf16" else
                                  torch.float32, n=n, reps=reps)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a few steps per row (seconds)")
    ap.add_argument("--sizes", default="default,paper", help="comma list of default, paper")
    ap.add_argument("--cells", default="lstm,peephole", help="comma list of lstm, peephole")
    ap.add_argument("--data", type=Path, help="a data dir holding prepared/ and vocab/ "
                    "(e.g. /tmp/defrun/data); default: synthetic Multi30k-like sentences")
    ap.add_argument("--batch-default", type=int, default=64)
    ap.add_argument("--hidden-default", type=int, default=384,
                    help="cells (= embedding size) of the default-size rows: the default profile's")
    ap.add_argument("--batch-paper", type=int, default=None,
                    help="default 128 (16 with --quick: one 128-sentence step of the 384M-"
                         "parameter model takes most of a minute on 2 cores)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads; 0: torch's default")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--no-memory", action="store_true", help="skip the memory probe process")
    ap.add_argument("--no-reference", action="store_true")
    ap.add_argument("--precisions", default="fp32,bf16",
                    help="comma list of fp32, bf16: ours and the reference in each")
    ap.add_argument("--no-extra", action="store_true",
                    help="skip the (equal-length batches) and (unfused) rows")
    ap.add_argument("--profile", action="store_true",
                    help="also profile a few steps of each of our rows (phases, top operators)")
    ap.add_argument("--_probe", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    threads = common.set_threads(args.threads)
    device = torch.device(args.device)
    corpus = common.load_corpus(args.data)
    if args._probe:
        spec = json.loads(args._probe)
        rows = [Row(Size(**r.pop("size")), **r) for r in spec["rows"]]  # noqa: F841
        print("PROBE " + json.dumps(run_probe(rows, corpus, device, mem_steps=spec["mem_steps"],
                                              timed=spec["timed"])))
        return

    sizes = {
        "default": Size("default", 2, args.hidden_default, args.hidden_default,
                        len(corpus.src_vocab), len(corpus.tgt_vocab)),
        "paper": Size("paper", 4, 1000, 1000, 160_000, 80_000),
    }
    want_sizes = [s for s in args.sizes.split(",") if s]
    cells = [c for c in args.cells.split(",") if c]
    batch_paper = args.batch_paper or (16 if args.quick else 128)
    precisions = [p for p in args.precisions.split(",") if p]
    rows: list[Row] = []
    for s in want_sizes:
        batch = args.batch_default if s == "default" else batch_paper
        for prec in precisions:
            rows += [Row(sizes[s], "ours", c, batch, prec) for c in cells]
            if s == "default" and "lstm" in cells and prec == "fp32" and not args.no_extra:
                rows += [Row(sizes[s], "ours-equal", "lstm", batch),
                         Row(sizes[s], "unfused", "lstm", batch)]
            if s == "default" and not args.no_reference:
                rows.append(Row(sizes[s], "reference", "lstm", batch, prec))
    default_rows = [r for r in rows if r.size.name == "default"]
    paper_rows = [r for r in rows if r.size.name == "paper"]
    # Rounds of one or two steps: the per-round ratios to the reference then see the same load.
    warmup, rounds, per_round = (1, 4, 1) if args.quick else (2, 10, 2)
    paper_steps = 1  # after one untimed step (memory, warm-up): ~25 s at batch 128 on 2 cores

    print(f"bench/train.py {'--quick ' if args.quick else ''}on {common.machine_line(threads)}")
    print(f"data: {corpus.origin}")
    # the peaks of the precisions asked for (a bf16 2048^3 product without a bf16 engine is
    # emulated and takes minutes: a smaller one there)
    peaks = {p: _peak(device, p) for p in precisions}

    # Memory of every row, and the paper rows' timing, in the probe process (nothing else runs).
    probe = {}
    if paper_rows or not args.no_memory:
        probe = probe_subprocess(args, paper_rows if args.no_memory else rows,
                                 {r.label: paper_steps for r in paper_rows}, mem_steps=1)

    results: dict[str, dict] = {}
    if default_rows:
        batches = batch_plan(corpus, args.batch_default, warmup + rounds * per_round)
        stats = batch_stats(corpus, batches[warmup:])
        runners = {r.label: make_runner(r, corpus, device) for r in default_rows}
        timed = time_interleaved(runners, batches, warmup=warmup, rounds=rounds,
                                 per_round=per_round)
        for r in default_rows:
            results[r.label] = {**timed[r.label], **stats}
        del runners
        gc.collect()
    for r in paper_rows:
        results[r.label] = probe[r.label]
    for p in precisions:
        again = _peak(device, p)
        peaks[p] = (max(peaks[p][0], again[0]), max(peaks[p][1], again[1]))

    ref_label = next((r.label for r in default_rows
                      if r.impl == "reference" and r.precision == "fp32"), None)
    table_rows = []
    for r in rows:
        res = results[r.label]
        wps = res["words"] / res["seconds"]
        fpw = flops_per_target_word(r.size, res["src_tokens"], res["tgt_tokens"])
        pad = ("0/0" if r.impl in ("reference", "ours-equal")
               else f"{100 * res['src_pad']:.0f}/{100 * res['tgt_pad']:.0f}")
        vs = ""
        if ref_label and r.size.name == "default":
            ratios = [a / b for a, b in zip(res["round_rates"], results[ref_label]["round_rates"])]
            vs = f"{statistics.median(ratios):.2f}"
        mem = probe.get(r.label, {}).get("peak_mib")
        peak, peak_cpu = peaks[r.precision]  # MFU against the peak of the dtype in use
        table_rows.append([
            r.label, str(r.batch), f"{param_count(r.size) / 1e6:.1f}M", pad, str(res["steps"]),
            f"{1e3 * res['seconds'] / res['steps']:.0f}",
            f"{1e3 * res['cpu_seconds'] / res['steps']:.0f}", f"{wps:,.0f}", f"{fpw / 1e6:.1f}",
            f"{fpw * wps / 1e9:.1f}", f"{100 * fpw * wps / peak:.1f}",
            f"{100 * fpw * res['words'] / res['cpu_seconds'] / peak_cpu:.1f}",
            "-" if mem is None else f"{mem:,.0f}", vs])
    print(common.table(
        ["row", "batch", "params", "pad% s/t", "steps", "ms/step", "cpu ms", "tgt words/s",
         "MFLOP/word", "GFLOP/s", "MFU %", "cpu MFU %", "peak MiB", "vs ref"], table_rows))
    for p, (peak, peak_cpu) in peaks.items():
        n, reps = _peak_size(device, p)
        print(f"peak: {p} {n}^3 torch.mm {peak / 1e9:.1f} GFLOP/s at {threads} threads, "
              f"{peak_cpu / 1e9:.1f} GFLOP per CPU second (best of {2 * reps} runs, before and "
              f"after the rows)")
    print(f"vs ref: per-round ratio to the fp32 reference; load average "
          f"{os.getloadavg()[0]:.2f} at end")
    if probe and not all(v.get("exact", True) for v in probe.values()):
        print("note: /proc/self/clear_refs not writable: peak MiB is the probe's lifetime peak")
    if args.profile:
        for r in rows:
            if r.impl == "ours":
                print()
                paper = r.size.name == "paper"
                print(profile_steps(r, corpus, device, warmup=1 if paper else 2,
                                    steps=1 if paper else 3 if args.quick else 5))


if __name__ == "__main__":
    main()
