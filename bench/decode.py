"""Decoding throughput: sentences/s of our batched beam search, one model and ensembles.

    python bench/decode.py --quick                    # 30 sentences, random default-size models
    python bench/decode.py --threads 1                # 200 sentences
    python bench/decode.py --models /tmp/defrun/models --data /tmp/defrun/data   # trained models

Rows: one model at beam 1, 2, 12; ensembles of 2 and 5 models at beam 2 and 12, all through
``s2s.decode.translate.translate`` (length-sorted batches of `--batch-size` sentences, each
searched as one batch of sentences x beams, finished sentences dropped from the batch), and a
naive reference at beam 12: one sentence at a time, a Python list of hypotheses, each step one
``model.step`` over that sentence's B hypotheses, then candidates ranked with a Python sort. Both
searches use the same model objects, the same candidate rule (of the best candidates, <eos> among
the B best finish; the B best others form the next beam), the same stopping rules (best finished
>= best open, B finished, or max_len = 1.5 x source length + 10 steps) and ban <pad>, so they do
the same work and should return the same 1-best (ties aside): the agreement is printed.

Models: default size (2 x 384, E 384, nn.LSTM unless --cell peephole, reversed source; or with
--cell transformer the default profile's Transformer, decoding with its key/value cache), randomly
initialised (uniform +-0.08, seeds 11..15), or loaded from `--models DIR/<member>/model.pt`
(best.pt if there is no model.pt yet) with the vocabularies of `--data DIR/vocab`. Random weights
give near-uniform next-word distributions: hypotheses rarely take <eos> and run to max_len, so
every row does its worst-case number of steps; trained models stop earlier (see "mean len" and
"eos %"). Sources: `--data DIR/prepared/test.tok.en` (first N) if given, else synthetic sentences
with Multi30k-like lengths.

Columns: wall s / cpu s = wall and process CPU seconds of the whole translate() call (encoding,
search, hypothesis bookkeeping); sent/s, ms/sent from wall time; "cost x" = CPU seconds relative
to one model at beam 12 (the paper's caption: five models at beam 2 cost less than one at beam
12); "vs naive" = the naive search's CPU seconds over the row's (> 1: faster than naive). Ratios
use CPU time because wall time on a shared machine measures the other jobs too (see
common.Clock); run with --threads 1 there. On CUDA they use wall time, the device synchronised
at the end of each call: the process's CPU seconds there are its waits for the device. Each
precision's rows run under its plan as the translate stage chooses it (``s2s.precision``: fp32
is strict fp32 on CUDA, TF32 off), after one untimed call (kernel selection, allocations).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

from s2s import checkpoint, precision  # noqa: E402
from s2s.config import TranslateConfig  # noqa: E402
from s2s.data.batching import collate  # noqa: E402
from s2s.decode.beam import Hypothesis, score_hypotheses  # noqa: E402
from s2s.decode.ensemble import Ensemble  # noqa: E402
from s2s.decode import translate as translate_stage  # noqa: E402
from s2s.decode.translate import translate  # noqa: E402
from s2s.model import build_model  # noqa: E402
from s2s.model.seq2seq import RNNConfig  # noqa: E402
from s2s.model.transformer import TransformerConfig  # noqa: E402

# translate() draws a tqdm bar per call; a benchmark's table reads better without them.
translate_stage.progress = lambda **kwargs: common.quiet_progress(**kwargs)


class LogAddExpEnsemble(Ensemble):
    """Ensemble with the same ``mean_prob`` mixture, combined by a chain of torch.logaddexp instead
    of stack + logsumexp(dim=0): the same numbers (to float rounding) without the (K, N, V) copy
    and the slow strided reduction. Not used by the pipeline; `--alt-combine` times it beside
    s2s.decode.ensemble.Ensemble to show what the combine step costs."""

    def step(self, prev_tokens, state):
        outputs = [model.step(prev_tokens, s) for model, s in zip(self.models, state.members)]
        combined = outputs[0][0]  # (N, V)
        for lprobs, _ in outputs[1:]:
            combined = torch.logaddexp(combined, lprobs)
        combined = combined - math.log(len(self.models))
        return combined, type(state)(tuple(s for _, s in outputs))


MEMBERS = ("reversed_1", "reversed_2", "reversed_3", "reversed_4", "reversed_5")


@torch.no_grad()
def naive_beam_search(model, src: list[int], *, beam: int, bos: int, eos: int, pad: int,
                      max_len: int) -> tuple[tuple[int, ...], float, bool]:
    """Beam search over one sentence: (tokens, log-prob, finished) of the best hypothesis.

    Hypotheses are a Python list of (score, tokens); every step runs the model once over them
    (their states are rows of one State), takes each one's B + 1 best next words (enough for the
    B best non-<eos> candidates overall) and sorts the candidates in Python."""
    n = max(len(src), 1)
    dev = next(model.parameters()).device  # the model's: every index tensor is made there
    state = model.encode(torch.tensor([src or [pad]], device=dev),
                         torch.tensor([n], device=dev))  # one row
    hyps: list[tuple[float, list[int]]] = [(0.0, [])]
    finished: list[tuple[float, list[int], bool]] = []
    for t in range(1, max_len + 1):
        prev = torch.tensor([toks[-1] if toks else bos for _, toks in hyps], device=dev)
        lprobs, state = model.step(prev, state)  # (len(hyps), V)
        lprobs[:, [pad, bos]] = -math.inf  # never predicted, as in beam_search
        top_lp, top_tok = lprobs.topk(min(beam + 1, lprobs.size(1)), dim=1)
        cands = [(score + lp, i, tok)
                 for i, (score, _) in enumerate(hyps)
                 for lp, tok in zip(top_lp[i].tolist(), top_tok[i].tolist())]
        cands.sort(key=lambda c: (-c[0], c[1], c[2]))
        new = []
        for rank, (score, i, tok) in enumerate(cands):
            if tok == eos:
                if rank < beam:
                    finished.append((score, hyps[i][1], True))
            elif len(new) < beam:
                new.append((score, i, tok))
            if len(new) == beam and rank >= beam:
                break
        hyps = [(score, hyps[i][1] + [tok]) for score, i, tok in new]
        best_done = max((f[0] for f in finished), default=-math.inf)
        if t == max_len:
            finished += [(score, toks, False) for score, toks in hyps]
        if t == max_len or len(finished) >= beam or best_done >= hyps[0][0]:
            break
        state = state.select(torch.tensor([i for _, i, _ in new], device=dev))
    score, toks, done = max(finished, key=lambda f: f[0])
    return tuple(toks), score, done


# The default profile's Transformer (params models.transformer): d_model 192, 4 heads, ff 768,
# 3 + 3 layers.
TRANSFORMER = TransformerConfig(d_model=192, heads=4, kv_heads=4, ff_size=768, encoder_layers=3,
                                decoder_layers=3)


def random_models(k: int, *, cell: str, src_vocab: int, tgt_vocab: int, pad: int) -> list:
    """`k` randomly initialised models of the default profile's size: 2 x 384 LSTMs with a
    reversed source, or (cell `transformer`) its Transformer, seeds 11..10+k."""
    models = []
    for seed in range(11, 11 + k):
        if cell == "transformer":
            cfg = dataclasses.replace(TRANSFORMER, init_seed=seed)
        else:
            cfg = RNNConfig(cell=cell, num_layers=2, hidden_size=384, embed_size=384,
                            reverse_source=True, init_seed=seed)
        m = build_model(cfg, src_vocab=src_vocab, tgt_vocab=tgt_vocab, pad=pad)
        m.init_weights(seed)
        models.append(m.eval())
    return models


def load_models(models_dir: Path, members: list[str], corpus: common.Corpus,
                device: torch.device) -> tuple[list, str]:
    paths = []
    for name in members:
        for file in ("model.pt", "best.pt"):
            if (models_dir / name / file).exists():
                paths.append(models_dir / name / file)
                break
    if not paths:
        raise SystemExit(f"--models {models_dir}: none of {', '.join(members)} has model.pt or "
                         "best.pt")
    loaded = [checkpoint.load_model(p, src_vocab=corpus.src_vocab, tgt_vocab=corpus.tgt_vocab,
                                    device=device) for p in paths]
    models = [loaded[i % len(loaded)] for i in range(5)]
    note = f"trained models: {', '.join(str(p) for p in paths)}"
    if len(loaded) < 5:
        note += (f" (only {len(loaded)} found: the ensembles repeat them, which costs the same "
                 "as distinct members)")
    return models, note


def profile_search(model, sources, *, cfg, vocab, device, mm_dtype, beam: int = 12) -> str:
    """torch.profiler over one translate() call: where a beam search's time goes, by operator
    (self CPU time), with the share of GEMMs, of the softmax/top-k and of everything else
    (state selects, masks, Python bookkeeping between the ops)."""
    from torch.profiler import ProfilerActivity, profile

    translate(model, sources[:8], cfg=cfg, beam=beam, nbest=1, vocab=vocab, device=device,
              mm_dtype=mm_dtype)  # warm-up: kernel selection
    with common.Clock() as clock, profile(activities=[ProfilerActivity.CPU]) as prof:
        translate(model, sources, cfg=cfg, beam=beam, nbest=1, vocab=vocab, device=device,
                  mm_dtype=mm_dtype)
    events = [e for e in prof.key_averages() if not e.key.startswith("ProfilerStep")]
    total = sum(e.self_cpu_time_total for e in events) / 1e3  # ms, ops only
    groups = {"GEMMs (mm, addmm, linear, bmm)": ("aten::mm", "aten::addmm", "aten::bmm",
                                                  "aten::linear", "aten::matmul"),
              "softmax / log-softmax / top-k": ("aten::_log_softmax", "aten::_softmax",
                                                "aten::topk", "aten::sort"),
              "casts (bf16 <-> fp32)": ("aten::copy_", "aten::_to_copy", "aten::to")}
    rows = []
    covered = 0.0
    for label, keys in groups.items():
        ms = sum(e.self_cpu_time_total for e in events if e.key in keys) / 1e3
        covered += ms
        rows.append([label, f"{ms:.0f}", f"{100 * ms / total:.1f}"])
    rows.append(["every other op (selects, masks, gathers, element-wise)",
                 f"{total - covered:.0f}", f"{100 * (total - covered) / total:.1f}"])
    untracked = 1e3 * clock.wall - total
    head = (f"{len(sources)} sentences, beam {beam}, {'bf16' if mm_dtype else 'fp32'}: "
            f"{clock.wall:.2f} s wall (profiled), of which {total / 1e3:.2f} s inside torch ops "
            f"and {max(untracked, 0) / 1e3:.2f} s between them (Python: the search's "
            f"bookkeeping, and the profiler's own overhead)")
    top = sorted(events, key=lambda e: -e.self_cpu_time_total)[:12]
    return "\n".join([head, common.table(["part", "self ms", "% of op time"], rows),
                      common.table(["operator (top self CPU)", "calls", "self ms", "%"],
                                   [[e.key[:50], str(e.count), f"{e.self_cpu_time_total / 1e3:.0f}",
                                     f"{100 * e.self_cpu_time_total / 1e3 / total:.1f}"]
                                    for e in top])])


@torch.no_grad()
def describe_gaps(model, sources: list[list[int]], fp32: list[Hypothesis], bf16: list[Hypothesis],
                  *, vocab, device: torch.device, batch: int = 100) -> str:
    """Where the bf16 search's 1-best differs from the fp32 search's: both scored by the model
    in fp32 (the fp32 search's own score; the bf16 hypothesis rescored by teacher forcing), how
    often the bf16 choice scores lower or higher, and by how much."""
    differ = [i for i, (x, y) in enumerate(zip(fp32, bf16)) if x.tokens != y.tokens]
    gaps = []  # fp32 score of the bf16 1-best minus the fp32 1-best's score
    for k in range(0, len(differ), batch):
        idx = differ[k: k + batch]
        b = collate([(sources[i], []) for i in idx], pad=vocab.pad, bos=vocab.bos, eos=vocab.eos)
        rescored = score_hypotheses(
            model, b.src.to(device), b.src_lengths.to(device), [[bf16[i]] for i in idx],
            bos=vocab.bos, eos=vocab.eos)
        gaps += [r[0].score - fp32[i].score for i, r in zip(idx, rescored)]
    lower = sum(g < 0 for g in gaps)
    size = sorted(abs(g) for g in gaps)
    return (f"the {len(gaps)} sentences whose 1-best differs, scored in fp32: the bf16 choice "
            f"scores lower on {lower}, higher on {len(gaps) - lower} (a search error of the fp32 "
            f"beam); |difference| median {size[len(size) // 2]:.3f} nats, 90th percentile "
            f"{size[int(0.9 * (len(size) - 1))]:.3f}, max {size[-1]:.3f}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="30 sentences instead of 200")
    ap.add_argument("-n", "--sentences", type=int, help="source sentences (default 200, quick 30)")
    ap.add_argument("--models", type=Path, help="dir with <member>/model.pt (e.g. "
                    "/tmp/defrun/models); default: random default-size models")
    ap.add_argument("--members", default=",".join(MEMBERS),
                    help="checkpoints under --models for the ensembles, first = the single model")
    ap.add_argument("--data", type=Path, help="pipeline data dir: vocab and test sentences")
    ap.add_argument("--cell", default="lstm", choices=["lstm", "peephole", "transformer"],
                    help="the random models: 2 x 384 LSTMs of that cell, or the default "
                         "profile's Transformer (its incremental decoder, keys and values cached)")
    ap.add_argument("--batch-size", type=int, default=TranslateConfig().batch_size,
                    help="sentences per search batch (translate.batch_size)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads; 0: torch's default")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--no-reference", action="store_true", help="skip the naive search")
    ap.add_argument("--precisions", default="fp32,bf16",
                    help="comma list of fp32, bf16 (translate.amp: bf16 search, fp32 n-best "
                         "scores); every row in each")
    ap.add_argument("--single", action="store_true",
                    help="only the one-model rows (e.g. --members attention)")
    ap.add_argument("--profile", action="store_true",
                    help="also profile one model at beam 12 in each precision (torch.profiler)")
    ap.add_argument("--alt-combine", action="store_true",
                    help="also time the ensembles of 5 with a logaddexp combine (bench-only)")
    args = ap.parse_args(argv)

    threads = common.set_threads(args.threads)
    device = torch.device(args.device)
    n = args.sentences or (30 if args.quick else 200)
    corpus = common.load_corpus(args.data, split="test", n_synthetic=max(n, 1), seed=1)
    sources = [s for s, _ in corpus.pairs[:n]]
    src_vocab, tgt_vocab = corpus.src_vocab, corpus.tgt_vocab
    if args.models:
        if args.data is None or corpus.origin.startswith("synthetic"):
            raise SystemExit("--models needs --data DIR with the vocabularies they were trained on")
        models, model_note = load_models(args.models, args.members.split(","), corpus, device)
    else:
        models = random_models(5, cell=args.cell, src_vocab=len(src_vocab),
                               tgt_vocab=len(tgt_vocab), pad=src_vocab.pad)
        models = [m.to(device) for m in models]
        size = (TRANSFORMER.describe() if args.cell == "transformer"
                else f"{args.cell}, 2 x 384, E 384")
        model_note = (f"random default-size models ({size}, vocab {len(src_vocab)}/"
                      f"{len(tgt_vocab)}, seeds 11-15): hypotheses run to max_len")
    cfg = TranslateConfig(batch_size=args.batch_size)

    print(f"bench/decode.py {'--quick ' if args.quick else ''}on {common.machine_line(threads)}")
    print(f"data: {len(sources)} sources, mean {sum(map(len, sources)) / len(sources):.1f} words "
          f"({corpus.origin})")
    print(f"models: {model_note}")
    print(f"search: batch {cfg.batch_size} sentences, max_len {cfg.max_len_a} x source + "
          f"{cfg.max_len_b}, no length penalty, ensemble combine {cfg.combine}")

    configs = [("1 model", 1, 1), ("1 model", 1, 2), ("1 model", 1, 12),
               ("ensemble of 2", 2, 2), ("ensemble of 2", 2, 12),
               ("ensemble of 5", 5, 2), ("ensemble of 5", 5, 12)]
    if args.single:
        configs = [c for c in configs if c[1] == 1]
    if args.alt_combine:
        if args.single:
            raise SystemExit("--alt-combine compares ensembles of 5, which --single leaves out")
        if cfg.combine != "mean_prob":
            raise SystemExit("--alt-combine reimplements combine=mean_prob only")
        configs += [("ensemble of 5, logaddexp combine", 5, 2),
                    ("ensemble of 5, logaddexp combine", 5, 12)]
    precisions = [p for p in args.precisions.split(",") if p]
    # each precision's plan as the translate stage chooses it (amp: bf16), applied before its
    # rows: on CUDA fp32 is then strict fp32 (TF32 off), and bf16's plan leaves TF32 on
    engine = precision.bf16_engine(device)
    plans = {p: precision.plan(p == "bf16", device_type=device.type, engine=engine)
             for p in ("fp32", "bf16")}
    print(f"precisions: {', '.join(precisions)} (bf16: {plans['bf16']})")
    # on CUDA the host's CPU seconds measure its waits for the device, not the search's work:
    # the ratios there are of (synchronised) wall seconds
    spent = "wall" if device.type == "cuda" else "cpu"
    results: dict[tuple[str, int], tuple[common.Clock, list]] = {}
    for prec in precisions:
        mm_dtype = torch.bfloat16 if prec == "bf16" else None
        plans[prec].apply()
        # untimed: the first call's kernel selection and allocations would count against the
        # first row
        translate(models[0], sources[:8], cfg=cfg, beam=12, nbest=1, vocab=tgt_vocab,
                  device=device, mm_dtype=mm_dtype)
        for name, k, beam in configs:
            kind = LogAddExpEnsemble if "logaddexp" in name else Ensemble
            system = models[0] if k == 1 else kind(models[:k], combine=cfg.combine)
            label = name if prec == "fp32" else f"{name} bf16"
            with common.Clock() as clock:
                hyps = translate(system, sources, cfg=cfg, beam=beam, nbest=1, vocab=tgt_vocab,
                                 device=device, mm_dtype=mm_dtype)
                common.sync(device)
            assert len(hyps) == len(sources), (len(hyps), len(sources))
            results[(label, beam)] = (clock, [h[0] for h in hyps])
    # the base of "cost x" and of the drift check: the first precision's 1 model at beam 12
    first_prec = precisions[0]
    first = "1 model" if first_prec == "fp32" else "1 model bf16"
    plans["fp32"].apply()  # the naive reference: fp32, compared with the fp32 row alone
    ref = None
    if not args.no_reference and "fp32" not in precisions:
        print("naive reference: not run (it runs in fp32, and no fp32 row was asked for)")
    if not args.no_reference and "fp32" in precisions:
        ours_b12 = results[("1 model", 12)][1]
        with common.Clock() as ref:
            # the search's own bound (float32: a float64 one differs by a token at some lengths)
            longest = translate_stage.max_target_lengths(
                torch.tensor([len(s) for s in sources]), cfg).tolist()
            out = [naive_beam_search(models[0], s, beam=12, bos=tgt_vocab.bos, eos=tgt_vocab.eos,
                                     pad=tgt_vocab.pad, max_len=n)
                   for s, n in zip(sources, longest)]
            common.sync(device)
        agree = sum(o[0] == h.tokens for o, h in zip(out, ours_b12))
        close = sum(abs(o[1] - h.score) <= 1e-3 * max(1.0, abs(h.score))
                    for o, h in zip(out, ours_b12))
        results[("naive, one sentence at a time (reference)", 12)] = (
            ref, [Hypothesis(*o) for o in out])

    # Drift check: the first timed row again, last; load on a shared machine moves the numbers.
    plans[first_prec].apply()
    with common.Clock() as again:
        translate(models[0], sources, cfg=cfg, beam=12, nbest=1, vocab=tgt_vocab, device=device,
                  mm_dtype=torch.bfloat16 if first_prec == "bf16" else None)
        common.sync(device)

    base = results[(first, 12)][0]
    rows = []
    for (name, beam), (clock, best) in results.items():
        mean_len = sum(len(h.tokens) for h in best) / len(best)
        eos = 100 * sum(h.finished for h in best) / len(best)
        rows.append([name, str(beam), f"{clock.wall:.2f}", f"{clock.cpu:.2f}",
                     f"{len(sources) / clock.wall:.1f}", f"{1e3 * clock.wall / len(sources):.0f}",
                     f"{mean_len:.1f}", f"{eos:.0f}",
                     f"{getattr(clock, spent) / getattr(base, spent):.2f}",
                     "" if ref is None or name.endswith(" bf16") else
                     f"{getattr(ref, spent) / getattr(clock, spent):.2f}"])
    print(common.table(["system", "beam", "wall s", "cpu s", "sent/s", "ms/sent", "mean len",
                        "eos %", "cost x", "vs naive"], rows))
    for suffix in ("", " bf16"):
        if (f"ensemble of 5{suffix}", 2) not in results or (f"1 model{suffix}", 12) not in results:
            continue
        e5b2 = results[(f"ensemble of 5{suffix}", 2)][0]
        one = results[(f"1 model{suffix}", 12)][0]
        print(f"ensemble of 5 at beam 2 vs 1 model at beam 12{suffix}: "
              f"{getattr(e5b2, spent) / getattr(one, spent):.2f} x the cost in {spent} time"
              + ("" if spent == "wall" else f", {e5b2.wall / one.wall:.2f} x in wall time")
              + " (paper: < 1)")
    if {"fp32", "bf16"} <= set(precisions):
        for name, _, beam in configs:
            a, b = results[(name, beam)], results[(f"{name} bf16", beam)]
            same = sum(x.tokens == y.tokens for x, y in zip(a[1], b[1]))
            print(f"bf16 vs fp32, {name} beam {beam}: "
                  f"{getattr(a[0], spent) / getattr(b[0], spent):.2f} x faster in {spent} time"
                  + ("" if spent == "wall" else f" ({a[0].wall / b[0].wall:.2f} x wall)")
                  + f", same 1-best on {same}/"
                  f"{len(sources)} sentences ({100 * same / len(sources):.1f}%)")
            if name == "1 model" and beam == 12 and same < len(sources):
                print("  " + describe_gaps(models[0], sources, a[1], b[1], vocab=tgt_vocab,
                                           device=device))
    if args.alt_combine:  # in the first precision, as the base
        sfx = first[len("1 model"):]
        alt = results[(f"ensemble of 5, logaddexp combine{sfx}", 2)][0]
        same = all(a.tokens == b.tokens for k in (2, 12) for a, b in zip(
            results[(f"ensemble of 5, logaddexp combine{sfx}", k)][1],
            results[(f"ensemble of 5{sfx}", k)][1]))
        print(f"  with the logaddexp combine{sfx}: "
              f"{getattr(alt, spent) / getattr(base, spent):.2f} x the cost of {first} at beam "
              f"12 in {spent} time; same 1-best as Ensemble at beams 2 and 12: {same}")
    print(f"load drift: {first} beam 12 took {base.wall:.2f} s wall ({base.cpu:.2f} s CPU) first "
          f"and {again.wall:.2f} s ({again.cpu:.2f} s) last; load average "
          f"{os.getloadavg()[0]:.2f} at end")
    if ref is not None:
        print(f"naive vs batched beam 12: same 1-best on {agree}/{len(sources)} sentences, same "
              f"score on {close}/{len(sources)}")
    if spent == "wall":
        print("cost x, vs naive: ratios of wall seconds (on CUDA the process's CPU seconds are "
              "its waits for the device); cpu s as measured")
    if args.profile:
        for prec in precisions:
            plans[prec].apply()
            print()
            print(profile_search(models[0], sources, cfg=cfg, vocab=tgt_vocab, device=device,
                                 mm_dtype=torch.bfloat16 if prec == "bf16" else None))


if __name__ == "__main__":
    main()
