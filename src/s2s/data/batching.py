"""Parallel data as id tensors, and minibatches of sentences of about the same length (§3.4).

A batch order is a pure function of (order_seed, epoch): the training set is shuffled, cut into
chunks of `bucket_batches` batches, each chunk sorted by length and cut into batches, and the
batches shuffled again. So ensemble members with different order seeds see different minibatch
orders, and a resumed run regenerates exactly the batches an uninterrupted run would have seen.
"""

from __future__ import annotations

import array
import random
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import torch
from torch import Tensor

from s2s.data.vocab import Vocab

if TYPE_CHECKING:  # the arrays collate_ids reads: only the trainer's stages run it
    from s2s.data.ids import IdCorpus
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


def load_parallel(prefix: Path, src_vocab: Vocab,
                  tgt_vocab: Vocab) -> list[tuple[list[int], list[int]]]:
    """Pairs of id lists from `<prefix>.en` / `<prefix>.fr` (tokenised), read whole: for a few
    thousand sentences (the analyses' test set); a training corpus's ids are made once, by the
    ids stage (s2s.data.ids)."""
    src = read_lines(prefix.with_name(prefix.name + ".en"))
    tgt = read_lines(prefix.with_name(prefix.name + ".fr"))
    if len(src) != len(tgt):
        raise ValueError(f"{prefix}.en has {len(src)} lines but {prefix}.fr has {len(tgt)}")
    return [(src_vocab.encode(s), tgt_vocab.encode(t)) for s, t in zip(src, tgt)]


def pair_lengths(pairs: Sequence[tuple[Sequence[int], Sequence[int]]]
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(n,) source and (n,) target lengths of id pairs held in lists."""
    return (np.array([len(s) for s, _ in pairs], dtype=np.int64),
            np.array([len(t) for _, t in pairs], dtype=np.int64))


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


def collate_ids(corpus: IdCorpus, idx: Sequence[int], *, pad: int, bos: int, eos: int) -> Batch:
    """The Batch of the pairs `idx` (at least one) of an ids corpus, made from its arrays: the
    tensors :func:`collate` makes of the same pairs."""
    idx = np.asarray(idx, dtype=np.int64)
    src, _ = _padded(corpus.src, idx, pad, width=1)  # (N, S): an empty source reads one <pad>
    words, lengths = _padded(corpus.tgt, idx, pad, width=0)  # (N, T - 1): y
    rows = np.arange(len(idx))
    tgt_out = np.full((len(idx), words.shape[1] + 1), pad, dtype=np.int64)  # (N, T): y <eos>
    tgt_out[:, :-1] = words
    tgt_out[rows, lengths] = eos
    tgt_in = np.empty_like(tgt_out)  # (N, T): <bos> y
    tgt_in[:, 0] = bos
    tgt_in[:, 1:] = words
    src_lengths = torch.from_numpy(np.maximum(corpus.src_lengths[idx], 1))  # (N,)
    tgt_out_t = torch.from_numpy(tgt_out)
    target_rows = (tgt_out_t.flatten() != pad).nonzero().squeeze(1)  # (M,)
    ntokens = int(lengths.sum()) + len(idx)
    return Batch(torch.from_numpy(src), src_lengths, torch.from_numpy(tgt_in), tgt_out_t, ntokens,
                 target_rows, src_lengths)


def _padded(side, idx: np.ndarray, pad: int, *, width: int) -> tuple[np.ndarray, np.ndarray]:
    """(N, W) int64: each sentence of `idx` of `side` (an s2s.data.ids.Side), right-padded with
    `pad` to the longest (at least `width`), and the sentences' lengths (N,)."""
    starts, lengths = side.offsets[idx], side.offsets[idx + 1] - side.offsets[idx]
    width = max(int(lengths.max()), width)
    cols = np.arange(width)  # (W,)
    mask = cols[None, :] < lengths[:, None]  # (N, W)
    out = np.full((len(idx), width), pad, dtype=np.int64)
    out[mask] = side.ids[(starts[:, None] + cols[None, :])[mask]]  # row by row, as they lie
    return out, lengths


def steps_per_epoch(n_pairs: int, batch_size: int) -> int:
    """The minibatches of an epoch of :func:`epoch_batches`: every chunk but the last is a whole
    number of batches, so all are full but the last one."""
    return -(-n_pairs // batch_size)


def epoch_batches(src_lengths: np.ndarray, tgt_lengths: np.ndarray, *, batch_size: int,
                  bucket_batches: int, seed: int, epoch: int) -> list[np.ndarray]:
    """Index arrays of the minibatches of one epoch, in training order. The training set is
    shuffled (Python's ``random.Random(seed * 1_000_003 + epoch)``), cut into chunks of
    `bucket_batches` batches, each chunk sorted by (source length, target length, index) and cut
    into batches, and the batches shuffled by the same generator: the order the published runs
    trained in, computed on arrays (one sort of all chunks as one integer key) instead of lists,
    so that millions of pairs take seconds. `src_lengths`, `tgt_lengths`: (n,) each pair's."""
    n = len(src_lengths)
    rng = random.Random(seed * 1_000_003 + epoch)
    shuffled = array.array("q", range(n))  # 8 bytes a pair, shuffled in place as a list would be
    rng.shuffle(shuffled)
    order = np.frombuffer(shuffled, dtype=np.int64) if n else np.zeros(0, np.int64)
    chunk = batch_size * bucket_batches
    # (chunk, source length, target length, index) packed into one int64 in that order of bits:
    # sorting the keys sorts every chunk as Python's sorted(key=(len_s, len_t, i)) does
    columns = (np.arange(n, dtype=np.int64) // chunk, np.asarray(src_lengths, np.int64)[order],
               np.asarray(tgt_lengths, np.int64)[order], order)
    bits = [max(1, int(c.max(initial=0)).bit_length()) for c in columns]
    if sum(bits) <= 63:
        key = np.zeros(n, dtype=np.int64)
        for b, c in zip(bits, columns):
            key = (key << b) | c
        key.sort()
        ranked = key & ((1 << bits[-1]) - 1)
    else:  # a corpus too large for one key: the same order by a sort of four keys
        ranked = order[np.lexsort(columns[3:0:-1] + (columns[0],))]
    del shuffled
    batches = list(range(steps_per_epoch(n, batch_size)))
    rng.shuffle(batches)
    return [ranked[k * batch_size:(k + 1) * batch_size] for k in batches]


def eval_batches(src_lengths: np.ndarray, tgt_lengths: np.ndarray,
                 batch_size: int) -> list[np.ndarray]:
    """Deterministic batches for perplexity: the pairs sorted by (source length, target length,
    index), so padding is small."""
    n = len(src_lengths)
    order = np.lexsort((np.arange(n), np.asarray(tgt_lengths), np.asarray(src_lengths)))
    return [order[k: k + batch_size] for k in range(0, n, batch_size)]


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


def prefetch_batches(shares: Iterable[Sequence], *, pad: int, bos: int, eos: int, pin: bool,
                     ahead: int = 1, corpus: IdCorpus | None = None) -> Iterator[Batch | None]:
    """The Batch of each share (None for an empty one), collated ``ahead`` shares in advance on
    a side thread (``prefetch``), in pinned memory if ``pin`` (for an asynchronous copy to a
    CUDA device). A share is a list of id pairs, or with `corpus` a list of its indices
    (:func:`collate_ids`). The batches are the ones ``collate`` makes: no number changes."""
    def make(share: Sequence) -> Batch | None:
        if not len(share):
            return None
        if corpus is not None:
            b = collate_ids(corpus, share, pad=pad, bos=bos, eos=eos)
        else:
            b = collate(list(share), pad=pad, bos=bos, eos=eos)
        return b.pin_memory() if pin else b

    return prefetch(shares, make, ahead=ahead)
