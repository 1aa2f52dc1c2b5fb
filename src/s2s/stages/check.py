"""Stage `check-params`: the parameter file, validated before any stage uses it: what loading
it checks (s2s.config), and what needs more than the file: that its corpora are the registry's,
its answers the paper's rows and the rescore stage's outputs, its resources the pipeline's stage
kinds, and that it writes each params key a stage declares (DVC reads those from the file, with
no default). The Snakemake workflow makes the same checks whenever it reads the file.

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
        "check-params", "check", ARGS, deps=(PARAMS_FILE, "src/s2s/paper.yaml"),
        code=arch.modules(params, params.models, part="config"),
        doc="The parameter file, validated first, whole: it reruns on any change of the file "
            "(a key\n`dvc exp run -S` adds included), so a file `s2s check` refuses never "
            "becomes an experiment.\nThe stages that put a params name into a path or a "
            "command (train, rescore) and download\n(so this is the only first stage) depend "
            "on its output, which is constant.")]


def cli(args, params) -> None:
    main(params.source, out=args.out)


def require_known_corpora(params: Params) -> None:
    """Every corpus the file's `data` names is one of the registry's (s2s.data.sources): a
    mistyped id is refused here, naming its key, not at download."""
    from s2s.config import ConfigError, data_roles
    from s2s.data.sources import CORPORA

    for key, ref in data_roles(params):
        if ref.corpus not in CORPORA:
            raise ConfigError(f"{params.source}: '{key}.corpus' names corpus '{ref.corpus}', "
                              f"which is not in the registry (known: {', '.join(CORPORA)})")


def require_own_rescorer_names(params: Params) -> None:
    """No rescorer takes the name of an output the rescore stage ``oracle`` writes itself
    (baseline, oracle): its outputs and that stage's would share a name, and the evaluate stage
    would score the baseline's own 1-best as the rescorer's."""
    from s2s.config import ConfigError
    from s2s.layout import RESCORE_FIXED

    for name in params.rescore.rescorers:
        if name in RESCORE_FIXED:
            raise ConfigError(f"{params.source}: 'rescore.rescorers.{name}': {name} is the name of "
                              f"an output of the rescore stage's own "
                              f"({', '.join(RESCORE_FIXED)}): give the rescorer another name")


def require_known_answers(params: Params) -> None:
    """Each row `report.table1` / `report.table2` answers is a row of the paper's (paper.yaml),
    answered by an output the pipeline makes: a system of `systems` at one of its beams, or a
    rescorer of `rescore.rescorers` or the rescore stage's own (baseline, oracle). A name the
    profile lacks, loaded, is a row shown as not run: a typo would turn the row, and the claims
    that read it, into "not run" at the end of the pipeline. And the rescored baseline's n-best
    lists hold more than one hypothesis, or rescoring has nothing to choose."""
    from s2s.config import ConfigError
    from s2s.layout import RESCORE_FIXED
    from s2s.paper import TABLES, check_answers

    check_answers(params)
    require_own_rescorer_names(params)
    p = params
    own = (*p.rescore.rescorers, *RESCORE_FIXED)
    if p.rescore.baseline is not None and p.data.nbest is None:
        nbest = p.systems[p.rescore.baseline].nbest
        if nbest < 2:
            raise ConfigError(f"{p.source}: 'systems.{p.rescore.baseline}.nbest' is {nbest}, but "
                              f"'rescore.baseline' names this system, whose n-best lists Table 2 "
                              f"rescores: it must be more than 1 (a list of one hypothesis "
                              f"leaves no choice to rescore)")
    for table in TABLES:
        for row, answer in getattr(p.report, table).items():
            key = f"report.{table}.{row}"
            if answer.system is not None:
                if answer.system not in p.systems:
                    raise ConfigError(f"{p.source}: '{key}.system' names system "
                                      f"'{answer.system}', which is not under 'systems' (known: "
                                      f"{', '.join(p.systems)})")
                beams = p.systems[answer.system].beams
                if answer.beam not in beams:
                    raise ConfigError(f"{p.source}: '{key}.beam' ({answer.beam}) is not a beam "
                                      f"of system '{answer.system}' (its beams: "
                                      f"{', '.join(map(str, beams))})")
            if answer.rescore is not None and answer.rescore not in own:
                raise ConfigError(f"{params.source}: 'report.{table}.{row}.rescore' names "
                                  f"rescorer '{answer.rescore}', which is neither under "
                                  f"'rescore.rescorers' (known: "
                                  f"{', '.join(params.rescore.rescorers) or 'none'}) nor one of "
                                  f"the rescore stage's own ({', '.join(RESCORE_FIXED)})")


def stage_kinds(params: Params) -> dict[str, str]:
    """The kinds of the stages the pipeline runs for `params` (s2s.dag.Stage.kind: `train` for
    every train-M), each with "" or why it has no stage here: those s2s.pipeline.generate gives
    (a test holds the two the same), without building the pipeline. What `resources` is keyed
    by, with `default` (Snakemake refuses another key, workflow/rules/common.smk)."""
    from s2s.paper import cost_systems
    from s2s.stages import STAGES  # the package's list only: no stage module is imported

    p = params
    why = {"rescore": "" if p.rescore.baseline is not None else "'rescore.baseline' is null",
           "attention": ("" if p.analysis.attention_system is not None
                         else "no 'analysis.attention_system'"),
           "timing": ("" if len(cost_systems(p)) >= 2 else "'report.table1' answers no two "
                      "rows of the cost claim with a translation")}
    return {kind: why.get(kind, "") for kind in STAGES}


def require_known_resources(params: Params) -> None:
    """Each key of `resources` is `default` or the kind of a stage this profile runs (the
    Snakemake workflow refuses another when it reads the file; DVC never reads them)."""
    from s2s.config import ConfigError

    kinds = stage_kinds(params)
    for kind in params.resources:
        if kind == "default":
            continue
        if kind not in kinds:
            raise ConfigError(f"{params.source}: 'resources.{kind}' is not a stage kind of the "
                              f"pipeline (known: {', '.join(kinds)}, default)")
        if kinds[kind]:
            raise ConfigError(f"{params.source}: 'resources.{kind}' is a stage kind this "
                              f"profile does not run ({kinds[kind]}): remove it")


def require_declared_keys(params: Params, stages: list[Stage] | None = None,
                          values: dict | None = None) -> None:
    """Each params key a stage of the pipeline declares (its dvc.yaml `params`) is in the file
    (`values`: the file as DVC reads it, a profile's `extends` resolved). Loading fills a key
    with a default where the file leaves it out, but DVC reads the declared keys from the file
    itself: it failed at that stage, late ("Parameters '...' are missing"), and Snakemake, which
    reads them too, with a traceback when it read the file. `stages`: those of s2s.pipeline."""
    from s2s import pipeline
    from s2s.config import ConfigError, resolved
    from s2s.dag import DagError, param_values

    if stages is None:
        stages = pipeline.generate(params)
    if values is None:
        values = resolved(params.source)
    declaring: dict[str, list[str]] = {}
    for stage in stages:
        for key in stage.params:
            declaring.setdefault(key, []).append(stage.name)
    for key, names in declaring.items():
        try:
            param_values(values, (key,))
        except DagError:
            others = f" (and {len(names) - 1} other stage(s))" if len(names) > 1 else ""
            default = _default_of(params, key)
            write = f"write it (its default: {default})" if default is not None else "write it"
            raise ConfigError(f"{params.source}: '{key}' is not in the file, but stage "
                              f"'{names[0]}'{others} declares it, and DVC reads a stage's "
                              f"params keys from the file itself (it would fail at that "
                              f"stage): {write}") from None


def _default_of(params: Params, key: str) -> str | None:
    """The value loading gave `key` (its default, where the file leaves it out), as JSON; None
    where it is no plain value (a section)."""
    import dataclasses
    import json

    value: object = params
    for part in key.split("."):
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            value = getattr(value, part, None)
        elif isinstance(value, dict):
            value = value.get(part)
        else:
            return None
    if dataclasses.is_dataclass(value) or isinstance(value, dict):
        return None
    try:
        return json.dumps(value)
    except TypeError:
        return None


def main(params_file: Path, *, out: Path) -> None:
    """The file was validated when it was loaded; record that it passed (and that it is
    complete: DVC reads its keys itself)."""
    from s2s.artifacts import ParamsCheck
    from s2s.config import PARAMS_FILE, load, require_complete

    params = load(params_file)  # whole: the stage depends on the whole file, not on keys
    require_known_corpora(params)
    require_known_answers(params)
    require_known_resources(params)
    require_declared_keys(params)
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

