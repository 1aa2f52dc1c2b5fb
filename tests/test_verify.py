"""`s2s verify`: a rerun's numbers against a reference run's, by the reference's seed spread,
and the claims' verdicts; on copies of the smoke run's params and metrics."""

from __future__ import annotations

import json
import shutil
import statistics

import pytest

from conftest import BIN, run


def _copy_run(smoke_repo, dest):
    dest.mkdir(parents=True)
    shutil.copy(smoke_repo / "params.yaml", dest / "params.yaml")
    shutil.copytree(smoke_repo / "metrics", dest / "metrics")
    return dest


def _verify(cwd, *args):
    return run([str(BIN / "s2s"), "verify", *map(str, args)], cwd, check=False)


def _line(out: str, key: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(key + " "))


@pytest.fixture
def runs(smoke_repo, tmp_path):
    return _copy_run(smoke_repo, tmp_path / "ref"), _copy_run(smoke_repo, tmp_path / "rerun")


def test_a_run_against_itself_is_identical_in_every_number_and_claim(runs, tmp_path):
    ref, rerun = runs
    proc = _verify(tmp_path, rerun, "--against", ref)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "within" not in proc.stdout and "different" not in proc.stdout
    assert "seeds of the reference: forward..forward_3, reversed_1..reversed_5, " \
           "reversed_fb1..reversed_fb1_3" in proc.stdout
    assert _line(proc.stdout, "train.reversed_1.dev_ppl").endswith("identical")
    claims = json.loads((ref / "metrics/claims.json").read_text())
    assert claims and f"claims: {len(claims)} of {len(claims)} with the same verdict" in proc.stdout


def _edit_train(run_dir, model, **values):
    path = run_dir / "metrics/train" / f"{model}.json"
    m = json.loads(path.read_text())
    m.update(values)
    path.write_text(json.dumps(m))


def test_numbers_within_twice_the_seed_sd_are_within_the_spread_and_others_differ(runs,
                                                                                   tmp_path):
    ref, rerun = runs
    devs = [json.loads((ref / f"metrics/train/reversed_{i}.json").read_text())["dev_ppl"]
            for i in range(1, 6)]
    sd = statistics.stdev(devs)
    base = devs[0]
    _edit_train(rerun, "reversed_1", dev_ppl=base + 1.5 * sd)  # inside 2 sd
    _edit_train(rerun, "reversed_2", dev_ppl=devs[1] + 3 * sd)  # outside
    gru = json.loads((ref / "metrics/train/gru.json").read_text())["test_ppl"]
    _edit_train(rerun, "gru", test_ppl=gru * 1.0001)  # the GRU has no seeds: borrowed
    proc = _verify(tmp_path, rerun, "--against", ref)
    assert proc.returncode == 0  # the claims' verdicts did not change
    inside = _line(proc.stdout, "train.reversed_1.dev_ppl")
    assert "within the seed spread" in inside and "reversed_1..reversed_5" in inside
    assert f"{2 * sd:.3g}" in inside
    outside = _line(proc.stdout, "train.reversed_2.dev_ppl")
    assert "different" in outside and f"{devs[1]:.4g}" in outside
    borrowed = _line(proc.stdout, "train.gru.test_ppl")
    assert "within the seed spread" in borrowed and "borrowed from reversed_1..reversed_5" \
        in borrowed


def test_a_rescoring_output_takes_the_spread_of_its_seed_groups_rescorers(runs, tmp_path):
    """The smoke profile rescores with forward, forward_2 and forward_3: rescore.forward's
    tolerance is twice their rescored BLEU's sd (it had borrowed a translation group's). The
    ensemble's rescorer, of several models, still borrows."""
    ref, rerun = runs
    bleu = json.loads((ref / "metrics/bleu.json").read_text())
    # the smoke run's tiny replicas may rescore alike: give the reference's a spread
    for i, name in enumerate(("forward", "forward_2", "forward_3")):
        bleu["rescore"][name]["bleu_tok"] = 10.0 + 0.5 * i
    for run_dir in (ref, rerun):
        (run_dir / "metrics/bleu.json").write_text(json.dumps(bleu))
    rescored = [10.0, 10.5, 11.0]
    sd = statistics.stdev(rescored)
    edited = json.loads((rerun / "metrics/bleu.json").read_text())
    edited["rescore"]["forward"]["bleu_tok"] = rescored[0] + 1.5 * sd  # inside 2 sd
    edited["rescore"]["forward_2"]["bleu_tok"] = rescored[1] + 3 * sd  # outside
    (rerun / "metrics/bleu.json").write_text(json.dumps(edited))
    proc = _verify(tmp_path, rerun, "--against", ref)
    inside = _line(proc.stdout, "rescore.forward")
    assert "within the seed spread" in inside, inside
    assert f"(2 sd {2 * sd:.3g}, forward..forward_3 rescoring)" in inside
    assert "different" in _line(proc.stdout, "rescore.forward_2")
    ensemble = next(n for n, members in _rescorers(ref).items() if len(members) > 1)
    assert _line(proc.stdout, f"rescore.{ensemble}").endswith("identical")


def _rescorers(run_dir) -> dict:
    import yaml

    return yaml.safe_load((run_dir / "params.yaml").read_text())["rescore"]["rescorers"]


def test_a_training_metrics_file_of_another_model_than_its_name_is_refused(runs, tmp_path):
    """metrics/train/x.json holding model y's numbers had silently replaced y's own."""
    ref, rerun = runs
    shutil.copy(rerun / "metrics/train/reversed_1.json", rerun / "metrics/train/old.json")
    proc = _verify(tmp_path, rerun, "--against", ref)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert (f"{rerun / 'metrics/train/old.json'}: 'model' is 'reversed_1', not the model its "
            "name says ('old')") in proc.stderr


def test_another_verdict_or_a_missing_claim_fails_the_verification(runs, tmp_path):
    ref, rerun = runs
    claims_file = rerun / "metrics/claims.json"
    claims = json.loads(claims_file.read_text())
    first = next(iter(claims))
    claims[first] = "holds" if claims[first] != "holds" else "does not hold"
    claims_file.write_text(json.dumps(claims))
    proc = _verify(tmp_path, rerun, "--against", ref)
    assert proc.returncode == 1 and "another verdict" in _line(proc.stdout, f"  {first}")
    claims_file.unlink()
    proc = _verify(tmp_path, rerun, "--against", ref)
    assert proc.returncode == 1 and "not run: no verdict" in proc.stdout


def test_a_folder_that_is_not_a_run_or_a_run_of_another_profile_is_exit_2(runs, tmp_path):
    ref, rerun = runs
    (tmp_path / "empty").mkdir()
    proc = _verify(tmp_path, tmp_path / "empty", "--against", ref)
    assert proc.returncode == 2 and "not a run" in proc.stderr and "Traceback" not in proc.stderr
    proc = _verify(tmp_path, rerun, "--against", tmp_path / "empty")  # says which side
    assert proc.returncode == 2 and f"the reference (--against): {tmp_path / 'empty'}: not a run" \
        in proc.stderr
    params = rerun / "params.yaml"
    params.write_text(params.read_text().replace("profile: smoke", "profile: default", 1))
    proc = _verify(tmp_path, rerun, "--against", ref)
    assert proc.returncode == 2
    assert "profile 'default'" in proc.stderr and "of 'smoke'" in proc.stderr


def test_a_claim_or_a_number_of_one_run_only_is_listed_and_only_the_reference_s_decide(
        runs, tmp_path):
    ref, rerun = runs
    claims_file = rerun / "metrics/claims.json"
    claims = json.loads(claims_file.read_text())
    claims["a_newer_claim"] = "holds"  # a claim added since the reference was published
    claims_file.write_text(json.dumps(claims))
    bleu_file = ref / "metrics/bleu.json"
    bleu = json.loads(bleu_file.read_text())
    system = next(iter(bleu["translate"]))
    beam = next(iter(bleu["translate"][system]))
    del bleu["translate"][system][beam]  # a number the reference does not have
    bleu_file.write_text(json.dumps(bleu))
    proc = _verify(tmp_path, rerun, "--against", ref)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = _line(proc.stdout, "  a_newer_claim")
    assert "not run" in line and "holds" in line and "not in the reference" in line
    assert _line(proc.stdout, f"bleu.{system}.b{beam}").endswith("not in both runs")
    n = len(claims) - 1
    assert proc.stdout.rstrip().endswith(
        f"claims: {n} of {n} with the same verdict; 1 not in the reference")


def test_a_run_of_other_settings_is_not_a_rerun_but_one_on_other_hardware_is(runs, tmp_path):
    ref, rerun = runs
    params = rerun / "params.yaml"
    text = params.read_text()
    train = "\ntrain:\n  device: auto\n  threads: 1\n"
    assert train in text and "\n  epochs: 1.0 " in text
    # where and how it ran (a device, a thread count) is not another configuration
    params.write_text(text.replace(train, "\ntrain:\n  device: cpu\n  threads: 2\n", 1))
    proc = _verify(tmp_path, rerun, "--against", ref)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # nor a smaller batch for rescoring's memory, as for translation's
    import yaml
    raw = yaml.safe_load(text)
    raw["rescore"]["batch_size"] = raw["rescore"].get("batch_size", 64) + 1
    raw["translate"]["batch_size"] = raw["translate"].get("batch_size", 64) + 1
    params.write_text(yaml.safe_dump(raw, sort_keys=False))
    proc = _verify(tmp_path, rerun, "--against", ref)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    params.write_text(text.replace("\n  epochs: 1.0 ", "\n  epochs: 2.0 ", 1))
    proc = _verify(tmp_path, rerun, "--against", ref)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "differs from" in proc.stderr and "in 1 setting (train.epochs)" in proc.stderr


def test_a_setting_that_only_adds_measurements_keeps_a_rerun_a_rerun(runs, tmp_path):
    # A rerun of a profile that has since gained seed replicas of the reach, or a rescorer, was
    # "not a rerun" (exit 2): no number of the published run could be checked against it.
    import yaml

    ref, rerun = runs
    raw = yaml.safe_load((ref / "params.yaml").read_text())
    del raw["analysis"]["reach_replicas"]
    raw["rescore"]["rescorers"].pop("gru")
    (ref / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    proc = _verify(tmp_path, rerun, "--against", ref)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ("settings that only add measurements, not the same in both runs: "
            "analysis.reach_replicas, rescore.rescorers.gru\n") in proc.stdout
    # a rescorer of both runs with other members is another configuration
    raw["rescore"]["rescorers"]["forward"] = ["forward_2"]
    (ref / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    proc = _verify(tmp_path, rerun, "--against", ref)
    assert proc.returncode == 2 and "in 1 setting (rescore.rescorers.forward)" in proc.stderr


def test_each_run_names_the_cpu_kind_it_trained_on_and_a_difference_is_said(runs, tmp_path):
    """Training records the CPU's kind (bf16 bits depend on it); verify prints both runs'
    machines, and says why numbers need not be identical where they differ. A record from
    before the kind was kept reads as 'kind not recorded'."""
    import re

    from s2s.precision import cpu_kind

    ref, rerun = runs
    kind = cpu_kind()
    assert re.search(r" \(family \d+, model \d+; ", kind), kind
    records = sorted((ref / "metrics" / "train").glob("*.json"))
    first = json.loads(records[0].read_text())
    assert first["device"] == "cpu" and first["cpu"] == kind
    here = f"cpu ({kind}), {first['precision']}"
    out = _verify(tmp_path, rerun, "--against", ref).stdout
    assert f"trained on: reference {here}\n" in out and f"this run  {here}\n" in out
    assert "not the same machines" not in out

    other = "Intel Xeon Test (family 6, model 143; Intel AMX-BF16)"
    for path in records:
        record = json.loads(path.read_text())
        path.write_text(json.dumps({**record, "cpu": other}))
    proc = _verify(tmp_path, rerun, "--against", ref)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # the verdicts decide, not the machine
    assert f"trained on: reference cpu ({other}), {first['precision']}\n" in proc.stdout
    assert f"this run  {here}\n" in proc.stdout
    assert "(not the same machines or precision: bf16 products differ" in proc.stdout

    for path in records:
        record = json.loads(path.read_text())
        del record["cpu"]
        path.write_text(json.dumps(record))
    out = _verify(tmp_path, rerun, "--against", ref).stdout
    assert f"trained on: reference cpu (kind not recorded), {first['precision']}\n" in out


def test_the_report_s_provenance_names_the_cpu_kind_training_ran_on(smoke_run):
    from s2s.precision import cpu_kind

    report = (smoke_run / "reports" / "report.md").read_text()
    assert f"training device(s): cpu ({cpu_kind()});" in report


def _copy_published(dest):
    """The published run's params and metrics: a run `s2s verify` reads, with no smoke run."""
    from conftest import ROOT

    return _copy_run(ROOT / "reports" / "default", dest)


def test_strict_also_fails_on_a_number_different_or_missing_and_only_then(tmp_path):
    """Without --strict the exit status follows the claims alone: a metrics file lost, or a
    number beyond the seeds' spread, exits 0 (listed). --strict fails on either, naming them;
    a number within the spread, or one of the run only, passes."""
    ref, rerun = _copy_published(tmp_path / "ref"), _copy_published(tmp_path / "rerun")
    proc = _verify(tmp_path, rerun, "--against", ref, "--strict")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "--strict" not in proc.stdout
    devs = [json.loads((ref / f"metrics/train/reversed_{i}.json").read_text())["dev_ppl"]
            for i in range(1, 6)]
    _edit_train(rerun, "reversed_1", dev_ppl=devs[0] + 1.5 * statistics.stdev(devs))  # within
    assert _verify(tmp_path, rerun, "--against", ref, "--strict").returncode == 0
    _edit_train(rerun, "attention", dev_ppl=1.5 * json.loads(
        (ref / "metrics/train/attention.json").read_text())["dev_ppl"])  # beyond the spread
    (rerun / "metrics/train/gru.json").unlink()  # a file lost
    assert _verify(tmp_path, rerun, "--against", ref).returncode == 0  # the claims agree
    proc = _verify(tmp_path, rerun, "--against", ref, "--strict")
    assert proc.returncode == 1
    assert proc.stdout.splitlines()[-1] == (
        "--strict: 4 numbers of the reference different or missing in this run: "
        "train.gru.dev_ppl, train.gru.test_ppl, train.gru.best_dev_ppl, train.attention.dev_ppl")


def test_a_rerun_of_today_s_default_profile_is_a_rerun_of_the_published_run(tmp_path):
    """The repository's params.yaml (the default profile as `s2s profile default` writes it)
    against the published run's: the published run predates settings that only add measurements,
    and a faithful rerun must still be compared number by number (it was exit 2)."""
    from conftest import ROOT

    ref, rerun = _copy_published(tmp_path / "ref"), _copy_published(tmp_path / "rerun")
    shutil.copy(ROOT / "params.yaml", rerun / "params.yaml")
    proc = _verify(tmp_path, rerun, "--against", ref)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "identical" in _line(proc.stdout, "train.forward.dev_ppl")
