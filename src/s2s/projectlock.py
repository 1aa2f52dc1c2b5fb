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
PID, which DVC and this module drop (DVC logs "Auto removed it from the lock file"). An entry of
ours also records its process's host and start time (``/proc/<pid>/stat``, as download
temporaries do), so one whose PID now belongs to another process is dropped too, with a log
line, and never named as the holder. A refusal names the lock file and how to clear it. PIDs
are those of one host: start the engines of a project from one machine (see the jobs below for
SLURM). A writer of ours that finds an entry of ours from another host refuses, naming it
(DVC's own check would take that PID for a dead one here and drop the entry); `dvc repro` run
on another host than the engine still does that, so run it where the engine runs.

A writer also holds the workspace in DVC's experiments' lock (``.dvc/tmp/exps/rwlock``), the
only one `dvc exp run` checks before it stashes the workspace and writes its ``-S`` values into
params.yaml (its first stage would find the project held only after that).

Who takes it:

- ``dvc repro`` / ``dvc exp run``: DVC itself. Its stages (``DVC_STAGE`` set) take nothing.
- a Snakemake run: the workflow's ``onstart`` handler (so not a dry run, a lint or a listing),
  for the whole run (:func:`hold_for_engine`). It exports :data:`WRITER_ENV`, a token of its
  entry, which its jobs inherit.
- a job of that run (:func:`for_stage` with the token): an entry of its own, for as long as it
  runs, beside the engine's (a reader's entry of the whole project, which DVC's writers and ours
  respect, and which the jobs of one run do not hold against each other), so the jobs of one run
  run side by side, and a job the engine leaves behind (its engine killed with ``kill -9``) still
  holds the project: a ``dvc repro`` or another run started then is refused naming the job. A
  job on another host than its engine (SLURM) has no PID this host can check: it takes nothing
  and is covered by its engine's entry only (``scancel`` what a dead engine leaves).
- a stage run by hand (`s2s download`), and `s2s profile NAME` / `s2s dag write`, which rewrite
  params.yaml and dvc.yaml: for as long as they run.

A lock file that is not DVC's JSON (cut, or bytes that are not UTF-8) is a
:class:`DamagedLockFile` naming it and how to clear it, for every reader of ours.

Without ``.dvc/`` there is no DVC to coordinate with and no lock is taken.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import re
import secrets
import sys
from pathlib import Path

log = logging.getLogger("s2s")

WRITER_ENV = "S2S_PROJECT_WRITER"  # the token of the engine run a job belongs to
_TAG = "s2s project writer"
# What an entry of ours records after its command: "(s2s project writer <token> <owner>[ job])",
# the owner as s2s.io.owner_tag writes it (host, PID, start time).
_ENTRY = re.compile(rf" \({_TAG} ([0-9a-f]+)(?: (h[0-9a-f]{{8}}p\d+s(?:\d+|x)))?( job)?\)$")


class ProjectLockError(RuntimeError):
    """The project lock cannot be taken: another writer holds it, or its file is damaged."""


class ProjectLocked(ProjectLockError):
    """Another live process writes the project: names it, and the lock file."""


class DamagedLockFile(ProjectLockError):
    """DVC's lock file is not what DVC writes: names it and how to clear it."""


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
    if (len(words) > 1 and Path(words[0]).name.startswith("python")
            and not words[1].startswith("-")):
        words = words[1:]
    if words:
        words[0] = Path(words[0]).name
    return " ".join(words)


def command_line() -> str:
    """This process's command, as a holder is named: ``s2s download``, ``snakemake --cores 1``."""
    return " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv else "python"


def _owner() -> str:
    from s2s.io import owner_tag

    return owner_tag()


def _parse(cmd: object) -> tuple[str, str | None, bool] | None:
    """(token, owner, is a job) of an entry of ours; None for another's (DVC's own)."""
    m = _ENTRY.search(cmd) if isinstance(cmd, str) else None
    return (m[1], m[2], bool(m[3])) if m else None


def _live(info: dict) -> bool | None:
    """Whether the process of an entry still runs: by its recorded start time where it has one
    (a reused PID is another process), else by its PID; None for one of another host."""
    from s2s.io import tag_alive

    parsed = _parse(info.get("cmd"))
    if parsed is not None and parsed[1] is not None:
        return tag_alive(parsed[1])
    try:
        os.kill(int(info["pid"]), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, TypeError, KeyError):
        return True
    return True


def _paths(root: Path) -> list[str]:
    """Every spelling of the root DVC may use for its paths: they are compared as text."""
    return sorted({str(root), os.path.abspath(root)})


def _hardlink(root: Path) -> bool:
    from dvc.config import Config
    from dvc.exceptions import DvcException

    try:
        return bool(Config(dvc_dir=str(root / ".dvc"))["core"].get("hardlink_lock", False))
    except DvcException as e:  # DVC refuses to run here too, with the same words
        raise ProjectLockError(f"{root / '.dvc'}: {e}") from None


def _damaged(root: Path, e: BaseException) -> DamagedLockFile:
    """The one error every reader of ours gives for a lock file DVC cannot read either."""
    path = root / ".dvc" / "tmp" / "rwlock"
    if isinstance(e, UnicodeDecodeError):
        what = f"not UTF-8 text ({e.reason} at byte {e.start}), so not DVC's lock file"
    else:
        what = f"not DVC's lock file ({str(e).splitlines()[0]})"
    return DamagedLockFile(f"{path}: {what}: remove it when no dvc, snakemake or s2s process "
                           f"runs in {root}")


@contextlib.contextmanager
def _editing(root: Path, hardlink: bool):
    """DVC's rwlock of `root`, read and written back under DVC's own guard (its
    ``rwlock.lock``); a damaged file is a DamagedLockFile."""
    from dvc.exceptions import DvcException
    from dvc.fs import localfs
    from dvc.lock import LockError
    from dvc.rwlock import _edit_rwlock  # DVC's own reader and writer of the file

    inside = False  # the caller's block runs: its own errors are its own, not the file's
    try:
        with _edit_rwlock(str(root / ".dvc" / "tmp"), localfs, hardlink) as lock:
            inside = True
            yield lock
            inside = False
    except LockError as e:  # its guard held for seconds: a process stuck while editing it
        if inside:
            raise
        raise ProjectLocked(f"{root / '.dvc' / 'tmp' / 'rwlock.lock'}: {e}: if no dvc, snakemake "
                            f"or s2s process runs in {root}, remove it") from None
    except (DvcException, UnicodeDecodeError) as e:
        if inside or (isinstance(e, DvcException) and "RWLock" not in type(e).__name__):
            raise
        raise _damaged(root, e) from None


def _drop_reused(root: Path, lock: dict) -> None:
    """Drop the entries of ours whose PID now runs another process (another start time): DVC
    drops those of dead PIDs itself, and would take these for live holders."""
    rwlock = root / ".dvc" / "tmp" / "rwlock"
    for path, info in list(lock["write"].items()):
        if _parse(info.get("cmd")) is not None and _live(info) is False:
            del lock["write"][path]
            _dropped(rwlock, info)
    for path, infos in list(lock["read"].items()):
        kept = [i for i in infos if _parse(i.get("cmd")) is None or _live(i) is not False]
        for info in infos:
            if info not in kept:
                _dropped(rwlock, info)
        if kept:
            lock["read"][path] = kept
        else:
            del lock["read"][path]
    if not lock["write"]:
        del lock["write"]
    if not lock["read"]:
        del lock["read"]


def _of_another_host(lock: dict) -> dict | None:
    """An entry of ours written on another host (a Snakemake engine on a login node, the project
    on a shared filesystem), whose PID this host cannot check; None where there is none."""
    infos = [*lock.get("write", {}).values(),
             *(i for infos in lock.get("read", {}).values() for i in infos)]
    return next((i for i in infos if isinstance(i, dict) and _parse(i.get("cmd")) is not None
                 and _live(i) is None), None)


EXPS_DIR = "exps"  # DVC's experiments' lock folder under .dvc/tmp (get_exp_rwlock)
_told: set[str] = set()
_HELD: set = set()  # the locks and job entries this process holds


def _dropped(rwlock: Path, info: dict) -> None:
    key = f"{info.get('pid')}:{info.get('cmd')}"
    if key in _told:  # one entry under several spellings of the root: one line
        return
    _told.add(key)
    now = describe(int(info["pid"])) if str(info.get("pid", "")).isdigit() else ""
    log.info("%s: dropped the entry of PID %s (%s), which ended%s", rwlock, info.get("pid"),
             str(info.get("cmd", "")).split(f" ({_TAG} ")[0],
             f"; its PID now runs another process ({now})" if now else "")


class ProjectLock:
    """The project lock of `root`, held by this process for `command` (see the module doc)."""

    def __init__(self, root: Path, command: str):
        self.root = Path(root)
        self.tmp = self.root / ".dvc" / "tmp"
        self.token = secrets.token_hex(8)
        self.command = f"{command} ({_TAG} {self.token} {_owner()})"
        self.pid: int | None = None
        self._held: contextlib.ExitStack | None = None

    def acquire(self) -> ProjectLock:
        from dvc.exceptions import DvcException
        from dvc.fs import localfs
        from dvc.lock import LockError, make_lock
        from dvc.rwlock import rwlock

        self.tmp.mkdir(parents=True, exist_ok=True)
        hardlink = _hardlink(self.root)
        repo_lock = make_lock(str(self.tmp / "lock"), tmp_dir=str(self.tmp),
                              hardlink_lock=hardlink)
        try:
            repo_lock.lock()  # DVC's own retries: about 3 s
        except LockError:
            raise ProjectLocked(self._refusal(self._repo_lock_holder(), repo_lock=True)) from None
        held = contextlib.ExitStack()
        taking = self.tmp / "rwlock"  # the lock file a refusal names
        try:
            with _editing(self.root, hardlink) as lock:
                _drop_reused(self.root, lock)
                elsewhere = _of_another_host(lock)
            if elsewhere:  # DVC would take its PID for a dead one of this host and drop it
                raise ProjectLocked(self._refusal_elsewhere(elsewhere))
            held.enter_context(rwlock(str(self.tmp), localfs, self.command, [],
                                      _paths(self.root), hardlink))
            # `dvc exp run` checks only its experiments' lock before it stashes the workspace
            # and writes its -S values into params.yaml: hold the workspace there too
            (self.tmp / EXPS_DIR).mkdir(exist_ok=True)
            taking = self.tmp / EXPS_DIR / "rwlock"
            held.enter_context(rwlock(str(self.tmp / EXPS_DIR), localfs, self.command, [],
                                      ["workspace"], hardlink))
        except LockError as e:
            held.close()  # the project's entry, where the experiments' lock was refused
            raise ProjectLocked(self._refusal(_blockers(str(e)), rwlock=taking)) from None
        except (DvcException, UnicodeDecodeError) as e:  # damaged: DVC cannot read it either
            held.close()
            raise _damaged(self.root, e) from None
        finally:
            repo_lock.unlock()
        self._held, self.pid = held, os.getpid()
        _HELD.add(self)  # held until released or the process ends, not until it is forgotten
        return self

    def release(self) -> None:
        if self._held is not None and self.pid == os.getpid():  # never from a forked child
            try:
                self._held.close()
            except AssertionError:  # DVC's release asserts that its entry is still there
                log.warning("%s: this run's entry was gone from %s when it ended (cleared by "
                            "hand, or dropped by DVC on another host): nothing to release",
                            self.root, self.tmp / "rwlock")
        self._held = None
        _HELD.discard(self)

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

    def _refusal_elsewhere(self, info: dict) -> str:
        return (f"{self.root} is being written by {_named(int(info['pid']), info['cmd'])} on "
                f"another host, whose processes this one cannot see: one writer per project; "
                f"start writers on the host its engine runs on, or, if nothing of that run is "
                f"left there, remove {self.tmp / 'rwlock'}")

    def _refusal(self, holder: str, *, repo_lock: bool = False,
                 rwlock: Path | None = None) -> str:
        if repo_lock:  # an flock: the kernel frees it when its holder ends
            where = f"it holds {self.tmp / 'lock'}, which is freed when it ends"
        else:
            where = (f"its entry is in {rwlock or self.tmp / 'rwlock'}: if no dvc, snakemake or "
                     f"s2s process runs in {self.root}, remove that file")
        return (f"{self.root} is being written by {holder}: one writer per project (a `dvc "
                f"repro`, a Snakemake run or a stage run by hand); wait for it to end or stop it "
                f"({where})")


def _named(pid: int, cmd: str) -> str:
    return f"PID {pid} ({cmd.split(f' ({_TAG} ')[0]})"


def _blockers(message: str) -> str:
    """The holders a DVC rwlock refusal names ("  (PID 12): dvc repro"), as one phrase."""
    found = [_named(int(pid), cmd.strip()) for pid, cmd in
             re.findall(r"^\s*\(PID (\d+)\): (.*)$", message, re.M)]
    return ", ".join(dict.fromkeys(found)) or message.splitlines()[0]


def _engine(lock: dict, token: str) -> dict | None:
    """The live entry of the engine run of `token` (a writer's entry, not a job's), or None."""
    for info in lock.get("write", {}).values():
        parsed = _parse(info.get("cmd")) if isinstance(info, dict) else None
        if parsed is not None and parsed[0] == token and not parsed[2] and _live(info) is not False:
            return info
    return None


class JobEntry:
    """What a job of an engine run holds while it runs (see the module doc): a reader's entry of
    the whole project in DVC's rwlock, with its own PID and start time and the run's token,
    beside the engine's; the project lock itself where the engine's entry is gone (the job then
    writes alone, or is refused like any writer)."""

    def __init__(self, root: Path, token: str, command: str):
        self.root, self.token, self.command = Path(root), token, command
        self.info: dict | None = None
        self.pid: int | None = None
        self._lock: ProjectLock | None = None

    def acquire(self) -> JobEntry:
        hardlink = _hardlink(self.root)
        (self.root / ".dvc" / "tmp").mkdir(parents=True, exist_ok=True)
        with _editing(self.root, hardlink) as lock:
            engine = _engine(lock, self.token)
            if engine is not None:
                owner = _owner()
                theirs = _parse(engine["cmd"])[1]
                if theirs is None or theirs.split("p", 1)[0] == owner.split("p", 1)[0]:
                    self.info = {"pid": os.getpid(),
                                 "cmd": f"{self.command} ({_TAG} {self.token} {owner} job)"}
                    for path in _paths(self.root):
                        if self.info not in lock["read"][path]:
                            lock["read"][path].append(self.info)
                # else: another host's engine (SLURM); its entry alone stands for this job
        if engine is None:
            self._lock = ProjectLock(self.root, self.command).acquire()
        self.pid = os.getpid()
        _HELD.add(self)
        return self

    def release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None
        _HELD.discard(self)
        if self.info is None or self.pid != os.getpid():  # never from a forked child
            return
        with _editing(self.root, _hardlink(self.root)) as lock:
            for path in _paths(self.root):
                readers = lock["read"].get(path, [])
                if self.info in readers:
                    readers.remove(self.info)
                if not readers:
                    lock["read"].pop(path, None)
            if not lock["read"]:
                del lock["read"]
            if not lock["write"]:
                del lock["write"]
        self.info = None

    def __enter__(self) -> JobEntry:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def for_stage(command: str | None = None) -> contextlib.AbstractContextManager:
    """What a stage (or another command that writes the project) holds while it runs: nothing
    under DVC; inside the engine run named by :data:`WRITER_ENV`, its own job entry
    (:class:`JobEntry`); else the project lock (:class:`ProjectLocked` if another writer holds
    it); nothing outside a DVC project."""
    if "DVC_STAGE" in os.environ:
        return contextlib.nullcontext()
    root = find_root()
    if root is None:
        return contextlib.nullcontext()
    token = os.environ.get(WRITER_ENV, "")
    if token:
        return JobEntry(root, token, command or command_line())
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
