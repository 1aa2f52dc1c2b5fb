"""Progress that stays readable in logs: a live tqdm bar on a terminal, and in a file or a pipe a
plain log line every 30 s (never the ``\\r`` fragments a bar leaves in a file).

tqdm with a long ``mininterval`` still redraws with ``\\r``, so a log line glued to a bar fragment
is what a log file gets; the non-terminal path here is a few lines of our own instead.
"""

from __future__ import annotations

import logging
import sys
import time

from tqdm import tqdm

log = logging.getLogger("s2s.progress")

INTERVAL = 30.0  # seconds between two plain progress lines


class PlainProgress:
    """tqdm's ``update`` / ``set_postfix`` / ``close`` as one log line every ``interval`` seconds
    and a last line at ``close``."""

    def __init__(self, *, total: int | None = None, desc: str = "", unit: str = "it",
                 initial: int = 0, disable: bool = False, interval: float = INTERVAL,
                 clock=time.monotonic) -> None:
        self.total, self.desc, self.unit, self.n = total, desc, unit, initial
        self.disable, self.interval, self._clock = disable, interval, clock
        self._start = self._last = clock()
        self._initial = initial
        self._postfix = ""
        self._closed = False

    def _line(self, final: bool) -> str:
        elapsed = max(self._clock() - self._start, 1e-9)
        rate = (self.n - self._initial) / elapsed
        done = f"{self.n:,}" + (f"/{self.total:,} ({100 * self.n / self.total:.0f}%)"
                                if self.total else "")
        eta = ""
        if not final and self.total and rate > 0:
            eta = f", about {(self.total - self.n) / rate:.0f}s left"
        what = "done: " if final else ""
        return (f"{self.desc + ': ' if self.desc else ''}{what}{done} {self.unit} in "
                f"{elapsed:.0f}s ({rate:.1f} {self.unit}/s{eta})"
                + (f" {self._postfix}" if self._postfix else ""))

    def update(self, n: int = 1) -> None:
        self.n += n
        now = self._clock()
        if not self.disable and now - self._last >= self.interval:
            self._last = now
            log.info("%s", self._line(final=False))

    def set_postfix(self, **kwargs) -> None:
        self._postfix = " ".join(f"{k}={v}" for k, v in kwargs.items())

    def close(self) -> None:
        if not self._closed and not self.disable:
            log.info("%s", self._line(final=True))
        self._closed = True


def progress(**kwargs) -> tqdm | PlainProgress:
    """A tqdm bar on a terminal; :class:`PlainProgress` when stderr is a file or a pipe."""
    if sys.stderr.isatty():
        return tqdm(file=sys.stderr, mininterval=0.5, dynamic_ncols=True, leave=True, **kwargs)
    allowed = {k: kwargs[k] for k in ("total", "desc", "unit", "initial", "disable")
               if k in kwargs}
    return PlainProgress(**allowed)
