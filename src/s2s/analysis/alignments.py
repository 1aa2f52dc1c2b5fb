"""Attention weights of an attention model on its own translations: choosing examples and
reading the weights (the library of :mod:`s2s.stages.attention`).
"""

from __future__ import annotations

import logging

import torch

from s2s import arch
from s2s.data.batching import collate
from s2s.data.vocab import Vocab

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
    """(T + 1) x S attention weights of `model` fed `target` (then <eos> is predicted): an
    attention model's, or a Transformer's cross-attention in its last decoder layer, averaged
    over the heads (each head's row is a distribution over the source, so is their mean)."""
    b = collate([(src_vocab.encode(" ".join(source)), tgt_vocab.encode(" ".join(target)))],
                pad=src_vocab.pad, bos=tgt_vocab.bos, eos=tgt_vocab.eos)
    if arch.capable(model.cfg, "cross_attention_map"):  # declared by its architecture
        weights = model.cross_attention(b.src, b.src_lengths, b.tgt_in)[:, -1].mean(1)
    else:
        _, weights = model.teacher_forced(b.src, b.src_lengths, b.tgt_in)  # (1, T + 1, S)
    return [[round(w, 5) for w in row] for row in weights[0].tolist()]
