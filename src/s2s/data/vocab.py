"""Vocabularies: the most frequent words of the training data, and the word <-> id map
(the `vocab` stage's library: :mod:`s2s.stages.vocab`).
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from s2s.layout import vocab_file
from s2s.text_settings import SRC_LANG, TGT_LANG

log = logging.getLogger("s2s.vocab")

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<bos>", "<eos>"
SPECIALS = (PAD, UNK, BOS, EOS)
NL = b"\n"  # a vocabulary file's line end


@dataclass(frozen=True)
class Vocab:
    """Word <-> id. Ids 0-3 are <pad>, <unk>, <bos>, <eos>."""

    words: tuple[str, ...]
    fingerprint: str  # sha256 of the vocabulary file: checkpoints record the one they were trained on

    pad: int = 0
    unk: int = 1
    bos: int = 2
    eos: int = 3

    def __post_init__(self):
        object.__setattr__(self, "_index", {w: i for i, w in enumerate(self.words)})

    def __len__(self) -> int:
        return len(self.words)

    def encode(self, line: str) -> list[int]:
        index = self._index  # type: ignore[attr-defined]
        return [index.get(w, self.unk) for w in line.split()]

    def decode(self, ids) -> str:
        return " ".join(self.words[i] for i in ids)

    @classmethod
    def load(cls, path: Path) -> "Vocab":
        data = Path(path).read_bytes()
        if data and not data.endswith(b"\n"):  # the vocab stage ends every line with one
            raise ValueError(f"{path}:{data.count(NL) + 1}: the last line has no newline (the "
                             "file was cut short, or edited by hand)")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"{path}:{data.count(NL, 0, e.start) + 1}: not valid UTF-8 "
                             f"({e.reason} at byte {e.start})") from None
        words = []
        for n, line in enumerate(text.split("\n")[:-1], 1):
            word, sep, count = line.partition("\t")
            if not sep or not count.isdigit():
                raise ValueError(f"{path}:{n}: expected 'word<TAB>count', got {line[:60]!r}")
            words.append(word)
        if tuple(words[:4]) != SPECIALS:
            raise ValueError(f"{path}: the first four entries must be {', '.join(SPECIALS)}")
        return cls(tuple(words), hashlib.sha256(data).hexdigest())

    @classmethod
    def load_pair(cls, vocab_dir: Path) -> tuple["Vocab", "Vocab"]:
        """The source (English) and target (French) vocabularies of a vocab stage's folder or an
        export."""
        return cls.load(vocab_file(vocab_dir, SRC_LANG)), cls.load(vocab_file(vocab_dir, TGT_LANG))


def count_words(lines: list[str]) -> Counter:
    counts: Counter = Counter()
    for line in lines:
        counts.update(line.split())
    return counts


def build(counts: Counter, *, size: int, min_count: int) -> list[tuple[str, int]]:
    ranked = sorted((kv for kv in counts.items() if kv[1] >= min_count and kv[0] not in SPECIALS),
                    key=lambda kv: (-kv[1], kv[0]))
    return ranked[:size]


def unk_rate(lines: list[str], known: set[str]) -> float:
    total = unk = 0
    for line in lines:
        for w in line.split():
            total += 1
            unk += w not in known
    return unk / total if total else 0.0
