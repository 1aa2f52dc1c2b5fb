"""Stage `translate-<system>`: decode the test set with one model or an ensemble (§3.2).

Reads:  ``<models>/<member>/model.pt`` for each member of `systems.<system>`,
        ``<prepared>/test.tok.en``, ``<vocab>/{en,fr}.tsv``, params `systems.<system>`, `translate`.
Writes: ``<out>/beam<K>.tok.fr`` (Moses-tokenised, the paper's BLEU input),
        ``<out>/beam<K>.detok.fr`` (sacremoses-detokenised, sacreBLEU's input),
        ``<out>/beam<K>.nbest`` (Moses n-best format:
        ``id ||| hypothesis ||| <kind>=<logprob> ||| score``, the kind of the system's models:
        ``lstm``, ``gru``, ``cho``, ``attention``, ``transformer``),
        ``<out>/timing.json`` (:class:`s2s.artifacts.Timing`): seconds and sentences/s per beam
        width (the paper's cost claim), written last: the mark of a complete run. Before it writes
        its first beam file, a run removes an earlier run's ``timing.json`` and then every beam
        file of it (of any beam), so a killed run leaves only its own complete beam files and no
        ``timing.json``, never an earlier run's files beside its own (the evaluate stage warns
        of a system folder without ``timing.json``).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from pathlib import Path

from s2s import arch
from s2s.config import Params
from s2s.dag import Arg, Item, Stage, command
from s2s.layout import TranslatePaths, prepared_name

log = logging.getLogger("s2s.translate")

HELP = ("decode the test set with one system of `systems` (the pipeline stage; for your own "
        "text see translate-text)")
ITEM = Item("system", "system", "systems", "a system of params `systems` (e.g. ensemble5)")
ARGS = (Arg("--prepared", "data/prepared"), Arg("--vocab", "data/vocab"), Arg("--models", "models"),
        Arg("--out", "outputs/translate/{item}", writes=True,
            help="the system's output folder (hypotheses, n-best lists, timing)"))
PATHS = TranslatePaths  # ARGS as one value, which cli builds and main takes


def stages(params: Params) -> list[Stage]:
    return [command(
        f"translate-{system}", "translate", ARGS, item=system,
        parts={"--prepared": (prepared_name("test", "en"),), "--models": cfg.members},
        params=(f"systems.{system}", "translate", "model",
                *(f"models.{m}" for m in cfg.members)),
        code=arch.modules(params, cfg.members),
        doc="" if i else "One stage per system of params `systems`, its members' models as inputs.")
        for i, (system, cfg) in enumerate(params.systems.items())]


def cli(args, params) -> None:
    main(params, args.system, TranslatePaths.from_args(args))


# an output of a translate run, of any beam, in a system's folder (TranslatePaths.outputs), and
# the temporary file of one (s2s.io.atomic_open's ``.<name>.<owner>-<random>.tmp``)
_BEAM_FILE = re.compile(r"beam\d+\.(?:tok\.fr|detok\.fr|nbest)")
_BEAM_TEMPORARY = re.compile(r"\.(beam\d+\.(?:tok\.fr|detok\.fr|nbest))\..+\.tmp")


def earlier_run(paths: TranslatePaths, system: str) -> bool:
    """Whether the folder holds a complete earlier run of `system` (its ``timing.json`` says so).
    A folder whose ``timing.json`` is another system's is refused, before anything is decoded or
    removed: --out must be the system's own folder (as the pipeline lays it out)."""
    from s2s.artifacts import ArtifactError, Timing

    if not paths.timing.is_file():
        return False
    try:
        named = Timing.read(paths.timing).system
    except ArtifactError:  # damaged: a run of this system's, whose mark is not to be trusted
        return False
    if named != system:
        raise ValueError(f"{paths.out}: its {paths.timing.name} is system '{named}''s, not "
                         f"'{system}''s: give --out the system's own folder (nothing removed)")
    return True


def clear_earlier_run(paths: TranslatePaths, beams: Sequence[int], *, own: bool) -> list[Path]:
    """Remove what an earlier run left in the system's folder: its ``timing.json`` first (the
    mark of a complete run), then its beam files: those of `beams` (this run writes them again),
    and, where the folder held a complete earlier run of this system (`own`:
    :func:`earlier_run`), those of any other beam too; returns those removed. The temporaries that
    a killed run's writes left are removed too where their owner is gone (a live run's stay). A
    kill in between leaves some of the earlier run's beam files without ``timing.json``: an
    incomplete folder, as a killed run's."""
    from s2s.io import remove_dead_temporaries

    removed = []
    if paths.timing.is_file() or paths.timing.is_symlink():
        paths.timing.unlink()
        removed.append(paths.timing)
    remove_dead_temporaries(paths.timing)
    if not paths.out.is_dir():
        return removed
    mine = {p.name for b in beams for p in paths.outputs(b)}
    written = set()
    for path in sorted(paths.out.iterdir()):
        if _BEAM_FILE.fullmatch(path.name) and (own or path.name in mine) and (
                path.is_file() or path.is_symlink()):
            path.unlink()
            removed.append(path)
            written.add(path)
        elif m := _BEAM_TEMPORARY.fullmatch(path.name):
            written.add(paths.out / m[1])
    for path in sorted(written):
        remove_dead_temporaries(path)
    return removed


def main(params: Params, system: str, paths: TranslatePaths) -> dict:
    """Decode the test set at each of the system's beams and write its outputs; return its
    timing as written. The test set and every beam are checked before the first model loads."""
    import torch

    from s2s import precision
    from s2s.artifacts import BeamTiming, Timing
    from s2s.data.text import detokenize
    from s2s.data.vocab import Vocab
    from s2s.decode.translate import check_lengths, check_search_size, load_members, translate
    from s2s.device import for_stage
    from s2s.io import atomic_write_lines, read_lines
    from s2s.layout import nbest_line

    t_start = time.perf_counter()
    if system not in params.systems:
        raise KeyError(f"{params.source}: no system '{system}' under 'systems' "
                       f"(known: {', '.join(params.systems)})")
    sys_cfg, cfg = params.systems[system], params.translate
    own = earlier_run(paths, system)
    configs = params.model_configs(sys_cfg.members)
    feature = arch.feature_name(configs.values())  # the n-best lists' feature
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    device = for_stage(params, "translate", name=cfg.device, key="translate.device")
    chosen = precision.choose(cfg.amp, device)
    src_vocab, tgt_vocab = Vocab.load_pair(paths.vocab)
    sources = [src_vocab.encode(s) for s in read_lines(paths.source)]
    check_lengths(sources, configs=configs.values(), cfg=cfg, where=str(paths.source))
    for beam in sys_cfg.beams:
        check_search_size(beam=beam, batch_size=cfg.batch_size, vocab_size=len(tgt_vocab),
                          device=device, members=len(configs))
    model = load_members(configs, models_dir=paths.models, src_vocab=src_vocab,
                         tgt_vocab=tgt_vocab, device=device, combine=cfg.combine)
    log.info("%s: %d members (%s), %d test sentences, beams %s, device %s, %s", system,
             len(sys_cfg.members), ", ".join(sys_cfg.members), len(sources), sys_cfg.beams, device,
             chosen)

    beams: dict[int, BeamTiming] = {}
    for beam in sys_cfg.beams:
        t0 = time.perf_counter()
        hyps = translate(model, sources, cfg=cfg, beam=beam, nbest=min(sys_cfg.nbest, beam),
                         vocab=tgt_vocab, device=device, desc=f"{system} beam {beam}",
                         mm_dtype=chosen.dtype)
        seconds = time.perf_counter() - t0
        if len(hyps) != len(sources):  # never score a truncated output
            raise RuntimeError(f"{system} beam {beam}: {len(hyps)} hypotheses for "
                               f"{len(sources)} sources")
        if not beams:  # the first files of this run: none of an earlier run may stay beside them
            for path in clear_earlier_run(paths, sys_cfg.beams, own=own):
                log.info("removed %s, of an earlier run", path)
        best = [tgt_vocab.decode(h[0].tokens) for h in hyps]
        nbest = [nbest_line(i, tgt_vocab.decode(h.tokens), feature, h.score)
                 for i, hs in enumerate(hyps) for h in hs]
        tok_file, detok_file, nbest_file = paths.outputs(beam)
        atomic_write_lines(tok_file, best)
        atomic_write_lines(detok_file, [detokenize(s, "fr") for s in best])
        atomic_write_lines(nbest_file, nbest)
        beams[beam] = BeamTiming(sentences=len(sources), seconds=round(seconds, 3),
                                 sents_per_sec=round(len(sources) / seconds, 3))
        log.info("%s beam %d: %d sentences in %.1fs (%.1f sentences/s)", system, beam,
                 len(sources), seconds, len(sources) / seconds)
    timing = Timing(system=system, members=sys_cfg.members, device=str(device),
                    threads=torch.get_num_threads(), precision=precision.name(chosen.dtype),
                    beams=beams)
    timing.write(paths.timing)
    log.info("read %s, %s; wrote %s in %.1fs", paths.models, paths.source, paths.out,
             time.perf_counter() - t_start)
    return timing.to_json()
