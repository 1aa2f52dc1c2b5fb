"""Atomic file writes: a temporary file in the same directory, fsync, then rename.

A crash, a kill or a full disk never leaves a half-written file under its final name.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Iterator

_UMASK = os.umask(0)
os.umask(_UMASK)


@contextmanager
def atomic_open(path: Path, mode: str = "w") -> Iterator[IO[Any]]:
    """Open a temporary sibling of `path`; on success it replaces `path`, on error it is removed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; give the file the usual mode
        kwargs = {} if "b" in mode else {"encoding": "utf-8", "newline": "\n"}
        with os.fdopen(fd, mode, **kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_lines(path: Path, lines: Iterable[str]) -> None:
    with atomic_open(path) as f:
        for line in lines:
            f.write(line)
            f.write("\n")


def atomic_write_json(path: Path, obj: Any) -> None:
    with atomic_open(path) as f:
        json.dump(obj, f, indent=2, sort_keys=False, ensure_ascii=False)
        f.write("\n")


def atomic_write_with(path: Path, write: Callable[[IO[bytes]], None]) -> None:
    """For writers that take a binary file object (torch.save)."""
    with atomic_open(path, "wb") as f:
        write(f)


def read_lines(path: Path) -> list[str]:
    """A text file written by this pipeline: UTF-8, one item per line."""
    with open(path, encoding="utf-8", newline="\n") as f:
        return [ln.rstrip("\n") for ln in f]
