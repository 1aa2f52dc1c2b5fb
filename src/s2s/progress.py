"""Progress bars that stay readable in logs: live on a terminal, every 30 s otherwise."""

from __future__ import annotations

import sys

from tqdm import tqdm


def progress(**kwargs) -> tqdm:
    tty = sys.stderr.isatty()
    return tqdm(file=sys.stderr, mininterval=0.5 if tty else 30.0, dynamic_ncols=tty,
                leave=tty, **kwargs)
