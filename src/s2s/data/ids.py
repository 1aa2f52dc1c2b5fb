"""Token ids made once: each split's sentences as flat integer arrays with offsets, memory-mapped
where they are read (the `ids` stage's library: :mod:`s2s.stages.ids`).

The files of an ids folder (``data/ids``), for each split (train, dev, test) and side (en, fr):

    <split>.<lang>.npy          int32 (tokens,): every sentence's ids, one after the other
    <split>.<lang>.offsets.npy  int64 (lines + 1,): sentence k is ids[offsets[k]:offsets[k + 1]]
    ids.json                    the record (:class:`IdsRecord`): the vocabularies' fingerprints,
                                each split's sentences, per file its shape, bytes and the
                                sha256 of its values (the bytes after the .npy header)

A training job maps them (``np.load(mmap_mode="r")``) instead of encoding the corpus into Python
lists: its start-up does not grow with the corpus beyond reading the files once to check them,
and its data cost ~4 bytes a token of page cache, which every job and rank on the machine share
(fairseq's binarised datasets are the model). :func:`open_split` refuses, in one line naming the
file, an ids folder that is not the record's (a file truncated, damaged, of another shape), or
whose vocabularies are not the ones given; the ids stage rebuilds it (``dvc repro ids``).

The ids are those of :meth:`s2s.data.vocab.Vocab.encode` (``line.split()``, unknown words
``<unk>``), so every batch made from them is the one made from the text.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from s2s.data.vocab import Vocab
from s2s.io import naming
from s2s.layout import LANGS, SPLITS
from s2s.schema import Rules, decode, rng

RECORD = "ids.json"
ID_DTYPE = np.dtype("<i4")
OFFSET_DTYPE = np.dtype("<i8")
FORMAT = 1
_HEADER_BYTES = 128  # a 1-D .npy header of any length fits (numpy pads headers to 64 bytes)
_CHUNK = 1 << 20


class IdsError(ValueError):
    """An ids folder that is not what its record says, or made with other vocabularies; the
    message names the file and says how to rebuild it."""


def ids_file(split: str, lang: str) -> str:
    return f"{split}.{lang}.npy"


def offsets_file(split: str, lang: str) -> str:
    return f"{split}.{lang}.offsets.npy"


# the arrays of an ids folder, in the record's order
_ARRAYS = tuple(f(split, lang) for split in SPLITS for lang in LANGS
                for f in (ids_file, offsets_file))
# every file of an ids folder: the ids stage replaces an --out that holds nothing else
FOLDER_FILES = frozenset({RECORD, *_ARRAYS})


# --- writing -------------------------------------------------------------------------------------

class ArrayWriter:
    """A 1-D .npy file written as its values come, of a length known only at the end: a header
    of fixed size is written last (numpy reads it as any other). Hashes the values as it writes
    them (the record's sha256 is of the values, the bytes after the header)."""

    def __init__(self, path: Path, dtype: np.dtype):
        self.path, self.dtype = Path(path), np.dtype(dtype)
        self.f = open(self.path, "wb")
        with naming(self.path):  # a full disk names the file, as the atomic writers do
            self.f.write(b"\0" * _HEADER_BYTES)
        self.count = 0
        self.values = hashlib.sha256()

    def write(self, values: np.ndarray) -> None:
        data = np.ascontiguousarray(values, dtype=self.dtype).tobytes()
        with naming(self.path):
            self.f.write(data)
        self.values.update(data)
        self.count += len(data) // self.dtype.itemsize

    def close(self) -> dict:
        """Finish the file: its header, and the whole flushed to disk; returns its entry of the
        record."""
        with naming(self.path):
            self.f.seek(0)
            self.f.write(_npy_header(self.dtype, self.count))
            self.f.flush()
            os.fsync(self.f.fileno())
            self.f.close()
        return {"shape": [self.count], "bytes": _HEADER_BYTES + self.count * self.dtype.itemsize,
                "sha256": self.values.hexdigest()}


def _npy_header(dtype: np.dtype, count: int) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False,
              "shape": (count,)})
    header = buf.getvalue()
    if len(header) > _HEADER_BYTES:  # cannot happen for 1-D arrays, whose header is < 100 bytes
        raise ValueError(f"a .npy header of {len(header)} bytes")
    # pad the header's dictionary with spaces to the fixed size (it ends with a newline)
    body = header[10:-1] + b" " * (_HEADER_BYTES - len(header)) + b"\n"
    return header[:8] + (len(body)).to_bytes(2, "little") + body


@dataclass(frozen=True)
class Values:
    """What one read of a .npy array's values found: their sha256, their least and greatest
    value, and whether they never decrease (None for no values)."""

    sha256: str
    low: int | None
    high: int | None
    increasing: bool


def read_values(path: Path, offset: int, dtype: np.dtype) -> Values:
    """One pass over a file's values from `offset` on (a .npy array's, after its header): the
    checks of a reader done with the hashing, so that the mapped array is not read again."""
    h = hashlib.sha256()
    low = high = last = None
    increasing = True
    step = _CHUNK - _CHUNK % np.dtype(dtype).itemsize
    with open(path, "rb") as f:
        f.seek(offset)
        while chunk := f.read(step):
            h.update(chunk)
            v = np.frombuffer(chunk, dtype=dtype)
            if not len(v):
                continue
            lo, hi = int(v.min()), int(v.max())
            low, high = (lo, hi) if low is None else (min(low, lo), max(high, hi))
            increasing = (increasing and (last is None or last <= v[0])
                          and bool(np.all(v[1:] >= v[:-1])))
            last = v[-1]
    return Values(h.hexdigest(), low, high, increasing)


def encode_lines(lines: Sequence[str], vocab: Vocab) -> tuple[np.ndarray, np.ndarray]:
    """The ids of `lines` one after the other (int32, Vocab.encode's) and each line's number of
    ids (int64)."""
    encoded = [vocab.encode(line) for line in lines]
    lengths = np.fromiter(map(len, encoded), dtype=OFFSET_DTYPE, count=len(encoded))
    return np.fromiter((i for row in encoded for i in row), dtype=ID_DTYPE,
                       count=int(lengths.sum())), lengths


def write_side(folder: Path, split: str, lang: str, chunks: Iterable[tuple[np.ndarray, np.ndarray]]
               ) -> dict[str, dict]:
    """One split's side from (ids, lengths) chunks, in order: its ids and offsets files; returns
    their record entries. A chunk that fails leaves both files closed, unfinished (no header),
    in the folder the caller removes."""
    ids = ArrayWriter(folder / ids_file(split, lang), ID_DTYPE)
    offsets = ArrayWriter(folder / offsets_file(split, lang), OFFSET_DTYPE)
    try:
        offsets.write(np.zeros(1, OFFSET_DTYPE))
        end = 0
        for chunk_ids, lengths in chunks:
            ids.write(chunk_ids)
            offsets.write(end + np.cumsum(lengths))
            end += int(lengths.sum())
    except BaseException:
        for f in (ids.f, offsets.f):  # quietly: the error raised is the first (a full disk's
            with contextlib.suppress(OSError):  # would be the flush of the other file again)
                f.close()
        raise
    return {ids_file(split, lang): ids.close(), offsets_file(split, lang): offsets.close()}


# --- the record ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class IdsRecord:
    """``ids.json``: what the ids stage wrote. `vocab`: the fingerprint (sha256) of each side's
    vocabulary file; `lines`: each split's sentences; `files`: each file's shape, bytes and
    sha256."""

    vocab: dict[str, str]
    lines: dict[str, int]
    files: dict[str, dict]
    format: int = FORMAT

    def to_json(self) -> dict:
        return {"format": self.format, "vocab": self.vocab, "lines": self.lines,
                "files": self.files}

    @classmethod
    def read(cls, folder: Path) -> IdsRecord:
        """The record of `folder`, checked whole (:func:`s2s.schema.decode`, as every record
        the pipeline reads): an IdsError naming the file, the key and what was expected."""
        path = Path(folder) / RECORD
        fix = _fix(folder)
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise IdsError(f"{path}: not found: {fix}") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise IdsError(f"{path}: not a readable record ({e}): {fix}") from None
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            raise IdsError(f"{path}: not an ids record of format {FORMAT}: {fix}")
        try:
            held = decode(_Written, raw, str(path), "", Rules(IdsError))
        except IdsError as e:
            raise IdsError(f"{e}: {fix}") from None
        for key, names in (("vocab", LANGS), ("lines", SPLITS), ("files", _ARRAYS)):
            for name in names:
                if name not in getattr(held, key):
                    raise IdsError(f"{path}: missing key '{key}.{name}': {fix}")
        return cls(vocab={lang: held.vocab[lang] for lang in LANGS},
                   lines={split: held.lines[split] for split in SPLITS},
                   files={name: {"shape": list(held.files[name].shape),
                                 "bytes": held.files[name].bytes,
                                 "sha256": held.files[name].sha256} for name in _ARRAYS})


@dataclass(frozen=True)
class _Array:
    """A file's entry of ``ids.json``, as :meth:`IdsRecord.read` checks it."""

    shape: tuple[int] = field(metadata=rng(0))  # one length
    bytes: int = field(metadata=rng(0))
    sha256: str


@dataclass(frozen=True)
class _Written:
    """``ids.json`` as the ids stage writes it (:meth:`IdsRecord.to_json`)."""

    format: int
    vocab: dict[str, str]
    lines: dict[str, int] = field(metadata=rng(0))
    files: dict[str, _Array]


def _fix(folder: Path) -> str:
    return f"run the ids stage again (`dvc repro ids`, or `s2s ids --out {folder}`)"


# --- reading -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Side:
    """One side of a split: ids (tokens,) int32 and offsets (lines + 1,) int64, memory-mapped."""

    ids: np.ndarray
    offsets: np.ndarray

    @functools.cached_property
    def lengths(self) -> np.ndarray:
        """(lines,) int64: each sentence's number of ids."""
        return np.diff(self.offsets)

    def sentence(self, k: int) -> list[int]:
        return self.ids[self.offsets[k]:self.offsets[k + 1]].tolist()


@dataclass(frozen=True)
class IdCorpus:
    """A split as source and target ids (:func:`open_split`). ``pairs`` of a list of indices
    gives the (source ids, target ids) lists that s2s.data.batching.collate takes; ``batch``
    gives its Batch directly from the arrays (the same tensors)."""

    name: str  # the folder and split, for messages
    src: Side
    tgt: Side

    def __len__(self) -> int:
        return len(self.src.offsets) - 1

    @property
    def src_lengths(self) -> np.ndarray:
        return self.src.lengths

    @property
    def tgt_lengths(self) -> np.ndarray:
        return self.tgt.lengths

    @property
    def target_tokens(self) -> int:
        """Target tokens with one <eos> a sentence: what training counts as its words."""
        return int(self.tgt.offsets[-1]) + len(self)

    @classmethod
    def from_pairs(cls, pairs: Sequence[tuple[Sequence[int], Sequence[int]]], *,
                   name: str = "pairs") -> IdCorpus:
        """Id pairs held in memory as a corpus (tests, a few sentences to analyse)."""
        sides = []
        for k in (0, 1):
            lengths = np.array([len(p[k]) for p in pairs], dtype=OFFSET_DTYPE)
            ids = np.array([i for p in pairs for i in p[k]], dtype=ID_DTYPE)
            sides.append(Side(ids, np.concatenate([np.zeros(1, OFFSET_DTYPE), np.cumsum(lengths)])))
        return cls(name, *sides)

    def pair(self, k: int) -> tuple[list[int], list[int]]:
        return self.src.sentence(k), self.tgt.sentence(k)

    def __iter__(self) -> Iterator[tuple[list[int], list[int]]]:
        return (self.pair(k) for k in range(len(self)))


def open_split(folder: Path, split: str, *, src_vocab: Vocab, tgt_vocab: Vocab) -> IdCorpus:
    """Split `split` of ids folder `folder`, checked against its record and the vocabularies:
    each file of the record's size, header and sha256, the offsets those of its ids, both sides
    of the same lines, every id within its vocabulary. IdsError naming the file otherwise."""
    folder = Path(folder)
    record = IdsRecord.read(folder)
    fix = _fix(folder)
    for lang, vocab in zip(LANGS, (src_vocab, tgt_vocab)):
        if record.vocab[lang] != vocab.fingerprint:
            raise IdsError(f"{folder / RECORD}: made with the {lang} vocabulary "
                           f"{record.vocab[lang][:12]}, not {vocab.fingerprint[:12]} (the one "
                           f"given): {fix}")
    sides = []
    for lang, vocab in zip(LANGS, (src_vocab, tgt_vocab)):
        ids, found = _load(folder, ids_file(split, lang), ID_DTYPE, record, fix)
        offsets, ends = _load(folder, offsets_file(split, lang), OFFSET_DTYPE, record, fix)
        path = folder / offsets_file(split, lang)
        if len(offsets) != record.lines[split] + 1:
            raise IdsError(f"{path}: {len(offsets) - 1:,} sentences, the record's {split} has "
                           f"{record.lines[split]:,}: {fix}")
        if ends.low != 0 or ends.high != len(ids) or not ends.increasing:
            raise IdsError(f"{path}: not the offsets of {ids_file(split, lang)} (from 0, not "
                           f"decreasing, to its {len(ids):,} ids): {fix}")
        if found.low is not None and (found.low < 0 or found.high >= len(vocab)):
            raise IdsError(f"{folder / ids_file(split, lang)}: ids outside the {lang} "
                           f"vocabulary's {len(vocab):,}: {fix}")
        sides.append(Side(ids, offsets))
    return IdCorpus(f"{folder}/{split}", *sides)


def _load(folder: Path, name: str, dtype: np.dtype, record: IdsRecord,
          fix: str) -> tuple[np.ndarray, Values]:
    """The mapped array of file `name`, checked against the record in one read of its values."""
    path = folder / name
    want = record.files[name]
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise IdsError(f"{path}: not found: {fix}") from None
    if size != want["bytes"]:
        raise IdsError(f"{path}: {size:,} bytes, the record's {want['bytes']:,} (truncated or "
                       f"replaced): {fix}")
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError) as e:
        raise IdsError(f"{path}: not a .npy array ({e}): {fix}") from None
    if array.dtype != dtype or array.ndim != 1 or list(array.shape) != want["shape"]:
        raise IdsError(f"{path}: {array.dtype} of shape {list(array.shape)}, the record's "
                       f"{dtype} of shape {want['shape']}: {fix}")
    values = read_values(path, size - array.nbytes, dtype)  # the values, after the header
    if values.sha256 != want["sha256"]:
        raise IdsError(f"{path}: its sha256 is not the record's (damaged): {fix}")
    return array, values
