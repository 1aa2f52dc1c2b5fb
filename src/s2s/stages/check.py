"""Stage `check-params`: the parameter file, validated before any stage uses it.

Reads:  the parameter file (``--params``; the command loads and validates all of it first).
Writes: ``<out>`` (``metrics/params.json``): ``{"valid": true, "name_pattern": ...}``. The stage
        depends on the whole file (every section, and keys no schema knows), and its output
        never changes, so a valid change reruns nothing downstream through it; an invalid one
        stops ``dvc repro`` (and ``dvc exp run``) here, naming the key.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from s2s import arch
from s2s.config import NAME_PATTERN, PARAMS_FILE, Params
from s2s.dag import Arg, Stage, command

log = logging.getLogger("s2s")

HELP = "validate the parameter file (the params stage)"
OUT = "metrics/params.json"
ARGS = (Arg("--out", OUT, writes=True,
            help="the JSON file recording that the parameter file passed"),)


def stages(params: Params) -> list[Stage]:
    return [command(
        "check-params", "check", ARGS, deps=(PARAMS_FILE,),
        code=arch.modules(params, params.models, part="config"),
        doc="The parameter file, validated first, whole: it reruns on any change of the file "
            "(a key\n`dvc exp run -S` adds included), so a file `s2s check` refuses never "
            "becomes an experiment.\nThe stages that put a params name into a path or a "
            "command (train, rescore) and download\n(so this is the only first stage) depend "
            "on its output, which is constant.")]


def cli(args, params) -> None:
    main(params.source, out=args.out)


def require_known_corpora(params_file: Path) -> None:
    """Every corpus the file's `data` names is one of the registry's (s2s.data.sources): a
    mistyped id is refused here, naming its key, not at download. (The stage depends on the
    whole file, not on keys: it reads it again, whole.)"""
    from s2s.config import ConfigError, data_roles, load
    from s2s.data.sources import CORPORA

    params = load(params_file)
    for key, ref in data_roles(params):
        if ref.corpus not in CORPORA:
            raise ConfigError(f"{params.source}: '{key}.corpus' names corpus '{ref.corpus}', "
                              f"which is not in the registry (known: {', '.join(CORPORA)})")


def main(params_file: Path, *, out: Path) -> None:
    """The file was validated when it was loaded; record that it passed (and that it is
    complete: DVC reads its keys itself)."""
    from s2s.artifacts import ParamsCheck
    from s2s.config import PARAMS_FILE, require_complete

    require_known_corpora(params_file)
    if Path(params_file).name == Path(PARAMS_FILE).name:  # the file DVC reads (Snakemake may run a profile)
        require_complete(params_file)
        if os.environ.get("DVC_STAGE"):  # run by DVC (Snakemake makes its rules from params)
            _require_current_dag(Path(params_file))

    ParamsCheck(valid=True, name_pattern=NAME_PATTERN.pattern).write(out)
    log.info("%s is valid; wrote %s", params_file, out)


def _require_current_dag(params_file: Path) -> None:
    """Under DVC (which sets DVC_STAGE for a stage's command), the dvc.yaml beside
    `params_file` is what the file generates: a model or system `dvc exp run -S` adds (or
    removes) is a stage only after `s2s dag write`, and an experiment that ran the old stages
    would list the new model as not run. Snakemake needs no dvc.yaml: it makes its rules from the
    file."""
    from s2s import pipeline
    from s2s.config import ConfigError, load

    dvc_yaml = params_file.parent / "dvc.yaml"
    if dvc_yaml.is_file() and pipeline.stale(load(params_file), dvc_yaml):
        raise ConfigError(f"{dvc_yaml} is not what {params_file} generates (a model, system or "
                          f"rescorer added or removed): run `s2s dag write` first (an "
                          f"experiment that adds one: edit params.yaml, `s2s dag write`, then "
                          f"`dvc exp run`, not `dvc exp run -S`)")

