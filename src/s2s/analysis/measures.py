"""One model's analyses as tables: its Figure 2 points, its forget-gate statistics, its gradient
reach (per sentence too, for the paired bootstrap of forward vs reversed) and the memory of a
one-word change in its encoder, each frame with the columns of its file
(:data:`s2s.layout.ANALYSIS_TABLES`). The tensors come from :mod:`s2s.analysis.probes` and
:mod:`s2s.analysis.memory`; :mod:`s2s.analysis.run` runs these over every model.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from s2s.analysis import memory, probes
from s2s.analysis.outputs import FIRST, FIRST_STATISTICS
from s2s.layout import DECAY_COLUMNS, HALF_LIFE_COLUMNS, TRAINING_DIFF_COLUMNS
from s2s.data.batching import collate, eval_batches, pair_lengths
from s2s.data.text import normalize, tokenize
from s2s.data.vocab import Vocab
from s2s.model.encdec import EncoderDecoder, State
from s2s.model.seq2seq import Seq2Seq
from s2s.progress import progress

STACKS = ("encoder", "decoder")
BOUNDARY_DEFINITION = ("a boundary step reads a punctuation token (every character Unicode "
                       "punctuation: , . ; : ! ? quotes, brackets, dashes), i.e. a clause or "
                       "sentence boundary; an inside step reads any other word (<unk> included); "
                       "the decoder's <bos> step and the encoder's first step (its forget gate "
                       "multiplies a zero cell) are neither")
REACH_DEFINITION = ("L2 norm of the gradient of -log p(y_1 | source) with respect to the embedding "
                    "of each source word, by the word's position in the original (unreversed) "
                    "sentence; mean_share: the mean over sentences of that position's share of "
                    "the sentence's total gradient norm")


def source_tokenizer(lowercase: bool):
    """The prepare stage's source side: normalise, lowercase if it does, Moses-tokenise."""
    def tok(text: str) -> str:
        text = normalize(text)
        return tokenize(text.lower() if lowercase else text, "en")
    return tok


def figure2(model: EncoderDecoder, name: str, phrases: list[probes.Phrase], *, pad: int,
            representation: str) -> tuple[pd.DataFrame, dict]:
    """One model's rows of figure2.csv (each phrase's PCA coordinates) and its row of
    figure2_summary.csv (variance explained, relative paraphrase and swap distances)."""
    src, lengths = probes.batch_ids([p.ids for p in phrases], pad)
    vectors = probes.sentence_vectors(model, src, lengths, representation=representation).numpy()
    coords, explained = probes.pca_2d(vectors.astype(np.float64))
    rows = pd.DataFrame({
        "model": name, "reverse_source": model.cfg.reverse_source,
        "group": [p.group + 1 for p in phrases], "phrase": [p.text for p in phrases],
        "tokens": [" ".join(p.tokens) for p in phrases], "unk": [" ".join(p.unk) for p in phrases],
        "x": coords[:, 0], "y": coords[:, 1]})
    summary = {"model": name, "reverse_source": model.cfg.reverse_source,
               "representation": representation, "dim": vectors.shape[1],
               "explained_pc1": float(explained[0]), "explained_pc2": float(explained[1]),
               **probes.phrase_distances(vectors.astype(np.float64), phrases)}
    return rows, summary


def forget_gates(model: Seq2Seq, name: str, pairs, *, src_vocab: Vocab, tgt_vocab: Vocab,
                 batch_size: int, bins: int) -> dict[tuple[str, int], probes.ForgetStats]:
    """ForgetStats per (stack, layer) over `pairs`: the encoder over the sources as the model
    reads them, the decoder teacher-forced over the references. Only words are counted: an empty
    source, which the encoder reads as one <pad> step (:func:`s2s.data.batching.collate`), adds
    no encoder step."""
    tables = {"encoder": (probes.boundary_table(src_vocab), probes.word_table(src_vocab)),
              "decoder": (probes.boundary_table(tgt_vocab), probes.word_table(tgt_vocab))}
    pads = {"encoder": src_vocab.pad, "decoder": tgt_vocab.pad}
    stats: dict[tuple[str, int], probes.ForgetStats] = {}
    bar = progress(total=len(pairs), desc=f"{name} gates", unit="sent")
    for idx in eval_batches(*pair_lengths(pairs), batch_size):
        b = collate([pairs[i] for i in idx], pad=tgt_vocab.pad, bos=tgt_vocab.bos,
                    eos=tgt_vocab.eos)
        enc, fed = probes.trace_encoder(model, b.src, b.src_lengths)
        tgt_lengths = (b.tgt_in != tgt_vocab.pad).sum(1)  # (N,): <bos> + the reference
        dec = probes.trace_decoder(model, State(enc.h, enc.c), b.tgt_in, tgt_lengths)
        for stack, trace, tokens in (("encoder", enc, fed), ("decoder", dec, b.tgt_in)):
            mask = trace.mask & (tokens != pads[stack])
            boundary, inside = probes.step_kinds(
                tokens, mask, boundary=tables[stack][0], word=tables[stack][1],
                skip_first=stack == "encoder")
            for k in range(trace.forget.shape[0]):
                s = probes.forget_stats(trace.forget[k], mask, boundary, inside, bins=bins)
                stats[stack, k] = stats[stack, k] + s if (stack, k) in stats else s
        bar.update(len(idx))
    bar.close()
    return stats


def sentence_reach(model: EncoderDecoder, name: str, pairs, *, vocab: Vocab, batch_size: int,
                   positions: int) -> tuple[probes.ReachSums, dict[str, np.ndarray]]:
    """ReachSums over `pairs` and, per sentence in the order of `pairs`, the statistics of
    FIRST_STATISTICS."""
    total = None
    per = {k: np.full(len(pairs), np.nan) for k in FIRST_STATISTICS}
    bar = progress(total=len(pairs), desc=f"{name} gradients", unit="sent")
    for idx in eval_batches(*pair_lengths(pairs), batch_size):
        b = collate([pairs[i] for i in idx], pad=vocab.pad, bos=vocab.bos, eos=vocab.eos)
        norms = probes.first_word_gradients(model, b.src, b.src_lengths, b.tgt_out[:, 0],
                                            bos=vocab.bos)  # (N, S), 0 at padding
        s = probes.reach_sums(norms, b.src_lengths, positions=positions)
        total = s if total is None else total + s
        n = norms.double()
        head = n[:, :FIRST]  # (N, <=FIRST)
        first = torch.minimum(b.src_lengths, torch.tensor(FIRST)).double()  # (N,)
        whole = n.sum(1)
        per["first_share"][idx] = torch.where(whole > 0, head.sum(1) / whole.clamp_min(1e-300),
                                              torch.zeros_like(whole)).numpy()
        per["first_norm"][idx] = (head.sum(1) / first).numpy()
        bar.update(len(idx))
    bar.close()
    if total is None:
        zeros = torch.zeros(positions, dtype=torch.float64)
        total = probes.ReachSums(zeros, zeros, zeros.long())
    return total, per


def reach_frame(name: str, reverse: bool, r: probes.ReachSums, positions: int,
                **extra) -> pd.DataFrame:
    """The rows of gradient_reach.csv (with `extra` columns after reverse_source)."""
    count = r.count.numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        return pd.DataFrame({
            "model": name, "reverse_source": reverse, **extra,
            "position": np.arange(1, positions + 1), "sentences": count,
            "mean_norm": np.where(count > 0, r.norm_sum.numpy() / count, np.nan),
            "mean_share": np.where(count > 0, r.share_sum.numpy() / count, np.nan)})


def paired_bootstrap(x: np.ndarray, y: np.ndarray, *, samples: int = 1000,
                     seed: int = 0) -> tuple[float, float, float]:
    """mean(y - x) and the 95% percentile interval of its bootstrap over the pairs (sentences
    resampled with replacement, `samples` times, from a generator seeded with `seed`)."""
    d = np.asarray(y, dtype=float) - np.asarray(x, dtype=float)
    d = d[np.isfinite(d)]
    if not len(d):
        return math.nan, math.nan, math.nan
    idx = np.random.default_rng(seed).integers(0, len(d), size=(samples, len(d)))
    means = d[idx].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(d.mean()), float(lo), float(hi)


def training_diff(per: dict[tuple[str, float], dict[str, np.ndarray]], *, forward: str,
                  reversed_: str, samples: int = 1000) -> pd.DataFrame:
    """Forward vs reversed at every epoch both were measured at: per statistic of
    FIRST_STATISTICS, the means and the paired bootstrap of reversed - forward. per:
    (model, epoch) -> sentence statistics (sentence_reach), over the same sentences."""
    rows = []
    epochs = sorted({e for m, e in per if m == forward} & {e for m, e in per if m == reversed_})
    for e in epochs:
        for stat in FIRST_STATISTICS:
            x, y = per[forward, e][stat], per[reversed_, e][stat]
            diff, lo, hi = paired_bootstrap(x, y, samples=samples)
            rows.append({"epoch": e, "forward": forward, "reversed": reversed_,
                         "statistic": stat, "sentences": int(np.isfinite(y - x).sum()),
                         "forward_mean": float(np.nanmean(x)) if len(x) else math.nan,
                         "reversed_mean": float(np.nanmean(y)) if len(y) else math.nan,
                         "diff": diff, "lo": lo, "hi": hi})
    return pd.DataFrame(rows, columns=list(TRAINING_DIFF_COLUMNS))


def memory_frames(name: str, sums: memory.DecaySums, *, lstm: bool
                  ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rows of memory_decay.csv and memory_half_life.csv for one model's encoder."""
    L, K1 = sums.dh.shape
    count = sums.count.numpy()
    decay, half = [], []
    nan = np.full(K1, np.nan)
    for k in range(L):
        with np.errstate(invalid="ignore", divide="ignore"):
            dh = np.where(count > 0, sums.dh[k].numpy() / count, np.nan)
            dc = np.where(count > 0, sums.dc[k].numpy() / count, np.nan) if lstm else nan
            gate = np.where(count > 0, sums.gate_only[k].numpy() / count, np.nan)
        decay.append(pd.DataFrame({
            "model": name, "stack": "encoder", "layer": k + 1, "steps_after": np.arange(K1),
            "sentences": count, "mean_abs_dc": dc, "mean_abs_dh": dh,
            "forget_only_dc": gate if lstm else nan, "update_only_dh": nan if lstm else gate}))
        half.append({"model": name, "layer": k + 1,
                     "half_life_c": memory.half_life(dc) if lstm else math.nan,
                     "half_life_forget_only": memory.half_life(gate) if lstm else math.nan,
                     "half_life_h": memory.half_life(dh),
                     "half_life_update_only": math.nan if lstm else memory.half_life(gate)})
    return (pd.concat(decay)[list(DECAY_COLUMNS)],
            pd.DataFrame(half, columns=list(HALF_LIFE_COLUMNS)))


def forget_frames(name: str, stats: dict[tuple[str, int], probes.ForgetStats], bins: int
                  ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The rows of forget_hist.csv, forget_units.csv and forget_summary.csv for one model's
    ForgetStats (:func:`forget_gates`), stacks in STACKS order, layers 1-based."""
    hist, units, summary = [], [], []
    edges = np.linspace(0.0, 1.0, bins + 1)
    for (stack, k), s in sorted(stats.items(), key=lambda kv: (STACKS.index(kv[0][0]), kv[0][1])):
        counts = s.hist.numpy()
        width = 1.0 / bins
        density = counts / (counts.sum() * width) if counts.sum() else counts
        hist.append(pd.DataFrame({"model": name, "stack": stack, "layer": k + 1,
                                  "bin_lo": edges[:-1], "bin_hi": edges[1:],
                                  "count": counts.astype(np.int64), "density": density}))
        steps = max(s.steps, 1)
        mean_f = (s.unit_sum / steps).numpy()
        geo_f = np.exp((s.unit_log_sum / steps).numpy())
        hl = probes.half_life(mean_f)
        units.append(pd.DataFrame({"model": name, "stack": stack, "layer": k + 1,
                                   "unit": np.arange(len(mean_f)), "mean_f": mean_f,
                                   "half_life": hl, "geo_mean_f": geo_f,
                                   "half_life_geo": probes.half_life(geo_f)}))
        H = len(mean_f)
        summary.append({
            "model": name, "stack": stack, "layer": k + 1, "steps": s.steps, "units": H,
            "mean_f": float(s.unit_sum.sum()) / (steps * H),
            "boundary_mean_f": s.boundary_sum / (s.boundary_steps * H) if s.boundary_steps
            else math.nan,
            "inside_mean_f": s.inside_sum / (s.inside_steps * H) if s.inside_steps else math.nan,
            "boundary_steps": s.boundary_steps, "inside_steps": s.inside_steps,
            "median_half_life": float(np.median(hl)), "max_half_life": float(hl.max()),
            "units_f_above_0.9": float((mean_f > 0.9).mean()),
            "units_half_life_above_10": float((hl > 10).mean())})
    return pd.concat(hist), pd.concat(units), pd.DataFrame(summary)
