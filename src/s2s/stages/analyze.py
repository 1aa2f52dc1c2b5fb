"""Stage `analyze`: Figure 2, the forget gates and the gradient reach of the models
`analysis.models` names (the reach also at the snapshots their train stages kept), the memory of a
one-word change in the encoders of `analysis.memory_models`, and the gradient at initialisation.
The analyses are :mod:`s2s.analysis.run`'s, one function each.

Reads:  ``<models>/<name>/model.pt`` for each name in `models`, `memory_models` and
        `reach_replicas`, ``<snapshots>/<name>/`` (the train stage's snapshots and their index
        ``snapshots.json``, ``s2s.snapshots``) for each name in `models` and `reach_replicas`
        (the seed replicas whose gradient reach over training gives the reversal argument its
        interval over seeds: s2s.config.seed_pairs pairs them), ``<vocab>/{en,fr}.tsv``,
        ``<prepared>/test.tok.{en,fr}``; the phrases of Figure 2 are given raw and tokenised here
        the way the prepare stage tokenises the source side.
Writes: ``<out>/``: the tables of :data:`s2s.layout.ANALYSIS_TABLES` (each file's columns are
        listed there) and ``analysis.json`` (:class:`s2s.artifacts.AnalysisMeta`: what was
        measured and on what; no timings, so a rerun writes the same bytes).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from s2s import arch
from s2s import artifacts as A
from s2s.config import AnalysisConfig, ConfigError, Params, seed_pairs
from s2s.dag import Arg, Stage, command
from s2s.layout import AnalyzePaths, model_file, prepared_names

log = logging.getLogger("s2s.analysis")

HELP = "Figure 2, forget gates, gradient reach (also over training) and memory of `analysis`"
ARGS = (Arg("--prepared", "data/prepared"), Arg("--vocab", "data/vocab"), Arg("--models", "models"),
        # without it (or its folders), no gradient reach over training
        Arg("--snapshots", "snapshots", optional=True),
        Arg("--out", "outputs/analysis", writes=True, help="folder of the analyses"))
PATHS = AnalyzePaths  # ARGS as one value, which cli builds and main takes


# each with a default: declared only where the file writes it (AnalysisConfig.written)
DEFAULTED_KEYS = ("memory_models", "memory_steps", "memory_candidates", "reach_replicas")


def memory_models(params: Params) -> tuple[str, ...]:
    """`analysis.memory_models`, or `analysis.models` where it is empty or not written."""
    return tuple(AnalysisConfig.read(params, "memory_models")) or tuple(params.analysis.models)


def stages(params: Params) -> list[Stage]:
    """The stage, where `analysis.models` names a model (a profile of Transformers alone has none
    the analyses can read: then no stage, and the claims and the report leave the analyses and
    their claims out)."""
    models = params.analysis.models
    if not models:
        return []
    replicas = tuple(AnalysisConfig.read(params, "reach_replicas"))
    both = tuple(dict.fromkeys((*models, *memory_models(params), *replicas)))
    return [command(
        "analyze", "analyze", ARGS, include=("--snapshots",),
        parts={"--prepared": prepared_names("test"), "--models": both,
               "--snapshots": (*models, *replicas)},
        params=("analysis.models", "analysis.phrases", "analysis.sentences",
                "analysis.max_position",
                *(f"analysis.{k}" for k in DEFAULTED_KEYS
                  if AnalysisConfig.written(params, k)),
                "prepare.lowercase", "model",
                *(f"models.{m}" for m in both)),
        code=arch.modules(params, both),
        doc="Figure 2, the forget gates and the gradient reach (at the end and at the "
            "snapshots of training)\nof the models analysis.models names, the gradient reach "
            "over training of\nanalysis.reach_replicas (their seed replicas); the memory of a "
            "one-word change of\nanalysis.memory_models (empty: analysis.models).")]


def cli(args, params) -> None:
    cfg = params.analysis
    if not cfg.models:
        raise ConfigError(f"{params.source}: 'analysis.models' is empty: no model to analyse "
                          f"(the pipeline has no analyze stage then)")
    mem = memory_models(params)
    replicas = tuple(AnalysisConfig.read(params, "reach_replicas"))
    pairs = seed_pairs(params, (*cfg.models, *replicas))
    paired = {m for pair in pairs for m in pair}
    for m in replicas:
        if m not in paired:
            log.warning("analysis.reach_replicas: %s pairs with no model of the other reading "
                        "order among analysis.models and analysis.reach_replicas (the same "
                        "settings and seeds): left out of the interval over seeds", m)
    main(AnalyzePaths.from_args(args), models=cfg.models, phrases=cfg.phrases,
         sentences=cfg.sentences, max_position=cfg.max_position,
         lowercase=params.prepare.lowercase, memory_models=mem,
         memory_steps=AnalysisConfig.read(params, "memory_steps"),
         memory_candidates=AnalysisConfig.read(params, "memory_candidates"),
         reach_replicas=replicas, seed_pairs=pairs,
         expect=params.model_configs(dict.fromkeys((*cfg.models, *mem, *replicas))))


def main(paths: AnalyzePaths, *, models: Sequence[str] | Mapping[str, Path],
         memory_models: Sequence[str] | Mapping[str, Path] = (),
         reach_replicas: Sequence[str] | Mapping[str, Path] = (),
         seed_pairs: Sequence[tuple[str, str]] = (),
         expect: Mapping[str, object] | None = None, threads: int = 1,
         **settings) -> A.AnalysisMeta:
    """Run the analyses (:func:`s2s.analysis.run.run_all`) and write their folder ``paths.out``;
    return its record. `models`, `memory_models`, `reach_replicas`: names under
    ``paths.models`` or name -> model.pt mappings; `seed_pairs`: the (forward, reversed) seed
    pairs among `models` and `reach_replicas` (s2s.config.seed_pairs) whose gradient reach over
    training is compared; ``paths.snapshots``: the train stages' snapshot folders (None: no
    reach over training); `expect`: name -> the config params give that model
    (``params.model_config``), so that a checkpoint of another model is refused; `settings`: the
    fields of :class:`s2s.analysis.run.Settings` (phrases, sentences, max_position, lowercase,
    ...)."""
    import torch

    from s2s import checkpoint
    from s2s.analysis import outputs, run
    from s2s.data.batching import load_parallel
    from s2s.data.text import CorpusError
    from s2s.data.vocab import Vocab

    t_start = time.perf_counter()
    cfg = run.Settings(**settings)
    if threads:
        torch.set_num_threads(threads)
    src_vocab, tgt_vocab = Vocab.load_pair(paths.vocab)
    test = load_parallel(paths.prepared / "test.tok", src_vocab, tgt_vocab)
    if not test:  # every analysis averages over test sentences
        raise CorpusError(f"{paths.prepared / 'test.tok.en'}: no test sentences to analyse")
    expect = expect or {}

    def load(name: str, path: Path):
        return checkpoint.load_model(path, src_vocab=src_vocab, tgt_vocab=tgt_vocab,
                                     expect=expect.get(name),
                                     name=name if name in expect else None)

    files = _resolve(models, paths.models)
    found = run.run_all(models=files, memory_models=_resolve(memory_models, paths.models),
                        load=load, test=test, src_vocab=src_vocab, tgt_vocab=tgt_vocab,
                        settings=cfg, snapshots_dir=paths.snapshots,
                        threads=torch.get_num_threads(),
                        reach_replicas=_resolve(reach_replicas, paths.models),
                        seed_pairs=seed_pairs)
    written = outputs.write(paths.out, found)
    log.info("read %s, %s, %s; wrote %s in %.1fs", ", ".join(str(p) for p in files.values()),
             paths.vocab, paths.prepared / "test.tok.{en,fr}", ", ".join(map(str, written)),
             time.perf_counter() - t_start)
    return found.meta


def _resolve(models: Sequence[str] | Mapping[str, Path], models_dir: Path | None
             ) -> dict[str, Path]:
    """name -> model.pt: a mapping as it is, names under `models_dir`."""
    if isinstance(models, Mapping):
        return {name: Path(p) for name, p in models.items()}
    if models and models_dir is None:
        raise ValueError("models given by name need models_dir")
    return {name: model_file(models_dir, name) for name in models}
