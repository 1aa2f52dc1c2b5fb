"""dvc.yaml and the profiles agree: every profile validates, every model has a train stage, and
the explicit translate/rescore/analyze/attention stages depend on exactly the models their params name."""

from pathlib import Path

import pytest
import yaml

from s2s.config import load

ROOT = Path(__file__).resolve().parents[1]
PROFILES = sorted((ROOT / "profiles").glob("*.yaml"))
STAGES = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]


def model_deps(stage: dict) -> set[str]:
    return {d.removeprefix("models/") for d in stage["deps"] if d.startswith("models/")}


def test_all_four_profiles_exist():
    assert {p.stem for p in PROFILES} == {"smoke", "default", "wmt14", "paper"}


def test_params_yaml_is_the_default_profile():
    assert (ROOT / "params.yaml").read_text() == (ROOT / "profiles/default.yaml").read_text()


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.stem)
def test_translate_and_rescore_stages_match_the_profile(profile):
    params = load(profile)
    for system, cfg in params.systems.items():
        stage = STAGES[f"translate-{system}"]
        assert model_deps(stage) == set(cfg.members), system
        assert f"translate {system} " in stage["cmd"]
        assert f"systems.{system}" in stage["params"]
    assert {k.split("-", 1)[1] for k in STAGES if k.startswith("translate-")} == set(params.systems)
    for name, members in params.rescore.rescorers.items():
        stage = STAGES[f"rescore-{name}"]
        assert model_deps(stage) == set(members), name
    assert {k.split("-", 1)[1] for k in STAGES if k.startswith("rescore-")} == \
        set(params.rescore.rescorers) | {"oracle"}


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.stem)
def test_learning_curve_plots_cover_every_model(profile):
    plots = yaml.safe_load((ROOT / "dvc.yaml").read_text())["plots"]
    models = set(load(profile).models)
    curves = [spec for plot in plots for spec in plot.values()
              if all(f.startswith("metrics/curves/") for f in spec["y"])]
    assert len(curves) == 2  # dev and train perplexity
    for spec in curves:
        assert {Path(f).stem for f in spec["y"]} == models


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.stem)
def test_attention_stage_reads_the_profiles_attention_system(profile):
    params = load(profile)
    system = params.analysis.attention_system
    stage = STAGES["attention"]
    assert system is not None, "every profile draws its attention system's alignments"
    assert model_deps(stage) == set(params.systems[system].members)
    assert f"outputs/translate/{system}" in stage["deps"]


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.stem)
def test_analyze_stage_reads_the_profiles_analysis_models(profile):
    assert model_deps(STAGES["analyze"]) == set(load(profile).analysis.models)
