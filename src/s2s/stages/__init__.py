"""The pipeline's stages, one module each: `cmd: s2s <name> ...` in dvc.yaml runs
``s2s.stages.<name>``.

A stage module holds only stage glue; the work is library code (``s2s.data``, ``s2s.model``,
``s2s.decode``, ``s2s.evaluate``, ``s2s.analysis``, ``s2s.report``). It defines:

- ``ARGS``: its path flags (:class:`s2s.dag.Arg`), each declared once with the path its dvc.yaml
  command passes, whether the stage reads or writes it, and its help; ``ITEM``
  (:class:`s2s.dag.Item`) where the stage runs once per model, system or rescorer: its
  positional argument; ``add_arguments(parser)`` for any other argument.
- ``PATHS``: its paths as one value, its record's class (:class:`s2s.layout.StagePaths`, a field
  per flag of ``ARGS``), which ``cli`` builds from the command line and hands to ``main``; all
  but check and download, whose one path is passed as it is (a record would make them depend on
  s2s.layout in dvc.yaml).
- ``stages(params) -> list[s2s.dag.Stage]``: its dvc.yaml entries, built by
  :func:`s2s.dag.command` from ``ARGS`` (the command, the dependencies and outputs the flags
  give, anything else it reads or writes, the params keys it reads), one per model, system or
  rescorer where it runs per item. ``s2s dag write`` generates dvc.yaml from these
  (:mod:`s2s.pipeline`), adding the source files the stage's module imports as dependencies, so
  a code change reruns exactly what runs that code. A path flag left out on the command line
  takes the path of the same declaration.
- ``cli(args, params)``: the command. ``params`` is a :class:`s2s.config.ParamsView` holding only
  the keys the stage's dvc.yaml entry declares; reading another raises UndeclaredParams.
- ``main(...)``: the stage as a function of typed config and paths: it reads its inputs, calls the
  library, writes its outputs and logs what it read, what it wrote and how long it took.

The list is explicit (no registry filled at import time): :data:`STAGES`, in pipeline order.
"""

from __future__ import annotations

import importlib
from types import ModuleType

STAGES = ("check", "download", "prepare", "vocab", "ids", "train", "translate", "rescore",
          "evaluate", "summary", "export", "analyze", "attention", "timing", "claims", "report")


def module(name: str) -> ModuleType:
    """The module of stage `name` (one of STAGES)."""
    if name not in STAGES:
        raise KeyError(f"no stage '{name}' (stages: {', '.join(STAGES)})")
    return importlib.import_module(f"s2s.stages.{name}")
