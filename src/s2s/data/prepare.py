"""Normalising, filtering, deduplicating and Moses-tokenising a parallel corpus (the
`prepare` stage's library: :mod:`s2s.stages.prepare`).

A training corpus is streamed (:func:`iter_raw_pairs`, :func:`filter_train`): read in chunks,
each normalised, tokenised and filtered by a worker process, de-duplicated in order by a 64-bit
hash of the pair (:class:`SeenPairs`) and written as it goes, so memory holds a few chunks and
the hash table, whatever the corpus's size. Dev and test sets (a few thousand lines each) are
read whole (:func:`read_pair`).
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import math
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from s2s.config import CorpusRef, PrepareConfig
from s2s.data import sources
from s2s.data.stream import ordered_map
from s2s.data.text import CorpusError, iter_corpus, normalize, read_corpus, tokenize_many

log = logging.getLogger("s2s.prepare")

_PARALLEL_MIN_LINES = 20_000
MAX_EVAL_WORDS = 1000  # words per dev/test line (newstest2014's longest sentence has ~100)
LOST_BREAKS = "did the file lose its line breaks?"  # what a longer line says of its file


def long_line(lines: list[str], max_words: int = MAX_EVAL_WORDS) -> tuple[int, int] | None:
    """(its 1-based number, its words) of the first of `lines` of more than `max_words` words,
    or None: what prepare refuses in dev and test, and translate-text in its input."""
    for n, line in enumerate(lines, 1):
        if (words := len(line.split())) > max_words:
            return n, words
    return None


@dataclass
class FilterCounts:
    lines_in: int = 0
    removed: dict[str, int] = field(default_factory=lambda: {
        "empty": 0, "too_long": 0, "ratio": 0, "duplicate": 0})
    lines_out: int = 0
    tokens_en: int = 0
    tokens_fr: int = 0


def read_pair(raw_dir: Path, ref: CorpusRef, *, cleaned: dict[str, int] | None = None,
              max_words: int | None = None) -> tuple[list[str], list[str]]:
    """The corpus's aligned (en, fr) lines, normalised, cut to ref.max_lines; refuses an empty
    file, misalignment, and (with `max_words`) a line of more words. `cleaned` receives the
    counts of :func:`s2s.data.text.read_corpus`."""
    pair = sources.raw_pair(raw_dir, ref.corpus)
    en = read_corpus(pair.en, pair.format, cleaned, lang="en")
    fr = read_corpus(pair.fr, pair.format, cleaned, lang="fr")
    for path, lines in ((pair.en, en), (pair.fr, fr)):
        if not lines:
            what = "<seg> lines" if pair.format == "sgm" else "lines"
            raise CorpusError(f"{path}: empty file (no {what}); run the download stage again")
    if len(en) != len(fr):
        raise CorpusError(f"misaligned corpus '{ref.corpus}': {pair.en} has {len(en)} lines, "
                          f"{pair.fr} has {len(fr)}")
    if ref.max_lines is not None:
        en, fr = en[: ref.max_lines], fr[: ref.max_lines]
    en, fr = [normalize(s) for s in en], [normalize(s) for s in fr]
    if max_words is not None:
        for path, lines in ((pair.en, en), (pair.fr, fr)):
            if (found := long_line(lines, max_words)) is not None:
                n, words = found
                where = f"{path}: <seg> {n}" if pair.format == "sgm" else f"{path}:{n}"
                raise CorpusError(f"{where}: a line of {words:,} words (at most {max_words:,} "
                                  f"in dev and test: {LOST_BREAKS})")
    return en, fr


def tokenize_parallel(lines: list[str], lang: str, *, workers: int) -> list[str]:
    if workers <= 1 or len(lines) < _PARALLEL_MIN_LINES:
        return tokenize_many(lines, lang)
    size = -(-len(lines) // (workers * 4))
    chunks = [lines[i: i + size] for i in range(0, len(lines), size)]
    with ProcessPoolExecutor(workers) as pool:
        parts = pool.map(tokenize_many, chunks, [lang] * len(chunks))
        return [ln for part in parts for ln in part]


# --- training corpora, streamed ------------------------------------------------------------------

CHUNK_PAIRS = 10_000  # pairs a worker normalises, tokenises and filters at a time


def iter_raw_pairs(raw_dir: Path, ref: CorpusRef, *, cleaned: dict[str, int] | None = None,
                   chunk: int | None = None) -> Iterator[list[tuple[str, str]]]:
    """The corpus's first `ref.max_lines` aligned (en, fr) sentences, raw, in chunks, read as
    they are asked for. Both files are read to their ends (what reading cleaned is counted over
    the whole files, into `cleaned`); an empty file or files of different lengths are a
    CorpusError once they are (after the last chunk), as read_pair's."""
    pair = sources.raw_pair(raw_dir, ref.corpus)
    seen = {"en": 0, "fr": 0}

    def counted(path: Path, side: str) -> Iterator[str]:
        for block in iter_corpus(path, pair.format, cleaned, lang=side):
            seen[side] += len(block)
            yield from block

    limit = math.inf if ref.max_lines is None else ref.max_lines
    chunk = chunk or CHUNK_PAIRS
    taken: list[tuple[str, str]] = []
    n = 0
    for e, f in itertools.zip_longest(counted(pair.en, "en"), counted(pair.fr, "fr")):
        if e is None or f is None or n >= limit:
            continue  # read on: the files' lengths and what reading cleaned, to their ends
        n += 1
        taken.append((e, f))
        if len(taken) == chunk:
            yield taken
            taken = []
    for path, side in ((pair.en, "en"), (pair.fr, "fr")):
        if not seen[side]:
            what = "<seg> lines" if pair.format == "sgm" else "lines"
            raise CorpusError(f"{path}: empty file (no {what}); run the download stage again")
    if seen["en"] != seen["fr"]:
        raise CorpusError(f"misaligned corpus '{ref.corpus}': {pair.en} has {seen['en']} lines, "
                          f"{pair.fr} has {seen['fr']}")
    if taken:
        yield taken


@dataclass(frozen=True)
class _Filtered:
    """A chunk through the filters but de-duplication: the pairs kept, tokenised, their token
    counts and 64-bit hashes, and how many each filter removed."""

    pairs: int
    empty: int
    too_long: int
    ratio: int
    en: list[str]
    fr: list[str]
    lengths: list[tuple[int, int]]
    hashes: np.ndarray  # (kept,) uint64


def pair_hash(en: str, fr: str) -> bytes:
    """8 bytes of BLAKE2b of a tokenised pair: what de-duplication compares (two different pairs
    share one with probability 2^-64 a pair of pairs: ~4e-6 over 12M pairs)."""
    return hashlib.blake2b(f"{en}\n{fr}".encode(), digest_size=8).digest()


def filter_chunk(job: tuple[list[tuple[str, str]], PrepareConfig]) -> _Filtered:
    """Normalise, drop empty and one-sided pairs, lowercase where asked, tokenise, drop pairs of
    more than `max_len` tokens on a side or of a length ratio beyond `max_ratio` (one chunk of
    raw pairs: what a worker of :func:`filter_train` does)."""
    raw, cfg = job
    norm = [(normalize(e), normalize(f)) for e, f in raw]
    keep = [(e, f) for e, f in norm if e and f]
    if cfg.lowercase:
        keep = [(e.lower(), f.lower()) for e, f in keep]
    tok_en = tokenize_many([e for e, _ in keep], "en")
    tok_fr = tokenize_many([f for _, f in keep], "fr")
    too_long = ratio = 0
    out_en, out_fr, lengths = [], [], []
    for e, f in zip(tok_en, tok_fr):
        le, lf = len(e.split()), len(f.split())
        if le > cfg.max_len or lf > cfg.max_len:
            too_long += 1
        elif max(le, lf) >= cfg.ratio_min_len and max(le, lf) > cfg.max_ratio * min(le, lf):
            ratio += 1
        else:
            out_en.append(e)
            out_fr.append(f)
            lengths.append((le, lf))
    hashes = np.frombuffer(b"".join(pair_hash(e, f) for e, f in zip(out_en, out_fr)),
                           dtype="<u8").copy()
    return _Filtered(len(raw), len(raw) - len(keep), too_long, ratio, out_en, out_fr, lengths,
                     hashes)


GROW_SLICE = 1 << 18  # slots of the old table inserted into the doubled one at a time


class SeenPairs:
    """The 64-bit hashes of the pairs kept so far, in one open-addressing table (numpy, linear
    probing, 0 for an empty slot, at most half full): 8-byte slots, doubled when more than half
    would be taken, so 16-32 bytes a pair; for the moment it doubles, the old table, the new one
    and the working arrays of one slice's keys are held at once (~52 bytes a pair measured). A
    Python set of the tokenised string pairs took ~1.8 KB a pair."""

    def __init__(self, capacity_log2: int = 16):
        self.table = np.zeros(1 << capacity_log2, dtype=np.uint64)
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def add_new(self, keys: np.ndarray) -> np.ndarray:
        """Add `keys` (uint64, in order); returns, for each, whether it was new (not in the set
        and not earlier in `keys`): the pairs de-duplication keeps."""
        keys = np.where(keys == 0, np.uint64(1), keys).astype(np.uint64)  # 0 marks empty slots
        uniq, first = np.unique(keys, return_index=True)  # first occurrence of each within keys
        while (self.size + len(uniq)) * 2 > len(self.table):
            self._grow()
        new = self._insert(uniq)
        fresh = np.zeros(len(keys), dtype=bool)
        fresh[first[new]] = True
        return fresh

    def _insert(self, keys: np.ndarray) -> np.ndarray:
        """Insert distinct keys; returns whether each was absent."""
        mask = np.uint64(len(self.table) - 1)
        slot = keys & mask
        new = np.zeros(len(keys), dtype=bool)
        pending = np.arange(len(keys))
        while len(pending):
            k, at = keys[pending], slot[pending]
            held = self.table[at]
            empty = held == 0
            self.table[at[empty]] = k[empty]  # keys that meet at one empty slot: one of them wins
            won = empty & (self.table[at] == k)
            new[pending[won]] = True
            pending = pending[~((held == k) | won)]
            slot[pending] = (slot[pending] + np.uint64(1)) & mask
        self.size += int(new.sum())
        return new

    def _grow(self) -> None:
        """Double the table, its keys inserted again a slice of the old table at a time: the
        working arrays of one insertion (~45 bytes a key) are those of a slice, not of every key
        (which had the doubling take ~100 bytes a pair beyond the old table). Which slots the
        keys take depends on the order; which keys the table holds, all that add_new reads,
        does not."""
        old = self.table
        self.table = np.zeros(2 * len(old), dtype=np.uint64)
        self.size = 0
        for start in range(0, len(old), GROW_SLICE):
            part = old[start:start + GROW_SLICE]
            self._insert(part[part != 0])


def filter_train(chunks: Iterable[list[tuple[str, str]]], cfg: PrepareConfig, *, workers: int,
                 seen: SeenPairs, write: Callable[[list[str], list[str]], None]) -> FilterCounts:
    """One training corpus through the filters, chunk by chunk over `workers` processes
    (:func:`filter_chunk`), de-duplicated in order against `seen` (which carries the pairs kept
    from earlier corpora) and handed to `write` as it goes: the output is the one a single
    process makes."""
    counts = FilterCounts()
    jobs = ((chunk, cfg) for chunk in chunks)
    for part in ordered_map(filter_chunk, jobs, workers=workers):
        counts.lines_in += part.pairs
        counts.removed["empty"] += part.empty
        counts.removed["too_long"] += part.too_long
        counts.removed["ratio"] += part.ratio
        fresh = seen.add_new(part.hashes) if cfg.dedup else np.ones(len(part.en), dtype=bool)
        counts.removed["duplicate"] += int(len(fresh) - fresh.sum())
        kept = np.flatnonzero(fresh).tolist()
        write([part.en[i] for i in kept], [part.fr[i] for i in kept])
        counts.lines_out += len(kept)
        counts.tokens_en += sum(part.lengths[i][0] for i in kept)
        counts.tokens_fr += sum(part.lengths[i][1] for i in kept)
    return counts
