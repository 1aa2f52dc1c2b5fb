"""The files the download stage writes, and what it knows of them.

Bytes are hashed as they are copied (sha256, md5, size, LF count) and copied with a progress bar;
a corpus folder is built whole (:class:`s2s.io.corpus_dir`). :class:`DownloadError` is what every
download module raises for a corpus that cannot be fetched or bytes that are not what the
registry expects.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import BinaryIO

from tqdm import tqdm

CHUNK = 1 << 20  # bytes read at a time


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
