# The pipeline's stages and their resources, read once when the workflow is parsed: generated
# from the parameter file by the stage modules, as dvc.yaml is (s2s.pipeline), so a model added
# to params is a new job here at once, and `--config params=...` plans another profile.

import hashlib
import json
import os
import shlex
import sys
import time

from s2s import dag, pipeline, projectlock
from s2s.config import PARAMS_FILE, load as load_params, read_yaml as load_yaml, resolved
from s2s.io import atomic_write_text
from s2s.stages import check as check_stage


def refuse(error):
    """Stop with the one line `s2s` prints for `error`: Snakemake would put the Python frames
    of the workflow and of s2s before it, which say nothing about a wrong parameter."""
    print(f"{type(error).__name__}: {error}", file=sys.stderr)
    sys.exit(1)


try:
    PARAMS = load_params(config["params"])  # validated: a bad key fails here, named
    # What the check stage refuses beyond loading (its corpora the registry's, its answers the
    # paper's rows and outputs the pipeline makes, its resources the pipeline's stage kinds):
    # here, on every run, as the check stage runs once here (its record counts by existing).
    for _require in (check_stage.require_known_corpora, check_stage.require_known_answers,
                     check_stage.require_known_resources):
        _require(PARAMS)
    PARAM_VALUES = resolved(config["params"])  # as DVC reads it (YAML 1.2), a profile resolved
    STAGES = pipeline.generate(PARAMS)
    # each params key a stage declares is in the file: its rule reads it (params_stamp)
    check_stage.require_declared_keys(PARAMS, STAGES, PARAM_VALUES)
except (ValueError, OSError) as e:  # a ConfigError is a ValueError
    refuse(e)

# The file every job's `s2s` reads (the default of a stage's --params), in the environment the
# jobs inherit (a SLURM job's Snakemake reads this file again and sets it too): not in the
# commands, which Snakemake compares with those of the last run, so a run of another file with
# the same values reruns nothing through them.
os.environ.update(S2S_PARAMS=config["params"])  # set, not read: no `envvars` to declare


def hold_project():
    """One writer per project (s2s.projectlock): this run holds the project until it ends, or
    stops at once naming the `dvc repro`, Snakemake run or stage that holds it (or the lock
    file, damaged). Its jobs inherit the run's token: each holds an entry of its own for as long
    as it runs, beside the run's, so they run in parallel and outlive a killed engine's hold."""
    try:
        projectlock.hold_for_engine()
    except projectlock.ProjectLockError as e:
        refuse(e)

def other_params_note():
    """Where this run reads another parameter file than params.yaml (`--config params=...`):
    one message saying so, and what `dvc commit -f` would then do; None for params.yaml. DVC
    reads params.yaml alone: committed, these outputs would be recorded with its values, and
    `dvc status` would call them up to date."""
    path = Path(config["params"])
    if path.resolve() == Path(PARAMS_FILE).resolve():
        return None
    profiles = Path("profiles").resolve()
    if path.suffix == ".yaml" and path.resolve().parent == profiles:
        first = f"Run `s2s profile {path.stem}` first (params.yaml then holds its values)"
    else:
        first = f"Make params.yaml hold {path}'s values first"
    return (f"s2s: this run made its outputs from {path}, not params.yaml, which DVC reads: "
            f"`dvc commit -f` would record params.yaml's values in dvc.lock for them, and "
            f"`dvc status` would then call them up to date. {first}, or do not commit.")


ALL_OUTPUTS = [o.path for s in STAGES for o in s.outs if not o.persist]
# The check stage's record (metrics/params.json): constant, see stage_inputs.
CHECK_RECORD = next(o.path for s in STAGES if s.kind == "check" for o in s.outs)
# The check stage here makes its record (metrics/params.json, which the first stages wait for,
# as in DVC) once, and not again on a change of the parameter file: this workflow validated the
# file when it read it (PARAMS, above), and a record rewritten on any change, the same bytes,
# reran every job after it by time alone (a new resources.train.runtime: all 51). A value a
# stage reads reruns it through its stamp (params_stamp), as in DVC.
STAMPS = Path(".snakemake") / "s2s-params"
_stamps = {}


_lock_stages = []  # dvc.lock's stages, once read


def _lock():
    """dvc.lock's stages, read once; {} where there is none (or it is damaged)."""
    if not _lock_stages:
        try:
            stages = load_yaml("dvc.lock")["stages"]
        except (ValueError, OSError, KeyError, TypeError):  # no lock, no stages, not YAML
            stages = {}
        _lock_stages.append(stages if isinstance(stages, dict) else {})
    return _lock_stages[0]


def _locked(stage):
    """The values of `stage`'s params keys that dvc.lock records (DVC made its outputs with
    them, or adopted them with `dvc commit`), as JSON; None where it records none. Under another
    parameter file (`--config params=...`) too: the outputs in place are DVC's all the same."""
    try:
        entry = _lock()[stage.name]["params"][PARAMS_FILE]
        return json.dumps({k: entry.get(k) for k in stage.params}, sort_keys=True, default=str)
    except (KeyError, TypeError, AttributeError):  # no such stage, or no params of it
        return None


def _locked_cmd(stage):
    """The command dvc.lock records for `stage` (DVC ran it, or adopted its outputs with `dvc
    commit`); None where it records none."""
    entry = _lock().get(stage.name)
    cmd = entry.get("cmd") if isinstance(entry, dict) else None
    return cmd if isinstance(cmd, str) else None


def _lock_entry(stage):
    """dvc.lock's whole entry of `stage` (command, dependencies, params, outputs' hashes), as
    JSON; None where it has none. DVC rewrites it when it runs the stage or adopts its outputs."""
    entry = _lock().get(stage.name)
    return None if entry is None else json.dumps(entry, sort_keys=True, default=str)


def _wanted(stage):
    """This run's values of the params keys `stage` reads, as JSON."""
    return json.dumps(dag.param_values(PARAM_VALUES, stage.params), sort_keys=True, default=str)


def _record_text(values, entry, cmd):
    """A record: the values a stage's outputs were made with, dvc.lock's entry of the stage as
    it was then (both JSON), and the command that made them."""
    return json.dumps({"values": json.loads(values),
                       "dvc_lock": None if entry is None else json.loads(entry),
                       "cmd": cmd},
                      sort_keys=True, default=str)


# A record of an older workflow: the values alone, compared alone (dvc.lock's entry unseen).
_UNSEEN = object()


def _read_record(path):
    """(values, dvc.lock's entry then, command) of a record, values and entry as JSON; None
    where there is none, or it is damaged. A record of an older workflow holds the values alone:
    its entry is _UNSEEN; one written before the command was recorded has no command: None."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if isinstance(data, dict) and set(data) in ({"values", "dvc_lock"},
                                                {"values", "dvc_lock", "cmd"}):
        seen, cmd = data["dvc_lock"], data.get("cmd")
        return (json.dumps(data["values"], sort_keys=True, default=str),
                None if seen is None else json.dumps(seen, sort_keys=True, default=str),
                cmd if isinstance(cmd, str) else None)
    return json.dumps(data, sort_keys=True, default=str), _UNSEEN, None


def stamp_paths(stage):
    """(made, asked): `made` records the values of the params keys `stage` reads and the command
    that Snakemake last made its outputs with, and dvc.lock's entry of the stage then; `asked`
    this run's, which the job copies over `made` when it succeeds. The names depend on the values
    alone, as they did when Snakemake compared the rule's params (record_params): a project's
    metadata from then stays that of the same rules."""
    digest = hashlib.sha256(_wanted(stage).encode()).hexdigest()[:16]
    return STAMPS / f"{stage.rule}.json", STAMPS / f"{stage.rule}.{digest}.json"


def params_stamp(stage):
    """The input function of `stage`'s stamp: a file dated now where the values of the params
    keys it reads, or the command, that its outputs were made with differ from this run's, 1970
    where they are the same, so Snakemake reruns the job after such a change and after no other,
    even where it has no record of running it (outputs of `dvc repro`). Snakemake's own `params`
    trigger is off (workflow/profiles/default): it compares the rule's params with its own last
    run's alone, and reran a stage `dvc repro` had run since with the values of now.
    The values and command the outputs were made with are those of the engine that wrote its
    record last: Snakemake's (`made`, stamp_paths), unless dvc.lock's entry of the stage is no
    longer the one that record saw; then dvc.lock's (DVC ran the stage, or adopted its outputs,
    since). The record says which by what it holds, not by its date: the stamp is `made` itself,
    dated here. Seen for the first time (a new project, a deleted .snakemake), the record is
    dvc.lock's where it has them, else this run's (the outputs there are taken as made with
    them). A record written before the command was recorded counts as made with this run's
    command, which a real run writes into it. A dry run writes no record: it is called when
    Snakemake builds the jobs, after it knows it is one, and a first sight there is dated in a
    file of its own (`dry-run/`), which no run reads; a later run decides the record as if the
    dry run had not been."""
    name = stage.rule

    def stamp(wildcards):
        if name not in _stamps:
            want, entry, (made, asked) = _wanted(stage), _lock_entry(stage), stamp_paths(stage)
            # a dry run, or a command that only looks (--dag, --summary, --list-changes: no
            # executor plugin then, so Snakemake's dryrun says False)
            looking = workflow.dryrun or workflow.executor_plugin is None
            record = _read_record(made)
            if record is None:
                record = (_locked(stage) or want, entry, _locked_cmd(stage) or stage.cmd)
                if looking:
                    made = STAMPS / "dry-run" / made.name
                atomic_write_text(made, _record_text(*record))
            elif record[2] is None and not looking:
                # written before the command was recorded: made with this run's command, and
                # (an older workflow's record, values alone) seen with dvc.lock's entry of now
                record = (record[0], entry if record[1] is _UNSEEN else record[1], stage.cmd)
                atomic_write_text(made, _record_text(*record))
            if not looking:  # this run's; dvc.lock's entry may differ from a former run's
                atomic_write_text(asked, _record_text(want, entry, stage.cmd))
            values, seen, cmd = record
            if seen is not _UNSEEN and entry != seen:  # DVC wrote the stage's entry since
                values = _locked(stage) or values
                cmd = _locked_cmd(stage) or cmd
            t = 0 if values == want and cmd in (None, stage.cmd) else time.time()
            if t:
                # Snakemake takes an input newer than the outputs as unchanged where its content
                # is that of the job's last run (it records its checksum): a record ended by a
                # line break is no record a job wrote. Its values stay; a dry run adds it too.
                text = made.read_text(encoding="utf-8")
                if not text.endswith("\n"):
                    atomic_write_text(made, f"{text}\n")
            os.utime(made, (t, t))
            _stamps[name] = str(made)
        return _stamps[name]

    return stamp


def record_params(stage):
    """The shell that records, once the job succeeded, the values it ran with (params_stamp)."""
    made, asked = stamp_paths(stage)
    return f"cp {shlex.quote(str(asked))} {shlex.quote(str(made))}"


def stage_outputs(stage):
    """Snakemake outputs of a stage. Persistent outputs (training resume points) are left out:
    Snakemake deletes a job's outputs before running it, and a resubmitted job must resume."""
    return [directory(o.path) if o.is_dir else o.path for o in stage.outs if not o.persist]


def stage_inputs(stage):
    """Other stages' outputs, and source paths. A source directory (src/s2s/report) becomes its
    files: Snakemake compares modification times, and editing a file leaves its folder's alone."""
    result = []
    for path in dag.inputs(stage, STAGES):
        if path not in ALL_OUTPUTS and Path(path).is_dir():
            result += sorted(str(f) for f in Path(path).rglob("*")
                             if f.is_file() and "__pycache__" not in f.parts)
        elif path == PARAMS_FILE:
            # The report: the file this run reads (a profile under --config params=), whose
            # name and sha256 it prints. The check: params.yaml whichever file this run reads,
            # and `ancient`, so only that it exists. It validates the file this run read already
            # (PARAMS, above), and its record is constant: made once, not again on a change of
            # the file, nor on a run of another file with the same values (Snakemake compares
            # the names of a job's input files with its last run's: the check reran when
            # `--config params=profiles/x.yaml` named another, and every job after it by time).
            if stage.kind != "check":
                result.append(config["params"])
            elif Path(PARAMS_FILE).exists():
                result.append(ancient(PARAMS_FILE))
        elif path == CHECK_RECORD:
            # The check's record, which download, train and rescore wait for (as in DVC): only
            # that it exists. Its bytes never change, but `dvc repro` rewrites it after any edit
            # of params.yaml, and Snakemake, which has no record of DVC's run, found it newer
            # than download's outputs and reran every job by time alone. A value a stage reads
            # reruns it through its stamp (params_stamp), as in DVC.
            result.append(ancient(path))
        else:
            result.append(path)
    return result
