"""Evaluate stage: BLEU of every translation and rescoring output, and the Figure 3 groups.

Reads
  ``<prepared>/test.tok.fr`` (tokenized references), ``test.raw.fr`` (untokenized references,
  for sacreBLEU), ``test.tok.en`` (tokenized source, for the groups), ``<vocab>/en.tsv``;
  ``<translate>/<system>/beam<K>.{tok,detok}.fr`` for every system and beam of params
  ``systems``; ``<rescore>/<name>/<name>.{tok,detok}.fr`` for each rescorer of params
  ``rescore.rescorers`` and ``<rescore>/oracle/{baseline,oracle}.{tok,detok}.fr``
  (:class:`s2s.layout.EvaluatePaths` names these paths).
Writes
  ``<metrics>`` (``metrics/bleu.json``, :class:`s2s.artifacts.Bleu`): both BLEU scores of every
  translation (system, beam) and rescoring output, or why it is absent.

  ``<groups>`` (``outputs/evaluate/figure3.csv``): columns system, beam, axis (length|rarity),
  label, lo, hi, sentences, mean, bleu (tokenized), one row per group for every translation
  (system, beam) and every rescoring output (system ``rescore/<name>``, beam empty).
  ``length_drop.csv`` beside it: for every translation, tokenised BLEU of the shortest and of the
  longest length group and the drop between them, with 95% intervals from a paired bootstrap over
  sentences, and the drop minus that of params ``report.figure3_system`` at ``figure3_beam`` (does
  the fixed-vector model lose more on long sentences than the ones that look back at the source?).

A missing output is reported as absent (the report shows it as "not run"); an output whose line
count differs from the references is an error, never a score. A system's folder without its
``timing.json`` (which translate writes last, after removing an earlier run's files first) is
one whose translate run did not finish, or was not written by translate: one warning line names
it, and its beam files are scored as they are (a killed run's are complete and its own; the
beams it did not reach are absent).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from s2s.config import Params
from s2s.dag import Arg, Out, Stage, command
from s2s.layout import LENGTH_DROP_FILE, EvaluatePaths

log = logging.getLogger("s2s.evaluate.stage")

HELP = "BLEU (tokenised and sacreBLEU) and Figure 3 groups"
ARGS = (Arg("--translate", "outputs/translate"),
        Arg("--rescore", "outputs/rescore", optional=True,
            help="the rescore stages' folder, where the profile rescores (rescore.baseline)"),
        Arg("--prepared", "data/prepared"), Arg("--vocab", "data/vocab"),
        Arg("--metrics", "metrics/bleu.json", writes=True, help="bleu.json to write"),
        Arg("--groups", "outputs/evaluate/figure3.csv", writes=True,
            help="Figure 3's groups CSV to write (length_drop.csv beside it)"))
PATHS = EvaluatePaths  # ARGS as one value, which cli builds and main takes


def stages(params: Params) -> list[Stage]:
    rescores = params.rescore.baseline is not None
    return [command(
        "evaluate", "evaluate", ARGS, include=("--rescore",) if rescores else (),
        outs=(Out(f"outputs/evaluate/{LENGTH_DROP_FILE}"),),
        params=("systems", "evaluate", "rescore.rescorers", "report.figure3_system",
                "report.figure3_beam"))]


def cli(args, params) -> None:
    main(params, EvaluatePaths.from_args(args))


def main(params: Params, paths: EvaluatePaths) -> dict:
    """Score every output; write ``paths.metrics`` and ``paths.groups``; return the metrics as
    written (the JSON object of :class:`s2s.artifacts.Bleu`). ``paths.rescore`` None: the profile
    rescores nothing (``rescore.baseline`` null), and bleu.json has no rescoring entries."""
    import pandas as pd

    from s2s.artifacts import Absent, Bleu, BleuEntry, Scored
    from s2s.evaluate import buckets
    from s2s.evaluate.bleu import (TOK_METHOD, corpus_bleu_sacre, corpus_bleu_tok,
                                   sentence_stats_tok, tok_signature)
    from s2s.layout import (GROUP_COLUMNS, RESCORE_FIXED, hypothesis_files, rescore_system,
                            timing_file)
    from s2s.io import atomic_write_text, read_lines

    t0 = time.perf_counter()
    cfg = params.evaluate
    ref_tok_path, ref_raw_path, src_path = paths.references, paths.references_raw, paths.source
    refs_tok, refs_raw, src = (read_lines(p) for p in (ref_tok_path, ref_raw_path, src_path))
    n = len(refs_tok)
    for path, lines in ((ref_raw_path, refs_raw), (src_path, src)):
        if len(lines) != n:
            raise ValueError(f"test set is not parallel: {ref_tok_path} has {n} lines, "
                             f"{path} has {len(lines)}")
    ranks = buckets.load_ranks(paths.source_vocab)
    log.info("read %d test sentences (%s, %s, %s) and %d source words ranked (%s)",
             n, ref_tok_path, ref_raw_path, src_path, len(ranks), paths.source_vocab)
    groupings = buckets.figure3_groupings(src, ranks, edges=cfg.length_edges,
                                          rarity=cfg.rarity_groups, min_group=cfg.min_group)

    def score(stem: Path) -> tuple[BleuEntry, pd.DataFrame | None, pd.DataFrame | None]:
        tok, detok = hypothesis_files(stem)
        missing = [str(p) for p in (tok, detok) if not p.is_file()]
        if missing:
            log.warning("absent: %s", ", ".join(missing))
            return Absent.because("missing " + ", ".join(missing)), None, None
        hyps_tok, hyps_detok = read_lines(tok), read_lines(detok)
        bt = corpus_bleu_tok(hyps_tok, refs_tok, hyp_name=str(tok), ref_name=str(ref_tok_path))
        bs = corpus_bleu_sacre(hyps_detok, refs_raw, hyp_name=str(detok),
                               ref_name=str(ref_raw_path))
        stats = sentence_stats_tok(hyps_tok, refs_tok, hyp_name=str(tok),
                                   ref_name=str(ref_tok_path))
        groups = pd.concat([buckets.group_bleu_from_stats(g, stats) for g in groupings],
                           ignore_index=True)
        log.info("%s: BLEU tok %.2f, sacreBLEU %.2f", stem, bt.score, bs.score.score)
        return Scored(bleu_tok=round(bt.score, 4), bleu_sacre=round(bs.score.score, 4),
                      sacre_signature=bs.signature, sentences=len(hyps_tok)), groups, stats

    system_stats = {}  # (system, beam) -> per-sentence statistics, for the length drop

    frames = []
    translate: dict[str, dict[int, BleuEntry]] = {}
    for system, scfg in params.systems.items():
        translate[system] = {}
        folder, timing = paths.translation(system, 1).parent, timing_file(paths.translate, system)
        if folder.is_dir() and not timing.is_file():
            log.warning("%s: no %s: its translate run did not finish (a killed run leaves its "
                        "complete beam files only) or did not write this folder; scoring the "
                        "beam files it holds, rerun `s2s translate %s` for all of them", folder,
                        timing.name, system)
        for beam in scfg.beams:
            entry, groups, stats = score(paths.translation(system, beam))
            translate[system][beam] = entry
            if groups is not None:
                frames.append(groups.assign(system=system, beam=str(beam)))
                system_stats[(system, str(beam))] = stats

    rescore: dict[str, BleuEntry] = {}
    # the command passes --rescore where the profile rescores (rescore.baseline: its stages)
    rescored = [] if paths.rescore is None else [*params.rescore.rescorers, *RESCORE_FIXED]
    if rescored and not paths.rescore.is_dir():
        log.warning("absent: rescore directory %s", paths.rescore)
    for name in rescored:
        if not paths.rescore.is_dir():
            rescore[name] = Absent.because(f"no rescore directory {paths.rescore}")
            continue
        entry, groups, _ = score(paths.rescoring(name))
        rescore[name] = entry
        if groups is not None:
            frames.append(groups.assign(system=rescore_system(name), beam=""))

    group_columns = list(GROUP_COLUMNS)
    metrics = Bleu(test_sentences=n, bleu_tok_method=TOK_METHOD,
                   bleu_tok_signature=tok_signature(), translate=translate, rescore=rescore)
    table = (pd.concat(frames, ignore_index=True) if frames
             else pd.DataFrame(columns=group_columns))[group_columns]
    reference = (params.report.figure3_system, str(params.report.figure3_beam))
    drop = buckets.length_drop(groupings[0], system_stats, reference)
    metrics.write(paths.metrics)
    atomic_write_text(paths.groups, table.to_csv(index=False))
    atomic_write_text(paths.length_drop, drop.to_csv(index=False))
    log.info("wrote %s, %s (%d group rows) and %s in %.1f s", paths.metrics, paths.groups,
             len(table), paths.length_drop, time.perf_counter() - t0)
    return metrics.to_json()

