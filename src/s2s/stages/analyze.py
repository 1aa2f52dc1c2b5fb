"""Stage `analyze`: Figure 2, forget-gate statistics and gradient reach of a forward and a
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
  ``init_reach.csv``       cell, forget_bias, step, steps_back, mean_norm, std_norm, relative: the
                           gradient reaching each of 60 inputs at initialisation, 20 seeds
                           (s2s.analysis.init_reach; no trained model)
  ``analysis.json``        what was measured and on what: models, counts, definitions, phrases
                           and their <unk> tokens, timings
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from s2s.config import Params
from s2s.dag import Out, Stage

log = logging.getLogger("s2s.analysis")

HELP = "Figure 2, forget gates and gradient reach of `analysis`"
PATHS = ("--prepared", "--vocab", "--models", "--out")


def stages(params: Params) -> list[Stage]:
    models = params.analysis.models
    return [Stage(
        name="analyze",
        cmd="s2s analyze --prepared data/prepared --vocab data/vocab --models models "
            "--out outputs/analysis",
        deps=("data/prepared/test.tok.en", "data/prepared/test.tok.fr", "data/vocab",
              *(f"models/{m}" for m in models)),
        outs=(Out("outputs/analysis"),),
        params=("analysis.models", "analysis.phrases", "analysis.sentences",
                "analysis.max_position", "prepare.lowercase", "model",
                *(f"models.{m}" for m in models)),
        doc="Figure 2, the forget gates and the gradient reach of the models analysis.models "
            "names.")]


def cli(args, params) -> None:
    cfg = params.analysis
    main(models=cfg.models, phrases=cfg.phrases, sentences=cfg.sentences,
         max_position=cfg.max_position, prepared_dir=args.prepared, vocab_dir=args.vocab,
         models_dir=args.models, out_dir=args.out, lowercase=params.prepare.lowercase,
         expect={m: params.model_config(m) for m in cfg.models})


def main(*, models: Sequence[str] | Mapping[str, Path], phrases: Sequence[str | Sequence[str]],
         sentences: int, max_position: int, prepared_dir: Path, vocab_dir: Path,
         out_dir: Path, models_dir: Path | None = None, lowercase: bool = False,
         representation: str = "top", min_length: int = 4, batch_size: int = 64,
         bins: int = 50, threads: int = 1,
         expect: Mapping[str, object] | None = None) -> dict:
    """Run the three analyses on each model (names under models_dir, or a name -> model.pt
    mapping) and write the artifacts listed in the module docstring. `sentences` caps the test
    sentences used for the gates and for gradient reach (for the latter, those with at least
    `min_length` source words); `phrases`: see probes.phrase_groups (empty: the Multi30k default
    set); `lowercase`: the prepare stage's setting; `expect`: name -> the config params give
    that model (``params.model_config``): a checkpoint of another model is refused."""
    import numpy as np
    import pandas as pd
    import torch

    from s2s import checkpoint
    from s2s.analysis import probes
    from s2s.analysis.measures import (BOUNDARY_DEFINITION, HIST_COLUMNS, REACH_DEFINITION,
                                       SUMMARY_COLUMNS, UNIT_COLUMNS, _csv, _forget_frames,
                                       _resolve, _source_tokenizer, figure2, forget_gates,
                                       gradient_reach)
    from s2s.data.batching import load_parallel
    from s2s.data.vocab import Vocab
    from s2s.io import atomic_write_json

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
    # at initialisation, no trained model: how far back a gradient reaches, RNN vs LSTM by bias
    from s2s.analysis.init_reach import init_reach

    _csv(out_dir / "init_reach.csv", init_reach(forget_biases=(0.0, 1.0, 3.0)), written)
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
