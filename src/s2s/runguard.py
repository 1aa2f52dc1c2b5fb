"""A trainer's life: one writer per checkpoint folder, stopped cleanly, never outliving its pipeline.

- :class:`FolderLock`: ``<ckpt_dir>/.train.lock`` held with ``flock`` for the whole run and naming
  the holder's PID, so a second trainer on the same folder is refused at once with the holder
  named. The kernel drops the lock when its holder dies (even by ``kill -9``), so a lock left by
  a dead trainer is taken over, with a log line; a clean exit empties the file, so the next run
  logs nothing. The file stays (removing it would race with a newcomer).
- :class:`StopSignals`: SIGTERM and SIGINT set a flag that the training loop reads between steps;
  it then writes a final resumable checkpoint and stops with :class:`Stopped`.
- :func:`tie_to_pipeline`: under ``dvc repro`` (``DVC_STAGE`` is set) the trainer gets SIGTERM
  when DVC dies: ``prctl(PR_SET_PDEATHSIG)`` when DVC is the parent, and a watcher thread when
  the parent is the shell DVC runs the command with (``$SHELL -c``; the shell outlives DVC).
  A DVC that died before the trainer looked (as it imported torch) is found where a known
  reaper (:data:`REAPERS`) adopted its child in its place; an adopter of another name is not.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

log = logging.getLogger("s2s.train")

LOCK_NAME = ".train.lock"
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "fish", "busybox"})
# What adopts a process whose parent died (init, a container's init, systemd's user manager):
# found where the pipeline should be, it means the pipeline died before the trainer looked.
REAPERS = frozenset({"init", "systemd", "tini", "docker-init", "dumb-init", "catatonit",
                     "s6-svscan", "runit"})


class LockedError(RuntimeError):
    """Another live process holds the checkpoint folder."""


class Stopped(RuntimeError):
    """Training stopped on a signal after writing a resumable checkpoint."""

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.exit_status = 128 + signum


class FolderLock:
    def __init__(self, folder: Path):
        self.path = Path(folder) / LOCK_NAME
        self.fd: int | None = None

    def acquire(self) -> FolderLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = _read(fd)
            os.close(fd)
            if e.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            raise LockedError(f"{self.path}: another trainer (PID {holder or 'unknown'}) is "
                              f"writing {self.path.parent}; two trainers must never write one "
                              f"checkpoint folder: stop it or wait for it") from None
        previous = _read(fd)
        if previous and previous != str(os.getpid()):
            log.info("%s: took over the lock left by PID %s, which no longer holds it",
                     self.path, previous)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is not None:
            # A clean exit leaves no PID behind, so the next trainer takes the lock silently; only
            # a holder that died without releasing leaves one (and the takeover line).
            os.ftruncate(self.fd, 0)
            os.close(self.fd)  # drops the flock; the file stays (see the module docstring)
            self.fd = None

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _read(fd: int) -> str:
    try:
        return os.pread(fd, 64, 0).decode("ascii", "replace").strip()
    except OSError:
        return ""


class StopSignals:
    """SIGTERM/SIGINT -> `requested` (the signal number); the previous handlers come back on
    exit. Only the main thread can install handlers; elsewhere this does nothing."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.requested: int | None = None
        self._old: dict[int, object] = {}

    def _handle(self, signum, frame) -> None:
        if self.requested is None:
            log.warning("%s received: stopping after this step with a final checkpoint",
                        signal.Signals(signum).name)
        self.requested = signum

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old.clear()

    @property
    def name(self) -> str:
        return signal.Signals(self.requested).name if self.requested else ""


def _ppid_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])  # the field after the state


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _adopted_by(pid: int) -> bool:
    """Whether `pid`, found where the pipeline should be, is what adopted its orphans: a reaper
    by name (:data:`REAPERS`) that is no part of the stage (a wrapper such as ``dumb-init s2s
    train`` has the stage's ``DVC_STAGE`` in its environment; an init has none, or none to read)."""
    return _comm(pid) in REAPERS and "DVC_STAGE" not in _environ(pid)


def _environ(pid: int) -> set[str]:
    """The names of `pid`'s environment variables (none where it cannot be read)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return set()
    return {v.split(b"=", 1)[0].decode(errors="replace") for v in environ.split(b"\0") if v}


def tie_to_pipeline(poll: float = 0.5) -> bool:
    """Under DVC, get SIGTERM when the dvc process dies; True if tied. Linux only."""
    if "DVC_STAGE" not in os.environ or not sys.platform.startswith("linux"):
        return False
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG: when the parent dies
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        pass
    # The shell DVC runs the command with may stay between us and DVC: watch DVC through it.
    shell = parent if _comm(parent) in SHELLS else None
    pipeline = _ppid_of(shell) if shell else parent

    def gone() -> bool:
        if os.getppid() != parent:
            return True
        return shell is not None and _ppid_of(shell) != pipeline

    # It died before we looked: the parent changed since, or the shell's parent is already the
    # process that adopted it (a reaper's name only: a container's PID 1 may be DVC itself).
    if gone() or _adopted_by(pipeline):
        log.warning("the pipeline process is gone (PID %s is %s): stopping", pipeline,
                    _comm(pipeline) or "gone")
        os.kill(os.getpid(), signal.SIGTERM)
        return True

    def watch() -> None:
        while not gone():
            time.sleep(poll)
        log.warning("the pipeline process (PID %s) is gone: stopping", pipeline)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="s2s-pipeline-watch", daemon=True).start()
    return True
