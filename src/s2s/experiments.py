"""`s2s exps`: DVC experiments side by side, the numbers people compare and the params that differ.

``dvc exp show`` puts every param, every metric and every dependency hash of the generated
dvc.yaml in one row per experiment: hundreds of columns. This reads the same data
(``dvc exp show --json``) and prints it the other way round, one column per experiment, so that
the table grows downwards with the profile's models and systems and sideways only with the
experiments (in blocks that fit ``--width``):

- the params whose values differ between the experiments shown (and nothing else of params),
  leaf by leaf: a list of mappings by index (``data.train.0.max_lines``), a list of plain values
  (an ensemble's members, the beams) whole, over several lines where it is longer than a cell;
- test perplexity of every model, tokenised BLEU of every system at its widest beam (where an
  experiment's widest is not the row's most common, its cell says which: ``2.22 b2``) and of
  every rescoring output (``metrics/summary.json``);
- every claim's verdict (``metrics/claims.json``, written by the claims stage).

No dependency hash, no unchanged param. A value an experiment lacks (a model its params do not
have, a stage that failed) is ``-``. A file DVC could not read (cut mid-JSON: DVC's
``JSONFileCorruptedError``) or that does not hold what its stage writes makes every cell it
feeds ``!``, as in ``dvc exp show``, and a line under the table names the experiment, the file
and the damage.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from s2s.config import dotted
from s2s.layout import SUMMARY_FILE, VERDICTS_FILE

PARAMS = "params.yaml"
# Verdicts in a few characters (s2s.claims): a column stays narrow.
SHORT = {"holds": "holds", "does not hold": "fails", "no significant difference": "n.s.",
         "cannot tell": "?", "not run in this profile": "-"}
DAMAGED = "!"  # a cell whose file could not be read, as dvc exp show marks it
REVISION = "the revision"  # Experiment.damaged's key where DVC could read none of it


@dataclass(frozen=True)
class Experiment:
    """One column: a name, its params (flattened, dotted keys) and its metrics files' data."""

    name: str
    params: dict[str, Any]
    summary: dict[str, Any]
    claims: dict[str, Any]
    damaged: dict[str, str] = field(default_factory=dict)  # file -> what is wrong with it

    def cell(self, path: str, text: str) -> str:
        """`text`, or the damage mark when the file at `path` (or the whole revision) could not
        be read."""
        return DAMAGED if path in self.damaged or REVISION in self.damaged else text


class Whole(str):
    """A cell shown whole over as many lines as it takes, never cut: a list of plain values (an
    ensemble's members), whose cut start would read the same in every column."""


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
    damaged: dict[str, str] = {}
    error = rev.get("error")
    if isinstance(error, Mapping):  # DVC could not collect the revision at all: no data
        said = f"{error.get('msg') or 'unreadable'} ({error.get('type')})"
        return Experiment(name=name, params={}, summary={}, claims={}, damaged={REVISION: said})

    def file(section: str, path: str, check) -> dict:
        entry = (data.get(section) or {}).get(path) or {}
        error = entry.get("error") if isinstance(entry, Mapping) else None
        if isinstance(error, Mapping) and error.get("type") != "FileNotFoundError":
            # DVC's own words ("unable to read: ... JSON file structure is corrupted")
            damaged[path] = f"{error.get('msg') or 'unreadable'} ({error.get('type')})"
            return {}
        value = entry.get("data") if isinstance(entry, Mapping) else None
        if value is None:
            return {}  # absent: a stage that has not run
        problem = check(value)
        if problem:
            damaged[path] = problem
            return {}
        return value

    params = file("params", PARAMS, lambda v: None if isinstance(v, dict) else "not a mapping")
    return Experiment(name=name, params=dict(dotted(params)),
                      summary=file("metrics", SUMMARY_FILE, _summary_problem),
                      claims=file("metrics", VERDICTS_FILE, _claims_problem), damaged=damaged)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _summary_problem(value: Any) -> str | None:
    """What in a summary.json is not what the summary stage writes (the first key), or None."""
    if not isinstance(value, dict):
        return f"expected a JSON object, got {type(value).__name__}"
    for section, depth in (("ppl", 1), ("bleu", 2), ("rescore", 1)):
        entries = value.get(section, {})
        if not isinstance(entries, dict):
            return f"'{section}' must be an object, got {type(entries).__name__}"
        for key, v in entries.items():
            inner = v.items() if depth == 2 and isinstance(v, dict) else [(None, v)]
            if depth == 2 and not isinstance(v, dict):
                return f"'{section}.{key}' must be an object of beams, got {json.dumps(v)}"
            for beam, number in inner:
                if depth == 2 and not (isinstance(beam, str) and beam.lstrip("b").isdigit()):
                    return f"'{section}.{key}.{beam}' is not a beam (b1, b12)"
                if not _is_number(number):
                    where = f"{section}.{key}" + (f".{beam}" if beam else "")
                    return f"'{where}' must be a number, got {json.dumps(number)}"
    return None


def _claims_problem(value: Any) -> str | None:
    if not isinstance(value, dict):
        return f"expected a JSON object, got {type(value).__name__}"
    for cid, verdict in value.items():
        if not isinstance(verdict, str):
            return f"'{cid}' must be a verdict (a string), got {json.dumps(verdict)}"
    return None


def rows(exps: list[Experiment]) -> list[tuple[str, list[str]]]:
    """(label, one cell per experiment) for every row of the table; a section title has no
    cells. Params rows only where the experiments differ."""
    out: list[tuple[str, list[str]]] = []
    leaves = [dict(_leaves(e.params)) for e in exps]
    keys = _in_order([list(p) for p in leaves])
    # an experiment without params (an old commit with no params.yaml) has none to differ by
    readable = [p for e, p in zip(exps, leaves) if e.params and PARAMS not in e.damaged
                and REVISION not in e.damaged]
    changed = [k for k in keys if len({_show(p.get(k)) for p in readable}) > 1]
    if changed:
        out.append(("params that differ", []))
        out += [(f"  {k}", [e.cell(PARAMS, _show(p.get(k))) for e, p in zip(exps, leaves)])
                for k in changed]

    def named(section: str, params_section: str) -> list[str]:
        """The entries of a summary section, and where an experiment's summary is damaged,
        those its params name: its cells are marked even when no other experiment has them."""
        return list(dict.fromkeys(
            [k for e in exps for k in (e.summary.get(section) or {})]
            + [k.split(".")[1] for e in exps if SUMMARY_FILE in e.damaged
               for k in e.params if k.startswith(f"{params_section}.")]))

    models = named("ppl", "models")
    if models:
        out.append(("test perplexity", []))
        out += [(f"  {m}", [e.cell(SUMMARY_FILE, _num(e.summary.get("ppl", {}).get(m)))
                            for e in exps]) for m in models]
    systems = named("bleu", "systems")
    if systems:
        out.append(("BLEU (tokenised), widest beam", []))
        for s in systems:
            widest = []
            for e in exps:
                beams = e.summary.get("bleu", {}).get(s) or {}
                asked = e.params.get(f"systems.{s}.beams")
                if isinstance(asked, list) and asked and all(isinstance(b, int) for b in asked):
                    widest.append(f"b{max(asked)}")  # the experiment's: "-" where not scored
                else:  # params not readable: the widest its summary holds
                    widest.append(max(beams, key=lambda b: int(b.lstrip("b")), default=None))
            # the row's beam: the most common (the first column's of as many); a number at
            # another beam says its own ("2.22 b2"), not to be read beside the others' as alike
            usual = Counter(b for b in widest if b).most_common(1)
            cells = []
            for e, beam in zip(exps, widest):
                bleu = (e.summary.get("bleu", {}).get(s) or {}).get(beam) if beam else None
                other = bleu is not None and beam != usual[0][0]
                cells.append(e.cell(SUMMARY_FILE, _num(bleu) + (f" {beam}" if other else "")))
            out.append((f"  {s}", cells))
    rescored = list(dict.fromkeys(r for e in exps for r in (e.summary.get("rescore") or {})))
    if rescored:
        out.append(("BLEU (tokenised), rescoring", []))
        out += [(f"  {r}", [e.cell(SUMMARY_FILE, _num(e.summary.get("rescore", {}).get(r)))
                            for e in exps]) for r in rescored]
    claims = list(dict.fromkeys(c for e in exps for c in e.claims))
    if claims:
        out.append(("claims", []))
        out += [(f"  {c}", [e.cell(VERDICTS_FILE, SHORT.get(e.claims.get(c),
                                                     str(e.claims.get(c) or "-")))
                            for e in exps]) for c in claims]
    return out


def damage(exps: list[Experiment]) -> list[str]:
    """One line per file an experiment could not use: its cells are marked ``!``."""
    return [f"{DAMAGED} {e.name}: {path}: {what}" for e in exps for path, what in e.damaged.items()]


def _leaves(params: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """Params (dotted keys) with every list that holds mappings or lists opened by index, down to
    its leaves (``data.train.0.max_lines``): only the leaves that differ become rows, and an item
    one experiment lacks is absent. A list of plain values (an ensemble's members, the beams) is
    one leaf: by index, one member fewer at the front would make every later index differ."""
    for key, value in params.items():
        if isinstance(value, dict):
            yield from _leaves({f"{key}.{k}": v for k, v in value.items()})
        elif isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
            yield from _leaves({f"{key}.{i}": v for i, v in enumerate(value)})
        else:
            yield key, value


def _in_order(orders: list[list[str]]) -> list[str]:
    """Every key once, each after the key it follows where it was first seen: a list item only a
    later experiment has (``data.train.2``) stays beside the items before it."""
    out: list[str] = []
    seen: set[str] = set()
    for keys in orders:
        at = 0
        for k in keys:
            if k in seen:
                at = out.index(k) + 1
            else:
                out.insert(at, k)
                seen.add(k)
                at += 1
    return out


def _show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return Whole("[" + ", ".join(_show(v) for v in value) + "]")
    return str(value)


def _num(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if isinstance(value, (int, float)) else str(value)


def render(exps: list[Experiment], *, width: int = 160, cell: int = 14) -> str:
    """The table as text, every line at most `width` characters: the experiments in blocks of
    as many columns as fit beside the labels; a cell longer than `cell` is cut with '~', but a
    Whole cell, and every cell of a row where the cut would make two different cells read the
    same, goes on over further lines. A label is cut in the middle, and the label column widens
    where no cut tells two labels apart (two keys alike but for their middle)."""
    if not exps:
        return "no experiments\n"
    table = rows(exps)
    label_w = min(max((len(label) for label, _ in table), default=10), max(20, width // 3))
    label_w = max(label_w, len("experiment"))
    labels = [label for label, cells in table if cells]
    while (short := _labels(labels, label_w)) is None:  # two labels no cut tells apart
        label_w += 1
    per_block = max(1, (width - label_w) // (cell + 2))
    lines: list[str] = []
    for start in range(0, len(exps), per_block):
        block = range(start, min(start + per_block, len(exps)))
        if lines:
            lines.append("")
        lines.append(_line("experiment", [_fit_name(exps[i].name, cell) for i in block],
                           label_w, cell))
        lines.append("-" * min(width, label_w + len(block) * (cell + 2)))
        for label, cells in table:
            if not cells:  # a section's title: nothing beside it to make room for
                lines.append(_fit(label, width))
                continue
            wrap = len({_fit(c, cell) for c in cells}) < len(set(cells))
            lines += _lines(short[label], [cells[i] for i in block], label_w, cell, wrap=wrap)
    notes = damage(exps)
    if notes:  # not cut to the width: the file and the damage must be readable whole
        lines += ["", f"{DAMAGED}: a file that could not be read (its cells are marked):", *notes]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _line(label: str, cells: list[str], label_w: int, cell: int) -> str:
    return _fit(label, label_w).ljust(label_w) + "".join(
        "  " + _fit(c, cell).rjust(cell) for c in cells)


def _lines(label: str, cells: list[str], label_w: int, cell: int, *, wrap: bool) -> list[str]:
    """A row as one line, or as several where a cell is shown whole (the label on the first)."""
    pieces = [textwrap.wrap(c, cell, break_on_hyphens=False) or [""]
              if wrap or isinstance(c, Whole) else [c] for c in cells]
    depth = max((len(p) for p in pieces), default=1)
    return [_line(label if i == 0 else "", [p[i] if i < len(p) else "" for p in pieces], label_w,
                  cell) for i in range(depth)]


def _fit(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "~"


def _fit_name(name: str, n: int, tail: int | None = None) -> str:
    """An experiment's name cut in the middle to `n` characters, or to keep its last `tail`:
    names of a sweep share their start (sweep-lr-depth4-a, -b), so the end tells them apart."""
    if len(name) <= n:
        return name
    tail = n - 1 - (n - 1) // 2 if tail is None else tail
    return name[:n - 1 - tail] + "~" + name[len(name) - tail:]


def _labels(labels: list[str], n: int) -> dict[str, str] | None:
    """Each label cut to `n` characters in the middle, past its indent, so that the leaf of a
    param's key stays (``models.tran~warmup_steps``). Labels whose cuts would read the same keep
    more of their end, or where the end does not tell them apart, of their start; None where no
    cut to `n` does."""
    def fit(label: str, tail: int | None = None) -> str:
        body = label.lstrip(" ")
        room = n - len(label) + len(body)
        return label[:len(label) - len(body)] + _fit_name(
            body, room, None if tail is None else min(tail, room - 1))

    cut = {label: fit(label) for label in labels}
    while True:
        by_cut: dict[str, list[str]] = {}
        for label, short in cut.items():
            by_cut.setdefault(short, []).append(label)
        same = next((group for group in by_cut.values() if len(group) > 1), None)
        if same is None:
            return cut
        taken = set(cut.values()) - {cut[same[0]]}
        room = n - len(same[0]) + len(same[0].lstrip(" "))
        middle = room - 1 - (room - 1) // 2
        for tail in [*range(middle + 1, room), *range(middle - 1, -1, -1)]:
            shorts = [fit(label, tail) for label in same]
            if len(set(shorts)) == len(same) and not taken.intersection(shorts):
                cut.update(zip(same, shorts))
                break
        else:
            return None
