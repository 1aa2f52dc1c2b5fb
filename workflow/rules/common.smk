# The pipeline's stages and their resources, read once when the workflow is parsed: generated
# from the parameter file by the stage modules, as dvc.yaml is (s2s.pipeline), so a model added
# to params is a new job here at once, and `--config params=...` plans another profile.

import json
import os
import shlex
import sys

from s2s import dag, pipeline, projectlock
from s2s.config import PARAMS_FILE, load as load_params, resolved
from s2s.io import atomic_write_text


def refuse(error):
    """Stop with the one line `s2s` prints for `error`: Snakemake would put the Python frames
    of the workflow and of s2s before it, which say nothing about a wrong parameter."""
    print(f"{type(error).__name__}: {error}", file=sys.stderr)
    sys.exit(1)


try:
    PARAMS = load_params(config["params"])  # validated: a bad key fails here, named
    PARAM_VALUES = resolved(config["params"])  # as DVC reads it (YAML 1.2), a profile resolved
    STAGES = pipeline.generate(PARAMS)
    _unknown = sorted(set(PARAMS.resources) - {s.kind for s in STAGES} - {"default"})
    if _unknown:
        raise ValueError(f"{config['params']}: 'resources.{_unknown[0]}' is not a stage kind "
                         f"of the pipeline (known: {sorted({s.kind for s in STAGES})}, default)")
except (ValueError, OSError) as e:  # a ConfigError is a ValueError
    refuse(e)


def hold_project():
    """One writer per project (s2s.projectlock): this run holds the project until it ends, or
    stops at once naming the `dvc repro`, Snakemake run or stage that holds it (or the lock
    file, damaged). Its jobs inherit the run's token: each holds an entry of its own for as long
    as it runs, beside the run's, so they run in parallel and outlive a killed engine's hold."""
    try:
        projectlock.hold_for_engine()
    except projectlock.ProjectLockError as e:
        refuse(e)

ALL_OUTPUTS = [o.path for s in STAGES for o in s.outs if not o.persist]
# The check stage here makes its record (metrics/params.json, which the first stages wait for,
# as in DVC) once, and not again on a change of the parameter file: this workflow validated the
# file when it read it (PARAMS, above), and a record rewritten on any change, the same bytes,
# reran every job after it by time alone (a new resources.train.runtime: all 51). A value a
# stage reads reruns it through its stamp (params_stamp), as in DVC.
STAMPS = Path(".snakemake") / "s2s-params"


def params_stamp(stage):
    """A file holding the values of the params keys `stage` reads, rewritten only when they
    change: its time tells Snakemake when they last did, so the job reruns after a change of a
    value it reads and after no other, even where Snakemake has no record of running it (the
    outputs of `dvc repro`; its `params` trigger needs one). A stamp seen for the first time is
    dated 1970: the outputs already there are taken as made with today's values."""
    text = json.dumps(dag.param_values(PARAM_VALUES, stage.params), sort_keys=True, default=str)
    path = STAMPS / f"{stage.rule}.json"
    try:
        old = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        old = None
    if old != text:
        atomic_write_text(path, text)
        if old is None:
            os.utime(path, (0, 0))
    return str(path)


def stage_outputs(stage):
    """Snakemake outputs of a stage. Persistent outputs (training resume points) are left out:
    Snakemake deletes a job's outputs before running it, and a resubmitted job must resume."""
    return [directory(o.path) if o.is_dir else o.path for o in stage.outs if not o.persist]


def stage_cmd(stage):
    """The stage's own command, with the parameter file passed on when it is not params.yaml."""
    cmd = stage.cmd
    if config["params"] != PARAMS_FILE:
        if not cmd.startswith("s2s "):
            raise ValueError(f"stage '{stage.name}': cannot pass --params to '{cmd}'")
        # quoted: the path comes from a config file or --config, and goes to the rule's shell
        cmd = f"s2s --params {shlex.quote(config['params'])} {cmd[len('s2s '):]}"
    return cmd


def stage_inputs(stage):
    """Other stages' outputs, and source paths. A source directory (src/s2s/report) becomes its
    files: Snakemake compares modification times, and editing a file leaves its folder's alone."""
    result = []
    for path in dag.inputs(stage, STAGES):
        if path not in ALL_OUTPUTS and Path(path).is_dir():
            result += sorted(str(f) for f in Path(path).rglob("*")
                             if f.is_file() and "__pycache__" not in f.parts)
        else:
            result.append(ancient(path) if stage.kind == "check" and path == PARAMS_FILE
                          else path)
    return result + [params_stamp(stage)]
