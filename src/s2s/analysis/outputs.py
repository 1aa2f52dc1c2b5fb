"""The analyze stage's folder (``outputs/analysis/``): the one table of its files
(:data:`FILES`), the typed record of what it holds (:class:`Analyses`), its writer and its
reader.

The stage writes through :func:`write`; the report and the claims stage read through
:func:`read`, which checks every file against its entry in :data:`FILES` (the header's columns
in order, and that each number column holds numbers) and never draws from half a file. Torch-free,
so that reading the folder imports no model.

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

from s2s.artifacts import AnalysisMeta, read_table

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger("s2s.analysis")

META_FILE = "analysis.json"  # AnalysisMeta: what was measured, on what
MEASURED_FORMAT = "%.6g"  # the numbers of a measured table: six significant digits

# "The first source words" of the reversal argument (§3.3): original positions 1..FIRST.
FIRST = 3
FIRST_STATISTICS = {
    "first_share": f"each sentence's share of its gradient norm at source positions 1-{FIRST}",
    "first_norm": f"each sentence's mean gradient norm at source positions 1-{FIRST}"}


@dataclass(frozen=True)
class OutputFile:
    """One table of the folder: its file name, its columns in order, which of them hold
    numbers (an empty cell, NaN or inf is a number too), and how its floats are written
    (None: every digit)."""

    name: str
    columns: tuple[str, ...]
    numbers: tuple[str, ...] = ()
    float_format: str | None = MEASURED_FORMAT


POINTS_COLUMNS = ["model", "reverse_source", "group", "phrase", "tokens", "unk", "x", "y"]
FIGURE2_COLUMNS = ["model", "reverse_source", "representation", "dim", "explained_pc1",
                   "explained_pc2", "mean_pair_distance", "paraphrase_distance",
                   "paraphrase_pairs", "swap_distance", "swap_pairs", "nn_same_meaning"]
HIST_COLUMNS = ["model", "stack", "layer", "bin_lo", "bin_hi", "count", "density"]
UNIT_COLUMNS = ["model", "stack", "layer", "unit", "mean_f", "half_life", "geo_mean_f",
                "half_life_geo"]
SUMMARY_COLUMNS = ["model", "stack", "layer", "steps", "units", "mean_f", "boundary_mean_f",
                   "inside_mean_f", "boundary_steps", "inside_steps", "median_half_life",
                   "max_half_life", "units_f_above_0.9", "units_half_life_above_10"]
STACK_COLUMNS = ["model", "stack", "layers", "units", "mean_f", "units_half_life_above_10",
                 "max_half_life", "max_half_life_layer", "layers_compared",
                 "layers_boundary_lower"]
REACH_COLUMNS = ["model", "reverse_source", "position", "sentences", "mean_norm", "mean_share"]
REACH_FIRST_COLUMNS = ["model", "reverse_source", "positions", "mean_norm", "mean_share"]
TRAINING_COLUMNS = ["model", "reverse_source", "epoch", "step", "position", "sentences",
                    "mean_norm", "mean_share"]
TRAINING_FIRST_COLUMNS = ["model", "reverse_source", "epoch", "norm", "share"]
TRAINING_DIFF_COLUMNS = ["epoch", "forward", "reversed", "statistic", "sentences",
                         "forward_mean", "reversed_mean", "diff", "lo", "hi"]
INIT_REACH_COLUMNS = ["cell", "forget_bias", "step", "steps_back", "mean_norm", "std_norm",
                      "relative"]
DECAY_COLUMNS = ["model", "stack", "layer", "steps_after", "sentences", "mean_abs_dc",
                 "mean_abs_dh", "forget_only_dc", "update_only_dh"]
HALF_LIFE_COLUMNS = ["model", "layer", "half_life_c", "half_life_forget_only", "half_life_h",
                     "half_life_update_only"]
GATE_SHARE_COLUMNS = ["model", "layer", "gate_share"]


def _file(name: str, columns: list[str], *, text: tuple[str, ...],
          derived: bool = False) -> OutputFile:
    return OutputFile(name, tuple(columns), tuple(c for c in columns if c not in text),
                      None if derived else MEASURED_FORMAT)


# key (the field of Analyses) -> its file. Measured tables first, then the derived ones.
FILES: dict[str, OutputFile] = {
    # Figure 2: each phrase's PCA coordinates, and per model the variance and distances
    "points": _file("figure2.csv", POINTS_COLUMNS,
                    text=("model", "reverse_source", "phrase", "tokens", "unk")),
    "figure2": _file("figure2_summary.csv", FIGURE2_COLUMNS,
                     text=("model", "reverse_source", "representation")),
    # forget gates: their histogram, each unit's mean and half-life, per layer
    "hist": _file("forget_hist.csv", HIST_COLUMNS, text=("model", "stack")),
    "units": _file("forget_units.csv", UNIT_COLUMNS, text=("model", "stack")),
    "forget": _file("forget_summary.csv", SUMMARY_COLUMNS, text=("model", "stack")),
    # gradient reach at the end of training, at each snapshot, and forward vs reversed
    "reach": _file("gradient_reach.csv", REACH_COLUMNS, text=("model", "reverse_source")),
    "training": _file("gradient_reach_training.csv", TRAINING_COLUMNS,
                      text=("model", "reverse_source")),
    "training_diff": _file("gradient_reach_training_diff.csv", TRAINING_DIFF_COLUMNS,
                           text=("forward", "reversed", "statistic")),
    # at initialisation, no trained model (s2s.analysis.init_reach)
    "init_reach": _file("init_reach.csv", INIT_REACH_COLUMNS, text=("cell",)),
    # memory of a one-word change
    "decay": _file("memory_decay.csv", DECAY_COLUMNS, text=("model", "stack")),
    "half_life": _file("memory_half_life.csv", HALF_LIFE_COLUMNS, text=("model",)),
    # derived (s2s.analysis.run): what the report and the claims quote
    "reach_first": _file("gradient_reach_first.csv", REACH_FIRST_COLUMNS,
                         text=("model", "reverse_source"), derived=True),
    "training_first": _file("gradient_reach_training_first.csv", TRAINING_FIRST_COLUMNS,
                            text=("model", "reverse_source"), derived=True),
    "stacks": _file("forget_stacks.csv", STACK_COLUMNS, text=("model", "stack"), derived=True),
    "gate_share": _file("memory_gate_share.csv", GATE_SHARE_COLUMNS, text=("model",),
                        derived=True),
}


@dataclass(frozen=True)
class Analyses:
    """Everything the analyze stage wrote: its record and one frame per table of
    :data:`FILES` (columns as there; a table with no rows has its header only)."""

    meta: AnalysisMeta
    points: pd.DataFrame  # figure2.csv
    figure2: pd.DataFrame  # figure2_summary.csv
    hist: pd.DataFrame  # forget_hist.csv
    units: pd.DataFrame  # forget_units.csv
    forget: pd.DataFrame  # forget_summary.csv
    reach: pd.DataFrame  # gradient_reach.csv
    training: pd.DataFrame  # gradient_reach_training.csv
    training_diff: pd.DataFrame  # gradient_reach_training_diff.csv
    init_reach: pd.DataFrame  # init_reach.csv
    decay: pd.DataFrame  # memory_decay.csv
    half_life: pd.DataFrame  # memory_half_life.csv
    reach_first: pd.DataFrame  # gradient_reach_first.csv
    training_first: pd.DataFrame  # gradient_reach_training_first.csv
    stacks: pd.DataFrame  # forget_stacks.csv
    gate_share: pd.DataFrame  # memory_gate_share.csv


def csv_text(frame: pd.DataFrame, spec: OutputFile) -> str:
    """The contents of table `spec`'s file holding `frame`."""
    return frame.to_csv(index=False, float_format=spec.float_format)


def as_written(frame: pd.DataFrame, key: str) -> pd.DataFrame:
    """`frame` as a reader of table `key`'s file sees it: its CSV text parsed back, so that a
    statistic derived from it is the one its reader would compute."""
    import io

    import pandas as pd

    return pd.read_csv(io.StringIO(csv_text(frame, FILES[key])))


def write(out_dir: Path, analyses: Analyses) -> list[Path]:
    """Every table of `analyses` and its record into `out_dir`, each atomically; the paths
    written. A frame whose columns are not its entry's in :data:`FILES` is refused before
    anything is written."""
    from s2s.io import atomic_write_text

    out_dir = Path(out_dir)
    for key, spec in FILES.items():
        got = tuple(getattr(analyses, key).columns)
        if got != spec.columns:
            raise ValueError(f"{spec.name}: columns {got} are not those of its entry in "
                             f"s2s.analysis.outputs.FILES {spec.columns}")
    written = []
    for key, spec in FILES.items():
        atomic_write_text(out_dir / spec.name, csv_text(getattr(analyses, key), spec))
        written.append(out_dir / spec.name)
    analyses.meta.write(out_dir / META_FILE)
    return written + [out_dir / META_FILE]


def read(analysis_dir: Path) -> Analyses:
    """The analyze stage's folder, every file checked (:func:`s2s.artifacts.read_table`, the
    record's schema): a missing file, a missing column or a value that is not a number is an
    error naming the file (and the line)."""
    d = Path(analysis_dir)
    frames: Mapping[str, pd.DataFrame] = {
        key: read_table(d / spec.name, columns=spec.columns, numbers=spec.numbers)
        for key, spec in FILES.items()}
    return Analyses(meta=AnalysisMeta.read(d / META_FILE), **frames)


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

    return pd.DataFrame(columns=list(FILES[key].columns))
