"""The analyses of the analyze stage, one function each, over the models they are given:
:func:`run_figure2`, :func:`run_forget_gates`, :func:`run_gradient_reach` (at the end and over
training), :func:`run_memory`, :func:`run_init_reach`; and :func:`run_all`, which runs the five
and returns everything the stage writes (:class:`s2s.analysis.outputs.Analyses`), the derived
statistics the report and the claims quote among them.

No file is read or written here: the models come through `load` (a name and a checkpoint path
-> the model), the sentences as id pairs; :mod:`s2s.stages.analyze` reads and writes.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from s2s import arch, snapshots
from s2s import artifacts as A
from s2s.analysis import measures, memory, probes
from s2s.analysis.init_reach import init_reach
from s2s.analysis.outputs import FIRST, FIRST_STATISTICS, Analyses, as_written, empty
from s2s.config import AnalysisConfig
from s2s.data.vocab import Vocab
from s2s.layout import (GATE_SHARE_COLUMNS, REACH_FIRST_COLUMNS, STACK_COLUMNS, TRAINING_COLUMNS,
                        TRAINING_FIRST_COLUMNS)
from s2s.model.encdec import EncoderDecoder

log = logging.getLogger("s2s.analysis")

Load = Callable[[str, Path], EncoderDecoder]  # (name, model.pt or a snapshot) -> the model
Pairs = Sequence[tuple[Sequence[int], Sequence[int]]]  # (source ids, target ids)

INIT_FORGET_BIASES = (0.0, 1.0, 3.0)  # the LSTMs of init_reach.csv: the paper's init, then opened


@dataclass(frozen=True, kw_only=True)
class Settings:
    """How the analyses measure. `phrases`: Figure 2's meaning groups (probes.phrase_groups;
    empty: the Multi30k default set); `sentences`: the test sentences used (the first ones;
    for gradient reach, of those with at least `min_length` source words); `max_position`: the
    source positions of gradient reach; `lowercase`: the prepare stage's setting (the phrases
    are tokenised as it tokenises the source side); `representation`: Figure 2's vector
    (probes.sentence_vectors); `bins`: the forget-gate histogram's; `memory_steps`,
    `memory_candidates`: see s2s.analysis.memory; `bootstrap`: resamples of the paired
    forward-vs-reversed difference over training."""

    phrases: Sequence[str | Sequence[str]] = ()
    sentences: int
    max_position: int
    lowercase: bool = False
    representation: str = "top"
    min_length: int = 4
    batch_size: int = 64
    bins: int = 50
    memory_steps: int = AnalysisConfig.memory_steps
    memory_candidates: int = AnalysisConfig.memory_candidates
    bootstrap: int = 1000


@dataclass(frozen=True)
class Sentences:
    """The test pairs and the subsets each analysis reads."""

    pairs: Pairs
    gates: Pairs  # forget gates and memory: the first `sentences`
    reach: Pairs  # gradient reach: the first `sentences` of at least `min_length` words

    @classmethod
    def of(cls, pairs: Pairs, settings: Settings) -> Sentences:
        return cls(pairs, pairs[:settings.sentences],
                   [p for p in pairs if len(p[0]) >= settings.min_length][:settings.sentences])


# --- Figure 2 ------------------------------------------------------------------------------------


def run_figure2(models: Mapping[str, Path], load: Load, phrases: list[probes.Phrase], *,
                pad: int, representation: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """figure2.csv and figure2_summary.csv: each model's final encoder state of each phrase,
    projected by PCA (per model), and the distances of paraphrases and word-order swaps."""
    points, summaries = [], []
    for name, path in models.items():
        rows, summary = measures.figure2(load(name, path), name, phrases, pad=pad,
                                         representation=representation)
        points.append(rows)
        summaries.append(summary)
    return pd.concat(points), pd.DataFrame(summaries)


# --- forget gates --------------------------------------------------------------------------------


def run_forget_gates(models: Mapping[str, Path], load: Load, pairs: Pairs, *, src_vocab: Vocab,
                     tgt_vocab: Vocab, batch_size: int, bins: int
                     ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """forget_hist.csv, forget_units.csv and forget_summary.csv of the models whose cells have
    a forget gate (s2s.arch: `forget_gates`); a model without is logged and has no rows."""
    hists, units, summaries = [], [], []
    for name, path in models.items():
        model = load(name, path)
        cfg = model.cfg
        if not arch.capable(cfg, "forget_gates"):
            log.warning("%s: no forget gates to trace (arch %s, cell %s): its forget-gate rows "
                        "are absent", name, cfg.arch, cfg.cell)
            continue
        stats = measures.forget_gates(model, name, pairs, src_vocab=src_vocab,
                                      tgt_vocab=tgt_vocab, batch_size=batch_size, bins=bins)
        h, u, s = measures.forget_frames(name, stats, bins)
        hists.append(h)
        units.append(u)
        summaries.append(s)
    return (pd.concat(hists) if hists else empty("hist"),
            pd.concat(units) if units else empty("units"),
            pd.concat(summaries) if summaries else empty("forget"))


def forget_stacks(summary: pd.DataFrame) -> pd.DataFrame:
    """forget_stacks.csv from forget_summary.csv as written: per model and stack, its layers
    and units, the mean over layers of each layer's mean forget gate (the layers have the same
    steps and units), the share of its units whose half-life is above 10 steps, its longest
    half-life and the layer that has it, and in how many of its layers the mean gate at
    boundaries was compared with the one inside words, and was lower."""
    rows = []
    for (model, stack), df in summary.groupby(["model", "stack"], sort=False):
        b, i = df["boundary_mean_f"], df["inside_mean_f"]
        compared = [math.isfinite(x) and math.isfinite(y) for x, y in zip(b, i)]
        top = (df.loc[df["max_half_life"].idxmax()] if df["max_half_life"].notna().any()
               else df.iloc[0])
        rows.append({
            "model": model, "stack": stack, "layers": len(df), "units": int(df["units"].sum()),
            "mean_f": float(df["mean_f"].mean()),
            "units_half_life_above_10": float((df["units_half_life_above_10"] * df["units"]).sum()
                                              / df["units"].sum()),
            "max_half_life": float(top["max_half_life"]),
            "max_half_life_layer": int(top["layer"]),
            "layers_compared": sum(compared),
            "layers_boundary_lower": sum(c and x < y for c, x, y in zip(compared, b, i))})
    return pd.DataFrame(rows, columns=list(STACK_COLUMNS))


# --- gradient reach ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reach:
    """What :func:`run_gradient_reach` measured: the tables of gradient_reach.csv,
    gradient_reach_training.csv, gradient_reach_training_diff.csv and
    gradient_reach_seed_pairs.csv; the epochs measured per model (its snapshots, then the end);
    the (forward, reversed) pair compared, or (); the seed pairs compared over training."""

    reach: pd.DataFrame
    training: pd.DataFrame
    training_diff: pd.DataFrame
    seed_pairs: pd.DataFrame
    epochs: dict[str, tuple[float, ...]] = field(default_factory=dict)
    compared: tuple[str, ...] = ()
    pairs: tuple[tuple[str, str], ...] = ()


def run_gradient_reach(models: Mapping[str, Path], load: Load, pairs: Pairs, *, vocab: Vocab,
                       batch_size: int, positions: int, snapshots_dir: Path | None,
                       bootstrap: int, replicas: Mapping[str, Path] | None = None,
                       seed_pairs: Sequence[tuple[str, str]] = ()) -> Reach:
    """Gradient reach of each model at the end of training and, where its train stage kept
    snapshots (``<snapshots_dir>/<name>/``, s2s.snapshots), at each of them; the first
    forward and the first reversed model that have them compared epoch by epoch, per statistic
    of FIRST_STATISTICS, by a paired bootstrap over the same sentences; and each of
    `seed_pairs` (forward, reversed: s2s.config.seed_pairs) that both have snapshots compared
    the same way, for the interval over seeds. `replicas` (analysis.reach_replicas): models
    measured for `seed_pairs` alone, in no other table."""
    ends, training = [], []
    per_sentence: dict[tuple[str, float], dict] = {}
    epochs: dict[str, tuple[float, ...]] = {}
    reverse: dict[str, bool] = {}
    replicas = dict(replicas or {})
    for name, path in {**models, **replicas}.items():
        model = load(name, path)
        rev = model.cfg.reverse_source
        r, per = measures.sentence_reach(model, name, pairs, vocab=vocab, batch_size=batch_size,
                                         positions=positions)
        own = name not in replicas  # a replica's numbers enter the seed pairs' table alone
        if own:
            ends.append(measures.reach_frame(name, rev, r, positions))
        folder = None if snapshots_dir is None else Path(snapshots_dir) / name
        if folder is None:
            continue
        if not (folder / snapshots.SNAPSHOT_INDEX).exists():
            log.warning("%s: no snapshots in %s: no gradient reach over training", name, folder)
            continue
        index = snapshots.read_index(folder)
        for s in index.snapshots:
            r_e, per_e = measures.sentence_reach(
                load(name, folder / s.file), f"{name} epoch {s.epoch:g}", pairs, vocab=vocab,
                batch_size=batch_size, positions=positions)
            if own:
                training.append(measures.reach_frame(name, rev, r_e, positions,
                                                     epoch=s.epoch, step=s.step))
            per_sentence[name, s.epoch] = per_e
        end = index.final_epoch
        if own:
            training.append(measures.reach_frame(name, rev, r, positions, epoch=end,
                                                 step=index.total_steps))
        per_sentence[name, end] = per
        epochs[name] = tuple(s.epoch for s in index.snapshots) + (end,)
        reverse[name] = rev
    fwd = [n for n, r in reverse.items() if not r and n not in replicas]
    rev_ = [n for n, r in reverse.items() if r and n not in replicas]
    compared = (fwd[0], rev_[0]) if fwd and rev_ else ()
    diff = (measures.training_diff(per_sentence, forward=fwd[0], reversed_=rev_[0],
                                   samples=bootstrap)
            if compared else empty("training_diff"))
    measured = tuple((f, r) for f, r in seed_pairs if f in epochs and r in epochs)
    for f, r in seed_pairs:
        if (f, r) not in measured:
            log.warning("seed pair %s, %s: not both with snapshots: left out of the interval over "
                        "seeds", f, r)
    by_pair = [measures.training_diff(per_sentence, forward=f, reversed_=r, samples=bootstrap)
               for f, r in measured]
    return Reach(reach=pd.concat(ends),
                 training=(pd.concat(training)[list(TRAINING_COLUMNS)] if training
                           else empty("training")),
                 training_diff=diff,
                 seed_pairs=pd.concat(by_pair) if by_pair else empty("seed_pairs"),
                 epochs=epochs, compared=compared, pairs=measured)


def first_positions(reach: pd.DataFrame, model: str, upto: int = FIRST) -> tuple[float, float]:
    """Mean gradient norm and mean share over (sentence, position) at positions 1..upto of
    `model`'s rows of a gradient_reach table."""
    sel = reach[(reach["model"] == model) & (reach["position"] <= upto) & (reach["sentences"] > 0)]
    n = sel["sentences"].sum()
    if n == 0:
        return math.nan, math.nan
    return (float((sel["mean_norm"] * sel["sentences"]).sum() / n),
            float((sel["mean_share"] * sel["sentences"]).sum() / n))


def reach_first(reach: pd.DataFrame) -> pd.DataFrame:
    """gradient_reach_first.csv from gradient_reach.csv as written: per model, the gradient at
    source positions 1-FIRST at the end of training (:func:`first_positions`)."""
    rows = []
    for model in dict.fromkeys(reach["model"]):
        norm, share = first_positions(reach, model)
        rows.append({"model": model,
                     "reverse_source": bool(reach[reach["model"] == model]["reverse_source"]
                                            .iloc[0]),
                     "positions": FIRST, "mean_norm": norm, "mean_share": share})
    return pd.DataFrame(rows, columns=list(REACH_FIRST_COLUMNS))


def first_over_training(training: pd.DataFrame, upto: int = FIRST) -> pd.DataFrame:
    """gradient_reach_training_first.csv from gradient_reach_training.csv as written: per model
    and epoch, the mean gradient norm over (sentence, position) at positions 1..upto (as
    :func:`first_positions`) and the mean over sentences of the share of the sentence's
    gradient that reaches positions 1..upto together."""
    rows = []
    for (model, epoch), df in training.groupby(["model", "epoch"], sort=False):
        norm, _ = first_positions(df, model, upto)
        sel = df[(df["position"] <= upto) & (df["sentences"] > 0)]
        n = int(df.loc[df["position"] == 1, "sentences"].sum())
        share = float((sel["mean_share"] * sel["sentences"]).sum() / n) if n else math.nan
        rows.append({"model": model, "reverse_source": bool(df["reverse_source"].iloc[0]),
                     "epoch": float(epoch), "norm": norm, "share": share})
    return pd.DataFrame(rows, columns=list(TRAINING_FIRST_COLUMNS)
                        ).sort_values(["model", "epoch"], kind="stable")


# --- memory of a one-word change -----------------------------------------------------------------


def run_memory(models: Mapping[str, Path], load: Load, sources: Sequence[Sequence[int]], *,
               src_vocab: Vocab, steps: int, candidates: int, batch_size: int
               ) -> tuple[pd.DataFrame, pd.DataFrame, A.MemoryMeta]:
    """memory_decay.csv and memory_half_life.csv: the same one-word substitutions of `sources`
    (s2s.analysis.memory.substitutions) traced through each model's encoder, and what was
    traced. A model whose architecture has no one-directional recurrent encoder is refused."""
    subs = memory.substitutions(sources, word=probes.word_table(src_vocab), candidates=candidates)
    decays, halves, traced = [], [], {}
    for name, path in models.items():
        t0 = time.perf_counter()
        model = load(name, path)
        if not arch.capable(model.cfg, "memory"):  # s2s check refuses it: a checkpoint's own arch
            raise ValueError(f"{name} ({path}): arch {model.cfg.arch} has no one-directional "
                             "recurrent encoder whose memory can be traced")
        sums = memory.memory_decay(model, sources, subs, pad=src_vocab.pad, steps=steps,
                                   batch_size=batch_size)
        lstm = model.cfg.cell in arch.LSTM_CELLS
        d, h = measures.memory_frames(name, sums, lstm=lstm)
        decays.append(d)
        halves.append(h)
        traced[name] = A.MemoryModel(cell=model.cfg.cell, reverse_source=model.cfg.reverse_source,
                                     gate="forget gate on c" if lstm else "update gate on h")
        log.info("%s: memory of %d substitutions in %.1fs", name, len(subs),
                 time.perf_counter() - t0)
    meta = A.MemoryMeta(
        models=traced, steps=steps, sentences=len(sources), substituted=len(subs),
        rule=memory.SUBSTITUTION_RULE.format(n=candidates),
        examples=tuple(A.Substitution(
            sentence=" ".join(src_vocab.words[i] for i in sources[s.sentence]),
            position=s.position + 1, old=src_vocab.words[s.old], new=src_vocab.words[s.new])
            for s in subs[:5]))
    return (pd.concat(decays) if decays else empty("decay"),
            pd.concat(halves) if halves else empty("half_life"), meta)


def gate_share(decay: pd.DataFrame, model: str, layer: int) -> float:
    """The share of the measured difference after the change (steps 1..K, summed) that the
    gate alone carries: sum of the rolled difference / sum of the measured one (c for an LSTM,
    h for a GRU); above 1, the input path cancels part of what the gate keeps."""
    df = decay[(decay["model"] == model) & (decay["layer"] == layer)
               & (decay["steps_after"] >= 1) & (decay["sentences"] > 0)]
    lstm = df["mean_abs_dc"].notna().any()
    measured = df["mean_abs_dc" if lstm else "mean_abs_dh"].sum()
    rolled = df["forget_only_dc" if lstm else "update_only_dh"].sum()
    return float(rolled / measured) if measured > 0 else math.nan


def gate_shares(decay: pd.DataFrame, half_life: pd.DataFrame) -> pd.DataFrame:
    """memory_gate_share.csv from memory_decay.csv as written: :func:`gate_share` for each
    (model, layer) of memory_half_life.csv, in its order."""
    rows = [{"model": r["model"], "layer": int(r["layer"]),
             "gate_share": gate_share(decay, r["model"], int(r["layer"]))}
            for _, r in half_life.iterrows()]
    return pd.DataFrame(rows, columns=list(GATE_SHARE_COLUMNS))


# --- at initialisation ---------------------------------------------------------------------------


def run_init_reach() -> pd.DataFrame:
    """init_reach.csv: how far back a gradient reaches at initialisation, before any training,
    for a vanilla RNN and LSTMs by forget bias (s2s.analysis.init_reach; no trained model)."""
    return init_reach(forget_biases=INIT_FORGET_BIASES)


# --- all of them ---------------------------------------------------------------------------------


def run_all(*, models: Mapping[str, Path], memory_models: Mapping[str, Path], load: Load,
            test: Pairs, src_vocab: Vocab, tgt_vocab: Vocab, settings: Settings,
            snapshots_dir: Path | None, threads: int,
            reach_replicas: Mapping[str, Path] | None = None,
            seed_pairs: Sequence[tuple[str, str]] = ()) -> Analyses:
    """The five analyses of `models` (memory: of `memory_models`) on the test pairs `test`,
    their derived statistics, and the record of what was measured (no timings in it: DVC hashes
    it, and a rerun writes the same bytes). `reach_replicas`, `seed_pairs`: the gradient reach
    over training's seed pairs (:func:`run_gradient_reach`)."""
    cfg = settings
    sentences = Sentences.of(test, cfg)
    if cfg.phrases:
        phrases = cfg.phrases
    else:
        log.info("no phrases given: Figure 2 uses the Multi30k default set (%d groups)",
                 len(probes.MULTI30K_PHRASES))
        phrases = probes.MULTI30K_PHRASES
    groups = probes.phrase_groups(phrases)
    phrase_list = probes.encode_phrases(groups, src_vocab,
                                        measures.source_tokenizer(cfg.lowercase))
    unk = sorted({t for p in phrase_list for t in p.unk})
    if unk:
        log.warning("phrase tokens outside the source vocabulary (read as <unk>): %s",
                    ", ".join(unk))
    log.info("%d test pairs: %d for the gates, %d (>= %d source words) for gradient reach; "
             "%d phrases in %d groups; models %s", len(test), len(sentences.gates),
             len(sentences.reach), cfg.min_length, len(phrase_list), len(groups),
             ", ".join(models))

    configs = {}  # each analysed model's config, as Figure 2 (which reads every one) loads it

    def load_each(name: str, path: Path) -> EncoderDecoder:
        model = load(name, path)
        configs[name] = model.cfg
        return model

    t0 = time.perf_counter()
    points, fig2 = run_figure2(models, load_each, phrase_list, pad=src_vocab.pad,
                               representation=cfg.representation)
    hist, units, forget = run_forget_gates(models, load, sentences.gates, src_vocab=src_vocab,
                                           tgt_vocab=tgt_vocab, batch_size=cfg.batch_size,
                                           bins=cfg.bins)
    reach = run_gradient_reach(models, load, sentences.reach, vocab=tgt_vocab,
                               batch_size=cfg.batch_size, positions=cfg.max_position,
                               snapshots_dir=snapshots_dir, bootstrap=cfg.bootstrap,
                               replicas=reach_replicas, seed_pairs=seed_pairs)
    log.info("Figure 2, forget gates and gradient reach of %s: %.1fs", ", ".join(models),
             time.perf_counter() - t0)
    sources = [s for s, _ in sentences.gates]  # memory: the same substitutions for every model
    decay, half_life, memory_meta = run_memory(
        memory_models, load, sources, src_vocab=src_vocab, steps=cfg.memory_steps,
        candidates=cfg.memory_candidates, batch_size=cfg.batch_size)

    meta = A.AnalysisMeta(
        models={name: A.AnalysedModel(
            path=str(path), reverse_source=c.reverse_source, arch=c.arch, cell=c.cell,
            forget_gates=arch.capable(c, "forget_gates"), num_layers=c.num_layers,
            hidden_size=c.hidden_size) for name, path in models.items()
            for c in (configs[name],)},
        test=A.AnalysisTest(pairs=len(test), gate_sentences=len(sentences.gates),
                            reach_sentences=len(sentences.reach),
                            reach_min_length=cfg.min_length, sentences_cap=cfg.sentences),
        figure2=A.Figure2Meta(
            representation=cfg.representation, groups=len(groups),
            phrases=tuple(A.Phrase(text=p.text, group=p.group + 1, tokens=tuple(p.tokens),
                                   unk=tuple(p.unk)) for p in phrase_list),
            lowercase=cfg.lowercase),
        forget=A.ForgetMeta(bins=cfg.bins, boundary=measures.BOUNDARY_DEFINITION),
        gradient_reach=A.ReachMeta(max_position=cfg.max_position,
                                   definition=measures.REACH_DEFINITION),
        gradient_reach_training=A.ReachTrainingMeta(
            epochs=reach.epochs, first=FIRST, statistics=FIRST_STATISTICS,
            compared=reach.compared, seed_pairs=reach.pairs,
            bootstrap=A.BootstrapMeta(samples=cfg.bootstrap, interval=0.95, seed=0,
                                      over="sentences (paired: the same sentences for both "
                                           "models)")),
        memory=memory_meta, threads=threads)
    return Analyses(
        meta=meta, points=points, figure2=fig2, hist=hist, units=units, forget=forget,
        reach=reach.reach, training=reach.training, training_diff=reach.training_diff,
        seed_pairs=reach.seed_pairs,
        init_reach=run_init_reach(), decay=decay, half_life=half_life,
        reach_first=reach_first(as_written(reach.reach, "reach")),
        training_first=first_over_training(as_written(reach.training, "training")),
        stacks=forget_stacks(as_written(forget, "forget")),
        gate_share=gate_shares(as_written(decay, "decay"),
                               as_written(half_life, "half_life")))
