"""The artifact records (s2s.artifacts): the files the stages write round-trip through them, a bad
file is an error naming the file and the key, and writers and readers agree on the paths
(s2s.layout) and on the report's data files (paper.yaml, the templates, params
`report.table1`/`table2`)."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from s2s import artifacts
from s2s.artifacts import (Absent, ArtifactError, Bleu, Manifest, Scored, Timing,
                           TrainMetrics)
from s2s.config import ConfigError, load
from s2s import layout as outputs
from s2s import paper
from s2s.stages import report as report_stage

ROOT = Path(__file__).resolve().parents[1]
PROFILES = sorted((ROOT / "profiles").glob("*.yaml"))
SIG = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"

BLEU = {"test_sentences": 60, "bleu_tok_method": "multi-bleu.pl style",
        "bleu_tok_signature": "nrefs:1|case:mixed|eff:no|tok:none|smooth:exp|version:2.6.0",
        "translate": {"forward": {"12": {"bleu_tok": 0.0612, "bleu_sacre": 0.0311,
                                         "sacre_signature": SIG, "sentences": 60}},
                      "ensemble5": {"1": {"absent": True, "reason": "missing a, b"},
                                    "12": {"bleu_tok": 1.5, "bleu_sacre": 1.25,
                                           "sacre_signature": SIG, "sentences": 60}}},
        "rescore": {"forward": {"absent": True, "reason": "no rescore directory x"},
                    "oracle": {"bleu_tok": 0.0301, "bleu_sacre": 0.08, "sacre_signature": SIG,
                               "sentences": 60}}}
TIMING = {"system": "ensemble5", "members": ["reversed_1", "reversed_2"], "device": "cpu",
          "threads": 1, "precision": "bf16",
          "beams": {"1": {"sentences": 60, "seconds": 0.154, "sents_per_sec": 389.494},
                    "12": {"sentences": 60, "seconds": 0.8, "sents_per_sec": 75.02}}}
# exactly the keys s2s.train writes (test_train_metrics_record_has_the_keys_train_writes)
TRAIN = {"model": "forward", "reverse_source": False, "cell": "lstm", "num_layers": 2,
         "hidden_size": 32, "embed_size": 32, "parameters": 287794, "device": "cpu",
         "precision": "bf16", "threads": 1, "epochs": 1.0, "steps": 24, "train_pairs": 3045,
         "train_target_words": 63948, "tgt_words_per_sec": 37620.3, "train_seconds": 1.7,
         "wall_seconds": 2.9, "dev_ppl": 150.1612, "test_ppl": 120.9634,
         "best_dev_ppl": 150.1612}
URL = "https://www.statmt.org/wmt14/test-full.tgz"
MANIFEST = {"mode": "mirror", "mirror": "/mirror", "corpora": {
    "wmt14.giga_fren": {
        "mode": "mirror", "source": "/mirror/giga", "format": "plain", "pairs": 30000,
        "whole_corpus": False, "max_lines": 3000, "lines": {"en": 30000, "fr": 30000},
        "files": {s: {"path": f"wmt14.giga_fren/{s}.txt", "source": f"/mirror/giga/g.{s}",
                      "sha256": "ab" * 32, "bytes": 100, "lines": 30000} for s in ("en", "fr")}},
    "wmt14.newstest2014": {
        "mode": "network", "source": [URL], "format": "sgm", "pairs": 3003,
        "whole_corpus": True, "max_lines": None, "lines": {"en": 3003, "fr": 3003},
        "downloads": {URL: {"url": URL, "sha256": "cd" * 32, "bytes": 5000, "verified": "md5"}},
        "files": {s: {"path": f"wmt14.newstest2014/{s}.sgm", "source": f"{URL}#x.{s}.sgm",
                      "sha256": "ef" * 32, "bytes": 1000, "lines": 3003} for s in ("en", "fr")}}}}


# --- round trips ---------------------------------------------------------------------------------


@pytest.mark.parametrize("record, obj", [(Bleu, BLEU), (Timing, TIMING), (TrainMetrics, TRAIN),
                                         (TrainMetrics, {**TRAIN, "processes": 2}),
                                         (Manifest, MANIFEST)],
                         ids=["bleu", "timing", "train", "train-ddp", "manifest"])
def test_records_round_trip(record, obj, tmp_path):
    rec = record.from_json(obj)
    assert rec.to_json() == obj
    # the writer's key order (s2s.data.download sorts the manifest's keys, as json does here)
    sort = record is Manifest
    assert json.dumps(rec.to_json(), sort_keys=sort) == json.dumps(obj, sort_keys=sort)
    path = tmp_path / "a.json"
    rec.write(path)
    assert record.read(path) == rec
    assert json.loads(path.read_text()) == obj


def test_bleu_record_holds_typed_entries_by_int_beam():
    bleu = Bleu.from_json(BLEU)
    assert bleu.translation("ensemble5", 12) == Scored(1.5, 1.25, SIG, 60)
    assert bleu.translation("ensemble5", 1) == Absent.because("missing a, b")
    assert bleu.translation("ensemble5", 2) is None and bleu.translation("gru", 12) is None
    assert isinstance(bleu.rescoring("oracle"), Scored) and bleu.rescoring("gru") is None
    assert Timing.from_json(TIMING).beams[12].seconds == 0.8
    assert TrainMetrics.from_json(TRAIN).processes is None  # one process: the key is not written
    assert "processes" not in TrainMetrics.from_json(TRAIN).to_json()


def _run_files(root: Path) -> list[tuple[type, Path]]:
    """Every file of a run under `root` that one of the records reads, with the record."""
    found = {Bleu: [root / "metrics/bleu.json"], Manifest: [root / "data/raw/manifest.json"],
             TrainMetrics: sorted((root / "metrics/train").glob("*.json")),
             Timing: sorted((root / "outputs/translate").glob("*/timing.json"))}
    return [(r, p) for r, ps in found.items() for p in ps]


@pytest.mark.parametrize("run", ["published", "smoke"])
def test_a_real_runs_artifacts_round_trip(run, request):
    """The files of a real run (the published one; the session's smoke run) read into their
    records and write back to the same JSON: every file of each kind is there, and every key."""
    root = ROOT / "reports" / "default" if run == "published" else \
        request.getfixturevalue("smoke_run")
    paths = _run_files(root)
    kinds = {r for r, _ in paths}
    assert kinds == {Bleu, Manifest, TrainMetrics, Timing}, kinds
    assert all(p.is_file() for _, p in paths), [p for _, p in paths if not p.is_file()]
    for record, path in paths:
        assert record.read(path).to_json() == json.loads(path.read_text()), path


# --- bad files -----------------------------------------------------------------------------------


def _bad(obj, **change):
    """`obj` deep-copied, with dotted keys set (a value of ...: the key removed)."""
    obj = json.loads(json.dumps(obj))
    for dotted, value in change.items():
        *parents, last = dotted.split("__")
        d = obj
        for k in parents:
            d = d[k]
        if value is ...:
            del d[last]
        else:
            d[last] = value
    return obj


@pytest.mark.parametrize("record, obj, message", [
    (Bleu, _bad(BLEU, translate__ensemble5__12__bleu_tok="34.8"),
     "'translate.ensemble5.12.bleu_tok' must be a number, got str '34.8'"),
    (Bleu, _bad(BLEU, test_sentences=...), "missing key 'test_sentences'"),
    (Bleu, _bad(BLEU, translate__forward__12__sentences=...),
     "missing key 'translate.forward.12.sentences'"),
    (Bleu, _bad(BLEU, translate__forward__b12={"absent": True, "reason": "x"}),
     "'translate.forward.b12': the keys of 'translate.forward' must be beam widths"),
    (Bleu, _bad(BLEU, rescore__oracle__absent=False), "unknown key 'rescore.oracle.absent'"),
    (Bleu, _bad(BLEU, rescore__forward__absent=False),
     "'rescore.forward.absent' must be one of [true], got bool False"),
    (Timing, _bad(TIMING, beams__12__seconds=True), "'beams.12.seconds' must be a number"),
    (Timing, _bad(TIMING, precision=...), "missing key 'precision'"),
    (Timing, _bad(TIMING, members="reversed_1"), "'members' must be a list"),
    (TrainMetrics, _bad(TRAIN, steps=24.0), "'steps' must be an integer, got float 24.0"),
    (TrainMetrics, _bad(TRAIN, lr=0.7), "unknown key 'lr' (expected one of: model, reverse_source, "),
    (TrainMetrics, [TRAIN], "'<top>' must be a mapping, got list"),
    (Manifest, _bad(MANIFEST, **{"corpora__wmt14.newstest2014__downloads": ...}), None),
    (Manifest, _bad(MANIFEST, **{"corpora__wmt14.giga_fren__files__en__sha256": None}),
     "'corpora.wmt14.giga_fren.files.en.sha256' must be a string, got NoneType None"),
])
def test_a_bad_artifact_names_the_file_and_the_key(record, obj, message, tmp_path):
    path = tmp_path / "metrics" / "a.json"
    path.parent.mkdir()
    path.write_text(json.dumps(obj))
    if message is None:  # a valid variant: the key is optional
        record.read(path)
        return
    with pytest.raises(ArtifactError) as e:
        record.read(path)
    assert str(e.value).startswith(f"{path}: ") and message in str(e.value), str(e.value)


def test_a_file_that_is_not_json_or_not_there_is_named(tmp_path):
    path = tmp_path / "bleu.json"
    with pytest.raises(ArtifactError, match=re.escape(f"{path}: not found")):
        Bleu.read(path)
    path.write_text('{"test_sentences": 60,\n  "translate": }\n')
    with pytest.raises(ArtifactError, match=re.escape(f"{path}:2: not valid JSON")):
        Bleu.read(path)
    assert Bleu.read_if_present(tmp_path / "none.json", []) is None


def test_the_report_and_summary_stages_name_a_bad_artifact(tmp_path):
    """A reader of the pipeline's files fails on a bad field with the file and the key, and
    tolerates no guessing (the report's old .get(...) chains)."""
    from s2s.stages import summary as summary_stage

    params = load(ROOT / "profiles" / "smoke.yaml")
    metrics, translate = tmp_path / "metrics", tmp_path / "translate"
    (metrics / "train").mkdir(parents=True)
    (metrics / "bleu.json").write_text(json.dumps(BLEU))
    (metrics / "train" / "forward.json").write_text(json.dumps(_bad(TRAIN, test_ppl=...)))
    groups = tmp_path / "figure3.csv"
    pd.DataFrame(columns=["system", "beam", "axis", "label", "lo", "hi", "sentences", "mean",
                          "bleu"]).to_csv(groups, index=False)
    with pytest.raises(ArtifactError, match=re.escape(
            f"{metrics / 'train' / 'forward.json'}: missing key 'test_ppl'")):
        summary_stage.main(params, outputs.SummaryPaths(
            metrics=metrics, translate=translate, groups=groups, out=tmp_path / "summary.json",
            plots=tmp_path / "plots"))
    with pytest.raises(ArtifactError, match=re.escape(
            f"{metrics / 'train' / 'forward.json'}: missing key 'test_ppl'")):
        report_stage.main(params, outputs.ReportPaths(
            metrics=metrics, translate=translate, groups=groups, manifest=tmp_path / "none.json",
            claims=tmp_path / "claims.json", out=tmp_path / "reports"))


# --- the writers' keys ---------------------------------------------------------------------------


def _dict_keys(source: Path, target: str) -> list[str] | None:
    """The literal keys of the dict assigned to `target` in `source`, or None if there is none."""
    for node in ast.walk(ast.parse(source.read_text())):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
                and any(isinstance(t, ast.Name) and t.id == target for t in node.targets)):
            keys = [k.value for k in node.value.keys if isinstance(k, ast.Constant)]
            # ** spreads (optional keys): their literal keys
            keys += [k.value for v in node.value.values if isinstance(v, ast.IfExp)
                     and isinstance(v.body, ast.Dict) for k in v.body.keys]
            return keys
    return None


def test_train_metrics_record_writes_the_keys_train_wrote_in_their_order():
    """s2s.train writes metrics/train/<model>.json through the record: a recurrent model's file
    has exactly the keys, in the order, that the dict it wrote before had (`processes` only
    under data-parallel training, `architecture` only for a model that is not recurrent)."""
    rec = TrainMetrics.from_json(TRAIN)
    assert list(rec.to_json()) == list(TRAIN)
    assert list(TrainMetrics.from_json({**TRAIN, "processes": 2}).to_json())[-1] == "processes"
    other = {k: v for k, v in TRAIN.items()
             if k not in ("cell", "num_layers", "hidden_size", "embed_size")}
    shaped = TrainMetrics.from_json({**other, "architecture": {"arch": "transformer",
                                                                "d_model": 192}})
    assert shaped.architecture == {"arch": "transformer", "d_model": 192} and shaped.cell is None


def test_download_manifest_is_read_through_its_record(tmp_path):
    """The manifest the download stage writes (mirror mode, the smoke profile's mirror) is a
    Manifest."""
    from conftest import need_mirror
    from s2s.config import CorpusRef, DataConfig
    from s2s.data import download
    from s2s.stages import download as download_stage

    mirror = need_mirror()
    manifest = download_stage.main(DataConfig(train=(), dev=(), test=CorpusRef("wmt.newstest2013")),
                                  out_dir=tmp_path / "raw", mirror=mirror,
                                  cache_dir=tmp_path / "cache")
    rec = Manifest.read(tmp_path / "raw" / download.MANIFEST)
    assert rec.to_json() == json.loads(json.dumps(manifest))
    assert rec.corpora["wmt.newstest2013"].files["en"].lines == \
        rec.corpora["wmt.newstest2013"].lines["en"]


# --- paths: one function each, for the writer and the readers -----------------------------------


def test_rescore_outputs_are_where_the_rescore_stages_write_them():
    from s2s.stages import rescore as rescore_stage

    params = load(ROOT / "params.yaml")
    root = Path("outputs/rescore")
    for st in rescore_stage.stages(params):
        rescorer = st.name.removeprefix("rescore-")
        out = Path(st.cmd.split("--out ")[1].split()[0])
        assert out == outputs.rescore_stage_dir(root, rescorer)
        assert st.outs[0].path == str(out)
        names = outputs.RESCORE_FIXED if rescorer == outputs.ORACLE_STAGE else (rescorer,)
        for name in names:  # the stage writes <out>/<name>.{tok,detok}.fr
            assert outputs.rescore_output(root, name) == out / name
            assert outputs.hypothesis_files(out / name) == (out / f"{name}.tok.fr",
                                                            out / f"{name}.detok.fr")
    assert outputs.translation(Path("t"), "ensemble5", 12) == Path("t/ensemble5/beam12")
    assert outputs.timing_file(Path("t"), "ensemble5") == Path("t/ensemble5") / \
        outputs.TIMING_FILE
    assert outputs.rescore_system("baseline") == "rescore/baseline"


# --- the report's data files ---------------------------------------------------------------------


def test_the_report_stage_depends_on_its_data_files():
    from s2s.report.sections import TEMPLATES_DIR

    assert {ROOT / p for p in report_stage.DATA_FILES} == {paper.PAPER_FILE, TEMPLATES_DIR}
    assert all((ROOT / p).exists() for p in report_stage.DATA_FILES)
    deps = report_stage.stages(load(ROOT / "params.yaml"))[0].deps
    assert set(report_stage.DATA_FILES) <= set(deps)


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.stem)
def test_every_profile_answers_the_paper_rows_as_today(profile):
    """Every row id of params report.table1/table2 is a row of paper.yaml, and every profile maps
    the same systems to the paper's rows (the report's tables before the mapping was data), but
    `quick`, which answers only the reversal rows."""
    params = load(profile)
    paper.check_answers(params)
    got = {(t, r.id): paper.answer(params, t, r.id)
           for t in paper.TABLES for r in paper.paper().rows(t)}
    want = {("table1", "bahdanau"): ("translate", "attention", 12),
            ("table1", "baseline"): ("baseline", "", 0),
            ("table1", "forward_beam12"): ("translate", "forward", 12),
            ("table1", "reversed_beam12"): ("translate", "reversed", 12),
            ("table1", "ensemble5_beam1"): ("translate", "ensemble5", 1),
            ("table1", "ensemble2_beam12"): ("translate", "ensemble2", 12),
            ("table1", "ensemble5_beam2"): ("translate", "ensemble5", 2),
            ("table1", "ensemble5_beam12"): ("translate", "ensemble5", 12),
            # the modern reference beside the paper's rows (not in the paper)
            ("table1", "transformer"): ("translate", "transformer", 12),
            ("table2", "baseline"): ("rescore", "baseline", 0),
            ("table2", "cho"): ("rescore", "gru", 0),
            ("table2", "best_wmt14"): None,
            ("table2", "forward"): ("rescore", "forward", 0),
            ("table2", "reversed"): ("rescore", "reversed", 0),
            ("table2", "ensemble5"): ("rescore", "ensemble5", 0),
            ("table2", "oracle"): ("rescore", "oracle", 0)}
    if profile.stem == "quick":  # the reversal rows only, answered at beam 2; no Table 2
        want = {k: None for k in want} | {("table1", "forward_beam12"): ("translate", "forward", 2),
                                          ("table1", "reversed_beam12"): ("translate", "reversed", 2)}
    assert {k: v and (v.kind, v.system, v.beam) for k, v in got.items()} == want


def test_a_bad_answer_in_params_names_the_key(tmp_path):
    from helpers import profile_text

    text = profile_text("smoke")
    bad = tmp_path / "params.yaml"
    bad.write_text(text.replace("    bahdanau: {system: attention, beam: 12}",
                                "    bahdanau: {system: attention}"))
    with pytest.raises(ConfigError, match=r"'report.table1.bahdanau' must give 'beam' with"):
        load(bad)
    bad.write_text(text.replace("    cho: {rescore: gru}",
                                "    cho: {rescore: gru, baseline: true}"))
    with pytest.raises(ConfigError, match=r"'report.table2.cho' must give exactly one of .* "
                                          r"not rescore and baseline"):
        load(bad)
    bad.write_text(text.replace("    cho: {rescore: gru}", "    chooo: {rescore: gru}"))
    with pytest.raises(ConfigError, match=r"'report.table2.chooo' is not a row of the paper's "
                                          r"table2 in paper.yaml \(rows: baseline, cho, "):
        paper.check_answers(load(bad))


def test_paper_yaml_gives_the_papers_numbers():
    p = paper.paper()
    assert [(r.paper_text, r.paper_bleu) for r in p.table1[:-1]] == [
        ("28.45", 28.45), ("33.30", 33.3), ("26.17", 26.17), ("30.59", 30.59),
        ("33.00", 33.0), ("33.27", 33.27), ("34.50", 34.5), ("34.81", 34.81)]
    last = p.table1[-1]  # ours only: no number of the paper's, and it says so
    assert last.id == "transformer" and last.paper_text == "not in the paper"
    assert last.paper_bleu != last.paper_bleu  # NaN
    assert [r.paper_text for r in p.table2] == ["33.30", "34.54", "37.0", "35.61", "35.85",
                                                "36.5", "~45"]
    assert p.row("table2", "oracle").paper_bleu == 45.0
    assert p.test_ppl() == {"forward": 5.8, "reversed": 4.7}
    assert p.claims["reversal_bleu"].text == ("Reversing the source raises BLEU (paper: 26.17 "
                                              "-> 30.59 at beam 12)")
    # every number has its citation
    for line in paper.PAPER_FILE.read_text().splitlines():
        if re.search(r"(bleu|test_ppl|lstm|baseline): \"?~?\d", line):
            assert re.search(r"# (Table [12]|§3\.3|Figure 3)", line), line


def test_a_bad_paper_file_names_the_key(tmp_path):
    text = paper.PAPER_FILE.read_text()
    bad = tmp_path / "paper.yaml"
    bad.write_text(text.replace('bleu: "34.54"', 'bleu: "thirty"'))
    with pytest.raises(ConfigError, match=r"'table2\[1\].bleu' must be a BLEU score as printed"):
        paper.load(bad)
    bad.write_text(text.replace("rows: [forward_beam12, reversed_beam12]",
                                "rows: [forward_beam12, reversed]"))
    with pytest.raises(ConfigError, match=r"'claims.reversal_bleu.rows\[1\]' must name a row"):
        paper.load(bad)
    bad.write_text(text.replace("test_ppl: 5.8", "test_ppl: five", 1))  # the shared decoder
    with pytest.raises(ConfigError, match=r"'perplexity\[0\].test_ppl' must be a number, got str"):
        paper.load(bad)
    bad.write_text(text.replace("{{ table1.forward_beam12 }}", "{{ table1.forward }}"))
    with pytest.raises(ConfigError, match=r"'claims.reversal_bleu.paper': .*forward"):
        paper.load(bad)


def test_params_and_artifacts_are_read_by_one_decoder_with_their_own_rules(tmp_path):
    # s2s.schema.decode reads both; what differs is declared once in each one's Rules: a
    # parameter file refuses an empty string and a non-finite number, an artifact keeps what its
    # writer wrote (an empty reason, a diverged run's infinite perplexity).
    from dataclasses import dataclass

    from s2s import config, schema

    @dataclass(frozen=True)
    class R:
        name: str
        ppl: float

    assert schema.decode(R, {"name": "", "ppl": float("inf")}, "a.json", "",
                         artifacts.RULES) == R("", float("inf"))
    with pytest.raises(config.ConfigError, match=r"p.yaml: 'x.name' must be a non-empty string"):
        schema.decode(R, {"name": "", "ppl": 1.0}, "p.yaml", "x", config.RULES)
    with pytest.raises(config.ConfigError, match=r"p.yaml: 'ppl' must be a finite number, got inf"):
        schema.decode(R, {"name": "a", "ppl": float("inf")}, "p.yaml", "", config.RULES)
    for rules, error in ((config.RULES, config.ConfigError), (artifacts.RULES, ArtifactError)):
        with pytest.raises(error, match=r"f: unknown key 'x.other' \(expected one of: name, ppl\)"):
            schema.decode(R, {"name": "a", "ppl": 1, "other": 2}, "f", "x", rules)


def test_the_stage_metrics_without_a_record_before_have_one_now(tmp_path):
    # prepare.json, vocab.json, params.json and summary.json are written through their records
    # and read through them: a damaged one is refused naming the key.
    train = {"lines_in": 10, "removed": {"empty": 1}, "lines_out": 9, "tokens_en": 90,
             "tokens_fr": 95, "cleaned": {"crlf_lines": 0}}
    test = {"lines_in": 5, "lines_out": 5, "empty_en": 0, "empty_fr": 0, "cleaned": {}}
    prepare = {"splits": {"train": {"a": train}, "test": {"b": test}},
               "totals": {"train": {"lines_out": 9}, "test": {"lines_out": 5}}}
    got = artifacts.PrepareMetrics.from_json(prepare)
    assert isinstance(got.splits["train"]["a"], artifacts.TrainCounts)
    assert isinstance(got.splits["test"]["b"], artifacts.EvalCounts)
    assert got.to_json() == prepare  # what the prepare stage writes, key order included
    assert list(got.to_json()["splits"]["train"]["a"]) == list(train)
    side = {"size": 14, "words": 10, "train_types": 30, "unk_rate": {"test": 0.1}}
    for record, obj, message in (
            (artifacts.PrepareMetrics, {**prepare, "splits": {"train": {"a": {**train,
                                                                             "lines_out": "9"}}}},
             "'splits.train.a.lines_out' must be an integer, got str '9'"),
            (artifacts.VocabMetrics, {"en": side}, "missing key 'fr'"),
            (artifacts.VocabMetrics, {"en": side, "fr": {**side, "unk_rate": {"test": "x"}}},
             "'fr.unk_rate.test' must be a number"),
            (artifacts.ParamsCheck, {"valid": False, "name_pattern": "x"},
             "'valid' must be one of [true], got bool False"),
            (artifacts.Summary, {"bleu": {"forward": {"b12": None}}, "rescore": {}, "ppl": {},
                                 "minutes": {}},
             "'bleu.forward.b12' must be a number, got NoneType None")):
        path = tmp_path / "m.json"
        path.write_text(json.dumps(obj))
        with pytest.raises(ArtifactError, match=re.escape(f"{path}: {message}")):
            record.read(path)


def test_the_analysis_and_attention_files_have_records(tmp_path):
    # analysis.json and weights.json are written through their records and read through them:
    # the published run's files round-trip byte for byte, and a damaged one is refused naming
    # the key (the report read them as loose dicts and printed "?" for a missing key).
    published = ROOT / "reports" / "default" / "analysis"
    for record, file in ((artifacts.AnalysisMeta, "analysis.json"),
                         (artifacts.AttentionWeights, "attention_weights.json")):
        text = (published / file).read_text(encoding="utf-8")
        got = record.read(published / file)
        assert json.dumps(got.to_json(), indent=2, ensure_ascii=False) + "\n" == text
    meta = json.loads((published / "analysis.json").read_text())
    weights = json.loads((published / "attention_weights.json").read_text())
    cut = json.loads(json.dumps(weights))
    cut["examples"][1]["weights"][2] = cut["examples"][1]["weights"][2][:-1]  # a row cut short
    n = len(weights["examples"][1]["target"])
    m = len(weights["examples"][1]["source"])
    line = weights["examples"][1]["index"] + 1
    cases = (
        (artifacts.AnalysisMeta, _bad(meta, test__reach_sentences=...),
         "missing key 'test.reach_sentences'"),
        (artifacts.AnalysisMeta, _bad(meta, memory__examples=[{"sentence": "a b", "old": "a",
                                                               "new": "c", "position": "1"}]),
         "'memory.examples[0].position' must be an integer, got str '1'"),
        (artifacts.AnalysisMeta, _bad(meta, figure2__representation="last"),
         "'figure2.representation' must be one of ['top', 'all', 'state'], got str 'last'"),
        (artifacts.AttentionWeights, _bad(weights, beam="12"), "'beam' must be an integer"),
        (artifacts.AttentionWeights, cut,
         f"'examples[1]': test line {line}: {n} rows of weights for {n} target words, of "
         f"[{m - 1}, {m}] columns for {m} source words"),
    )
    for record, obj, message in cases:
        path = tmp_path / "m.json"
        path.write_text(json.dumps(obj))
        with pytest.raises(ArtifactError, match=re.escape(f"{path}: {message}")):
            record.read(path)
