"""Stage `train-<model>`: the training procedure of §3.4.

Reads:  ``<ids>/`` (the ids stage's arrays of every split, memory-mapped, checked against their
        record), ``<vocab>/{en,fr}.tsv``, params `model`, `models.<name>`, `train`; for the
        models of `analysis.models` and `analysis.reach_replicas`, `analysis.snapshots`.
Writes: ``<model_dir>/model.pt`` (the final model: the paper's choice), ``<model_dir>/best.pt``
        (lowest dev perplexity, kept beside it), ``<ckpt_dir>/last.pt`` (resume point, written every
        `checkpoint_every` steps; not a DVC output, so a killed run finds it and an experiment's
        never dirties the stage), ``metrics/train/<name>.json``,
        ``metrics/curves/<name>.csv``;
        for the models of `analysis.models` and `analysis.reach_replicas`,
        ``<snapshots>/epoch<E>.pt`` (the weights at each epoch E of `analysis.snapshots` before
        the last step) and ``<snapshots>/snapshots.json``, their index (``s2s.train.Snapshots``).

The procedure is :func:`s2s.train.run`'s: the recipe (the paper's SGD and schedule by default),
a resume point whose :func:`~s2s.train.fingerprint` and code (:func:`~s2s.train.code_record`)
must match, and outputs that are those of a run from scratch whatever was killed or rerun
(docs/crash-guarantees.md); data-parallel under torchrun or srun, or with
`resources.train.gpus` > 1 (``s2s.distributed``, docs/gpu.md).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from s2s import arch
from s2s.layout import CURVES_DIR, TrainPaths
from s2s.config import AnalysisConfig, Params
from s2s.dag import Arg, Item, Stage, command

HELP = "train one model of params `models`"
ITEM = Item("name", "model", "models", "a model of params `models` (e.g. reversed_1)")
ARGS = (Arg("--ids", "data/ids"), Arg("--vocab", "data/vocab"),
        # checkpoints/<model>/last.pt, the resume point, is no output (the stage's doc says why)
        Arg("--model-dir", "models/{item}", writes=True),
        Arg("--ckpt-dir", "checkpoints/{item}"),
        Arg("--metrics", "metrics/train/{item}.json", writes=True,
            help="the model's training metrics (JSON)"),
        Arg("--curves", f"metrics/{CURVES_DIR}/{{item}}.csv", writes=True),
        Arg("--snapshots", "snapshots/{item}", writes=True, optional=True,
            help="the weights at the epochs of analysis.snapshots (the models of "
                 "analysis.models and analysis.reach_replicas only)"))
PATHS = TrainPaths  # ARGS as one value, which cli builds and main takes


def snapshot_list(params: Params, name: str) -> str | None:
    """The params list that makes model `name`'s train stage keep snapshots:
    ``analysis.models`` or ``analysis.reach_replicas`` (the list the stage declares), or None."""
    if name in params.analysis.models:
        return "analysis.models"
    if name in AnalysisConfig.read(params, "reach_replicas"):
        return "analysis.reach_replicas"
    return None


def stages(params: Params) -> list[Stage]:
    snapshot_keys = ("analysis.snapshots",) * AnalysisConfig.written(params, "snapshots")
    return [command(
        f"train-{name}", "train", ARGS, item=name,
        include=("--snapshots",) if listed else (), parts={"--ckpt-dir": ()},
        deps=("metrics/params.json",),
        params=("model", f"models.{name}", "train", "prepare.lowercase",
                *((*snapshot_keys, listed) if listed else ())),
        code=arch.modules(params, [name]),
        doc="" if i else "One stage per model of params `models`. checkpoints/<model>/last.pt "
                         "is the resume point: not an\noutput, so DVC never deletes it after a "
                         "kill and an experiment's never dirties a stage;\nit is resumed only if "
                         "its fingerprint (params, vocabulary, data) and its code match.")
        for i, name in enumerate(params.models) for listed in (snapshot_list(params, name),)]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stop-after", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--resume-other-code", action="store_true",
                   help="go on from a resume point written by other code (a change to a file "
                        "this stage runs that alters no number: a log line, a comment); without "
                        "it such a resume point is not used, as the outputs would not be a run "
                        "from scratch's. Then `dvc commit train-<model>`")


def cli(args, params) -> None:
    # the stage declares the list that names its model (stages(), snapshot_list)
    if args.snapshots is not None and not any(
            params.declares(f"analysis.{key}") and args.name in getattr(params.analysis, key)
            for key in ("models", "reach_replicas")):
        raise ValueError(f"--snapshots: model '{args.name}' is not among analysis.models or "
                         f"analysis.reach_replicas: only their train stages keep snapshots")
    main(params, args.name, TrainPaths.from_args(args), stop_after=args.stop_after,
         resume_other_code=args.resume_other_code)


# What the stage writes: files, and folders (the resume point's included, though no output).
_OUT_FILES, _OUT_FOLDERS = ("--metrics", "--curves"), ("--model-dir", "--ckpt-dir", "--snapshots")


def check_outputs(paths: TrainPaths) -> None:
    """Refuse, in one line naming the path and its flag, an output that training would only fail
    to write at its end: a file's path that is a folder, a folder's that is a file, or one under
    a file or in a folder that cannot be written."""
    for flag in (*_OUT_FILES, *_OUT_FOLDERS):
        path = getattr(paths, flag[2:].replace("-", "_"))
        if path is None:
            continue
        path = Path(path)
        if flag in _OUT_FILES and path.is_dir():
            raise IsADirectoryError(f"{flag} {path}: a folder, not a file to write")
        if flag in _OUT_FOLDERS and path.exists() and not path.is_dir():
            raise NotADirectoryError(f"{flag} {path}: a file, not a folder to write in")
        # the nearest folder that is there: the file or folder is made in it
        start = path.parent if flag in _OUT_FILES else path  # a file there is overwritten
        there = next(p for p in (start, *start.parents) if p.exists())
        if not there.is_dir():
            raise NotADirectoryError(f"{flag} {path}: {there} is a file, not a folder")
        if not os.access(there, os.W_OK | os.X_OK):
            raise PermissionError(f"{flag} {path}: {there} cannot be written in")


def main(params: Params, name: str, paths: TrainPaths, *, stop_after: int | None = None,
         resume_other_code: bool = False) -> dict:
    """Train model `name` into `paths`: one process, or one per GPU (each running this function
    under torch.distributed); return its metrics as written. `resume_other_code`: go on from a
    resume point of other code (s2s.train.code_record)."""
    from s2s import distributed, runguard, train
    from s2s.device import claim_job_gpus

    # an unknown or bad model fails here, before any work
    job = train.TrainJob.of(params, name, snapshots=paths.snapshots is not None,
                            resume_other_code=resume_other_code)
    check_outputs(paths)  # and an output that could not be written, before hours of training
    world = distributed.World.from_env()
    if world.size == 1:
        claim_job_gpus()  # before CUDA starts: this job's GPUs, where Snakemake ran it locally
        nprocs = distributed.processes_for(job.gpus, job.cfg.device)
        if nprocs > 1:  # one process per GPU; each runs this function under torch.distributed
            runguard.tie_to_pipeline()  # a signal here is passed on to every rank
            distributed.spawn(main, nprocs, params, name, paths, stop_after=stop_after,
                              resume_other_code=resume_other_code)
            return json.loads(paths.metrics.read_text(encoding="utf-8"))
    # Every rank stopped by a signal (or by its pipeline dying) after the same step, with a final
    # resumable checkpoint (s2s.runguard, s2s.train). One writer per checkpoint folder: rank 0
    # holds its lock, taken once every rank has joined the process group, so that a lock held by
    # another trainer fails every rank at once; no rank waits for rank 0 in the rendezvous.
    with runguard.StopSignals() as stop:
        runguard.tie_to_pipeline()
        device = train.join(job, world)
        with distributed.held_on_main(runguard.FolderLock(paths.ckpt_dir), world, device):
            return train.run(job, paths, stop_after=stop_after, world=world, stop=stop)
