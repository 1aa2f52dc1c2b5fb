"""Stage `analyze`: Figure 2, forget-gate statistics and gradient reach of a forward and a
reversed model, the gradient reach over training, and the memory of a one-word change (the
computations are in :mod:`s2s.analysis.probes` and :mod:`s2s.analysis.memory`).

Reads:  ``<models>/<name>/model.pt`` for each name in `models` and `memory_models`,
        ``<snapshots>/<name>/`` (the train stage's snapshots and their index
        ``snapshots.json``, ``s2s.train.Snapshots``) for each name
        in `models`, ``<vocab>/{en,fr}.tsv``, ``<prepared>/test.tok.{en,fr}``; the phrases of
        Figure 2 are given raw and tokenised here the way the prepare stage tokenises the source
        side.
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
  ``gradient_reach_training.csv``  the same at each snapshot and at the end: model,
                           reverse_source, epoch, step, position, sentences, mean_norm, mean_share
  ``gradient_reach_training_diff.csv``  forward vs reversed at each epoch: per statistic of the
                           first source words (measures.FIRST_STATISTICS) the means, and
                           reversed - forward with its paired-bootstrap 95% interval over sentences
  ``memory_decay.csv``     model, stack, layer, steps_after, sentences, mean_abs_dc, mean_abs_dh,
                           forget_only_dc (LSTM), update_only_dh (GRU)
  ``memory_half_life.csv`` model, layer, half_life_c, half_life_forget_only, half_life_h,
                           half_life_update_only
  ``analysis.json``        what was measured and on what: models, counts, definitions, phrases
                           and their <unk> tokens, timings
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from s2s import arch, snapshots
from s2s import artifacts as A
from s2s.config import AnalysisConfig, Params
from s2s.dag import Arg, Stage, command

log = logging.getLogger("s2s.analysis")

HELP = "Figure 2, forget gates, gradient reach (also over training) and memory of `analysis`"
ARGS = (Arg("--prepared", "data/prepared"), Arg("--vocab", "data/vocab"), Arg("--models", "models"),
        # without it (or its folders), no gradient reach over training
        Arg("--snapshots", "snapshots", optional=True),
        Arg("--out", "outputs/analysis", writes=True, help="folder of the analyses"))


MEMORY_KEYS = ("memory_models", "memory_steps", "memory_candidates")  # each with a default


def memory_models(params: Params) -> tuple[str, ...]:
    """`analysis.memory_models`, or `analysis.models` where it is empty or not written."""
    return tuple(AnalysisConfig.read(params, "memory_models")) or tuple(params.analysis.models)


def stages(params: Params) -> list[Stage]:
    models = params.analysis.models
    both = tuple(dict.fromkeys((*models, *memory_models(params))))
    return [command(
        "analyze", "analyze", ARGS, include=("--snapshots",),
        parts={"--prepared": ("test.tok.en", "test.tok.fr"), "--models": both,
               "--snapshots": tuple(models)},
        params=("analysis.models", "analysis.phrases", "analysis.sentences",
                "analysis.max_position",
                *(f"analysis.{k}" for k in MEMORY_KEYS
                  if AnalysisConfig.written(params, k)),
                "prepare.lowercase", "model",
                *(f"models.{m}" for m in both)),
        code=arch.modules(params, both),
        doc="Figure 2, the forget gates and the gradient reach (at the end and at the "
            "snapshots of training)\nof the models analysis.models names; the memory of a "
            "one-word change of analysis.memory_models\n(empty: analysis.models).")]


def cli(args, params) -> None:
    cfg = params.analysis
    mem = memory_models(params)
    main(models=cfg.models, phrases=cfg.phrases, sentences=cfg.sentences,
         max_position=cfg.max_position, prepared_dir=args.prepared, vocab_dir=args.vocab,
         models_dir=args.models, out_dir=args.out, lowercase=params.prepare.lowercase,
         snapshots_dir=args.snapshots, memory_models=mem,
         memory_steps=AnalysisConfig.read(params, "memory_steps"),
         memory_candidates=AnalysisConfig.read(params, "memory_candidates"),
         expect={m: params.model_config(m) for m in dict.fromkeys((*cfg.models, *mem))})


def main(*, models: Sequence[str] | Mapping[str, Path], phrases: Sequence[str | Sequence[str]],
         sentences: int, max_position: int, prepared_dir: Path, vocab_dir: Path,
         out_dir: Path, models_dir: Path | None = None, lowercase: bool = False,
         representation: str = "top", min_length: int = 4, batch_size: int = 64,
         bins: int = 50, threads: int = 1, snapshots_dir: Path | None = None,
         memory_models: Sequence[str] | Mapping[str, Path] = (), memory_steps: int = 12,
         memory_candidates: int = 20, bootstrap: int = 1000,
         expect: Mapping[str, object] | None = None) -> A.AnalysisMeta:
    """Run the analyses on each model (names under models_dir, or a name -> model.pt
    mapping) and write the artifacts listed in the module docstring. `sentences` caps the test
    sentences used for the gates, for gradient reach (for the latter, those with at least
    `min_length` source words) and for memory; `phrases`: see probes.phrase_groups (empty: the
    Multi30k default set); `lowercase`: the prepare stage's setting; `snapshots_dir`: the train
    stages' snapshot folders (``<dir>/<name>/``; None: no reach over training); `memory_models`
    (names or a mapping, as `models`): whose encoder memory is traced; `expect`: name -> the
    config params give that model (``params.model_config``): a checkpoint of another model is
    refused."""
    import pandas as pd
    import torch

    from s2s import checkpoint
    from s2s.analysis import memory, probes
    from s2s.analysis.measures import (BOUNDARY_DEFINITION, DECAY_COLUMNS, FIRST,
                                       FIRST_STATISTICS, HALF_LIFE_COLUMNS, HIST_COLUMNS,
                                       REACH_DEFINITION, SUMMARY_COLUMNS, TRAINING_COLUMNS,
                                       TRAINING_DIFF_COLUMNS, UNIT_COLUMNS, _csv, _forget_frames,
                                       _resolve, _source_tokenizer, figure2, forget_gates,
                                       memory_frames, reach_frame, sentence_reach, training_diff)
    from s2s.data.batching import load_parallel
    from s2s.data.vocab import Vocab

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

    def load(name: str, path: Path):
        return checkpoint.load_model(path, src_vocab=src_vocab, tgt_vocab=tgt_vocab,
                                     expect=(expect or {}).get(name),
                                     name=name if expect and name in expect else None)

    fig_rows, fig_summary, hists, units, summaries, reach = [], [], [], [], [], []
    training, per_sentence, snapshot_epochs = [], {}, {}
    meta_models, seconds = {}, {}
    for name, path in paths.items():
        t0 = time.perf_counter()
        model = load(name, path)
        cfg = model.cfg
        meta_models[name] = A.AnalysedModel(
            path=str(path), reverse_source=cfg.reverse_source, arch=cfg.arch, cell=cfg.cell,
            forget_gates=arch.capable(cfg, "forget_gates"), num_layers=cfg.num_layers,
            hidden_size=cfg.hidden_size)
        rows, summary = figure2(model, name, phrase_list, pad=src_vocab.pad,
                                representation=representation)
        fig_rows.append(rows)
        fig_summary.append(summary)
        if arch.capable(cfg, "forget_gates"):
            stats = forget_gates(model, name, gate_pairs, src_vocab=src_vocab,
                                 tgt_vocab=tgt_vocab, batch_size=batch_size, bins=bins)
            h, u, s = _forget_frames(name, stats, bins)
            hists.append(h)
            units.append(u)
            summaries.append(s)
        else:
            log.warning("%s: no forget gates to trace (arch %s, cell %s): its forget-gate rows "
                        "are absent", name, cfg.arch, cfg.cell)
        r, per = sentence_reach(model, name, reach_pairs, vocab=tgt_vocab,
                                batch_size=batch_size, positions=max_position)
        reach.append(reach_frame(name, cfg.reverse_source, r, max_position))
        folder = None if snapshots_dir is None else Path(snapshots_dir) / name
        if folder is not None and (folder / snapshots.SNAPSHOT_INDEX).exists():
            index = snapshots.read_index(folder)
            points = [(s.epoch, s.step, folder / s.file) for s in index.snapshots]
            for epoch, step, snap in points:
                r_e, per_e = sentence_reach(load(name, snap), f"{name} epoch {epoch:g}",
                                            reach_pairs, vocab=tgt_vocab,
                                            batch_size=batch_size, positions=max_position)
                training.append(reach_frame(name, cfg.reverse_source, r_e, max_position,
                                            epoch=epoch, step=step))
                per_sentence[name, epoch] = per_e
            end = index.final_epoch
            training.append(reach_frame(name, cfg.reverse_source, r, max_position,
                                        epoch=end, step=index.total_steps))
            per_sentence[name, end] = per
            snapshot_epochs[name] = [e for e, _, _ in points] + [end]
        elif folder is not None:
            log.warning("%s: no snapshots in %s: no gradient reach over training", name, folder)
        seconds[name] = round(time.perf_counter() - t0, 2)
        log.info("%s (%s, reverse_source=%s): %.1fs", name, path, cfg.reverse_source,
                 seconds[name])

    # Memory: the same substitutions for every model (of the first `sentences` test sources).
    sources = [s for s, _ in gate_pairs]
    subs = memory.substitutions(sources, word=probes.word_table(src_vocab),
                                candidates=memory_candidates)
    decays, halves, memory_meta = [], [], {}
    mem_paths = _resolve(memory_models, models_dir) if memory_models else {}
    for name, path in mem_paths.items():
        t0 = time.perf_counter()
        model = load(name, path)
        if not arch.capable(model.cfg, "memory"):  # s2s check refuses it: a checkpoint's own arch
            raise ValueError(f"{name} ({path}): arch {model.cfg.arch} has no one-directional "
                             "recurrent encoder whose memory can be traced")
        sums = memory.memory_decay(model, sources, subs, pad=src_vocab.pad, steps=memory_steps,
                                   batch_size=batch_size)
        lstm = model.cfg.cell not in ("gru", "cho_gru")
        d, h = memory_frames(name, sums, lstm=lstm)
        decays.append(d)
        halves.append(h)
        memory_meta[name] = A.MemoryModel(cell=model.cfg.cell,
                                          reverse_source=model.cfg.reverse_source,
                                          gate="forget gate on c" if lstm else "update gate on h")
        log.info("%s: memory of %d substitutions in %.1fs", name, len(subs),
                 time.perf_counter() - t0)

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
    _csv(out_dir / "gradient_reach_training.csv",
         pd.concat(training)[TRAINING_COLUMNS] if training
         else pd.DataFrame(columns=TRAINING_COLUMNS), written)
    reverse = {n: m.reverse_source for n, m in meta_models.items() if n in snapshot_epochs}
    fwd = [n for n, r in reverse.items() if not r]
    rev = [n for n, r in reverse.items() if r]
    _csv(out_dir / "gradient_reach_training_diff.csv",
         training_diff(per_sentence, forward=fwd[0], reversed_=rev[0], samples=bootstrap)
         if fwd and rev else pd.DataFrame(columns=TRAINING_DIFF_COLUMNS), written)
    _csv(out_dir / "memory_decay.csv",
         pd.concat(decays) if decays else pd.DataFrame(columns=DECAY_COLUMNS), written)
    _csv(out_dir / "memory_half_life.csv",
         pd.concat(halves) if halves else pd.DataFrame(columns=HALF_LIFE_COLUMNS), written)
    # No timings in it: DVC hashes this file, and a rerun must give the same bytes (the seconds
    # per model are in the log).
    meta = A.AnalysisMeta(
        models=meta_models,
        test=A.AnalysisTest(pairs=len(test), gate_sentences=len(gate_pairs),
                            reach_sentences=len(reach_pairs), reach_min_length=min_length,
                            sentences_cap=sentences),
        figure2=A.Figure2Meta(
            representation=representation, groups=len(groups),
            phrases=tuple(A.Phrase(text=p.text, group=p.group + 1, tokens=tuple(p.tokens),
                                   unk=tuple(p.unk)) for p in phrase_list),
            lowercase=lowercase),
        forget=A.ForgetMeta(bins=bins, boundary=BOUNDARY_DEFINITION),
        gradient_reach=A.ReachMeta(max_position=max_position, definition=REACH_DEFINITION),
        gradient_reach_training=A.ReachTrainingMeta(
            epochs={n: tuple(e) for n, e in snapshot_epochs.items()}, first=FIRST,
            statistics=FIRST_STATISTICS, compared=(fwd[0], rev[0]) if fwd and rev else (),
            bootstrap=A.BootstrapMeta(samples=bootstrap, interval=0.95, seed=0,
                                      over="sentences (paired: the same sentences for both "
                                           "models)")),
        memory=A.MemoryMeta(
            models=memory_meta, steps=memory_steps, sentences=len(sources),
            substituted=len(subs), rule=memory.SUBSTITUTION_RULE.format(n=memory_candidates),
            examples=tuple(A.Substitution(
                sentence=" ".join(src_vocab.words[i] for i in sources[s.sentence]),
                position=s.position + 1, old=src_vocab.words[s.old], new=src_vocab.words[s.new])
                for s in subs[:5])),
        threads=torch.get_num_threads())
    meta.write(out_dir / "analysis.json")
    written.append(str(out_dir / "analysis.json"))
    log.info("read %s, %s, %s; wrote %s in %.1fs", ", ".join(str(p) for p in paths.values()),
             vocab_dir, Path(prepared_dir) / "test.tok.{en,fr}", ", ".join(written),
             time.perf_counter() - t_start)
    return meta
