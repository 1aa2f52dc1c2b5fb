"""The analyze stage's folder (``outputs/analysis/``): the typed record of what it holds
(:class:`Analyses`), its writer and its reader. Its files, their columns and how their numbers are
written are :data:`s2s.layout.ANALYSIS_TABLES`.

The stage writes through :func:`write`; the report and the claims stage read through
:func:`read`, which checks every file against its entry there (the header's columns in order, and
that each number column holds numbers) and never draws from half a file. Torch-free, so that
reading the folder imports no model.

Two kinds of tables:

* measured: written from the models (``figure2.csv`` .. ``memory_half_life.csv``);
* derived: statistics of the measured tables that the report and the claims quote
  (``gradient_reach_first.csv``, ``gradient_reach_training_first.csv``, ``forget_stacks.csv``,
  ``memory_gate_share.csv``). They are computed from the measured tables *as written*
  (:func:`as_written`: the CSV text parsed back), so anyone recomputing them from the CSVs gets
  the same numbers, and written with every digit (a float's shortest exact form), so that what
  the report and the claims quote is what was computed, not a rounding of it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from s2s.artifacts import AnalysisMeta, ArtifactError, read_table
from s2s.layout import ANALYSIS_META, ANALYSIS_TABLES, AnalysisTable

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger("s2s.analysis")

# "The first source words" of the reversal argument (§3.3): original positions 1..FIRST
# (analysis.max_position may not be below it: s2s.config.AnalysisConfig).
FIRST = 3
FIRST_STATISTICS = {
    "first_share": f"each sentence's share of its gradient norm at source positions 1-{FIRST}",
    "first_norm": f"each sentence's mean gradient norm at source positions 1-{FIRST}"}


@dataclass(frozen=True)
class Analyses:
    """Everything the analyze stage wrote: its record and one frame per table of
    :data:`s2s.layout.ANALYSIS_TABLES` (columns as there; a table with no rows has its header
    only)."""

    meta: AnalysisMeta
    points: pd.DataFrame  # figure2.csv
    figure2: pd.DataFrame  # figure2_summary.csv
    hist: pd.DataFrame  # forget_hist.csv
    units: pd.DataFrame  # forget_units.csv
    forget: pd.DataFrame  # forget_summary.csv
    reach: pd.DataFrame  # gradient_reach.csv
    training: pd.DataFrame  # gradient_reach_training.csv
    training_diff: pd.DataFrame  # gradient_reach_training_diff.csv
    seed_pairs: pd.DataFrame  # gradient_reach_seed_pairs.csv
    init_reach: pd.DataFrame  # init_reach.csv
    decay: pd.DataFrame  # memory_decay.csv
    half_life: pd.DataFrame  # memory_half_life.csv
    reach_first: pd.DataFrame  # gradient_reach_first.csv
    training_first: pd.DataFrame  # gradient_reach_training_first.csv
    stacks: pd.DataFrame  # forget_stacks.csv
    gate_share: pd.DataFrame  # memory_gate_share.csv


def csv_text(frame: pd.DataFrame, spec: AnalysisTable) -> str:
    """The contents of table `spec`'s file holding `frame`."""
    return frame.to_csv(index=False, float_format=spec.float_format)


def as_written(frame: pd.DataFrame, key: str) -> pd.DataFrame:
    """`frame` as a reader of table `key`'s file sees it: its CSV text parsed back, so that a
    statistic derived from it is the one its reader would compute."""
    import io

    import pandas as pd

    return pd.read_csv(io.StringIO(csv_text(frame, ANALYSIS_TABLES[key])))


def write(out_dir: Path, analyses: Analyses) -> list[Path]:
    """Every table of `analyses` and its record into `out_dir`, each atomically; the paths
    written. A frame whose columns are not its entry's in :data:`s2s.layout.ANALYSIS_TABLES` is
    refused before anything is written."""
    from s2s.io import atomic_write_text

    out_dir = Path(out_dir)
    for key, spec in ANALYSIS_TABLES.items():
        got = tuple(getattr(analyses, key).columns)
        if got != spec.columns:
            raise ValueError(f"{spec.name}: columns {got} are not those of its entry in "
                             f"s2s.layout.ANALYSIS_TABLES {spec.columns}")
    written = []
    for key, spec in ANALYSIS_TABLES.items():
        atomic_write_text(out_dir / spec.name, csv_text(getattr(analyses, key), spec))
        written.append(out_dir / spec.name)
    analyses.meta.write(out_dir / ANALYSIS_META)
    return written + [out_dir / ANALYSIS_META]


def read(analysis_dir: Path) -> Analyses:
    """The analyze stage's folder, every file checked (:func:`s2s.artifacts.read_table`, the
    record's schema): a missing file, a missing column or a value that is not a number is an
    error naming the file (and the line); so is a forget-gate summary without a model whose gates
    the record says were traced (the report would say it has none), and a table without a row
    the report reads beside another's (:data:`COVERS`)."""
    d = Path(analysis_dir)
    frames: Mapping[str, pd.DataFrame] = {key: _read_table(d, spec)
                                          for key, spec in ANALYSIS_TABLES.items()}
    a = Analyses(meta=AnalysisMeta.read(d / ANALYSIS_META), **frames)
    summarised = set(a.forget["model"])
    missing = [m for m, x in a.meta.models.items() if x.forget_gates and m not in summarised]
    if missing:
        raise ArtifactError(f"{d / ANALYSIS_TABLES['forget'].name}: no rows of "
                            f"{', '.join(missing)}, whose forget gates {ANALYSIS_META} says "
                            "were traced")
    for table, other, keys in COVERS:
        have = set(getattr(a, table)[list(keys)].itertuples(index=False, name=None))
        lacking = [k for k in getattr(a, other)[list(keys)].itertuples(index=False, name=None)
                   if k not in have]
        if lacking:
            raise ArtifactError(f"{d / ANALYSIS_TABLES[table].name}: no row of "
                                f"{'/'.join(map(str, lacking[0]))} ({', '.join(keys)}), which "
                                f"{ANALYSIS_TABLES[other].name} has: the report reads them "
                                f"side by side")
    return a


# (table, the table whose rows it must cover, the columns that match them): the report reads
# each row of the second beside the first's (memory: a layer's gate share beside its half-life;
# gradient reach: a model's positions beside its first words)
COVERS = (("gate_share", "half_life", ("model", "layer")), ("reach", "reach_first", ("model",)))


def _read_table(d: Path, spec: AnalysisTable) -> pd.DataFrame:
    """Table `spec` of folder `d`, checked; its `later` columns (an earlier analyze stage's file
    lacks them) empty where the file has none, in the entry's order; an `optional` table an
    earlier analyze stage did not write, no rows."""
    import numpy as np
    import pandas as pd

    if spec.optional and not (d / spec.name).exists():
        log.info("%s: not there (written by an earlier analyze stage): no rows", d / spec.name)
        return pd.DataFrame(columns=list(spec.columns))
    frame = read_table(d / spec.name, columns=spec.columns, numbers=spec.numbers,
                       later=spec.later)
    for c in spec.later:
        if c not in frame.columns:
            frame[c] = np.nan
    return frame[list(spec.columns)]


def read_if_present(analysis_dir: Path | None, files_read: list[str]) -> Analyses | None:
    """:func:`read` of `analysis_dir`, appended to `files_read`; None (logged) where there is no
    such folder, or no folder is given (a profile without the analyze stage)."""
    if analysis_dir is None:
        return None
    if not Path(analysis_dir).is_dir():
        log.warning("absent: %s", analysis_dir)
        return None
    files_read.append(f"{analysis_dir}/")
    return read(Path(analysis_dir))


def empty(key: str) -> pd.DataFrame:
    """Table `key` with no rows: its header only."""
    import pandas as pd

    return pd.DataFrame(columns=list(ANALYSIS_TABLES[key].columns))
