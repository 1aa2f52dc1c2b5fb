"""The Snakemake workflow (workflow/) runs the DAG of dvc.yaml: the stages it generates from params
are those DVC reads from the generated dvc.yaml, `snakemake -n` plans one job per DVC stage for
every profile, the smoke profile run through
Snakemake writes the metrics DVC writes, and after `dvc commit -f` DVC and Snakemake both find
nothing to do."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest
import yaml

from conftest import BIN, ROOT, need_mirror, project, run
from s2s import dag, pipeline
from s2s.config import load
from helpers import profile_dict, profile_text

PROFILES = sorted(p.stem for p in (ROOT / "profiles").glob("*.yaml"))
# Fields of metrics/train/*.json that describe the run, not its result.
RUN_FIELDS = {"tgt_words_per_sec", "train_seconds", "wall_seconds", "threads"}


def snakemake(repo: Path, *args: str, check: bool = True, timeout: float = 300):
    return run([str(BIN / "snakemake"), *args], repo, check=check, timeout=timeout)


def planned_jobs(output: str) -> dict[str, int]:
    """The 'Job stats' table of a dry run: rule -> number of jobs."""
    table = output.split("Job stats:", 1)[1].split("total", 1)[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", table, re.M)}


def dvc_stages(repo: Path) -> set[str]:
    return set(run([str(BIN / "dvc"), "stage", "list", "--all", "--name-only"], repo).stdout.split())


def rule_name(stage: str) -> str:
    return re.sub(r"\W", "_", stage)


@pytest.fixture(scope="module")
def plan_repo(tmp_path_factory) -> Path:
    return project(tmp_path_factory.mktemp("plan") / "repo")


# ---------------------------------------------------------------------------------------------
# s2s.dag against DVC's own reading of dvc.yaml


def dvc_index(repo: Path) -> dict[str, tuple]:
    from dvc.dependency.param import ParamsDependency
    from dvc.repo import Repo

    with Repo(str(repo)) as r:
        return {
            s.name: (
                s.cmd,
                sorted(d.def_path for d in s.deps if not isinstance(d, ParamsDependency)),
                sorted((o.def_path, o.use_cache, o.persist) for o in s.outs),
                sorted(k for d in s.deps if isinstance(d, ParamsDependency) for k in d.params),
            )
            for s in r.index.stages
        }


def made_already(repo: Path) -> list[Path]:
    """Every output of `repo`'s stages, made (empty files and folders); their paths."""
    outs = []
    for stage in pipeline.generate(load(repo / "params.yaml")):
        for out in stage.outs:
            path = repo / out.path
            if out.is_dir:
                path.mkdir(parents=True, exist_ok=True)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.touch()
            outs.append(path)
    return outs


@pytest.mark.parametrize("profile", PROFILES)
def test_the_generated_stages_are_what_dvc_reads(profile, plan_repo):
    (plan_repo / "params.yaml").write_text(profile_text(profile), encoding="utf-8")
    params = load(plan_repo / "params.yaml")
    pipeline.write(params, plan_repo / "dvc.yaml")
    want = dvc_index(plan_repo)

    def index(stages):
        return {s.name: (s.cmd, sorted(s.deps), sorted((o.path, o.cache, o.persist)
                                                       for o in s.outs), sorted(s.params))
                for s in stages}

    # What Snakemake runs (generated from params) is what DVC reads from the generated file.
    assert index(pipeline.generate(params)) == want


def test_dag_inputs_map_dependencies_to_the_outputs_that_make_them():
    stages = {s.name: s for s in pipeline.generate(load(ROOT / "profiles" / "smoke.yaml"))}
    everything = list(stages.values())
    # a file inside another stage's output directory -> that directory; source files stay
    inputs = dag.inputs(stages["rescore-oracle"], everything)
    assert sorted(p for p in inputs if not p.startswith("src/")) == [
        "data/prepared", "data/raw", "metrics/params.json", "outputs/translate/baseline"]
    assert "src/s2s/decode/rescore.py" in inputs
    # a directory holding other stages' outputs -> those outputs; a source directory stays
    report = dag.inputs(stages["report"], everything)
    assert "metrics/train/reversed_3.json" in report and "metrics/train" not in report
    assert "outputs/translate/ensemble5" in report and "data/raw" in report
    assert "src/s2s/report/render.py" in report
    # the resume point is no output of either executor: DVC never hashes or deletes it
    assert all(not o.path.startswith("checkpoints/") for s in stages.values() for o in s.outs)


def test_dag_inputs_by_path_component_in_the_outputs_order():
    def stage(name, deps=(), outs=()):
        return dag.Stage(name=name, cmd=name, deps=tuple(deps),
                         outs=tuple(dag.Out(p, persist=p.startswith("ckpt")) for p in outs),
                         params=())

    folder = [f"metrics/t/{n}.json" for n in (5, 3, 9, 1, 7)]  # in no sorted or hashed order
    makers = [stage("a", outs=["out/b", "out/a/", "out/ab", "ckpt/x"]),
              stage("b", outs=["data/set", *folder])]
    reader = stage("r", deps=["out/a/f.txt", "out/a", "metrics/t/", "metrics/t2", "out/ab/c",
                              "src/x.py", "data/set", "ckpt/x/last.pt", "metrics/t/1.json"])
    # a stage whose dependency lies inside its own output (as a resume point does)
    own = stage("w", deps=["work/dir/seed.txt", "out/b"], outs=["work/dir"])
    everything = [*makers, reader, own]
    assert dag.inputs(reader, everything) == [
        "out/a/",  # a file inside a folder output, and the folder named without its "/"
        *folder,  # a folder of outputs (named with its "/"): its outputs, in their order
        "metrics/t2",  # a sibling whose name starts alike is not inside: a source path
        "out/ab", "src/x.py", "data/set",
        "ckpt/x/last.pt"]  # a persistent output is no input
    # its own output is not its input: the file stays a path of its own
    assert dag.inputs(own, everything) == ["work/dir/seed.txt", "out/b"]


# ---------------------------------------------------------------------------------------------
# Dry runs: cheap, one per profile


def test_the_parameter_file_reaches_the_rules_shell_quoted(tmp_path):
    """--config params=... is a path from the command line or a config file: quoted, a space
    or a $(...) in it is part of the name, never a word split or a command the shell runs."""
    repo = project(tmp_path / "repo")
    name = "profiles/my smoke $(touch INJECTED).yaml"
    shutil.copy(repo / "profiles" / "smoke.yaml", repo / name)
    proc = snakemake(repo, "metrics/params.json", "--cores", "1", "--config", f"params={name}",
                     check=False, timeout=600)
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-3000:])
    assert not (repo / "INJECTED").exists()
    assert json.loads((repo / "metrics" / "params.json").read_text())  # the check ran on it


def test_which_file_holds_the_same_params_reruns_nothing(tmp_path):
    """`--config params=<file>` put `--params <file>` into every rule's command (a rule param)
    and the file into the check rule's inputs: Snakemake compares both, so a later plain run
    (params.yaml holding the same bytes) reran the check, which rewrote metrics/params.json, and
    every job after it. The jobs now hear the file from S2S_PARAMS, outside the compared params,
    and the check's inputs do not name it."""
    repo = project(tmp_path / "repo")
    shutil.copy(repo / "params.yaml", repo / "profiles" / "same.yaml")
    snakemake(repo, "metrics/params.json", "--cores", "1", "--config",
              "params=profiles/same.yaml")
    made = (repo / "metrics" / "params.json").stat().st_mtime_ns
    # the job read the file it was told
    assert "profiles/same.yaml is valid" in (repo / "logs" / "check_params.log").read_text()
    for config in ((), ("--config", "params=profiles/same.yaml")):
        dry = snakemake(repo, "-n", "metrics/params.json", *config)
        assert "Nothing to be done" in dry.stdout + dry.stderr, (config, dry.stdout[-3000:])
    snakemake(repo, "metrics/params.json", "--cores", "1")  # a real run: nothing to run either
    assert (repo / "metrics" / "params.json").stat().st_mtime_ns == made


def test_a_run_of_another_parameter_file_says_what_dvc_commit_would_record(tmp_path):
    """`dvc commit -f` after a `--config params=profiles/x.yaml` run recorded params.yaml's
    values in dvc.lock for outputs made with x's, and `dvc status` called them up to date. The
    run says so when it starts and when it ends; a dry run, and a run of params.yaml, do not."""
    repo = project(tmp_path / "repo")
    target = ("metrics/params.json", "--cores", "1")
    other = ("--config", "params=profiles/smoke.yaml")
    proc = snakemake(repo, *target, *other)
    note = [line for line in proc.stderr.splitlines() if "dvc commit -f" in line]
    assert len(note) == 2, proc.stderr[-3000:]  # at the start and at the end
    assert "made its outputs from profiles/smoke.yaml, not params.yaml" in note[-1]
    assert "`s2s profile smoke` first" in note[-1] and "or do not commit" in note[-1]
    dry = snakemake(repo, "-n", *target, "--forcerun", "check_params", *other)
    assert "dvc commit -f" not in dry.stdout + dry.stderr
    shutil.copy(repo / "params.yaml", repo / "elsewhere.yaml")
    proc = snakemake(repo, *target, "--forcerun", "check_params",
                     "--config", "params=elsewhere.yaml")
    assert "Make params.yaml hold elsewhere.yaml's values first" in proc.stderr
    for config in ((), ("--config", "params=params.yaml"), ("--config", "params=./params.yaml")):
        proc = snakemake(repo, *target, "--forcerun", "check_params", *config)
        assert "check_params" in proc.stderr and "dvc commit -f" not in proc.stderr, config


@pytest.mark.parametrize("key, value, says", [
    ("report.table1.forward_beam12.system", "forwrd",
     "'report.table1.forward_beam12.system' names system 'forwrd', which is not under "
     "'systems'"),
    ("data.test.corpus", "multi30k.tset",
     "'data.test.corpus' names corpus 'multi30k.tset', which is not in the registry"),
    ("resources.trian", {"threads": 1},
     "'resources.trian' is not a stage kind of the pipeline (known: check, download"),
])
def test_what_the_check_stage_refuses_is_refused_when_the_workflow_reads_the_file(
        tmp_path, key, value, says):
    """The check stage ran its cross-reference checks (the answers' systems, the corpora, the
    resources' kinds) once: Snakemake never reruns it once its record exists, and a mistyped
    answer then turned its row and the claims that read it into "not run". The workflow makes
    the same checks whenever it reads the file: one line, no traceback, no job."""
    repo = project(tmp_path / "repo")
    made_already(repo)  # the check's record among them: its job would not run again
    params = profile_dict("smoke")
    *parents, leaf = key.split(".")
    node = params
    for part in parents:
        node = node[part]
    assert leaf in node or parents == ["resources"], key
    node[leaf] = value
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    proc = snakemake(repo, "-n", check=False)
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert f"ConfigError: params.yaml: {says}" in proc.stderr, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]


def test_a_declared_key_the_file_leaves_out_is_one_line_not_a_traceback(tmp_path):
    """A key with a default that a stage declares (the report's `evaluate.min_group`), left out
    of the file: the rules read the declared keys' values, and Snakemake stopped with a
    DagError's traceback. It is the check's one line now, naming the key and the stage."""
    repo = project(tmp_path / "repo")
    params = profile_dict("smoke")
    del params["evaluate"]["min_group"]
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    proc = snakemake(repo, "-n", check=False)
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert ("ConfigError: params.yaml: 'evaluate.min_group' is not in the file, but stage "
            "'report' declares it") in proc.stderr, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and 'File "' not in proc.stderr, proc.stderr[-3000:]


@pytest.mark.parametrize("profile", PROFILES)
def test_snakemake_plans_one_job_per_dvc_stage(profile, plan_repo):
    (plan_repo / "params.yaml").write_text(profile_text(profile), encoding="utf-8")
    pipeline.write(load(plan_repo / "params.yaml"), plan_repo / "dvc.yaml")
    stages = dvc_stages(plan_repo)
    # The Snakefile reads the profile itself, not params.yaml: --config params=...
    proc = snakemake(plan_repo, "-n", "--config", f"params=profiles/{profile}.yaml")
    jobs = planned_jobs(proc.stdout)
    assert jobs.pop("all") == 1
    assert set(jobs.values()) == {1}
    assert set(jobs) == {rule_name(s) for s in stages}
    # params, 4 data stages (download, prepare, vocab, ids), a train stage per model, a
    # translate stage per system, a rescore stage per rescorer and the oracle's, analyze,
    # attention, timing, evaluate, summary, export, claims, report (default and smoke: 54;
    # wmt14, paper and paper_statmt: 38; quick, without rescoring, attention or timing: 23)
    p = load(plan_repo / "params.yaml")
    rescores = 0 if p.rescore.baseline is None else len(p.rescore.rescorers) + 1
    others = 8 - (p.analysis.attention_system is None) - (p.report.table1.get("ensemble5_beam2")
                                                         is None)
    assert len(stages) == 5 + len(p.models) + len(p.systems) + rescores + others
    assert len(stages) == {"default": 54, "smoke": 54, "wmt14": 38, "paper": 38,
                           "paper_statmt": 38, "quick": 23}[profile]


def test_a_new_model_in_params_is_a_new_job(plan_repo):
    params = profile_dict("smoke")
    params["models"]["reversed_6"] = {"reverse_source": True, "init_seed": 16, "order_seed": 116}
    (plan_repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    run([str(BIN / "s2s"), "dag", "write"], plan_repo)  # for DVC; Snakemake reads params itself
    assert "train-reversed_6" in dvc_stages(plan_repo)
    jobs = planned_jobs(snakemake(plan_repo, "-n").stdout)
    assert jobs["train_reversed_6"] == 1


def test_resources_come_from_the_params(plan_repo):
    """paper: 1 GPU per training job (one model per GPU) and per decoder, the timing stage on a
    GPU too; with the SLURM profile's partition."""
    (plan_repo / "params.yaml").write_text(profile_text("paper"), encoding="utf-8")
    args = ["-n", "--config", "params=profiles/paper.yaml"]
    if importlib.util.find_spec("snakemake_executor_plugin_slurm"):
        args += ["--profile", "workflow/profiles/slurm"]
    out = snakemake(plan_repo, *args).stdout
    resources = {m[1]: dict(kv.split("=", 1) for kv in m[2].split(", "))
                 for m in re.finditer(r"^rule (\w+):\n(?:.*\n)*?\s+resources: (.*)$", out, re.M)}
    assert resources["train_reversed_3"]["gpu"] == "1"
    assert resources["train_reversed_3"]["runtime"] == "2880"
    assert resources["train_reversed_3"]["mem_mb"] == "64000"
    assert resources["timing"]["gpu"] == "1"
    assert resources["translate_ensemble5"]["gpu"] == "1"
    assert resources["prepare"]["gpu"] == "0"
    if "--profile" in args:
        assert resources["train_reversed_3"]["slurm_partition"] == "gpu"
        assert resources["prepare"]["slurm_partition"] == "cpu"


def job_threads(output: str) -> dict[str, int]:
    """rule -> threads of a dry run's job listing (Snakemake prints no line for one thread)."""
    return {m[1]: int(m[3] or 1) for m in re.finditer(
        r"^rule (\w+):\n((?:    .*\n)*?)(?:    threads: (\d+)\n)?    resources:", output, re.M)}


def test_the_timing_stage_runs_with_nothing_beside_it(plan_repo):
    """The timing stage measures decoding speed: locally it holds every core of the run, so
    Snakemake starts no job beside it (a rescoring job beside it turned a published verdict);
    every other job keeps its `resources.<kind>.threads`. Under SLURM it asks for a node alone."""
    (plan_repo / "params.yaml").write_text(profile_text("default"), encoding="utf-8")
    threads = job_threads(snakemake(plan_repo, "-n", "--cores", "3").stdout)
    assert threads["timing"] == 3
    assert threads["translate_ensemble5"] == 1 and threads["rescore_ensemble5"] == 1
    assert {r for r, n in threads.items() if n != 1} == {"timing"}
    out = snakemake(plan_repo, "-n", "--cores", "2").stdout
    timing = re.search(r"^rule timing:\n(?:.*\n)*?\s+resources: (.*)$", out, re.M)[1]
    assert "slurm_extra='--exclusive'" in timing
    assert job_threads(out)["timing"] == 2


def test_a_job_hears_the_threads_snakemake_gave_it(plan_repo):
    """The paper asks 16 threads for prepare and 8 for ids; a local run with --cores 3 gives each
    job at most 3, which the stage cannot see from its CPU affinity: the job's command says it
    (S2S_JOB_THREADS), and s2s.data.stream.workers_for starts that many processes, not 16."""
    (plan_repo / "params.yaml").write_text(profile_text("paper"), encoding="utf-8")
    out = snakemake(plan_repo, "-n", "-p", "--cores", "3", "--config",
                    "params=profiles/paper.yaml").stdout
    given = {m[1]: int(m[2]) for m in re.finditer(
        r"^rule (\w+):\n(?:.*\n)*?Shell command: .*\bS2S_JOB_THREADS=(\d+) ", out, re.M)}
    assert given["prepare"] == 3 and given["ids"] == 3 and given["vocab"] == 3
    assert given["timing"] == 3  # every core of the run: nothing beside it
    assert given["analyze"] == 3  # resources.default: 4, cut to 3
    assert given["evaluate"] == 1  # resources.evaluate: 1, under the cores
    assert given.keys() == job_threads(out).keys() - {"all"}  # every job with a command is told


def test_a_change_of_params_reruns_what_reads_the_value_and_a_dry_run_changes_nothing(tmp_path):
    """The check stage rewrote metrics/params.json (always the same bytes) whenever the file
    changed; download, train and rescore wait for it. Snakemake compares times, so a new
    `resources.train.runtime` planned all 51 jobs again. Only the report (which prints the
    file's sha256) reruns; a value a stage reads reruns that stage and what follows it (its
    stamp: the values its outputs were made with). A dry run, or one of another profile, records
    nothing: it planned every job of the default again after `-n --config params=paper`, before
    or after the first real run."""
    repo = project(tmp_path / "repo", "default")
    made_already(repo)  # every result
    # a dry run of another profile, the first run here: it writes no record (it wrote its own
    # values as the default's outputs', and the next real run reran every job)
    snakemake(repo, "-n", "--config", "params=profiles/paper.yaml")
    stamps = repo / ".snakemake" / "s2s-params"
    assert not list(stamps.glob("*.json")) and list((stamps / "dry-run").glob("*.json"))
    # nor do the commands that only look (no executor: Snakemake's dryrun is False there)
    snakemake(repo, "--dag", "--config", "params=profiles/paper.yaml")
    snakemake(repo, "--summary")
    assert not list(stamps.glob("*.json"))
    snakemake(repo, "--touch", "--cores", "1")
    dry = snakemake(repo, "-n")
    assert "Nothing to be done" in dry.stdout + dry.stderr
    assert "train_reversed_3" in planned_jobs(snakemake(
        repo, "-n", "--config", "params=profiles/paper.yaml").stdout)
    dry = snakemake(repo, "-n")
    assert "Nothing to be done" in dry.stdout + dry.stderr

    params = profile_dict("default")
    params["resources"]["train"]["runtime"] = 480
    time.sleep(1.1)  # a modification time Snakemake sees as later
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert planned_jobs(snakemake(repo, "-n").stdout) == {"report": 1, "all": 1}  # its sha256
    params["models"]["reversed_4"]["order_seed"] += 1000  # read by its training only
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    jobs = planned_jobs(snakemake(repo, "-n").stdout)
    assert jobs["train_reversed_4"] == 1 and "check_params" not in jobs
    assert jobs["translate_ensemble5"] == 1  # what reads the model
    assert "train_reversed_1" not in jobs and "prepare" not in jobs
    assert "translate_forward" not in jobs
    seed = params["models"]["reversed_4"]["order_seed"]
    params["models"]["reversed_4"]["order_seed"] -= 1000  # back, with no run between
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert planned_jobs(snakemake(repo, "-n").stdout) == {"report": 1, "all": 1}

    # the records lost (.snakemake deleted): dvc.lock says what DVC made the outputs with
    shutil.rmtree(repo / ".snakemake")
    stage = next(s for s in pipeline.generate(load(repo / "params.yaml"))
                 if s.name == "train-reversed_4")
    made = dag.param_values(params, stage.params)
    (repo / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": {
        stage.name: {"cmd": stage.cmd, "params": {"params.yaml": made}}}}))
    params["models"]["reversed_4"]["order_seed"] = seed
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    jobs = planned_jobs(snakemake(repo, "-n").stdout)
    assert jobs["train_reversed_4"] == 1 and "train_reversed_1" not in jobs


def test_the_check_record_rewritten_by_dvc_reruns_nothing_by_time(tmp_path):
    """`dvc repro` after any edit of params.yaml reruns check-params, which rewrites
    metrics/params.json (the same bytes, a new time). Snakemake, with no record of DVC's run,
    found it newer than download's outputs and reran download, prepare and every training. The
    record counts only by existing; a value a stage reads still reruns it (its stamp)."""
    repo = project(tmp_path / "repo", "default")
    made_already(repo)
    snakemake(repo, "--touch", "--cores", "1")
    record = repo / "metrics" / "params.json"
    time.sleep(1.1)  # a modification time Snakemake sees as later
    record.touch()  # as check-params under `dvc repro`: same bytes, now
    dry = snakemake(repo, "-n")
    assert "Nothing to be done" in dry.stdout + dry.stderr, dry.stdout[-3000:]
    params = profile_dict("default")
    params["models"]["reversed_4"]["order_seed"] += 1000  # read by its training only
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    record.touch()
    jobs = planned_jobs(snakemake(repo, "-n").stdout)
    assert jobs["train_reversed_4"] == 1 and jobs["translate_ensemble5"] == 1
    assert "download" not in jobs and "prepare" not in jobs and "check_params" not in jobs
    assert "train_reversed_1" not in jobs
    params["data"]["dev"].append({"corpus": "multi30k.test_2017_flickr"})  # download reads data
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    record.touch()
    jobs = planned_jobs(snakemake(repo, "-n").stdout)
    assert jobs["download"] == 1 and jobs["prepare"] == 1


def test_the_engine_that_made_the_outputs_last_says_with_what(tmp_path):
    """Snakemake's record of the values a stage's outputs were made with won over dvc.lock's
    always: after `dvc repro` with a changed value `snakemake -n` planned the stage and every
    one after it, which DVC found clean, and a value then set back by hand, with the outputs
    still DVC's, was missed. dvc.lock's values count where DVC wrote the stage's entry after
    Snakemake's record was written."""
    repo = project(tmp_path / "repo", "default")
    outs = made_already(repo)
    snakemake(repo, "--touch", "--cores", "1")  # Snakemake's records: made with these values
    params = profile_dict("default")
    params["models"]["reversed_4"]["order_seed"] += 1000  # read by its training only
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    # `dvc repro`: every stage's entry in dvc.lock with this file's values, every output anew
    (repo / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": {
        s.name: {"cmd": s.cmd, "params": {"params.yaml": dag.param_values(params, s.params)}}
        for s in pipeline.generate(load(repo / "params.yaml"))}}))
    now = time.time()
    for path in outs:
        for p in (path, *(path.rglob("*") if path.is_dir() else ())):
            os.utime(p, (now, now))
    time.sleep(1.1)  # a stamp dated by the next run is later than these
    dry = snakemake(repo, "-n")
    assert "Nothing to be done" in dry.stdout + dry.stderr, dry.stdout[-3000:]
    # set back by hand: the outputs are still DVC's, made with the other value
    params["models"]["reversed_4"]["order_seed"] -= 1000
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    jobs = planned_jobs(snakemake(repo, "-n").stdout)
    assert jobs["train_reversed_4"] == 1 and jobs["translate_reversed_4"] == 1
    assert jobs["translate_ensemble5"] == 1 and "train_reversed_1" not in jobs


def test_after_dvc_repro_of_a_changed_value_snakemake_has_nothing_to_do(tmp_path):
    """Snakemake ran vocab; a value vocab reads changed and `dvc repro` ran vocab and ids with
    it (`dvc status` clean). Snakemake's own `params` trigger compared the rule's params (the
    values among them) with its last run's and planned vocab and ids again ("Params have changed
    since last execution"); the stage's stamp, which knows dvc.lock's entry, alone decides now."""
    need_mirror()
    repo = project(tmp_path / "repo")
    local = ("--profile", "workflow/profiles/local")
    snakemake(repo, "vocab", *local, "--cores", "2", timeout=900)
    dry = snakemake(repo, "-n", "vocab", *local)
    assert "Nothing to be done" in dry.stdout + dry.stderr
    params = profile_dict("smoke")
    params["vocab"]["min_count"] += 1
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert "vocab" in planned_jobs(snakemake(repo, "-n", "vocab", *local).stdout)
    run([str(BIN / "dvc"), "repro", "-f", "-s", "vocab"], repo, timeout=900)
    run([str(BIN / "dvc"), "repro", "-s", "ids"], repo, timeout=900)
    status = run([str(BIN / "dvc"), "status", "vocab", "ids"], repo).stdout
    assert "up to date" in status, status
    for args in (local, ()):  # with a profile or none: the workflow's own profile turns it off
        dry = snakemake(repo, "-n", "ids", *args)
        assert "Nothing to be done" in dry.stdout + dry.stderr, dry.stdout[-3000:]


def test_a_changed_command_reruns_its_stage_and_an_older_record_counts_as_this_one(tmp_path):
    """The command is in the stamp's record (Snakemake's `params` trigger, which compared it,
    is off): a stage whose command changed reruns, as under DVC; a record written before the
    command was recorded counts as made with this run's command, which a run writes into it."""
    repo = project(tmp_path / "repo")
    target = ("metrics/params.json", "--cores", "1")
    snakemake(repo, *target)
    record = repo / ".snakemake" / "s2s-params" / "check_params.json"
    assert json.loads(record.read_text())["cmd"] == "s2s check --out metrics/params.json"
    # a record of before: no command; taken as this run's, and a run writes it in
    data = json.loads(record.read_text())
    record.write_text(json.dumps({k: data[k] for k in ("values", "dvc_lock")}))
    dry = snakemake(repo, "-n", *target)
    assert "Nothing to be done" in dry.stdout + dry.stderr, dry.stdout[-3000:]
    assert "cmd" not in json.loads(record.read_text())  # a dry run writes nothing
    snakemake(repo, *target)
    assert json.loads(record.read_text())["cmd"] == "s2s check --out metrics/params.json"
    # a new command for the check (as a new version of s2s's stage modules would make it)
    common = repo / "workflow" / "rules" / "common.smk"
    text = common.read_text()
    line = "    STAGES = pipeline.generate(PARAMS)\n"
    assert line in text
    common.write_text(text.replace(line, line + (
        "    import dataclasses\n"
        "    STAGES = [dataclasses.replace(s, cmd='env ' + s.cmd) if s.kind == 'check' else s\n"
        "              for s in STAGES]\n")))
    assert "check_params" in planned_jobs(snakemake(repo, "-n", *target).stdout)
    snakemake(repo, *target)
    assert json.loads(record.read_text())["cmd"] == "env s2s check --out metrics/params.json"
    dry = snakemake(repo, "-n", *target)
    assert "Nothing to be done" in dry.stdout + dry.stderr, dry.stdout[-3000:]
    common.write_text(text)  # and back
    assert "check_params" in planned_jobs(snakemake(repo, "-n", *target).stdout)


def test_lint_leaves_only_the_software_deployment_lint(plan_repo):
    """The one lint left asks for a conda environment or container per rule; the rules run the
    project's own `s2s` from the environment Snakemake runs in (README)."""
    proc = snakemake(plan_repo, "--lint", check=False)
    out = proc.stdout + proc.stderr
    lints = set(re.findall(r"^\s+\* (.+?):?$", out, re.M))
    assert lints == {"Specify a conda environment or container for each rule."}, out[-3000:]
    assert "Lints for snakefile" not in out
    assert proc.returncode == 1  # snakemake --lint exits 1 when any lint is left


# ---------------------------------------------------------------------------------------------
# The smoke profile through Snakemake, against the same profile through DVC (smoke_repo)


def metrics_of(repo: Path) -> dict[str, object]:
    out = {}
    for path in sorted((repo / "metrics").rglob("*")):
        if path.suffix == ".json":
            data = json.loads(path.read_text())
            if path.parent.name == "train":
                data = {k: v for k, v in data.items() if k not in RUN_FIELDS}
            if path.name == "summary.json":
                data.pop("minutes", None)  # wall-clock time, as RUN_FIELDS
            if path.name == "claims.json":
                # the cost claim's verdict rests on decoding times measured in the run (the
                # timing stage's repetitions), which another engine's run measures anew
                data.pop("cost", None)
            out[str(path.relative_to(repo))] = data
        elif path.suffix == ".csv":
            out[str(path.relative_to(repo))] = path.read_text()
    return out


@pytest.mark.slow
def test_snakemake_writes_the_metrics_dvc_writes(snakemake_repo, request):
    # The dvc repro run asked for after this one is made (pytest makes session-scoped fixtures
    # first: the other process's smoke run would hold this one up).
    smoke_run = request.getfixturevalue("smoke_run")
    ours, theirs = metrics_of(snakemake_repo), metrics_of(smoke_run)
    assert "metrics/bleu.json" in ours and "metrics/train/reversed_5.json" in ours
    assert ours.keys() == theirs.keys()
    for name in ours:
        assert ours[name] == theirs[name], name
    logs = {p.stem for p in (snakemake_repo / "logs").glob("*.log")}
    assert logs == {rule_name(s) for s in dvc_stages(snakemake_repo)}


@pytest.mark.slow
def test_after_dvc_commit_dvc_and_snakemake_have_nothing_to_do(snakemake_repo, tmp_path):
    repo = tmp_path / "repo"  # the run is read only: tests/test_slurm.py starts from it
    shutil.copytree(snakemake_repo, repo, symlinks=True)
    run([str(BIN / "dvc"), "commit", "-f"], repo)
    status = run([str(BIN / "dvc"), "status"], repo).stdout
    assert "up to date" in status, status
    repro = run([str(BIN / "dvc"), "repro"], repo)
    assert "Running stage" not in repro.stdout + repro.stderr
    dry = snakemake(repo, "-n")
    assert "Nothing to be done" in dry.stdout + dry.stderr


@pytest.mark.slow
def test_after_a_dvc_run_snakemake_has_nothing_to_do(smoke_repo):
    shutil.copytree(ROOT / "workflow", smoke_repo / "workflow", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    dry = snakemake(smoke_repo, "-n")
    assert "Nothing to be done" in dry.stdout + dry.stderr
