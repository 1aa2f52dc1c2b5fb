"""Stage `rescore-<rescorer>`: rescoring a baseline's n-best lists with LSTMs (Table 2).

Reads:  the baseline's n-best list in Moses format (``id ||| hypothesis ||| features ||| score``,
        optionally ``||| alignment`` after the score, as Moses writes word alignments;
        in the paper profile the LIUM baseline's 1000-best lists, elsewhere the n-best output of the
        system named by `rescore.baseline`), ``<prepared>/test.tok.{en,fr}``, the rescorer's
        checkpoints, params `rescore`.
Writes: ``<out>/<rescorer>.{tok,detok}.fr``: per sentence the hypothesis with the best
        ``(1 - weight) * baseline score + weight * LSTM log-probability`` (weight 0.5: the paper's
        even average). The LSTM scores each hypothesis as a finished sentence, <eos>
        included; the baseline's score of a hypothesis its search cut at the length limit has no
        <eos> (s2s.decode.beam), so rescoring counts against such a hypothesis what the
        baseline did not: unfinished output is penalised. The rescorer ``oracle`` instead
        writes ``<out>/baseline.*`` (the baseline's own 1-best) and ``<out>/oracle.*`` (per
        sentence, the hypothesis with the best sentence-level BLEU against the reference: an
        upper bound of any rescoring).
"""

from __future__ import annotations

import logging
import time

from s2s import arch
from s2s.config import Params
from s2s.dag import Arg, Item, Stage, command
from s2s.layout import RescorePaths, prepared_name, prepared_names

log = logging.getLogger("s2s.rescore")

HELP = "rescore the baseline's n-best lists"
ITEM = Item("rescorer", "rescorer", "rescore.rescorers",
            "a rescorer of params `rescore.rescorers`, or oracle")
ARGS = (Arg("--translate", "outputs/translate"), Arg("--raw", "data/raw"),
        Arg("--prepared", "data/prepared"), Arg("--vocab", "data/vocab"), Arg("--models", "models"),
        Arg("--out", "outputs/rescore/{item}", writes=True, help="the rescorer's output folder"))
PATHS = RescorePaths  # ARGS as one value, which cli builds and main takes


def stages(params: Params) -> list[Stage]:
    baseline = params.rescore.baseline
    if baseline is None:  # a profile without Table 2
        return []
    # the baseline's n-best lists (under --translate), or those of data.nbest (under --raw)
    nbest = {"--translate": (baseline,)}
    out = [command(
        "rescore-oracle", "rescore", ARGS, item="oracle",
        parts={**nbest, "--prepared": prepared_names("test"), "--vocab": (),
               "--models": ()},
        deps=("metrics/params.json",), params=("data.nbest", "rescore.baseline",
                                                        f"systems.{baseline}"),
        doc="Table 2: the baseline's n-best lists (those of data.nbest, when a profile names "
            "them, else\nthe rescore.baseline system's), rescored by each rescorer; `oracle` "
            "also writes the baseline's\nown 1-best.")]
    for name, members in params.rescore.rescorers.items():
        out.append(command(
            f"rescore-{name}", "rescore", ARGS, item=name,
            parts={**nbest, "--prepared": (prepared_name("test", "en"),),
                   "--models": tuple(members)},
            deps=("metrics/params.json",),
            params=("data.nbest", "rescore.baseline", f"systems.{baseline}", "rescore.weight",
                    "rescore.batch_size", f"rescore.rescorers.{name}", "translate.combine",
                    "translate.device", "model", *(f"models.{m}" for m in members)),
            code=arch.modules(params, members)))
    return out


def cli(args, params) -> None:
    main(params, args.rescorer, RescorePaths.from_args(args))


def main(params: Params, rescorer: str, paths: RescorePaths) -> dict:
    from s2s.data.text import CorpusError, detokenize
    from s2s.data.vocab import Vocab
    from s2s.decode.rescore import check_lengths, lstm_scores, nbest_path, pick, read_nbest
    from s2s.decode.translate import load_members
    from s2s import precision
    from s2s.device import for_stage
    from s2s.layout import BASELINE, ORACLE, ORACLE_STAGE, hypothesis_files
    from s2s.io import atomic_write_lines, read_lines

    t_start = time.perf_counter()
    nbest = nbest_path(params, translate_dir=paths.translate, raw_dir=paths.raw)
    sources_tok = read_lines(paths.source)
    lists = read_nbest(nbest, sentences=len(sources_tok))
    n_cands = sum(len(c) for c in lists)

    if rescorer == ORACLE_STAGE:
        from s2s.evaluate.bleu import sentence_bleu_tok

        refs = read_lines(paths.references)
        if len(refs) != len(sources_tok):  # one reference per source line, in order
            raise CorpusError(f"{paths.references} has {len(refs)} lines but {paths.source} has "
                              f"{len(sources_tok)}: the oracle needs one reference per sentence")
        picks = {BASELINE: [c[0].text for c in lists],
                 ORACLE: [max(c, key=lambda x: sentence_bleu_tok(x.text, refs[i])).text
                          for i, c in enumerate(lists)]}
    else:
        cfg = params.rescore
        if rescorer not in cfg.rescorers:
            raise KeyError(f"{params.source}: no rescorer '{rescorer}' under 'rescore.rescorers' "
                           f"(known: {', '.join(cfg.rescorers)}, or 'oracle')")
        src_vocab, tgt_vocab = Vocab.load_pair(paths.vocab)
        sources = [src_vocab.encode(s) for s in sources_tok]
        configs = params.model_configs(cfg.rescorers[rescorer])
        check_lengths(lists, sources, configs=configs.values(), nbest=nbest,
                      source=paths.source)
        device = for_stage(params, "rescore", name=params.translate.device,
                           key="translate.device")
        model = load_members(configs, models_dir=paths.models, src_vocab=src_vocab,
                             tgt_vocab=tgt_vocab, device=device, combine=params.translate.combine)
        flat = [c for cands in lists for c in cands]
        with precision.strict_fp32(device):  # the models' own fp32 scores, TF32 off on a GPU
            lstm = lstm_scores(model, flat, sources, vocab=tgt_vocab, src_pad=src_vocab.pad,
                               batch_size=cfg.batch_size, device=device,
                               desc=f"rescore {rescorer}")
        picks = {rescorer: pick(lists, lstm, weight=cfg.weight)}

    outputs = {name: hypothesis_files(paths.output(name)) for name in picks}
    for path in (p for files in outputs.values() for p in files):  # an earlier run's (by hand):
        path.unlink(missing_ok=True)  # killed between two writes, none stays beside a new one
    for name, lines in picks.items():
        tok, detok = outputs[name]
        atomic_write_lines(tok, lines)
        atomic_write_lines(detok, [detokenize(s, "fr") for s in lines])
    log.info("%s: %d sentences, %d candidates from %s; wrote %s in %.1fs", rescorer, len(lists),
             n_cands, nbest, ", ".join(f"{paths.output(n)}.*" for n in picks),
             time.perf_counter() - t_start)
    return {"sentences": len(lists), "candidates": n_cands}
