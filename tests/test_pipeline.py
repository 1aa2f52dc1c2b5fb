"""The smoke profile end to end through `dvc repro`: every stage runs, the outputs hold what they
should, a second `dvc repro` does nothing, and a report-only change reruns only the report."""

from __future__ import annotations

import json
import math
import os
import re
import shutil

import pytest
import yaml

from conftest import BIN, EXPECTED_READERS, run

pytestmark = pytest.mark.slow


def test_every_stage_produced_its_outputs(smoke_repo):
    params = yaml.safe_load((smoke_repo / "params.yaml").read_text())
    for name in params["models"]:
        assert (smoke_repo / "models" / name / "model.pt").exists(), name
        m = json.loads((smoke_repo / "metrics" / "train" / f"{name}.json").read_text())
        assert m["steps"] > 0 and math.isfinite(m["dev_ppl"]) and m["tgt_words_per_sec"] > 0
    for system, cfg in params["systems"].items():
        for beam in cfg["beams"]:
            hyps = (smoke_repo / "outputs/translate" / system / f"beam{beam}.tok.fr").read_text()
            assert hyps.count("\n") == 60, (system, beam)  # every test sentence, none dropped
    for name in ("baseline", "oracle", "forward", "reversed", "ensemble5"):
        sub = "oracle" if name in ("baseline", "oracle") else name
        assert (smoke_repo / "outputs/rescore" / sub / f"{name}.tok.fr").read_text().count("\n") == 60
    assert (smoke_repo / "reports/report.md").exists()
    assert (smoke_repo / "reports/report.html").exists()


def test_reversal_training_curves_and_bleu_metrics(smoke_repo):
    bleu = json.loads((smoke_repo / "metrics/bleu.json").read_text())
    assert bleu["test_sentences"] == 60
    e5 = bleu["translate"]["ensemble5"]
    assert set(e5) == {"1", "2", "12"}
    for beam in e5.values():
        assert 0.0 <= beam["bleu_tok"] <= 100.0
        assert beam["sacre_signature"].startswith("nrefs:1")
    curves = (smoke_repo / "metrics/curves/reversed_1.csv").read_text().splitlines()
    assert curves[0] == "step,epoch,lr,train_ppl,dev_ppl" and len(curves) == 3  # 2 evals/epoch


def test_second_repro_does_nothing(smoke_repo):
    proc = run([str(BIN / "dvc"), "repro"], smoke_repo)
    assert "Running stage" not in proc.stdout + proc.stderr
    status = run([str(BIN / "dvc"), "status"], smoke_repo)
    assert "up to date" in status.stdout


def test_a_report_setting_reruns_only_the_report(smoke_repo):
    params_file = smoke_repo / "params.yaml"
    original, times = params_file.read_text(), params_file.stat()
    try:
        edited = re.sub(r"""title: (".*"|'.*')""", 'title: "Another title"', original)
        assert edited != original
        params_file.write_text(edited)
        status = run([str(BIN / "dvc"), "status"], smoke_repo).stdout
        changed = {line.rstrip(":") for line in status.splitlines()
                   if line and not line.startswith((" ", "\t"))}
        # and check-params, which validates any change of the file (its output is constant)
        assert changed == {"check-params", "report"}, status
    finally:  # as it was, modification time included (Snakemake compares those)
        params_file.write_text(original)
        os.utime(params_file, ns=(times.st_atime_ns, times.st_mtime_ns))


def _changed(status: str) -> set[str]:
    return {line.rstrip(":") for line in status.splitlines()
            if line and not line.startswith((" ", "\t")) and line.endswith(":")}


@pytest.mark.parametrize("path", EXPECTED_READERS)
def test_editing_a_source_file_reruns_exactly_the_stages_that_run_it(smoke_repo, path):
    source = smoke_repo / "src/s2s" / path
    original, times = source.read_text(), source.stat()
    try:
        source.write_text(original + "\n# a fix\n")
        changed = _changed(run([str(BIN / "dvc"), "status"], smoke_repo).stdout)
    finally:  # as it was, modification time included (Snakemake compares those)
        source.write_text(original)
        os.utime(source, ns=(times.st_atime_ns, times.st_mtime_ns))
    # The stages whose code it is, and nothing upstream of them (the stages after these rerun
    # when their outputs change, which a comment does not). model/transformer.py: no data stage,
    # no LSTM; model/lstm.py: no Transformer stage.
    assert changed == EXPECTED_READERS[path], changed


def test_the_log_has_no_line_per_empty_dependency_and_no_lock_takeover(smoke_repo):
    log = (smoke_repo / "repro.log").read_text()
    assert "Running stage 'train-forward'" in log
    assert "is empty" not in log and "took over the lock" not in log


def test_adding_a_system_to_params_runs_exactly_its_new_stages(smoke_repo, tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(smoke_repo, repo, symlinks=True)
    params_file = repo / "params.yaml"
    params_file.write_text(params_file.read_text().replace(
        "systems:\n", "systems:\n  pair34: {members: [reversed_3, reversed_4], beams: [3]}\n", 1))
    run([str(BIN / "s2s"), "dag", "write"], repo)  # the one documented command
    proc = run([str(BIN / "dvc"), "repro"], repo, timeout=900)
    ran = set(re.findall(r"Running stage '([^']+)'", proc.stdout + proc.stderr))
    # Its own stage, the stages that read every system (scores, summary, claims, report,
    # export), and check-params, which validates the edited params (its output is constant: it
    # reruns nothing after it).
    assert ran == {"check-params", "translate-pair34", "evaluate", "summary", "export",
                   "claims", "report"}, ran
    bleu = json.loads((repo / "metrics/bleu.json").read_text())
    assert set(bleu["translate"]["pair34"]) == {"3"}
    report = (repo / "reports/report.md").read_text()
    assert "pair34" in report


def test_the_transformer_row_cross_attention_and_length_drop(smoke_repo):
    # Table 1's modern reference: our number beside "not in the paper"
    t1 = (smoke_repo / "reports/tables/table1.csv").read_text()
    row = next(line for line in t1.splitlines() if line.startswith('"Transformer (Vaswani'))
    assert "not in the paper" in row and ",transformer, beam 12 (1 model)" in row.replace('"', "")
    # its cross-attention on the attention model's example sentences, rows distributions
    weights = json.loads((smoke_repo / "outputs/attention/weights.json").read_text())
    cross = weights["cross_attention"]
    hyps = (smoke_repo / "outputs/translate/transformer/beam12.tok.fr").read_text().splitlines()
    # the attention model's example sentences where the Transformer's translation is not empty
    assert cross["system"] == "transformer"
    assert [e["index"] for e in cross["examples"]] == [
        e["index"] for e in weights["examples"] if hyps[e["index"]].strip()]
    for ex in cross["examples"]:
        assert ex["target"] == hyps[ex["index"]].split() + ["<eos>"]
    for ex in cross["examples"]:
        assert len(ex["weights"]) == len(ex["target"])
        for r in ex["weights"]:
            assert len(r) == len(ex["source"]) and abs(sum(r) - 1) < 1e-3
    # the length drop of every translation, the LSTM ensemble's own difference 0
    import pandas as pd

    drop = pd.read_csv(smoke_repo / "outputs/evaluate/length_drop.csv", dtype={"beam": str})
    e5 = drop[(drop.system == "ensemble5") & (drop.beam == "12")].iloc[0]
    assert e5["drop"] == pytest.approx(e5["short_bleu"] - e5["long_bleu"])
    assert e5["drop_minus_reference"] == 0 and e5["diff_lo"] == 0 and e5["diff_hi"] == 0
    assert e5["drop_lo"] <= e5["drop"] <= e5["drop_hi"]
    assert {"attention", "transformer"} <= set(drop.system)
    assert (smoke_repo / "reports/tables/length.md").exists()
    assert (smoke_repo / "reports/figures/cross_attention.png").exists()
