"""Stage `attention`: the attention weights of an attention system's own translations, for the
report's alignment figure.

Reads:  ``<models>/<member>/model.pt`` of the system's (single, attention) model,
        ``<prepared>/test.tok.en``, ``<translate>/<system>/beam<K>.tok.fr`` (its widest beam),
        ``<vocab>/{en,fr}.tsv``; params `analysis.attention_system`, `analysis.attention_examples`.
Writes: ``<out>``: JSON, one record per example: test index, source and target tokens (the
        target ends in <eos>) and the weights, one row per target token over the source words.

The weights are those the model gives when it is fed its own 1-best translation (teacher forcing
on the hypothesis), which are the weights beam search used on that path.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from s2s.config import ConfigError, Params
from s2s.dag import Out, Stage

log = logging.getLogger("s2s.attention")

HELP = "attention weights of an attention system's output"
PATHS = ("--prepared", "--vocab", "--models", "--translate", "--out")


def stages(params: Params) -> list[Stage]:
    system = params.analysis.attention_system
    if system is None:
        return []
    members = params.systems[system].members
    return [Stage(
        name="attention",
        cmd="s2s attention --prepared data/prepared --vocab data/vocab --models models "
            "--translate outputs/translate --out outputs/attention/weights.json",
        deps=("data/prepared/test.tok.en", "data/vocab", *(f"models/{m}" for m in members),
              f"outputs/translate/{system}"),
        outs=(Out("outputs/attention/weights.json"),),
        params=("analysis.attention_system", "analysis.attention_examples",
                f"systems.{system}", "model", *(f"models.{m}" for m in members)),
        doc="The alignment figure: the weights of analysis.attention_system on its own "
            "translations.")]


def cli(args, params) -> None:
    if params.analysis.attention_system is None:
        raise ConfigError(f"{params.source}: 'analysis.attention_system' is null: no attention "
                          f"system to draw")
    main(params, prepared_dir=args.prepared, vocab_dir=args.vocab, models_dir=args.models,
         translate_dir=args.translate, out=args.out)


def main(params: Params, *, prepared_dir: Path, vocab_dir: Path, models_dir: Path,
         translate_dir: Path, out: Path) -> list[dict]:
    from s2s import checkpoint
    from s2s.analysis.alignments import MAX_WORDS, MIN_WORDS, pick_examples, weights_for
    from s2s.data.vocab import Vocab
    from s2s.io import atomic_write_json, read_lines

    t0 = time.perf_counter()
    cfg = params.analysis
    system = params.systems[cfg.attention_system]
    (member,) = system.members  # the config allows one attention model here
    beam = max(system.beams)
    src_vocab = Vocab.load(vocab_dir / "en.tsv")
    tgt_vocab = Vocab.load(vocab_dir / "fr.tsv")
    model = checkpoint.load_model(models_dir / member / "model.pt", src_vocab=src_vocab,
                                  tgt_vocab=tgt_vocab, expect=params.model_config(member),
                                  name=member)
    sources = [s.split() for s in read_lines(prepared_dir / "test.tok.en")]
    hyp_path = translate_dir / cfg.attention_system / f"beam{beam}.tok.fr"
    hypotheses = [h.split() for h in read_lines(hyp_path)]
    if len(hypotheses) != len(sources):
        raise ValueError(f"{hyp_path}: {len(hypotheses)} lines for {len(sources)} test sources")
    records = []
    for i in pick_examples(sources, hypotheses, cfg.attention_examples):
        records.append({"index": i, "source": sources[i], "target": hypotheses[i] + ["<eos>"],
                        "weights": weights_for(model, src_vocab, tgt_vocab, sources[i],
                                               hypotheses[i])})
    atomic_write_json(out, {"system": cfg.attention_system, "model": member, "beam": beam,
                            "source_words": [MIN_WORDS, MAX_WORDS], "examples": records})
    log.info("read %s, %s, %s; wrote %s (%d examples) in %.1fs", models_dir / member, hyp_path,
             prepared_dir / "test.tok.en", out, len(records), time.perf_counter() - t0)
    return records
