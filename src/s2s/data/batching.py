"""Parallel data as id tensors, and minibatches of sentences of about the same length (§3.4).

A batch order is a pure function of (order_seed, epoch): the training set is shuffled, cut into
chunks of `bucket_batches` batches, each chunk sorted by length and cut into batches, and the
batches shuffled again. So ensemble members with different order seeds see different minibatch
orders, and a resumed run regenerates exactly the batches an uninterrupted run would have seen.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from s2s.data.vocab import Vocab
from s2s.io import read_lines


@dataclass(frozen=True)
class Batch:
    """src: (N, S) right-padded; src_lengths: (N,); tgt_in: (N, T) = <bos> y; tgt_out: (N, T) = y
    <eos>; both padded with <pad>. `ntokens` counts target tokens (eos included), padding not."""

    src: Tensor
    src_lengths: Tensor
    tgt_in: Tensor
    tgt_out: Tensor
    ntokens: int

    def to(self, device: torch.device) -> "Batch":
        return Batch(self.src.to(device), self.src_lengths.to(device), self.tgt_in.to(device),
                     self.tgt_out.to(device), self.ntokens)


def load_parallel(prefix: Path, src_vocab: Vocab, tgt_vocab: Vocab) -> list[tuple[list[int], list[int]]]:
    """Pairs of id lists from `<prefix>.en` / `<prefix>.fr` (tokenised)."""
    src = read_lines(prefix.with_name(prefix.name + ".en"))
    tgt = read_lines(prefix.with_name(prefix.name + ".fr"))
    if len(src) != len(tgt):
        raise ValueError(f"{prefix}.en has {len(src)} lines but {prefix}.fr has {len(tgt)}")
    return [(src_vocab.encode(s), tgt_vocab.encode(t)) for s, t in zip(src, tgt)]


def collate(pairs: list[tuple[list[int], list[int]]], *, pad: int, bos: int, eos: int) -> Batch:
    N = len(pairs)
    # An empty source (possible in dev/test) still gets one step: the encoder reads a <pad>.
    src_lengths = torch.tensor([max(len(s), 1) for s, _ in pairs])
    S = int(src_lengths.max())
    T = max(len(t) for _, t in pairs) + 1
    src = torch.full((N, S), pad, dtype=torch.long)
    tgt_in = torch.full((N, T), pad, dtype=torch.long)
    tgt_out = torch.full((N, T), pad, dtype=torch.long)
    for n, (s, t) in enumerate(pairs):
        src[n, : len(s)] = torch.tensor(s, dtype=torch.long)
        tgt_in[n, : len(t) + 1] = torch.tensor([bos] + t, dtype=torch.long)
        tgt_out[n, : len(t) + 1] = torch.tensor(t + [eos], dtype=torch.long)
    ntokens = sum(len(t) + 1 for _, t in pairs)
    return Batch(src, src_lengths, tgt_in, tgt_out, ntokens)


def epoch_batches(n_pairs: int, lengths: list[tuple[int, int]], *, batch_size: int,
                  bucket_batches: int, seed: int, epoch: int) -> list[list[int]]:
    """Index lists of the minibatches of one epoch, in training order."""
    rng = random.Random(seed * 1_000_003 + epoch)
    order = list(range(n_pairs))
    rng.shuffle(order)
    chunk = batch_size * bucket_batches
    batches: list[list[int]] = []
    for start in range(0, n_pairs, chunk):
        part = sorted(order[start: start + chunk], key=lambda i: (lengths[i][0], lengths[i][1], i))
        batches += [part[k: k + batch_size] for k in range(0, len(part), batch_size)]
    rng.shuffle(batches)
    return batches


def eval_batches(pairs: list[tuple[list[int], list[int]]], batch_size: int) -> list[list[int]]:
    """Deterministic batches for perplexity: sorted by length, so padding is small."""
    order = sorted(range(len(pairs)), key=lambda i: (len(pairs[i][0]), len(pairs[i][1]), i))
    return [order[k: k + batch_size] for k in range(0, len(order), batch_size)]
