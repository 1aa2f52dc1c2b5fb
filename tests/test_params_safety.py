"""Nothing from params reaches a shell, and s2s reads params.yaml as DVC does (issue 14, class 2).

- every name that dvc.yaml pastes into a command or a path (models, systems, rescorers,
  rescore.baseline) must match ``config.NAME_PATTERN``, refused before any work, naming the key;
  a real ``dvc repro`` with a hostile model name stops at the check-params stage and runs nothing;
- the file is read with YAML 1.2 (ruamel.yaml, as DVC): ``off`` is a string, ``010`` is 10, and a
  duplicate key is refused with its line;
- duplicate ensemble members and non-finite numbers are refused, naming the key;
- ``s2s profile NAME`` reads nothing outside ``profiles/``.
"""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import BIN, make_project, need_mirror, run
from helpers import profile_dict, profile_text
from s2s import config
from s2s.config import ConfigError

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "profiles" / "smoke.yaml"
HOSTILE = ["x;touch PWNED;", "a b", "../up", "a/b", "a.b", "-x", "$(id)", "x`id`", "1st"]


def smoke() -> dict:
    return profile_dict("smoke")


def transformers_alone() -> dict:
    """The smoke profile with its Transformer alone: no model the analyses can read."""
    raw = smoke()
    raw["models"] = {"transformer": raw["models"]["transformer"]}
    raw["systems"] = {"transformer": raw["systems"]["transformer"]}
    raw["rescore"] = {"baseline": None}
    raw["report"] = {"figure3_system": "transformer", "figure3_beam": 12}
    raw["analysis"] = {"models": []}
    raw["timing"] = {}
    return raw


def write(tmp_path: Path, raw: dict | str, name: str = "params.yaml") -> Path:
    path = tmp_path / name
    path.write_text(raw if isinstance(raw, str) else yaml.safe_dump(raw, sort_keys=False),
                    encoding="utf-8")
    return path


def rename_model(raw: dict, old: str, new) -> dict:
    raw = copy.deepcopy(raw)
    raw["models"] = {(new if k == old else k): v for k, v in raw["models"].items()}
    for system in raw["systems"].values():
        system["members"] = [new if m == old else m for m in system["members"]]
    for name, members in raw["rescore"]["rescorers"].items():
        raw["rescore"]["rescorers"][name] = [new if m == old else m for m in members]
    raw["analysis"]["models"] = [new if m == old else m for m in raw["analysis"]["models"]]
    raw["analysis"]["memory_models"] = [new if m == old else m
                                        for m in raw["analysis"].get("memory_models", [])]
    return raw


def rename_system(raw: dict, old: str, new) -> dict:
    raw = copy.deepcopy(raw)
    raw["systems"] = {(new if k == old else k): v for k, v in raw["systems"].items()}
    for section, key in (("rescore", "baseline"), ("report", "figure3_system"),
                         ("analysis", "attention_system")):
        if raw[section][key] == old:
            raw[section][key] = new
    return raw


def rename_rescorer(raw: dict, old: str, new) -> dict:
    raw = copy.deepcopy(raw)
    raw["rescore"]["rescorers"] = {(new if k == old else k): v
                                   for k, v in raw["rescore"]["rescorers"].items()}
    return raw


@pytest.mark.parametrize("name", HOSTILE)
@pytest.mark.parametrize("where, rename", [
    ("models", lambda raw, n: rename_model(raw, "forward", n)),
    ("systems", lambda raw, n: rename_system(raw, "gru", n)),
    ("rescore.rescorers", lambda raw, n: rename_rescorer(raw, "gru", n)),
    ("systems", lambda raw, n: rename_system(raw, "baseline", n)),  # also rescore.baseline
])
def test_a_hostile_name_in_each_params_map_is_refused_naming_the_key(tmp_path, where, rename,
                                                                     name):
    path = write(tmp_path, rename(smoke(), name))
    with pytest.raises(ConfigError) as e:
        config.load(path)
    assert str(e.value).startswith(f"{path}: '{where}.{name}' is not a valid name"), e.value


@pytest.mark.parametrize("name", ["baseline", "oracle"])
def test_a_rescorer_named_as_the_rescore_stages_own_output_is_refused_naming_the_key(tmp_path,
                                                                                     name):
    """A rescorer `baseline` wrote its outputs where the evaluate stage never read them (it
    scored the baseline's own 1-best in its place); one named `oracle` made two stages of one
    name. The check, the check stage and `s2s dag write` refuse both."""
    from s2s.stages.check import main as check_main, require_known_answers

    path = write(tmp_path, rename_rescorer(smoke(), "gru", name))
    params = config.load(path)
    says = f"{path}: 'rescore.rescorers.{name}': {name} is the name of an output of the rescore"
    for refuse in (lambda: require_known_answers(params),
                   lambda: check_main(path, out=tmp_path / "params.json")):
        with pytest.raises(ConfigError, match=f"^{re.escape(says)}"):
            refuse()
    assert not (tmp_path / "params.json").exists()
    line, = refused(tmp_path, "dag", "write")
    assert f"ConfigError: {says.replace(str(path), 'params.yaml')}" in line, line
    assert not (tmp_path / "dvc.yaml").exists()


def test_a_baseline_that_is_not_a_name_is_refused_even_with_external_nbest_lists(tmp_path):
    raw = smoke()
    raw["data"]["nbest"] = {"corpus": "wmt14.newstest2014"}
    raw["rescore"]["baseline"] = "../../etc"
    path = write(tmp_path, raw)
    with pytest.raises(ConfigError, match=r"'rescore.baseline' is not a valid name"):
        config.load(path)


@pytest.mark.parametrize("name", [*HOSTILE, "smoke\nstages: {}"])
def test_a_profile_name_that_is_not_a_name_is_refused(tmp_path, name):
    # The profile's name is written into the report, the exports' records and `dag show`'s
    # text: a newline there would add lines to them.
    raw = smoke()
    raw["profile"] = name
    path = write(tmp_path, raw)
    with pytest.raises(ConfigError) as e:
        config.load(path)
    assert str(e.value).startswith(f"{path}: 'profile' is not a valid name"), e.value


@pytest.mark.parametrize("key", ["off", "yes", "on", "No", "y"])
def test_yaml_1_1_booleans_are_refused_as_names(tmp_path, key):
    # To DVC (YAML 1.2) `off` is the string "off"; to PyYAML it is False: never a name.
    text = profile_text("smoke").replace("  gru: {arch: cho", f"  {key}: {{arch: cho")
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=rf"'models.{key}' is not a valid name \('{key}' is a "
                                          r"boolean to YAML 1.1 readers"):
        config.load(path)


def test_a_non_string_map_key_is_refused_naming_the_map(tmp_path):
    text = profile_text("smoke").replace("  gru: {arch: cho", "  010: {arch: cho")
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=r"'models' has a key int 10: keys must be strings"):
        config.load(path)


def test_params_are_read_as_yaml_1_2_like_dvc(tmp_path):
    from dvc.utils.serialize import parse_yaml

    text = profile_text("smoke").replace("  max_len: 40", "  max_len: 010")
    text = text.replace("  dedup: true", "  dedup: off")
    path = write(tmp_path, text)
    dvc_view = parse_yaml(text, str(path))
    assert dvc_view["prepare"]["max_len"] == 10 and dvc_view["prepare"]["dedup"] == "off"
    assert config.read_yaml(path) == dvc_view
    with pytest.raises(ConfigError, match=r"'prepare.dedup' must be true or false, got str 'off'"):
        config.load(path)  # PyYAML would have read False, and trained without dedup
    path = write(tmp_path, text.replace("  dedup: off", "  dedup: true"))
    assert config.load(path).prepare.max_len == 10  # PyYAML: 8


def test_a_duplicate_key_is_refused_with_its_line(tmp_path):
    text = profile_text("smoke").replace("  lr: 0.7\n", "  lr: 0.7\n  lr: 70.0\n")
    path = write(tmp_path, text)
    line = text.splitlines().index("  lr: 70.0") + 1
    with pytest.raises(ConfigError, match=rf"{path}:{line}:3: not valid YAML: found duplicate key "
                                          r"\"lr\" with value \"70.0\""):
        config.load(path)


def test_a_duplicate_key_beside_a_merge_key_is_refused_with_its_line(tmp_path):
    """ruamel.yaml checks no mapping that has a merge key (`<<`): the last of two equal keys won
    there. Every mapping is checked now, whatever it merges; anchors, aliases and merges whose
    keys override the merged ones still read."""
    base = profile_text("smoke")
    old = "  forward_2: {reverse_source: false, init_seed: 12, order_seed: 112}\n"
    assert old in base
    forward = "  forward: {reverse_source: false, init_seed: 11, order_seed: 111}\n"
    merged = base.replace(forward, "  forward: &fw {reverse_source: false, init_seed: 11, "
                                   "order_seed: 111}\n")
    ok = merged.replace(old, "  forward_2: {<<: *fw, init_seed: 12, order_seed: 112}\n")
    assert config.load(write(tmp_path, ok)).model_config("forward_2").init_seed == 12
    for bad in ("  forward_2: {<<: *fw, init_seed: 12, order_seed: 112, init_seed: 13}\n",
                "  forward_2:\n    <<: *fw\n    init_seed: 12\n    order_seed: 112\n"
                "    init_seed: 13\n",
                "  forward_2:\n    <<: {reverse_source: false, init_seed: 12, init_seed: 13}\n"
                "    order_seed: 112\n"):
        text = merged.replace(old, bad)
        path = write(tmp_path, text)
        line = next(i for i, ln in enumerate(text.splitlines(), 1) if "init_seed: 13" in ln)
        with pytest.raises(ConfigError, match=rf"^{path}:{line}:\d+: not valid YAML: found "
                                              r"duplicate key \"init_seed\" with value \"13\""):
            config.load(path)


def test_dag_and_snakemake_read_params_with_the_same_reader(tmp_path):
    text = profile_text("smoke").replace("  lr: 0.7\n", "  lr: 0.7\n  lr: 70.0\n")
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match="found duplicate key"):
        config.resolved(path)
    smk = (ROOT / "workflow" / "rules" / "common.smk").read_text(encoding="utf-8")
    assert "resolved(" in smk and "yaml.safe_load" not in smk  # read_yaml, a profile resolved


@pytest.mark.parametrize("section, key, value", [
    ("train", "lr", ".inf"), ("train", "epochs", ".inf"), ("train", "eval_every", ".nan"),
    ("train", "clip_norm", "-.inf"), ("translate", "max_len_a", ".inf"),
    ("translate", "length_penalty", ".nan"), ("rescore", "weight", ".nan"),
    ("model", "init_range", ".inf"), ("prepare", "max_ratio", ".inf"),
])
def test_a_non_finite_number_is_refused_naming_the_key(tmp_path, section, key, value):
    lines = profile_text("smoke").splitlines()
    start = lines.index(f"{section}:")
    at = next(i for i in range(start, len(lines)) if lines[i].startswith(f"  {key}:"))
    lines[at] = f"  {key}: {value}"
    path = write(tmp_path, "\n".join(lines) + "\n")
    with pytest.raises(ConfigError, match=rf"^{path}: '{section}.{key}' must be a finite number"):
        config.load(path)


def test_a_non_finite_model_override_is_refused_naming_the_key(tmp_path):
    raw = smoke()
    raw["models"]["forward"]["init_range"] = float("inf")
    path = write(tmp_path, raw)
    with pytest.raises(ConfigError, match=r"'models.forward.init_range' must be a finite number"):
        config.load(path)


TRANSFORMER_ONLY = "(the default of every model of arch 'transformer')"


@pytest.mark.parametrize("key, value, says", [
    ("d_model", "garbage", f"must be an integer, got str 'garbage' {TRANSFORMER_ONLY}"),
    ("d_model", -5, f"must be >= 1, got -5 {TRANSFORMER_ONLY}"),
    ("heads", 0, f"must be >= 1, got 0 {TRANSFORMER_ONLY}"),
    ("dropout", 1.0, f"must be < 1.0, got 1.0 {TRANSFORMER_ONLY}"),
    ("norm", "mid", f"must be one of ['pre', 'post'], got str 'mid' {TRANSFORMER_ONLY}"),
    ("init_seed", -1,  # a Transformer takes it; the recurrent models' range refuses it
     "must be >= 0, got -1 (the default of every model of arch 'seq2seq' or 'cho' or "
     "'attention')"),
])
def test_a_model_default_of_an_architecture_no_model_has_is_checked(tmp_path, key, value, says):
    """quick has no Transformer: its `model` defaults are refused now, not when one is added."""
    raw = profile_dict("quick")
    assert "transformer" not in {config.load(ROOT / "profiles" / "quick.yaml").model_config(m).arch
                                 for m in raw["models"]}
    if key == "init_seed":  # every model a Transformer, so no recurrent model reads the default
        raw = transformers_alone()
        assert config.load(write(tmp_path, raw)).model_config("transformer").init_seed == 51
    raw["model"][key] = value
    path = write(tmp_path, raw)
    with pytest.raises(ConfigError) as e:
        config.load(path)
    assert str(e.value) == f"{path}: 'model.{key}' {says}"


def test_a_profile_without_models_to_analyse_has_no_analyze_stage(tmp_path):
    """Transformers alone: no model the analyses read, so analysis.models is empty; the DAG had
    an analyze stage all the same, which failed on "No objects to concatenate". Now it has none,
    and the claims and the report, which read the analyses where there are any, do not ask for
    them. Naming models to trace for the memory without analysis.models is refused."""
    from s2s import pipeline

    raw = transformers_alone()
    stages = {s.name: s for s in pipeline.generate(config.load(write(tmp_path, raw)))}
    assert "analyze" not in stages and {"claims", "report"} <= stages.keys()
    for name in ("claims", "report"):
        assert "--analysis" not in stages[name].cmd and "outputs/analysis" not in \
            stages[name].deps, name
    full = {s.name: s for s in pipeline.generate(config.load(write(tmp_path, smoke())))}
    assert "analyze" in full and "--analysis outputs/analysis" in full["claims"].cmd
    raw["analysis"] = {"models": [], "reach_replicas": ["transformer"]}
    with pytest.raises(ConfigError, match="'analysis.reach_replicas' names models, but "
                                          "'analysis.models' is empty"):
        config.load(write(tmp_path, raw))


def test_a_model_default_is_checked_as_before_where_a_model_takes_it(tmp_path):
    raw = profile_dict("quick")
    raw["model"]["d_model"] = 256  # a good default of an architecture no model has: accepted
    assert config.load(write(tmp_path, raw)).model["d_model"] == 256
    raw["model"]["hidden_size"] = "big"  # the models' own message first, as before
    path = write(tmp_path, raw)
    with pytest.raises(ConfigError) as e:
        config.load(path)
    assert str(e.value) == f"{path}: 'model.hidden_size' must be an integer, got str 'big'"
    raw = profile_dict("quick")
    for overrides in raw["models"].values():
        overrides["arch"] = "seq2seq"
    raw["model"]["arch"] = "nosuch"  # every model sets its own: still no architecture
    path = write(tmp_path, raw)
    with pytest.raises(ConfigError) as e:
        config.load(path)
    assert str(e.value) == (f"{path}: 'model.arch' must be one of ['seq2seq', 'cho', "
                            f"'attention', 'transformer'], got str 'nosuch'")
    raw["model"]["arch"] = ["seq2seq"]  # not a name at all: the same one line, no traceback
    path = write(tmp_path, raw)
    with pytest.raises(ConfigError, match=r"'model.arch' must be one of \['seq2seq'.*got list"):
        config.load(path)
    del raw["model"]["arch"]
    raw["models"]["forward"]["arch"] = {"seq2seq": 1}
    path = write(tmp_path, raw)
    with pytest.raises(ConfigError, match=r"'models.forward.arch' must be one of .*got dict"):
        config.load(path)


@pytest.mark.parametrize("where", ["systems", "rescore"])
def test_a_duplicate_ensemble_member_is_refused(tmp_path, where):
    raw = smoke()
    if where == "systems":
        raw["systems"]["ensemble2"]["members"] = ["reversed_1", "reversed_1"]
        says = r"'systems.ensemble2.members\[1\]' names model 'reversed_1' a second time"
    else:
        raw["rescore"]["rescorers"]["ensemble5"][3] = "reversed_2"
        says = r"'rescore.rescorers.ensemble5\[3\]' names model 'reversed_2' a second time"
    with pytest.raises(ConfigError, match=says):
        config.load(write(tmp_path, raw))


@pytest.mark.parametrize("name", ["../params", "/etc/passwd", "smoke/../smoke", "sm oke"])
def test_s2s_profile_reads_nothing_outside_profiles(tmp_path, name):
    shutil.copytree(ROOT / "profiles", tmp_path / "profiles")
    (tmp_path / "params.yaml").write_text("profile: mine\n")
    before = (tmp_path / "params.yaml").read_bytes()
    proc = subprocess.run([str(BIN / "s2s"), "profile", name], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"'{name}' is not a profile name" in proc.stderr.strip().splitlines()[-1]
    assert (tmp_path / "params.yaml").read_bytes() == before


def test_every_stage_that_pastes_a_params_value_depends_on_the_check(tmp_path):
    """dvc.yaml's `${...}` reach shell commands and paths before s2s runs: each such stage must
    depend on check-params, whose command validates the file, so that `dvc repro` stops first."""
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    check = stages["check-params"]
    # the whole file, any key of it (issue 26: `dvc exp run -S '+trian.epochs=2'` is checked);
    # its other inputs are its own source files: it is the first stage to run
    assert "params.yaml" in check["deps"] and "params" not in check
    assert all(d.startswith("src/s2s/") for d in check["deps"] if d != "params.yaml") \
        and "metrics/params.json" in stages["download"]["deps"]
    for name, body in stages.items():
        body = body.get("do", body)
        templated = "${" in yaml.safe_dump({k: body.get(k) for k in ("cmd", "deps", "outs")})
        if templated:
            assert "metrics/params.json" in body["deps"], name


@pytest.mark.slow
def test_dvc_repro_with_a_hostile_model_name_runs_nothing(tmp_path):
    need_mirror()
    proj = make_project(tmp_path / "proj")
    marker = proj / "PWNED"
    raw = rename_model(smoke(), "gru", "x;touch PWNED;")
    (proj / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    # check-params is the only stage without inputs: it runs, and refuses, before anything else.
    # Regenerating dvc.yaml refuses the name, naming the key, and leaves dvc.yaml as it was.
    before = (proj / "dvc.yaml").read_text()
    proc = run([str(BIN / "s2s"), "dag", "write"], proj, check=False)
    assert proc.returncode != 0 and "'models.x;touch PWNED;' is not a valid name" in proc.stderr
    assert (proj / "dvc.yaml").read_text() == before
    # dvc.yaml not regenerated: `dvc repro` runs check-params first, which refuses the name.
    proc = run([str(BIN / "dvc"), "repro"], proj, check=False, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "'models.x;touch PWNED;' is not a valid name" in out, out[-3000:]
    assert "Running stage 'check-params'" in out and "Running stage 'download'" not in out, \
        out[-3000:]
    assert not marker.exists()


@pytest.mark.parametrize("edit, says", [
    (lambda raw: raw["data"].update(dev=[]),
     r"'data.dev' must name at least one corpus \(training keeps the checkpoint of the best "
     r"dev perplexity\)"),
    (lambda raw: raw["data"].update(train=[]), r"'data.train' must name at least one corpus$"),
    (lambda raw: raw["data"]["train"].append({"corpus": "wmt14.newstest2014"}),
     r"'data.test.corpus' names 'wmt14.newstest2014', which 'data.train\[2\]' names already: "
     r"a corpus in two roles"),
    (lambda raw: raw["data"]["dev"].append(dict(raw["data"]["test"])),
     r"'data.test.corpus' names 'wmt14.newstest2014', which 'data.dev\[1\]' names already: a "
     r"corpus in two roles"),
    (lambda raw: raw["data"]["train"].append({"corpus": "wmt14.giga_fren", "max_lines": 5}),
     r"'data.train\[2\].corpus' names 'wmt14.giga_fren', which 'data.train\[0\]' names "
     r"already: the same corpus twice"),
    (lambda raw: raw["analysis"].update(phrases=["a | b", "c |  | d"]),
     r"'analysis.phrases\[1\]' must be paraphrases separated by '\|', none of them empty, got "
     r"'c \|  \| d'"),
    (lambda raw: raw["models"]["forward"].update(init_seed=2**70),
     r"'models.forward.init_seed' must be <= 4294967295"),
    (lambda raw: raw["models"]["transformer"].update(order_seed=-1),
     r"'models.transformer.order_seed' must be >= 0"),
    (lambda raw: raw["analysis"].update(max_position=10**9), r"'analysis.max_position' must be "
                                                              r"<= 1000"),
    (lambda raw: raw["analysis"].update(memory_steps=10**9), r"'analysis.memory_steps' must be "
                                                              r"<= 1000"),
    (lambda raw: raw["translate"].update(max_len_a=1e30), r"'translate.max_len_a' must be "
                                                          r"<= 100"),
])
def test_data_analysis_and_seed_values_that_would_fail_a_later_stage_are_refused_by_the_check(
        tmp_path, edit, says):
    """Each of these passed `s2s check` and failed later: an empty dev set with a NaN dev perplexity and no
    best checkpoint, an empty paraphrase in the analyze stage, a seed past 64 bits in training,
    a million positions out of memory; and the test set trained on, or chosen on, was accepted
    without a word."""
    raw = smoke()
    assert raw["data"]["test"]["corpus"] == "wmt14.newstest2014"
    assert [c["corpus"] for c in raw["data"]["train"]] == ["wmt14.giga_fren", "wmt14.europarl_v7"]
    edit(raw)
    path = write(tmp_path, raw)
    with pytest.raises(ConfigError, match=f"^{path}: {says}") as e:
        config.load(path)
    assert "Traceback" not in str(e.value)


@pytest.mark.parametrize("profile", sorted((ROOT / "profiles").glob("*.yaml")),
                         ids=lambda p: p.stem)
def test_the_stage_kinds_the_check_knows_are_the_pipeline_s(profile):
    """`resources` is checked against the check stage's stage_kinds, without building the
    pipeline: the kinds it runs must be those of the stages the pipeline generates (what
    Snakemake checks)."""
    from s2s import pipeline
    from s2s.stages import STAGES
    from s2s.stages.check import stage_kinds

    params = config.load(profile)
    kinds = stage_kinds(params)
    assert list(kinds) == list(STAGES)
    assert {k for k, why in kinds.items() if not why} == {s.kind for s in
                                                          pipeline.generate(params)}


def test_the_analysis_bounds_are_a_test_line_s_longest():
    from s2s.config import AnalysisConfig
    from s2s.data.prepare import MAX_EVAL_WORDS
    import dataclasses as dc

    bounds = {f.name: f.metadata["max"] for f in dc.fields(AnalysisConfig)
              if f.name in ("max_position", "memory_steps")}
    assert bounds == {"max_position": MAX_EVAL_WORDS, "memory_steps": MAX_EVAL_WORDS}


def test_a_profile_that_does_not_name_itself_is_refused(tmp_path):
    """`s2s profile bad` wrote params.yaml with its base's `profile: smoke` and said it was
    profile 'bad': the report and the summary then named another profile."""
    from s2s import profiles

    folder = tmp_path / "profiles"
    shutil.copytree(ROOT / "profiles", folder)
    (folder / "bad.yaml").write_text("extends: smoke\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"^{folder / 'bad.yaml'}: 'profile' is 'smoke' \(from "
                                          rf"{folder / 'smoke.yaml'}\), not the file's name: set "
                                          r"`profile: bad` in it$"):
        profiles.profile_text(folder / "bad.yaml")
    (folder / "bad.yaml").write_text("extends: smoke\nprofile: bad\n", encoding="utf-8")
    assert "\nprofile: bad\n" in profiles.profile_text(folder / "bad.yaml")


def refused(cwd: Path, *args: str) -> list[str]:
    """What `s2s ARGS` (run in `cwd`) says on stderr where it refuses: exit status 1 and one line,
    no traceback."""
    proc = run([str(BIN / "s2s"), *args], cwd, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    said = proc.stderr.strip().splitlines()
    assert len(said) == 1 and "Traceback" not in said[0], said
    return said


@pytest.mark.parametrize("section, key, stage, default", [
    ("evaluate", "min_group", "report", "100"),
    ("analysis", "cross_attention_system", "attention", "null"),
    ("analysis", "attention_examples", "attention", "4"),
])
def test_a_declared_key_the_file_leaves_out_is_refused_by_the_check(
        tmp_path, section, key, stage, default):
    """Loading gives a key the file leaves out its default, but DVC reads a stage's declared
    params keys from the file itself: the file passed `s2s check` and `s2s dag check`, and
    `dvc repro` failed late, at the stage ("Parameters '...' are missing from 'params.yaml'")."""
    raw = smoke()
    del raw[section][key]
    path = write(tmp_path, raw)
    config.load(path)  # a valid file: the key has a default
    said = refused(tmp_path, "--params", str(path), "check", "--out", str(tmp_path / "ok.json"))
    assert (f"{path}: '{section}.{key}' is not in the file, but stage '{stage}' declares it, "
            f"and DVC reads a stage's params keys from the file itself") in said[0], said
    assert f"write it (its default: {default})" in said[0], said
    assert not (tmp_path / "ok.json").exists()
    # a code update can declare a key the file lacks: dvc.yaml is made from the stages, and its
    # check-params stage does not rerun for them
    for action in ("write", "check"):
        line, = refused(tmp_path, "dag", action)
        assert (f"ConfigError: params.yaml: '{section}.{key}' is not in the file, but stage "
                f"'{stage}' declares it") in line, line
    assert not (tmp_path / "dvc.yaml").exists()


@pytest.mark.parametrize("edit, key, corpus", [
    (lambda raw: raw["data"]["train"][0].update(corpus="nope.corpus"), "data.train[0]",
     "nope.corpus"),
    (lambda raw: raw["data"]["test"].update(corpus="wmt14.newstest2015"), "data.test",
     "wmt14.newstest2015"),
])
def test_a_corpus_id_the_registry_lacks_is_refused_by_the_check_naming_its_key(
        tmp_path, edit, key, corpus):
    """It passed `s2s check`; download then refused it naming neither the file nor the key."""
    raw = smoke()
    edit(raw)
    path = write(tmp_path, raw)
    said = refused(tmp_path, "--params", str(path), "check", "--out", str(tmp_path / "ok.json"))
    assert (f"{path}: '{key}.corpus' names corpus '{corpus}', which is not in the registry "
            f"(known: multi30k.train, ") in said[0]
    assert not (tmp_path / "ok.json").exists()
