"""dvc.yaml is generated from params and the stage modules (s2s.pipeline): the committed file is
current, every profile generates a DAG whose stages depend on exactly the models their params
name and on exactly the code they run, and a stage reads only the params keys it declares."""

import ast
from pathlib import Path

import pytest

from s2s import dag, pipeline, stages
from s2s.config import ConfigError, UndeclaredParams, load, only

from conftest import EXPECTED_READERS

ROOT = Path(__file__).resolve().parents[1]
PROFILES = sorted((ROOT / "profiles").glob("*.yaml"))


def dag_of(profile: Path) -> dict:
    return {s.name: s for s in pipeline.generate(load(profile))}


def model_deps(stage) -> set[str]:
    return {d.removeprefix("models/") for d in stage.deps if d.startswith("models/")}


def test_all_six_profiles_exist():
    assert {p.stem for p in PROFILES} == {"smoke", "quick", "default", "wmt14", "paper",
                                          "paper_statmt"}


def test_params_yaml_is_the_default_profile():
    assert (ROOT / "params.yaml").read_text() == (ROOT / "profiles/default.yaml").read_text()


def test_committed_dvc_yaml_is_what_params_generate():
    # Fails when a model, system or rescorer was added to params.yaml (or a stage module changed)
    # without `s2s dag write`.
    assert not pipeline.stale(load(ROOT / "params.yaml"), ROOT / "dvc.yaml"), \
        "dvc.yaml is stale: run `s2s dag write`"


def test_a_damaged_dvc_yaml_is_stale_and_dag_write_replaces_it(tmp_path):
    """A dvc.yaml that is not UTF-8 stopped `s2s dag check` and the `s2s dag write` that would
    repair it alike, with a bare UnicodeDecodeError naming no file."""
    params = load(ROOT / "params.yaml")
    dvc_yaml = tmp_path / "dvc.yaml"
    dvc_yaml.write_bytes(b"\xff\xfestages:\n")
    assert pipeline.stale(params, dvc_yaml)
    assert pipeline.write(params, dvc_yaml) is True
    assert dvc_yaml.read_bytes() == (ROOT / "dvc.yaml").read_bytes()
    assert not pipeline.stale(params, dvc_yaml) and pipeline.write(params, dvc_yaml) is False


def test_the_pipeline_map_in_docs_is_current():
    assert (ROOT / "docs" / "pipeline.md").read_text() \
        == pipeline.describe_markdown(load(ROOT / "params.yaml")), \
        "docs/pipeline.md is stale: run `s2s dag show > docs/pipeline.md`"


def test_the_pipeline_map_has_one_row_per_kind_of_stage_with_placeholders():
    rows = {r["stage"]: r for r in pipeline.describe(load(ROOT / "profiles" / "smoke.yaml"))}
    assert list(rows)[:6] == ["check-params", "download", "prepare", "vocab", "ids",
                              "train-<model>"]
    train = rows["train-<model>"]
    assert train["runs"].startswith("15: forward, forward_2")
    assert train["writes"] == ("models/<model>, metrics/train/<model>.json, "
                               "metrics/curves/<model>.csv, snapshots/<model> (some)")
    assert train["params"] == ("model, models.<model>, train, prepare.lowercase, "
                               "analysis.snapshots (some), analysis.models (some), "
                               "analysis.reach_replicas (some)")
    assert "src/" not in " ".join(r["reads"] for r in rows.values())  # no code dependencies
    assert rows["rescore-oracle"]["runs"] == "1"  # not one of the rescorers
    assert rows["translate-<system>"]["reads"] == "data/prepared, data/vocab, models/<model>"


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.stem)
def test_translate_and_rescore_stages_match_the_profile(profile):
    params, dag = load(profile), dag_of(profile)
    for system, cfg in params.systems.items():
        stage = dag[f"translate-{system}"]
        assert model_deps(stage) == set(cfg.members), system
        assert f"translate {system} " in stage.cmd
        assert f"systems.{system}" in stage.params
    assert {k.split("-", 1)[1] for k in dag if k.startswith("translate-")} == set(params.systems)
    for name, members in params.rescore.rescorers.items():
        stage = dag[f"rescore-{name}"]
        assert model_deps(stage) == set(members), name
        assert f"outputs/translate/{params.rescore.baseline}" in stage.deps
    assert {k.split("-", 1)[1] for k in dag if k.startswith("rescore-")} == (
        set() if params.rescore.baseline is None else set(params.rescore.rescorers) | {"oracle"})
    assert {k.split("-", 1)[1] for k in dag if k.startswith("train-")} == set(params.models)


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.stem)
def test_learning_curve_plots_cover_every_model(profile):
    plots = pipeline.plots(load(profile))
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
    cross = params.analysis.cross_attention_system  # the Transformer's, beside it
    if profile.stem == "quick":  # LSTMs only: no attention system, no attention stage
        assert system is None and "attention" not in dag_of(profile)
        return
    stage = dag_of(profile)["attention"]
    assert system is not None, "every other profile draws its attention system's alignments"
    assert model_deps(stage) == set(params.systems[system].members) | (
        set(params.systems[cross].members) if cross else set())
    assert f"outputs/translate/{system}" in stage.deps
    assert cross is None or f"outputs/translate/{cross}" in stage.deps


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.stem)
def test_analyze_stage_reads_the_profiles_analysis_models(profile):
    analysis = load(profile).analysis  # its models, those whose memory it measures, and the
    # seed replicas of the gradient reach, whose snapshots it reads too
    analyze = dag_of(profile)["analyze"]
    assert model_deps(analyze) == set(analysis.models) | set(
        analysis.memory_models or ()) | set(analysis.reach_replicas)
    assert {d for d in analyze.deps if d.startswith("snapshots/")} == {
        f"snapshots/{m}" for m in (*analysis.models, *analysis.reach_replicas)}


@pytest.mark.parametrize("path", EXPECTED_READERS)
def test_each_source_file_is_a_dependency_of_exactly_the_stages_that_run_it(path):
    dag = dag_of(ROOT / "params.yaml")
    assert {n for n, s in dag.items() if f"src/s2s/{path}" in s.deps} == EXPECTED_READERS[path]


def test_every_stage_depends_on_the_code_it_runs_and_no_other():
    dag = dag_of(ROOT / "params.yaml")
    code = {name: {d for d in s.deps if d.startswith("src/")} for name, s in dag.items()}
    for name, deps in code.items():
        kind = name.split("-")[0] if not name.startswith("check") else "check"
        assert f"src/s2s/stages/{kind}.py" in deps, name  # one hop from a stage to its code
        assert "src/s2s/config.py" in deps and "src/s2s/cli.py" not in deps, name
        for dep in deps:  # DVC warns about every empty dependency
            assert (ROOT / dep).is_dir() or (ROOT / dep).read_text().strip(), (name, dep)
    # the data stages and the params check run no model, search, training, analysis or report
    for name in ("check-params", "download", "prepare", "vocab", "ids"):
        assert not {d for d in code[name] if d.startswith((
            "src/s2s/model/", "src/s2s/decode/", "src/s2s/train.py", "src/s2s/analysis/",
            "src/s2s/report/"))}, name
    for name in (n for n in dag if n.startswith("train-")):
        assert not any(d.startswith(("src/s2s/decode/", "src/s2s/evaluate/", "src/s2s/report/"))
                       for d in code[name]), name
        assert {"src/s2s/train.py", "src/s2s/losses.py"} <= code[name]
        # its own architecture, no other
        arch = load(ROOT / "params.yaml").model_config(name.removeprefix("train-")).arch
        assert ("src/s2s/model/transformer.py" in code[name]) == (arch == "transformer"), name
        # the recurrent models' shared base; the paper's own model file for the paper's model only
        assert ("src/s2s/model/encdec.py" in code[name]) == (arch != "transformer"), name
        assert ("src/s2s/model/seq2seq.py" in code[name]) == (arch == "seq2seq"), name
    # matplotlib code runs only in the report
    assert {n for n, d in code.items() if "src/s2s/report/figures.py" in d} == {"report"}


def test_no_circle_among_the_package_modules():
    # config.py imports no model code, and no module reaches itself through its imports
    assert not [d for d in dag.code_deps("s2s.config") if "/model/" in d]
    modules = {f"s2s.{p.relative_to(ROOT / 'src/s2s').with_suffix('').as_posix().replace('/', '.')}"
               .removesuffix(".__init__") for p in (ROOT / "src/s2s").rglob("*.py")}
    for module in sorted(modules):
        reached, todo = set(), list(dag._imports(module))
        while todo:
            m = todo.pop()
            if m in reached:
                continue
            reached.add(m)
            todo += [i for i in dag._imports(m)]
        packages = {module.rsplit(".", i)[0] for i in range(1, module.count(".") + 1)}
        assert module not in reached or module in packages, f"{module} imports itself"


def test_code_deps_follow_imports_inside_functions_and_packages():
    deps = dag.code_deps("s2s.stages.translate")
    # imported inside main(), and through s2s.decode.translate; a package's __init__.py with
    # code in it (s2s/arch), not an empty one (s2s/decode)
    assert {"src/s2s/decode/beam.py", "src/s2s/decode/ensemble.py", "src/s2s/arch/__init__.py",
            "src/s2s/stages/translate.py"} <= set(deps)
    assert "src/s2s/decode/__init__.py" not in deps
    assert "src/s2s/train.py" not in deps  # decoding no longer imports the trainer
    # an architecture is imported on demand (s2s.arch): the stage names it
    assert not [d for d in deps if d.startswith("src/s2s/model/")
                and d.rpartition("/")[2] not in ("__init__.py", "base.py")]
    with_lstm = dag.code_deps("s2s.stages.translate", "s2s.model.seq2seq")
    assert {"src/s2s/model/fused.py", "src/s2s/model/lstm.py", "src/s2s/arch/rnn.py"} <= set(
        with_lstm)
    assert "src/s2s/model/transformer.py" not in with_lstm


def test_the_import_walk_finds_an_import_in_any_statement_but_not_for_type_checking():
    # Only statements are entered (s2s.dag._run_nodes): every place a statement can sit
    source = """
import a0
if TYPE_CHECKING:
    import skipped1
else:
    import a1
if typing.TYPE_CHECKING:
    import skipped2
class C:
    import a2
    def f(self):
        try:
            import a3
        except ImportError:
            import a4
        else:
            import a5
        finally:
            import a6
        with open(x) as y:
            for i in y:
                while i:
                    import a7
        match y:
            case 1:
                import a8
async def g():
    async with z:
        async for i in z:
            from a9 import b
"""
    found = {alias.name if isinstance(node, ast.Import) else node.module
             for node in dag._run_nodes(ast.parse(source))
             if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
    assert found == {f"a{i}" for i in range(10)}


def test_a_stage_reading_an_undeclared_key_fails():
    params = load(ROOT / "profiles/smoke.yaml")
    view = only(params, ("systems.reversed", "translate", "model", "models.reversed_1"),
                stage="translate-reversed")
    assert view.translate == params.translate
    assert list(view.systems) == ["reversed"] and view.systems["reversed"].members == ("reversed_1",)
    assert view.model_config("reversed_1") == params.model_config("reversed_1")
    with pytest.raises(UndeclaredParams, match=r"stage 'translate-reversed' reads params 'train'"):
        view.train  # noqa: B018
    with pytest.raises(UndeclaredParams, match=r"'systems.forward'"):
        view.systems["forward"]  # noqa: B018
    with pytest.raises(UndeclaredParams, match=r"'models.forward'"):
        view.model_config("forward")
    assert view.model_configs(["reversed_1"]) == {"reversed_1": params.model_config("reversed_1")}
    with pytest.raises(UndeclaredParams, match=r"'models.forward'"):
        view.model_configs(["reversed_1", "forward"])
    assert list(params.model_configs(["reversed_2", "forward"])) == ["reversed_2", "forward"]
    with pytest.raises(ConfigError, match=r"forward named more than once"):  # not one member
        params.model_configs(["forward", "reversed_2", "forward"])
    with pytest.raises(ConfigError, match=r"reversed_1 named more than once"):
        view.model_configs(["reversed_1", "reversed_1"])
    partial = only(params, ("rescore.baseline",), stage="rescore-oracle")
    assert partial.rescore.baseline == params.rescore.baseline
    with pytest.raises(UndeclaredParams, match=r"'rescore.weight'"):
        partial.rescore.weight  # noqa: B018
    assert only(params, (), stage="x").resources == params.resources  # scheduling only


def test_every_command_reads_only_what_its_stage_declares():
    # The cli hands each stage the view of its own dvc.yaml entry; the smoke run (test_pipeline)
    # then fails on any undeclared read. Here: every stage of every profile has an entry the cli
    # can find, and no two stages share a name.
    for profile in PROFILES:
        params = load(profile)
        for name in stages.STAGES:
            # a profile may lack the attention system, the cost claim's systems, or rescoring
            optional = {"attention": params.analysis.attention_system is None,
                        "timing": params.report.table1.get("ensemble5_beam2") is None,
                        "rescore": params.rescore.baseline is None}
            assert stages.module(name).stages(params) or optional.get(name), (profile, name)


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.stem)
def test_a_stages_command_is_made_of_its_declared_path_flags(profile):
    # One declaration per stage (s2s.dag.Arg in the module's ARGS): the command dvc.yaml runs
    # passes exactly the declared flags, with the declared paths, and nothing else.
    import shlex

    for stage in pipeline.generate(load(profile)):
        args = {a.flag: a for a in stages.module(stage.command).ARGS}
        words = shlex.split(stage.cmd)
        assert words[:2] == ["s2s", stage.command], stage.name
        rest = words[2:] if stage.item is None else words[3:]
        assert stage.item is None or words[2] == stage.item
        assert dict(zip(rest[::2], rest[1::2])) == dict(stage.paths), stage.name
        assert len(rest) == 2 * len(stage.paths), stage.name
        for flag, path in stage.paths:
            assert path == args[flag].path.replace("{item}", stage.item or ""), (stage.name, flag)
        assert {f for f, a in args.items() if not a.optional} <= dict(stage.paths).keys(), \
            stage.name
        # what it writes among its flags is among its outputs, what it reads among its inputs
        # (or covered by a part of it)
        outs = {o.path for o in stage.outs}
        for flag, path in stage.paths:
            mine = outs if args[flag].writes else set(stage.deps)
            if args[flag].writes or flag not in ("--models", "--snapshots", "--vocab",
                                                  "--ckpt-dir", "--translate"):
                assert any(p == path or p.startswith(path + "/") for p in mine), \
                    (stage.name, flag, path)


def test_the_command_lines_defaults_come_from_the_declaration_not_dvc_yaml(tmp_path, monkeypatch):
    from s2s import cli

    params = load(ROOT / "profiles/smoke.yaml")
    monkeypatch.chdir(tmp_path)  # no dvc.yaml here
    analysed, replica = params.analysis.models[0], params.analysis.reach_replicas[0]
    plain = next(m for m in params.models
                 if m not in (*params.analysis.models, *params.analysis.reach_replicas))
    for name, snapshots in ((analysed, Path(f"snapshots/{analysed}")),
                            (replica, Path(f"snapshots/{replica}")), (plain, None)):
        a = cli.build_parser().parse_args(["train", name, "--curves", "elsewhere.csv"])
        spec = cli.stage_of(a, params)
        cli.fill_path_defaults(a, spec, cli.STAGE_PATHS["train"], cli.STAGE_OPTIONAL["train"])
        assert a.model_dir == Path(f"models/{name}") and a.curves == Path("elsewhere.csv")
        assert a.metrics == Path(f"metrics/train/{name}.json") and a.snapshots == snapshots
    a = cli.build_parser().parse_args(["train", "no_such_model"])
    with pytest.raises(ValueError, match="no model 'no_such_model' under 'models'"):
        cli.stage_of(a, params)


@pytest.mark.parametrize("profile", [ROOT / "profiles/default.yaml", ROOT / "profiles/paper.yaml"],
                         ids=lambda p: p.stem)
def test_a_stages_path_record_is_its_declared_flags_as_parsed_from_its_command(profile):
    # A stage taking its paths as one value (PATHS): a field per flag of ARGS, in their order,
    # filled from the very command dvc.yaml runs, and an optional flag it left out is None.
    import dataclasses
    import shlex

    from s2s import cli

    records = {name: stages.module(name).PATHS for name in stages.STAGES
               if hasattr(stages.module(name), "PATHS")}
    # all but check-params and download, which would depend on layout.py in dvc.yaml
    assert set(records) == set(stages.STAGES) - {"check", "download"}
    for name, record in records.items():
        assert [f.name for f in dataclasses.fields(record)] == \
            [a.dest for a in stages.module(name).ARGS], name
    params = load(profile)
    seen = set()
    for stage in pipeline.generate(params):
        if stage.command not in records:
            continue
        a = cli.build_parser().parse_args(shlex.split(stage.cmd)[1:])
        paths = records[stage.command].from_args(a)
        flags = dict(stage.paths)
        for arg in stages.module(stage.command).ARGS:
            want = Path(flags[arg.flag]) if arg.flag in flags else None
            assert getattr(paths, arg.dest) == want, (stage.name, arg.flag)
        seen.add(stage.command)
    assert seen == set(records)
    # and the files inside the folders are the layout's, where the later stages look for them
    ev = records["evaluate"].from_args(cli.build_parser().parse_args(
        shlex.split(dag_of(profile)["evaluate"].cmd)[1:]))
    assert ev.length_drop == Path("outputs/evaluate/length_drop.csv")
    assert ev.translation("ensemble5", 12) == Path("outputs/translate/ensemble5/beam12")
    assert ev.references == Path("data/prepared/test.tok.fr")
    assert ev.references_raw == Path("data/prepared/test.raw.fr")
    assert ev.source_vocab == Path("data/vocab/en.tsv")
    if ev.rescore is not None:
        assert ev.rescoring("oracle") == Path("outputs/rescore/oracle/oracle")
        assert ev.rescoring("baseline") == Path("outputs/rescore/oracle/baseline")
    # a record built in process from strings holds Paths, and nothing for what it was not given
    built = records["evaluate"](translate="t", prepared="p", vocab="v", metrics="m.json",
                                groups="e/g.csv")
    assert built.length_drop == Path("e/length_drop.csv") and built.rescore is None
    assert all(isinstance(getattr(built, f.name), Path) for f in dataclasses.fields(built)
               if f.name != "rescore")


def test_a_stage_declaration_refuses_a_flag_its_command_lacks():
    from s2s import dag

    args = (dag.Arg("--out", "x"), dag.Arg("--extra", "y", optional=True))
    with pytest.raises(dag.DagError, match="--nope is not an"):
        dag.command("s", "s", args, include=("--nope",))
    with pytest.raises(dag.DagError, match="--also is not an"):
        dag.command("s", "s", args, parts={"--also": ()})
    stage = dag.command("s", "s", args, include=("--extra",), parts={"--out": ("a", "b")})
    assert stage.cmd == "s2s s --out x --extra y" and stage.deps == ("x/a", "x/b", "y")


def test_names_that_differ_only_in_dash_and_underscore_are_refused_naming_both(tmp_path):
    """fwd-1 and fwd_1 are two DVC stages but one Snakemake rule (train_fwd_1, one log file):
    Snakemake stopped with "The name train_fwd_1 is already used by another rule"."""
    import yaml

    from s2s import dag
    from helpers import profile_dict

    params = profile_dict("smoke")
    for name in ("fwd-1", "fwd_1"):
        params["models"][name] = {"reverse_source": False, "init_seed": 21, "order_seed": 121}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    with pytest.raises(dag.DagError, match=f"^{path}: stages train-fwd-1 and train-fwd_1 differ "
                                           "only in - and _, and Snakemake names both "
                                           "train_fwd_1: rename"):
        pipeline.generate(load(path))
