"""Faults and bad input, injected into the real stages (the smoke profile's data, a 1x16 model).

What the pipeline promises, and what is tested here:
- ``kill -9`` of training (under ``dvc repro``), of a download and of decoding: the rerun ends
  bit-identical to an undisturbed run, DVC never records a killed stage as done, and no file under
  a final name is half-written;
- a full disk: a clear error naming the file, and the old file (or none) under the final name;
- damaged checkpoints, checkpoints of another config or vocabulary, pickled objects: refused with
  the file and the mismatch named, never a silently wrong translation;
- empty files, NUL bytes, a 100,000-word line, Windows line ends, a BOM, a bad n-best list, a
  hypothesis file of the wrong length or encoding, bad params: a one-line error naming the file
  (and line, or key) from the CLI, never a bare traceback, or handling counted in the metrics;
- same params and seeds on CPU: bit-identical checkpoints, hypotheses and BLEU.

Covered elsewhere and not repeated: resume after ``stop_after``, NaN loss, checkpoints of other
params (test_train); misaligned corpora, invalid UTF-8 corpora, SGML without </seg>, params errors
at the config level (test_data); unsafe archives, cut HTTP downloads (test_download); truncated
checkpoints and a vocabulary mismatch at the function level (test_model); line-count mismatch at
the function level (test_bleu).
"""

from __future__ import annotations

import copy
import dataclasses
import errno
import hashlib
import io
import json
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import psutil
import pytest
import torch
import yaml

from conftest import BIN, MIRROR, RangeServer, make_project, run, run_data_stages
from helpers import FullFile, start, tiny_params_dict, write_params
from s2s import checkpoint, config
from s2s.config import CorpusRef, DataConfig, PrepareConfig
from s2s.data import download
from s2s.data.sources import CORPORA, NetworkSource, Remote
from s2s.data.vocab import Vocab
from s2s.layout import EvaluatePaths, PreparePaths, TrainPaths, TranslatePaths
from s2s.stages import download as download_stage
from s2s.stages import evaluate as evaluate_stage
from s2s.stages import prepare as prepare_stage
from s2s.stages import train as train_stage
from s2s.stages import translate as translate_stage
from s2s.io import atomic_open, atomic_write_lines
from s2s.model.seq2seq import RNNConfig, Seq2Seq

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable


# ---------------------------------------------------------------------------------------------
# A tiny configuration of the smoke profile, its data stages once, one model trained on them


def baseline_nbest_file(params: config.Params) -> str:
    """The n-best file of rescore.baseline's system that rescoring reads: its widest beam's."""
    return f"beam{max(params.systems[params.rescore.baseline].beams)}.nbest"


@dataclasses.dataclass
class Work:
    tmp: Path
    params: config.Params
    params_path: Path

    @property
    def prepared(self) -> Path:
        return self.tmp / "prepared"

    @property
    def vocab(self) -> Path:
        return self.tmp / "vocab"

    @property
    def ids(self) -> Path:
        return self.tmp / "ids"

    def train(self, run_dir: Path, name: str = "forward") -> Path:
        """train@name in-process, laid out as dvc.yaml lays it out under `run_dir`."""
        train_stage.main(self.params, name, TrainPaths(
            ids=self.ids, vocab=self.vocab, model_dir=run_dir / "models" / name,
            ckpt_dir=run_dir / "checkpoints" / name,
            metrics=run_dir / "metrics" / "train" / f"{name}.json",
            curves=run_dir / "metrics" / "curves" / f"{name}.csv"))
        return run_dir

    def translate(self, models: Path, out: Path, system: str = "forward") -> Path:
        translate_stage.main(self.params, system, TranslatePaths(
            prepared=self.prepared, vocab=self.vocab, models=models, out=out))
        return out

    def s2s(self, *args: str, params: Path | None = None, check: bool = False,
            cwd: Path | None = None) -> subprocess.CompletedProcess:
        return run([str(BIN / "s2s"), "--params", str(params or self.params_path), *args],
                   cwd or self.tmp, check=check, timeout=300)


@pytest.fixture(scope="module")
def work(tmp_path_factory, mirror):
    """The smoke profile's data stages, run once, and run `a`: the tiny forward model."""
    tmp = tmp_path_factory.mktemp("faults")
    params_path = write_params(tmp / "params.yaml", tiny_params_dict())
    params = config.load(params_path)
    run_data_stages(params, tmp, mirror)
    threads = torch.get_num_threads()
    w = Work(tmp, params, params_path)
    w.train(tmp / "a")
    yield w
    torch.set_num_threads(threads)  # train.threads / translate.threads set it for the process


@pytest.fixture(scope="module")
def decoded(work) -> Path:
    """The undisturbed decoding of run `a`'s model (system forward, beams 1 and 12)."""
    return work.translate(work.tmp / "a" / "models", work.tmp / "a" / "translate" / "forward")


def tensor_bits(path: Path) -> dict[str, bytes]:
    """Every tensor of a checkpoint as raw bytes (bit-identity, not float equality)."""
    state = torch.load(path, map_location="cpu", weights_only=True)["model"]
    return {k: v.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
            for k, v in state.items()}


def visible_files(folder: Path) -> dict[str, bytes]:
    """Files under their final names (temporary files of atomic writes start with a dot)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not any(part.startswith(".")
                                       for part in p.relative_to(folder).parts)}


def without_timing(files: dict[str, bytes]) -> dict[str, bytes]:
    return {k: v for k, v in files.items() if k != "timing.json"}


# ---------------------------------------------------------------------------------------------
# Killing real processes


def kill_9(proc: subprocess.Popen) -> None:
    """SIGKILL the process we started and every descendant of it (a machine dying)."""
    try:
        children = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        children = []
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for child in children:
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass
    proc.wait(timeout=60)


def kill_when(proc: subprocess.Popen, ready, log: Path, *, timeout: float = 240,
              jitter: float = 0.0) -> None:
    """Poll `ready()`; once true, wait up to `jitter` seconds, then kill -9 the process group."""
    deadline = time.monotonic() + timeout
    try:
        while not ready():
            if proc.poll() is not None:
                raise AssertionError(f"the process ended ({proc.returncode}) before the fault "
                                     f"was injected:\n{log.read_text(errors='replace')[-3000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting to inject the fault:\n"
                                     f"{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.002)
        if jitter:
            time.sleep(random.uniform(0, jitter))
    finally:
        kill_9(proc)
    assert proc.returncode == -signal.SIGKILL, log.read_text(errors="replace")[-3000:]


def assert_clean_cli_error(proc: subprocess.CompletedProcess, *needles: str) -> str:
    """Exit status 1, no traceback, and an error line that names every needle."""
    err = proc.stderr
    assert proc.returncode == 1, f"exit {proc.returncode}\n{proc.stdout}\n{err}"
    assert "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert " ERROR " in last, err
    for needle in needles:
        assert needle in last, f"{needle!r} not in the error line:\n{err}"
    return last


# ---------------------------------------------------------------------------------------------
# kill -9: training under DVC, downloading, decoding


def test_kill_9_of_training_under_dvc_is_not_recorded_and_repro_resumes_to_the_same_weights(
        work, tmp_path):
    proj = make_project(tmp_path / "proj")
    shutil.copy(work.params_path, proj / "params.yaml")
    shutil.copytree(work.prepared, proj / "data" / "prepared")
    shutil.copytree(work.vocab, proj / "data" / "vocab")
    shutil.copytree(work.ids, proj / "data" / "ids")
    run([str(BIN / "dvc"), "repro", "-s", "check-params"], proj)  # train's first dependency
    last = proj / "checkpoints" / "forward" / "last.pt"
    versions: set[tuple] = set()
    k = random.randint(2, 4)  # killed just after the k-th checkpoint, somewhere in a step

    def k_checkpoints() -> bool:
        try:
            st = last.stat()
            versions.add((st.st_ino, st.st_mtime_ns, st.st_size))
        except FileNotFoundError:
            pass
        return len(versions) >= k

    log = tmp_path / "killed.log"
    proc = start([str(BIN / "dvc"), "repro", "-s", "train-forward"], proj, log)
    kill_when(proc, k_checkpoints, log, jitter=0.05)
    assert not psutil.pid_exists(proc.pid)

    step = checkpoint.load_payload(last)["step"]
    assert 4 * k <= step < 48 and step % 4 == 0, (k, step)
    assert not (proj / "models" / "forward" / "model.pt").exists()
    lock = proj / "dvc.lock"
    assert not lock.exists() or "train-forward" not in (yaml.safe_load(lock.read_text()) or {}) \
        .get("stages", {})
    status = run([str(BIN / "dvc"), "status", "train-forward"], proj)
    assert "train-forward" in status.stdout  # changed: DVC will rerun it
    # What a kill during torch.save leaves in the persistent checkpoint folder.
    stale = last.with_name(".last.pt.k9dead.tmp")
    stale.write_bytes(b"\0" * 4096)

    rerun = run([str(BIN / "dvc"), "repro", "-s", "train-forward"], proj)
    out = rerun.stdout + rerun.stderr
    assert f"resuming from checkpoints/forward/last.pt at step {step} of 48" in out, out[-3000:]
    assert not stale.exists()
    assert "train-forward" in yaml.safe_load(lock.read_text())["stages"]
    a = work.tmp / "a"
    assert tensor_bits(proj / "models" / "forward" / "model.pt") == \
        tensor_bits(a / "models" / "forward" / "model.pt")
    assert (proj / "metrics" / "curves" / "forward.csv").read_bytes() == \
        (a / "metrics" / "curves" / "forward.csv").read_bytes()
    assert not [p for p in proj.rglob("*.tmp") if ".dvc" not in p.parts]


def dev_tgz() -> bytes:
    """WMT's dev.tgz layout holding the mirror's newstest2012, and 1.5 MB of other members: more
    than one read of the downloader (1 MiB), so that a kill leaves a partial download."""
    buf = io.BytesIO()
    other = random.Random(0).randbytes(1_500_000)
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in (("en", None), ("fr", None), ("other", other)):
            if data is None:
                data = (MIRROR / "wmt-newstest2012-2013-fren" / f"newstest2012.{name}").read_bytes()
            info = tarfile.TarInfo(f"dev/newstest2012.{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


# The registry entry of wmt.newstest2012 pointed at the loopback server; the same in the killed
# child process (DOWNLOAD_CHILD) and in this one (local_newstest2012).
DOWNLOAD_CHILD = """
import dataclasses, sys
from pathlib import Path
from s2s.config import CorpusRef, DataConfig
from s2s.data import download
from s2s.data.sources import CORPORA, NetworkSource, Remote
from s2s.stages import download as download_stage
url, md5, out, cache = sys.argv[1:5]
entry, remote = CORPORA["wmt.newstest2012"], Remote(url, md5=md5)
swap = lambda parts: tuple(dataclasses.replace(p, remote=remote) for p in parts)
CORPORA[entry.id] = dataclasses.replace(
    entry, network=NetworkSource(en=swap(entry.network.en), fr=swap(entry.network.fr)))
download.network_available = lambda urls, timeout=3.0: True
download_stage.main(DataConfig(train=(), dev=(), test=CorpusRef("wmt.newstest2012")),
              out_dir=Path(out), mirror=None, cache_dir=Path(cache))
"""


def local_newstest2012(monkeypatch, url: str, md5: str) -> DataConfig:
    entry, remote = CORPORA["wmt.newstest2012"], Remote(url, md5=md5)
    swap = lambda parts: tuple(dataclasses.replace(p, remote=remote) for p in parts)  # noqa: E731
    monkeypatch.setitem(CORPORA, entry.id, dataclasses.replace(
        entry, network=NetworkSource(en=swap(entry.network.en), fr=swap(entry.network.fr))))
    monkeypatch.setattr(download, "network_available", lambda urls, timeout=3.0: True)
    return DataConfig(train=(), dev=(), test=CorpusRef("wmt.newstest2012"))


def test_kill_9_during_a_download_then_the_rerun_resumes_and_is_byte_identical(
        mirror, tmp_path, monkeypatch):
    body = dev_tgz()
    md5 = hashlib.md5(body).hexdigest()
    with RangeServer() as server:
        server.files["/dev.tgz"] = body
        data = local_newstest2012(monkeypatch, server.url("/dev.tgz"), md5)
        download_stage.main(data, out_dir=tmp_path / "ref", mirror=None, cache_dir=tmp_path / "refcache")

        server.delay = 0.01  # ~1.6 MB/s: the download takes about a second
        server.requests.clear()
        out, cache = tmp_path / "raw", tmp_path / "cache"
        log = tmp_path / "download.log"
        proc = start([PY, "-c", DOWNLOAD_CHILD, server.url("/dev.tgz"), md5, str(out), str(cache)],
                     tmp_path, log)
        parts = lambda: list(cache.glob("*.part")) if cache.is_dir() else []  # noqa: E731
        kill_when(proc, lambda: any(p.stat().st_size > 0 for p in parts()), log, jitter=0.2)
        (part,) = parts()
        got = part.stat().st_size
        assert 0 < got < len(body)
        # Nothing under a final name: no archive, no corpus folder, no manifest.
        assert [p.name for p in cache.iterdir()] == [part.name]
        assert not (out / "manifest.json").exists() and not (out / "wmt.newstest2012").exists()

        server.delay = 0.0
        download_stage.main(data, out_dir=out, mirror=None, cache_dir=cache)
        assert server.requests[-1][1] == f"bytes={got}-"  # resumed, not restarted
    assert visible_files(out) == visible_files(tmp_path / "ref")
    assert not list(cache.glob("*.part")) and not list(out.glob(".tmp-*"))


def test_kill_9_during_decoding_leaves_no_partial_output_and_the_rerun_is_byte_identical(
        work, decoded, tmp_path):
    out = tmp_path / "translate"
    log = tmp_path / "translate.log"
    proc = start([str(BIN / "s2s"), "--params", str(work.params_path), "translate", "forward",
                  "--prepared", str(work.prepared), "--vocab", str(work.vocab),
                  "--models", str(work.tmp / "a" / "models"), "--out", str(out)], tmp_path, log)
    # beam 1 is written; beam 12 (the larger part of the work) is under way.
    kill_when(proc, lambda: (out / "beam1.nbest").exists(), log)
    ref = visible_files(decoded)
    left = visible_files(out)
    assert "timing.json" not in left  # written last: the stage is visibly incomplete
    assert {"beam1.tok.fr", "beam1.detok.fr", "beam1.nbest"} <= set(left)
    for name, data in left.items():  # whatever has a final name is complete
        assert data == ref[name], name

    work.translate(work.tmp / "a" / "models", out)
    assert without_timing(visible_files(out)) == without_timing(ref)
    timing = json.loads((out / "timing.json").read_text())
    assert set(timing["beams"]) == {"1", "12"}


# ---------------------------------------------------------------------------------------------
# A full disk


def fill_disk(monkeypatch, room: int) -> None:
    """Every file opened with os.fdopen for writing (the atomic writers) hits a full disk."""
    real = os.fdopen
    FullFile.room = room

    def fdopen(fd, mode="r", *args, **kwargs):
        if "w" not in mode:
            return real(fd, mode, *args, **kwargs)
        buffered = io.BufferedWriter(FullFile(fd, "w"))
        return buffered if "b" in mode else io.TextIOWrapper(buffered, **kwargs)

    monkeypatch.setattr(os, "fdopen", fdopen)


def test_a_full_disk_names_the_file_and_keeps_the_old_one(tmp_path, monkeypatch):
    path = tmp_path / "out" / "beam12.tok.fr"
    atomic_write_lines(path, ["old", "content"])
    fill_disk(monkeypatch, room=10_000)
    with pytest.raises(OSError) as err:
        atomic_write_lines(path, [f"sentence {i} " * 10 for i in range(1000)])
    assert err.value.errno == errno.ENOSPC and str(path) in str(err.value)
    assert path.read_text() == "old\ncontent\n"
    assert sorted(p.name for p in path.parent.iterdir()) == ["beam12.tok.fr"]


def test_an_error_of_another_file_in_the_writers_block_is_not_given_its_name(tmp_path):
    """atomic_open names its file in an error that names none, but in the caller's block (where
    the lines written may be read from another file) only what a write alone raises is its: an
    EIO there may be the source's, and is left unnamed rather than blamed on the destination."""
    path = tmp_path / "out" / "ids.txt"
    with pytest.raises(OSError) as err:
        with atomic_open(path) as f:
            f.write("half\n")
            raise OSError(errno.EIO, os.strerror(errno.EIO))  # a read of the source failing
    assert err.value.errno == errno.EIO and err.value.filename is None
    assert list(path.parent.iterdir()) == []
    for code in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):  # a write's, however it comes
        with pytest.raises(OSError) as err:
            with atomic_open(path) as f:
                raise OSError(code, os.strerror(code))
        assert err.value.errno == code and err.value.filename == str(path)
    assert list(path.parent.iterdir()) == []


def test_a_full_disk_while_saving_a_checkpoint_leaves_no_file(tmp_path, monkeypatch):
    v = Vocab(("<pad>", "<unk>", "<bos>", "<eos>", "a"), fingerprint="f" * 64)
    model = Seq2Seq(RNNConfig(num_layers=1, hidden_size=64, embed_size=64),
                    src_vocab=5, tgt_vocab=5, pad=0)
    fill_disk(monkeypatch, room=50_000)
    path = tmp_path / "ckpt" / "last.pt"
    with pytest.raises(OSError, match=re.escape(str(path))) as err:
        checkpoint.save(path, model, src_vocab=v, tgt_vocab=v, step=1)
    assert err.value.errno == errno.ENOSPC
    assert list(path.parent.iterdir()) == []


def test_a_full_disk_during_a_mirror_copy_leaves_no_corpus_and_no_manifest(
        mirror, tmp_path, monkeypatch):
    fill_disk(monkeypatch, room=100_000)
    out = tmp_path / "raw"
    with pytest.raises(OSError) as err:
        download_stage.main(DataConfig(train=(), dev=(), test=CorpusRef("wmt.newstest2013")),
                      out_dir=out, mirror=mirror)
    assert err.value.errno == errno.ENOSPC and "wmt.newstest2013" in str(err.value)
    assert list(out.iterdir()) == []


FULL_DISK_CHILD = """
import errno, io, os, sys
real = os.fdopen
class Full(io.FileIO):
    def write(self, b):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
def fdopen(fd, mode="r", *args, **kwargs):
    if "w" not in mode:
        return real(fd, mode, *args, **kwargs)
    buffered = io.BufferedWriter(Full(fd, "w"))
    return buffered if "b" in mode else io.TextIOWrapper(buffered, **kwargs)
os.fdopen = fdopen
from s2s.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_full_disk_through_the_cli_is_one_line_naming_the_file(work, tmp_path):
    out = tmp_path / "vocab"
    proc = run([PY, "-c", FULL_DISK_CHILD, "--params", str(work.params_path), "vocab",
                "--prepared", str(work.prepared), "--out", str(out),
                "--metrics", str(tmp_path / "vocab.json")], tmp_path, check=False)
    # the vocabularies are written into a temporary folder renamed into place when both are whole
    line = assert_clean_cli_error(proc, "No space left on device", str(tmp_path / ".tmp-vocab-"))
    assert re.search(r"/\.tmp-vocab-[^/']+/en\.tsv'", line), line
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no vocab, no temporary, no metrics


# ---------------------------------------------------------------------------------------------
# Checkpoints: damaged, of another config or vocabulary, or not weights at all


def flip_a_weight_byte(src: Path, dst: Path) -> None:
    """Flip one byte in the middle of the largest tensor: the zip still reads, silently."""
    data = bytearray(src.read_bytes())
    with zipfile.ZipFile(src) as zf:
        info = max((i for i in zf.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
    at = info.header_offset  # the local header: 30 bytes, then the name and the extra field
    name_len, extra_len = struct.unpack("<HH", data[at + 26:at + 30])
    start = at + 30 + name_len + extra_len
    data[start + info.file_size // 2] ^= 0xFF
    dst.write_bytes(bytes(data))


def flip_a_config_byte(src: Path, dst: Path) -> None:
    """Flip one bit of the pickled config: reverse_source False -> True (NEWFALSE -> NEWTRUE).
    It still unpickles, as the reversed model's config."""
    data = bytearray(src.read_bytes())
    at = data.index(b"reverse_sourceq") + len(b"reverse_sourceq") + 1  # after BINPUT's argument
    assert data[at] == 0x89, data[at - 20:at + 4]
    data[at] ^= 0x01
    dst.write_bytes(bytes(data))
    assert torch.load(dst, weights_only=True)["config"]["reverse_source"] is True


def resaved(edit):
    """A checkpoint edited and saved again with a digest of its own: consistent, but of
    another model than the one params name."""
    def damage(src: Path, dst: Path) -> None:
        payload = torch.load(src, weights_only=True)
        edit(payload)
        payload["digest"] = checkpoint.payload_digest(payload)
        torch.save(payload, dst)
    damage.__name__ = edit.__name__
    return damage


def other_width(payload):
    payload["config"]["hidden_size"] = 24  # the weights are 16 wide


def newer_field(payload):
    payload["config"]["coverage"] = True  # a field this version does not know


def another_name(payload):
    payload["name"] = "baseline"  # the same config and weights, trained as another model


def edited_config(src: Path, dst: Path) -> None:
    payload = torch.load(src, weights_only=True)
    payload["config"]["init_seed"] += 1  # edited without a new digest
    torch.save(payload, dst)


def zero_bytes(src: Path, dst: Path) -> None:
    dst.write_bytes(b"")


def format_1(src: Path, dst: Path) -> None:
    """The same checkpoint as an older version wrote it: weights_sha256, no name, no digest."""
    payload = torch.load(src, weights_only=True)
    del payload["digest"], payload["name"]
    payload.update(format="s2s-checkpoint/1",
                   weights_sha256=checkpoint.weights_digest(payload["model"]))
    torch.save(payload, dst)


def format_1_of_another_model(src: Path, dst: Path) -> None:
    format_1(src, dst)
    payload = torch.load(dst, weights_only=True)
    payload["config"]["reverse_source"] = True  # format 1 has no digest over its config
    torch.save(payload, dst)


@pytest.fixture(scope="module")
def other_member(work) -> Path:
    """models/reversed_1/model.pt of the tiny params: another member's final checkpoint."""
    return work.train(work.tmp / "r1", "reversed_1") / "models" / "reversed_1" / "model.pt"


@pytest.mark.parametrize("damage, says", [
    (flip_a_weight_byte, "contents do not match their recorded digest"),
    (flip_a_config_byte, "contents do not match their recorded digest"),
    (edited_config, "contents do not match their recorded digest"),
    (resaved(other_width), "'hidden_size' is 24 in the checkpoint but 16 in params "
                           "'models.forward'"),
    (resaved(newer_field), "the checkpoint's config has 'coverage', which params "
                           "'models.forward' do not have"),
    (resaved(another_name), "the checkpoint of model 'baseline', not of 'forward'"),
    (zero_bytes, "not a readable checkpoint (an empty file, 0 bytes)"),
    (format_1_of_another_model, "'reverse_source' is True in the checkpoint but False in params "
                                "'models.forward'"),
    ("swap", "'reverse_source' is True in the checkpoint but False in params 'models.forward'"),
    ("symlink", "'reverse_source' is True in the checkpoint but False in params "
                "'models.forward'"),
    (None, "trained with another src vocabulary"),
], ids=lambda v: getattr(v, "__name__", v) if not isinstance(v, str) or len(v) < 12 else "")
def test_translate_refuses_a_checkpoint_that_is_not_the_model_params_name(
        work, other_member, tmp_path, damage, says):
    good = work.tmp / "a" / "models" / "forward" / "model.pt"
    models, vocab_dir = tmp_path / "models", work.vocab
    (models / "forward").mkdir(parents=True)
    bad = models / "forward" / "model.pt"
    if damage is None:  # the right checkpoint, another vocabulary (one word more)
        shutil.copy(good, bad)
        vocab_dir = tmp_path / "vocab"
        shutil.copytree(work.vocab, vocab_dir)
        with open(vocab_dir / "en.tsv", "a", encoding="utf-8") as f:
            f.write("zyzzyva\t3\n")
    elif damage == "swap":  # another member's model.pt under this member's name
        shutil.copy(other_member, bad)
    elif damage == "symlink":
        bad.symlink_to(other_member)
    else:
        damage(good, bad)
    out = tmp_path / "out"
    proc = work.s2s("translate", "forward", "--prepared", str(work.prepared), "--vocab",
                    str(vocab_dir), "--models", str(models), "--out", str(out))
    assert_clean_cli_error(proc, str(bad), says)
    assert [ln for ln in proc.stderr.splitlines() if " ERROR " in ln][1:] == [], proc.stderr
    assert not out.exists()


def test_a_format_1_checkpoint_still_decodes_the_same(work, decoded, tmp_path):
    models = tmp_path / "models"
    (models / "forward").mkdir(parents=True)
    format_1(work.tmp / "a" / "models" / "forward" / "model.pt", models / "forward" / "model.pt")
    out = work.translate(models, tmp_path / "out")
    assert without_timing(visible_files(out)) == without_timing(visible_files(decoded))


def test_every_reader_checks_the_checkpoint_against_params(work, other_member, tmp_path):
    """rescore, analyze and attention load through the same check as translate."""
    models = tmp_path / "models"
    for name in ("forward", "reversed_1", "attention"):
        (models / name).mkdir(parents=True)
    shutil.copy(other_member, models / "forward" / "model.pt")  # swapped
    shutil.copy(work.tmp / "a" / "models" / "forward" / "model.pt",
                models / "reversed_1" / "model.pt")
    shutil.copy(other_member, models / "attention" / "model.pt")
    bad = models / "forward" / "model.pt"
    common = ["--prepared", str(work.prepared), "--vocab", str(work.vocab), "--models", str(models)]
    proc = work.s2s("analyze", *common, "--out", str(tmp_path / "analysis"))
    assert_clean_cli_error(proc, str(bad), "'reverse_source' is True in the checkpoint")
    nbest = tmp_path / "translate" / "baseline"
    nbest.mkdir(parents=True)
    atomic_write_lines(nbest / baseline_nbest_file(work.params),
                       [f"{i} ||| le chat ||| lstm=-1.0 ||| -1.0" for i in range(60)])
    proc = work.s2s("rescore", "forward", "--translate", str(tmp_path / "translate"), "--raw",
                    str(work.tmp / "raw"), *common, "--out", str(tmp_path / "rescore"))
    assert_clean_cli_error(proc, str(bad), "'reverse_source' is True in the checkpoint")
    (tmp_path / "translate" / "attention").mkdir()
    atomic_write_lines(tmp_path / "translate" / "attention" / "beam12.tok.fr", ["le chat"] * 60)
    proc = work.s2s("attention", *common, "--translate", str(tmp_path / "translate"), "--out",
                    str(tmp_path / "weights.json"))
    assert_clean_cli_error(proc, str(models / "attention" / "model.pt"),
                           "'arch' is 'seq2seq' in the checkpoint but 'attention' in params "
                           "'models.attention'")


def test_an_empty_resume_point_is_recomputed_with_one_line(work, tmp_path):
    ckpt = tmp_path / "checkpoints" / "forward"
    ckpt.mkdir(parents=True)
    (ckpt / "last.pt").write_bytes(b"")
    out = tmp_path / "m"
    proc = work.s2s("train", "forward", "--ids", str(work.ids), "--vocab",
                    str(work.vocab), "--model-dir", str(out / "forward"), "--ckpt-dir", str(ckpt),
                    "--metrics", str(out / "m.json"), "--curves", str(out / "c.csv"))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{ckpt / 'last.pt'}: not a readable checkpoint (an empty file, 0 bytes); starting " \
           f"afresh" in proc.stderr
    assert tensor_bits(out / "forward" / "model.pt") == \
        tensor_bits(work.tmp / "a" / "models" / "forward" / "model.pt")


class _Payload:
    """Unpickling this would create a file: what an untrusted .pt could do."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_checkpoints_load_with_weights_only_and_refuse_pickled_objects(tmp_path):
    marker = tmp_path / "code-ran"
    path = tmp_path / "model.pt"
    torch.save({"format": checkpoint.FORMAT, "model": {}, "hook": _Payload(marker)}, path)
    with pytest.raises(checkpoint.CheckpointError, match=r"model\.pt: not an s2s checkpoint: it "
                                                         r"holds objects other than tensors"):
        checkpoint.load_payload(path)
    assert not marker.exists()


def test_a_checkpoint_config_of_another_version_is_refused_naming_the_key(work, tmp_path):
    # digest intact (what a later or earlier version wrote), config not this version's: the one
    # decoder names the key instead of a TypeError from the config's constructor
    from s2s.data.vocab import Vocab

    vocabs = {s: Vocab.load(work.vocab / f"{s}.tsv") for s in ("en", "fr")}
    payload = checkpoint.load_payload(work.tmp / "a" / "models" / "forward" / "model.pt")
    for edit, says in ((lambda c: c.update(hidden_size=str(c["hidden_size"])),
                        "'config.hidden_size' must be an integer, got str"),
                       (lambda c: c.update(layer_norm=True), "unknown key 'config.layer_norm'"),
                       (lambda c: c.update(arch="mamba"), "'config.arch' is 'mamba', not an "
                                                          "architecture of this version")):
        changed = {**payload, "config": dict(payload["config"])}
        edit(changed["config"])
        changed["digest"] = checkpoint.payload_digest(changed)
        path = tmp_path / "model.pt"
        torch.save(changed, path)
        with pytest.raises(checkpoint.CheckpointError) as e:
            checkpoint.load_model(path, src_vocab=vocabs["en"], tgt_vocab=vocabs["fr"])
        assert str(e.value).startswith(f"{path}: ") and says in str(e.value), str(e.value)


# ---------------------------------------------------------------------------------------------
# Bad input files


SMALL_DATA = {"train": [{"corpus": "wmt14.giga_fren", "max_lines": 40}],
              "dev": [{"corpus": "wmt.newstest2013", "max_lines": 20}],
              "test": {"corpus": "wmt14.newstest2014", "max_lines": 10}, "nbest": None}


@pytest.fixture
def small(work, tmp_path) -> tuple[Path, Path, DataConfig]:
    """A raw folder with 40 training, 20 dev and 10 test pairs, and params naming exactly them."""
    raw = tmp_path / "raw"
    for cid, lines in (("wmt14.giga_fren", 40), ("wmt.newstest2013", 20),
                       ("wmt14.newstest2014", None)):
        (raw / cid).mkdir(parents=True)
        for f in (work.tmp / "raw" / cid).iterdir():
            data = f.read_bytes()
            if lines is not None:
                data = b"".join(data.splitlines(keepends=True)[:lines])
            (raw / cid / f.name).write_bytes(data)
    params = write_params(tmp_path / "params.yaml", {**tiny_params_dict(), "data": SMALL_DATA})
    return raw, params, config.load(params).data


def prepare_small(raw: Path, data: DataConfig, out: Path) -> dict:
    return prepare_stage.main(data, PrepareConfig(max_len=40), PreparePaths(
        raw=raw, out=out, metrics=out / "prepare.json"))


@pytest.mark.parametrize("cid, name", [("wmt14.giga_fren", "fr.txt"),
                                       ("wmt14.newstest2014", "en.sgm")])
def test_an_empty_corpus_file_is_refused_naming_it(work, small, tmp_path, cid, name):
    raw, params, data = small
    (raw / cid / name).write_bytes(b"")
    out = tmp_path / "prepared"
    proc = work.s2s("prepare", "--raw", str(raw), "--out", str(out), "--metrics",
                    str(tmp_path / "prepare.json"), params=params)
    assert_clean_cli_error(proc, f"{raw / cid / name}: empty file")
    assert not (tmp_path / "prepare.json").exists()


def test_windows_line_ends_a_bom_and_nul_bytes_are_cleaned_and_counted(small, tmp_path):
    raw, _, data = small
    clean = prepare_small(raw, data, tmp_path / "clean")
    en = raw / "wmt14.giga_fren" / "en.txt"
    lines = en.read_bytes().split(b"\n")[:-1]
    lines[2] = lines[2][:5] + b"\x00" + lines[2][5:]
    en.write_bytes(b"\xef\xbb\xbf" + b"".join(ln + b"\r\n" for ln in lines))
    sgm = raw / "wmt14.newstest2014" / "fr.sgm"
    sgm.write_bytes(b"\xef\xbb\xbf" + sgm.read_bytes().replace(b"\n", b"\r\n"))
    dirty = prepare_small(raw, data, tmp_path / "dirty")
    # The same prepared text, byte for byte ...
    assert visible_files(tmp_path / "dirty").keys() == visible_files(tmp_path / "clean").keys()
    for name, content in visible_files(tmp_path / "clean").items():
        if name != "prepare.json":
            assert visible_files(tmp_path / "dirty")[name] == content, name
    # ... and what reading cleaned is counted in the metrics.
    assert clean["splits"]["train"]["wmt14.giga_fren"]["cleaned"] == \
        {"bom_files": 0, "crlf_lines": 0, "control_char_lines": 0, "cr_inside_lines": 0}
    assert dirty["splits"]["train"]["wmt14.giga_fren"]["cleaned"] == \
        {"bom_files": 1, "crlf_lines": 40, "control_char_lines": 1, "cr_inside_lines": 0}
    test = dirty["splits"]["test"]["wmt14.newstest2014"]["cleaned"]
    assert test["bom_files"] == 1 and test["crlf_lines"] == sgm.read_bytes().count(b"\r\n")


def test_a_100000_word_line_is_filtered_in_training_and_refused_in_test(work, small, tmp_path):
    raw, params, data = small
    clean = prepare_small(raw, dataclasses.replace(data, train=(CorpusRef("wmt14.giga_fren"),)),
                          tmp_path / "clean")
    huge = " ".join(["word"] * 100_000)
    with open(raw / "wmt14.giga_fren" / "en.txt", "a", encoding="utf-8") as f:
        f.write(huge + "\n")
    with open(raw / "wmt14.giga_fren" / "fr.txt", "a", encoding="utf-8") as f:
        f.write("mot\n")
    m = prepare_small(raw, dataclasses.replace(data, train=(CorpusRef("wmt14.giga_fren"),)),
                      tmp_path / "long")
    a, b = clean["splits"]["train"]["wmt14.giga_fren"], m["splits"]["train"]["wmt14.giga_fren"]
    assert b["lines_in"] == a["lines_in"] + 1 and b["lines_out"] == a["lines_out"]
    assert b["removed"] == {**a["removed"], "too_long": a["removed"]["too_long"] + 1}
    assert (tmp_path / "long" / "train.tok.en").read_bytes() == \
        (tmp_path / "clean" / "train.tok.en").read_bytes()

    # In dev and test every line is kept, so a line no sentence could be is refused.
    dev = raw / "wmt.newstest2013"
    lines = (dev / "en.txt").read_text(encoding="utf-8").split("\n")
    lines[6] = huge
    (dev / "en.txt").write_text("\n".join(lines), encoding="utf-8")
    proc = work.s2s("prepare", "--raw", str(raw), "--out", str(tmp_path / "p"), "--metrics",
                    str(tmp_path / "prepare.json"), params=params)
    assert_clean_cli_error(proc, f"{dev / 'en.txt'}:7", "100,000 words")
    assert not (tmp_path / "prepare.json").exists()


def test_an_nbest_list_with_a_wrong_field_count_names_file_and_line(work, tmp_path):
    n = len((work.prepared / "test.tok.en").read_text().splitlines())
    lines = [f"{i} ||| le chat ||| lstm=-1.5 ||| -1.5" for i in range(n)]
    lines[6] = "6 ||| le chat ||| -1.5"
    nbest = tmp_path / "translate" / "baseline" / baseline_nbest_file(work.params)
    atomic_write_lines(nbest, lines)
    out = tmp_path / "rescore"
    proc = work.s2s("rescore", "oracle", "--translate", str(tmp_path / "translate"), "--raw",
                    str(work.tmp / "raw"), "--prepared", str(work.prepared), "--vocab",
                    str(work.vocab), "--models", str(tmp_path / "models"), "--out", str(out))
    assert_clean_cli_error(proc, f"{nbest}:7", "(4 fields), got 3")
    assert not out.exists()
    # An external list (the paper's LIUM 1000-best) in another encoding: the file and line.
    from s2s.decode.rescore import read_nbest

    lines[6] = "6 ||| le ch\xe2t ||| lstm=-1.5 ||| -1.5"
    nbest.write_bytes("\n".join(lines).encode("utf-8").replace("\xe2".encode(), b"\xe2"))
    with pytest.raises(ValueError, match=re.escape(f"{nbest}:7: not valid UTF-8")):
        read_nbest(nbest, sentences=n)
    # a score that is not a number to compare (a NaN loses, an inf wins, every comparison)
    for score in ("nan", "inf", "-inf"):
        lines[6] = f"6 ||| le chat ||| lstm=-1.5 ||| {score}"
        atomic_write_lines(nbest, lines)
        with pytest.raises(ValueError, match=re.escape(
                f"{nbest}:7: the score must be a finite number, got '{score}'")):
            read_nbest(nbest, sentences=n)
    # references one line short of the sources: the oracle names both files, writes nothing
    lines[6] = "6 ||| le chat ||| lstm=-1.5 ||| -1.5"
    atomic_write_lines(nbest, lines)
    prepared = tmp_path / "prepared"
    shutil.copytree(work.prepared, prepared)
    refs = prepared / "test.tok.fr"
    atomic_write_lines(refs, refs.read_text(encoding="utf-8").splitlines()[:-1])
    proc = work.s2s("rescore", "oracle", "--translate", str(tmp_path / "translate"), "--raw",
                    str(work.tmp / "raw"), "--prepared", str(prepared), "--vocab",
                    str(work.vocab), "--models", str(tmp_path / "models"), "--out", str(out))
    assert_clean_cli_error(proc, f"{refs} has {n - 1} lines but {prepared / 'test.tok.en'} has "
                                 f"{n}: the oracle needs one reference per sentence")
    assert not out.exists()


@pytest.mark.parametrize("fault, says", [
    ("short", "has 59 lines but"),
    ("bad_utf8", ":3: not valid UTF-8"),
])
def test_evaluate_refuses_a_bad_hypothesis_file_from_the_cli(work, decoded, tmp_path, fault,
                                                             says):
    hyps = tmp_path / "translate" / "forward"
    shutil.copytree(decoded, hyps)
    tok = hyps / "beam1.tok.fr"
    data = tok.read_bytes()
    if fault == "short":
        data = b"".join(data.splitlines(keepends=True)[:-1])
    else:
        lines = data.splitlines(keepends=True)
        lines[2] = b"\xff" + lines[2]
        data = b"".join(lines)
    tok.write_bytes(data)
    metrics = tmp_path / "bleu.json"
    proc = work.s2s("evaluate", "--translate", str(tmp_path / "translate"), "--rescore",
                    str(tmp_path / "rescore"), "--prepared", str(work.prepared), "--vocab",
                    str(work.vocab), "--metrics", str(metrics), "--groups",
                    str(tmp_path / "groups.csv"))
    assert_clean_cli_error(proc, str(tok), says)
    assert not metrics.exists() and not (tmp_path / "groups.csv").exists()


# ---------------------------------------------------------------------------------------------
# Bad params through the CLI: refused before any work, naming the key and the file


def _edit(path: list, value):
    def apply(raw: dict) -> dict:
        raw = copy.deepcopy(raw)
        node = raw
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        return raw
    return apply


TRAIN = ["train", "forward"]
CHECK = ["check"]  # the check stage: what needs more than the file (paper.yaml, the stages)


@pytest.mark.parametrize("edit, command, says", [
    (_edit(["train", "momentum"], 0.9), TRAIN, "unknown key 'train.momentum'"),
    (_edit(["train", "epochs"], "half"), TRAIN, "'train.epochs' must be a number, got str"),
    (_edit(["train", "batch_size"], -32), TRAIN, "'train.batch_size' must be >= 1, got -32"),
    (_edit(["models", "forward", "hidden_size"], -16), TRAIN,
     "'models.forward.hidden_size' must be >= 1, got -16"),
    (_edit(["systems", "forward", "beams"], [0, 12]), ["translate", "forward"],
     "'systems.forward.beams[0]' must be >= 1, got 0"),
    (_edit(["systems", "ensemble2", "members"], ["reversed_1", "reversed_9"]),
     ["translate", "ensemble2"], "'systems.ensemble2.members[1]' names model 'reversed_9'"),
    (None, ["train", "reversed_9"], "no model 'reversed_9' under 'models'"),
    (_edit(["models", "attention", "arch"], "rnn"), TRAIN,
     "'models.attention.arch' must be one of ['seq2seq', 'cho', 'attention', 'transformer'], "
     "got str 'rnn'"),
    # the attention entry names `cell` and `attention`, which the Transformer's config lacks
    (_edit(["models", "attention", "arch"], "transformer"), TRAIN,
     "unknown key 'models.attention.cell' for arch 'transformer'"),
    (_edit(["models", "forward", "train"], {"optimizer": "lbfgs"}), TRAIN,
     "'models.forward.train.optimizer' must be one of ['sgd', 'adam'], got str 'lbfgs'"),
    (_edit(["models", "gru", "cell"], "peephole"), TRAIN,
     "'models.gru.cell' is 'peephole', which only the 'seq2seq' arch has"),
    # a shared setting of `model` that one model cannot take: named where it is written
    (lambda raw: _edit(["model", "cell"], "peephole")(
        _edit(["models", "gru"], {k: v for k, v in raw["models"]["gru"].items()
                                  if k != "cell"})(raw)), TRAIN,
     "'model.cell' is 'peephole', which only the 'seq2seq' arch has (model 'gru' is arch 'cho'): "
     "use 'lstm' or 'gru', or give models.gru a cell of its own"),
    (_edit(["model", "forget_bias"], 1.0), TRAIN,
     "'models.baseline': forget_bias 1.0 is for LSTM cells; cell 'cho_gru' has no forget gate "
     "(model.forget_bias, not set in 'models.baseline')"),
    (_edit(["analysis", "models"], ["forward", "reversed_9"]), TRAIN,
     "'analysis.models[1]' names model 'reversed_9'"),
    (_edit(["analysis", "attention_system"], "forward"), TRAIN,
     "'analysis.attention_system' names system 'forward', whose model 'forward' (seq2seq) "
     "cannot do this: it needs attention weights over the source"),
    (_edit(["analysis", "attention_system"], "ensemble2"), TRAIN,
     "'analysis.attention_system' must name a system of one model; 'ensemble2' has members"),
    # the architecture contract (s2s.arch.CAPABILITIES): a Transformer has no final encoder state
    (_edit(["analysis", "models"], ["forward", "transformer"]), TRAIN,
     "'analysis.models[1]' names model 'transformer' (transformer), which cannot do this: it "
     "needs a final encoder state to draw (Figure 2) and a source embedding to take gradients "
     "of (gradient reach, its snapshots) (architectures that can: seq2seq, cho, attention)"),
    (_edit(["analysis", "memory_models"], ["attention"]), TRAIN,
     "'analysis.memory_models[0]' names model 'attention' (attention), which cannot do this: "
     "it needs a one-directional recurrent encoder"),
    (_edit(["analysis", "memory_models"], ["reversed_9"]), TRAIN,
     "'analysis.memory_models[0]' names model 'reversed_9', which is not under 'models'"),
    # an empty memory_models traces analysis.models, each of which must then have the memory
    (lambda raw: _edit(["analysis", "memory_models"], [])(
        _edit(["analysis", "models"], ["forward", "reversed_1", "attention"])(raw)), TRAIN,
     "'analysis.models[2]' names model 'attention' (attention), which cannot do this: it needs "
     "a one-directional recurrent encoder"),
    (_edit(["analysis", "max_position"], 2), TRAIN,
     "'analysis.max_position' must be >= 3, got 2"),
    # no analyze stage without analysis.models: the memory analysis had nothing to run in, and
    # the stage failed on "No objects to concatenate"
    (_edit(["analysis", "models"], []), TRAIN,
     "'analysis.memory_models' names models, but 'analysis.models' is empty, and without it the "
     "analyze stage does not run"),
    # the gradient reach's seed replicas: models of params, new, replicas, and paired
    (_edit(["analysis", "reach_replicas"], ["reversed_9"]), TRAIN,
     "'analysis.reach_replicas[0]' names model 'reversed_9', which is not under 'models'"),
    (_edit(["analysis", "reach_replicas"], ["forward_2", "reversed_2", "reversed_1"]), TRAIN,
     "'analysis.reach_replicas[2]' names model 'reversed_1', which is already measured"),
    (_edit(["analysis", "reach_replicas"], ["transformer"]), TRAIN,
     "'analysis.reach_replicas[0]' names model 'transformer' (transformer), which cannot do "
     "this"),
    # the report's answers to the paper's rows: an output the pipeline makes, a row of the paper
    (_edit(["report", "table1", "forward_beam12"], {"system": "forwardd", "beam": 12}), CHECK,
     "'report.table1.forward_beam12.system' names system 'forwardd', which is not under "
     "'systems'"),
    (_edit(["report", "table1", "forward_beam12"], {"system": "forward", "beam": 7}), CHECK,
     "'report.table1.forward_beam12.beam' (7) is not a beam of system 'forward' (its beams: "
     "1, 12)"),
    (_edit(["report", "table2", "forward"], {"rescore": "fwd"}), CHECK,
     "'report.table2.forward.rescore' names rescorer 'fwd', which is neither under "
     "'rescore.rescorers' (known: "),
    (_edit(["report", "table1", "no_such_row"], {"system": "forward", "beam": 12}), CHECK,
     "'report.table1.no_such_row' is not a row of the paper's table1 in paper.yaml (rows: "),
    # a Transformer's positions: a training pair of prepare.max_len tokens, after its <bos>
    (_edit(["models", "transformer", "max_positions"], 40), TRAIN,
     "'models.transformer.max_positions' is 40, fewer than the 41 positions model "
     "'transformer' needs for a training pair's target of prepare.max_len (40) tokens, read "
     "after its <bos>"),
    (_edit(["model", "max_positions"], 40), TRAIN,
     "'model.max_positions' is 40, fewer than the 41 positions model 'transformer' needs"),
    # the recipe's ranges: each of Adam's betas in [0, 1), label smoothing below 1
    (_edit(["train", "adam_betas"], [0.9, 1.0]), TRAIN,
     "'train.adam_betas[1]' must be < 1.0, got 1.0"),
    (_edit(["models", "transformer", "train"], {"adam_betas": [-0.1, 0.98]}), TRAIN,
     "'models.transformer.train.adam_betas[0]' must be >= 0.0, got -0.1"),
    (_edit(["train", "label_smoothing"], 1.0), TRAIN,
     "'train.label_smoothing' must be < 1.0, got 1.0"),
    # Table 2 rescores the baseline system's n-best lists: one hypothesis is none to choose from
    (_edit(["systems", "baseline", "nbest"], 1), CHECK,
     "'systems.baseline.nbest' is 1, but 'rescore.baseline' names this system, whose n-best "
     "lists Table 2 rescores: it must be more than 1"),
    # resources are asked by stage kind: one the pipeline has not is no job's
    (_edit(["resources", "trian"], {"threads": 1}), CHECK,
     "'resources.trian' is not a stage kind of the pipeline (known: check, download, prepare"),
    (lambda raw: _edit(["resources", "attention"], {"threads": 1})(
        _edit(["analysis", "cross_attention_system"], None)(
            _edit(["analysis", "attention_system"], None)(raw))), CHECK,
     "'resources.attention' is a stage kind this profile does not run (no "
     "'analysis.attention_system')"),
    # sizes past a 32-bit integer: an OverflowError (a traceback) in a later stage
    (_edit(["train", "batch_size"], 99999999999999999999999999999), TRAIN,
     "'train.batch_size' must be <= 2147483647, got 99999999999999999999999999999"),
    (_edit(["systems", "forward", "beams"], [1, 2**40]), TRAIN,
     "'systems.forward.beams[1]' must be <= 2147483647, got 1099511627776"),
    (_edit(["models", "forward", "hidden_size"], 2**63), TRAIN,
     "'models.forward.hidden_size' must be <= 2147483647"),
    # a list of distinct things, each given twice
    (_edit(["systems", "forward", "beams"], [12, 12]), TRAIN,
     "'systems.forward.beams[1]' names beam 12 a second time: each beam is decoded once"),
    (_edit(["report", "figure3_compare"], ["attention", "attention"]), TRAIN,
     "'report.figure3_compare[1]' names system 'attention' a second time"),
])
def test_bad_params_are_refused_by_the_cli_before_any_work(work, tmp_path, edit, command, says):
    params = write_params(tmp_path / "params.yaml",
                          edit(tiny_params_dict()) if edit else tiny_params_dict())
    out = tmp_path / "out"
    if command == CHECK:
        paths = ["--out", str(out / "params.json")]
    else:
        paths = (["--ids" if command[0] == "train" else "--prepared",
                  str(work.ids if command[0] == "train" else work.prepared), "--vocab",
                  str(work.vocab)]
                 + (["--model-dir", str(out / "m"), "--ckpt-dir", str(out / "c"), "--metrics",
                     str(out / "m.json"), "--curves", str(out / "c.csv")]
                    if command[0] == "train"
                    else ["--models", str(out / "models"), "--out", str(out / "t")]))
    t0 = time.monotonic()
    proc = work.s2s(*command, *paths, params=params)
    assert_clean_cli_error(proc, str(params), says)
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not out.exists()
    assert time.monotonic() - t0 < 60


def test_a_stage_dvc_runs_refuses_a_params_file_named_by_the_environment(work, tmp_path):
    """S2S_PARAMS (the Snakemake workflow's, for its jobs) names a stage's parameter file; under
    `dvc repro` (DVC_STAGE set), where DVC hashes params.yaml, one naming another file is
    refused; where no DVC runs the stage, it is read, and said."""
    (tmp_path / "params.yaml").write_text(work.params_path.read_text())
    other = tmp_path / "other.yaml"
    other.write_text(work.params_path.read_text())
    out = tmp_path / "p.json"

    def check(**env):
        return run([str(BIN / "s2s"), "check", "--out", str(out)], tmp_path, check=False,
                   env=env)

    proc = check(S2S_PARAMS=str(other), DVC_STAGE="check-params")
    assert_clean_cli_error(proc, f"$S2S_PARAMS names {other}, but DVC runs this stage and "
                                 f"tracks params.yaml")
    assert not out.exists()
    proc = check(S2S_PARAMS=str(other))  # a Snakemake job's
    assert proc.returncode == 0, proc.stderr
    assert f"parameter file {other} (from $S2S_PARAMS)" in proc.stderr and out.exists()


def test_a_missing_or_broken_params_file_or_profile_is_refused_from_the_cli(work, tmp_path):
    train_args = ("train", "forward", "--ids", "p", "--vocab", "v", "--model-dir", "m",
                  "--ckpt-dir", "c", "--metrics", "x.json", "--curves", "c.csv")
    missing = tmp_path / "nope.yaml"
    proc = work.s2s(*train_args, params=missing)
    assert_clean_cli_error(proc, str(missing), "parameter file not found")
    proc = work.s2s(*train_args, params=tmp_path)
    assert_clean_cli_error(proc, f"{tmp_path}: a folder, not a parameter file")
    tabs = tmp_path / "tabs.yaml"
    tabs.write_text("profile: smoke\ntrain:\n\tlr: 0.7\n")
    proc = work.s2s(*train_args, params=tabs)
    assert_clean_cli_error(proc, f"{tabs}:3:1: not valid YAML", "'\\t'")
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    params = tmp_path / "params.yaml"
    proc = work.s2s("profile", "wmt15", params=params, cwd=ROOT)
    assert_clean_cli_error(proc, "no profile 'wmt15'", "available: ")
    assert not params.exists() and not (tmp_path / "m").exists()


# ---------------------------------------------------------------------------------------------
# Determinism


def test_same_params_and_seeds_give_bit_identical_checkpoints_hypotheses_and_bleu(
        work, decoded, tmp_path):
    a, b = work.tmp / "a", work.train(tmp_path / "b")
    for rel in ("models/forward/model.pt", "models/forward/best.pt", "checkpoints/forward/last.pt"):
        assert tensor_bits(a / rel) == tensor_bits(b / rel), rel
    for rel in ("metrics/curves/forward.csv",):
        assert (a / rel).read_bytes() == (b / rel).read_bytes()
    ma, mb = (json.loads((d / "metrics/train/forward.json").read_text()) for d in (a, b))
    timing = ("wall_seconds", "train_seconds", "tgt_words_per_sec")
    assert {k: v for k, v in ma.items() if k not in timing} == \
        {k: v for k, v in mb.items() if k not in timing}

    other = work.translate(b / "models", tmp_path / "b" / "translate" / "forward")
    assert without_timing(visible_files(other)) == without_timing(visible_files(decoded))
    bleu = {}
    for name, translated in (("a", decoded.parent), ("b", other.parent)):
        evaluate_stage.main(work.params, EvaluatePaths(
            translate=translated, rescore=tmp_path / "none", prepared=work.prepared,
            vocab=work.vocab, metrics=tmp_path / name / "bleu.json",
            groups=tmp_path / name / "figure3.csv"))
        scores = json.loads((tmp_path / name / "bleu.json").read_text())["translate"]["forward"]
        bleu[name] = scores, (tmp_path / name / "figure3.csv").read_bytes()
    assert bleu["a"] == bleu["b"]  # other systems are absent, with their own paths as reason
    assert bleu["a"][0]["12"]["sentences"] == 60 and "bleu_tok" in bleu["a"][0]["12"]


# ---------------------------------------------------------------------------------------------
# A translate run killed by hand over an earlier run's outputs


def test_translate_removes_only_its_own_earlier_files(work, decoded, tmp_path):
    """A folder another system's complete run holds (its timing.json says so) is refused before
    anything is decoded or removed; in a folder whose files no timing.json claims, a run removes
    the beam files it writes again and leaves the others (and a file of the user's) alone."""
    from s2s.artifacts import Timing

    shared = tmp_path / "shared"
    shutil.copytree(decoded, shared)
    timing = Timing.read(shared / "timing.json")
    other = dataclasses.replace(timing, system="reversed")
    other.write(shared / "timing.json")
    before = visible_files(shared)
    with pytest.raises(ValueError, match=r"timing.json is system 'reversed''s, not 'forward''s: "
                                         r"give --out the system's own folder \(nothing removed"):
        work.translate(work.tmp / "a" / "models", shared)
    assert visible_files(shared) == before

    loose = tmp_path / "loose"
    loose.mkdir()
    for name in ("beam5.tok.fr", "beam12.tok.fr", "notes.txt"):
        (loose / name).write_text("kept?\n", encoding="utf-8")
    work.translate(work.tmp / "a" / "models", loose)
    assert (loose / "beam5.tok.fr").read_text() == "kept?\n"  # no beam of this system
    assert (loose / "notes.txt").read_text() == "kept?\n"
    assert (loose / "beam12.tok.fr").read_text() == (decoded / "beam12.tok.fr").read_text()


def test_a_killed_translate_over_an_earlier_run_leaves_only_its_own_files_and_evaluate_warns(
        work, decoded, tmp_path, monkeypatch, caplog):
    """The folder holds an earlier run's complete outputs (another model's hypotheses, a beam no
    longer decoded, timing.json); a run killed after beam 1 leaves its own beam 1 and nothing of
    the earlier run, above all no timing.json (the mark of a complete run) and no beam 12 of the
    old model beside the new beam 1. Evaluate scores beam 1 as beam 1 of the new model, reports
    beam 12 absent, and warns in one line that the folder has no timing.json."""
    import logging

    from s2s.decode import translate as decoding

    out = tmp_path / "translate" / "forward"
    shutil.copytree(decoded, out)
    n = len((decoded / "beam1.tok.fr").read_text(encoding="utf-8").splitlines())
    for name in ("beam1.tok.fr", "beam1.detok.fr", "beam12.tok.fr", "beam12.detok.fr",
                 "beam5.tok.fr", "beam5.detok.fr"):
        atomic_write_lines(out / name, ["une traduction du modèle ancien"] * n)
    for name in ("beam1.nbest", "beam12.nbest"):
        atomic_write_lines(out / name, [f"{i} ||| ancien ||| lstm=-1.0 ||| -1.0"
                                        for i in range(n)])
    assert (out / "timing.json").is_file()

    real, calls = decoding.translate, {"n": 0}

    def killed_at_beam_12(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt("killed while decoding beam 12")
        return real(*args, **kwargs)

    monkeypatch.setattr(decoding, "translate", killed_at_beam_12)
    with pytest.raises(KeyboardInterrupt):
        work.translate(work.tmp / "a" / "models", out)
    monkeypatch.undo()
    want = {k: v for k, v in visible_files(decoded).items() if k.startswith("beam1.")}
    assert visible_files(out) == want

    with caplog.at_level(logging.WARNING, logger="s2s.evaluate.stage"):
        evaluate_stage.main(work.params, EvaluatePaths(
            translate=out.parent, rescore=tmp_path / "none", prepared=work.prepared,
            vocab=work.vocab, metrics=tmp_path / "bleu.json", groups=tmp_path / "figure3.csv"))
    said = [r.getMessage() for r in caplog.records if "timing.json" in r.getMessage()]
    assert len(said) == 1 and f"{out}: no timing.json: its translate run did not finish" in said[0]
    scores = json.loads((tmp_path / "bleu.json").read_text())["translate"]["forward"]
    assert scores["12"]["absent"] is True and scores["1"]["sentences"] == n
