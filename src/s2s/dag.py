"""The pipeline's stages as ``dvc.yaml`` defines them, for executors other than DVC (Snakemake).

Reads:  ``dvc.yaml`` and a parameter file (``params.yaml`` or a profile).
Writes: nothing; :func:`load` returns one :class:`Stage` per DVC stage, ``foreach`` expanded and
        DVC's ``${...}`` templating resolved from the parameter file, as ``dvc stage list`` names
        them (``train-forward``, ``translate-ensemble5``).

The DAG is written once, in ``dvc.yaml``: ``workflow/Snakefile`` builds its rules from these
stages, so a path or a stage added there reaches Snakemake without a second copy. The templating
handled is the subset DVC documents and ``dvc.yaml`` uses: ``foreach`` over a mapping or a list
(``${key}``, ``${item}``, ``${item.field}``) and ``${dotted.key}`` of the parameter file; anything
else (``vars``, ``matrix``, other parameter files) is refused with the stage's name, never guessed.
tests/test_snakemake.py checks the result against DVC's own resolution for every profile.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from s2s.config import read_yaml

_TEMPLATE = re.compile(r"\$\{\s*([^}]*?)\s*\}")


class DagError(ValueError):
    """A dvc.yaml construct this module does not resolve, or a key the parameters lack."""


@dataclass(frozen=True)
class Out:
    """One output of a stage (an ``outs``, ``metrics`` or ``plots`` entry)."""

    path: str
    cache: bool = True
    persist: bool = False  # DVC keeps it between runs: a resume point, not a product
    metric: bool = False  # listed under `metrics` (a JSON file `dvc metrics` reads)

    @property
    def is_dir(self) -> bool:
        # dvc.yaml does not say which outputs are directories; in this project a file output has
        # an extension (metrics/bleu.json, reports/report.md) and a directory has none.
        return PurePosixPath(self.path).suffix == ""


@dataclass(frozen=True)
class Stage:
    """A resolved DVC stage. `params` are the keys of the parameter file the stage reads."""

    name: str
    cmd: str
    deps: tuple[str, ...]
    outs: tuple[Out, ...]
    params: tuple[str, ...]
    doc: str = field(default="", compare=False)  # the comment above it in dvc.yaml
    # Modules the stage runs beyond what its own module imports: the architectures of the models
    # it builds or describes (s2s.arch names them by module and imports them on demand), so that
    # their files, and only theirs, are among its dependencies (s2s.pipeline).
    code: tuple[str, ...] = field(default=(), compare=False)

    @property
    def kind(self) -> str:
        """`train` for train-forward, `translate` for translate-forward: what the job runs."""
        return re.split(r"[@-]", self.name, maxsplit=1)[0]

    @property
    def rule(self) -> str:
        """The name as an identifier (a Snakemake rule name): train-forward -> train_forward."""
        return re.sub(r"\W", "_", self.name)


def load(dvc_yaml: str | Path = "dvc.yaml", params: str | Path = "params.yaml") -> list[Stage]:
    """Every stage of `dvc_yaml`, in file order, with templates resolved from `params`."""
    dvc_yaml, params = Path(dvc_yaml), Path(params)
    # Read as DVC reads them (YAML 1.2, duplicate keys refused): the same values DVC resolves.
    spec = read_yaml(dvc_yaml) or {}
    values = read_yaml(params) or {}
    if "vars" in spec:
        raise DagError(f"{dvc_yaml}: top-level 'vars' is not supported by s2s.dag")
    stages: list[Stage] = []
    for name, body in (spec.get("stages") or {}).items():
        if "matrix" in body:
            raise DagError(f"{dvc_yaml}: stage '{name}': 'matrix' is not supported by s2s.dag")
        if "foreach" in body:
            items = _resolve(body["foreach"], values, f"{name}.foreach")
            pairs = (items.items() if isinstance(items, dict)
                     else ((_list_key(item, name), item) for item in items))
            for key, item in pairs:
                ctx = {**values, "key": key, "item": item}
                stages.append(_stage(f"{name}@{key}", _resolve(body["do"], ctx, name), dvc_yaml))
        else:
            stages.append(_stage(name, _resolve(body, values, name), dvc_yaml))
    names = [s.rule for s in stages]
    if len(set(names)) != len(names):
        raise DagError(f"{dvc_yaml}: two stages map to one rule name: {sorted(names)}")
    return stages


def inputs(stage: Stage, stages: list[Stage]) -> list[str]:
    """What `stage` needs, in terms of the other stages' outputs.

    A dependency that is another stage's output stays as it is; one inside an output directory
    (data/prepared/test.tok.en) becomes that directory; one that holds other stages' outputs
    (outputs/translate, metrics/train) becomes those outputs. Anything else is a source path
    (src/s2s/report) and stays as it is. Persistent outputs are never inputs of other stages here.
    """
    produced = [o.path for s in stages if s is not stage for o in s.outs if not o.persist]
    result: list[str] = []
    for dep in stage.deps:
        if dep in produced:
            found = [dep]
        else:
            found = [p for p in produced if _inside(dep, p)] or [
                p for p in produced if _inside(p, dep)] or [dep]
        result += [p for p in found if p not in result]
    return result


def param_values(params: dict[str, Any], keys: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """The values of dotted `keys` (`train`, `models.forward`) in a loaded parameter mapping."""
    return {key: _lookup(params, key, key) for key in keys}


# ---------------------------------------------------------------------------------------------


def _stage(name: str, body: dict, where: Path) -> Stage:
    if not isinstance(body, dict) or "cmd" not in body:
        raise DagError(f"{where}: stage '{name}' has no 'cmd'")
    cmd = body["cmd"]
    if isinstance(cmd, list):
        raise DagError(f"{where}: stage '{name}': a list of commands is not supported by s2s.dag")
    outs: list[Out] = []
    for section in ("outs", "metrics", "plots"):
        for entry in body.get(section) or []:
            if isinstance(entry, str):
                outs.append(Out(entry, metric=section == "metrics"))
            else:
                ((path, opts),) = entry.items()
                opts = opts or {}
                outs.append(Out(path, cache=opts.get("cache", True),
                                persist=opts.get("persist", False), metric=section == "metrics"))
    params: list[str] = []
    for entry in body.get("params") or []:
        if not isinstance(entry, str):
            raise DagError(f"{where}: stage '{name}': params of another file ({entry}) are not "
                           "supported by s2s.dag")
        params.append(entry)
    return Stage(name=name, cmd=str(cmd), deps=tuple(body.get("deps") or ()),
                 outs=tuple(outs), params=tuple(params))


def _resolve(node: Any, ctx: dict, where: str) -> Any:
    """Substitute ${...} in every string of `node`. A string that is exactly one template takes
    the value itself (a mapping for foreach); inside a longer string a value must be a scalar."""
    if isinstance(node, dict):
        return {_resolve(k, ctx, where): _resolve(v, ctx, where) for k, v in node.items()}
    if isinstance(node, list):
        return [_resolve(v, ctx, where) for v in node]
    if not isinstance(node, str) or "${" not in node:
        return node
    whole = _TEMPLATE.fullmatch(node)
    if whole:
        return _lookup(ctx, whole.group(1), where)

    def scalar(m: re.Match) -> str:
        value = _lookup(ctx, m.group(1), where)
        if isinstance(value, (dict, list)):
            raise DagError(f"stage '{where}': '${{{m.group(1)}}}' is not a scalar in '{node}'")
        return str(value).lower() if isinstance(value, bool) else str(value)

    return _TEMPLATE.sub(scalar, node)


def _lookup(ctx: dict, dotted: str, where: str) -> Any:
    value: Any = ctx
    for part in dotted.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            raise DagError(f"stage '{where}': '{dotted}' is not in the parameters")
    return value


def _list_key(item: Any, stage: str) -> str:
    if isinstance(item, (dict, list)):
        raise DagError(f"stage '{stage}': foreach over a list of mappings is not supported")
    return str(item)


def _inside(path: str, folder: str) -> bool:
    return path.startswith(folder.rstrip("/") + "/")
