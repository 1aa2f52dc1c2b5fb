"""Stage `analysis`: Figure 2, forget-gate statistics and gradient reach of a forward and a
reversed model (the computations are in :mod:`s2s.analysis.probes`).

Reads:  ``<models>/<name>/model.pt`` for each name in `models`, ``<vocab>/{en,fr}.tsv``,
        ``<prepared>/test.tok.{en,fr}``; the phrases of Figure 2 are given raw and tokenised here
        the way the prepare stage tokenises the source side.
Writes (under ``out_dir``):
  ``figure2.csv``          model, reverse_source, group, phrase, tokens, unk, x, y (PCA coordinates)
  ``figure2_summary.csv``  model, explained variance of PC1/PC2, paraphrase and swap distances
  ``forget_hist.csv``      model, stack, layer, bin_lo, bin_hi, count, density
  ``forget_units.csv``     model, stack, layer, unit, mean_f, half_life, geo_mean_f, half_life_geo
  ``forget_summary.csv``   model, stack, layer, steps, mean_f, boundary/inside means and counts,
                           median and longest half-life, shares of units with mean f > 0.9 and
                           with a half-life above 10 steps
  ``gradient_reach.csv``   model, reverse_source, position (1-based, original order), sentences,
                           mean_norm, mean_share
  ``analysis.json``        what was measured and on what: models, counts, definitions, phrases
                           and their <unk> tokens, timings
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from s2s import checkpoint
from s2s.analysis import probes
from s2s.config import ModelConfig
from s2s.data.batching import collate, eval_batches, load_parallel
from s2s.data.text import normalize, tokenize
from s2s.data.vocab import Vocab
from s2s.io import atomic_write_json, atomic_write_text
from s2s.model.seq2seq import EncoderDecoder, Seq2Seq, State
from s2s.progress import progress

log = logging.getLogger("s2s.analysis")

STACKS = ("encoder", "decoder")
HIST_COLUMNS = ["model", "stack", "layer", "bin_lo", "bin_hi", "count", "density"]
UNIT_COLUMNS = ["model", "stack", "layer", "unit", "mean_f", "half_life", "geo_mean_f",
                "half_life_geo"]
SUMMARY_COLUMNS = ["model", "stack", "layer", "steps", "units", "mean_f", "boundary_mean_f",
                   "inside_mean_f", "boundary_steps", "inside_steps", "median_half_life", "max_half_life",
                   "units_f_above_0.9", "units_half_life_above_10"]
BOUNDARY_DEFINITION = ("a boundary step reads a punctuation token (every character Unicode "
                       "punctuation: , . ; : ! ? quotes, brackets, dashes), i.e. a clause or "
                       "sentence boundary; an inside step reads any other word (<unk> included); "
                       "the decoder's <bos> step and the encoder's first step (its forget gate multiplies a "
                       "zero cell) are neither")
REACH_DEFINITION = ("L2 norm of the gradient of -log p(y_1 | source) with respect to the embedding "
                    "of each source word, by the word's position in the original (unreversed) "
                    "sentence; mean_share: the mean over sentences of that position's share of "
                    "the sentence's total gradient norm")


def _csv(path: Path, df: pd.DataFrame, written: list[str]) -> None:
    atomic_write_text(path, df.to_csv(index=False, float_format="%.6g"))
    written.append(str(path))


def _source_tokenizer(lowercase: bool):
    """The prepare stage's source side: normalise, lowercase if it does, Moses-tokenise."""
    def tok(text: str) -> str:
        text = normalize(text)
        return tokenize(text.lower() if lowercase else text, "en")
    return tok


def figure2(model: EncoderDecoder, name: str, phrases: list[probes.Phrase], *, pad: int,
            representation: str) -> tuple[pd.DataFrame, dict]:
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
    reads them, the decoder teacher-forced over the references."""
    tables = {"encoder": (probes.boundary_table(src_vocab), probes.word_table(src_vocab)),
              "decoder": (probes.boundary_table(tgt_vocab), probes.word_table(tgt_vocab))}
    stats: dict[tuple[str, int], probes.ForgetStats] = {}
    bar = progress(total=len(pairs), desc=f"{name} gates", unit="sent")
    for idx in eval_batches(pairs, batch_size):
        b = collate([pairs[i] for i in idx], pad=tgt_vocab.pad, bos=tgt_vocab.bos,
                    eos=tgt_vocab.eos)
        enc, fed = probes.trace_encoder(model, b.src, b.src_lengths)
        tgt_lengths = (b.tgt_in != tgt_vocab.pad).sum(1)  # (N,): <bos> + the reference
        dec = probes.trace_decoder(model, State(enc.h, enc.c), b.tgt_in, tgt_lengths)
        for stack, trace, tokens in (("encoder", enc, fed), ("decoder", dec, b.tgt_in)):
            boundary, inside = probes.step_kinds(
                tokens, trace.mask, boundary=tables[stack][0], word=tables[stack][1],
                skip_first=stack == "encoder")
            for k in range(trace.forget.shape[0]):
                s = probes.forget_stats(trace.forget[k], trace.mask, boundary, inside, bins=bins)
                stats[stack, k] = stats[stack, k] + s if (stack, k) in stats else s
        bar.update(len(idx))
    bar.close()
    return stats


def gradient_reach(model: EncoderDecoder, name: str, pairs, *, vocab: Vocab, batch_size: int,
                   positions: int) -> probes.ReachSums:
    total = None
    bar = progress(total=len(pairs), desc=f"{name} gradients", unit="sent")
    for idx in eval_batches(pairs, batch_size):
        b = collate([pairs[i] for i in idx], pad=vocab.pad, bos=vocab.bos, eos=vocab.eos)
        norms = probes.first_word_gradients(model, b.src, b.src_lengths, b.tgt_out[:, 0],
                                            bos=vocab.bos)
        s = probes.reach_sums(norms, b.src_lengths, positions=positions)
        total = s if total is None else total + s
        bar.update(len(idx))
    bar.close()
    if total is None:
        zeros = torch.zeros(positions, dtype=torch.float64)
        total = probes.ReachSums(zeros, zeros, zeros.long())
    return total


def _forget_frames(name: str, stats, bins: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
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


def _resolve(models: Sequence[str] | Mapping[str, Path], models_dir: Path | None) -> dict[str, Path]:
    if isinstance(models, Mapping):
        return {name: Path(p) for name, p in models.items()}
    if models_dir is None:
        raise ValueError("models given by name need models_dir")
    return {name: Path(models_dir) / name / "model.pt" for name in models}


def main(*, models: Sequence[str] | Mapping[str, Path], phrases: Sequence[str | Sequence[str]],
         sentences: int, max_position: int, prepared_dir: Path, vocab_dir: Path,
         out_dir: Path, models_dir: Path | None = None, lowercase: bool = False,
         representation: str = "top", min_length: int = 4, batch_size: int = 64,
         bins: int = 50, threads: int = 1,
         expect: Mapping[str, ModelConfig] | None = None) -> dict:
    """Run the three analyses on each model (names under models_dir, or a name -> model.pt
    mapping) and write the artifacts listed in the module docstring. `sentences` caps the test
    sentences used for the gates and for gradient reach (for the latter, those with at least
    `min_length` source words); `phrases`: see probes.phrase_groups (empty: the Multi30k default
    set); `lowercase`: the prepare stage's setting; `expect`: name -> the config params give
    that model (``params.model_config``): a checkpoint of another model is refused."""
    t_start = time.perf_counter()
    if threads:
        torch.set_num_threads(threads)
    out_dir = Path(out_dir)
    paths = _resolve(models, models_dir)
    src_vocab = Vocab.load(Path(vocab_dir) / "en.tsv")
    tgt_vocab = Vocab.load(Path(vocab_dir) / "fr.tsv")
    test = load_parallel(Path(prepared_dir) / "test.tok", src_vocab, tgt_vocab)
    gate_pairs = test[:sentences]
    reach_pairs = [p for p in test if len(p[0]) >= min_length][:sentences]
    if not phrases:
        log.info("no phrases given: Figure 2 uses the Multi30k default set (%d groups)",
                 len(probes.MULTI30K_PHRASES))
        phrases = probes.MULTI30K_PHRASES
    groups = probes.phrase_groups(phrases)
    phrase_list = probes.encode_phrases(groups, src_vocab, _source_tokenizer(lowercase))
    unk = sorted({t for p in phrase_list for t in p.unk})
    if unk:
        log.warning("phrase tokens outside the source vocabulary (read as <unk>): %s",
                    ", ".join(unk))
    log.info("%d test pairs: %d for the gates, %d (>= %d source words) for gradient reach; "
             "%d phrases in %d groups; models %s", len(test), len(gate_pairs), len(reach_pairs),
             min_length, len(phrase_list), len(groups), ", ".join(paths))

    fig_rows, fig_summary, hists, units, summaries, reach = [], [], [], [], [], []
    meta_models, seconds = {}, {}
    for name, path in paths.items():
        t0 = time.perf_counter()
        model = checkpoint.load_model(path, src_vocab=src_vocab, tgt_vocab=tgt_vocab,
                                      expect=(expect or {}).get(name),
                                      name=name if expect and name in expect else None)
        cfg = model.cfg
        meta_models[name] = {"path": str(path), "reverse_source": cfg.reverse_source,
                             "arch": cfg.arch, "cell": cfg.cell,
                             "forget_gates": probes.traceable(model), "num_layers": cfg.num_layers,
                             "hidden_size": cfg.hidden_size}
        rows, summary = figure2(model, name, phrase_list, pad=src_vocab.pad,
                                representation=representation)
        fig_rows.append(rows)
        fig_summary.append(summary)
        if probes.traceable(model):
            stats = forget_gates(model, name, gate_pairs, src_vocab=src_vocab,
                                 tgt_vocab=tgt_vocab, batch_size=batch_size, bins=bins)
            h, u, s = _forget_frames(name, stats, bins)
            hists.append(h)
            units.append(u)
            summaries.append(s)
        else:
            log.warning("%s: no forget gates to trace (arch %s, cell %s): its forget-gate rows "
                        "are absent", name, cfg.arch, cfg.cell)
        r = gradient_reach(model, name, reach_pairs, vocab=tgt_vocab, batch_size=batch_size,
                           positions=max_position)
        count = r.count.numpy()
        with np.errstate(invalid="ignore", divide="ignore"):
            reach.append(pd.DataFrame({
                "model": name, "reverse_source": cfg.reverse_source,
                "position": np.arange(1, max_position + 1), "sentences": count,
                "mean_norm": np.where(count > 0, r.norm_sum.numpy() / count, np.nan),
                "mean_share": np.where(count > 0, r.share_sum.numpy() / count, np.nan)}))
        seconds[name] = round(time.perf_counter() - t0, 2)
        log.info("%s (%s, reverse_source=%s): %.1fs", name, path, cfg.reverse_source,
                 seconds[name])

    written: list[str] = []
    _csv(out_dir / "figure2.csv", pd.concat(fig_rows), written)
    _csv(out_dir / "figure2_summary.csv", pd.DataFrame(fig_summary), written)
    for file, frames, columns in (("forget_hist.csv", hists, HIST_COLUMNS),
                                  ("forget_units.csv", units, UNIT_COLUMNS),
                                  ("forget_summary.csv", summaries, SUMMARY_COLUMNS)):
        _csv(out_dir / file, pd.concat(frames) if frames else pd.DataFrame(columns=columns),
             written)
    _csv(out_dir / "gradient_reach.csv", pd.concat(reach), written)
    meta = {
        "models": meta_models,
        "test": {"pairs": len(test), "gate_sentences": len(gate_pairs),
                 "reach_sentences": len(reach_pairs), "reach_min_length": min_length,
                 "sentences_cap": sentences},
        "figure2": {"representation": representation, "groups": len(groups),
                    "phrases": [{"text": p.text, "group": p.group + 1, "tokens": list(p.tokens),
                                 "unk": list(p.unk)} for p in phrase_list],
                    "lowercase": lowercase},
        "forget": {"bins": bins, "boundary": BOUNDARY_DEFINITION},
        "gradient_reach": {"max_position": max_position, "definition": REACH_DEFINITION},
        # No timings here: this file is content-hashed by DVC, and a rerun must give the same
        # bytes (the seconds per model are in the log).
        "threads": torch.get_num_threads(),
    }
    atomic_write_json(out_dir / "analysis.json", meta)
    written.append(str(out_dir / "analysis.json"))
    log.info("read %s, %s, %s; wrote %s in %.1fs", ", ".join(str(p) for p in paths.values()),
             vocab_dir, Path(prepared_dir) / "test.tok.{en,fr}", ", ".join(written),
             time.perf_counter() - t_start)
    return meta
