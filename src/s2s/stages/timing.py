"""Stage `timing`: the decoding cost the paper's Table 1 caption claims (5 models at beam 2 cost
less than 1 model at beam 12), timed for the claim alone.

Reads:  ``<models>/<member>/model.pt`` of the systems the claim compares (paper.yaml
        ``claims.cost.rows``, answered by params `report.table1`), ``<prepared>/test.tok.en``,
        ``<vocab>/{en,fr}.tsv``; params `timing`, `translate`, those systems.
Writes: ``<out>`` (``outputs/timing/cost.json``, :class:`s2s.artifacts.CostTiming`): each
        system's milliseconds per sentence, one value per repetition.

After an untimed warm-up of each, the systems decode the (first `timing.sentences`) test
sentences in turns, system 1, system 2, ..., then again, `timing.repetitions` times, in one
process on one thread, so that a slow
moment of the machine falls on both sides of the comparison and the claim can give an interval
of the difference over repetitions. The decoding is the translate stage's (same batching,
precision and search); its hypotheses are not kept. Only the claims and report stages read this
file: re-timing reruns nothing else.
"""

from __future__ import annotations

import logging
import time

from s2s import arch
from s2s.config import Params
from s2s.dag import Arg, Stage, command
from s2s.layout import COST_FILE, TimingPaths, prepared_name
from s2s.paper import cost_systems

WARMUP = 50  # sentences each system decodes, untimed, before the first repetition

log = logging.getLogger("s2s.timing")

HELP = "time the systems of the paper's cost claim in turns, on one thread (the claim's input)"
ARGS = (Arg("--prepared", "data/prepared"), Arg("--vocab", "data/vocab"), Arg("--models", "models"),
        Arg("--out", COST_FILE, writes=True, help="cost.json to write"))
PATHS = TimingPaths  # ARGS as one value, which cli builds and main takes


def stages(params: Params) -> list[Stage]:
    timed = cost_systems(params)
    if len(timed) < 2:
        return []
    members = list(dict.fromkeys(m for s, _ in timed for m in params.systems[s].members))
    return [command(
        "timing", "timing", ARGS,
        parts={"--prepared": (prepared_name("test", "en"),), "--models": tuple(members)},
        deps=("src/s2s/paper.yaml",),  # the claim's rows
        params=("timing", "translate", "report.table1", "model",
                *(f"systems.{s}" for s in dict.fromkeys(s for s, _ in timed)),
                *(f"models.{m}" for m in members)),
        code=arch.modules(params, members),
        doc="The cost claim's own timing: its systems decode the test set in turns, "
            "timing.repetitions\ntimes, in one process on one thread (the report's verdict "
            "needs an interval over them).")]


def cli(args, params) -> None:
    main(params, TimingPaths.from_args(args))


def main(params: Params, paths: TimingPaths) -> dict:
    import torch

    from s2s import precision
    from s2s.artifacts import CostTiming, TimedSystem
    from s2s.data.vocab import Vocab
    from s2s.decode.translate import check_search_size, load_members, translate
    from s2s.device import describe, for_stage
    from s2s.io import read_lines

    t0 = time.perf_counter()
    timed = cost_systems(params)
    if len(timed) < 2:
        raise ValueError(f"{params.source}: the cost claim needs two systems of report.table1 "
                         f"to time, got {timed}")
    torch.set_num_threads(1)  # the claim is about one thread
    cfg = params.translate
    device = for_stage(params, "timing", name=cfg.device, key="translate.device")
    src_vocab, tgt_vocab = Vocab.load_pair(paths.vocab)
    lines = read_lines(paths.source)
    if params.timing.sentences:
        lines = lines[: params.timing.sentences]
    if not lines:
        raise ValueError(f"{paths.source}: no test sentence to time (an empty file)")
    sources = [src_vocab.encode(s) for s in lines]
    models = {s: load_members(params.model_configs(params.systems[s].members),
                              models_dir=paths.models, src_vocab=src_vocab, tgt_vocab=tgt_vocab,
                              device=device, combine=cfg.combine)
              for s in dict.fromkeys(s for s, _ in timed)}
    for system, beam in timed:
        check_search_size(beam=beam, batch_size=cfg.batch_size, vocab_size=len(tgt_vocab),
                          device=device, members=len(params.systems[system].members))
    chosen = precision.choose(cfg.amp, device)
    mm_dtype = chosen.dtype
    log.info("timing %s on %d test sentences, %d repetitions in turns, %s, %s",
             ", ".join(f"{s} beam {b}" for s, b in timed), len(sources),
             params.timing.repetitions, "1 thread" if device.type == "cpu" else describe(device),
             chosen)
    for system, beam in timed:  # untimed: the CPU library's first calls set up its kernels
        translate(models[system], sources[:WARMUP], cfg=cfg, beam=beam, nbest=1, vocab=tgt_vocab,
                  device=device, mm_dtype=mm_dtype, desc=f"{system} beam {beam} (warm-up)")
    ms: dict[tuple[str, int], list[float]] = {k: [] for k in timed}
    for rep in range(params.timing.repetitions):
        for system, beam in timed:
            start = time.perf_counter()
            translate(models[system], sources, cfg=cfg, beam=beam, nbest=1, vocab=tgt_vocab,
                      device=device, mm_dtype=mm_dtype, desc=f"{system} beam {beam}")
            ms[(system, beam)].append(
                round(1000 * (time.perf_counter() - start) / len(sources), 4))
        log.info("repetition %d of %d: %s", rep + 1, params.timing.repetitions,
                 ", ".join(f"{s} beam {b} {v[-1]:.2f} ms/sentence" for (s, b), v in ms.items()))
    record = CostTiming(sentences=len(sources), threads=torch.get_num_threads(),
                        precision=precision.name(mm_dtype), cpu=precision.cpu_kind(),
                        systems=tuple(TimedSystem(system=s, beam=b, ms_per_sentence=tuple(v))
                                      for (s, b), v in ms.items()),
                        device=describe(device) if device.type != "cpu" else None)
    record.write(paths.out)
    log.info("read %s, %s, %s; wrote %s in %.1fs", paths.models, paths.source, paths.vocab,
             paths.out,
             time.perf_counter() - t0)
    return record.to_json()

