"""The data path at scale (s2s.data.ids, s2s.data.stream, the streamed prepare and vocab): token
ids made once and mapped, batches made on arrays in exactly the published order, corpora read in
blocks, de-duplication by a 64-bit hash, outputs that do not depend on the workers or the chunk
size, and ids folders that are refused in one line where they are not what their record says."""

from __future__ import annotations

import errno
import io
import json
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import BIN
from helpers import FullFile, one_line_error
from s2s.data import ids as ids_lib
from s2s.data import prepare
from s2s.data.batching import collate, collate_ids, epoch_batches, eval_batches, load_parallel
from s2s.io import TMP_PREFIX
from s2s.data.ids import IdCorpus, IdsError, open_split
from s2s.data.vocab import Vocab
from s2s.io import iter_lines, read_text
from s2s.layout import IdsPaths, PreparePaths
from s2s.stages import ids as ids_stage
from s2s.stages import prepare as prepare_stage


# --- the batch order -----------------------------------------------------------------------------

def published_epoch_batches(n_pairs, lengths, *, batch_size, bucket_batches, seed, epoch):
    """s2s.data.batching.epoch_batches as the published runs computed it, on lists."""
    rng = random.Random(seed * 1_000_003 + epoch)
    order = list(range(n_pairs))
    rng.shuffle(order)
    chunk = batch_size * bucket_batches
    batches = []
    for start in range(0, n_pairs, chunk):
        part = sorted(order[start: start + chunk], key=lambda i: (lengths[i][0], lengths[i][1], i))
        batches += [part[k: k + batch_size] for k in range(0, len(part), batch_size)]
    rng.shuffle(batches)
    return batches


@pytest.mark.parametrize("case", range(40))
def test_the_batch_order_on_arrays_is_the_published_one(case):
    rs = random.Random(case)
    n = [0, 1, 7, 640, 3001][case % 5] if case < 10 else rs.randint(1, 4000)
    top = 10 ** 9 if case % 7 == 3 else rs.randint(1, 120)  # huge lengths: the four-key sort
    src = [rs.randint(0, top) for _ in range(n)]
    tgt = [rs.randint(0, top) for _ in range(n)]
    kw = dict(batch_size=rs.randint(1, 64), bucket_batches=rs.randint(1, 12),
              seed=rs.randint(0, 10 ** 6), epoch=rs.randint(0, 9))
    want = published_epoch_batches(n, list(zip(src, tgt)), **kw)
    got = epoch_batches(np.array(src, dtype=np.int64), np.array(tgt, dtype=np.int64), **kw)
    assert [b.tolist() for b in got] == want


def test_eval_batches_sort_by_lengths_then_index():
    src, tgt = np.array([3, 1, 3, 1, 2]), np.array([5, 2, 4, 2, 9])
    assert [b.tolist() for b in eval_batches(src, tgt, 2)] == [[1, 3], [4, 2], [0]]


def test_a_batch_made_from_the_arrays_is_collates():
    rs = random.Random(3)
    for _ in range(200):
        pairs = [([rs.randint(4, 50) for _ in range(rs.randint(0, 9))],
                  [rs.randint(4, 50) for _ in range(rs.randint(0, 9))])
                 for _ in range(rs.randint(1, 20))]
        corpus = IdCorpus.from_pairs(pairs)
        idx = rs.sample(range(len(pairs)), rs.randint(1, len(pairs)))
        want = collate([pairs[i] for i in idx], pad=0, bos=2, eos=3)
        got = collate_ids(corpus, np.array(idx), pad=0, bos=2, eos=3)
        for field in ("src", "src_lengths", "tgt_in", "tgt_out", "target_rows"):
            a, b = getattr(want, field), getattr(got, field)
            assert a.dtype == b.dtype and torch.equal(a, b), field
        assert got.ntokens == want.ntokens and got.src_lengths_cpu is got.src_lengths


# --- reading in blocks ---------------------------------------------------------------------------

def whole_file_lines(path, *, rstrip=True, strip_bom=False, strip_cr=False, counts=None):
    """read_lines as it read a whole file at once (the reference of the blocks)."""
    text = read_text(path)
    bom = text.startswith("\ufeff")
    if strip_bom and bom:
        text = text[1:]
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    if counts is not None:
        counts["bom_files"] = counts.get("bom_files", 0) + bom
        counts["crlf_lines"] = counts.get("crlf_lines", 0) + sum(ln.endswith("\r") for ln in lines)
    if strip_cr:
        lines = [ln[:-1] if ln.endswith("\r") else ln for ln in lines]
    if rstrip:
        lines = [ln.rstrip() for ln in lines]
    return lines


def test_lines_read_in_blocks_are_the_whole_files_lines(tmp_path):
    rs = random.Random(0)
    pieces = ["a", "b", " ", "\n", "\r\n", "\r", "é", "\u2028", "\t", "\ufeff", "x" * 7]
    path = tmp_path / "f.txt"
    for _ in range(1500):
        data = "".join(rs.choice(pieces) for _ in range(rs.randint(0, 40))).encode()
        if rs.random() < 0.2:
            data = b"\xef\xbb\xbf" + data
        if rs.random() < 0.15:  # not UTF-8: the same line and byte named
            k = rs.randint(0, len(data))
            data = data[:k] + b"\xff" + data[k:]
        path.write_bytes(data)
        for opts in ({}, {"rstrip": False, "strip_bom": True, "strip_cr": True}):
            want_counts, got_counts = {}, {}
            try:
                want = whole_file_lines(path, counts=want_counts, **opts)
            except ValueError as e:
                want = str(e)
            try:
                got = [line for block in iter_lines(path, counts=got_counts,
                                                    block_bytes=rs.choice([1, 2, 5, 64]), **opts)
                       for line in block]
            except ValueError as e:
                got = str(e)
            assert got == want, data
            if isinstance(want, list):
                assert list(got_counts.items()) == list(want_counts.items())


# --- de-duplication ------------------------------------------------------------------------------

@pytest.mark.parametrize("grow_slice", [prepare.GROW_SLICE, 3])
def test_the_hash_table_keeps_first_occurrences_as_a_set_would(grow_slice, monkeypatch):
    # 3: the doubled table takes the old one's keys three slots at a time, across many slices
    monkeypatch.setattr(prepare, "GROW_SLICE", grow_slice)
    rs = np.random.default_rng(1)
    table, seen = prepare.SeenPairs(capacity_log2=2), set()
    for _ in range(300):  # grows from 4 slots to thousands
        keys = rs.integers(0, 3000, rs.integers(1, 200)).astype(np.uint64)
        got = table.add_new(keys)
        want = []
        for k in keys.tolist():
            k = k or 1  # 0 is stored as 1 (0 marks an empty slot)
            want.append(k not in seen)
            seen.add(k)
        assert got.tolist() == want
    assert len(table) == len(seen) and len(table.table) >= 2 * len(seen)


def test_the_hash_table_costs_what_the_docs_say():
    # 8-byte slots, at most half full, doubled when more would be taken: 16 to 32 bytes a pair
    # (docs/data.md said ~16).
    seen = prepare.SeenPairs(capacity_log2=4)
    rs = np.random.default_rng(5)
    per_pair = []
    for _ in range(200):
        seen.add_new(rs.integers(1, 2 ** 63, 97, dtype=np.uint64))
        per_pair.append(seen.table.nbytes / len(seen))
    assert 16 <= min(per_pair) < 17 and 31 < max(per_pair) <= 32
    root = Path(__file__).resolve().parents[1]
    doc = " ".join((root / "docs" / "data.md").read_text().split())
    assert "8-byte slots, kept at most half full and doubled when it would be more: 16-32 bytes " \
           "a pair" in doc
    assert "16-32 bytes a pair" in " ".join(prepare.SeenPairs.__doc__.split())


# --- the streamed prepare ------------------------------------------------------------------------

def write_corpus(folder: Path, en: list[str], fr: list[str]) -> None:
    folder.mkdir(parents=True)
    (folder / "en.txt").write_text("".join(f"{s}\n" for s in en), encoding="utf-8")
    (folder / "fr.txt").write_text("".join(f"{s}\n" for s in fr), encoding="utf-8")


@pytest.fixture(scope="module")
def raw(tmp_path_factory, mirror):
    """Two training corpora from the mirror's real Multi30k lines, with duplicates within and
    across chunks and corpora, empty and long pairs, and a dev and a test set."""
    root = tmp_path_factory.mktemp("raw")
    en = (mirror / "multi30k-task1-enfr" / "train.en").read_text().splitlines()[:1500]
    fr = (mirror / "multi30k-task1-enfr" / "train.fr").read_text().splitlines()[:1500]
    rs = random.Random(4)
    a = list(zip(en[:1000], fr[:1000]))
    a += [a[rs.randrange(len(a))] for _ in range(300)] + [("", "vide"), ("x " * 90, "y")]
    rs.shuffle(a)
    b = list(zip(en[900:1500], fr[900:1500])) + a[:50]  # across corpora too
    write_corpus(root / "multi30k.train", *map(list, zip(*a)))
    write_corpus(root / "multi30k.val", *map(list, zip(*b)))
    write_corpus(root / "multi30k.test_2016_flickr", en[1400:1500], fr[1400:1500])
    write_corpus(root / "multi30k.test_2017_flickr", en[1300:1400], fr[1300:1400])
    return root


def run_prepare(raw: Path, out: Path, *, workers: int, chunk: int, monkeypatch) -> dict:
    from s2s.config import CorpusRef, DataConfig, PrepareConfig

    monkeypatch.setattr(prepare, "CHUNK_PAIRS", chunk)
    data = DataConfig(train=(CorpusRef("multi30k.train"), CorpusRef("multi30k.val", 500)),
                      dev=(CorpusRef("multi30k.test_2017_flickr"),),
                      test=CorpusRef("multi30k.test_2016_flickr"))
    return prepare_stage.main(data, PrepareConfig(max_len=50), PreparePaths(
        raw=raw, out=out / "prepared", metrics=out / "prepare.json"), workers=workers)


def test_the_streamed_prepare_does_not_depend_on_workers_or_chunks(raw, tmp_path, monkeypatch):
    one = run_prepare(raw, tmp_path / "one", workers=1, chunk=10_000, monkeypatch=monkeypatch)
    many = run_prepare(raw, tmp_path / "many", workers=2, chunk=97, monkeypatch=monkeypatch)
    assert one == many
    removed = one["splits"]["train"]["multi30k.train"]["removed"]
    assert removed["empty"] == 1 and removed["too_long"] == 1 and removed["duplicate"] >= 250
    assert one["splits"]["train"]["multi30k.val"]["lines_in"] == 500  # max_lines
    assert one["splits"]["train"]["multi30k.val"]["removed"]["duplicate"] >= 90  # across corpora
    for name in ("train.tok.en", "train.tok.fr", "dev.tok.en", "test.raw.fr"):
        a = (tmp_path / "one" / "prepared" / name).read_bytes()
        assert a == (tmp_path / "many" / "prepared" / name).read_bytes(), name
    en = (tmp_path / "one" / "prepared" / "train.tok.en").read_text().splitlines()
    fr = (tmp_path / "one" / "prepared" / "train.tok.fr").read_text().splitlines()
    assert len(set(zip(en, fr))) == len(en) == one["totals"]["train"]["lines_out"]
    assert not list(tmp_path.glob(f"*/{TMP_PREFIX}*"))  # the temporary folder was renamed


def test_a_misaligned_training_corpus_is_refused_and_nothing_is_written(raw, tmp_path):
    from s2s.config import CorpusRef, DataConfig, PrepareConfig
    from s2s.data.text import CorpusError

    bad = tmp_path / "raw"
    shutil.copytree(raw, bad)
    with open(bad / "multi30k.train" / "fr.txt", "a", encoding="utf-8") as f:
        f.write("one more\n")
    data = DataConfig(train=(CorpusRef("multi30k.train"),),
                      dev=(CorpusRef("multi30k.test_2017_flickr"),),
                      test=CorpusRef("multi30k.test_2016_flickr"))
    with pytest.raises(CorpusError, match=r"misaligned corpus 'multi30k\.train': .*en\.txt has "
                                          r"1302 lines, .*fr\.txt has 1303"):
        prepare_stage.main(data, PrepareConfig(), PreparePaths(
            raw=bad, out=tmp_path / "prepared", metrics=tmp_path / "prepare.json"), workers=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw"]  # no folder, no leftover


def fill_disk(monkeypatch, module, room: int) -> None:
    """The plain open() of `module` opens files to write on a disk with `room` bytes left."""
    FullFile.room = room

    def full_open(path, mode="r", *args, **kwargs):
        if "w" not in mode:
            return open(path, mode, *args, **kwargs)
        buffered = io.BufferedWriter(FullFile(path, "w"), buffer_size=4096)
        return buffered if "b" in mode else io.TextIOWrapper(buffered, **kwargs)

    monkeypatch.setattr(module, "open", full_open, raising=False)


@pytest.mark.parametrize("room, full", [(0, "en"), (20_000, "en"), (60_000, "fr"),
                                        (124_000, "en")])
def test_a_full_disk_while_prepare_writes_the_training_text_names_the_file(
        raw, tmp_path, monkeypatch, room, full):
    # train.tok.{en,fr} are streamed through a plain open (not s2s.io.atomic_open, in a folder
    # built whole): ENOSPC said "No space left on device" and named no file. Where fr meets the
    # full disk first (60,000), en's close then flushed its last bytes onto it and raised again.
    fill_disk(monkeypatch, prepare_stage, room)
    with pytest.raises(OSError) as err:
        run_prepare(raw, tmp_path, workers=1, chunk=10_000, monkeypatch=monkeypatch)
    assert err.value.errno == errno.ENOSPC
    assert err.value.filename is not None and str(err.value).startswith(
        "[Errno 28] No space left on device: ")
    name = Path(err.value.filename)
    assert name.name == f"train.tok.{full}"
    assert name.parent.name.startswith(f"{TMP_PREFIX}prepared-")
    assert name.parent.parent == tmp_path
    assert list(tmp_path.iterdir()) == []  # no folder, no leftover


@pytest.mark.parametrize("room, full", [(0, "train.en.npy"), (5_000, "train.en.npy"),
                                        (235_000, "train.en.offsets.npy"),
                                        (300_000, "train.fr.npy")])
def test_a_full_disk_while_the_ids_are_written_names_the_file(smoke_data, tmp_path, monkeypatch,
                                                              room, full):
    # ArrayWriter writes through a plain open too (in a folder built whole).
    data, _ = smoke_data
    fill_disk(monkeypatch, ids_lib, room)
    out = tmp_path / "ids"
    with pytest.raises(OSError) as err:
        ids_stage.main(IdsPaths(prepared=data / "prepared", vocab=data / "vocab", out=out))
    assert err.value.errno == errno.ENOSPC and err.value.filename is not None
    name = Path(err.value.filename)
    assert name.name == full
    assert name.parent.name.startswith(f"{TMP_PREFIX}ids-") and name.parent.parent == tmp_path
    assert str(name) in str(err.value)
    assert list(tmp_path.iterdir()) == []  # no folder, no leftover


# --- the ids -------------------------------------------------------------------------------------

def vocabs(data: Path) -> tuple[Vocab, Vocab]:
    return Vocab.load(data / "vocab" / "en.tsv"), Vocab.load(data / "vocab" / "fr.tsv")


def test_the_ids_are_the_vocabularys_encoding_of_every_split(smoke_data):
    data, _ = smoke_data
    src, tgt = vocabs(data)
    record = json.loads((data / "ids" / "ids.json").read_text())
    for split in ("train", "dev", "test"):
        corpus = open_split(data / "ids", split, src_vocab=src, tgt_vocab=tgt)
        want = load_parallel(data / "prepared" / f"{split}.tok", src, tgt)
        assert list(corpus) == want and len(corpus) == record["lines"][split]
        assert isinstance(corpus.src.ids, np.memmap) or len(corpus.src.ids) == 0
        assert corpus.target_tokens == sum(len(t) + 1 for _, t in want)


def test_the_ids_do_not_depend_on_the_workers(smoke_data, tmp_path):
    data, _ = smoke_data
    one = ids_stage.main(IdsPaths(
        prepared=data / "prepared", vocab=data / "vocab", out=tmp_path / "one"), workers=1)
    two = ids_stage.main(IdsPaths(
        prepared=data / "prepared", vocab=data / "vocab", out=tmp_path / "two"), workers=2)
    assert one == two == json.loads((data / "ids" / "ids.json").read_text())
    for f in (tmp_path / "one").iterdir():
        assert f.read_bytes() == (tmp_path / "two" / f.name).read_bytes(), f.name


@pytest.fixture
def ids_copy(smoke_data, tmp_path):
    data, _ = smoke_data
    shutil.copytree(data / "ids", tmp_path / "ids")
    return tmp_path / "ids", *vocabs(data)


def refused(folder: Path, src: Vocab, tgt: Vocab) -> str:
    with pytest.raises(IdsError) as e:
        open_split(folder, "train", src_vocab=src, tgt_vocab=tgt)
    said = str(e.value)
    assert "\n" not in said and said.endswith(
        f"run the ids stage again (`dvc repro ids`, or `s2s ids --out {folder}`)")
    return said


def test_a_truncated_ids_file_is_refused_naming_it(ids_copy):
    folder, src, tgt = ids_copy
    path = folder / "train.fr.npy"
    path.write_bytes(path.read_bytes()[:-4])
    assert refused(folder, src, tgt).startswith(f"{path}: {path.stat().st_size:,} bytes, the "
                                                f"record's {path.stat().st_size + 4:,}")


def test_a_damaged_ids_file_is_refused_naming_it(ids_copy):
    folder, src, tgt = ids_copy
    path = folder / "train.en.npy"
    data = bytearray(path.read_bytes())
    data[-2] ^= 0x01  # a flipped bit in an id: still within the vocabulary
    path.write_bytes(bytes(data))
    assert refused(folder, src, tgt) == (f"{path}: its sha256 is not the record's (damaged): run "
                                         f"the ids stage again (`dvc repro ids`, or `s2s ids "
                                         f"--out {folder}`)")


def test_ids_of_another_vocabulary_are_refused(ids_copy, tmp_path):
    folder, src, tgt = ids_copy
    other = tmp_path / "fr.tsv"
    other.write_text("".join(f"{w}\t0\n" for w in tgt.words) + "zyzzyva\t3\n", encoding="utf-8")
    said = refused(folder, src, Vocab.load(other))
    assert said.startswith(f"{folder / 'ids.json'}: made with the fr vocabulary "
                           f"{tgt.fingerprint[:12]}, not ")


def test_a_record_whose_line_count_disagrees_is_refused(ids_copy):
    folder, src, tgt = ids_copy
    record = json.loads((folder / "ids.json").read_text())
    record["lines"]["train"] += 1
    (folder / "ids.json").write_text(json.dumps(record))
    said = refused(folder, src, tgt)
    assert "sentences, the record's train has" in said and "train.en.offsets.npy" in said


def test_a_missing_or_unreadable_record_is_refused(ids_copy):
    folder, src, tgt = ids_copy
    (folder / "ids.json").write_text("{not json")
    assert refused(folder, src, tgt).startswith(f"{folder / 'ids.json'}: not a readable record")
    (folder / "ids.json").unlink()
    assert refused(folder, src, tgt).startswith(f"{folder / 'ids.json'}: not found")


def test_the_train_command_refuses_a_damaged_ids_folder_in_one_line(ids_copy, smoke_data,
                                                                    tmp_path):
    data, params = smoke_data
    folder, _, _ = ids_copy
    path = folder / "dev.fr.npy"
    path.write_bytes(path.read_bytes()[:-8])
    proc = subprocess.run(
        [str(BIN / "s2s"), "--params", str(params.source), "train", "forward", "--ids",
         str(folder), "--vocab", str(data / "vocab"), "--model-dir", str(tmp_path / "m"),
         "--ckpt-dir", str(tmp_path / "c"), "--metrics", str(tmp_path / "m.json"),
         "--curves", str(tmp_path / "c.csv")], capture_output=True, text=True, timeout=300)
    one_line_error(proc, str(path), "truncated or replaced", "dvc repro ids", status=1)
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("split", ["train", "dev"])
def test_an_ids_folder_with_an_empty_split_is_refused_by_the_trainer_in_one_line(
        smoke_data, tmp_path, split):
    """prepare refuses an empty training or dev set; an ids folder made by hand from one trained
    to a ZeroDivisionError (no steps in an epoch)."""
    from s2s.layout import TrainPaths
    from s2s.stages import train as train_stage

    data, params = smoke_data
    prepared = tmp_path / "prepared"
    shutil.copytree(data / "prepared", prepared)
    for lang in ("en", "fr"):
        (prepared / f"{split}.tok.{lang}").write_text("", encoding="utf-8")
    ids_stage.main(IdsPaths(prepared=prepared, vocab=data / "vocab", out=tmp_path / "ids"))
    paths = TrainPaths(ids=tmp_path / "ids", vocab=data / "vocab", model_dir=tmp_path / "model",
                       ckpt_dir=tmp_path / "ckpt", metrics=tmp_path / "metrics.json",
                       curves=tmp_path / "curves.csv")
    with pytest.raises(ValueError, match=rf"^{re.escape(str(tmp_path / 'ids'))}: its {split} "
                                         r"split holds no pairs: nothing to"):
        train_stage.main(params, "forward", paths)
    assert not (tmp_path / "model").exists() and not (tmp_path / "ckpt" / "last.pt").exists()


def test_a_killed_ids_stage_leaves_nothing_a_reader_would_take(smoke_data, tmp_path,
                                                               monkeypatch):
    data, _ = smoke_data
    out = tmp_path / "ids"
    calls = []
    real = ids_lib.write_side

    def dies_on_the_third(*args):
        calls.append(args[1:3])
        if len(calls) == 3:
            raise KeyboardInterrupt  # as a kill would stop it, between two files
        return real(*args)

    monkeypatch.setattr(ids_lib, "write_side", dies_on_the_third)
    with pytest.raises(KeyboardInterrupt):
        ids_stage.main(IdsPaths(prepared=data / "prepared", vocab=data / "vocab", out=out))
    assert not out.exists() and not list(tmp_path.iterdir())
    # a kill -9 leaves its temporary folder: the next run removes it (its owner is gone)
    from s2s.io import owner_tag

    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = tmp_path / f"{TMP_PREFIX}ids-{owner_tag(gone.pid)}-deadbeef"
    dead.mkdir()
    monkeypatch.setattr(ids_lib, "write_side", real)
    ids_stage.main(IdsPaths(prepared=data / "prepared", vocab=data / "vocab", out=out))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ids"]


def test_an_ids_file_is_a_plain_npy_array(smoke_data):
    data, _ = smoke_data
    offsets = np.load(data / "ids" / "test.fr.offsets.npy")
    ids = np.load(data / "ids" / "test.fr.npy")
    assert offsets.dtype == np.int64 and ids.dtype == np.int32
    assert offsets[0] == 0 and offsets[-1] == len(ids)


def test_the_scale_benchmark_starts_and_prints_its_table(tmp_path, mirror):
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [sys.executable, str(root / "bench" / "scale.py"), "--sizes", "2000,4000", "--work",
         str(tmp_path), "--no-train"], capture_output=True, text=True, timeout=600,
        env={**__import__("os").environ, "S2S_MIRROR": str(mirror)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line.split("|") for line in proc.stdout.splitlines() if line.startswith("| ")]
    stages_seen = {r[1].strip() for r in rows[1:]}
    assert {"prepare", "vocab", "ids"} <= stages_seen


def test_a_data_stage_uses_the_threads_its_job_asks_for(monkeypatch):
    import os

    from s2s.config import Params, StageResources
    from s2s.data.stream import workers_for

    def params(resources):
        p = Params.__new__(Params)
        object.__setattr__(p, "resources", resources)
        return p

    both = {"default": StageResources(threads=3), "prepare": StageResources(threads=16)}
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(32)))  # a cluster node
    assert workers_for(params(both), "prepare") == 16  # its own
    assert workers_for(params(both), "ids") == 3  # the default's: what Snakemake reserves
    assert workers_for(params({}), "ids") == 8  # no resources: every CPU, up to 8
    # the paper's 16 on a 2-CPU machine: 2 processes, not 16 on 2 cores
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert workers_for(params(both), "prepare") == 2
    assert workers_for(params({}), "ids") == 2
    # local Snakemake gave the job fewer threads than its rule asks (--cores 1): one process
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(32)))
    monkeypatch.setenv("S2S_JOB_THREADS", "1")
    assert workers_for(params(both), "prepare") == 1
    assert workers_for(params({}), "ids") == 1
    monkeypatch.setenv("S2S_JOB_THREADS", "12")
    assert workers_for(params(both), "prepare") == 12
    assert workers_for(params(both), "ids") == 3  # never more than the job asks for
    for bad in ("0", "two", "-1", "\u00b2"):  # a superscript two is a digit to str.isdigit
        monkeypatch.setenv("S2S_JOB_THREADS", bad)
        with pytest.raises(ValueError, match=f"S2S_JOB_THREADS must be .*got '{bad}'"):
            workers_for(params(both), "prepare")
