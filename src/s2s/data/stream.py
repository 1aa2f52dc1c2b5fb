"""Work on a corpus in chunks, in order, over a pool of processes: what the data stages share so
that their memory does not grow with the corpus and their time falls with their threads.

:func:`workers_for` says how many processes a data stage uses; :func:`ordered_map` runs a
function over chunks in them, a few chunks ahead, and gives the results in the chunks' order
(so every output is the one a single process writes). :func:`closing_named` makes a failed
write or close of a file a stage streams into the folder it builds whole name that file
(:func:`s2s.io.naming`, as :func:`s2s.io.atomic_open` does for its own).
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager, suppress
from typing import IO, Any, TypeVar

from s2s.io import naming

T = TypeVar("T")
R = TypeVar("R")

MAX_AUTO_WORKERS = 8  # where the profile does not set the stage's threads
JOB_THREADS = "S2S_JOB_THREADS"  # the threads the workflow's scheduler gave this job


def workers_for(params, kind: str) -> int:
    """The processes data stage `kind` uses: the threads its job asks a scheduler for
    (``resources.<kind>``, else ``resources.default``: Snakemake and SLURM reserve that many
    CPUs for it), so that jobs side by side do not oversubscribe the cores, but no more than the
    CPUs this process may run on (its affinity: a SLURM allocation, a taskset, the machine; a
    profile sized for a cluster node run on a laptop), nor than the threads the scheduler gave
    the job (``S2S_JOB_THREADS``, which the workflow's rules set: local Snakemake gives a job
    at most its ``--cores``, which affinity cannot see); where the parameter file declares no
    resources at all, every such CPU, up to :data:`MAX_AUTO_WORKERS`."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        usable = os.cpu_count() or 1
    given = os.environ.get(JOB_THREADS, "").strip()
    if given:
        if not (given.isascii() and given.isdigit()) or int(given) < 1:
            raise ValueError(f"{JOB_THREADS} must be a whole number of threads, at least 1, "
                             f"got {given!r}")
        usable = min(usable, int(given))
    if params.resources:
        return max(1, min(params.resources_for(kind).threads, usable))
    return max(1, min(usable, MAX_AUTO_WORKERS))


def ordered_map(fn: Callable[[T], R], items: Iterable[T], *, workers: int,
                initializer: Callable[..., None] | None = None, initargs: tuple = (),
                ahead: int = 2) -> Iterator[R]:
    """``fn(item)`` for each item, in order. With `workers` > 1 in that many processes (each
    set up by ``initializer(*initargs)``), at most `ahead` items a worker submitted before
    their results are taken, so memory holds a few chunks, not the corpus; with 1, here, one
    after the other (the initializer runs here too). `fn` must be a module-level function."""
    if workers <= 1:
        if initializer is not None:
            initializer(*initargs)
        yield from map(fn, items)
        return
    with ProcessPoolExecutor(workers, initializer=initializer, initargs=initargs) as pool:
        pending: deque[Future[R]] = deque()
        try:
            for item in items:
                pending.append(pool.submit(fn, item))
                if len(pending) >= workers * ahead:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for f in pending:
                f.cancel()


@contextmanager
def closing_named(f: IO[Any]) -> Iterator[IO[Any]]:
    """`f`, a file opened to write, closed on leaving: an error of its close (a full disk when
    the last bytes are flushed) names it (:func:`naming`); after an error of the block it is
    closed quietly, so that the error raised is that first one (a full disk met by another file
    would else be replaced by this one's flush failing too)."""
    try:
        yield f
    except BaseException:
        with suppress(OSError):
            f.close()
        raise
    with naming(f.name):
        f.close()
