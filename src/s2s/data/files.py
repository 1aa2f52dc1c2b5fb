"""The files the download stage writes, and what it knows of them.

Bytes are hashed as they are copied (sha256, md5, size, LF count), copied with a progress bar,
and a corpus folder is built under a temporary ``.tmp-<id>-<owner>-*`` name (:func:`owner_tag`:
the host, PID and start time of the process building it), renamed into place only when complete;
only a folder whose owner is gone is another run's leftover (:func:`owner_alive`).
:class:`DownloadError` is what every download module raises for a corpus that cannot be fetched
or bytes that are not what the registry expects.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import socket
from pathlib import Path
from typing import BinaryIO

from tqdm import tqdm

from s2s.io import temp_dir

log = logging.getLogger("s2s.files")

CHUNK = 1 << 20  # bytes read at a time
TMP_PREFIX = ".tmp-"  # of a corpus folder being built
_TAG = r"h([0-9a-f]{8})p(\d+)s(\d+|x)"  # what owner_tag() writes
_OWNER = re.compile(rf"-{_TAG}-[0-9a-f]+$")  # in a temporary folder's name


def _host() -> str:
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def _started(pid: int) -> str | None:
    """When process `pid` started (clock ticks since boot, /proc/<pid>/stat field 22); None if
    there is no such process; 'x' where /proc does not say (not Linux)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None if Path("/proc/self/stat").exists() else "x"
    except OSError:
        return "x"
    return stat.rsplit(")", 1)[1].split()[19]


def owner_tag(pid: int | None = None) -> str:
    """Who builds a temporary folder: ``h<host hash>p<pid>s<start time>``. With the start time
    a reused PID is not mistaken for the owner."""
    pid = os.getpid() if pid is None else pid
    return f"h{_host()}p{pid}s{_started(pid) or 'x'}"


def owner_alive(name: str) -> bool | None:
    """Whether the process that made the temporary folder `name` still runs: False when it is
    gone (or `name`, of an older version, names no owner), None when it ran on another host."""
    m = _OWNER.search(name)
    return False if m is None else _alive(m[1], int(m[2]), m[3])


def tag_alive(tag: str) -> bool | None:
    """Whether the process of an :func:`owner_tag` still runs (as :func:`owner_alive`)."""
    m = re.fullmatch(_TAG, tag)
    return False if m is None else _alive(m[1], int(m[2]), m[3])


def _alive(host: str, pid: int, start: str) -> bool | None:
    if host != _host():
        return None
    now = _started(pid)
    if now is None:
        return False
    if start == "x" or now == "x":
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return now == start


class DownloadError(RuntimeError):
    """A corpus that cannot be fetched, or fetched bytes that do not match what is expected."""


def stream_stats(src: BinaryIO, out: BinaryIO | None = None) -> dict:
    """sha256, md5, bytes and lines (LF count) of `src`, read to its end; copied to `out` if
    given."""
    sha, md5 = hashlib.sha256(), hashlib.md5(usedforsecurity=False)
    size = lines = 0
    while chunk := src.read(CHUNK):
        sha.update(chunk)
        md5.update(chunk)
        size += len(chunk)
        lines += chunk.count(b"\n")
        if out is not None:
            out.write(chunk)
    return {"sha256": sha.hexdigest(), "md5": md5.hexdigest(), "bytes": size, "lines": lines}


def file_stats(path: Path) -> dict:
    """:func:`stream_stats` of the file at `path`."""
    with open(path, "rb") as f:
        return stream_stats(f)


def recorded(stats: dict) -> dict:
    """What the manifest records of a file: its sha256, bytes and lines."""
    return {k: stats[k] for k in ("sha256", "bytes", "lines")}


def copy_with_progress(src: BinaryIO, out: BinaryIO, *, total: int | None, desc: str) -> bytes:
    """Copy `src` to `out` with a progress bar; return the last byte written (b"" if none)."""
    last = b""
    with tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=desc,
              disable=None, leave=False) as bar:
        while chunk := src.read(CHUNK):
            out.write(chunk)
            last = chunk[-1:]
            bar.update(len(chunk))
    return last


class corpus_dir:
    """A temporary folder ``out_dir/.tmp-<cid>-<owner>-*``, renamed to ``out_dir/<cid>``
    (replacing it) when the block succeeds and removed when it fails: a corpus folder (a
    downloaded corpus, the prepared corpora, the ids) is always complete."""

    def __init__(self, out_dir: Path, cid: str):
        self.final = Path(out_dir) / cid
        self.final.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = temp_dir(Path(out_dir), f"{TMP_PREFIX}{cid}-{owner_tag()}-")

    def __enter__(self) -> Path:
        return self.tmp

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            return
        if self.final.exists():
            remove(self.final)
        os.replace(self.tmp, self.final)


def whole_dir(path: Path) -> corpus_dir:
    """Folder `path` written whole (a :class:`corpus_dir` in its parent), once the temporaries of
    it that a run now gone left are removed (:func:`remove_leftovers`): what a stage writing one
    folder (the prepared corpora, the vocabularies, the ids, an export) holds while it writes."""
    path = Path(path)
    remove_leftovers(path.parent, f"{TMP_PREFIX}{path.name}-")
    return corpus_dir(path.parent, path.name)


def remove_leftovers(out_dir: Path, prefix: str = TMP_PREFIX) -> None:
    """Remove the temporary folders ``prefix*`` of `out_dir` whose owner is gone; a live
    process's (or one of another host, whose life cannot be seen from here) is never touched: it
    is still being written."""
    for tmp in sorted(Path(out_dir).glob(f"{prefix}*")):
        alive = owner_alive(tmp.name)
        if alive is False:
            log.info("removing %s, left by a run that is gone", tmp)
            remove(tmp)
        else:
            log.warning("%s belongs to %s: left alone", tmp, "a running process" if alive
                        else "a process of another host")


def remove(path: Path) -> None:
    """Remove a file, a link or a folder tree."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
