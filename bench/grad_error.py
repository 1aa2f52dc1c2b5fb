"""Where bf16 training's error comes from: each precision's gradient against the exact one (fp64),
per part of the model, on real batches.

    python bench/grad_error.py --data DEFRUN/data                    # forward and reversed
    python bench/grad_error.py --data DEFRUN/data --warm-steps 400   # a model further in

For each side (forward, reversed source) a model of the default profile's size (2 x 384 LSTM,
the run's vocabularies) starts from the paper's init with seed 11, is trained `--warm-steps`
steps in fp32 (so the gradients are those of a model that has learnt something, not of the
init), then on the next `--batches` minibatches of the training order the gradient of the
summed NLL is computed by `s2s.train.shard_loss`, the trainer's own loss, in each recipe:

- fp32, as `amp: false` trains;
- bf16, as `amp: auto` trains on a CPU with a bf16 engine (`s2s.precision`);
- bf16 with the LSTM stacks in fp32 (only the softmax layer's products in bf16), and bf16 with
  the softmax layer's products in fp32 (the LSTMs in bf16): the two halves of bf16's error, the
  candidates for a mixed recipe;

and in fp64 on a copy of the same weights, the reference. A cell is the relative error
||g - g_fp64|| / ||g_fp64|| of one part's gradient, over the measured batches together.

    python bench/grad_error.py --data DEFRUN/data --evaluate QRUN/models/q_fwd_auto_s14/model.pt

instead evaluates trained checkpoints: the dev perplexity by the trainer's own loss in fp32 and
in bf16, which says whether a model trained in bf16 is judged fairly by the fp32 evaluation
every run reports (no train/eval mismatch) or does better in the precision it was trained in.
bench/README.md ("Where bf16's gradient error comes from") has the tables and what they say.

    python bench/grad_error.py --loop                       # N 64, H 256, T 50, 1 thread

instead measures the weight a loop over time steps multiplies at every step (one peephole LSTM
layer's W_hh, the paper's cell) under bf16 autocast, three ways: autocast's one cached cast of the
weight (its T per-step gradients added in bf16, as the code was), a cast per step (autocast's
cache off: the per-step gradients added in fp32), and ``s2s.model.recurrence`` (one cast, the
per-step operands kept, one fp32-accumulating GEMM over all N*T rows, as the code trains now):
W_hh's gradient against the fp64 sum of the same per-step gradients, and the time of the layer's
forward and backward, the three interleaved over ``--repeats`` rounds, the best of each.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import math
import re
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

import s2s.model.lstm  # noqa: E402
import s2s.train  # noqa: E402
from s2s import precision  # noqa: E402
from s2s.arch.rnn import RNNConfig  # noqa: E402
from s2s.checkpoint import load_model  # noqa: E402
from s2s.config import TrainConfig  # noqa: E402
from s2s.data.batching import epoch_batches, pair_lengths  # noqa: E402
from s2s.model import recurrence  # noqa: E402
from s2s.model.lstm import PeepholeLSTM  # noqa: E402
from s2s.model.seq2seq import Seq2Seq  # noqa: E402

RECIPES = {  # name: (matmul dtype, parts kept in fp32 under it)
    "fp32": (None, ()),
    "bf16": (torch.bfloat16, ()),
    "bf16, fp32 LSTMs": (torch.bfloat16, ("lstm",)),
    "bf16, fp32 softmax layer": (torch.bfloat16, ("softmax",)),
}
LR, CLIP = 0.7, 5.0  # the paper's recipe, as the default profile trains


def part_of(name: str) -> str:
    """The row a parameter's gradient is counted in: the embeddings, each encoder layer, the
    decoder's layers together, the softmax layer."""
    if name.startswith("src_embed."):
        return "encoder embedding"
    if name.startswith("tgt_embed."):
        return "decoder embedding"
    if name.startswith("proj."):
        return "softmax layer"
    if name.startswith("decoder."):
        return "decoder layers"
    m = re.fullmatch(r"encoder\.lstm\.\w+_l(\d+)", name)
    if m:
        return f"encoder layer {int(m.group(1)) + 1}"
    raise ValueError(f"parameter {name!r}: no part of the model's table holds it")


@contextlib.contextmanager
def kept_fp32(parts: tuple[str, ...]):
    """Inside: the LSTM stacks ("lstm") or the softmax layer ("softmax") computed in fp32 under
    bf16 autocast, the rest as it is. The fp32 softmax layer multiplies the LSTM's bf16 outputs,
    exactly widened, by fp32 weights; fp32 LSTMs hand fp32 outputs to a bf16 softmax layer."""
    lstm_cls = s2s.model.lstm.StandardLSTM
    saved = lstm_cls.forward, s2s.train.linear_cross_entropy
    if "lstm" in parts:
        def fp32_forward(self, x, *args, **kwargs):
            with torch.autocast("cpu", enabled=False):
                return saved[0](self, x.float(), *args, **kwargs)
        lstm_cls.forward = fp32_forward
    if "softmax" in parts:
        def fp32_loss(features, *args, mm_dtype=None, **kwargs):
            with torch.autocast("cpu", enabled=False):
                return saved[1](features.float(), *args, mm_dtype=None, **kwargs)
        s2s.train.linear_cross_entropy = fp32_loss
    try:
        yield
    finally:
        lstm_cls.forward, s2s.train.linear_cross_entropy = saved


def gradients(model: Seq2Seq, pairs, vocab, device, autocast) -> dict[str, torch.Tensor]:
    """The gradient of the batch's summed NLL, per parameter, in fp64."""
    model.zero_grad(set_to_none=True)
    loss, _, _ = s2s.train.shard_loss(model, pairs, vocab=vocab, device=device,
                                      autocast=autocast)
    loss.backward()
    return {n: p.grad.detach().double().clone() for n, p in model.named_parameters()
            if p.grad is not None}


def measure(corpus: common.Corpus, *, reverse: bool, warm_steps: int, batches: int, seed: int,
            hidden: int = 384, layers: int = 2, batch_size: int = 64,
            progress=print) -> dict[str, dict[str, float]]:
    """{recipe: {part: relative gradient error}}, with the part "all parameters" too."""
    device = torch.device("cpu")
    cfg = RNNConfig(cell="lstm", num_layers=layers, hidden_size=hidden, embed_size=hidden,
                    reverse_source=reverse, init_seed=seed)
    model = Seq2Seq(cfg, src_vocab=len(corpus.src_vocab), tgt_vocab=len(corpus.tgt_vocab),
                    pad=corpus.src_vocab.pad)
    model.init_weights(seed)
    model.train()
    plan = epoch_batches(*pair_lengths(corpus.pairs), batch_size=batch_size,
                         bucket_batches=100, seed=100 + seed, epoch=0)
    if len(plan) < warm_steps + batches:
        raise SystemExit(f"{len(plan)} minibatches in an epoch: fewer than --warm-steps "
                         f"{warm_steps} + --batches {batches}")
    tcfg = TrainConfig(lr=LR, clip_norm=CLIP)
    opt = s2s.train.make_optimizer(model, tcfg)
    fp32 = precision.autocast(device, None)
    for i, idx in enumerate(plan[:warm_steps]):
        s2s.train.train_step(model, opt, [corpus.pairs[j] for j in idx], batch_size=len(idx),
                             lr=LR, cfg=tcfg, vocab=corpus.tgt_vocab, device=device,
                             autocast=fp32)
        if (i + 1) % 100 == 0:
            progress(f"  {'reversed' if reverse else 'forward'}: {i + 1}/{warm_steps} fp32 "
                     "warm-up steps")
    exact = copy.deepcopy(model).double()
    sq_err: dict[str, dict[str, float]] = {r: {} for r in RECIPES}
    sq_ref: dict[str, float] = {}
    for idx in plan[warm_steps:warm_steps + batches]:
        pairs = [corpus.pairs[j] for j in idx]
        ref = gradients(exact, pairs, corpus.tgt_vocab, device, fp32)
        for n, g in ref.items():
            sq_ref[part_of(n)] = sq_ref.get(part_of(n), 0.0) + float(g.pow(2).sum())
        for recipe, (dtype, parts) in RECIPES.items():
            with kept_fp32(parts):
                got = gradients(model, pairs, corpus.tgt_vocab, device,
                                precision.autocast(device, dtype))
            for n, g in ref.items():
                k = part_of(n)
                sq_err[recipe][k] = sq_err[recipe].get(k, 0.0) + float((got[n] - g).pow(2).sum())
    out = {}
    for recipe in RECIPES:
        out[recipe] = {k: (sq_err[recipe][k] / sq_ref[k]) ** 0.5 for k in sq_ref}
        out[recipe]["all parameters"] = (sum(sq_err[recipe].values())
                                         / sum(sq_ref.values())) ** 0.5
    return out


def dev_perplexity(model, pairs, vocab, dtype: torch.dtype | None, batch_size: int = 64) -> float:
    """exp(summed NLL / target tokens) of `pairs` by `s2s.train.shard_loss` (the trainer's
    loss: fused LSTM, fused softmax layer) with its products in `dtype` (None: fp32)."""
    device = torch.device("cpu")
    model.train()  # the training path; the LSTMs here have no dropout
    nll, tokens = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(pairs), batch_size):
            _, n, k = s2s.train.shard_loss(model, pairs[i:i + batch_size], vocab=vocab,
                                           device=device,
                                           autocast=precision.autocast(device, dtype))
            nll, tokens = nll + float(n), tokens + k
    return math.exp(nll / tokens)


def evaluate(data: Path, checkpoints: list[Path]) -> None:
    """Each checkpoint's dev perplexity in fp32 and in bf16, as a table."""
    dev = common.load_corpus(data, split="dev")
    if dev.origin.startswith("synthetic"):
        raise SystemExit(f"{data}: no prepared/dev.tok.{{en,fr}} and vocab/ there")
    rows = []
    for path in checkpoints:
        model = load_model(path, src_vocab=dev.src_vocab, tgt_vocab=dev.tgt_vocab)
        fp32 = dev_perplexity(model, dev.pairs, dev.tgt_vocab, None)
        bf16 = dev_perplexity(model, dev.pairs, dev.tgt_vocab, torch.bfloat16)
        rows.append([str(path), f"{fp32:.4f}", f"{bf16:.4f}", f"{100 * (bf16 / fp32 - 1):+.3f}%"])
    print(f"\ndev perplexity ({len(dev.pairs)} pairs) by the trainer's loss, in each precision")
    print(common.table(["checkpoint", "fp32", "bf16", "bf16/fp32 - 1"], rows))


LOOP_WAYS = ("one cached cast (before)", "a cast per step", "one fp32 GEMM (now)")


def loop_weight(*, batch: int = 64, hidden: int = 256, steps: int = 50, repeats: int = 3,
                seed: int = 0) -> dict[str, dict[str, float]]:
    """{way: {"error": W_hh's relative gradient error against fp64, "seconds": the best time of
    one forward and backward}} of one peephole layer (H -> H) on a (batch, steps, H) input."""
    torch.manual_seed(seed)
    layer = PeepholeLSTM(hidden, hidden, 1)
    for p in layer.parameters():
        torch.nn.init.uniform_(p, -0.08, 0.08)  # the paper's init
    x = torch.randn(batch, steps, hidden)
    weights = torch.randn(batch, steps, hidden)  # a fixed loss: sum(out * weights)
    operands: list = []
    summed = recurrence.summed_weight_gradient

    def spy(dy, xs):
        operands.append((dy, xs))
        return summed(dy, xs)

    def run(way: str) -> tuple[torch.Tensor, float]:
        layer.zero_grad(set_to_none=True)
        loop = contextlib.nullcontext() if way == LOOP_WAYS[2] else \
            _recurrence_off()
        t0 = time.perf_counter()
        with loop, torch.autocast("cpu", dtype=torch.bfloat16,
                                  cache_enabled=way != LOOP_WAYS[1]):
            out, _ = layer(x)
        (out.float() * weights).sum().backward()
        return layer.cells[0].weight_hh.grad.double(), time.perf_counter() - t0

    recurrence.summed_weight_gradient = spy
    try:
        run(LOOP_WAYS[2])  # the operands of the per-step gradients (the same in all three ways)
    finally:
        recurrence.summed_weight_gradient = summed
    (dy, xs), = operands
    exact = dy.double().t() @ xs.double()  # the per-step gradients summed in fp64
    times: dict[str, list[float]] = {w: [] for w in LOOP_WAYS}
    errors = {}
    for _ in range(repeats):  # interleaved
        for way in LOOP_WAYS:
            grad, seconds = run(way)
            times[way].append(seconds)
            errors[way] = float((grad - exact).norm() / exact.norm())
    # the best round of each: the one least disturbed by other jobs on the machine
    return {w: {"error": errors[w], "seconds": min(times[w])} for w in LOOP_WAYS}


@contextlib.contextmanager
def _recurrence_off():
    """Inside: every per-step product is autocast's own F.linear, as before s2s.model.recurrence."""
    saved = recurrence.steps
    recurrence.steps = lambda x: contextlib.nullcontext()
    try:
        yield
    finally:
        recurrence.steps = saved


def print_loop_weight(args) -> None:
    threads = common.set_threads(args.threads)
    print(common.machine_line(threads))
    print(f"one peephole LSTM layer, N {args.batch_size}, H {args.hidden}, T {args.steps}, bf16 "
          f"autocast, {args.repeats} interleaved rounds, the best of each", flush=True)
    res = loop_weight(batch=args.batch_size, hidden=args.hidden, steps=args.steps,
                      repeats=args.repeats)
    base = res[LOOP_WAYS[0]]["seconds"]
    rows = [[way, f"{r['error']:.2e}", f"{r['seconds']:.3f}", f"{r['seconds'] / base:.2f}"]
            for way, r in res.items()]
    print(common.table(["W_hh's gradient", "rel. error vs fp64", "fwd+bwd s",
                        "time / before"], rows))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path,
                    help="a run's data folder: prepared/train.tok.{en,fr} and vocab/{en,fr}.tsv")
    ap.add_argument("--warm-steps", type=int, default=200,
                    help="fp32 training steps before the gradients are measured (default 200)")
    ap.add_argument("--batches", type=int, default=4, help="minibatches measured (default 4)")
    ap.add_argument("--sides", default="fwd,rev", help="fwd, rev or both (default fwd,rev)")
    ap.add_argument("--seed", type=int, default=11, help="init seed; order seed 100 + it")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--evaluate", type=Path, nargs="+", metavar="MODEL_PT",
                    help="instead: these checkpoints' dev perplexity in fp32 and in bf16")
    ap.add_argument("--loop", action="store_true",
                    help="instead: a loop weight's gradient error and cost (one peephole layer)")
    ap.add_argument("--batch-size", type=int, default=64, help="--loop: N (default 64)")
    ap.add_argument("--hidden", type=int, default=256, help="--loop: H (default 256)")
    ap.add_argument("--steps", type=int, default=50, help="--loop: T (default 50)")
    ap.add_argument("--repeats", type=int, default=5, help="--loop: rounds (default 5)")
    args = ap.parse_args(argv)
    if args.loop:
        print_loop_weight(args)
        return
    if args.data is None:
        ap.error("--data is required (but for --loop)")
    if args.evaluate:
        print(common.machine_line(common.set_threads(args.threads)))
        evaluate(args.data, args.evaluate)
        return
    sides = args.sides.split(",")
    for side in sides:
        if side not in ("fwd", "rev"):
            raise SystemExit(f"--sides: {side!r} is not fwd or rev")
    threads = common.set_threads(args.threads)
    corpus = common.load_corpus(args.data)
    if corpus.origin.startswith("synthetic"):
        raise SystemExit(f"{args.data}: no prepared/ and vocab/ there; this benchmark measures "
                         "real sentences (a run's data folder)")
    print(common.machine_line(threads))
    print(corpus.origin)
    print(f"2 x 384 LSTM, seed {args.seed}: {args.warm_steps} fp32 warm-up steps, then "
          f"{args.batches} measured batches of 64", flush=True)
    for side in sides:
        res = measure(corpus, reverse=side == "rev", warm_steps=args.warm_steps,
                      batches=args.batches, seed=args.seed,
                      progress=lambda line: print(line, flush=True))
        first = ["encoder embedding"]  # then the encoder's layers, the decoder, the softmax
        last = ["decoder embedding", "decoder layers", "softmax layer", "all parameters"]
        parts = first + sorted(k for k in res["fp32"] if k not in first + last) + last
        rows = [[part] + [f"{res[r][part]:.2e}" for r in RECIPES] for part in parts]
        print(f"\n{'reversed' if side == 'rev' else 'forward'} source: relative gradient error "
              "against fp64")
        print(common.table(["part"] + list(RECIPES), rows), flush=True)


if __name__ == "__main__":
    main()
