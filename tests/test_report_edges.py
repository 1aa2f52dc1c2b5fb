"""The report's analysis sections and perplexity table at their edges, from the published run's
analysis folder changed one way each: no sentence long enough for gradient reach, a derived
table without a row the report reads, models of other depths in the forget-gate figure, two
distances that print alike, a profile whose Table 1 lacks a perplexity row."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd
import pytest

from helpers import profile_dict, write_params
from s2s import config
from s2s.analysis import outputs
from s2s.artifacts import ArtifactError
from s2s.report import figures
from s2s.report.render import Table
from s2s.report.sections import perplexity
from s2s.report.sections.analysis import figure2, gradient_reach, reach_training

ROOT = Path(__file__).resolve().parents[1]
ANALYSIS = ROOT / "reports" / "default" / "analysis"


@pytest.fixture(scope="module")
def published() -> outputs.Analyses:
    return outputs.read(ANALYSIS)


def texts(section) -> list[str]:
    return [b for b in section.blocks if isinstance(b, str)]


def test_gradient_reach_without_a_measured_sentence_makes_no_comparison(published, tmp_path):
    """No test sentence as long as analysis.reach_min_length: the first words' means are NaN, and
    the text said 'nan vs nan' and that the reversed model's gradients reach them 'as strongly'
    as the forward one's (NaN compares as neither higher nor lower)."""
    said = texts(gradient_reach.section(published, tmp_path, "figures"))
    assert sum("At the end of training" in t for t in said) == 2  # forward against two reversed
    for columns in (["mean_norm", "mean_share"], ["mean_share"]):
        first = published.reach_first.copy()
        first[columns] = np.nan
        said = texts(gradient_reach.section(dataclasses.replace(published, reach_first=first),
                                            tmp_path, "figures"))
        assert not [t for t in said if "At the end of training" in t or "nan" in t], columns


def test_the_reach_difference_over_training_names_the_pair_it_is_of(published, tmp_path):
    """Three models have share columns (forward, reversed_1, reversed_fb1); the interval is of
    reversed_1 - forward alone (analysis.json 'compared'), and said so in the column and text."""
    section = reach_training.section(published, tmp_path, "figures")
    table = next(b for b in section.blocks if isinstance(b, Table))
    assert [c for c in table.frame.columns if "[95%]" in c] == [
        "share: reversed_1 - forward [95%]"]
    assert {"share reversed_1", "share reversed_fb1", "share forward"} <= set(table.frame.columns)
    early = next(t for t in texts(section) if t.startswith("Trained, early"))
    assert "epoch 0.25: 0.664 reversed_1 vs 0.077 forward, +0.587 [+0.579, +0.594]" in early


def test_a_derived_table_without_a_row_the_report_reads_is_refused_naming_it(tmp_path):
    for name, drop in (("memory_gate_share.csv", "gru,"), ("gradient_reach.csv", "reversed_1,")):
        folder = tmp_path / name
        shutil.copytree(ANALYSIS, folder)
        path = folder / name
        lines = path.read_text().splitlines(keepends=True)
        path.write_text("".join(ln for ln in lines if not ln.startswith(drop)))
        with pytest.raises(ArtifactError) as e:
            outputs.read(folder)
        assert str(e.value).startswith(f"{path}: no row of {drop.rstrip(',')}"), str(e.value)


def test_forget_gate_panels_give_each_model_one_colour_whatever_the_panel_holds(tmp_path):
    """A shallow and a deep LSTM: the deep one's layer 2 panel holds it alone, and drew it in the
    first colour, the one the legend (of the first panel) gives the shallow model."""
    rows = [pd.DataFrame({"model": model, "stack": stack, "layer": layer, "bin_lo": [0, .5],
                          "bin_hi": [.5, 1], "count": [1, 1], "density": [1.0, 1.0]})
            for model, layers in (("shallow", 1), ("deep", 2)) for stack in ("encoder", "decoder")
            for layer in range(1, layers + 1)]
    drawn = {}

    def keep(fig, path):
        drawn.update({ax.get_title(): {p.get_label(): p.get_edgecolor() for p in ax.patches}
                      for ax in fig.axes})
        return path

    with mock.patch.object(figures, "save", keep):
        figures.forget_gates(pd.concat(rows), tmp_path / "forget.png")
    deep = {c["deep"] for c in drawn.values() if "deep" in c}
    shallow = {c["shallow"] for c in drawn.values() if "shallow" in c}
    assert len(deep) == len(shallow) == 1 and deep != shallow
    assert set(drawn["encoder, layer 2"]) == {"deep"}


def test_figure2_distances_that_print_alike_get_the_digits_that_tell_them_apart(published,
                                                                                tmp_path):
    summary = published.figure2.copy()
    summary["paraphrase_distance"], summary["swap_distance"] = 1.0512, 1.0538
    said = texts(figure2.section(dataclasses.replace(published, figure2=summary), tmp_path,
                                 "figures"))
    assert any("paraphrases at 1.051 are closer than word-order swaps at 1.054" in t
               for t in said), said


def test_a_perplexity_row_no_system_answers_says_so(tmp_path):
    """A profile whose report.table1 answers no forward_beam12 row: that row said 'no
    metrics/train/None.json'."""
    raw = profile_dict("smoke")
    del raw["report"]["table1"]["forward_beam12"]
    params = config.load(write_params(tmp_path / "params.yaml", raw))
    status = list(perplexity.perplexity_table(params, {})["status"])
    assert status == ["not run: no system answers report.table1.forward_beam12",
                      "not run: no metrics/train/reversed_1.json"]
