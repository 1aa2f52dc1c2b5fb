"""Stage `download`: the corpora params `data` names, from their sources or a local mirror.

Reads:  params `data`; ``$S2S_MIRROR`` (a local copy of the sources) when it is set.
Writes: ``<out>`` (``data/raw``): one folder per corpus and ``manifest.json`` (sources, sizes,
        line counts and sha256 of every file), written last: present only when all is complete.
        See :mod:`s2s.data.download` for the sources, the resumable client and the checks.
"""

from __future__ import annotations

import os
from pathlib import Path

from s2s.config import DataConfig, Params
from s2s.dag import Out, Stage

HELP = "fetch the corpora (or copy them from $S2S_MIRROR)"
PATHS = ("--out",)


def stages(params: Params) -> list[Stage]:
    return [Stage(name="download", cmd="s2s download --out data/raw",
                  deps=("metrics/params.json",), outs=(Out("data/raw"),), params=("data",))]


def cli(args, params) -> None:
    mirror = os.environ.get("S2S_MIRROR")
    main(params.data, out_dir=args.out, mirror=Path(mirror) if mirror else None)


def main(data: DataConfig, *, out_dir: Path, mirror: Path | None,
         cache_dir: Path | None = None) -> dict:
    """Fetch every corpus `data` names into `out_dir`; return the manifest (also written there)."""
    from s2s.data import download

    return download.fetch_all(data, out_dir=out_dir, mirror=mirror, cache_dir=cache_dir)
