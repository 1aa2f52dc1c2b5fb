"""Stage `vocab`: the most frequent words of each side of the training data.

Reads:  ``<prepared>/train.tok.{en,fr}`` (and dev/test, for the UNK rates), params `vocab`.
Writes: ``<out>/{en,fr}.tsv``: ``word<TAB>count``, the four specials first (count 0), then words
        by descending training count (ties by word, so the file is deterministic);
        ``metrics/vocab.json``: sizes, and the UNK rate (share of tokens outside the vocabulary)
        of train, dev and test per side.
The paper keeps 160,000 source and 80,000 target words; every other word becomes <unk>.
The training files are counted in blocks of lines over `workers` processes
(the threads of ``resources.vocab``, else of ``resources.default``), the counts
merged: memory holds the counts and a few blocks, whatever the corpus's size. An existing
``--out`` is replaced only if it holds nothing but en.tsv and fr.tsv (an earlier output); a
folder with anything else in it, a file, the current folder or one holding ``--prepared`` is
refused in one line before anything is read (:func:`s2s.io.check_out_dir`).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from pathlib import Path

from s2s.config import VocabConfig
from s2s.dag import Arg, Stage, command
from s2s.data.vocab import SPECIALS, build, count_words, unk_rate
from s2s.artifacts import VocabMetrics
from s2s.data.stream import ordered_map, workers_for
from s2s.io import (atomic_write_lines, iter_lines, out_names, read_lines,
                    remove_dead_temporaries, whole_dir)
from s2s.layout import LANGS, VocabPaths, prepared_file, vocab_file, vocab_name

log = logging.getLogger("s2s.vocab")

HELP = "build the vocabularies"
ARGS = (Arg("--prepared", "data/prepared"),
        Arg("--out", "data/vocab", writes=True, help="folder of the vocabularies (en.tsv, fr.tsv)"),
        Arg("--metrics", "metrics/vocab.json", writes=True,
            help="vocabulary sizes and UNK rates (JSON)"))
PATHS = VocabPaths  # ARGS as one value, which cli builds and main takes
# the files of its folder: an existing --out is replaced only if it holds nothing else
WRITES = frozenset(vocab_name(lang) for lang in LANGS)


def stages(params) -> list[Stage]:
    return [command("vocab", "vocab", ARGS, params=("vocab",))]


def cli(args, params) -> None:
    main(params.vocab, VocabPaths.from_args(args), workers=workers_for(params, "vocab"))


def main(cfg: VocabConfig, paths: VocabPaths, *, workers: int = 1) -> dict:
    """Count each side's training words in blocks over `workers` processes (the counts merged:
    the same files for any number), write the vocabularies and the metrics."""
    t0 = time.perf_counter()
    prepared_dir, out_dir, metrics_out = paths.prepared, paths.out, paths.metrics
    metrics: dict = {}
    # Both vocabularies or neither: the folder is written under a temporary name and renamed
    # when whole, so a failure on the French side never leaves a new en.tsv beside an old fr.tsv.
    # An --out of anything but an earlier output of this stage is refused first (s2s.io).
    with whole_dir(out_dir, owns=out_names(WRITES, out_dir, metrics_out),
                   inputs=(prepared_dir,), what="the vocab stage") as tmp:
        remove_dead_temporaries(metrics_out)  # a killed run's
        for lang, size in (("en", cfg.src_size), ("fr", cfg.tgt_size)):
            metrics[lang] = _side(cfg, lang, size=size, prepared_dir=prepared_dir, out_dir=tmp,
                                  workers=workers)
    VocabMetrics.from_json(metrics, source=metrics_out).write(metrics_out)  # checked as read
    log.info("read %s; wrote %s, %s in %.1fs (%d process%s)", prepared_dir, out_dir,
             metrics_out, time.perf_counter() - t0, workers, "" if workers == 1 else "es")
    return metrics


def _side(cfg: VocabConfig, lang: str, *, size: int, prepared_dir: Path, out_dir: Path,
          workers: int) -> dict:
    """Count `lang`'s training words, write its vocabulary into `out_dir`; its metrics."""
    train = prepared_file(prepared_dir, "train", lang)
    counts: Counter = Counter()
    for part in ordered_map(count_words, iter_lines(train), workers=workers):
        counts.update(part)
    entries = build(counts, size=size, min_count=cfg.min_count)
    path = vocab_file(out_dir, lang)
    atomic_write_lines(path, [f"{w}\t0" for w in SPECIALS] + [f"{w}\t{c}" for w, c in entries])
    known = {w for w, _ in entries}
    tokens = sum(counts.values())
    unknown = tokens - sum(counts[w] for w in known)  # the training set's, from its counts
    rates = {"train": round(unknown / tokens if tokens else 0.0, 6)}
    rates |= {split: round(unk_rate(read_lines(prepared_file(prepared_dir, split, lang)),
                                    known), 6) for split in ("dev", "test")}
    log.info("%s: %d of %d word types kept (min count %d); UNK rate %s", lang, len(entries),
             len(counts), cfg.min_count, rates)
    return {"size": len(entries) + len(SPECIALS), "words": len(entries),
            "train_types": len(counts), "unk_rate": rates}
