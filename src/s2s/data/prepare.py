"""Normalising, filtering, deduplicating and Moses-tokenising a parallel corpus (the
`prepare` stage's library: :mod:`s2s.stages.prepare`).
"""

from __future__ import annotations

import logging
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from s2s.config import CorpusRef, PrepareConfig
from s2s.data import sources
from s2s.data.text import CorpusError, normalize, read_corpus, tokenize_many

log = logging.getLogger("s2s.prepare")

_PARALLEL_MIN_LINES = 20_000
MAX_EVAL_WORDS = 1000  # words per dev/test line (newstest2014's longest sentence has ~100)


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
    en = read_corpus(pair.en, pair.format, cleaned)
    fr = read_corpus(pair.fr, pair.format, cleaned)
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
            for n, line in enumerate(lines, 1):
                if (words := line.count(" ") + 1) > max_words:
                    where = f"{path}: <seg> {n}" if pair.format == "sgm" else f"{path}:{n}"
                    raise CorpusError(f"{where}: a line of {words:,} words (at most {max_words:,} "
                                      "in dev and test: did the file lose its line breaks?)")
    return en, fr


def tokenize_parallel(lines: list[str], lang: str, *, workers: int) -> list[str]:
    if workers <= 1 or len(lines) < _PARALLEL_MIN_LINES:
        return tokenize_many(lines, lang)
    size = -(-len(lines) // (workers * 4))
    chunks = [lines[i: i + size] for i in range(0, len(lines), size)]
    with ProcessPoolExecutor(workers) as pool:
        parts = pool.map(tokenize_many, chunks, [lang] * len(chunks))
        return [ln for part in parts for ln in part]


def filter_train(en: list[str], fr: list[str], cfg: PrepareConfig, *, workers: int,
                 seen: set[tuple[str, str]]) -> tuple[list[str], list[str], FilterCounts]:
    """Apply the training filters to one corpus; `seen` carries duplicates across corpora."""
    counts = FilterCounts(lines_in=len(en))
    keep = [i for i in range(len(en)) if en[i] and fr[i]]
    counts.removed["empty"] = len(en) - len(keep)
    if cfg.lowercase:
        en, fr = [s.lower() for s in en], [s.lower() for s in fr]
    tok_en = tokenize_parallel([en[i] for i in keep], "en", workers=workers)
    tok_fr = tokenize_parallel([fr[i] for i in keep], "fr", workers=workers)
    out_en, out_fr = [], []
    for e, f in zip(tok_en, tok_fr):
        le, lf = len(e.split()), len(f.split())
        if le > cfg.max_len or lf > cfg.max_len:
            counts.removed["too_long"] += 1
        elif max(le, lf) >= cfg.ratio_min_len and max(le, lf) > cfg.max_ratio * min(le, lf):
            counts.removed["ratio"] += 1
        elif cfg.dedup and (e, f) in seen:
            counts.removed["duplicate"] += 1
        else:
            seen.add((e, f))
            out_en.append(e)
            out_fr.append(f)
            counts.tokens_en += le
            counts.tokens_fr += lf
    counts.lines_out = len(out_en)
    return out_en, out_fr, counts
