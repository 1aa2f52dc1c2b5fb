"""DVC experiments on the smoke run: `s2s exps` compares them at a glance, and going back to an
earlier experiment (or to the commit) reruns nothing, also for a train stage and its resume
point; plus `s2s exps`'s table on hand-written `dvc exp show --json` data."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil

import pytest

from conftest import BIN, run
from s2s import experiments

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]


def _ran(proc) -> set[str]:
    return set(re.findall(r"Running stage '([^']+)'", proc.stdout + proc.stderr))


def _clean(repo) -> bool:
    return "Data and pipelines are up to date" in run([str(BIN / "dvc"), "status"], repo).stdout


@pytest.mark.slow
def test_experiments_compare_at_a_glance_and_going_back_costs_nothing(smoke_repo, tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(smoke_repo, repo, symlinks=True)
    run(["git", "add", "-A"], repo)
    tracked = run(["git", "ls-files", "metrics"], repo).stdout.split()
    assert tracked == ["metrics/claims.json", "metrics/summary.json"]  # the compared numbers
    run([*GIT, "commit", "-qm", "the smoke run"], repo)
    dvc = str(BIN / "dvc")

    # An experiment that retrains one model (its resume point is left with the new params)
    a = run([dvc, "exp", "run", "-n", "seed52", "-S", "models.transformer.init_seed=52"], repo,
            timeout=900)
    assert {"train-transformer", "translate-transformer", "report"} <= _ran(a)
    assert not {s for s in _ran(a) if s.startswith("train-") and s != "train-transformer"}
    assert "took over the lock" not in a.stdout + a.stderr  # the last run exited cleanly

    # Back to the commit (params.yaml, dvc.lock and the two metrics files git tracks): nothing
    # is dirty, nothing reruns, nothing retrains
    run(["git", "checkout", "--", "."], repo)
    run([dvc, "checkout"], repo)
    assert _clean(repo)
    assert _ran(run([dvc, "repro"], repo)) == set()

    # A second experiment from there, then both side by side
    b = run([dvc, "exp", "run", "-n", "titled", "-S", "report.title=Another"], repo, timeout=900)
    assert _ran(b) == {"check-params", "report"}
    shown = run([str(BIN / "s2s"), "exps"], repo).stdout
    lines = shown.splitlines()
    assert max(len(line) for line in lines) <= 160
    header = next(line for line in lines if line.startswith("experiment"))
    assert header.split()[1:] == ["workspace", header.split()[2], "titled", "seed52"], header
    seed = next(line for line in lines if line.strip().startswith("models.transformer.init_seed"))
    assert seed.split()[1:] == ["51", "51", "51", "52"]
    title = next(line for line in lines if line.strip().startswith("report.title"))
    # the workspace holds the last experiment; the profile's title is cut to its cell
    assert re.fullmatch(r"  report\.title +Another +Sequence to S~ +Another +Sequence to S~",
                        title), title
    assert re.search(r"^  transformer +\d+\.\d\d +\d+\.\d\d +\d+\.\d\d +\d+\.\d\d$", shown, re.M)
    assert re.search(r"^  reversal_bleu +(\S+ +){3}\S+$", shown, re.M)  # a verdict per column
    assert "md5" not in shown and "deps" not in shown  # no dependency hashes

    # DVC's own tools print numbers for both (the verdicts and signatures are no columns)
    table = list(csv.DictReader(io.StringIO(run([dvc, "exp", "show", "--csv"], repo).stdout)))
    rows = {r["Experiment"]: r for r in table if r["Experiment"] in ("seed52", "titled")}
    assert set(rows) == {"seed52", "titled"}, table
    for row in rows.values():
        for key in ("bleu.ensemble5.b12", "rescore.forward", "rescore.oracle", "ppl.transformer",
                    "minutes.train"):
            float(row[key])  # a number, not "!" or "-"
    assert {rows[e]["models.transformer.init_seed"] for e in rows} == {"51", "52"}
    diff = json.loads(run([dvc, "metrics", "diff", "--all", "--json"], repo).stdout)
    for key in ("bleu.ensemble5.b12", "rescore.forward", "ppl.reversed_1"):
        entry = diff["metrics/summary.json"][key]
        assert isinstance(entry["old"], float) and isinstance(entry["new"], float)
    shown = run([dvc, "metrics", "show"], repo).stdout
    assert "bleu_tok_method" not in shown and "signature" not in shown  # numbers only

    # Back to the first experiment: its outputs come out of the cache, nothing reruns
    run([dvc, "exp", "apply", "seed52"], repo)
    assert _clean(repo)
    assert _ran(run([dvc, "repro"], repo)) == set()

    # Only params.yaml back (dvc.lock still the experiment's): DVC's run-cache restores every
    # output of the commit's params; no stage runs, the Transformer is not retrained
    run(["git", "checkout", "--", "params.yaml"], repo)
    back = run([dvc, "repro"], repo)
    assert _ran(back) == set(), back.stdout[-2000:]
    assert "Stage 'train-transformer' is cached - skipping run" in back.stdout
    assert _clean(repo)


def _rev(sha: str, params: dict, summary: dict | None = None, claims: dict | None = None,
         name: str | None = None, exps: list | None = None) -> dict:
    metrics = {}
    if summary is not None:
        metrics[experiments.SUMMARY_FILE] = {"data": summary}
    if claims is not None:
        metrics[experiments.VERDICTS_FILE] = {"data": claims}
    return {"rev": sha, "name": name, "data": {"params": {"params.yaml": {"data": params}},
                                                "metrics": metrics, "deps": {"x": {"hash": "md5"}}},
            "experiments": exps}


def test_exps_table_shows_only_differing_params_and_the_compared_numbers():
    base = {"train": {"lr": 0.7, "epochs": 1.0}, "models": {"forward": {"init_seed": 1}}}
    summary = {"ppl": {"forward": 12.345, "reversed_1": 7.0},
               "bleu": {"ensemble5": {"b1": 20.0, "b12": 21.5}, "attention": {"b12": 6.1}},
               "rescore": {"oracle": 42.0}}
    exp = _rev("e" * 40, {**base, "train": {"lr": 0.5, "epochs": 1.0}},
               {**summary, "ppl": {"forward": 11.0}}, {"ensemble": "no significant difference"},
               name="lower-lr")
    revisions = [_rev("workspace", base, summary, {"ensemble": "holds"}),
                 _rev("a" * 40, base, summary, {"ensemble": "holds"}, name="main",
                      exps=[{"revs": [exp]}])]
    exps = experiments.experiments(revisions)
    assert [e.name for e in exps] == ["workspace", "main", "lower-lr"]
    text = experiments.render(exps, width=80)
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines()[2:]
            if line.startswith("  ")}
    assert rows["train.lr"] == ["0.7", "0.7", "0.5"]
    assert "train.epochs" not in rows and "models.forward.init_seed" not in rows
    assert rows["forward"] == ["12.35", "12.35", "11.00"]
    assert rows["reversed_1"] == ["7.00", "7.00", "-"]  # a model the experiment lacks
    assert rows["ensemble5"] == ["21.50", "21.50", "21.50"]  # the widest beam, b12 not b1
    assert rows["oracle"] == ["42.00", "42.00", "42.00"]
    assert rows["ensemble"] == ["holds", "holds", "n.s."]
    assert "md5" not in text
    # the widest beam is the experiment's params', not the widest its summary holds: an
    # experiment whose beam 12 was not scored shows "-", not its beam 1 beside the others' 12
    beams = {**base, "systems": {"ensemble5": {"beams": [1, 12]}}}
    unscored = {**summary, "bleu": {"ensemble5": {"b1": 20.0}}}
    exps = experiments.experiments([_rev("workspace", beams, summary),
                                    _rev("b" * 40, beams, unscored, name="cut")])
    rows = {line.split()[0]: line.split()[1:]
            for line in experiments.render(exps, width=80).splitlines()[2:]
            if line.startswith("  ")}
    assert rows["ensemble5"] == ["21.50", "-"]


def test_long_experiment_names_are_cut_in_the_middle_so_a_sweep_stays_told_apart():
    exps = [experiments.Experiment(f"sweep-lr-depth4-{x}", {"train.lr": i / 10}, {}, {})
            for i, x in enumerate("ab")]
    header = experiments.render(exps, width=80).splitlines()[0]
    assert header.split()[1:] == ["sweep-~epth4-a", "sweep-~epth4-b"]  # 14 characters


def test_a_revision_dvc_could_not_collect_is_marked_and_named_not_a_column_of_differences():
    """DVC gives such a revision no data, only its error: its cells are marked, the error is
    said once, and its missing params are no 'params that differ'."""
    base = {"train": {"lr": 0.7, "epochs": 1.0}, "models": {"forward": {"init_seed": 1}}}
    summary = {"ppl": {"forward": 9.1}, "bleu": {"forward": {"b12": 4.0}}, "rescore": {}}
    broken = {"rev": "b" * 40, "name": "exp-broken", "data": None,
              "error": {"msg": "unable to read: params.yaml", "type": "YAMLFileCorruptedError"}}
    exps = experiments.experiments([_rev("workspace", base, summary),
                                    _rev("a" * 40, base, summary, name="main",
                                         exps=[{"revs": [broken]}])])
    text = experiments.render(exps, width=80)
    assert "params that differ" not in text
    cells = [line.split()[1:] for line in text.splitlines()[2:] if line.startswith("  forward")]
    assert cells == [["9.10", "9.10", "!"], ["4.00", "4.00", "!"]]  # perplexity, BLEU
    assert experiments.damage(exps) == [
        "! exp-broken: the revision: unable to read: params.yaml (YAMLFileCorruptedError)"]


def test_a_revision_without_params_yaml_adds_no_params_that_differ():
    """An early commit (--all-commits) has no params.yaml: DVC says FileNotFoundError. Its
    params are absent, not all different: 215 lines of 'params that differ' before."""
    base = {"train": {"lr": 0.7, "epochs": 1.0}, "models": {"forward": {"init_seed": 1}}}
    summary = {"ppl": {"forward": 9.1}, "bleu": {}, "rescore": {}}
    old = {"rev": "c" * 40, "name": "early", "experiments": None, "data": {
        "params": {"params.yaml": {"error": {"msg": "missing", "type": "FileNotFoundError"}}},
        "metrics": {}, "deps": {}}}
    exps = experiments.experiments([_rev("workspace", base, summary),
                                    _rev("a" * 40, base, summary), old])
    text = experiments.render(exps, width=80)
    assert "params that differ" not in text
    lower = {**base, "train": {"lr": 0.5, "epochs": 1.0}}
    exps = experiments.experiments([_rev("workspace", lower, summary),
                                    _rev("a" * 40, base, summary), old])
    rows = {line.split()[0]: line.split()[1:] for line in
            experiments.render(exps, width=80).splitlines()[2:] if line.startswith("  ")}
    assert rows["train.lr"] == ["0.5", "0.7", "-"] and "train.epochs" not in rows


def _grid(text: str) -> list[tuple[str, list[str]]]:
    """The first block's lines as (label, cells), read by column (a cell may hold a space); a
    row shown over several lines has its further lines labelled ''."""
    lines = text.split("\n\n")[0].splitlines()
    columns = len(lines[0].split()) - 1
    label_w = len(lines[0]) - 16 * columns
    return [(line[:label_w].strip(), [line[label_w + 16 * i:label_w + 16 * (i + 1)].strip()
                                      for i in range(columns)])
            for line in lines[2:] if line.startswith("  ") or not line[:label_w].strip()]


def _exp(name: str, params: dict, summary: dict | None = None) -> dict:
    return _rev("e" * 40, params, summary, name=name)


def test_list_params_differ_leaf_by_leaf_not_as_one_cut_cell():
    """data.train is a list of mappings: a changed max_lines was one cell cut to
    "[{'corpus': '~" in every column; an ensemble's members were "[reversed_1, ~" in each."""
    five = [f"reversed_{i}" for i in range(1, 6)]
    base = {"data": {"train": [{"corpus": "giga", "max_lines": 3000},
                               {"corpus": "europarl", "max_lines": 1000}]},
            "systems": {"ensemble5": {"members": five, "beams": [1, 12]}}}
    fewer = {"data": {"train": [{"corpus": "giga", "max_lines": 2000},
                                {"corpus": "europarl", "max_lines": 1000}]},
             "systems": {"ensemble5": {"members": five[:4], "beams": [1, 12]}}}
    more = {"data": {"train": [{"corpus": "giga", "max_lines": 3000},
                               {"corpus": "europarl", "max_lines": 1000},
                               {"corpus": "news", "max_lines": 500}]},
            "systems": {"ensemble5": {"members": five, "beams": [1, 12]}}}
    exps = experiments.experiments([_rev("workspace", base, name=None, exps=[
        {"revs": [_exp("fewer", fewer), _exp("more", more)]}])])
    assert [e.name for e in exps] == ["workspace", "fewer", "more"]
    grid = _grid(experiments.render(exps, width=120))
    assert grid == [
        ("data.train.0.max_lines", ["3000", "2000", "3000"]),
        # the item only one experiment has: beside the others, "-" where absent
        ("data.train.2.corpus", ["-", "-", "news"]),
        ("data.train.2.max_lines", ["-", "-", "500"]),
        # a list of names whole, one name a line, the missing one told by the bracket
        ("systems.ensemble5.members", ["[reversed_1,", "[reversed_1,", "[reversed_1,"]),
        ("", ["reversed_2,", "reversed_2,", "reversed_2,"]),
        ("", ["reversed_3,", "reversed_3,", "reversed_3,"]),
        ("", ["reversed_4,", "reversed_4]", "reversed_4,"]),
        ("", ["reversed_5]", "", "reversed_5]"]),
    ], grid


def test_a_differing_param_whose_cut_cells_would_read_the_same_is_shown_whole():
    exps = [experiments.Experiment(name, {"data.test": corpus}, {}, {})
            for name, corpus in (("a", "wmt14.newstest2014"), ("b", "wmt14.newstest2012"))]
    assert _grid(experiments.render(exps, width=80)) == [
        ("data.test", ["wmt14.newstest", "wmt14.newstest"]), ("", ["2014", "2012"])]


def test_long_labels_are_cut_in_the_middle_and_no_two_read_the_same():
    """Cut from the end, models.transformer.train.lr and .warmup_steps were both
    'models.transformer.trai~' at --width 80."""
    def labels(keys: list[str], width: int) -> list[str]:
        exps = [experiments.Experiment(str(i), {k: i for k in keys}, {}, {}) for i in range(2)]
        text = experiments.render(exps, width=width)
        assert max(len(line) for line in text.splitlines()) <= width
        return [label for label, _ in _grid(text)]

    train = "models.transformer.train"
    assert labels([f"{train}.lr", f"{train}.warmup_steps"], 80) == [
        "models.tran~mer.train.lr", "models.tran~warmup_steps"]  # the leaf stays
    # the middle cut alike ('data.tra~max_lines'): these keep more of their end
    assert labels(["data.train.0.max_lines", "data.train.1.max_lines", "train.lr"], 40) == [
        "data.t~0.max_lines", "data.t~1.max_lines", "train.lr"]
    # no cut to the 18 characters of --width 40 tells these apart: the label column widens
    fb1 = "models.reversed_fb1_{}.train.warmup_steps"
    assert labels([fb1.format(2), fb1.format(3)], 40) == [
        "~2.train.warmup_steps", "~3.train.warmup_steps"]


def test_a_bleu_at_another_beam_than_the_rows_says_its_beam():
    """ensemble5 at beams [1, 2] beside [1, 2, 12]: its widest is b2, the others' b12; the
    cells stood side by side as alike."""
    def params(beams: list[int]) -> dict:
        return {"systems": {"ensemble5": {"beams": beams}, "forward": {"beams": [12]}}}

    bleu = {"ensemble5": {"b1": 1.5, "b2": 2.22, "b12": 21.5}, "forward": {"b12": 4.0}}
    exps = experiments.experiments([_rev("workspace", params([1, 2, 12]), {"bleu": bleu},
                                         exps=[{"revs": [_exp("narrow", params([1, 2]),
                                                              {"bleu": bleu})]}]),
                                    _rev("a" * 40, params([1, 2, 12]), {"bleu": bleu})])
    rows = dict(_grid(experiments.render(exps, width=80)))
    assert rows["ensemble5"] == ["21.50", "2.22 b2", "21.50"]
    assert rows["forward"] == ["4.00", "4.00", "4.00"]  # one beam: no mark


def test_exps_table_splits_many_experiments_into_blocks_that_fit_the_width():
    exps = [experiments.Experiment(f"exp-{i}", {"train.lr": i / 10}, {"ppl": {"m": float(i)}},
                                   {}) for i in range(20)]
    text = experiments.render(exps, width=100)
    assert max(len(line) for line in text.splitlines()) <= 100
    headers = [line for line in text.splitlines() if line.startswith("experiment")]
    assert len(headers) > 1
    assert sum(len(h.split()) - 1 for h in headers) == 20  # every experiment once
