"""Atomic file writes, and reading text files.

Writes go to a temporary file in the same directory, are fsynced, then renamed: a crash, a kill or
a full disk never leaves a half-written file under its final name: the old file (or none) stays
there. A failed write (a full disk: ENOSPC) is re-raised naming the final path, and its temporary
file is removed. Only a kill -9 can leave a temporary ``.<name>.<owner>-*.tmp`` behind (its
owner: :func:`owner_tag`); :func:`remove_temporaries` clears those where a stage keeps a folder
across runs, :func:`remove_dead_temporaries` those of one file whose owner is gone
(:func:`remove_dead_temporaries_in`: of every file of a folder one stage writes alone).

Temporary files and folders are created with the modes a plain ``open`` / ``mkdir`` asks for
(0666 / 0777), so the kernel applies the process's umask when they are made: an output renamed
from one has the mode any other file would have. Nothing here reads or sets the umask.

A folder is written whole the same way (:func:`whole_dir`): under a temporary
``.tmp-<name>-<owner>-*`` name (:func:`owner_tag`: the host, PID and start time of the process
writing it), renamed into place only when complete (an old folder under the final name is first
renamed aside, under such a name too, and deleted after: :func:`replace_dir`); only a temporary
folder whose owner is gone is another run's leftover (:func:`owner_alive`,
:func:`remove_leftovers`). A stage's ``--out`` folder is replaced only when it holds nothing but
what that stage writes (:func:`check_out_dir`): a folder of the user's, the current one, or one
holding the stage's own inputs is refused in one line before anything is done.

Reading: :func:`read_lines` is the one way a text file becomes lines, for every caller.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import glob
import hashlib
import json
import logging
import os
import re
import secrets
import shutil
import socket
from collections.abc import Callable, Collection, Iterable
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Iterator

log = logging.getLogger("s2s.io")

_ATTEMPTS = 100  # names tried before giving up (tempfile's TMP_MAX)
_CREATE = (os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
           | getattr(os, "O_CLOEXEC", 0))


def temp_dir(parent: Path, prefix: str) -> Path:
    """A new directory ``parent/<prefix><random>`` with the mode a plain mkdir gives (0777 less
    the umask; tempfile.mkdtemp makes 0700, and an output renamed from it would be private)."""
    for _ in range(_ATTEMPTS):
        path = Path(parent) / f"{prefix}{secrets.token_hex(4)}"
        try:
            os.mkdir(path, 0o777)
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"no free temporary directory name {prefix}* in {parent}")


def _temp_file(path: Path) -> tuple[int, str]:
    """A new file ``.<name>.<owner>-<random>.tmp`` next to `path` (its owner: :func:`owner_tag`,
    so that a run can tell another's live temporary from a dead one's), opened for writing, with
    the mode a plain open gives (0666 less the umask; tempfile.mkstemp makes 0600)."""
    owner = owner_tag()
    for _ in range(_ATTEMPTS):
        tmp = str(path.with_name(f".{path.name}.{owner}-{secrets.token_hex(4)}.tmp"))
        try:
            return os.open(tmp, _CREATE, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary file name .{path.name}.*.tmp in {path.parent}")


@contextmanager
def naming(path: Path, errnos: frozenset[int] | None = None) -> Iterator[None]:
    """Make an OSError that names no file (a full disk's ENOSPC, EIO) raised inside name `path`,
    the file being written: one line that says which file could not be written. Wrap only the
    writes to `path` (an error of another file must not be given its name), or name only
    `errnos`, those no read raises, where the block does more than write."""
    try:
        yield
    except OSError as e:
        if (e.errno is not None and e.filename is None
                and (errnos is None or e.errno in errnos)):
            raise OSError(e.errno, e.strerror or str(e), str(path)) from e
        raise


# What only a write raises: a full disk, a full quota, a file grown past its limit. In the
# caller's block of atomic_open these alone are the file's; an EIO there may be a read's.
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


@contextmanager
def atomic_open(path: Path, mode: str = "w") -> Iterator[IO[Any]]:
    """Open a temporary sibling of `path`; on success it replaces `path`, on error it is removed."""
    path = Path(path)
    if path.is_dir():  # else the rename fails, naming the temporary beside it
        raise IsADirectoryError(errno.EISDIR, "a folder, where a file is to be written", str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _temp_file(path)
    try:
        kwargs = {} if "b" in mode else {"encoding": "utf-8", "newline": "\n"}
        # ENOSPC and friends say nothing of the file: name it. The caller's block may read other
        # files as it writes this one: there only what a write alone raises is named.
        with naming(path, WRITE_ERRNOS), os.fdopen(fd, mode, **kwargs) as f:
            yield f
            with naming(path):
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)  # its errors name both files
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def remove_temporaries(folder: Path) -> list[Path]:
    """Remove the temporary files atomic_open leaves when its process is killed mid-write."""
    removed = []
    for tmp in Path(folder).glob(".*.tmp"):
        if tmp.is_file():
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


def remove_dead_temporaries(path: Path) -> list[Path]:
    """Remove the temporary files of `path` (``.<name>.*.tmp`` beside it) that a process now gone
    left (a kill -9 mid-write); a live process's, or one of another host, is left alone. What a
    stage calls for each file it writes beside others' (a metrics file, a manifest)."""
    path = Path(path)
    removed = []
    for tmp in sorted(path.parent.glob(f".{glob.escape(path.name)}.*.tmp")):
        m = _FILE_OWNER.search(tmp.name)
        if tmp.is_file() and not tmp.is_symlink() and (
                m is None or _alive(m[1], int(m[2]), m[3]) is False):
            log.info("removing %s, left by a run that is gone", tmp)
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


def remove_dead_temporaries_in(folder: Path) -> list[Path]:
    """:func:`remove_dead_temporaries` of every file of `folder` with a temporary there (its
    final file present or not): for a folder that one stage writes alone."""
    finals = set()
    for tmp in Path(folder).glob(".*.tmp"):
        m = _FILE_OWNER.search(tmp.name)
        if m is not None and m.start() > 1:
            finals.add(tmp.name[1:m.start()])
    return [t for final in sorted(finals) for t in remove_dead_temporaries(Path(folder) / final)]


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


def read_lines(path: Path, *, rstrip: bool = True, strip_bom: bool = False,
               strip_cr: bool = False, error: type[Exception] = ValueError,
               counts: dict[str, int] | None = None) -> list[str]:
    """The lines of a UTF-8 text file, for every reader in the pipeline.

    Lines end at LF only: never at U+2028, U+0085 or the other breaks ``str.splitlines`` knows,
    which occur inside news sentences and would shift every line after them. The LF is removed;
    a last line without one is still a line, and an empty file has no lines.

    - ``rstrip`` (default): trailing whitespace is removed as well, CR included, as sacreBLEU's
      command line reads hypotheses and references. Every file the pipeline writes is
      normalised text with no trailing whitespace, so for those it removes nothing; it makes a
      file from elsewhere (a CR LF hypothesis file, an n-best list) read as sacreBLEU reads it.
    - ``rstrip=False``: the text is kept as it is, trailing spaces and control characters
      included (raw corpora, where normalisation removes them and counts what it removed).
    - ``strip_bom``: a UTF-8 byte-order mark at the start of the file is removed (otherwise it
      stays as U+FEFF at the start of the first line, as sacreBLEU keeps it).
    - ``strip_cr``: the CR of a Windows line end (one CR at the end of a line) is removed.
    - ``counts``: how the file was written is added to it, whether the options above remove
      it or not: ``bom_files`` (1 if the file began with a byte-order mark) and ``crlf_lines``
      (lines that ended in CR).

    A file that is not UTF-8 raises `error` naming the file and line. :func:`iter_lines` gives
    the same lines a block at a time (a corpus of any size in bounded memory).
    """
    return [line for block in iter_lines(path, rstrip=rstrip, strip_bom=strip_bom,
                                         strip_cr=strip_cr, error=error, counts=counts)
            for line in block]


MAX_LINE_BYTES = 64 << 20  # the longest line iter_lines reads (no sentence is near it)


def iter_lines(path: Path, *, rstrip: bool = True, strip_bom: bool = False,
               strip_cr: bool = False, error: type[Exception] = ValueError,
               counts: dict[str, int] | None = None,
               block_bytes: int = 1 << 22,
               max_line_bytes: int | None = None) -> Iterator[list[str]]:
    """The lines of :func:`read_lines` (the same options), in blocks of whole lines of about
    `block_bytes` each, read as they are asked for. ``counts`` is complete once the last block
    has been given.

    A line of more than `max_line_bytes` bytes (:data:`MAX_LINE_BYTES`, 64 MiB, by default; its
    LF not counted) raises `error` naming the file and line, once that many bytes of it are
    read: no text file the pipeline reads has one, and a file that has lost its line breaks
    (old Mac line ends, CR only) would otherwise be held whole in memory as one line. Each byte
    read is searched for LF once, so a long line costs time in proportion to its length."""
    cap = MAX_LINE_BYTES if max_line_bytes is None else max_line_bytes
    if cap < 3:
        raise ValueError(f"max_line_bytes={cap}: at least 3 (a byte-order mark is read whole)")
    step = max(min(block_bytes, cap), 1)  # a line inside one read is within the cap
    n = 0  # lines given so far (for the line number of a decoding error)
    with open(path, "rb") as f:
        data = f.read(max(step, 3))  # a byte-order mark whole
        pos = 0  # the file's offset of data[0]
        bom = data.startswith(b"\xef\xbb\xbf")
        if counts is not None:
            counts["bom_files"] = counts.get("bom_files", 0) + bom
            counts["crlf_lines"] = counts.get("crlf_lines", 0)
        if strip_bom and bom:
            data, pos = data[3:], 3
        pending = [data]  # the bytes read and not yet given, in the order read
        size = len(data)  # their length
        cut = data.rfind(b"\n")  # the offset of their last LF in them, -1 if none
        while True:
            if size - cut - 1 > cap:  # the line after the last LF, whole or not
                _too_long(path, pending, n, cut, cap, error)
            more = f.read(step) if cut < 0 or size < block_bytes // 2 else b""
            if more:  # a block of whole lines, not too small: read on first
                first = more.find(b"\n")  # only the new bytes are searched
                if first >= 0:
                    if size - cut - 1 + first > cap:  # a line ending in the new bytes
                        _too_long(path, pending, n, cut, cap, error)
                    cut = size + more.rfind(b"\n")
                pending.append(more)
                size += len(more)
                continue
            if not size:
                return
            data = pending[0] if len(pending) == 1 else b"".join(pending)
            pending.clear()  # the blocks freed before the text is decoded
            if cut < 0:  # the end of the file, in a last line without its LF
                yield _lines(path, data, n, pos, rstrip, strip_cr, error, counts)
                return
            # a view, not a copy: a long line is held as its bytes, its text and its split lines
            lines = _lines(path, memoryview(data)[:cut], n, pos, rstrip, strip_cr, error, counts)
            n += len(lines)
            yield lines
            pos += cut + 1
            pending = [data[cut + 1:]]
            size = len(pending[0])
            cut = -1  # the bytes after the last LF hold none


def _too_long(path: Path, pending: list[bytes], before: int, cut: int, cap: int,
              error: type[Exception]) -> None:
    """Raise `error` for the line after offset `cut` of the bytes `pending` (the file's first
    `before` lines came before them): it is longer than `cap` bytes."""
    head = b"".join(pending)
    line = before + head[: cut + 1].count(b"\n") + 1
    crs = head.count(b"\r", cut + 1)
    cr = (f" and {crs:,} carriage returns (CR) in its first {len(head) - cut - 1:,} bytes: "
          "old Mac line ends (CR only)? convert them to LF: tr '\\r' '\\n'" if crs else "")
    raise error(f"{path}:{line}: a line longer than {cap:,} bytes (did the file lose its line "
                f"breaks?{cr})")


def _lines(path: Path, block: bytes | memoryview, before: int, pos: int, rstrip: bool,
           strip_cr: bool, error: type[Exception], counts: dict[str, int] | None) -> list[str]:
    """The lines of `block` (whole lines, their LFs between them; the file's first `before`
    lines, `pos` bytes, came before it)."""
    try:
        text = str(block, "utf-8")
    except UnicodeDecodeError as e:
        line = before + bytes(block[: e.start]).count(b"\n") + 1
        raise error(
            f"{path}:{line}: not valid UTF-8 ({e.reason} at byte {pos + e.start})") from None
    lines = text.split("\n")
    if counts is not None:
        counts["crlf_lines"] += sum(ln.endswith("\r") for ln in lines)
    if strip_cr:
        lines = [ln[:-1] if ln.endswith("\r") else ln for ln in lines]
    if rstrip:
        lines = [ln.rstrip() for ln in lines]
    return lines


# --- folders written whole ----------------------------------------------------------------------

TMP_PREFIX = ".tmp-"  # of a corpus folder being built
_TAG = r"h([0-9a-f]{8})p(\d+)s(\d+|x)"  # what owner_tag() writes
_OWNER = re.compile(rf"-{_TAG}-[0-9a-f]+$")  # in a temporary folder's name
_FILE_OWNER = re.compile(rf"\.{_TAG}-[0-9a-f]+\.tmp$")  # in a temporary file's (_temp_file)


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


class corpus_dir:
    """A temporary folder ``out_dir/.tmp-<cid>-<owner>-*``, renamed to ``out_dir/<cid>``
    (replacing it) when the block succeeds and removed when it fails: a corpus folder (a
    downloaded corpus, the prepared corpora, the ids) is always complete.

    With `owns` (the names of the files the writer writes), ``out_dir/<cid>`` is checked by
    :func:`check_out_dir` (with `inputs` and `what`) before the temporary folder is made, and
    again before it is replaced (something may have been put there meanwhile)."""

    def __init__(self, out_dir: Path, cid: str, *, owns: Collection[str] | None = None,
                 inputs: Iterable[Path] = (), what: str = "the stage"):
        self.final = Path(out_dir) / cid
        inputs = tuple(inputs)
        self.check = (lambda: None) if owns is None else (
            lambda: check_out_dir(self.final, owns, inputs=inputs, what=what))
        self.check()
        self.final.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = temp_dir(Path(out_dir), f"{TMP_PREFIX}{cid}-{owner_tag()}-")

    def __enter__(self) -> Path:
        return self.tmp

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            return
        try:
            self.check()
        except BaseException:
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise
        replace_dir(self.tmp, self.final)


_AT_FDCWD, _RENAME_EXCHANGE = -100, 2  # <fcntl.h>, <linux/fs.h>


def _exchange(a: Path, b: Path) -> bool:
    """Swap what paths `a` and `b` name in one step (Linux's renameat2 with RENAME_EXCHANGE);
    False, with nothing done, where the C library or the file system has no such call."""
    import ctypes

    try:
        call = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # not glibc >= 2.28, not Linux
        return False
    if call(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):  # this file system cannot
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))


def replace_dir(new: Path, final: Path) -> None:
    """Folder `new` renamed to `final`, replacing what is there, so that a kill at any point
    leaves under the final name the old folder whole or the new one whole. Where the final name
    holds a folder the two are swapped in one step (:func:`_exchange`) and the old one, now
    under the temporary name (``.tmp-<name>-<owner>-*``, which :func:`remove_leftovers` clears
    once its owner is gone), deleted. Where the file system cannot swap, the old folder is first
    renamed aside (onto an empty temporary folder of that kind), the new one renamed into place,
    and the old one deleted last: a kill between the two renames leaves nothing under the final
    name. A file or a link under the final name is removed (one unlink, itself atomic)."""
    new, final = Path(new), Path(final)
    aside = None
    if final.is_dir() and not final.is_symlink() and _exchange(new, final):
        shutil.rmtree(new, ignore_errors=True)  # the old folder
        return
    if final.is_dir() and not final.is_symlink():
        aside = temp_dir(final.parent, f"{TMP_PREFIX}{final.name}-{owner_tag()}-")
        try:
            os.replace(final, aside)  # a folder onto an empty one: one rename
        except OSError:
            aside.rmdir()
            raise
    elif final.exists() or final.is_symlink():
        remove(final)
    try:
        os.replace(new, final)
    except OSError:
        if aside is not None:  # the old folder back where it was, if nothing took its place
            with contextlib.suppress(OSError):
                os.rename(aside, final)
        raise
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)


def whole_dir(path: Path, *, owns: Collection[str] | None = None, inputs: Iterable[Path] = (),
              what: str = "the stage") -> corpus_dir:
    """Folder `path` written whole (a :class:`corpus_dir` in its parent), once the temporaries of
    it that a run now gone left are removed (:func:`remove_leftovers`): what a stage writing one
    folder (the prepared corpora, the vocabularies, the ids, an export) holds while it writes.
    With `owns` (the names the stage writes there: :func:`out_names`), an existing `path` is
    replaced only if :func:`check_out_dir` allows it, which is asked first."""
    path = Path(path)
    folder = corpus_dir(path.parent, path.name, owns=owns, inputs=inputs, what=what)
    remove_leftovers(path.parent, f"{TMP_PREFIX}{path.name}-", keep=folder.tmp)
    return folder


def out_names(writes: Collection[str], out_dir: Path, *others: Path) -> frozenset[str]:
    """The names a stage's output folder `out_dir` may hold (:func:`check_out_dir`): the files
    `writes` it writes there, and those of its `others` (a metrics file) that lie in it, or the
    subfolder of it they lie in (``m/`` for ``<out_dir>/m/vocab.json``)."""
    where = Path(out_dir).resolve()
    names = set(writes)
    for other in others:
        found = Path(other).resolve()
        if where in found.parents:
            inside = found.relative_to(where).parts
            names.add(inside[0] + ("/" if len(inside) > 1 else ""))
    return frozenset(names)


# What a workflow engine leaves in an output folder it declared: Snakemake's timestamp of a
# directory() output (it writes one after each job, and with --touch).
ENGINE_FILES = frozenset({".snakemake_timestamp"})


def _owned(entry: Path, owns: Collection[str]) -> bool:
    """`entry` of an output folder is one of `owns` (a folder's name with ``/`` after it; a
    pattern, ``*.png``, for a writer whose names vary), an engine's file, or the temporary of an
    owned file (``.<name>.*.tmp``, a killed write's)."""
    name = entry.name + ("/" if entry.is_dir() and not entry.is_symlink() else "")
    if name in owns or name in ENGINE_FILES:
        return True
    if any(fnmatch.fnmatchcase(name, own) for own in owns if "*" in own):
        return True
    return name.endswith(".tmp") and any(name.startswith(f".{own}.") for own in owns
                                         if not own.endswith("/"))


class OutDirError(ValueError):
    """An output folder a stage may not replace (:func:`check_out_dir`); the message names it,
    what is in the way, and what to do."""


def check_out_dir(path: Path, owns: Collection[str], *, inputs: Iterable[Path] = (),
                  flag: str = "--out", what: str = "the stage", folder: str | None = None
                  ) -> None:
    """Refuse, in one line, an output folder `path` that a stage writing the files `owns` (file
    names or patterns, :func:`_owned`; a folder's name with a ``/`` after it) may not replace
    whole: a file (or a link to one), the current folder or one holding it, a folder that is or
    holds one of `inputs` (the stage's own inputs), or a folder holding anything but the entries
    `owns` (a previous output of the same stage, or nothing): the first few of those are named,
    and what to do. `folder`: the folder in words where it is not the `flag` folder itself
    ("its figures/ folder under --out"). Changes nothing; call it before any work."""
    path = Path(path)
    named = f"{flag} {path}" if folder is None else str(path)
    folder = folder or f"its {flag} folder"
    fix = "name a folder of its own"
    if path.is_symlink() and not path.exists():
        raise OutDirError(f"{named}: a link to nothing; {what} replaces {folder} whole: {fix}, "
                          f"or remove the link")
    if path.exists() and not path.is_dir():
        raise OutDirError(f"{named}: a file, not a folder; {what} writes a folder there: {fix}")
    where = path.resolve()
    here = Path.cwd().resolve()
    if here == where or where in here.parents:
        which = "the current folder" if here == where else "a folder holding the current one"
        raise OutDirError(f"{named}: {which}; {what} replaces {folder} whole: {fix}")
    for source in inputs:
        found = Path(source).resolve()
        if found == where or where in found.parents:
            raise OutDirError(f"{named}: {'is' if found == where else 'holds'} {source}, an "
                              f"input of {what}, which replaces {folder} whole: {fix}")
    if not path.is_dir():
        return
    foreign = sorted(e.name for e in path.iterdir() if not _owned(e, owns))
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3:,} more" if len(foreign) > 3
                                          else "")
        raise OutDirError(f"{named}: holds {shown}, which {what} does not write, and it "
                          f"replaces {folder} whole: {fix}, or remove it")


def remove_leftovers(out_dir: Path, prefix: str = TMP_PREFIX, *, keep: Path | None = None
                     ) -> None:
    """Remove the temporary folders ``prefix*`` of `out_dir` whose owner is gone; a live
    process's (or one of another host, whose life cannot be seen from here) is never touched: it
    is still being written. `keep`: this process's own, not logged."""
    for tmp in sorted(Path(out_dir).glob(f"{prefix}*")):
        if tmp == keep:
            continue
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
