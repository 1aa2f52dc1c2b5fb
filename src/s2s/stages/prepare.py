"""Stage `prepare`: raw corpora -> normalised, filtered, deduplicated, Moses-tokenised text.

Reads:  the corpora that `download` put in the raw dir (``data/raw``), params `data`, `prepare`.
Writes: ``<out>/{train,dev,test}.tok.{en,fr}`` (tokenised, one sentence per line),
        ``<out>/{dev,test}.raw.{en,fr}`` (normalised but untokenised: sacreBLEU's references),
        ``metrics/prepare.json``: per split and corpus, lines in, lines removed by each filter,
        lines out, tokens.

Training corpora are streamed: read in chunks, each normalised, tokenised and filtered by one of
`workers` processes (the threads of ``resources.prepare``, else of ``resources.default``:
s2s.data.stream.workers_for), de-duplicated in order by a 64-bit hash of the pair, and written
as they go; memory holds a few chunks and the hash table (16-32 bytes a pair, more for the
moment it doubles: :class:`s2s.data.prepare.SeenPairs`), whatever the corpus's size. The folder
is written under a temporary name and renamed when complete. An existing ``--out`` is replaced only if it holds nothing but these files (an earlier
output of this stage); a folder with anything else in it, a file, the current folder or one
holding ``--raw`` is refused in one line before anything is read (:func:`s2s.io.check_out_dir`).

Filters apply to training data only; dev and test keep every line (all 3003 sentences of
newstest2014 are translated and scored, as in the paper). Order: normalise, drop empty and
one-sided pairs, tokenise, drop pairs longer than `max_len` tokens on either side, drop pairs whose
length ratio exceeds `max_ratio`, drop exact duplicates (across all training corpora).

Bad input: an empty corpus file, files of different line counts, invalid UTF-8 and an SGML
``<seg>`` without ``</seg>`` are refused (:class:`CorpusError` naming the file, and the line where
there is one). A dev or test line of more than :data:`MAX_EVAL_WORDS` words is refused too: every
such line is decoded and scored, and no sentence is that long (a file that lost its line breaks
is); in training such a line is only one more `too_long` pair. A file of old Mac line ends (CR
only), which reads as one line of all its sentences, is refused too
(:data:`s2s.data.text.MAX_CR_LINE_SHARE`). What reading cleans is counted per corpus in the
metrics, under ``cleaned``: ``bom_files`` (a leading byte-order mark, dropped), ``crlf_lines``
(Windows line ends, read as plain ones; both counted over the whole files),
``control_char_lines`` (lines that lost characters to normalisation: the C0 controls but
whitespace, NUL among them, DEL, U+200B and U+FEFF; the whitespace controls \\v \\f \\x1c-\\x1f
become a space, and the C1 controls U+0080-U+009F are kept, as sacreBLEU keeps them in the
references (but U+0085, whitespace to Unicode, a space), neither counted) and
``cr_inside_lines`` (lines holding a stray carriage return, made a space).
"""

from __future__ import annotations

import logging
import os
import time

from s2s.artifacts import PrepareMetrics
from s2s.config import DataConfig, PrepareConfig
from s2s.dag import Arg, Stage, command
from s2s.data.prepare import (MAX_EVAL_WORDS, SeenPairs, filter_train, iter_raw_pairs,
                              read_pair, tokenize_parallel)
from s2s.data.stream import closing_named, workers_for
from s2s.data.text import CorpusError
from s2s.io import atomic_write_lines, naming, out_names, remove_dead_temporaries, whole_dir
from s2s.layout import LANGS, SPLITS, PreparePaths, prepared_file, prepared_name

log = logging.getLogger("s2s.prepare")

HELP = "normalise, filter, tokenise"
ARGS = (Arg("--raw", "data/raw"),
        Arg("--out", "data/prepared", writes=True, help="folder of the prepared corpora"),
        Arg("--metrics", "metrics/prepare.json", writes=True,
            help="what each filter removed (JSON)"))
PATHS = PreparePaths  # ARGS as one value, which cli builds and main takes
# the files of its folder: an existing --out is replaced only if it holds nothing else
WRITES = frozenset(prepared_name(split, lang, form) for split in SPLITS for lang in LANGS
                   for form in ("tok", "raw"))


def stages(params) -> list[Stage]:
    return [command("prepare", "prepare", ARGS, params=("data", "prepare"))]


def cli(args, params) -> None:
    main(params.data, params.prepare, PreparePaths.from_args(args),
         workers=workers_for(params, "prepare"))


def main(data: DataConfig, cfg: PrepareConfig, paths: PreparePaths, *, workers: int = 1) -> dict:
    """Prepare the corpora of `data` into ``paths.out`` with `workers` processes (the output is
    the same for any number). The folder is written under a temporary name and renamed when
    complete: a killed run leaves nothing a later stage would read."""
    t0 = time.perf_counter()
    raw_dir, out_dir, metrics_out = paths.raw, paths.out, paths.metrics
    report: dict[str, dict] = {"train": {}, "dev": {}, "test": {}}
    utf8_lines = {"encoding": "utf-8", "newline": "\n"}
    # an --out of anything but an earlier output of this stage is refused first (s2s.io)
    with (whole_dir(out_dir, owns=out_names(WRITES, out_dir, metrics_out), inputs=(raw_dir,),
                    what="the prepare stage") as tmp,
          closing_named(open(prepared_file(tmp, "train", "en"), "w", **utf8_lines)) as out_en,
          closing_named(open(prepared_file(tmp, "train", "fr"), "w", **utf8_lines)) as out_fr):
        def write(en: list[str], fr: list[str]) -> None:
            # a full disk names the file (as the atomic writers do), not only "No space left"
            with naming(out_en.name):
                out_en.writelines(f"{line}\n" for line in en)
            with naming(out_fr.name):
                out_fr.writelines(f"{line}\n" for line in fr)

        remove_dead_temporaries(metrics_out)  # a killed run's
        # dev and test first: small, and a fault of theirs is found before the training
        # corpora are read (at the paper's scale, most of an hour)
        for split, refs in (("dev", data.dev), ("test", (data.test,))):
            raw_en, raw_fr = [], []
            for ref in refs:
                cleaned: dict[str, int] = {}
                en, fr = read_pair(raw_dir, ref, cleaned=cleaned, max_words=MAX_EVAL_WORDS)
                raw_en += en
                raw_fr += fr
                report[split][ref.corpus] = {"lines_in": len(en), "lines_out": len(en),
                                             "empty_en": sum(not s for s in en),
                                             "empty_fr": sum(not s for s in fr),
                                             "cleaned": cleaned}
            if cfg.lowercase:
                raw_en, raw_fr = [s.lower() for s in raw_en], [s.lower() for s in raw_fr]
            tok_en = tokenize_parallel(raw_en, "en", workers=workers)
            tok_fr = tokenize_parallel(raw_fr, "fr", workers=workers)
            for (form, lang), lines in ((("raw", "en"), raw_en), (("raw", "fr"), raw_fr),
                                        (("tok", "en"), tok_en), (("tok", "fr"), tok_fr)):
                atomic_write_lines(prepared_file(tmp, split, lang, form), lines)
            log.info("%s: %d pairs from %s (unfiltered)", split, len(raw_en),
                     ", ".join(r.corpus for r in refs))

        seen = SeenPairs()  # de-duplication across all training corpora
        for ref in data.train:
            cleaned = {}
            counts = filter_train(iter_raw_pairs(raw_dir, ref, cleaned=cleaned), cfg,
                                  workers=workers, seen=seen, write=write)
            report["train"][ref.corpus] = {**vars(counts), "cleaned": cleaned}
            log.info("train %s: %d pairs in, %d out (removed %s)", ref.corpus, counts.lines_in,
                     counts.lines_out, counts.removed)
        if not any(c["lines_out"] for c in report["train"].values()):
            raise CorpusError("no training pairs survived the filters: check data.train and "
                              "prepare.*")
        for f in (out_en, out_fr):
            with naming(f.name):
                f.flush()
                os.fsync(f.fileno())

    totals = {split: {"lines_out": sum(c["lines_out"] for c in corpora.values())}
              for split, corpora in report.items()}
    result = {"splits": report, "totals": totals}
    PrepareMetrics.from_json(result, source=metrics_out).write(metrics_out)  # checked as read
    log.info("read %s; wrote %s and %s in %.1fs (%d process%s)", raw_dir, out_dir, metrics_out,
             time.perf_counter() - t0, workers, "" if workers == 1 else "es")
    return result
