"""The pipeline's stages as records: what ``dvc.yaml`` holds and Snakemake runs.

A stage module (``s2s.stages.<stage>``) declares its path flags once (:class:`Arg`) and builds its
stages with :func:`command`, which derives the command line, the dependencies and the outputs
from them; :mod:`s2s.pipeline` adds the code each stage runs and writes ``dvc.yaml`` from these
records (``s2s dag write``), and ``workflow/Snakefile`` builds its rules from the same records
(:func:`inputs` maps a stage's dependencies to the outputs of the stages that make them). Nothing
reads ``dvc.yaml`` back: tests/test_snakemake.py checks that DVC's own reading of the generated
file is these records, for every profile.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any


class DagError(ValueError):
    """A stage declared with a flag its command lacks, or a key the parameters lack."""


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
    # What `cmd` is made of (:func:`command`): the s2s subcommand, its positional argument (the
    # model, system or rescorer) and its path flags with the paths it passes; the command line's
    # defaults for a stage's flags are these (s2s.cli), so no one reads dvc.yaml back.
    command: str = field(default="", compare=False)
    item: str | None = field(default=None, compare=False)
    paths: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    @property
    def kind(self) -> str:
        """`train` for train-forward, `translate` for translate-forward: what the job runs."""
        return re.split(r"[@-]", self.name, maxsplit=1)[0]

    @property
    def rule(self) -> str:
        """The name as an identifier (a Snakemake rule name): train-forward -> train_forward."""
        return re.sub(r"\W", "_", self.name)


@dataclass(frozen=True)
class Arg:
    """A path flag of a stage's command, declared once in its module's ``ARGS``: the path its
    dvc.yaml command passes (``{item}``: the model, system or rescorer of a per-item stage),
    whether the stage reads or writes it, and what ``s2s <stage> --help`` says of it. The
    command, the dependencies and outputs in dvc.yaml, and the command line's defaults all
    derive from it (:func:`command`)."""

    flag: str
    path: str
    writes: bool = False
    help: str = ""
    optional: bool = False  # the stage runs without it; its stage passes it only where it applies
    cache: bool = True  # for an output: DVC's cache keeps it
    metric: bool = False  # for an output: a metrics file (git-tracked when not cached)

    def at(self, item: str | None) -> str:
        return self.path.format(item=item) if "{item}" in self.path else self.path

    @property
    def dest(self) -> str:
        """The flag's attribute on the parsed command line (``--model-dir``: ``model_dir``), and
        its field in the stage's path record (:class:`s2s.layout.StagePaths`)."""
        return self.flag[2:].replace("-", "_")

    @property
    def meaning(self) -> str:
        """What the flag names: its own help, else what the flag means in every stage."""
        return self.help or FLAG_HELP.get(self.flag, "path")


# What a path flag names wherever a stage's declaration does not say more.
FLAG_HELP = {
    "--out": "what the stage writes", "--raw": "the download stage's folder",
    "--prepared": "the prepare stage's folder", "--vocab": "the vocab stage's folder",
    "--ids": "the ids stage's folder",
    "--metrics": "the stage's metrics file", "--models": "folder of model dirs",
    "--model-dir": "where model.pt and best.pt go", "--ckpt-dir": "resume checkpoints",
    "--curves": "learning-curve CSV", "--translate": "the translate stages' folder",
    "--rescore": "the rescore stages' folder", "--groups": "Figure 3 groups CSV",
    "--manifest": "the download manifest", "--attention": "the attention stage's weights.json",
    "--analysis": "the analyze stage's folder", "--plots": "DVC plot data folder",
    "--claims": "the claims' verdicts (JSON)", "--cost": "the timing stage's cost.json",
}


@dataclass(frozen=True)
class Item:
    """The positional argument of a stage that runs once per model, system or rescorer (its
    module's ``ITEM``): its name on the command line, what it names, the params section that
    lists them, and its help."""

    dest: str
    what: str
    section: str
    help: str


def command(name: str, command: str, args: tuple[Arg, ...], *, item: str | None = None,
            include: tuple[str, ...] = (), parts: dict[str, tuple[str, ...]] | None = None,
            deps: tuple[str, ...] = (), outs: tuple[Out, ...] = (),
            params: tuple[str, ...] = (), doc: str = "", code: tuple[str, ...] = ()) -> Stage:
    """The stage `name` that runs ``s2s <command> [item]`` with the path flags `args` (the
    optional ones only where named in `include`), in their order.

    Each flag's path is a dependency (an output, for an :attr:`Arg.writes` flag) unless `parts`
    names what of it the stage reads or writes: ``parts={"--prepared": ("test.tok.en",)}`` makes
    ``data/prepared/test.tok.en`` the dependency, ``()`` none (the command names a folder that
    other dependencies cover). `deps` and `outs`: what the stage reads or writes beyond its
    flags (a file beside a flag's, a source file)."""
    parts = parts or {}
    unknown = sorted(set(parts) - {a.flag for a in args}) + sorted(
        set(include) - {a.flag for a in args if a.optional})
    if unknown:
        raise DagError(f"stage '{name}': {unknown[0]} is not an (optional) path flag of "
                       f"`s2s {command}`")
    used = [a for a in args if not a.optional or a.flag in include]
    paths = tuple((a.flag, a.at(item)) for a in used)
    ins: list[str] = []
    made: list[Out] = []
    for a, (_, path) in zip(used, paths):
        pieces = [path] if a.flag not in parts else [f"{path}/{p}" for p in parts[a.flag]]
        if a.writes:
            made += [Out(p, cache=a.cache, metric=a.metric) for p in pieces]
        else:
            ins += pieces
    words = ["s2s", command, *([item] if item is not None else []),
             *(w for pair in paths for w in pair)]
    return Stage(name=name, cmd=" ".join(words),
                 deps=tuple(dict.fromkeys((*deps, *ins))), outs=(*made, *outs),
                 params=params, doc=doc, code=code, command=command, item=item, paths=paths)


def inputs(stage: Stage, stages: list[Stage]) -> list[str]:
    """What `stage` needs, in terms of the other stages' outputs.

    A dependency that is another stage's output stays as it is; one inside an output directory
    (data/prepared/test.tok.en) becomes that directory; one that holds other stages' outputs
    (outputs/translate, metrics/train) becomes those outputs. Anything else is a source path
    (src/s2s/report) and stays as it is. Persistent outputs are never inputs of other stages here.
    """
    produced = [o.path for s in stages if s is not stage for o in s.outs if not o.persist]
    # Looked up by folder, not compared pairwise: the Snakefile asks this of every stage
    made = set(produced)
    is_output: dict[str, set[str]] = {}  # a path without its trailing "/" -> the outputs it is
    holds: dict[str, set[str]] = {}  # a folder -> the outputs inside it
    for p in produced:
        is_output.setdefault(p.rstrip("/"), set()).add(p)
        for folder in _folders_above(p):
            holds.setdefault(folder, set()).add(p)
    result: list[str] = []
    for dep in stage.deps:
        if dep in made:
            found = [dep]
        else:
            hits = set().union(*(is_output.get(f, ()) for f in _folders_above(dep))) or \
                holds.get(dep.rstrip("/"), set())
            found = [p for p in produced if p in hits] or [dep]
        result += [p for p in found if p not in result]
    return result


def param_values(params: dict[str, Any], keys: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """The values of dotted `keys` (`train`, `models.forward`) in a loaded parameter mapping."""
    return {key: _lookup(params, key, key) for key in keys}


# ---------------------------------------------------------------------------------------------


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


def _folders_above(path: str) -> list[str]:
    """Each folder `path` lies inside (``a/b/c``: ``a``, ``a/b``): the strings it starts with
    followed by a ``/``."""
    return [path[:i] for i, c in enumerate(path) if c == "/"]


# The code a stage runs: the s2s files dvc.yaml lists among its dependencies (s2s.pipeline), and
# whose contents the train stage records in its resume point (s2s.train.code_record).
PACKAGE_DIR = Path(__file__).resolve().parent  # src/s2s
SOURCE_PREFIX = PurePosixPath("src/s2s")  # how dvc.yaml names it, from the project root
# Modules a stage imports that compute nothing of its results: the command line, and the DAG
# description (a change to a stage's entry changes dvc.yaml itself, which DVC sees).
NOT_RUN = frozenset({"s2s.cli", "s2s.dag", "s2s.pipeline"})


def code_deps(*modules: str) -> list[str]:
    """The source files (``src/s2s/...py``) of `modules` and of every ``s2s`` module they import,
    transitively, including the packages' ``__init__.py`` files; :data:`NOT_RUN` and empty files
    (an ``__init__.py`` that only makes a package: DVC warns about every empty dependency, and
    nothing in one can change a result) excluded. An import inside ``if TYPE_CHECKING:`` runs
    nothing and is not followed; a module named by a string (``s2s.arch``'s registry) is not
    either: the stage that runs it names it (:attr:`s2s.dag.Stage.code`)."""
    seen: set[str] = set()
    todo = list(modules)
    while todo:
        name = todo.pop()
        if name in seen or name in NOT_RUN:
            continue
        seen.add(name)
        todo += _imports(name)
    files = {_file_of(m) for m in seen}
    return sorted(str(SOURCE_PREFIX / f.relative_to(PACKAGE_DIR).as_posix())
                  for f in files if f is not None and f.read_text(encoding="utf-8").strip())


@functools.cache
def _imports(module: str) -> tuple[str, ...]:
    """The s2s modules `module` names in an import anywhere in its file (also inside
    functions), with the packages that hold them."""
    path = _file_of(module)
    if path is None:
        return ()
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in _run_nodes(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for n in names:
            if n == "s2s" or n.startswith("s2s."):
                found |= {p for p in _parents(n) if _file_of(p) is not None}
    return tuple(sorted(found))


def _run_nodes(tree: ast.AST) -> Iterable[ast.AST]:
    """`tree` and every statement in it but those under ``if TYPE_CHECKING:`` (imports for
    annotations). Only statements can hold an import, and only statements (with their handlers
    and cases) hold statements: expressions, most of a file's nodes, are not entered."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                todo += child.orelse
            elif isinstance(child, _HOLDS_STATEMENTS):
                todo.append(child)


_HOLDS_STATEMENTS = (ast.stmt, ast.excepthandler, ast.match_case)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _parents(name: str) -> Iterable[str]:
    parts = name.split(".")
    return (".".join(parts[:i]) for i in range(1, len(parts) + 1))


@functools.cache
def _file_of(module: str) -> Path | None:
    parts = module.split(".")[1:]
    if not parts:
        return PACKAGE_DIR / "__init__.py"
    rel = Path(*parts)
    for candidate in (PACKAGE_DIR / rel / "__init__.py", PACKAGE_DIR / rel.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def code_digests(*modules: str) -> dict[str, str]:
    """The sha256 of each file :func:`code_deps` gives for `modules`, by its name there
    (``src/s2s/train.py``)."""
    return {name: hashlib.sha256(
        (PACKAGE_DIR / PurePosixPath(name).relative_to(SOURCE_PREFIX)).read_bytes()).hexdigest()
        for name in code_deps(*modules)}
