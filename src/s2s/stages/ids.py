"""Stage `ids`: the prepared corpora as token ids, made once, for every training job and rank to
map (:mod:`s2s.data.ids`).

Reads:  ``<prepared>/{train,dev,test}.tok.{en,fr}``, ``<vocab>/{en,fr}.tsv``.
Writes: ``<out>/`` (``data/ids``): for each split and side, ``<split>.<lang>.npy`` (the ids, int32)
        and ``<split>.<lang>.offsets.npy`` (int64, one more than its sentences), and
        ``ids.json``, the record: both vocabularies' fingerprints, each split's sentences, each
        file's shape, bytes and sha256 (what a reader checks the files against).

The files are encoded in blocks of lines over `workers` processes (the threads of
``resources.ids``, else of ``resources.default``) and written as they go, the ids those of
``Vocab.encode`` in the order of the lines: the same files for any number of workers. The
folder is written under a temporary name and renamed when complete, so a killed run leaves
nothing a training job would read; a damaged or truncated file, or one of other vocabularies,
is refused by its reader in one line and rebuilt here (``dvc repro`` reruns this stage when an
output changed). An existing ``--out`` is replaced only if it holds nothing but these files (an
earlier output); a folder with anything else in it, a file, the current folder or one holding
``--prepared`` or ``--vocab`` is refused in one line before anything is read
(:func:`s2s.io.check_out_dir`).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from s2s.config import Params
from s2s.dag import Arg, Stage, command
from s2s.layout import IdsPaths, prepared_file, vocab_file

log = logging.getLogger("s2s.ids")

HELP = "the prepared corpora as token ids, made once (memory-mapped by training)"
ARGS = (Arg("--prepared", "data/prepared"), Arg("--vocab", "data/vocab"),
        Arg("--out", "data/ids", writes=True,
            help="folder of the id arrays and their record (ids.json)"))
PATHS = IdsPaths  # ARGS as one value, which cli builds and main takes


def stages(params: Params) -> list[Stage]:
    return [command("ids", "ids", ARGS)]


def cli(args, params) -> None:
    from s2s.data.stream import workers_for

    main(IdsPaths.from_args(args), workers=workers_for(params, "ids"))


def main(paths: IdsPaths, *, workers: int = 1) -> dict:
    """Encode every split's two sides into ``paths.out``; returns the record (s2s.data.ids)."""
    from s2s.io import whole_dir
    from s2s.data.ids import (FOLDER_FILES, LANGS, RECORD, SPLITS, IdsError, IdsRecord, ids_file,
                              offsets_file, write_side)
    from s2s.data.stream import ordered_map
    from s2s.data.vocab import Vocab
    from s2s.io import atomic_write_json, iter_lines

    t0 = time.perf_counter()
    prepared_dir, vocab_dir, out_dir = paths.prepared, paths.vocab, paths.out
    lines: dict[str, int] = {}
    files: dict[str, dict] = {}
    tokens = 0
    # an --out of anything but an earlier output of this stage is refused first (s2s.io)
    with whole_dir(out_dir, owns=FOLDER_FILES, inputs=(prepared_dir, vocab_dir),
                   what="the ids stage") as tmp:
        vocabs = {lang: Vocab.load(vocab_file(vocab_dir, lang)) for lang in LANGS}
        for split in SPLITS:
            counted = {}
            for lang in LANGS:
                text = prepared_file(prepared_dir, split, lang)
                chunks = ordered_map(_encode_block, iter_lines(text), workers=workers,
                                     initializer=_use_vocab,
                                     initargs=(vocab_file(vocab_dir, lang),))
                files |= write_side(tmp, split, lang, chunks)
                counted[lang] = files[offsets_file(split, lang)]["shape"][0] - 1
                tokens += files[ids_file(split, lang)]["shape"][0]
            if counted["en"] != counted["fr"]:
                en, fr = (prepared_file(prepared_dir, split, lang) for lang in LANGS)
                raise IdsError(f"{en} has {counted['en']:,} lines but {fr.name} has "
                               f"{counted['fr']:,}: run the prepare stage again")
            lines[split] = counted["en"]
        record = IdsRecord(vocab={lang: v.fingerprint for lang, v in vocabs.items()},
                           lines=lines, files=files)
        atomic_write_json(tmp / RECORD, record.to_json())
    size = sum(e["bytes"] for e in files.values())
    log.info("read %s and %s; wrote %s (%s pairs: %s; %s ids, %.1f MB) in %.1fs (%d process%s)",
             prepared_dir, vocab_dir, out_dir, "/".join(SPLITS),
             "/".join(f"{lines[s]:,}" for s in SPLITS), f"{tokens:,}", size / 1e6,
             time.perf_counter() - t0, workers, "" if workers == 1 else "es")
    return record.to_json()


_VOCAB = None  # the worker's vocabulary (_use_vocab)


def _use_vocab(path: Path) -> None:
    """A worker's set-up: the vocabulary it encodes with."""
    from s2s.data.vocab import Vocab

    global _VOCAB
    _VOCAB = Vocab.load(path)


def _encode_block(lines: list[str]):
    from s2s.data.ids import encode_lines

    assert _VOCAB is not None
    return encode_lines(lines, _VOCAB)
