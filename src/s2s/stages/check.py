"""Stage `check-params`: the parameter file, validated before any stage uses it.

Reads:  the parameter file (``--params``; the command loads and validates all of it first).
Writes: ``<out>`` (``metrics/params.json``): ``{"valid": true, "name_pattern": ...}``. Its
        content never changes, so a valid change of the sections it watches reruns nothing
        downstream; an invalid one stops ``dvc repro`` here, naming the key.
"""

from __future__ import annotations

import logging
from pathlib import Path

from s2s.config import NAME_PATTERN, Params
from s2s.dag import Out, Stage

log = logging.getLogger("s2s")

HELP = "validate the parameter file (the params stage)"
PATHS = ("--out",)
OUT = "metrics/params.json"


def stages(params: Params) -> list[Stage]:
    return [Stage(
        name="check-params", cmd=f"s2s check --out {OUT}", deps=(),
        outs=(Out(OUT, cache=False),), params=("models", "systems", "rescore"),
        doc="The parameter file, validated first: the stages that put a params name into a "
            "path or a\ncommand (train, rescore) and download (so this is the only first stage) "
            "depend on its\noutput; it reruns when the sections holding those names change.")]


def cli(args, params) -> None:
    main(params.source, out=args.out)


def main(params_file: Path, *, out: Path) -> None:
    """The file was validated when it was loaded; record that it passed."""
    from s2s.io import atomic_write_json

    atomic_write_json(out, {"valid": True, "name_pattern": NAME_PATTERN.pattern})
    log.info("%s is valid; wrote %s", params_file, out)
