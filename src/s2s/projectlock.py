"""One project, one writer: the lock that `dvc repro`, a Snakemake run and a stage run by hand
all respect.

Who writes a project (the folder holding ``.dvc/``, found from the working directory up, as DVC
finds it) is recorded where DVC looks before it touches anything: DVC's own read/write lock,
``.dvc/tmp/rwlock``. A writer registers there as writing the whole project, with its PID and
command; DVC checks that file before a stage deletes its outputs (which it does before running
the stage's command), so a `dvc repro` started while another writer holds the project stops at
once, DVC's message naming the holder::

    ERROR: '/p/params.yaml' is busy, it is being blocked by:
      (PID 4242): snakemake --cores 1 (s2s project writer 9f3c...)

A writer checks and registers while it holds DVC's repository lock (``.dvc/tmp/lock``), which a
`dvc repro` holds from its start to its end except while a stage's command runs, when the rwlock
entries of that stage (DVC's PID) stand for it; so a writer that finds either held by another
live process refuses in one line naming that process (:class:`ProjectLocked`). Nothing waits:
DVC and Snakemake both refuse a second run of their own rather than wait, DVC can do nothing
else here, and a Snakemake run that waited would then execute a plan made before the other
writer changed the project. A writer that dies (even by ``kill -9``) leaves an entry of a dead
PID, which DVC and this module drop (DVC logs "Auto removed it from the lock file"). PIDs are
those of one host: start the engines of a project from one machine (SLURM jobs elsewhere only
carry the token, which needs no PID).

Who takes it:

- ``dvc repro`` / ``dvc exp run``: DVC itself. Its stages (``DVC_STAGE`` set) take nothing.
- a Snakemake run: the workflow's ``onstart`` handler (so not a dry run, a lint or a listing),
  for the whole run (:func:`hold_for_engine`). It exports :data:`WRITER_ENV`, a token of its
  entry; its jobs, local or SLURM, inherit it and take nothing (:func:`for_stage`), so the jobs
  of one run still run side by side.
- a stage run by hand (`s2s download`), and `s2s profile NAME` / `s2s dag write`, which rewrite
  params.yaml and dvc.yaml: for as long as they run.

Without ``.dvc/`` there is no DVC to coordinate with and no lock is taken.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import re
import secrets
import sys
from pathlib import Path

log = logging.getLogger("s2s")

WRITER_ENV = "S2S_PROJECT_WRITER"  # the token of the engine run a job belongs to
_TAG = "s2s project writer"


class ProjectLocked(RuntimeError):
    """Another live process writes the project: names it."""


def find_root(start: Path | None = None) -> Path | None:
    """The project around `start` (default: the working directory): the nearest folder up
    holding ``.dvc/``, not crossing a mount point (as DVC looks); None outside any."""
    here = Path(os.path.realpath(start or os.getcwd()))
    while True:
        if (here / ".dvc").is_dir():
            return here
        if os.path.ismount(here) or here.parent == here:
            return None
        here = here.parent


def describe(pid: int) -> str:
    """A process's command line (``dvc repro``, ``snakemake --cores 1``), '' if unknown."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    words = [w.decode("utf-8", "replace") for w in raw.split(b"\0") if w]
    # An interpreter running a script shows as the script (python .../bin/dvc repro -> dvc repro)
    if len(words) > 1 and Path(words[0]).name.startswith("python") \
            and not words[1].startswith("-"):
        words = words[1:]
    if words:
        words[0] = Path(words[0]).name
    return " ".join(words)


def command_line() -> str:
    """This process's command, as a holder is named: ``s2s download``, ``snakemake --cores 1``."""
    return " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv else "python"


class ProjectLock:
    """The project lock of `root`, held by this process for `command` (see the module doc)."""

    def __init__(self, root: Path, command: str):
        self.root = Path(root)
        self.tmp = self.root / ".dvc" / "tmp"
        self.token = secrets.token_hex(8)
        self.command = f"{command} ({_TAG} {self.token})"
        self.pid: int | None = None
        self._held: contextlib.ExitStack | None = None

    def acquire(self) -> ProjectLock:
        from dvc.config import Config
        from dvc.exceptions import DvcException
        from dvc.fs import localfs
        from dvc.lock import LockError, make_lock
        from dvc.rwlock import rwlock

        self.tmp.mkdir(parents=True, exist_ok=True)
        try:
            hardlink = bool(Config(dvc_dir=str(self.root / ".dvc"))["core"].get(
                "hardlink_lock", False))
        except DvcException as e:  # DVC refuses to run here too, with the same words
            raise RuntimeError(f"{self.root / '.dvc'}: {e}") from None
        repo_lock = make_lock(str(self.tmp / "lock"), tmp_dir=str(self.tmp),
                              hardlink_lock=hardlink)
        try:
            repo_lock.lock()  # DVC's own retries: about 3 s
        except LockError:
            raise ProjectLocked(self._refusal(self._repo_lock_holder())) from None
        held = contextlib.ExitStack()
        try:
            # Every spelling of the root DVC may use for its paths: they are compared as text.
            paths = sorted({str(self.root), os.path.abspath(self.root)})
            held.enter_context(rwlock(str(self.tmp), localfs, self.command, [], paths, hardlink))
        except LockError as e:
            raise ProjectLocked(self._refusal(_blockers(str(e)))) from None
        except DvcException as e:  # a damaged rwlock file: DVC cannot read it either
            raise RuntimeError(f"{e}: remove {self.tmp / 'rwlock'} when no dvc or s2s "
                               f"process runs in {self.root}") from None
        finally:
            repo_lock.unlock()
        self._held, self.pid = held, os.getpid()
        return self

    def release(self) -> None:
        if self._held is not None and self.pid == os.getpid():  # never from a forked child
            self._held.close()
        self._held = None

    def __enter__(self) -> ProjectLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()

    def _repo_lock_holder(self) -> str:
        try:
            text = (self.tmp / "lock").read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            text = ""
        if text.isdigit():
            return _named(int(text), describe(int(text)) or "a DVC command")
        return "another DVC command"

    def _refusal(self, holder: str) -> str:
        return (f"{self.root} is being written by {holder}: one writer per project (a `dvc "
                f"repro`, a Snakemake run or a stage run by hand); wait for it to end or stop it")


def _named(pid: int, cmd: str) -> str:
    return f"PID {pid} ({cmd.split(f' ({_TAG} ')[0]})"


def _blockers(message: str) -> str:
    """The holders a DVC rwlock refusal names ("  (PID 12): dvc repro"), as one phrase."""
    found = [_named(int(pid), cmd.strip()) for pid, cmd in
             re.findall(r"^\s*\(PID (\d+)\): (.*)$", message, re.M)]
    return ", ".join(dict.fromkeys(found)) or message.splitlines()[0]


def _registered(root: Path, token: str) -> bool:
    """Whether DVC's rwlock of `root` holds the writer entry of `token`. Read without DVC's
    guard: an entry is written whole, and this only looks for one."""
    try:
        data = json.loads((root / ".dvc" / "tmp" / "rwlock").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    writes = data.get("write") if isinstance(data, dict) else None
    return isinstance(writes, dict) and any(
        isinstance(info, dict) and str(info.get("cmd", "")).endswith(f"({_TAG} {token})")
        for info in writes.values())


def for_stage(command: str | None = None) -> contextlib.AbstractContextManager:
    """What a stage (or another command that writes the project) holds while it runs: nothing
    under DVC or inside the engine run named by :data:`WRITER_ENV`, else the project lock
    (:class:`ProjectLocked` if another writer holds it); nothing outside a DVC project."""
    if "DVC_STAGE" in os.environ:
        return contextlib.nullcontext()
    root = find_root()
    if root is None:
        return contextlib.nullcontext()
    token = os.environ.get(WRITER_ENV, "")
    if token and _registered(root, token):
        return contextlib.nullcontext()
    return ProjectLock(root, command or command_line())


def hold_for_engine(command: str | None = None) -> ProjectLock | None:
    """Take the project lock for this whole process (a Snakemake run): released when it
    exits, a kill leaving a dead PID that the next writer drops. Its token goes into
    :data:`WRITER_ENV` for the jobs it starts. None outside a DVC project."""
    root = find_root()
    if root is None:
        return None
    lock = ProjectLock(root, command or command_line()).acquire()
    os.environ[WRITER_ENV] = lock.token
    atexit.register(lock.release)
    log.info("%s: this run holds the project lock (PID %d)", root, os.getpid())
    return lock
