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

import torch

from s2s import checkpoint
from s2s.config import Params
from s2s.data.batching import collate
from s2s.data.vocab import Vocab
from s2s.io import atomic_write_json, read_lines

log = logging.getLogger("s2s.attention")

# Examples are test sentences of this many source words: long enough for a reordering to show,
# short enough to read in a figure.
MIN_WORDS, MAX_WORDS = 8, 14


def pick_examples(sources: list[list[str]], hypotheses: list[list[str]], count: int) -> list[int]:
    """`count` test indices spread evenly over the sentences of MIN_WORDS..MAX_WORDS source words
    whose hypothesis is not empty."""
    fit = [i for i, (s, h) in enumerate(zip(sources, hypotheses))
           if MIN_WORDS <= len(s) <= MAX_WORDS and h]
    if len(fit) <= count:
        return fit
    step = len(fit) / count
    return [fit[int(k * step)] for k in range(count)]


@torch.no_grad()
def weights_for(model, src_vocab: Vocab, tgt_vocab: Vocab, source: list[str],
                target: list[str]) -> list[list[float]]:
    """(T + 1) x S attention weights of `model` fed `target` (then <eos> is predicted)."""
    b = collate([(src_vocab.encode(" ".join(source)), tgt_vocab.encode(" ".join(target)))],
                pad=src_vocab.pad, bos=tgt_vocab.bos, eos=tgt_vocab.eos)
    _, weights = model.teacher_forced(b.src, b.src_lengths, b.tgt_in)  # (1, T + 1, S)
    return [[round(w, 5) for w in row] for row in weights[0].tolist()]


def main(params: Params, *, prepared_dir: Path, vocab_dir: Path, models_dir: Path,
         translate_dir: Path, out: Path) -> list[dict]:
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
