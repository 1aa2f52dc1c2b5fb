"""`s2s exps`: DVC experiments side by side, the numbers people compare and the params that differ.

``dvc exp show`` puts every param, every metric and every dependency hash of the generated
dvc.yaml in one row per experiment: hundreds of columns. This reads the same data
(``dvc exp show --json``) and prints it the other way round, one column per experiment, so that
the table grows downwards with the profile's models and systems and sideways only with the
experiments (in blocks that fit ``--width``):

- the params whose values differ between the experiments shown (and nothing else of params);
- test perplexity of every model, tokenised BLEU of every system at its widest beam and of every
  rescoring output (``metrics/summary.json``);
- every claim's verdict (``metrics/claims.json``, written by the report stage).

No dependency hash, no unchanged param. A value an experiment lacks (a model its params do not
have, a stage that failed) is ``-``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

SUMMARY = "metrics/summary.json"
CLAIMS = "metrics/claims.json"
PARAMS = "params.yaml"
# Verdicts in a few characters (s2s.report.claims): a column stays narrow.
SHORT = {"holds": "holds", "does not hold": "fails", "no significant difference": "n.s.",
         "cannot tell": "?"}


@dataclass(frozen=True)
class Experiment:
    """One column: a name, its params (flattened, dotted keys) and its metrics files' data."""

    name: str
    params: dict[str, Any]
    summary: dict[str, Any]
    claims: dict[str, Any]


class ExperimentsError(RuntimeError):
    """`dvc exp show` failed or said something this reader does not understand."""


def dvc_exp_show(*, all_commits: bool = False, cwd: str | None = None) -> list[dict]:
    """The JSON of ``dvc exp show --json`` (its list of revisions), run without a shell."""
    dvc = shutil.which("dvc") or str(_sibling("dvc"))
    cmd = [dvc, "exp", "show", "--json"] + (["--all-commits"] if all_commits else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise ExperimentsError(f"`{' '.join(cmd[1:])}` failed ({proc.returncode}): {last}")
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        raise ExperimentsError(f"`dvc exp show --json` printed no JSON ({e})") from None
    if not isinstance(data, list):
        raise ExperimentsError("`dvc exp show --json` printed no list of revisions")
    return data


def _sibling(name: str):
    from pathlib import Path

    return Path(sys.executable).parent / name


def experiments(revisions: list[dict]) -> list[Experiment]:
    """The columns: the workspace, each commit, and each commit's experiments after it."""
    out: list[Experiment] = []
    for rev in revisions:
        out.append(_experiment(rev, _label(rev)))
        for group in rev.get("experiments") or []:
            for exp in group.get("revs") or []:
                out.append(_experiment(exp, exp.get("name") or str(exp.get("rev", ""))[:7]))
    return out


def _label(rev: Mapping) -> str:
    sha = str(rev.get("rev", ""))
    if sha == "workspace":
        return "workspace"
    return rev.get("name") or sha[:7]


def _experiment(rev: Mapping, name: str) -> Experiment:
    data = rev.get("data") or {}

    def file(section: str, path: str) -> dict:
        entry = (data.get(section) or {}).get(path) or {}
        return entry.get("data") or {}

    return Experiment(name=name, params=dict(_flatten(file("params", PARAMS))),
                      summary=file("metrics", SUMMARY), claims=file("metrics", CLAIMS))


def _flatten(value: Any, prefix: str = "") -> Iterable[tuple[str, Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _flatten(v, f"{prefix}{k}.")
    else:
        yield prefix.rstrip("."), value


def rows(exps: list[Experiment]) -> list[tuple[str, list[str]]]:
    """(label, one cell per experiment) for every row of the table; a section title has no
    cells. Params rows only where the experiments differ."""
    out: list[tuple[str, list[str]]] = []
    keys = list(dict.fromkeys(k for e in exps for k in e.params))
    changed = [k for k in keys if len({_show(e.params.get(k)) for e in exps}) > 1]
    if changed:
        out.append(("params that differ", []))
        out += [(f"  {k}", [_show(e.params.get(k)) for e in exps]) for k in changed]
    models = list(dict.fromkeys(m for e in exps for m in (e.summary.get("ppl") or {})))
    if models:
        out.append(("test perplexity", []))
        out += [(f"  {m}", [_num(e.summary.get("ppl", {}).get(m)) for e in exps]) for m in models]
    systems = list(dict.fromkeys(s for e in exps for s in (e.summary.get("bleu") or {})))
    if systems:
        out.append(("BLEU (tokenised), widest beam", []))
        for s in systems:
            cells = []
            for e in exps:
                beams = e.summary.get("bleu", {}).get(s) or {}
                widest = max(beams, key=lambda b: int(b.lstrip("b")), default=None)
                cells.append(_num(beams.get(widest)) if widest else "-")
            out.append((f"  {s}", cells))
    rescored = list(dict.fromkeys(r for e in exps for r in (e.summary.get("rescore") or {})))
    if rescored:
        out.append(("BLEU (tokenised), rescoring", []))
        out += [(f"  {r}", [_num(e.summary.get("rescore", {}).get(r)) for e in exps])
                for r in rescored]
    claims = list(dict.fromkeys(c for e in exps for c in e.claims))
    if claims:
        out.append(("claims", []))
        out += [(f"  {c}", [SHORT.get(e.claims.get(c), str(e.claims.get(c) or "-"))
                            for e in exps]) for c in claims]
    return out


def _show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    return str(value)


def _num(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if isinstance(value, (int, float)) else str(value)


def render(exps: list[Experiment], *, width: int = 160, cell: int = 14) -> str:
    """The table as text, every line at most `width` characters: the experiments in blocks of
    as many columns as fit beside the labels; a cell longer than `cell` is cut with '~'."""
    if not exps:
        return "no experiments\n"
    table = rows(exps)
    label_w = min(max((len(label) for label, _ in table), default=10), max(20, width // 3))
    label_w = max(label_w, len("experiment"))
    per_block = max(1, (width - label_w) // (cell + 2))
    lines: list[str] = []
    for start in range(0, len(exps), per_block):
        block = range(start, min(start + per_block, len(exps)))
        if lines:
            lines.append("")
        lines.append(_line("experiment", [exps[i].name for i in block], label_w, cell))
        lines.append("-" * min(width, label_w + len(block) * (cell + 2)))
        for label, cells in table:
            lines.append(_line(label, [cells[i] for i in block] if cells else [], label_w, cell))
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _line(label: str, cells: list[str], label_w: int, cell: int) -> str:
    return _fit(label, label_w).ljust(label_w) + "".join(
        "  " + _fit(c, cell).rjust(cell) for c in cells)


def _fit(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "~"
