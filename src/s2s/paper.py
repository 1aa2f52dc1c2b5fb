"""The paper's numbers and claims (``paper.yaml``, beside this file), and which of our outputs
answers each of the paper's rows (params ``report.table1`` / ``report.table2``).

No number of the paper and no name of one of our systems is written in the report's code: the
paper's are in ``paper.yaml``, ours in the parameter file. ``paper.yaml`` is read once
(:func:`paper`) and checked as params are: an unknown or missing key is an error naming the file
and the key.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from s2s.artifacts import Bleu, Scored
from s2s.config import ConfigError, Params, read_yaml
from s2s.layout import BASELINE

PAPER_FILE = Path(__file__).with_name("paper.yaml")
TABLES = ("table1", "table2")


@dataclass(frozen=True)
class PaperRow:
    """One row of the paper's Table 1 or 2."""

    id: str
    method: str
    paper_bleu: float  # the value: 45.0 for "~45"
    paper_text: str  # as the paper prints it ("~45", "33.30")
    ours_never: str = ""  # why no output of ours answers it (a system we do not train)


@dataclass(frozen=True)
class PerplexityRow:
    source_order: str  # forward | reversed
    test_ppl: float
    row: str  # the Table 1 row whose system's model is ours


@dataclass(frozen=True)
class ClaimSpec:
    statement: str
    paper: str  # rendered: the paper's numbers filled in; "" where it gives none
    rows: tuple[str, ...] = ()  # Table 1 row ids

    @property
    def text(self) -> str:
        """The claim as the claims table words it (s2s.artifacts.Claim.claim)."""
        return f"{self.statement} ({self.paper})" if self.paper else self.statement


@dataclass(frozen=True)
class Paper:
    conditions: str
    table1: tuple[PaperRow, ...]
    table2: tuple[PaperRow, ...]
    perplexity: tuple[PerplexityRow, ...]
    figure3: dict[str, str]  # curve -> BLEU as printed in the legend
    claims: dict[str, ClaimSpec]

    def rows(self, table: str) -> tuple[PaperRow, ...]:
        return {"table1": self.table1, "table2": self.table2}[table]

    def row(self, table: str, row_id: str) -> PaperRow:
        for r in self.rows(table):
            if r.id == row_id:
                return r
        raise KeyError(f"{PAPER_FILE}: no row '{row_id}' in '{table}'")

    def test_ppl(self) -> dict[str, float]:
        return {p.source_order: p.test_ppl for p in self.perplexity}


@functools.cache
def paper() -> Paper:
    """The paper's numbers and claims, from :data:`PAPER_FILE`."""
    return load(PAPER_FILE)


# --- paper.yaml as it is written, read by the params' decoder (s2s.schema) -----------------------


@dataclass(frozen=True)
class _RowEntry:
    id: str
    method: str
    bleu: str | None  # as printed ("33.30", "~45"); null: not in the paper (a row of ours)
    ours_never: str | None = None


@dataclass(frozen=True)
class _PerplexityEntry:
    source_order: str
    test_ppl: float
    row: str


@dataclass(frozen=True)
class _ClaimEntry:
    statement: str
    paper: str = ""  # a Jinja template over the paper's numbers
    rows: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Figure3Entry:
    lstm: str
    baseline: str


@dataclass(frozen=True)
class _PaperFile:
    conditions: str
    table1: tuple[_RowEntry, ...]
    table2: tuple[_RowEntry, ...]
    perplexity: tuple[_PerplexityEntry, ...]
    figure3: _Figure3Entry
    claims: dict[str, _ClaimEntry]


def load(path: Path) -> Paper:
    """paper.yaml, checked whole: its shape by :func:`s2s.schema.decode` (as params are), then
    what refers to what (a BLEU as printed, row ids, the claims' templates)."""
    from s2s.config import RULES
    from s2s.schema import decode

    raw: _PaperFile = decode(_PaperFile, read_yaml(path), path, "", RULES)
    tables = {}
    for table in TABLES:
        rows = []
        for i, r in enumerate(getattr(raw, table)):
            key = f"{table}[{i}]"
            if r.bleu is None:  # a row of ours beside the paper's (a modern reference)
                text, value = "not in the paper", math.nan
            else:
                text = r.bleu
                try:
                    value = float(text.lstrip("~"))
                except ValueError:
                    raise ConfigError(f"{path}: '{key}.bleu' must be a BLEU score as printed "
                                      f"('33.30', '~45') or null (not in the paper), got "
                                      f"{text!r}") from None
            rows.append(PaperRow(id=r.id, method=r.method, paper_bleu=value, paper_text=text,
                                 ours_never=r.ours_never or ""))
        ids = [r.id for r in rows]
        if len(set(ids)) != len(ids):
            raise ConfigError(f"{path}: '{table}' names a row id twice")
        tables[table] = tuple(rows)
    table1_ids = {r.id for r in tables["table1"]}
    perplexity = tuple(
        PerplexityRow(r.source_order, r.test_ppl,
                      _row(r.row, table1_ids, path, f"perplexity[{i}].row"))
        for i, r in enumerate(raw.perplexity))
    numbers = {"table1": {r.id: r.paper_text for r in tables["table1"]},
               "table2": {r.id: r.paper_text for r in tables["table2"]},
               "ppl": {p.source_order: p.test_ppl for p in perplexity}}
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)
    claims = {}
    for name, c in raw.claims.items():
        key = f"claims.{name}"
        try:
            numbers_text = env.from_string(c.paper).render(**numbers)
        except jinja2.TemplateError as e:
            raise ConfigError(f"{path}: '{key}.paper': {e}") from None
        rows = tuple(_row(r, table1_ids, path, f"{key}.rows[{i}]") for i, r in enumerate(c.rows))
        claims[name] = ClaimSpec(" ".join(c.statement.split()), numbers_text, rows)
    return Paper(conditions=raw.conditions, table1=tables["table1"], table2=tables["table2"],
                 perplexity=perplexity, figure3=dataclasses.asdict(raw.figure3), claims=claims)


# --- which of our outputs answers a row ---------------------------------------------------------


@dataclass(frozen=True)
class Ours:
    """What of ours answers a paper row: a translation (system, beam), a rescoring output, or the
    pipeline's baseline (resolved from params by :func:`baseline_ref`)."""

    kind: str  # "translate" | "rescore" | "baseline"
    system: str = ""
    beam: int = 0

    @property
    def label(self) -> str:
        """In words: "<system> beam <b>", or "rescore/<name>"."""
        return (f"{self.system} beam {self.beam}" if self.kind == "translate"
                else f"rescore/{self.system}")


def cost_systems(params: Params) -> list[tuple[str, int]]:
    """(system, beam) of the cost claim's ensemble row (the first of ``claims.cost.rows``) and
    of its first single-model row that params answer with a translation: what the timing stage
    times and the claim compares; [] where params answer either with none."""
    answers = params.report.table1  # (only table1: the timing stage declares no more)
    first, *singles = (answers.get(r) for r in paper().claims["cost"].rows)
    single = next((a for a in singles if a is not None and a.system is not None), None)
    if first is None or first.system is None or single is None:
        return []
    return [(first.system, first.beam), (single.system, single.beam)]


def answer(params: Params, table: str, row_id: str) -> Ours | None:
    """Our output answering row `row_id` of the paper's `table` (params ``report.<table>``), or
    None where the profile names none."""
    answers = getattr(params.report, table)
    check_answers(params)
    a = answers.get(row_id)
    if a is None:
        return None
    if a.baseline:
        return Ours("baseline")
    if a.rescore is not None:
        return Ours("rescore", a.rescore)
    return Ours("translate", a.system, a.beam)


def baseline_ref(params: Params) -> Ours:
    """Our stand-in for the paper's SMT baseline: the pipeline's own baseline system at its widest
    beam, or (external n-best lists, baseline not one of our systems) the rescore stage's 1-best."""
    name = params.rescore.baseline
    if name in params.systems:
        return Ours("translate", name, params.systems[name].widest_beam)
    return Ours("rescore", BASELINE)


def perplexity_models(params: Params) -> dict[str, str | None]:
    """Source order (forward, reversed) -> our model compared on it: the first member of the system
    answering the paper's Table 1 row that paper.yaml `perplexity` names, None where none does."""
    out = {}
    for p in paper().perplexity:
        ours = answer(params, "table1", p.row)
        system = params.systems.get(ours.system) if ours and ours.kind == "translate" else None
        out[p.source_order] = system.members[0] if system else None
    return out


def tokenized_bleu(bleu: Bleu, ours: Ours) -> float | None:
    """The tokenized BLEU of `ours` (a translation or a rescoring output) in metrics/bleu.json;
    None where it was not scored."""
    e = bleu.entry(ours.kind, ours.system, ours.beam)
    return e.bleu_tok if isinstance(e, Scored) else None


def check_answers(params: Params) -> None:
    """Every row params ``report.table1`` / ``report.table2`` answers is a row of the paper's."""
    for table in TABLES:
        ids = [r.id for r in paper().rows(table)]
        for row_id in getattr(params.report, table):
            if row_id not in ids:
                raise ConfigError(f"{params.source}: 'report.{table}.{row_id}' is not a row of "
                                  f"the paper's {table} in {PAPER_FILE.name} (rows: "
                                  f"{', '.join(ids)})")


# --- checking paper.yaml ------------------------------------------------------------------------


def _row(raw: Any, ids: set[str], path: Path, key: str) -> str:
    if raw not in ids:
        raise ConfigError(f"{path}: '{key}' must name a row of table1 ({', '.join(sorted(ids))}), "
                          f"got {raw!r}")
    return raw
