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

from s2s import arch
from s2s.config import ConfigError, Params
from s2s.dag import Arg, Stage, command
from s2s.layout import AttentionPaths, prepared_name

log = logging.getLogger("s2s.attention")

HELP = "attention weights of an attention system's output"
ARGS = (Arg("--prepared", "data/prepared"), Arg("--vocab", "data/vocab"), Arg("--models", "models"),
        Arg("--translate", "outputs/translate"),
        Arg("--out", "outputs/attention/weights.json", writes=True, help="weights.json to write"))
PATHS = AttentionPaths  # ARGS as one value, which cli builds and main takes


def stages(params: Params) -> list[Stage]:
    system = params.analysis.attention_system
    if system is None:
        return []
    drawn = [system] + ([cross] if (cross := params.analysis.cross_attention_system) else [])
    members = [m for s in drawn for m in params.systems[s].members]
    return [command(
        "attention", "attention", ARGS,
        parts={"--prepared": (prepared_name("test", "en"),), "--models": tuple(members),
               "--translate": tuple(drawn)},
        params=("analysis.attention_system", "analysis.cross_attention_system",
                "analysis.attention_examples", *(f"systems.{s}" for s in drawn), "model",
                *(f"models.{m}" for m in members)),
        code=arch.modules(params, members),
        doc="The alignment figure: the weights of analysis.attention_system on its own "
            "translations (and a Transformer's cross-attention on the same sentences).")]


def cli(args, params) -> None:
    if params.analysis.attention_system is None:
        raise ConfigError(f"{params.source}: 'analysis.attention_system' is null: no attention "
                          f"system to draw")
    main(params, AttentionPaths.from_args(args))


def main(params: Params, paths: AttentionPaths) -> list[dict]:
    from s2s import checkpoint
    from s2s.analysis.alignments import MAX_WORDS, MIN_WORDS, pick_examples, weights_for
    from s2s.data.vocab import Vocab
    from s2s.layout import hypothesis_files, model_file
    from s2s.io import atomic_write_json, read_lines

    t0 = time.perf_counter()
    cfg = params.analysis
    src_vocab, tgt_vocab = Vocab.load_pair(paths.vocab)
    sources = [s.split() for s in read_lines(paths.source)]
    read = [str(paths.source)]

    def system_of(name: str):
        """Its (one) model and its widest beam's tokenised translations."""
        system = params.systems[name]
        (member,) = system.members  # the config allows one model here
        beam = system.widest_beam
        model = checkpoint.load_model(model_file(paths.models, member), src_vocab=src_vocab,
                                      tgt_vocab=tgt_vocab, expect=params.model_config(member),
                                      name=member)
        hyp_path, _ = hypothesis_files(paths.translation(name, beam))
        hypotheses = [h.split() for h in read_lines(hyp_path)]
        if len(hypotheses) != len(sources):
            raise ValueError(f"{hyp_path}: {len(hypotheses)} lines for {len(sources)} test "
                             f"sources")
        read.extend([str(model_file(paths.models, member)), str(hyp_path)])
        return member, beam, model, hypotheses

    def record(i: int, model, hypotheses) -> dict:
        return {"index": i, "source": sources[i], "target": hypotheses[i] + ["<eos>"],
                "weights": weights_for(model, src_vocab, tgt_vocab, sources[i], hypotheses[i])}

    member, beam, model, hypotheses = system_of(cfg.attention_system)
    picked = pick_examples(sources, hypotheses, cfg.attention_examples)
    result = {"system": cfg.attention_system, "model": member, "beam": beam,
              "source_words": [MIN_WORDS, MAX_WORDS],
              "examples": [record(i, model, hypotheses) for i in picked]}
    if cfg.cross_attention_system is not None:
        # the same test sentences, each with the Transformer's own translation
        member, beam, model, hypotheses = system_of(cfg.cross_attention_system)
        result["cross_attention"] = {
            "system": cfg.cross_attention_system, "model": member, "beam": beam,
            "layer": "last decoder layer, mean over heads",
            "examples": [record(i, model, hypotheses) for i in picked if hypotheses[i]]}
    atomic_write_json(paths.out, result)
    log.info("read %s; wrote %s (%d examples) in %.1fs", ", ".join(read), paths.out,
             len(result["examples"]), time.perf_counter() - t0)
    return result["examples"]
