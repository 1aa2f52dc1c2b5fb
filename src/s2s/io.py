"""Atomic file writes: a temporary file in the same directory, fsync, then rename.

A crash, a kill or a full disk never leaves a half-written file under its final name: the old file
(or none) stays there. A failed write (a full disk: ENOSPC) is re-raised naming the final path, and
its temporary file is removed. Only a kill -9 can leave a temporary ``.<name>.*.tmp`` behind;
:func:`remove_temporaries` clears those where a stage keeps a folder across runs.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Iterator

_UMASK = os.umask(0)
os.umask(_UMASK)


def temp_dir(parent: Path, prefix: str) -> Path:
    """A new directory in `parent` with the mode a plain mkdir gives (mkdtemp makes 0700: an
    output renamed from it would be private whatever the user's umask)."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    os.chmod(tmp, 0o777 & ~_UMASK)
    return tmp


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
    except BaseException as e:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(e, OSError) and e.errno is not None and e.filename is None:
            # ENOSPC and friends say nothing of the file: name the one that could not be written.
            raise OSError(e.errno, e.strerror or str(e), str(path)) from e
        raise


def remove_temporaries(folder: Path) -> list[Path]:
    """Remove the temporary files atomic_open leaves when its process is killed mid-write."""
    removed = []
    for tmp in Path(folder).glob(".*.tmp"):
        if tmp.is_file():
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


def atomic_write_text(path: Path, text: str) -> None:
    with atomic_open(path) as f:
        f.write(text)


def atomic_write_lines(path: Path, lines: Iterable[str]) -> None:
    with atomic_open(path) as f:
        for line in lines:
            f.write(line)
            f.write("\n")


def atomic_write_json(path: Path, obj: Any) -> None:
    with atomic_open(path) as f:
        json.dump(obj, f, indent=2, sort_keys=False, ensure_ascii=False)
        f.write("\n")


class _Remembering:
    """A binary file that remembers the OSError its write raised: torch.save replaces a full
    disk's ENOSPC with a RuntimeError of its own ("unexpected pos ...") that names nothing."""

    def __init__(self, f: IO[bytes]):
        self.f, self.error = f, None

    def write(self, data) -> int:
        try:
            return self.f.write(data)
        except OSError as e:
            self.error = e
            raise

    def flush(self) -> None:
        self.f.flush()


def atomic_write_with(path: Path, write: Callable[[IO[bytes]], None]) -> None:
    """For writers that take a binary file object (torch.save)."""
    with atomic_open(path, "wb") as f:
        out = _Remembering(f)
        try:
            write(out)  # type: ignore[arg-type]
        except Exception:
            if out.error is not None:
                raise out.error from None
            raise


def read_text(path: Path, error: type[Exception] = ValueError) -> str:
    """A UTF-8 file's text; a file that is not UTF-8 raises `error` naming the file and line."""
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise error(f"{path}:{line}: not valid UTF-8 ({e.reason} at byte {e.start})") from None


def read_lines(path: Path) -> list[str]:
    """A text file written by this pipeline (or an external n-best list): UTF-8, one item per
    line. A file that is not UTF-8 is a ValueError naming the file and line."""
    return [ln.rstrip("\n") for ln in io.StringIO(read_text(path), newline="\n")]
