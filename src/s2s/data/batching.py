"""Parallel data as id tensors, and minibatches of sentences of about the same length (§3.4).

A batch order is a pure function of (order_seed, epoch): the training set is shuffled, cut into
chunks of `bucket_batches` batches, each chunk sorted by length and cut into batches, and the
batches shuffled again. So ensemble members with different order seeds see different minibatch
orders, and a resumed run regenerates exactly the batches an uninterrupted run would have seen.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import torch
from torch import Tensor

from s2s.data.vocab import Vocab
from s2s.io import read_lines

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class Batch:
    """One minibatch as tensors. src: (N, S) right-padded; src_lengths: (N,); tgt_in: (N, T) =
    <bos> y; tgt_out: (N, T) = y <eos>; both padded with <pad>. `ntokens` counts target tokens
    (eos included), padding not. target_rows: (M,) with M = ntokens, the indices into
    ``tgt_out.flatten()`` of the real targets, ascending (the loss's rows: s2s.losses).
    src_lengths_cpu: src_lengths, always on the CPU (``pack_padded_sequence`` reads them there),
    the same tensor as src_lengths on a CPU batch. ``to`` moves every tensor but
    src_lengths_cpu."""

    src: Tensor
    src_lengths: Tensor
    tgt_in: Tensor
    tgt_out: Tensor
    ntokens: int
    target_rows: Tensor
    src_lengths_cpu: Tensor

    def to(self, device: torch.device) -> "Batch":
        """This batch on `device`. To a CUDA device the copies are asynchronous: from pinned
        memory (``pin_memory``, done here if it was not), so the host does not wait for them."""
        if device.type == "cuda" and self.src.device.type == "cpu" and not self.src.is_pinned():
            return self.pin_memory().to(device)
        non_blocking = device.type == "cuda"
        return Batch(*(t.to(device, non_blocking=non_blocking) for t in (
            self.src, self.src_lengths, self.tgt_in, self.tgt_out)), self.ntokens,
            self.target_rows.to(device, non_blocking=non_blocking), self.src_lengths_cpu)

    def pin_memory(self) -> "Batch":
        """A copy of this CPU batch in page-locked memory (needs CUDA): what an asynchronous
        host-to-device copy reads."""
        src_lengths = self.src_lengths.pin_memory()
        return Batch(self.src.pin_memory(), src_lengths, self.tgt_in.pin_memory(),
                     self.tgt_out.pin_memory(), self.ntokens, self.target_rows.pin_memory(),
                     src_lengths)


def load_parallel(prefix: Path, src_vocab: Vocab, tgt_vocab: Vocab) -> list[tuple[list[int], list[int]]]:
    """Pairs of id lists from `<prefix>.en` / `<prefix>.fr` (tokenised)."""
    src = read_lines(prefix.with_name(prefix.name + ".en"))
    tgt = read_lines(prefix.with_name(prefix.name + ".fr"))
    if len(src) != len(tgt):
        raise ValueError(f"{prefix}.en has {len(src)} lines but {prefix}.fr has {len(tgt)}")
    return [(src_vocab.encode(s), tgt_vocab.encode(t)) for s, t in zip(src, tgt)]


def collate(pairs: list[tuple[list[int], list[int]]], *, pad: int, bos: int, eos: int) -> Batch:
    """The Batch of `pairs` (at least one), on the CPU."""
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
    # Found here, on the CPU, where it costs no device-to-host sync as a mask on the device does
    target_rows = (tgt_out.flatten() != pad).nonzero().squeeze(1)  # (M,)
    return Batch(src, src_lengths, tgt_in, tgt_out, ntokens, target_rows, src_lengths)


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


def prefetch(items: Iterable[T], make: Callable[[T], R], *, ahead: int = 1) -> Iterator[R]:
    """``make(item)`` for each item, in order. With ``ahead`` >= 1 the next ``ahead`` items are
    made on one side thread while the caller works on the current one; 0: each is made when it
    is asked for. An exception of ``make`` is raised where its item would have been returned.
    Closing the iterator (or dropping it) cancels the items not started and waits for the one
    being made."""
    if ahead < 0:
        raise ValueError(f"ahead must be >= 0, got {ahead}")
    if ahead == 0:
        yield from map(make, items)
        return
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="s2s-prefetch")
    pending: deque[Future[R]] = deque()
    try:
        for item in items:
            pending.append(pool.submit(make, item))
            if len(pending) > ahead:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def prefetch_batches(shares: Iterable[Sequence[tuple[list[int], list[int]]]], *, pad: int,
                     bos: int, eos: int, pin: bool, ahead: int = 1) -> Iterator[Batch | None]:
    """The Batch of each share (None for an empty one), collated ``ahead`` shares in advance on
    a side thread (``prefetch``), in pinned memory if ``pin`` (for an asynchronous copy to a
    CUDA device). The batches are the ones ``collate`` makes: no number changes."""
    def make(pairs: Sequence[tuple[list[int], list[int]]]) -> Batch | None:
        if not pairs:
            return None
        b = collate(list(pairs), pad=pad, bos=bos, eos=eos)
        return b.pin_memory() if pin else b

    return prefetch(shares, make, ahead=ahead)
