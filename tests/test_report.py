"""The report stage on a small, fake but consistent artifact tree.

The tree is generated from the parameter file (the repo's ``profiles/smoke.yaml`` when it exists,
else ``tests/fixtures/report/params.yaml``), so every system, beam, model and rescorer it names gets
metrics with distinct numbers; one translation is marked absent to check "not run" rows.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import shutil
import subprocess
import sys
from html import escape as html_escape
from html import unescape as html_unescape
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import chromium
from s2s.artifacts import Bleu, Scored, Timing, TrainMetrics
from s2s.claims import paper_claims as claims_
from s2s.claims import verdicts
from s2s.claims.seeds import NO_BASELINE_INTERVAL, NO_BEAM_INTERVAL, NO_RESCORER_INTERVAL
from s2s.config import load
from s2s import paper
from s2s.report import render as render_
from s2s.report.sections import bleu as bleu_tables
from s2s.report.sections import summary
from s2s.layout import ClaimsPaths, ReportPaths
from s2s.stages.claims import main as claims_main
from s2s.report.inputs import load as inputs_load
from s2s.stages.report import main as report_main

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "fixtures" / "report" / "params.yaml"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SIG = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"


def _params_file(tmp: Path) -> Path:
    smoke = ROOT / "profiles" / "smoke.yaml"
    dst = tmp / "params.yaml"
    if smoke.is_file():
        from helpers import profile_text

        dst.write_text(profile_text("smoke"), encoding="utf-8")
    else:
        shutil.copy(FIXTURE, dst)
    return dst


def _dump(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=1), encoding="utf-8")


def _absent_target(params):
    """The first Table 1 translation of this profile: we mark it absent."""
    for row in bleu_tables.rows(params, "table1"):
        o = row.ours
        if (o and o.kind == "translate" and o.system in params.systems
                and o.beam in params.systems[o.system].beams):
            return o.system, o.beam
    return None


def build_tree(tmp: Path) -> dict:
    params = load(_params_file(tmp))
    metrics, translate = tmp / "metrics", tmp / "outputs" / "translate"
    absent = _absent_target(params)
    n = 300
    k = 0
    bleu = {"test_sentences": n, "bleu_tok_method": "multi-bleu.pl style",
            "bleu_tok_signature": "nrefs:1|case:mixed|eff:no|tok:none|smooth:exp|version:2.6.0",
            "translate": {}, "rescore": {}}
    for system, scfg in params.systems.items():
        bleu["translate"][system] = {}
        beams = {}
        for j, beam in enumerate(scfg.beams):
            k += 1
            if (system, beam) == absent:
                entry = {"absent": True,
                         "reason": f"missing outputs/translate/{system}/beam{beam}.tok.fr"}
            else:
                entry = {"bleu_tok": round(10 + 1.37 * k, 4), "bleu_sacre": round(9 + 1.37 * k, 4),
                         "sacre_signature": SIG, "sentences": n}
            bleu["translate"][system][str(beam)] = entry
            secs = 2.0 * len(scfg.members) * beam ** 0.5
            beams[str(beam)] = {"sentences": n, "seconds": secs, "sents_per_sec": n / secs}
        _dump(translate / system / "timing.json",
              {"system": system, "members": list(scfg.members), "device": "cpu", "threads": 2,
               "precision": "fp32", "beams": beams})
    for name in [*params.rescore.rescorers, "baseline", "oracle"]:
        k += 1
        bleu["rescore"][name] = {"bleu_tok": round(20 + 1.11 * k, 4),
                                 "bleu_sacre": round(19 + 1.11 * k, 4),
                                 "sacre_signature": SIG, "sentences": n}
    _dump(metrics / "bleu.json", bleu)

    for i, (model, over) in enumerate(params.models.items()):
        cfg = params.model_config(model)
        _dump(metrics / "train" / f"{model}.json", {
            "model": model, "reverse_source": cfg.reverse_source, **cfg.shape(),
            "parameters": 123456, "device": "cpu",
            "precision": "fp32", "threads": 2, "epochs": 2.0, "steps": 40, "train_pairs": 1987,
            "train_target_words": 50000, "tgt_words_per_sec": 900.0, "train_seconds": 50.0,
            "wall_seconds": 55.0, "dev_ppl": 40.5 - 3.25 * i, "test_ppl": 42.75 - 3.25 * i,
            "best_dev_ppl": 40.5 - 3.25 * i})
        rows = ["step,epoch,lr,train_ppl,dev_ppl"]
        for s in range(1, 21):
            dev = f"{400 / s + 30 - i:.3f}" if s % 5 == 0 else ""
            rows.append(f"{s * 2},{s / 10:.2f},0.7,{500 / s + 20 - i:.3f},{dev}")
        (metrics / "curves").mkdir(parents=True, exist_ok=True)
        (metrics / "curves" / f"{model}.csv").write_text("\n".join(rows) + "\n")

    _dump(metrics / "prepare.json", {"splits": {"test": {"wmt14.newstest2014": {
        "lines_in": n, "lines_out": n, "empty_en": 0, "empty_fr": 0,
        "cleaned": {"bom_files": 0, "crlf_lines": 0, "control_char_lines": 0}}}},
        "totals": {"test": {"lines_out": n}}})
    _dump(metrics / "vocab.json", {
        lang: {"size": words + 4, "words": words, "train_types": 9000,
               "unk_rate": {"train": 0.01, "dev": 0.03, "test": 0.031}}
        for lang, words in (("en", 4321), ("fr", 3210))})
    manifest = tmp / "data" / "raw" / "manifest.json"
    url = "https://www.statmt.org/wmt14/test-full.tgz"
    _dump(manifest, {"mode": "network", "mirror": None, "corpora": {"wmt14.newstest2014": {
        "mode": "network", "source": [url], "format": "sgm", "pairs": 3003,
        "whole_corpus": True, "max_lines": 300,
        "downloads": {url: {"url": url, "sha256": "cd" * 32, "bytes": 5000, "verified": "md5"}},
        "files": {side: {"path": f"wmt14.newstest2014/{side}.sgm", "sha256": "ab" * 32,
                         "bytes": 1000, "lines": 3003,
                         "source": f"{url}#test-full/newstest2014-fren-src.{side}.sgm"}
                  for side in ("en", "fr")},
        "lines": {"en": 3003, "fr": 3003}}}})

    rows = []
    fig_sys, fig_beam = params.report.figure3_system, params.report.figure3_beam
    for system, beam, off in [(fig_sys, str(fig_beam), 0.0), ("rescore/baseline", "", -2.0)]:
        for axis, los in (("length", [1, 9, 18, 29]), ("rarity", [100, 800, 1600, 3000])):
            for g, lo in enumerate(los):
                hi = lo + 7
                rows.append({"system": system, "beam": beam, "axis": axis,
                             "label": f"{lo}-{hi}", "lo": lo, "hi": hi, "sentences": 75,
                             "mean": lo + 3.5, "bleu": 30 - 2 * g + off})
    groups = tmp / "outputs" / "evaluate" / "figure3.csv"
    groups.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(groups, index=False)
    attention = tmp / "outputs" / "attention" / "weights.json"
    att_system = params.analysis.attention_system
    _dump(attention, {"system": att_system, "model": params.systems[att_system].members[0],
                      "beam": 12,
                      "source_words": [8, 14], "examples": [
                          {"index": 4, "source": ["a", "dog", "runs", "."],
                           "target": ["un", "chien", "court", ".", "<eos>"],
                           "weights": [[0.7, 0.1, 0.1, 0.1], [0.1, 0.8, 0.05, 0.05],
                                       [0.0, 0.1, 0.9, 0.0], [0.0, 0.0, 0.1, 0.9],
                                       [0.25, 0.25, 0.25, 0.25]]}]})
    return {"params": params, "bleu": bleu, "absent": absent, "metrics": metrics,
            "translate": translate, "groups": groups, "manifest": manifest,
            "attention": attention, "out": tmp / "reports"}


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> dict:
    tree = build_tree(tmp_path_factory.mktemp("report"))
    tree["written"] = render(tree)
    return tree


def render(tree: dict) -> dict:
    """The claims stage, then the report on its claims: the report's inputs as the DAG gives
    them (no hypothesis files here: the claims carry no bootstrap intervals)."""
    claims = tree["out"].parent / "claims.json"
    claims_main(tree["params"], ClaimsPaths(metrics=tree["metrics"], translate=tree["translate"],
                                            out=claims))
    return report_main(tree["params"], report_paths(tree, claims=claims, out=tree["out"]))


def report_paths(tree: dict, *, claims: Path, out: Path, **more) -> ReportPaths:
    """The report stage's paths in the tree, its claims and output folder as given."""
    return ReportPaths(**{"metrics": tree["metrics"], "translate": tree["translate"],
                          "groups": tree["groups"], "manifest": tree["manifest"],
                          "attention": tree["attention"], "claims": claims, "out": out, **more})


def test_outputs_exist(report):
    out = report["out"]
    for rel in ["report.md", "report.html", "tables/table1.csv", "tables/table1.md",
                "tables/table2.csv", "tables/table2.md", "tables/perplexity.csv",
                "tables/cost.md", "figures/figure3.png", "figures/learning_curves.png",
                "figures/attention.png"]:
        assert (out / rel).is_file(), rel


def _check_bleu_table(report, name: str, paper_rows) -> pd.DataFrame:
    out, params, bleu = report["out"], report["params"], Bleu.from_json(report["bleu"])
    df = pd.read_csv(out / "tables" / f"{name}.csv", dtype=str, keep_default_na=False)
    md = (out / "tables" / f"{name}.md").read_text()
    # the paper's rows, in the paper's order, none dropped
    assert df["method"].tolist() == [r.method for r in paper_rows]
    assert df["paper_printed"].astype(str).tolist() == [r.paper_text for r in paper_rows]
    # (a row not in the paper, the Transformer's, has no number: NaN, an empty cell)
    got = [float(v) if v != "" else math.nan for v in df["paper_bleu"]]
    assert [v if v == v else "none" for v in got] == [
        r.paper_bleu if r.paper_bleu == r.paper_bleu else "none" for r in paper_rows]
    for row, rec in zip(paper_rows, df.to_dict("records")):
        assert row.paper_text in md
        if row.ours is None:
            assert rec["status"].startswith("not run: ") and rec["ours_bleu_tok"] == ""
            continue
        ours = row.ours if row.ours.kind != "baseline" else paper.baseline_ref(params)
        entry = bleu.entry(ours.kind, ours.system, ours.beam)
        if isinstance(entry, Scored):
            assert rec["status"] == "ours"
            assert float(rec["ours_bleu_tok"]) == entry.bleu_tok
            assert float(rec["ours_bleu_sacre"]) == entry.bleu_sacre
            assert f"{entry.bleu_tok:.2f}" in md and f"{entry.bleu_sacre:.2f}" in md
        else:
            assert rec["status"].startswith("not run: "), rec
    assert "not run" in md and "paper's method" in md and SIG in md
    return df


def test_table1_has_paper_and_our_numbers_and_not_run_rows(report):
    df = _check_bleu_table(report, "table1", bleu_tables.rows(report["params"], "table1"))
    # Bahdanau et al.: our attention model (the tree marks its output absent, see below)
    assert df.loc[0, "ours_system"].startswith("attention, beam 12")
    assert report["absent"] == ("attention", 12)
    assert ("Bahdanau et al.'s attention: bidirectional GRU (PyTorch's form: reset gate after the "
            "recurrent product) encoder, additive score") in df.loc[0, "conditions"]
    assert "not phrase-based SMT" in df.loc[1, "ours_system"]  # our baseline is an LSTM
    assert "vocab 4,321/3,210 words" in df.loc[1, "conditions"]
    if report["absent"]:
        system, beam = report["absent"]
        hit = df[df["ours_system"].str.startswith(f"{system}, beam {beam}")]
        assert len(hit) and hit["status"].str.contains(f"beam{beam}.tok.fr").all()
    params = report["params"]
    for row, rec in zip(bleu_tables.rows(params, "table1"), df.to_dict("records")):
        o = row.ours
        if o and o.kind == "translate" and o.system not in params.systems:
            assert rec["status"] == f"not run: no system '{o.system}' in profile '{params.profile}'"


def test_table2_has_paper_and_our_numbers(report):
    df = _check_bleu_table(report, "table2", bleu_tables.rows(report["params"], "table2"))
    assert df.loc[1, "status"] == "ours"  # Cho et al.: our GRU encoder-decoder rescores
    assert df.loc[1, "ours_system"] == "rescore/gru (gru)"
    assert "Cho et al.'s encoder-decoder" in df.loc[1, "conditions"]
    assert df.loc[2, "status"].startswith("not run")  # best WMT'14
    assert df.loc[6, "paper_printed"] == "~45"


def test_systems_without_a_paper_row_get_a_table_of_their_own(report):
    df = pd.read_csv(report["out"] / "tables" / "table1_other.csv", dtype=str,
                     keep_default_na=False)
    gru = report["bleu"]["translate"]["gru"]["12"]
    # the rest answer Table 1 rows (the Transformer at beam 12 its modern-reference row)
    # (the baseline at beam 12: its lists come from its widest beam, which answers Table 1's row)
    seeds = [f"ours only: {s}, beam 12" for s in ("forward_2", "forward_3", "reversed_2",
                                                   "reversed_3", "reversed_4", "reversed_5",
                                                   "reversed_fb1_2", "reversed_fb1_3")]
    assert df["method"].tolist() == ["ours only: reversed_fb1, beam 12", *seeds[:2], *seeds[2:6],
                                     *seeds[6:], "ours only: baseline, beam 12",
                                     "ours only: gru, beam 12", "ours only: transformer, beam 1",
                                     "ours only: transformer, beam 2"]
    df = df[df["method"] == "ours only: gru, beam 12"].reset_index(drop=True)
    assert float(df.loc[0, "ours_bleu_tok"]) == gru["bleu_tok"]
    assert df.loc[0, "paper_printed"] == "no paper row" and df.loc[0, "paper_bleu"] == ""
    assert "ours only: gru, beam 12" in (report["out"] / "report.md").read_text()


def test_models_table_lists_every_model_with_its_metrics(report):
    df = pd.read_csv(report["out"] / "tables" / "models.csv")
    params = report["params"]
    assert df["model"].tolist() == list(params.models)
    for rec in df.to_dict("records"):
        m = json.loads((report["metrics"] / "train" / f"{rec['model']}.json").read_text())
        assert rec["test ppl"] == m["test_ppl"] and rec["dev ppl"] == m["dev_ppl"]
        assert rec["train minutes"] == pytest.approx(m["train_seconds"] / 60)  # not the wall
    att = df.set_index("model").loc["attention"]
    assert att["architecture"].startswith("Bahdanau et al.'s attention")
    assert att["layers x cells"] == f"1 x {params.model['hidden_size']}"
    assert df.set_index("model").loc["reversed_1", "source"] == "reversed"


def test_count_columns_stay_whole_where_a_row_has_no_value():
    """A model without metrics, a system without timing: their counts are '-', and every other
    row's still print as whole numbers ('12,098,279', '1,000', '1'), not as floats ('.00')."""
    from s2s.report.sections import cost, models

    params = load(FIXTURE)
    first = next(iter(params.models))
    df = models.models_table(params, _train({first: {"dev_ppl": 9.0, "parameters": 12098279}}))
    shown = render_.fmt_frame(df, {"epochs": 2, "target words/s": 0, "train minutes": 1})
    assert shown["parameters"].tolist() == ["12,098,279"] + ["-"] * (len(params.models) - 1)
    system = next(iter(params.systems))
    timing = {system: Timing.from_json({
        "system": system, "members": list(params.systems[system].members), "device": "cpu",
        "threads": 1, "precision": "fp32",
        "beams": {str(b): {"sentences": 1000, "seconds": 12.5, "sents_per_sec": 80.0}
                  for b in params.systems[system].beams}})}
    df = cost.cost_table(params, timing)
    shown = render_.fmt_frame(df, {"seconds": 1, "sents_per_sec": 2, "ms_per_sentence": 1})
    row = shown.iloc[0]
    assert (row["models"], row["beam"], row["sentences"], row["seconds"], row["threads"]) == (
        str(len(params.systems[system].members)), str(params.systems[system].beams[0]), "1,000",
        "12.5", "1")
    other = shown[shown["system"] != system].iloc[0]
    assert (other["sentences"], other["seconds"], other["threads"]) == ("-", "-", "-")
    assert df["sentences"].dtype == "Int64"  # the CSV's numbers: 1000, not 1000.0
    assert df.to_csv(index=False).splitlines()[1].split(",")[3] == "1000"


def test_a_cost_claim_not_run_gets_its_own_sentence_and_a_verdict_in_our_numbers(tmp_path):
    """'in our numbers' follows a verdict of our numbers only: a claim not run says so."""
    import types

    from s2s.artifacts import Claim
    from s2s.report.sections import Context, cost

    params = load(FIXTURE)

    def note(status: str) -> str:
        claim = Claim("cost", "Cheaper", "paper: x", status, "", (), "why")
        art = types.SimpleNamespace(timing={}, claims=types.SimpleNamespace(claims=(claim,)))
        [sec] = cost.sections(Context(params, art, tmp_path))
        return sec.blocks[0].notes[1]

    assert note(verdicts.NOT_RUN) == (
        "Cheaper (paper: x): not checked, this profile does not run what it rests on (why).")
    assert note(verdicts.HOLDS) == "Cheaper (paper: x): holds in our numbers (why)."
    assert note(verdicts.UNKNOWN) == "Cheaper (paper: x): cannot tell (why)."


def test_the_learning_curves_caption_names_the_ensemble_panel_only_where_there_is_one(tmp_path):
    import types

    from s2s.report.sections import Context, learning_curves

    curves = {p.stem: pd.read_csv(p)
              for p in (ROOT / "reports" / "default" / "metrics" / "curves").glob("*.csv")}

    def caption(profile: str) -> str:
        ctx = Context(load(ROOT / "profiles" / f"{profile}.yaml"),
                      types.SimpleNamespace(curves=curves), tmp_path)
        [sec] = learning_curves.sections(ctx)
        return sec.blocks[0].caption

    assert caption("quick") == ("Dev perplexity per epoch (solid) and train perplexity (dashed), "
                                "one panel per model on a shared scale.")
    assert caption("default") == (
        "Dev perplexity per epoch (solid) and train perplexity (dashed), one panel per model on a "
        "shared scale; the members of the largest ensemble share one panel, as a band from the "
        "lowest to the highest member around their median.")


def test_perplexity_cost_and_claims_are_computed(report):
    out, params = report["out"], report["params"]
    ppl = pd.read_csv(out / "tables" / "perplexity.csv")
    assert ppl["paper's test ppl"].tolist() == [5.8, 4.7]
    fwd, rev = paper.perplexity_models(params).values()
    train = {p.stem: json.loads(p.read_text()) for p in (report["metrics"] / "train").glob("*")}
    if fwd in train and rev in train:
        assert ppl["dev ppl"].tolist() == [train[fwd]["dev_ppl"], train[rev]["dev_ppl"]]
    md = (out / "report.md").read_text()
    table = (out / "tables" / "perplexity.md").read_text()
    assert "paper's test ppl" in table and "| 5.8 |" in table and "| 4.7 |" in table  # as printed
    cost = pd.read_csv(out / "tables" / "cost.csv")
    assert len(cost) == sum(len(s.beams) for s in params.systems.values())
    assert "5 models at beam 2 cost less than 1 model at beam 12" in (
        out / "tables" / "cost.md").read_text()
    claims = pd.read_csv(out / "tables" / "claims.csv")
    assert len(claims) == 6
    assert set(claims["here"]) <= {"holds at this scale", "does not hold at this scale",
                                   "no significant difference", "cannot tell"}
    # one timing per system (no timing stage here): the cost claim gives the numbers, no verdict
    cost_claim = claims[claims["claim"].str.startswith("5 models at beam 2")].iloc[0]
    assert cost_claim["here"] == "cannot tell"
    assert "one timing each" in cost_claim["numbers"]
    assert "The paper's claims, checked" in md


def test_provenance(report):
    md = (report["out"] / "report.md").read_text()
    params_sha = hashlib.sha256(Path(report["params"].source).read_bytes())
    assert f"profile: {report['params'].profile}" in md
    assert params_sha.hexdigest() in md
    assert "git revision: unknown" in md  # tmp_path is not a git repository
    assert re.search(r"- code: s2s-repro \S+, (git revision [0-9a-f]{40}|not in a git checkout)",
                     md)  # so the code that rendered it is named on a line of its own
    assert "sacrebleu 2." in md and "torch " in md
    assert ("wmt14.newstest2014: 2 file(s) with sha256, en: 3,003, fr: 3,003 lines, from "
            "https://www.statmt.org/wmt14/test-full.tgz") in md
    assert "| en | " in md and "3.10%" in md  # the vocabulary table: UNK rate of test


def test_counts_of_one_are_singular():
    """One model, one thread, one word: no '1 model(s)', '1 threads', '1 words'."""
    from s2s.report import provenance
    from s2s.report.sections import prose

    params = load(ROOT / "profiles" / "default.yaml")  # transformer: one model, no layers x cells
    got = bleu_tables._model_conditions(params, ("transformer",), {})
    assert got.startswith("train pairs unknown; 1 model: Transformer, ")
    timing = {s: Timing.from_json({"system": s, "members": [s], "device": "cpu", "threads": n,
                                   "precision": "fp32", "beams": {}})
              for s, n in (("forward", 1), ("reversed", 2))}
    lines = provenance.provenance(params, train={}, timing=timing, manifest=None)
    assert "training device(s): unknown; decoding: cpu (1 thread), cpu (2 threads)" in lines
    P = prose("examples")
    assert P.example_title(7, 1) == "Test sentence 7 (1 word)"
    assert P.example_title(7, 2) == "Test sentence 7 (2 words)"


def _examples(tmp_path: Path, en: list[str], fr: list[str]):
    """load_examples on a prepared folder holding `en` and `fr` as test.raw.{en,fr} (no system's
    output: each is left out, said)."""
    from s2s.report.inputs import load_examples

    prepared = tmp_path / "prepared"
    prepared.mkdir(parents=True)
    for lang, lines in (("en", en), ("fr", fr)):
        (prepared / f"test.raw.{lang}").write_text("".join(f"{s}\n" for s in lines),
                                                   encoding="utf-8")
    paths = ReportPaths(metrics=tmp_path / "metrics", translate=tmp_path / "translate",
                        groups=tmp_path / "figure3.csv", manifest=tmp_path / "manifest.json",
                        prepared=prepared, claims=tmp_path / "claims.json", out=tmp_path / "out")
    return load_examples(load(_params_file(tmp_path)), paths, []), prepared


def test_the_example_sentences_are_picked_and_counted_in_figure_3s_words(tmp_path):
    """An example's words are the tokenised source's (test.tok.en's, as the prepare stage writes
    it), the count Figure 3 and the length drop group sentences by, and the examples are picked
    by it: "A dog drinks water outside on the grass." is 9 words there ("grass ."), not the raw
    text's 8, and the title said 8 where Figure 3 put the sentence in its 9-12 group."""
    from s2s.data.text import tokenize_many
    from s2s.evaluate.buckets import source_lengths

    en = ["Two dogs run.",                       # raw 3 words, tokenised 4
          "A man, a woman, a child.",            # raw 6, tokenised 9
          "one two three four five six seven",   # 7 and 7
          "Hi!"]                                 # 1 and 2
    examples, _ = _examples(tmp_path, en, [f"fr {i}" for i in range(len(en))])
    # 4 sentences: the quantiles pick each, shortest first by the tokenised count
    assert [(ex["line"], ex["words"]) for ex in examples] == [(4, 2), (1, 4), (3, 7), (2, 9)]
    figure3 = source_lengths(tokenize_many(en, "en"))  # the evaluate stage's over test.tok.en
    assert all(ex["words"] == figure3[ex["line"] - 1] for ex in examples)
    one, _ = _examples(tmp_path / "one", ["A dog drinks water outside on the grass."], ["x"])
    assert [(ex["line"], ex["words"]) for ex in one] == [(1, 9)]


def test_references_of_another_length_than_the_source_are_refused_naming_both(tmp_path):
    """test.raw.fr shorter (or longer) than test.raw.en: refused naming both files and their
    lines, as a system's output of the wrong length is said (it had failed on a bare IndexError
    naming no file, or shown references beside the wrong sentences)."""
    from s2s.artifacts import ArtifactError

    en = ["A dog runs.", "A cat sleeps.", "Two men talk."]
    for n, where in ((2, "short"), (4, "long")):
        fr = [f"fr {i}" for i in range(n)]
        with pytest.raises(ArtifactError) as err:
            _examples(tmp_path / where, en, fr)
        prepared = tmp_path / where / "prepared"
        assert str(err.value).startswith(f"{prepared / 'test.raw.fr'} has {n} lines, "
                                         f"{prepared / 'test.raw.en'} 3: ")


def test_the_revision_names_the_code_and_marks_uncommitted_changes_to_it(tmp_path):
    from s2s.report.provenance import revision_lines

    def git(where, *args):
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
                              cwd=where, check=True, capture_output=True, text=True).stdout.strip()

    project = tmp_path / "project"
    (project / "src" / "s2s").mkdir(parents=True)
    code = project / "src" / "s2s"
    (code / "a.py").write_text("x = 1\n")
    (project / "params.yaml").write_text("profile: t\n")
    git(project, "init", "-q")
    git(project, "add", ".")
    git(project, "commit", "-qm", "one")
    head = git(project, "rev-parse", "HEAD")
    assert revision_lines(project, code) == [f"git revision: {head}"]
    (code / "scratch.py").write_text("")  # untracked: not part of the code
    (project / "params.yaml").write_text("profile: u\n")  # the project's, not the code's
    assert revision_lines(project, code) == [f"git revision: {head}"]
    (code / "a.py").write_text("x = 2\n")
    assert revision_lines(project, code) == [
        f"git revision: {head}, with uncommitted changes to the code"]
    # the code from elsewhere (an installed package, another clone): named on its own line
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    lines = revision_lines(project, elsewhere)
    assert lines[0] == f"git revision: {head}"
    assert re.fullmatch(r"code: s2s-repro \S+, not in a git checkout", lines[1])
    assert revision_lines(elsewhere, code)[1].endswith(
        f"git revision {head}, with uncommitted changes to the code")


def test_summary_json_holds_tokenised_bleu_and_test_perplexity_as_measured():
    """metrics/summary.json: each system's and rescorer's tokenised BLEU (the paper's, not
    sacreBLEU's) and each model's test perplexity (Table 1's, not the dev set's), rounded to 2
    decimals; absent outputs and models without metrics left out."""
    from s2s.evaluate.summary import summarize

    params = load(FIXTURE)
    bleu = _bleu({"translate": {"forward": {"1": _entry(10.004), "12": _entry(11.456)},
                                "reversed": {"1": _entry(12.0), "12": _entry(13.5)},
                                "ensemble2": {"12": {"absent": True, "reason": "missing"}}},
                  "rescore": {"baseline": _entry(13.0), "forward": _entry(13.216),
                              "reversed": {"absent": True, "reason": "missing"}}})
    train = _train({"forward": {"dev_ppl": 9.0, "test_ppl": 9.504, "train_seconds": 90.0},
                    "reversed_1": {"dev_ppl": 7.0, "test_ppl": 7.256, "train_seconds": 30.0}})
    assert summarize(params, bleu, train, {}) == {
        "bleu": {"forward": {"b1": 10.0, "b12": 11.46}, "reversed": {"b1": 12.0, "b12": 13.5}},
        "rescore": {"baseline": 13.0, "forward": 13.22},
        "ppl": {"forward": 9.5, "reversed_1": 7.26},
        "minutes": {"train": 2.0}}


def test_a_metrics_file_of_a_model_the_profile_no_longer_names_is_read_by_no_stage(tmp_path):
    """An older run's metrics/train/<model>.json of a model since taken out of params, and a
    model of params whose file is missing: the summary, claims and report stages read the same
    measurements (the profile's models that have one), and nothing of the stale file shows."""
    from s2s.layout import SummaryPaths
    from s2s.stages.summary import main as summary_main

    tree = build_tree(tmp_path)
    params, train = tree["params"], tree["metrics"] / "train"
    first = next(iter(params.models))
    stale = json.loads((train / f"{first}.json").read_text())
    _dump(train / "dropped.json", {**stale, "model": "dropped", "device": "stale-device",
                                   "wall_seconds": 6000.0, "train_seconds": 6000.0})
    (train / f"{first}.json").unlink()
    curves = tree["metrics"] / "curves"
    (curves / "dropped.csv").write_text((curves / f"{first}.csv").read_text())
    summary = summary_main(params, SummaryPaths(
        metrics=tree["metrics"], translate=tree["translate"], groups=tree["groups"],
        out=tmp_path / "summary.json", plots=tmp_path / "plots"))
    # every model's train_seconds is 50 s in the tree (its wall_seconds 55 s)
    assert summary["minutes"]["train"] == round(50.0 * (len(params.models) - 1) / 60, 2)
    assert set(summary["ppl"]) == set(params.models) - {first}
    render(tree)
    md = (tree["out"] / "report.md").read_text()
    assert "training device(s): cpu;" in md and "stale-device" not in md
    assert "dropped" not in md
    perplexity = pd.read_csv(tree["out"] / "tables" / "perplexity.csv")
    assert f"no metrics/train/{first}.json" in " ".join(perplexity["status"].astype(str))
    art = inputs_load(params, report_paths(tree, claims=tree["out"].parent / "claims.json",
                                           out=tree["out"]))
    assert set(art.curves) == set(params.models) and set(art.train) == set(params.models) - {first}
    assert not [f for f in art.read if "dropped" in f]


def test_a_training_metrics_file_of_another_model_than_its_name_is_refused(tmp_path):
    from s2s.artifacts import ArtifactError

    tree = build_tree(tmp_path)
    params, train = tree["params"], tree["metrics"] / "train"
    first, second = list(params.models)[:2]
    (train / f"{first}.json").write_text((train / f"{second}.json").read_text())
    with pytest.raises(ArtifactError, match=rf"train/{first}\.json: 'model' is '{second}', not"):
        render(tree)


def test_a_timing_of_another_system_than_its_folder_is_refused(tmp_path):
    """A system's timing.json copied from another system's folder: the summary (and so the
    claims and report, which read through the same function) names the file, not its cost."""
    from s2s.artifacts import ArtifactError
    from s2s.layout import SummaryPaths
    from s2s.stages.summary import main as summary_main

    tree = build_tree(tmp_path)
    params, translate = tree["params"], tree["translate"]
    first, second = [s for s in params.systems if (translate / s / "timing.json").is_file()][:2]
    (translate / first / "timing.json").write_text((translate / second / "timing.json").read_text())
    with pytest.raises(ArtifactError, match=rf"{first}/timing\.json: 'system' is '{second}', not"):
        summary_main(params, SummaryPaths(
            metrics=tree["metrics"], translate=translate, groups=tree["groups"],
            out=tmp_path / "summary.json", plots=tmp_path / "plots"))
    assert not (tmp_path / "summary.json").exists()
    with pytest.raises(ArtifactError, match=rf"{first}/timing\.json: 'system' is '{second}'"):
        render(tree)


def test_the_summary_reads_figure3s_groups_checked_before_it_writes_anything(tmp_path):
    """Figure 3's groups cut mid-row, or with a value that is not a number: an error naming the
    file (and the line), and no summary.json beside a plot that was never drawn."""
    from s2s.artifacts import ArtifactError
    from s2s.layout import SummaryPaths
    from s2s.stages.summary import main as summary_main

    tree = build_tree(tmp_path)
    paths = SummaryPaths(metrics=tree["metrics"], translate=tree["translate"],
                         groups=tree["groups"], out=tmp_path / "summary.json",
                         plots=tmp_path / "plots")
    text = tree["groups"].read_text()
    tree["groups"].write_text(text[:-9])
    with pytest.raises(ArtifactError, match="figure3.csv: cut short"):
        summary_main(tree["params"], paths)
    lines = text.splitlines(keepends=True)
    fields = lines[2].split(",")
    fields[-1] = "high\n"
    tree["groups"].write_text("".join([*lines[:2], ",".join(fields), *lines[3:]]))
    with pytest.raises(ArtifactError, match="figure3.csv:3: column 'bleu' must be a number"):
        summary_main(tree["params"], paths)
    assert not paths.out.exists() and not paths.plots.exists()
    tree["groups"].write_text(text)
    summary_main(tree["params"], paths)
    assert paths.out.is_file() and paths.figure3_plot("length").is_file()


def _png(path: Path) -> np.ndarray:
    import matplotlib.image

    assert path.read_bytes()[:8] == PNG_MAGIC
    return matplotlib.image.imread(path)


def test_figures_are_nonblank_pngs(report):
    for name in ("figure3.png", "learning_curves.png", "attention.png"):
        img = _png(report["out"] / "figures" / name)
        assert img.shape[0] > 200 and img.shape[1] > 400
        assert (img[..., :3] < 0.9).mean() > 0.01  # something was drawn


# --- the HTML, rendered by a real browser --------------------------------------------------------


class _Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.captions: list[str] = []
        self._in_caption = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_caption = tag == "caption"

    def handle_endtag(self, tag):
        if tag == "caption":
            self._in_caption = False

    def handle_data(self, data):
        if self._in_caption:
            self.captions.append(data)


def _no_remote_resources(html_text: str) -> _Collect:
    p = _Collect()
    p.feed(html_text)
    for tag, attrs in p.tags:
        assert tag not in ("script", "link", "iframe", "object"), tag
        for attr in ("src", "href", "srcset", "data", "poster"):
            v = (attrs.get(attr) or "").strip().lower()
            assert not v.startswith(("http:", "https:", "//")), (tag, attr, v[:80])
    lowered = html_text.lower()
    assert "@import" not in lowered and "url(" not in lowered
    return p


def test_the_written_tables_are_the_documents_keyed_tables_shown_or_not():
    """tables/ gets every table with a key, in the document's order, those a section writes
    without showing (an empty table1_other) included; its CSV holds the raw numbers."""
    shown = pd.DataFrame({"bleu": ["30.12"]})
    raw = pd.DataFrame({"bleu": [30.1234]})
    doc = render_.Document("t", [
        render_.Section("A", ["words", render_.Table("a", shown, (), "first", numbers=raw),
                                  render_.Table("not written", shown)],
                        unshown=[render_.Table("written only", shown.iloc[:0], (), "empty")]),
        render_.Section("B", [render_.Table("c", shown, (), "second")])])
    tables = doc.tables()
    assert list(tables) == ["first", "empty", "second"]
    assert tables["first"].csv_frame is raw and tables["second"].csv_frame is shown
    html = render_.to_html(doc)
    assert 'id="table-first"' in html and 'id="table-second"' in html
    assert 'id="table-empty"' not in html and "written only" not in html
    assert "**a**" in render_.to_markdown(doc) and "written only" not in render_.to_markdown(doc)


def test_html_is_self_contained(report):
    html_text = (report["out"] / "report.html").read_text()
    p = _no_remote_resources(html_text)
    imgs = [a for t, a in p.tags if t == "img"]
    figures = list((report["out"] / "figures").glob("*.png"))  # every figure, embedded
    assert len(imgs) == len(figures) >= 3
    assert all(a["src"].startswith("data:image/png;base64,") for a in imgs)


@pytest.mark.service("chromium")
def test_html_renders_in_headlesschromium(report, tmp_path):
    url = (report["out"] / "report.html").resolve().as_uri()
    res = chromium(tmp_path, "--dump-dom", url)
    assert res.returncode == 0, res.stderr[-2000:]
    p = _no_remote_resources(res.stdout)
    captions = " ".join(p.captions)
    assert "Table 1" in captions and "Table 2" in captions
    tables_ = [a for t, a in p.tags if t == "table"]
    assert {"table-table1", "table-table2"} <= {a.get("id") for a in tables_}
    imgs = [a for t, a in p.tags if t == "img"]
    figures = list((report["out"] / "figures").glob("*.png"))  # every figure, embedded
    assert len(imgs) == len(figures) >= 3
    assert all(a["src"].startswith("data:image/png;base64,") for a in imgs)
    assert "not run" in res.stdout

    shot = tmp_path / "shot.png"
    res = chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,2400",
                    "--hide-scrollbars", url)
    assert res.returncode == 0 and shot.is_file(), res.stderr[-2000:]
    img = _png(shot)[..., :3]
    assert img.std() > 0.05 and (img < 0.9).mean() > 0.01  # text, tables and figures drawn


# --- the summary: the first screen answers at a glance ------------------------------------------


def test_the_summary_is_one_table_of_the_claims_stage_numbers(report):
    """Every claim of claims.json is a row: its statement, the paper's numbers, ours, each
    difference with its interval, the verdict and a link to a section of the report; the
    numbers are the record's, not recomputed (tables/summary.csv holds them)."""
    found = json.loads((report["out"].parent / "claims.json").read_text())
    csv = pd.read_csv(report["out"] / "tables" / "summary.csv", keep_default_na=False)
    md = (report["out"] / "report.md").read_text()
    assert md.index("## Summary") < md.index("## About this report")
    block = md.split("## Summary", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in block.splitlines() if ln.startswith("| ")]
    assert rows[0].startswith("| claim | the paper's numbers | ours | difference")
    assert len(rows) == 1 + len(found["claims"])  # the header, then one row per claim
    order = [c["key"] for c in sorted(found["claims"], key=lambda c: verdicts.VERDICTS.index(
        c["status"]))]
    assert list(dict.fromkeys(csv["key"])) == order
    anchors = {f"#{render_.slug(t)}" for t in
               (ln[3:] for ln in md.splitlines() if ln.startswith("## "))}
    for c in found["claims"]:
        row = next(r for r in rows if r.startswith(f"| {c['statement']} |"))
        cells = [x.strip() for x in row.strip("|").split(" | ")]
        assert cells[1] == (summary.arrows(c["paper"]) or "-")
        assert cells[2] == (summary.arrows(c["ours"]) or "-")
        assert cells[4] == c["status"]  # the plain word in Markdown
        link = cells[5].split("](", 1)[1].rstrip(")")
        assert link in anchors, (c["key"], link)
        mine = csv[csv["key"] == c["key"]]
        assert set(mine["verdict"]) == {c["status"]}
        diffs = c["differences"]
        assert len(mine) == max(len(diffs), 1)
        for d, (_, r) in zip(diffs, mine.iterrows()):
            assert (r["difference"], r["unit"], float(r["value"])) == (d["label"], d["unit"],
                                                                      d["value"])
            assert f"{d['label']}: {d['value']:+.2f} {d['unit']}" in cells[3]
    # the paper's numbers are labelled as the paper's
    ppl = next(c for c in found["claims"] if c["key"] == "reversal_perplexity")
    assert ppl["paper"] == "paper: test ppl 5.8 -> 4.7"
    html_text = (report["out"] / "report.html").read_text()
    shown = html_text.split('id="table-summary"', 1)[1].split("</table>", 1)[0]
    for c in found["claims"]:
        kind = {"holds": "holds", "does not hold": "fails", "no significant difference":
                "unsure", "cannot tell": "unknown"}[c["status"]]
        assert f'<span class="badge badge-{kind}">{c["status"]}</span>' in shown


def test_a_difference_without_an_interval_says_so():
    """Under 'difference [95% interval]', a difference with none says '(no interval)', with what
    it would be over where the claims stage names it."""
    from s2s.artifacts import ClaimDifference

    assert summary.difference_text(ClaimDifference(
        "forward swaps - paraphrases", "distance", -0.00821, None, None, "")) == \
        "forward swaps - paraphrases: -0.01 distance (no interval)"
    assert summary.difference_text(ClaimDifference(
        "reversed - forward", "BLEU", 2.5, None, None, "test sentences")) == \
        "reversed - forward: +2.50 BLEU (no interval over test sentences)"
    assert summary.difference_text(ClaimDifference(
        "reversed - forward", "BLEU", 2.5, 1.0, 4.0, "3 seed pairs")) == \
        "reversed - forward: +2.50 BLEU [+1.00, +4.00], 3 seed pairs"


def test_summary_links_to_a_section_the_report_lacks_go_to_the_claims_table(tmp_path):
    """The published run rendered without --analysis: its claims.json still has the analyses'
    verdicts (Figure 2, gradient reach), whose sections are not in the document; their links
    point at the claims table's section, and every link has its target."""
    run = ROOT / "reports" / "default"
    params = load(run / "params.yaml")
    out = tmp_path / "report"
    report_main(params, ReportPaths(
        metrics=run / "metrics", translate=run / "outputs" / "translate",
        groups=run / "metrics" / "figure3.csv", manifest=run / "data" / "raw" / "manifest.json",
        claims=run / "outputs" / "claims" / "claims.json", out=out))
    md = (out / "report.md").read_text(encoding="utf-8")
    anchors = {render_.slug(line[3:]) for line in md.splitlines() if line.startswith("## ")}
    links = re.findall(r"\]\(#([^)]+)\)", md)
    assert links and set(links) <= anchors
    rows = {line.split(" | ")[0][2:]: line  # the summary's, above the contents
            for line in md.split("**Contents:**")[0].splitlines()
            if line.startswith(("| Figure 2:", "| Reversal brings the first"))}
    assert len(rows) == 2 and all(r.endswith("| [Claims](#the-papers-claims-checked) |")
                        for r in rows.values()), rows


def _claims_with_intervals(report, tmp_path: Path) -> Path:
    """claims.json of the report's tree, every BLEU difference with a paired-bootstrap interval
    (the longest summary: an interval per difference)."""
    from s2s.claims import check, inputs

    found = inputs.load(report["params"], ClaimsPaths(
        metrics=report["metrics"], translate=report["translate"], out=tmp_path / "unused.json"))
    found = dataclasses.replace(found, diff=_interval(0.21, 1.87))
    out = tmp_path / "claims.json"
    check.check_all(report["params"], found).write(out)
    return out


@pytest.mark.service("chromium")
def test_the_summary_table_fits_the_first_screen_in_headlesschromium(report, tmp_path):
    """At 1280 x 800 the summary table is on the first screen whole: its bounding box, as the
    browser lays it out, ends inside the window. The screenshot is kept as summary.png."""
    claims = _claims_with_intervals(report, tmp_path)
    out = tmp_path / "reports"
    report_main(report["params"], report_paths(report, claims=claims, out=out))
    html_text = (out / "report.html").read_text()
    assert '<span class="badge badge-' in html_text and "[+0.21, +1.87]" in html_text
    # a copy that writes the table's box into the DOM; the report itself has no script
    probe = out / "probe.html"
    probe.write_text(html_text.replace("</body>", (
        "<script>const t = document.getElementById('table-summary').getBoundingClientRect();"
        "document.body.setAttribute('data-box', JSON.stringify({top: t.top, bottom: t.bottom,"
        " left: t.left, right: t.right, width: innerWidth, height: innerHeight}));</script>"
        "</body>")))
    res = chromium(tmp_path, "--window-size=1280,800", "--dump-dom", probe.resolve().as_uri())
    assert res.returncode == 0, res.stderr[-2000:]
    box = json.loads(html_unescape(res.stdout.split('data-box="', 1)[1].split('"', 1)[0]))
    # The layout depends on the width alone (headless keeps room for a window frame in
    # innerHeight while loading; the screenshot below is 1280 x 800 of the page itself).
    assert box["width"] == 1280, box
    assert 0 < box["top"] < box["bottom"] <= 800 and 0 <= box["left"] < box["right"] <= 1280, box
    shot = tmp_path / "summary.png"  # the test's artefact: look at it
    res = chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,800",
                    "--hide-scrollbars", (out / "report.html").resolve().as_uri())
    assert res.returncode == 0 and shot.is_file(), res.stderr[-2000:]
    img = _png(shot)[..., :3]
    assert img.shape[:2] == (800, 1280)
    # the verdict badges are drawn in colour: green (holds) or amber (no difference) pixels
    green = (img[..., 1] > img[..., 0] + 0.08) & (img[..., 1] > img[..., 2] + 0.04)
    assert green.sum() > 200


# --- claims are computed from the numbers, both ways ---------------------------------------------


def _entry(x: float) -> dict:
    return {"bleu_tok": x, "bleu_sacre": x - 1, "sacre_signature": SIG, "sentences": 10}


def _bleu(bleu: dict) -> Bleu:
    """metrics/bleu.json of `bleu`'s translate and rescore entries."""
    return Bleu.from_json({"test_sentences": 10, "bleu_tok_method": "multi-bleu.pl style",
                           "bleu_tok_signature": SIG, "translate": {}, "rescore": {}, **bleu})


def _train(train: dict[str, dict]) -> dict[str, TrainMetrics]:
    """metrics/train/<model>.json with `train`'s perplexities (test_ppl: dev_ppl's if not given)."""
    return {model: TrainMetrics.from_json({
        "model": model, "reverse_source": False, "cell": "lstm", "num_layers": 1,
        "hidden_size": 8, "embed_size": 8, "parameters": 100, "device": "cpu",
        "precision": "fp32", "threads": 1, "epochs": 1.0, "steps": 1, "train_pairs": 10,
        "train_target_words": 100, "tgt_words_per_sec": 1.0, "train_seconds": 1.0,
        "wall_seconds": 1.0, "test_ppl": m["dev_ppl"], "best_dev_ppl": m["dev_ppl"], **m})
        for model, m in train.items()}


def _seeded(tmp_path) -> object:
    """The fixture's params with three forward and three reversed models, paired on seeds
    (forward_k and reversed_k share init and order seeds), each a one-model system."""
    import yaml

    raw = yaml.safe_load(FIXTURE.read_text())
    for k in (2, 3):
        raw["models"][f"forward_{k}"] = {"init_seed": k, "order_seed": k}
        raw["models"][f"reversed_{k}"] = {"reverse_source": True, "init_seed": k, "order_seed": k}
        for side in ("forward", "reversed"):
            raw["systems"][f"{side}_{k}"] = {"members": [f"{side}_{k}"], "beams": [1, 12]}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return load(path)


def _interval(lo, hi):
    from s2s.evaluate.significance import Difference

    return lambda a, b: Difference(0, 0, (lo + hi) / 2, lo, hi, 0.5, 0, 0, 0, 0, 1000, 1)


def _by_text(items):
    return {c.claim.split(" (")[0]: c for c in items}


def test_with_one_seed_a_comparison_of_single_models_has_no_verdict():
    params = load(FIXTURE)  # forward and reversed_1: one seed each (paired), no replicas
    train = {"forward": {"dev_ppl": 9.0, "test_ppl": 9.5}, "reversed_1": {"dev_ppl": 7.0}}
    bleu = {"translate": {"forward": {"1": _entry(10.0), "12": _entry(11.0)},
                          "reversed": {"1": _entry(12.0), "12": _entry(13.5)},
                          "ensemble2": {"12": {"absent": True, "reason": "missing"}}},
            "rescore": {"baseline": _entry(13.0), "forward": _entry(13.2),
                        "reversed": _entry(12.9), "oracle": _entry(20.0)}}
    got = _by_text(claims_.claims(params, _bleu(bleu), _train(train), {},
                                  diff=_interval(0.5, 4.0)))
    # no interval over seeds: "cannot tell", never "no significant difference" (an interval
    # holding 0), however clear the bootstrap over the test sentences
    ppl = got["Reversing the source lowers perplexity"]
    assert ppl.status == verdicts.UNKNOWN and "1 seed pair: no interval" in ppl.evidence
    assert "forward and reversed_1 differ in reverse_source; same seeds (paired)" in ppl.evidence
    assert ppl.evidence.endswith("; no verdict without an interval over seeds: it needs two seed "
                                 "pairs or more (seed replicas, each a one-model system, of every "
                                 "single model compared, paired on their init and order seeds)")
    rev = got["Reversing the source raises BLEU"]  # significant on the sentences, one seed
    assert rev.status == verdicts.UNKNOWN and "no verdict without an interval" in rev.evidence
    assert "reversed 13.50 vs forward 11.00 (+2.50" in rev.evidence
    assert got["An ensemble of 5 reversed LSTMs beats a single reversed LSTM"].status == \
        "cannot tell"
    # one run of each system at two beams, and rescoring's one forward and one reversed rescorer
    # against the baseline's 1-best: no replicas, no verdict
    beam = got["A wider beam helps"]
    assert beam.status == "cannot tell"
    assert beam.evidence.endswith(f"; forward, reversed: {NO_BEAM_INTERVAL}")
    resc = got["Rescoring the baseline's n-best lists with LSTMs beats the baseline"]
    assert resc.status == "cannot tell" and "higher for 1 of 2" in resc.evidence
    assert resc.evidence.endswith(f"; forward, reversed: {NO_RESCORER_INTERVAL}")
    assert got["5 models at beam 2 cost less than 1 model at beam 12"].status == "cannot tell"
    # the summary tells the difference over the one seed pair from the test sentences' one
    from s2s.report.sections.summary import difference_text

    assert [difference_text(d) for d in rev.differences] == [
        "reversed - forward: +2.50 BLEU [+0.50, +4.00]",
        "reversed - forward: +2.50 BLEU (no interval over 1 seed pair)"]


def test_a_claim_not_run_names_only_the_rows_no_output_of_ours_answers():
    params = load(FIXTURE)
    table1 = {k: v for k, v in params.report.table1.items() if k != "ensemble5_beam2"}
    params = dataclasses.replace(params, report=dataclasses.replace(params.report, table1=table1))
    bleu = {"translate": {"forward": {"12": _entry(11.0)}, "reversed": {"12": _entry(13.5)}},
            "rescore": {"baseline": _entry(13.0)}}
    got = {c.key: c for c in claims_.claims(params, _bleu(bleu), _train({}), {})}
    assert got["cost"].status == verdicts.NOT_RUN
    assert got["cost"].evidence == ("no output of ours answers the paper's row 'ensemble5_beam2' "
                                    "(params report.table1)")


def test_single_model_claims_need_the_bootstrap_and_the_interval_over_seeds(tmp_path):
    params = _seeded(tmp_path)
    fwd_dev, rev_dev = [9.0, 9.3, 8.9], [7.0, 7.2, 6.8]
    fwd_bleu, rev_bleu = [11.0, 11.4, 10.7], [13.5, 13.2, 13.9]

    def run(fd, rd, fb, rb, diff):
        names = [("forward", "forward"), ("forward_2", "forward_2"), ("forward_3", "forward_3")]
        train = {m: {"dev_ppl": fd[i]} for i, (m, _) in enumerate(names)}
        train |= {m: {"dev_ppl": rd[i]} for i, m in enumerate(
            ("reversed_1", "reversed_2", "reversed_3"))}
        translate = {s: {"1": _entry(fb[i] - 1), "12": _entry(fb[i])}
                     for i, s in enumerate(("forward", "forward_2", "forward_3"))}
        absent = {"absent": True, "reason": "missing"}
        translate |= {s: {"1": _entry(rb[i] - 1), "12": _entry(rb[i])} if rb[i] is not None
                      else {"1": absent, "12": absent}
                      for i, s in enumerate(("reversed", "reversed_2", "reversed_3"))}
        bleu = _bleu({"translate": translate, "rescore": {}})
        return _by_text(claims_.claims(params, bleu, _train(train), {}, diff=diff))

    got = run(fwd_dev, rev_dev, fwd_bleu, rev_bleu, _interval(0.2, 0.9))
    ppl = got["Reversing the source lowers perplexity"]
    assert ppl.status == verdicts.HOLDS
    assert "over seeds: forward 9.07 +- 0.21 (3 seeds) vs reversed 7.00 +- 0.20 (3 seeds)" \
        in ppl.evidence and "95% interval over 3 seed pairs" in ppl.evidence
    rev = got["Reversing the source raises BLEU"]
    assert rev.status == verdicts.HOLDS and "paired difference +2.50" in rev.evidence
    # significant on the test sentences, but one seed pair goes the other way: no verdict
    got = run(fwd_dev, [7.0, 9.9, 6.8], fwd_bleu, [13.5, 10.0, 13.9], _interval(0.2, 0.9))
    assert got["Reversing the source lowers perplexity"].status == verdicts.NO_DIFFERENCE
    assert got["Reversing the source raises BLEU"].status == verdicts.NO_DIFFERENCE
    # consistent over seeds but not significant on the sentences: no verdict either
    got = run(fwd_dev, rev_dev, fwd_bleu, rev_bleu, _interval(-0.3, 0.4))
    assert got["Reversing the source raises BLEU"].status == verdicts.NO_DIFFERENCE
    # a replica's BLEU missing (a failed decode): its pair is left out, the other two decide
    got = run(fwd_dev, rev_dev, fwd_bleu, [13.5, None, 13.3], _interval(0.2, 0.9))
    rev = got["Reversing the source raises BLEU"]
    assert rev.status == verdicts.HOLDS
    # forward_2, whose pair is left out, is out of the forward side too (it was "3 seeds")
    assert "over seeds: reversed 13.40 +- 0.14 (2 seeds) vs forward 10.85 +- 0.21 (2 seeds); " \
           "paired difference +2.55 (95% interval over 2 seed pairs +1.91 to +3.19)" \
           in rev.evidence
    assert "reversed_2 not scored, so forward_2 left out of the pairs" in rev.evidence
    # both the other way: does not hold
    got = run(rev_dev, fwd_dev, rev_bleu, fwd_bleu, _interval(-0.9, -0.2))
    assert got["Reversing the source lowers perplexity"].status == verdicts.FAILS
    assert got["Reversing the source raises BLEU"].status == verdicts.FAILS


def _add_opened(raw: dict, count: int) -> None:
    """reversed_fb1, reversed_fb1_2, ...: `count` models with the forget gate opened, seeded as
    reversed_1, reversed_2, ... are (paired), each a one-model system at beam 12."""
    for k in range(1, count + 1):
        suffix, seeds = ("", {}) if k == 1 else (f"_{k}", {"init_seed": k, "order_seed": k})
        raw["models"][f"reversed_fb1{suffix}"] = {"reverse_source": True, "forget_bias": 1.0,
                                                  **seeds}
        raw["systems"][f"reversed_fb1{suffix}"] = {"members": [f"reversed_fb1{suffix}"],
                                                   "beams": [12]}


def test_the_forget_bias_verdict_needs_perplexity_and_bleu_and_says_which_fell_short(tmp_path):
    """Three seed pairs of reversed models, the paper's init against forget bias 1: the verdict
    says 'helps' only when dev perplexity and BLEU both do over the seeds (and BLEU on the test
    sentences); when they part, it names what each says."""
    import yaml

    from s2s.claims.forget_bias import forget_bias_verdicts

    raw = yaml.safe_load(FIXTURE.read_text())
    raw["models"]["reversed_3"] = {"reverse_source": True, "init_seed": 3, "order_seed": 3}
    raw["systems"]["reversed_2"] = {"members": ["reversed_2"], "beams": [12]}
    raw["systems"]["reversed_3"] = {"members": ["reversed_3"], "beams": [12]}
    _add_opened(raw, 3)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    params = load(path)

    def verdict(plain_dev, opened_dev, plain_bleu, opened_bleu, diff=_interval(1.8, 3.6)):
        plain, opened = ("reversed_1", "reversed_2", "reversed_3"), (
            "reversed_fb1", "reversed_fb1_2", "reversed_fb1_3")
        train = {m: {"dev_ppl": d} for m, d in zip(plain + opened, plain_dev + opened_dev)}
        systems = ("reversed", "reversed_2", "reversed_3") + opened
        bleu = _bleu({"translate": {s: {"12": _entry(b)} for s, b in zip(
            systems, plain_bleu + opened_bleu)}, "rescore": {}})
        (text,) = forget_bias_verdicts(params, train=_train(train), bleu=bleu, diff=diff)
        return text

    text = verdict([7.4, 7.6, 7.4], [7.0, 7.2, 6.9], [20.9, 20.2, 21.1], [23.6, 26.0, 26.5],
                   diff=lambda a, b: None)  # no bootstrap: BLEU has no verdict, nor the claim
    assert ("opening the gate cannot be judged here (no interval over seeds, or no bootstrap) "
            "(BLEU: no verdict (no interval over seeds, or no bootstrap); dev perplexity: "
            "helps)") in text
    text = verdict([7.4, 7.6, 7.4], [7.0, 7.2, 6.9], [20.9, 20.2, 21.1], [23.6, 26.0, 26.5])
    assert text.startswith("reversed_fb1 vs reversed_1 (")
    assert "opening the gate helps here; a verdict needs dev perplexity and BLEU" in text
    assert "BLEU at beam 12 +2.70 (95% CI +1.80 to +3.60, paired bootstrap)" in text
    # the published run's case: BLEU helps on every seed, perplexity not on every seed
    text = verdict([7.4, 7.6, 7.4], [7.1, 6.5, 7.5], [20.9, 20.2, 21.1], [23.6, 26.0, 26.5])
    assert ("opening the gate makes no clear difference here (BLEU: helps; dev perplexity: no "
            "significant difference)") in text
    text = verdict([7.0, 7.2, 6.9], [7.4, 7.6, 7.4], [23.6, 26.0, 26.5], [20.9, 20.2, 21.1])
    assert "opening the gate makes no clear difference here (BLEU: no significant difference; " \
           "dev perplexity: hurts)" in text  # the bootstrap says +, the seeds say -
    # worse on every seed in both measures, and significantly worse on the test sentences: the
    # bootstrap's significant loss agrees with the seeds, so the verdict is that it does not help
    text = verdict([7.0, 7.2, 6.9], [7.4, 7.6, 7.4], [23.6, 26.0, 26.5], [20.9, 20.2, 21.1],
                   diff=_interval(-3.6, -1.8))
    assert "BLEU at beam 12 -2.70 (95% CI -3.60 to -1.80, paired bootstrap)" in text
    assert ": opening the gate does not help here; a verdict needs dev perplexity and BLEU" in text


def test_the_forget_bias_bleu_compares_both_sides_at_one_beam(tmp_path):
    """The paper's-init side decoded at beams 12 and 100, the opened side at 12: the bootstrap
    compares both at 12, the beam the replicas are compared at (it compared plain's beam 100
    with opened's beam 12)."""
    import yaml

    from s2s.claims.forget_bias import forget_bias_verdicts
    from s2s.evaluate.significance import Difference

    raw = yaml.safe_load(FIXTURE.read_text())
    raw["systems"]["reversed"]["beams"] = [12, 100]
    raw["systems"]["reversed"]["nbest"] = 12
    raw["systems"]["reversed_2"] = {"members": ["reversed_2"], "beams": [12, 100]}
    _add_opened(raw, 2)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    params = load(path)
    train = _train({m: {"dev_ppl": 7.0} for m in ("reversed_1", "reversed_2", "reversed_fb1",
                                                  "reversed_fb1_2")})
    bleu = _bleu({"translate": {
        "reversed": {"12": _entry(20.0), "100": _entry(19.0)},
        "reversed_2": {"12": _entry(20.4), "100": _entry(19.3)},
        "reversed_fb1": {"12": _entry(22.0)}, "reversed_fb1_2": {"12": _entry(22.6)}},
        "rescore": {}})
    asked = []

    def diff(a, b):
        asked.append((a.system, a.beam, b.system, b.beam))
        return Difference(0, 0, 2.0, 1.0, 3.0, 0.5, 0, 0, 0, 0, 1000, 1)

    (text,) = forget_bias_verdicts(params, train=train, bleu=bleu, diff=diff)
    assert asked == [("reversed", 12, "reversed_fb1", 12)]
    assert "BLEU at beam 12 +2.00 (95% CI +1.00 to +3.00, paired bootstrap)" in text
    # the replicas at the same beam: opened - plain +2.00 and +2.20
    assert "BLEU over seeds: opened 22.30 +- 0.42 (2 seeds) vs paper's init 20.20 +- 0.28" \
        in text
    # no beam both sides were scored at: said so, not "no interval over seeds"
    for s in ("reversed_fb1", "reversed_fb1_2"):
        raw["systems"][s]["beams"] = [2]
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    bleu = _bleu({"translate": {
        "reversed": {"12": _entry(20.0), "100": _entry(19.0)},
        "reversed_2": {"12": _entry(20.4), "100": _entry(19.3)},
        "reversed_fb1": {"2": _entry(22.0)}, "reversed_fb1_2": {"2": _entry(22.6)}},
        "rescore": {}})
    (text,) = forget_bias_verdicts(params=load(path), train=train, bleu=bleu, diff=diff)
    assert "(BLEU: no beam both were scored at; dev perplexity: " in text


def _signed_interval(bleu: dict):
    """A paired bootstrap that knows its sides, as the real one (system - baseline): the
    difference of the two outputs' BLEU, +- 0.5, so a claim that passes them swapped reads the
    opposite direction."""
    from s2s.evaluate.significance import Difference

    def score(o) -> float:
        if o.kind == "translate":
            return bleu["translate"][o.system][str(o.beam)]["bleu_tok"]
        return bleu["rescore"]["baseline" if o.kind == "baseline" else o.system]["bleu_tok"]

    def diff(baseline, system):
        d = score(system) - score(baseline)
        return Difference(0, 0, d, d - 0.5, d + 0.5, 0.5, 0, 0, 0, 0, 1000, 1)
    return diff


def test_each_claim_passes_the_bootstrap_its_baseline_first():
    """The bootstrap's difference is system - baseline: a claim giving them swapped would read a
    better system as worse (a fake that ignores the order cannot see it)."""
    params = load(FIXTURE)
    bleu = {"translate": {"forward": {"1": _entry(10.0), "12": _entry(11.0)},
                          "reversed": {"1": _entry(12.0), "12": _entry(13.5)}},
            "rescore": {"baseline": _entry(13.0), "forward": _entry(14.2),
                        "reversed": _entry(14.9), "oracle": _entry(20.0)}}
    got = _by_text(claims_.claims(params, _bleu(bleu), {}, {}, diff=_signed_interval(bleu)))
    # one run of each: significant gains, no interval over seeds
    assert got["A wider beam helps"].status == verdicts.UNKNOWN
    assert "+1.00, 95% CI +0.50 to +1.50" in got["A wider beam helps"].evidence
    rev = got["Reversing the source raises BLEU"]
    assert "+2.50; paired-bootstrap 95% CI of the difference +2.00 to +3.00" in rev.evidence
    resc = got["Rescoring the baseline's n-best lists with LSTMs beats the baseline"]
    # significant gains, but one rescorer each: no interval over seeds, no verdict
    assert resc.status == verdicts.UNKNOWN and "-0.50" not in resc.evidence
    assert "forward 14.20 (+1.20, 95% CI +0.70 to +1.70)" in resc.evidence
    bleu["translate"]["forward"]["12"] = _entry(8.0)  # now the wider beam hurts forward
    got = _by_text(claims_.claims(params, _bleu(bleu), {}, {}, diff=_signed_interval(bleu)))
    assert "-2.00, 95% CI -2.50 to -1.50" in got["A wider beam helps"].evidence


def test_claims_use_the_bootstrap_intervals():
    params = load(FIXTURE)
    bleu = {"translate": {"forward": {"1": _entry(10.0), "12": _entry(11.0)},
                          "reversed": {"1": _entry(12.0), "12": _entry(13.5)}},
            "rescore": {"baseline": _entry(13.0), "forward": _entry(13.2),
                        "reversed": _entry(13.9)}}
    got = _by_text(claims_.claims(params, _bleu(bleu), {}, {}, diff=_interval(-0.3, 0.4)))
    rev = got["Reversing the source raises BLEU"]
    assert rev.status == verdicts.NO_DIFFERENCE  # +2.50, but the interval contains 0
    assert "95% CI of the difference -0.30 to +0.40" in rev.evidence
    assert got["A wider beam helps"].status == verdicts.NO_DIFFERENCE
    assert "95% CI -0.30 to +0.40" in got["A wider beam helps"].evidence
    got = _by_text(claims_.claims(params, _bleu(bleu), {}, {}, diff=_interval(0.2, 0.9)))
    # one rescorer each, and one run of each system at two beams: no replicas, no verdict
    # however clear the bootstrap
    assert got["Rescoring the baseline's n-best lists with LSTMs beats the baseline"].status == \
        verdicts.UNKNOWN
    assert got["A wider beam helps"].status == verdicts.UNKNOWN


def test_the_wider_beam_claim_is_judged_over_the_seed_replicas_decoded_at_both_beams(tmp_path):
    """Three forward and three reversed replicas, each decoded at beams 1 and 12: each group is
    one comparison, its first system's bootstrap and the replicas' gains over seeds both
    excluding 0; before, every system was judged on its one bootstrap, a single run."""
    params = _seeded(tmp_path)
    gains = {"forward": (10.0, 11.0), "forward_2": (10.2, 11.0), "forward_3": (9.9, 10.8),
             "reversed": (12.0, 13.0), "reversed_2": (12.1, 12.9), "reversed_3": (11.8, 13.0)}
    bleu = {"translate": {s: {"1": _entry(a), "12": _entry(b)} for s, (a, b) in gains.items()},
            "rescore": {}}
    asked = []

    def diff(a, b):
        asked.append(a.system)
        return _interval(0.3, 1.5)(a, b)

    got = claims_.wider_beam(params, _bleu(bleu), diff)
    assert asked == ["forward", "reversed"] and got.status == verdicts.HOLDS
    assert ("forward: beam 1 10.00 -> beam 12 11.00 (+1.00, 95% CI +0.30 to +1.50), forward_2 "
            "10.20 -> 11.00, forward_3 9.90 -> 10.80, over seeds: beam 12 10.93 +- 0.12 (3 "
            "seeds) vs beam 1 10.03 +- 0.15 (3 seeds); paired difference +0.90 (95% interval "
            "over 3 seed pairs") in got.evidence
    assert got.evidence.startswith("higher for 6 of 6 systems (")
    gains["reversed_2"] = (12.1, 11.0)  # one replica loses: the reversed group's holds 0
    bleu["translate"]["reversed_2"] = {"1": _entry(12.1), "12": _entry(11.0)}
    got = claims_.wider_beam(params, _bleu(bleu), diff)
    assert got.status == verdicts.NO_DIFFERENCE


def test_the_wider_beam_claim_compares_the_narrowest_with_the_widest_and_counts_only_gains(
        tmp_path):
    """A system decoded at beams 1, 2 and 12: the claim compares beam 1 with beam 12 (not the
    second widest with the widest); a system whose widest beam scores the same as its narrowest
    is not counted among those a wider beam helped."""
    import yaml

    raw = yaml.safe_load(FIXTURE.read_text())
    raw["systems"]["forward"]["beams"] = [1, 2, 12]
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    params = load(path)
    bleu = {"translate": {"forward": {"1": _entry(10.0), "2": _entry(10.6), "12": _entry(11.0)},
                          "reversed": {"1": _entry(12.0), "12": _entry(12.0)}},
            "rescore": {}}
    asked = []
    signed = _signed_interval(bleu)

    def diff(a, b):
        asked.append((a.system, a.beam, b.system, b.beam))
        return signed(a, b)

    got = claims_.wider_beam(params, _bleu(bleu), diff)
    assert asked == [("forward", 1, "forward", 12), ("reversed", 1, "reversed", 12)]
    assert got.evidence == (
        "higher for 1 of 2 systems (forward: beam 1 10.00 -> beam 12 11.00 (+1.00, 95% CI +0.50 "
        "to +1.50); reversed: beam 1 12.00 -> beam 12 12.00 (+0.00, 95% CI -0.50 to +0.50)); "
        f"forward: {NO_BEAM_INTERVAL}")
    assert got.ours == "forward 10.00 at beam 1 -> 11.00 at beam 12; reversed 12.00 at beam 1 " \
        "-> 12.00 at beam 12"
    assert [(d.label, d.value) for d in got.differences] == [
        ("forward beam 12 - beam 1", pytest.approx(1.0)), ("reversed beam 12 - beam 1", 0.0)]
    assert got.status == verdicts.NO_DIFFERENCE  # reversed's interval holds 0
    # without a bootstrap: the same pairs, no intervals
    got = claims_.wider_beam(params, _bleu(bleu), None)
    assert got.evidence.startswith("higher for 1 of 2 systems (forward: beam 1 10.00 -> beam 12 "
                                   "11.00; reversed: beam 1 12.00 -> beam 12 12.00)")


def test_an_interval_that_holds_0_is_never_dropped_because_another_is_missing(tmp_path):
    from s2s.evaluate.significance import Difference

    def ci(lo, hi):
        return Difference(0, 0, (lo + hi) / 2, lo, hi, 0.5, 0, 0, 0, 0, 1000, 1)

    # one interval holds 0, the other difference has none (a hypothesis file missing)
    assert verdicts.verdict_of([ci(-0.5, 0.9), None]) == verdicts.NO_DIFFERENCE
    assert verdicts.verdict_of([ci(0.2, 0.9), ci(-0.9, -0.1), None]) == verdicts.FAILS
    # significantly negative beside one that holds 0 (either order): does not hold, not "no
    # significant difference"
    assert verdicts.verdict_of([ci(-0.9, -0.1), ci(-0.5, 0.9)]) == verdicts.FAILS
    assert verdicts.verdict_of([ci(-0.5, 0.9), ci(-0.9, -0.1)]) == verdicts.FAILS
    assert verdicts.combined([0, -1, None]) == verdicts.FAILS
    # significant gains beside one with no interval: no verdict, whatever its point value
    assert verdicts.verdict_of([ci(0.2, 0.9), None]) == verdicts.UNKNOWN
    assert verdicts.verdict_of([ci(0.2, 0.9), ci(0.1, 0.3)]) == verdicts.HOLDS
    # some gains significant, the rest not, none significantly negative: no significant difference
    assert verdicts.verdict_of([ci(0.2, 0.9), ci(-0.5, 0.9)]) == verdicts.NO_DIFFERENCE
    # no interval at all: a point difference, however large, is never a verdict
    assert verdicts.verdict_of([None, None]) == verdicts.UNKNOWN
    assert verdicts.verdict_of([None]) == verdicts.UNKNOWN
    assert verdicts.verdict_of([]) == verdicts.UNKNOWN
    # an interval that touches 0 holds it (the same output twice: 0 to 0)
    for lo, hi in ((0.0, 0.0), (0.0, 0.5), (-0.5, 0.0)):
        assert verdicts.verdict_of([ci(lo, hi)]) == verdicts.NO_DIFFERENCE, (lo, hi)
    from s2s.claims.seeds import SeedStats

    for diffs in ((0.0, 0.0), (1.0, 1.0, 1.0)):  # an interval of width 0: at 0, or above it
        assert SeedStats((1.0,) * len(diffs), tuple(1.0 + d for d in diffs),
                         diffs).excludes_zero() == (1 if diffs[0] else 0)

    # no bootstrap for reversal, but three seed pairs whose interval holds 0 (+2.5, -3.5, +3.2):
    # the point difference at the primary pair (+2.50) does not decide it
    params = _seeded(tmp_path)
    fwd, rev = (11.0, 11.4, 10.7), (13.5, 7.9, 13.9)
    translate = {s: {"12": _entry(x)} for s, x in zip(("forward", "forward_2", "forward_3"), fwd)}
    translate |= {s: {"12": _entry(x)} for s, x in zip(("reversed", "reversed_2", "reversed_3"),
                                                        rev)}
    got = _by_text(claims_.claims(params, _bleu({"translate": translate, "rescore": {}}), {}, {},
                                  diff=lambda a, b: None))
    rev_claim = got["Reversing the source raises BLEU"]
    assert rev_claim.status == verdicts.NO_DIFFERENCE and "3 seed pairs" in rev_claim.evidence
    translate["reversed_2"] = {"12": _entry(13.2)}  # every seed pair gains
    got = _by_text(claims_.claims(params, _bleu({"translate": translate, "rescore": {}}), {}, {},
                                  diff=lambda a, b: None))
    # without the bootstrap (its hypothesis files missing) the seeds do not decide alone: the
    # claims stage's warning says the verdict cannot hold without it
    rev_claim = got["Reversing the source raises BLEU"]
    assert rev_claim.status == verdicts.UNKNOWN and verdicts.NO_BOOTSTRAP in rev_claim.evidence
    got = _by_text(claims_.claims(params, _bleu({"translate": translate, "rescore": {}}), {}, {},
                                  diff=lambda a, b: ci(0.4, 1.2)))
    assert got["Reversing the source raises BLEU"].status == verdicts.HOLDS


def test_a_seed_pair_left_out_for_a_missing_score_is_named_and_out_of_both_sides(tmp_path):
    """reversed_2 not scored: its pair with forward_2 is left out; before, forward_2 still counted
    in the forward side's mean and seeds ("3 seeds" over "2 seed pairs") and neither was named."""
    from s2s.claims import seeds

    params = _seeded(tmp_path)
    scores = {"forward": 7.0, "forward_2": 7.3, "forward_3": 6.8, "reversed": 21.0,
              "reversed_2": None, "reversed_3": 21.5}
    stats = seeds.paired(params, "forward", "reversed", scores.get)
    assert stats.diffs == (14.0, 14.7) and stats.worse == (7.0, 6.8)
    assert stats.better == (21.0, 21.5)
    said = stats.describe("reversed", "forward")
    assert "forward 6.90 +- 0.14 (2 seeds)" in said and "over 2 seed pairs" in said
    assert said.endswith("; reversed_2 not scored, so forward_2 left out of the pairs")


def test_a_second_system_of_one_model_is_not_another_seed(tmp_path):
    import yaml

    from s2s.claims import seeds

    params = _seeded(tmp_path)
    raw = yaml.safe_load((tmp_path / "params.yaml").read_text())
    raw["systems"]["forward_b2"] = {"members": ["forward"], "beams": [2]}  # forward again
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    params = load(tmp_path / "params.yaml")
    assert seeds.replicas(params, "forward") == ["forward", "forward_2", "forward_3"]
    assert seeds.replicas(params, "forward_b2") == ["forward_b2", "forward_2", "forward_3"]
    value = {"forward": 11.0, "forward_b2": 11.0, "forward_2": 11.4, "forward_3": 10.7,
             "reversed": 13.5, "reversed_2": 13.2, "reversed_3": 13.9}
    stats = seeds.paired(params, "forward", "reversed", value.get)
    assert stats.pairs == 3 and stats.diffs == pytest.approx((2.5, 1.8, 3.2))
    # pairs are made by seed, not by position: reversed_3 listed before reversed_2 still pairs
    # with forward_3 (the order of a file's systems is no design)
    raw["systems"] = {k: raw["systems"][k] for k in sorted(
        raw["systems"], key=lambda k: k == "reversed_2")}  # reversed_2 last
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    params = load(tmp_path / "params.yaml")
    assert seeds.replicas(params, "reversed") == ["reversed", "reversed_3", "reversed_2"]
    stats = seeds.paired(params, "forward", "reversed", value.get)
    assert stats.diffs == pytest.approx((2.5, 1.8, 3.2))  # forward_k with reversed_k
    assert stats.unpaired == () and "unpaired" not in stats.describe("reversed", "forward")
    # an experiment that changes one replica's seed breaks its pair: it is left out, and named
    raw["models"]["reversed_3"]["init_seed"] = 14
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    params = load(tmp_path / "params.yaml")
    stats = seeds.paired(params, "forward", "reversed", value.get)
    assert stats.diffs == pytest.approx((2.5, 1.8)) and stats.unpaired == ("forward_3",
                                                                           "reversed_3")
    assert stats.describe("reversed", "forward").endswith(
        "(95% interval over 2 seed pairs -2.30 to +6.60); forward_3, reversed_3 unpaired (no "
        "replica of the other side has their init and order seeds)")


def test_the_reversal_argument_holds_only_where_every_early_snapshot_agrees():
    from s2s.claims.analyses import reach_claim

    def diff(*intervals):  # (epoch, lo, hi) of gradient_reach_training_diff.csv's first_share
        return pd.DataFrame([{"epoch": e, "forward": "forward", "reversed": "reversed_1",
                              "statistic": "first_share", "sentences": 100,
                              "forward_mean": 0.1, "reversed_mean": 0.1 + (lo + hi) / 2,
                              "diff": (lo + hi) / 2, "lo": lo, "hi": hi}
                             for e, lo, hi in intervals])

    def seeds(*epochs):  # (epoch, difference of each seed pair) of gradient_reach_seed_pairs.csv
        return pd.DataFrame([{"epoch": e, "forward": f"forward_{i}", "reversed": f"reversed_{i}",
                              "statistic": "first_share", "sentences": 100, "forward_mean": 0.1,
                              "reversed_mean": 0.1 + d, "diff": d, "lo": d - 0.1, "hi": d + 0.1}
                             for e, ds in epochs for i, d in enumerate(ds, 1)])

    up = seeds(*((e, (0.2, 0.25, 0.3)) for e in (0, 0.25, 0.5, 1, 2)))  # 3 pairs, all above 0
    first = pd.DataFrame()
    assert reach_claim(first, diff((0.25, 0.2, 0.4), (0.5, 0.1, 0.3)), up).status \
        == verdicts.HOLDS
    # one early snapshot's interval holds 0: no significant difference, not holds
    got = reach_claim(first, diff((0.25, 0.2, 0.4), (0.5, -0.1, 0.3), (1, 0.2, 0.4)), up)
    assert got.status == verdicts.NO_DIFFERENCE
    down = seeds((0.25, (0.2, 0.25, 0.3)), (0.5, (-0.2, -0.25, -0.3)))
    assert reach_claim(first, diff((0.25, 0.2, 0.4), (0.5, -0.3, -0.1)), down).status \
        == verdicts.FAILS
    # one early snapshot significantly against (bootstrap and seeds), the other holding 0: does
    # not hold, not "no significant difference"
    against = seeds((0.25, (-0.2, -0.25, -0.3)), (0.5, (0.2, 0.25, 0.3)))
    assert reach_claim(first, diff((0.25, -0.3, -0.1), (0.5, -0.1, 0.3)), against).status \
        == verdicts.FAILS
    # the seed pairs disagree with the bootstrap (or among themselves): no significant difference
    assert reach_claim(first, diff((0.25, 0.2, 0.4), (0.5, -0.3, -0.1)), up).status \
        == verdicts.NO_DIFFERENCE
    split = seeds((0.25, (0.2, -0.25, 0.3)), (0.5, (0.2, 0.25, 0.3)))
    assert reach_claim(first, diff((0.25, 0.2, 0.4), (0.5, 0.1, 0.3)), split).status \
        == verdicts.NO_DIFFERENCE
    # one seed pair (or none measured): no interval over seeds, so no verdict where the
    # bootstrap's excludes 0, as a system comparison of one seed pair has none
    for alone in (seeds(*((e, (0.2,)) for e in (0.25, 0.5))), None):
        got = reach_claim(first, diff((0.25, 0.2, 0.4), (0.5, 0.1, 0.3)), alone)
        assert got.status == verdicts.UNKNOWN
        assert "no verdict without an interval over seeds" in got.evidence
    # epoch 0 (the initialisation) and later epochs never decide
    assert reach_claim(first, diff((0, -0.3, -0.1), (0.5, 0.1, 0.3), (2, -0.3, -0.1)),
                       seeds((0, (-0.2, -0.25, -0.3)), (0.5, (0.2, 0.25, 0.3)),
                             (2, (-0.2, -0.25, -0.3)))).status == verdicts.HOLDS

    # no trained early snapshot: the end of training's interval decides, not the point norms of
    # gradient_reach_first.csv (which say the reversed model's gradient is larger)
    first = pd.DataFrame([{"model": "forward", "reverse_source": False, "positions": 3,
                           "mean_norm": 0.2, "mean_share": 0.1},
                          {"model": "reversed_1", "reverse_source": True, "positions": 3,
                           "mean_norm": 0.4, "mean_share": 0.2}])
    got = reach_claim(first, diff((0, 0.2, 0.4), (1, 0.1, 0.3), (2, -0.1, 0.3)), up)
    assert got.status == verdicts.NO_DIFFERENCE
    # the 3 pairs' differences 0.2, 0.25, 0.3: mean 0.25, sd 0.05, so 0.25 +- 4.303 * 0.05 / 3**.5
    half = 4.303 * 0.05 / 3 ** 0.5
    assert [(d.label, d.lo, d.hi) for d in got.differences] == [
        ("reversed_1 - forward, epoch 2", -0.1, 0.3),
        ("reversed - forward over seeds, epoch 2", pytest.approx(0.25 - half),
         pytest.approx(0.25 + half))]
    assert got.differences[1].over == "3 seed pairs"
    assert f"epoch 2 +0.250 [{0.25 - half:+.3f}, {0.25 + half:+.3f}] over 3 seed pairs" \
        in got.evidence
    assert "end of training epoch 2 +0.100 [-0.100, +0.300]" in got.evidence
    assert "earlier epoch 1 +0.200 [+0.100, +0.300]" in got.evidence
    assert "none was measured (analysis.snapshots): it rests on the end of training (epoch 2)" \
        in got.evidence
    assert reach_claim(first, diff((0, -0.3, -0.1), (2, 0.1, 0.3)), up).status == verdicts.HOLDS
    # no snapshots at all: the point norms, and the evidence says there is no interval
    got = reach_claim(first, diff())
    assert got.status == verdicts.UNKNOWN and got.differences[0].lo is None
    assert "0.4 vs forward 0.2 (2.00x); no snapshot of training was measured" in got.evidence
    assert "with no interval, so no verdict" in got.evidence

    # no test sentence long enough was measured: no interval, no verdict ("cannot tell"), not
    # "no significant difference" read off NaN bounds
    empty = diff((0.25, float("nan"), float("nan")), (0.5, float("nan"), float("nan")))
    empty["sentences"] = 0
    got = reach_claim(first, empty)
    assert got.status == verdicts.UNKNOWN and "no test sentence long enough" in got.evidence
    nan_first = first.assign(mean_norm=float("nan"))
    assert reach_claim(nan_first, diff()).status == verdicts.UNKNOWN


def test_without_early_snapshots_the_reach_verdict_and_its_sections_rest_on_the_end(tmp_path):
    """The published run's analyses with its early snapshots (epochs 0.25, 0.5) taken out: the
    end of training (epoch 7.5, where the reversed model's share is lower) decides, and the claim
    and both report sections say so."""
    import dataclasses

    from s2s.analysis.outputs import read
    from s2s.claims.analyses import reach_claim
    from s2s.report.sections.analysis import gradient_reach, reach_training

    a = read(Path(__file__).resolve().parents[1] / "reports" / "default" / "analysis")
    # its folder predates the seed pairs: no interval over seeds, no verdict
    assert a.seed_pairs.empty
    assert reach_claim(a.reach_first, a.training_diff, a.seed_pairs).status == verdicts.UNKNOWN
    # a second seed pair alike (its differences 10% larger): the verdicts of both intervals
    pairs = pd.concat([a.training_diff, a.training_diff.assign(
        forward="forward_2", reversed="reversed_2", diff=a.training_diff["diff"] * 1.1)])
    assert reach_claim(a.reach_first, a.training_diff, pairs).status == verdicts.HOLDS
    late = a.training_diff[~a.training_diff["epoch"].isin([0.25, 0.5])]
    got = reach_claim(a.reach_first, late, pairs)
    assert got.status == verdicts.FAILS
    assert [(d.label, d.value, d.lo, d.hi) for d in got.differences][0] == (
        "reversed_1 - forward, epoch 7.5", -0.129155, -0.13906, -0.118581)
    assert "earlier epoch 1 +0.432 [+0.426, +0.439]; epoch 2 +0.273 [+0.263, +0.283]" \
        in got.evidence
    b = dataclasses.replace(a, training_diff=late)
    text = "\n".join(str(x) for x in reach_training.section(b, tmp_path, "figures").blocks)
    assert "End of training (the verdict: no trained early snapshot was measured): epoch 7.5" \
        in text and "Trained, early" not in text and "Later: epoch 1:" in text
    assert "it rests on the end of training (epoch 7.5)" in text
    text = "\n".join(str(x) for x in gradient_reach.section(b, tmp_path, "figures").blocks)
    assert "from the start: the verdict would rest on trained early snapshots" in text


def test_the_claims_say_intervals_only_where_every_bootstrap_was_made(tmp_path):
    from s2s.claims.check import check_all
    from s2s.claims.inputs import BootstrapDiffs, ClaimInputs
    from s2s.paper import Ours

    from s2s.evaluate.bleu import corpus_bleu_tok

    params = load(FIXTURE)
    refs = ["le chat noir dort sur le canapé du salon .",
            "nous partirons demain matin pour la gare de Lyon .",
            "il a plu toute la journée sur la ville .",
            "elle lit un livre très long depuis trois jours ."]
    hyps = {"forward": ["le chat dort sur un canapé au salon .",
                        "nous partons demain pour la gare .",
                        "il a plu toute la journée dans une ville .",
                        "elle lit un long livre depuis jours ."],
            "reversed": [refs[0], refs[1], "il a plu toute la journée dans la ville .", refs[3]]}
    (tmp_path / "prepared").mkdir()
    (tmp_path / "prepared" / "test.tok.fr").write_text("".join(r + "\n" for r in refs))
    for system, lines in hyps.items():
        (tmp_path / "translate" / system).mkdir(parents=True)
        (tmp_path / "translate" / system / "beam12.tok.fr").write_text(
            "".join(h + "\n" for h in lines))
    paths = ClaimsPaths(metrics=tmp_path / "metrics", translate=tmp_path / "translate",
                        prepared=tmp_path / "prepared", out=tmp_path / "claims.json")
    diff = BootstrapDiffs(paths, [])
    # the first output is the baseline: the difference is the second's BLEU minus the first's
    got = diff(Ours("translate", "forward", 12), Ours("translate", "reversed", 12))
    fwd, rev = (corpus_bleu_tok(hyps[s], refs).score for s in ("forward", "reversed"))
    assert 0 < fwd < rev < 100
    assert (got.baseline, got.system) == pytest.approx((fwd, rev), abs=1e-9)
    assert got.delta == pytest.approx(rev - fwd, abs=1e-9)
    assert got.lo <= got.delta <= got.hi and got.hi > 0
    assert diff(Ours("translate", "forward", 1), Ours("translate", "forward", 12)) is None
    assert diff.missing == [str(tmp_path / "translate" / "forward" / "beam1.tok.fr")]
    bleu = _bleu({"translate": {"forward": {"1": _entry(10.0), "12": _entry(11.0)},
                                "reversed": {"12": _entry(13.5)}}, "rescore": {}})
    found = check_all(params, ClaimInputs(bleu=bleu, train={}, timing={}, analysis=None,
                                          cost=None, diff=BootstrapDiffs(paths, []), read=[]))
    assert found.intervals is False  # the wider beam's forward beam 1 has no hypotheses here


def test_conditions_every_row_shares_are_stated_once():
    df = pd.DataFrame({"method": ["a", "b", "c"],
                       "our conditions": ["3 pairs; 1 model; vocab 5/6; beam 12",
                                          "3 pairs; 5 models; vocab 5/6; beam 2", ""]})
    lead, shown = bleu_tables.split_conditions(df)
    assert lead == "Our conditions in every row: 3 pairs; vocab 5/6."
    assert shown["conditions of this row"].tolist() == ["1 model; beam 12", "5 models; beam 2", ""]


RESCORING = "Rescoring the baseline's n-best lists with LSTMs beats the baseline"


def test_rescoring_claim_counts_only_lstm_rescorers():
    # rescorers forward, reversed, ensemble5, gru, and the replicas forward_2, forward_3,
    # reversed_2, reversed_3 (not scored here at first)
    params = load(ROOT / "profiles" / "default.yaml")
    bleu = {"translate": {}, "rescore": {"baseline": _entry(13.0), "forward": _entry(13.2),
                                         "reversed": _entry(12.9), "ensemble5": _entry(13.4),
                                         "gru": _entry(30.0)}}
    got = {c.claim.split(" (")[0]: c
           for c in claims_.claims(params, _bleu(bleu), {}, {})}
    resc = got[RESCORING]
    # no paired bootstraps: the point values are the evidence, and no verdict
    assert resc.status == "cannot tell" and "higher for 2 of 3 rescorers" in resc.evidence
    assert resc.evidence.endswith("; " + verdicts.NO_BOOTSTRAP)  # why, in the evidence
    assert "gru" not in resc.evidence  # a GRU model is not the paper's LSTM
    from s2s.evaluate.significance import Difference

    intervals = {"forward": (0.1, 0.3), "reversed": (-0.5, -0.1), "ensemble5": (0.2, 0.6),
                 "gru": (-9.0, -8.0)}  # the GRU's would make it fail, were it counted

    def diff(a, b):
        lo, hi = intervals[b.system]
        return Difference(0, 0, (lo + hi) / 2, lo, hi, 0.5, 0, 0, 0, 0, 1000, 1)

    # one run each: reversed's significant loss is no verdict without its replicas
    got = _by_text(claims_.claims(params, _bleu(bleu), {}, {}, diff=diff))
    resc = got[RESCORING]
    assert resc.status == "cannot tell" and "95% CI -0.50 to -0.10" in resc.evidence
    # with them, every reversed replica below the 1-best: does not hold
    bleu["rescore"] |= {"forward_2": _entry(13.3), "forward_3": _entry(13.25),
                        "reversed_2": _entry(12.85), "reversed_3": _entry(12.88)}
    got = _by_text(claims_.claims(params, _bleu(bleu), {}, {}, diff=diff))
    assert got[RESCORING].status == "does not hold"
    assert "higher for 4 of 7 rescorers" in got[RESCORING].evidence
    # every replica above: forward and reversed hold, but the ensemble (one run against the
    # 1-best's one run) has no interval over seeds, so the claim has no verdict
    bleu["rescore"] |= {"reversed": _entry(13.3), "reversed_2": _entry(13.35),
                        "reversed_3": _entry(13.32)}
    intervals["reversed"] = (0.05, 0.2)
    got = _by_text(claims_.claims(params, _bleu(bleu), {}, {}, diff=diff))
    assert got[RESCORING].status == "cannot tell"
    assert got[RESCORING].evidence.endswith("; ensemble5: " + NO_RESCORER_INTERVAL)


def _rescored(tmp_path, edit=None):
    """The seeded fixture (three forward and three reversed replicas, each a one-model system)
    with each replica a rescorer too, named as its system; `edit` changes the raw file first."""
    import yaml

    raw = yaml.safe_load(_seeded(tmp_path).source.read_text())
    for name in ("forward_2", "forward_3", "reversed_2", "reversed_3"):
        raw["rescore"]["rescorers"][name] = [name]
    if edit:
        edit(raw)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return load(path)


def test_one_rescorer_against_the_baseline_has_no_verdict_however_clear_its_bootstrap():
    """One forward LSTM rescoring the baseline's lists (the published run's case), significantly
    worse on the test sentences: one run against one run says nothing of another run of the
    recipe, so no verdict (it said 'does not hold' on the bootstrap alone)."""
    params = load(FIXTURE)
    bleu = {"translate": {}, "rescore": {"baseline": _entry(13.0), "forward": _entry(10.0)}}
    got = claims_.rescoring(params, _bleu(bleu), _interval(-3.9, -2.2))
    assert got.status == verdicts.UNKNOWN
    assert got.evidence == ("higher for 0 of 1 rescorers (baseline 1-best 13.00; forward 10.00 "
                            "(-3.00, 95% CI -3.90 to -2.20)); forward: " + NO_RESCORER_INTERVAL)
    # a bootstrap interval holding 0 still says so
    assert claims_.rescoring(params, _bleu(bleu), _interval(-0.5, 0.4)).status == \
        verdicts.NO_DIFFERENCE


def test_rescorers_without_their_bootstrap_have_no_verdict_and_say_that_is_what_is_missing(
        tmp_path):
    """The replicas' interval over seeds is there, the bootstrap is not (its files missing): no
    verdict, and the evidence names the bootstrap, not a missing interval over seeds."""
    params = _rescored(tmp_path)
    scores = {"baseline": 13.0, "forward": 14.0, "forward_2": 14.5, "forward_3": 13.8,
              "reversed": 15.0, "reversed_2": 15.2, "reversed_3": 14.7}
    bleu = {"translate": {}, "rescore": {n: _entry(x) for n, x in scores.items()}}
    got = claims_.rescoring(params, _bleu(bleu), lambda a, b: None)
    assert got.status == verdicts.UNKNOWN
    assert "95% interval over 3 replicas against one run" in got.evidence
    assert NO_RESCORER_INTERVAL not in got.evidence
    assert got.evidence.endswith(verdicts.NO_BOOTSTRAP)


def test_a_replica_with_a_second_system_at_other_beams_stays_in_the_wider_beam_group(tmp_path):
    """forward_2's model has a system at beam 12 only, listed first, and forward_2_b at beams 1
    and 12: the group of replicas decoded at both beams takes forward_2_b (it was left alone,
    without an interval, and the claim could not be judged)."""
    import yaml

    params = _seeded(tmp_path)
    raw = yaml.safe_load(params.source.read_text())
    raw["systems"]["forward_2"]["beams"] = [12]
    raw["systems"]["forward_2_b"] = {"members": ["forward_2"], "beams": [1, 12]}
    for name in ("reversed", "reversed_2", "reversed_3"):
        raw["systems"][name]["beams"] = [12]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    params = load(tmp_path / "params.yaml")
    gains = {"forward": (10.0, 11.0), "forward_2_b": (10.2, 11.0), "forward_3": (9.9, 10.8)}
    bleu = {"translate": {s: {"1": _entry(a), "12": _entry(b)} for s, (a, b) in gains.items()},
            "rescore": {}}
    got = claims_.wider_beam(params, _bleu(bleu), _interval(0.3, 1.5))
    assert got.status == verdicts.HOLDS
    assert ", forward_3 9.90 -> 10.80, forward_2_b 10.20 -> 11.00, over seeds" in got.evidence
    assert "(95% interval over 3 seed pairs" in got.evidence


def test_rescorers_that_are_seed_replicas_are_judged_over_their_seeds(tmp_path):
    """forward, forward_2, forward_3 (and the three reversed) rescore the baseline's lists: each
    group is one comparison against the baseline's one 1-best, its first rescorer's bootstrap and
    the t-interval over its 3 replicas excluding 0 the same way."""
    params = _rescored(tmp_path)

    def run(forward, reversed_, diff):
        names = ("forward", "forward_2", "forward_3", "reversed", "reversed_2", "reversed_3")
        bleu = {"translate": {}, "rescore": {"baseline": _entry(13.0), **{
            n: _entry(x) for n, x in zip(names, (*forward, *reversed_))}}}
        return claims_.rescoring(params, _bleu(bleu), diff)

    got = run((13.6, 13.9, 13.4), (14.0, 14.4, 13.8), _interval(0.2, 0.9))
    assert got.status == verdicts.HOLDS
    assert ("forward 13.60 (+0.60, 95% CI +0.20 to +0.90), forward_2 13.90 (+0.90), forward_3 "
            "13.40 (+0.40), over seeds: forward/forward_2/forward_3 13.63 +- 0.25 (3 seeds) vs "
            "baseline 1-best 13.00 (1 seed); paired difference +0.63 (95% interval over 3 "
            "replicas against one run") in got.evidence
    assert [(d.label, d.over) for d in got.differences] == [
        ("forward - baseline", "test sentences"),
        ("forward/forward_2/forward_3 - baseline", "3 replicas against one run"),
        ("reversed - baseline", "test sentences"),
        ("reversed/reversed_2/reversed_3 - baseline", "3 replicas against one run")]
    # significant on the test sentences, but one reversed replica falls below the 1-best
    got = run((13.6, 13.9, 13.4), (14.0, 12.0, 13.8), _interval(0.2, 0.9))
    assert got.status == verdicts.NO_DIFFERENCE
    # every replica below, and the bootstrap too: does not hold
    got = run((12.6, 12.2, 12.5), (14.0, 14.4, 13.8), lambda a, b: _interval(
        *((-0.9, -0.2) if b.system == "forward" else (0.2, 0.9)))(a, b))
    assert got.status == verdicts.FAILS
    # a rescorer without replicas beside them (an ensemble: one run) leaves no verdict
    params = _rescored(tmp_path, lambda raw: raw["rescore"]["rescorers"].update(
        ensemble2=["reversed_1", "reversed_2"]))
    bleu = {"translate": {}, "rescore": {"baseline": _entry(13.0), "ensemble2": _entry(14.5), **{
        n: _entry(x) for n, x in zip(("forward", "forward_2", "forward_3", "reversed",
                                      "reversed_2", "reversed_3"),
                                     (13.6, 13.9, 13.4, 14.0, 14.4, 13.8))}}}
    got = claims_.rescoring(params, _bleu(bleu), _interval(0.2, 0.9))
    assert got.status == verdicts.UNKNOWN
    assert got.evidence.endswith("; ensemble2: " + NO_RESCORER_INTERVAL)


def test_a_rescorer_sharing_a_model_with_another_is_in_no_second_group(tmp_path):
    # rev2 rescores with reversed_1, as reversed does: reversed's group takes reversed_2 and
    # reversed_3, and rev2 is a group of its own (it took reversed_2 and reversed_3 again)
    params = _rescored(tmp_path, lambda raw: raw["rescore"]["rescorers"].update(
        rev2=["reversed_1"]))
    names = ("forward", "forward_2", "forward_3", "reversed", "reversed_2", "reversed_3", "rev2")
    bleu = {"translate": {}, "rescore": {"baseline": _entry(13.0), **{
        n: _entry(x) for n, x in zip(names, (13.6, 13.9, 13.4, 14.0, 14.4, 13.8, 14.0))}}}
    got = claims_.rescoring(params, _bleu(bleu), _interval(0.2, 0.9))
    assert [d.label for d in got.differences] == [
        "forward - baseline", "forward/forward_2/forward_3 - baseline", "reversed - baseline",
        "reversed/reversed_2/reversed_3 - baseline", "rev2 - baseline"]
    assert got.status == verdicts.UNKNOWN  # rev2 alone: one run against one run
    assert got.evidence.endswith("; rev2: " + NO_RESCORER_INTERVAL)


def test_cost_claim_needs_an_interval_over_interleaved_repetitions():
    from s2s.artifacts import CostTiming, TimedSystem

    params = load(FIXTURE)

    def timing(system: str, beam: int, seconds: float) -> Timing:  # 100 sentences
        return Timing.from_json({"system": system, "members": [system], "device": "cpu",
                                 "threads": 1, "precision": "fp32", "beams": {str(beam): {
                                     "sentences": 100, "seconds": seconds,
                                     "sents_per_sec": 100 / seconds}}})

    costs = {"ensemble5": timing("ensemble5", 2, 8.0), "reversed": timing("reversed", 12, 10.0)}
    c = claims_.cost_claim(params, costs)  # one timing each: numbers, no interval, no verdict
    assert c.status == verdicts.UNKNOWN and "80.0 ms/sentence vs reversed beam 12: 100.0" \
        in c.evidence and "one timing each" in c.evidence

    def timed(ensemble, single):
        return CostTiming(sentences=100, threads=1, precision="bf16", cpu="test CPU", systems=(
            TimedSystem("ensemble5", 2, tuple(ensemble)), TimedSystem("reversed", 12,
                                                                       tuple(single))))

    c = claims_.cost_claim(params, costs, timed([80, 82, 79, 81, 80], [100, 99, 101, 102, 98]))
    assert c.status == verdicts.HOLDS and "5 repetitions in turns on 1 thread" in c.evidence
    assert "difference +19.60 ms (95% interval" in c.evidence
    # the margin of the published run (0.75 ms) inside the spread of the repetitions: no verdict
    c = claims_.cost_claim(params, costs, timed([9.9, 10.4, 9.6, 10.2, 9.8],
                                                [10.6, 9.6, 10.5, 9.9, 10.3]))
    assert c.status == verdicts.NO_DIFFERENCE
    c = claims_.cost_claim(params, costs, timed([120, 121, 119, 122, 120], [100, 99, 101, 102, 98]))
    assert c.status == verdicts.FAILS
    # a cost.json of other systems: the translate stages' numbers, no verdict, and why
    other = CostTiming(sentences=100, threads=4, precision="fp32", cpu="test CPU", systems=(
        TimedSystem("ensemble5", 1, (80.0, 81.0)), TimedSystem("reversed", 12, (90.0, 91.0))))
    c = claims_.cost_claim(params, costs, other)
    assert c.status == verdicts.UNKNOWN and "cost.json has no timing of them" in c.evidence


@pytest.mark.parametrize("edit, says", [
    (lambda d: d["systems"][0].update(ms_per_sentence=[10.0, 11.0]),
     "'systems[1].ms_per_sentence' has 5 repetition(s); expected two or more, as many as "
     "'systems[0]' (2)"),  # the first sets the count: the second's 5 differ
    (lambda d: d["systems"].append(dict(d["systems"][0])),
     "'systems[2]' times ensemble5 at beam 2 again (also 'systems[0]')"),
    (lambda d: d["systems"][1].update(ms_per_sentence=[]), "'systems[1].ms_per_sentence' has 0"),
    (lambda d: d["systems"][1]["ms_per_sentence"].__setitem__(2, float("nan")),
     "'systems[1].ms_per_sentence[2]' must be a positive number of milliseconds, got nan"),
    (lambda d: d.update(sentences=0), "'sentences' must be >= 1, got 0"),
])
def test_a_cost_file_the_claim_could_not_pair_is_refused_naming_the_key(tmp_path, edit, says):
    import json

    from s2s.artifacts import ArtifactError, CostTiming

    data = {"sentences": 100, "threads": 1, "precision": "fp32", "cpu": "test CPU", "systems": [
        {"system": "ensemble5", "beam": 2, "ms_per_sentence": [10.0, 10.5, 9.9, 10.2, 10.1]},
        {"system": "reversed", "beam": 12, "ms_per_sentence": [11.0, 11.5, 10.9, 11.2, 11.1]}]}
    path = tmp_path / "cost.json"
    path.write_text(json.dumps(data))
    assert len(CostTiming.read(path).systems) == 2
    edit(data)
    path.write_text(json.dumps(data))
    with pytest.raises(ArtifactError) as e:
        CostTiming.read(path)
    assert str(e.value).startswith(f"{path}: ") and says in str(e.value)


def test_the_reach_text_says_more_or_less_only_where_norm_and_share_agree(tmp_path,
                                                                          monkeypatch):
    import types

    from s2s.report.sections.analysis import gradient_reach

    monkeypatch.setattr(gradient_reach, "reach_basis", lambda _: types.SimpleNamespace(story="S"))
    monkeypatch.setattr(gradient_reach.figures, "gradient_reach",
                        lambda reach, path, labels: path)

    def verdict(norms, shares) -> str:
        first = pd.DataFrame({"model": ["forward", "reversed_1"], "reverse_source": [False, True],
                              "mean_norm": norms, "mean_share": shares})
        reach = first.assign(position=1, sentences=10)
        meta = types.SimpleNamespace(test=types.SimpleNamespace(reach_sentences=10,
                                                                reach_min_length=5),
                                     gradient_reach=types.SimpleNamespace(definition="D"))
        a = types.SimpleNamespace(reach=reach, meta=meta, reach_first=first, training_diff=None)
        sec = gradient_reach.section(a, tmp_path, "figures")
        return sec.blocks[1].split(": ", 3)[-1].split(" The paper's argument")[0]

    assert verdict([0.374, 0.237], [0.208, 0.165]) == (
        "the reversed model's gradients reach the first source words less strongly once trained.")
    assert verdict([0.2, 0.3], [0.2, 0.3]) == (
        "the reversed model's gradients reach the first source words more strongly once trained.")
    assert verdict([0.374, 0.237], [0.165, 0.208]) == (
        "the norm and the share disagree on whether the reversed model's gradients reach the "
        "first source words more or less strongly once trained (its norm is lower, its share "
        "higher).")


def test_the_table_files_state_what_every_row_shares_and_are_written_atomically(tmp_path,
                                                                                 monkeypatch):
    """tables/table1.md is the table as report.md shows it: its title, the conditions every row
    shares (the table's lead), the rows, the notes; each table file goes through the atomic
    writer (it fsyncs)."""
    import s2s.io

    written = []
    atomic = s2s.io.atomic_write_text

    def record(path, text):
        written.append(Path(path).name)
        return atomic(path, text)

    monkeypatch.setattr(s2s.io, "atomic_write_text", record)
    tree = build_tree(tmp_path)
    render(tree)
    tables = tree["out"] / "tables"
    assert sorted(p.name for p in tables.iterdir()) == sorted(
        n for n in written if n.endswith((".csv", ".md")) and n != "report.md")
    md = (tree["out"] / "report.md").read_text(encoding="utf-8")
    for name in ("table1", "table2"):
        title, lead, *rest = (tables / f"{name}.md").read_text(encoding="utf-8").split("\n\n")
        assert lead.startswith("Our conditions in every row: "), (name, lead)
        assert f"{title}\n\n{lead}\n\n{rest[0]}\n" in md


def test_an_ensemble_is_named_with_its_cell_in_the_plural_and_each_kind_counted():
    from s2s.report import headline

    params = load(ROOT / "profiles" / "default.yaml")
    assert headline._members_words(params, ("reversed_fb1", "reversed_fb1_2", "reversed_fb1_3")) \
        == "ensemble of 3 reversed LSTMs (forget-gate bias 1), 2 x 384"
    assert headline._members_words(params, ("reversed_1", "reversed_2", "forward")) == \
        "ensemble of 3: 2 reversed LSTMs, 2 x 384; 1 forward LSTM, 2 x 384"
    assert headline._members_words(params, ("reversed_fb1",)) == \
        "reversed LSTM (forget-gate bias 1), 2 x 384"


def test_matplotlib_is_imported_only_by_the_report_figures():
    code = ("import sys; import s2s.cli, s2s.stages.evaluate, "
            "s2s.claims.paper_claims, s2s.claims.check, s2s.stages.claims, s2s.report.render, "
            "s2s.report.inputs, s2s.artifacts, s2s.analysis.outputs; "
            "assert 'matplotlib' not in sys.modules, 'matplotlib imported'")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]


# --- no system name is written in the report's code ----------------------------------------------


def _renamed(params_file: Path, out: Path, prefix: str) -> Path:
    """`params_file` with every model, system and rescorer renamed `prefix` + name."""
    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    raw = yaml.load(params_file.read_text())
    ren = lambda n: prefix + n  # noqa: E731
    raw["models"] = {ren(m): v for m, v in raw["models"].items()}
    raw["systems"] = {ren(s): {**v, "members": [ren(m) for m in v["members"]]}
                      for s, v in raw["systems"].items()}
    r = raw["rescore"]
    r["baseline"] = ren(r["baseline"])
    r["rescorers"] = {ren(k): [ren(m) for m in v] for k, v in r["rescorers"].items()}
    rep = raw["report"]
    rep["figure3_system"] = ren(rep["figure3_system"])
    rep["figure3_compare"] = [ren(s) for s in rep.get("figure3_compare", [])]
    for table in ("table1", "table2"):
        for a in rep[table].values():
            if "system" in a:
                a["system"] = ren(a["system"])
            if a.get("rescore") not in (None, "baseline", "oracle"):  # the rescore stage's own
                a["rescore"] = ren(a["rescore"])
    an = raw["analysis"]
    an["models"] = [ren(m) for m in an["models"]]
    an["memory_models"] = [ren(m) for m in an.get("memory_models", [])]
    an["reach_replicas"] = [ren(m) for m in an.get("reach_replicas", [])]
    an["attention_system"] = ren(an["attention_system"])
    if an.get("cross_attention_system"):
        an["cross_attention_system"] = ren(an["cross_attention_system"])
    out.write_text(json.dumps(raw, indent=1))  # JSON is YAML; it keeps every mapping's order
    return out


def test_the_report_names_our_systems_only_through_params(report, tmp_path):
    """Rename every model, system and rescorer of the profile: the report is the same, with the
    new names. No name of ours is written in the report's code (params report.table1/table2
    say which of our outputs answers each of the paper's rows)."""
    prefix = "zq"
    tmp = tmp_path / "renamed"
    tmp.mkdir()
    params_file = _renamed(report["params"].source, tmp_path / "renamed.yaml", prefix)
    global _params_file
    original = _params_file
    _params_file = lambda t: shutil.copy(params_file, t / "params.yaml")  # noqa: E731
    try:
        tree = build_tree(tmp)
    finally:
        _params_file = original
    render(tree)
    for name in sorted(p.name for p in (report["out"] / "tables").iterdir()):
        want = (report["out"] / "tables" / name).read_text()
        got = (tree["out"] / "tables" / name).read_text()
        assert prefix in got or name.startswith(("data", "vocab", "table1_other")), name
        assert got.replace(prefix, "") == want, name
    md = [line for line in (tree["out"] / "report.md").read_text().splitlines()
          if not line.startswith("- parameter file:")]
    want = [line for line in (report["out"] / "report.md").read_text().splitlines()
            if not line.startswith("- parameter file:")]
    assert [line.replace(prefix, "") for line in md] == want


def _setting_params(tmp_path: Path):
    """The fixture with `forward` as the rescored baseline and `ensemble2` answering the
    ensemble-of-5 row: the three systems Table 2's setting compares."""
    text = FIXTURE.read_text(encoding="utf-8")
    for old, new in (("  baseline: reversed\n", "  baseline: forward\n"),
                     ("ensemble5_beam12: {system: ensemble5, beam: 12}",
                      "ensemble5_beam12: {system: ensemble2, beam: 12}")):
        assert old in text
        text = text.replace(old, new)
    path = tmp_path / "params.yaml"
    path.write_text(text, encoding="utf-8")
    return load(path)


def test_baseline_strength_places_the_baseline_between_the_rows(tmp_path):
    params = _setting_params(tmp_path)

    def bleu(base: float):
        return _bleu({"translate": {"forward": {"1": _entry(9.0), "12": _entry(base)},
                                    "reversed": {"12": _entry(11.0)},
                                    "ensemble2": {"12": _entry(13.0)}}})

    # without the paired bootstraps (no hypothesis files), the point values are the evidence
    # and no verdict: the baseline placed between the rows, above or below them alike
    got = claims_.baseline_strength(params, bleu(12.0))
    assert got.claim.endswith("(paper: 30.59 < 33.30 < 34.81)")
    assert got.status == verdicts.UNKNOWN
    assert got.evidence == ("forward beam 12 12.00: +1.00 against reversed beam 12 (11.00), "
                            "-1.00 against ensemble2 beam 12 (13.00); forward beam 12 - reversed "
                            "beam 12 and ensemble2 beam 12 - forward beam 12: "
                            + NO_BASELINE_INTERVAL + "; " + verdicts.NO_BOOTSTRAP)
    assert claims_.baseline_strength(params, bleu(13.5)).status == verdicts.UNKNOWN
    assert claims_.baseline_strength(params, bleu(10.5)).status == verdicts.UNKNOWN

    from s2s.evaluate.significance import Difference

    def diff(intervals):  # (a, b) -> b - a with the interval given for that pair
        def f(a, b):
            lo, hi = intervals[(a.system, b.system)]
            return Difference(0, 0, (lo + hi) / 2, lo, hi, 0.5, 0, 0, 0, 0, 1000, 1)
        return f

    sure = {("reversed", "forward"): (0.2, 1.8), ("forward", "ensemble2"): (0.4, 1.6)}
    got = claims_.baseline_strength(params, bleu(12.0), diff(sure))
    # significant on the test sentences, but the baseline, the reversed model and the ensemble
    # are one run each: no interval over seeds, no verdict
    assert got.status == verdicts.UNKNOWN
    # the second interval is of ensemble2 - forward; the evidence gives it as forward - ensemble2
    assert "(11.00; 95% CI +0.20 to +1.80)" in got.evidence
    assert "(13.00; 95% CI -1.60 to -0.40)" in got.evidence
    unsure = {**sure, ("forward", "ensemble2"): (-0.3, 2.3)}
    assert claims_.baseline_strength(params, bleu(12.0), diff(unsure)).status == \
        verdicts.NO_DIFFERENCE
    wrong = {**sure, ("reversed", "forward"): (-1.9, -0.1)}
    assert claims_.baseline_strength(params, bleu(12.0), diff(wrong)).status == verdicts.UNKNOWN

    # a hypothesis file missing (diff gives None): no verdict, and no interval claimed
    got = claims_.baseline_strength(params, bleu(13.5), lambda a, b: None)
    assert got.status == verdicts.UNKNOWN and "CI" not in got.evidence
    assert got.evidence.endswith("; " + verdicts.NO_BOOTSTRAP)
    # one missing beside one whose interval holds 0: that one decides
    got = claims_.baseline_strength(params, bleu(12.0), lambda a, b: None if b.system ==
                                    "ensemble2" else diff(unsure | {("reversed", "forward"):
                                                                    (-0.3, 0.4)})(a, b))
    assert got.status == verdicts.NO_DIFFERENCE and verdicts.NO_BOOTSTRAP not in got.evidence

    missing = _bleu({"translate": {"forward": {"12": _entry(12.0)}}})
    got = claims_.baseline_strength(params, missing)
    assert got.status == verdicts.UNKNOWN
    assert got.evidence == "not scored: reversed beam 12, ensemble2 beam 12"


def test_baseline_strength_is_judged_over_the_seeds_of_each_side_against_the_baseline(tmp_path):
    """The seeded fixture, with the ensemble of two as the rescored baseline (one run) between the
    forward replicas (the weaker row) and the reversed ones (the stronger): each difference needs
    its bootstrap and the t-interval over the other side's 3 replicas against the one run."""
    import yaml

    raw = yaml.safe_load(_seeded(tmp_path).source.read_text())
    raw["systems"]["ensemble2"]["nbest"] = 12
    raw["rescore"]["baseline"] = "ensemble2"
    raw["report"]["table1"]["reversed_beam12"] = {"system": "forward", "beam": 12}
    raw["report"]["table1"]["ensemble5_beam12"] = {"system": "reversed", "beam": 12}
    path = tmp_path / "setting.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    params = load(path)

    def bleu(forward, reversed_):
        translate = {"ensemble2": {"12": _entry(12.0)}}
        for side, values in (("forward", forward), ("reversed", reversed_)):
            translate |= {s: {"12": _entry(x)} for s, x in zip(
                (side, f"{side}_2", f"{side}_3"), values)}
        return _bleu({"translate": translate, "rescore": {}})

    got = claims_.baseline_strength(params, bleu((11.0, 11.2, 10.9), (13.0, 13.3, 13.1)),
                                    _interval(0.3, 1.5))
    assert got.status == verdicts.HOLDS
    assert ("over seeds: ensemble2 beam 12 12.00 (1 seed) vs forward beam 12 11.03 +- 0.15 (3 "
            "seeds); paired difference +0.97 (95% interval over 3 replicas against one run")\
        in got.evidence
    assert [(d.label, d.over) for d in got.differences] == [
        ("ensemble2 beam 12 - forward beam 12", "test sentences"),
        ("ensemble2 beam 12 - forward beam 12", "3 replicas against one run"),
        ("reversed beam 12 - ensemble2 beam 12", "test sentences"),
        ("reversed beam 12 - ensemble2 beam 12", "3 replicas against one run")]
    # significant on the test sentences, but a forward replica above the baseline
    got = claims_.baseline_strength(params, bleu((11.0, 12.6, 10.9), (13.0, 13.3, 13.1)),
                                    _interval(0.3, 1.5))
    assert got.status == verdicts.NO_DIFFERENCE
    # every reversed replica below the baseline, and its bootstrap too: does not hold
    got = claims_.baseline_strength(params, bleu((11.0, 11.2, 10.9), (11.0, 11.3, 11.1)),
                                    lambda a, b: _interval(*((0.3, 1.5) if a.system == "forward"
                                                             else (-1.5, -0.3)))(a, b))
    assert got.status == verdicts.FAILS


def test_table2_says_where_the_baseline_falls(report):
    md = (report["out"] / "report.md").read_text(encoding="utf-8")
    params, bleu = report["params"], report["bleu"]["translate"]
    base = params.rescore.baseline
    beam = max(params.systems[base].beams)
    b, r = bleu[base][str(beam)]["bleu_tok"], bleu["reversed"]["12"]["bleu_tok"]
    line = next(ln for ln in md.splitlines() if ln.startswith("Table 2's setting:"))
    assert "(paper: 30.59 \\< 33.30 \\< 34.81); the paper's is phrase-based SMT" in line
    assert f"Our baseline is {bleu_tables.baseline_text(params)}. Ours: " in line
    system = params.systems[base]
    assert bleu_tables.baseline_text(params).endswith(
        f"its {system.nbest}-best lists at beam {beam}")
    assert f"{base} beam {beam} {b:.2f}: {b - r:+.2f} against reversed beam 12 ({r:.2f}" in line
    assert line.endswith(("Verdict: holds at this scale.", "Verdict: does not hold at this scale.",
                          "Verdict: no significant difference.", "Verdict: cannot tell."))


def test_the_report_renders_the_claims_stage_verdicts_and_recomputes_none(report, tmp_path):
    # The claims stage's claims.json is what the report shows: an edited verdict shows as edited
    # (the report recomputes no claim), and its verdicts file is the claims' own.
    import json

    claims = report["out"].parent / "claims.json"
    found = json.loads(claims.read_text())
    assert [c["key"] for c in found["claims"]][:6] == [
        "reversal_perplexity", "reversal_bleu", "ensemble", "wider_beam", "rescoring", "cost"]
    assert found["setting"]["key"] == "baseline_strength" and found["intervals"] is False
    found["claims"][1]["evidence"] = "EDITED NUMBERS"
    edited = tmp_path / "claims.json"
    edited.write_text(json.dumps(found))
    out = tmp_path / "reports"
    report_main(report["params"], report_paths(report, claims=edited, out=out))
    assert "EDITED NUMBERS" in (out / "report.md").read_text()
    assert "EDITED NUMBERS" not in (report["out"] / "report.md").read_text()
    with pytest.raises(FileNotFoundError, match="run the claims stage first"):
        report_main(report["params"], report_paths(report, claims=tmp_path / "none.json",
                                                   out=out, attention=None))


def test_the_markdown_shows_the_corpus_text_as_written():
    """A translation's <unk> (and any <tag> or &entity; a corpus holds) is text in report.md, not
    HTML a Markdown renderer drops; a code span is left as it is."""
    markdown_it = pytest.importorskip("markdown_it")
    out = "Un chien <unk> dehors, «&quot;» <b>R&D</b>"
    doc = render_.Document("T", [render_.Section("S", [
        "Prose: read as <unk>; files `metrics/train/<model>.json`.",
        render_.Table("Outputs", pd.DataFrame({"system": ["a|b"], "output": [out]}),
                      notes=("a note on <unk>",)),
        render_.Bullets(("x < y",))])])
    md = render_.to_markdown(doc, contents=False)
    assert "files `metrics/train/<model>.json`" in md  # a code span is not escaped
    assert "| a\\|b | Un chien \\<unk> dehors, «\\&quot;» \\<b>R&D\\</b> |" in md
    page = markdown_it.MarkdownIt("commonmark").enable("table").render(md)
    text = html_unescape(page)
    for shown in ("Un chien <unk> dehors, «&quot;» <b>R&D</b>", "read as <unk>;",
                  "a note on <unk>", "x < y", "<code>metrics/train/<model>.json</code>"):
        assert shown in text, shown
    assert "<unk>" not in page and "<b>" not in page  # no tag reaches the page


def test_the_example_translations_show_the_corpus_and_the_models_text_as_written():
    """A sentence of the test set or a system's output is text in report.md, whatever it holds:
    `*vite*`, `_x_`, `~~x~~` and `$x$` are no emphasis, strikethrough or math, `[x](y)` and
    `![i](j)` no link or image, a backtick no code span, `\\<unk>` a backslash and <unk>, `a|b`
    one cell (only `<` and an entity's `&` had been escaped, as in our prose, whose code spans
    are meant); report.html shows the same text."""
    from types import SimpleNamespace

    from s2s.report.sections import examples as examples_section

    markdown_it = pytest.importorskip("markdown_it")
    texts = {"source": "A dog `runs` _fast_ ~~now~~ for $5$, a|b ![i](j) C:\\",
             "reference": "Un <b>chien</b> & un chat &amp; *vite* [x](y) \\<unk> fin",
             "forward (beam 12)": "l'homme **gras** \\*x\\* <unk> &lt; fin"}
    art = SimpleNamespace(examples=[{
        "line": 3, "words": 12, "source": texts["source"], "reference": texts["reference"],
        "outputs": {"forward (beam 12)": texts["forward (beam 12)"]}}])
    sections = examples_section.sections(SimpleNamespace(art=art))
    doc = render_.Document("T", sections)
    md = render_.to_markdown(doc, contents=False)
    page = markdown_it.MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(md)
    cells = re.findall(r"<td>(.*?)</td>", page, flags=re.S)
    for text in texts.values():
        assert any(html_unescape(c) == text for c in cells), (text, cells)
    table = page[page.index("<table>"):]  # the title above it is ours, in bold
    for markup in ("<em>", "<strong>", "<a ", "<img", "<code>", "<s>", "<b>", "<unk>"):
        assert markup not in table, markup
    assert len(re.findall(r"<tr>", table)) == 4 and len(cells) == 6  # a|b split no cell
    html_page = render_.to_html(doc)
    for text in texts.values():
        assert f"<td>{html_escape(text)}</td>" in html_page


def test_an_ensembles_interval_is_over_its_members_not_over_runs():
    """An ensemble is one run, paired with each of its members: the interval of those differences
    has the members' spread only (another ensemble run would move every difference alike), so it
    is labelled as over the replicas against one run, not as over seed pairs."""
    from s2s.claims.seeds import SeedStats

    one_run = SeedStats(worse=(20.9, 21.4, 20.5), better=(25.0,), diffs=(4.1, 3.6, 4.5))
    assert one_run.one_run and one_run.over == "3 replicas against one run"
    assert one_run.describe("ensemble5", "reversed") == (
        "over seeds: ensemble5 25.00 (1 seed) vs reversed 20.93 +- 0.45 (3 seeds); paired "
        "difference +4.07 (95% interval over 3 replicas against one run +2.95 to +5.19)")
    paired = SeedStats(worse=(9.0, 9.3, 8.9), better=(7.0, 7.2, 6.8), diffs=(2.0, 2.1, 2.1))
    assert not paired.one_run and paired.over == "3 seed pairs"
    single = SeedStats(worse=(9.0,), better=(7.0,), diffs=(2.0,))
    assert not single.one_run and single.over == "1 seed pair"


def test_the_t_quantile_beyond_the_table_is_students_not_the_normals():
    """Beyond 30 degrees of freedom an interval over seeds (or repetitions) is still Student's t:
    the normal's 1.96 made it some 4% too narrow at 31. The computed quantile agrees with the
    printed table below that."""
    from s2s.claims.seeds import T975, t975, t_quantile

    for df, want in ((31, 2.0395), (60, 2.0003), (120, 1.9799), (1000, 1.9623)):
        assert round(t975(df), 4) == want, df
    for df in range(1, 31):
        assert t975(df) == T975[df - 1]
        assert round(t_quantile(0.975, df), 3) == T975[df - 1], df
    assert 1.95996 < t975(10**6) < 1.96000  # the normal's 0.975 quantile, 1.959964, in the limit
    with pytest.raises(ValueError, match="1 or more"):
        t975(0)


def test_the_length_drop_is_labelled_with_what_its_file_compares_and_the_note_with_the_models():
    """A length_drop.csv compares each drop with the evaluate stage's figure3_system
    (ensemble5 in the published run); read under params whose figure3_system is another
    (as quick's: reversed against forward), the column still names ensemble5, and the note does
    not say that attention models are drawn when the compared models are LSTMs."""
    import types

    from s2s.report.sections import figure3

    root = Path(__file__).resolve().parents[1]
    params = load(root / "profiles" / "default.yaml")
    params = dataclasses.replace(params, report=dataclasses.replace(
        params.report, figure3_system="reversed", figure3_compare=("forward",)))
    art = types.SimpleNamespace(length_drop=pd.read_csv(
        root / "reports" / "default" / "metrics" / "length_drop.csv", keep_default_na=False,
        dtype={"beam": str}))
    table = figure3.length_drop_table(params, art)
    column = "drop minus ensemble5's (95% CI)"
    assert column in table.columns
    rows = dict(zip(table["system"], table[column]))
    assert rows["forward beam 12"] == "-14.82 (-22.66 to -8.18)"  # forward - ensemble5
    P = figure3.prose("figure3")
    attend, fixed = figure3.looking_back(params, params.report.figure3_compare)
    assert (attend, fixed) == ([], ["forward"])
    assert "no model that looks back" in P.length_drop_note(attend, fixed)


def _figure3_ctx(tmp_path, compare: tuple[str, ...], *, groups: bool = True):
    """figure3.sections' context on the published run's groups, BLEU and length drops, with
    report.figure3_compare as given (and no groups where `groups` is false)."""
    import types

    from s2s.report.sections import Context

    run = ROOT / "reports" / "default"
    params = load(ROOT / "profiles" / "default.yaml")
    params = dataclasses.replace(params, report=dataclasses.replace(
        params.report, figure3_compare=compare))
    g = pd.read_csv(run / "metrics" / "figure3.csv", keep_default_na=False, dtype={"beam": str})
    art = types.SimpleNamespace(
        groups=g if groups else g.iloc[:0],
        bleu=Bleu.from_json(json.loads((run / "metrics" / "bleu.json").read_text())),
        length_drop=pd.read_csv(run / "metrics" / "length_drop.csv", keep_default_na=False,
                                dtype={"beam": str}))
    return Context(params, art, tmp_path)


def test_the_length_drop_note_names_the_compared_systems_that_look_back_at_the_source(tmp_path):
    """The note names the compared systems that attend to the source, from
    report.figure3_compare, and those that read it into one fixed vector; 'no model that looks
    back' only where none does."""
    from s2s.report.sections import figure3

    def note(compare):
        [sec] = figure3.sections(_figure3_ctx(tmp_path, compare))
        [table] = [b for b in sec.blocks if isinstance(b, render_.Table)]
        return table.notes[0].split(" The drop is")[0]

    assert note(("attention", "transformer", "gru")) == (
        "The paper's model reads the source into one fixed vector, and so does gru; attention "
        "(Bahdanau et al.'s attention model) and transformer (a Transformer) look back at every "
        "source word (neither trained by the paper; both trained here on the same data).")
    assert note(("transformer",)) == (
        "The paper's model reads the source into one fixed vector; transformer (a Transformer) "
        "looks back at every source word (not trained by the paper; trained here on the same "
        "data).")
    assert note(("gru", "forward")) == (
        "The paper's model reads the source into one fixed vector, and so does every model it is "
        "compared with here: no model that looks back at the source words is drawn "
        "(report.figure3_compare).")


def test_without_figure3_groups_the_text_says_the_length_drop_table_it_shows(tmp_path):
    """No groups, a length_drop.csv: the table is shown, and the text does not say it is not."""
    from s2s.report.sections import figure3

    [sec] = figure3.sections(_figure3_ctx(tmp_path, ("attention",), groups=False))
    assert sec.blocks[0] == (
        "No Figure 3: the evaluate stage's groups of test sentences (figure3.csv) were absent or "
        "held no rows, so the figure below has no curves; the length-drop table under it is the "
        "evaluate stage's length_drop.csv, which does not rest on those groups.")
    assert [b.key for b in sec.blocks if isinstance(b, render_.Table)] == ["length"]
    ctx = _figure3_ctx(tmp_path, ("attention",), groups=False)
    ctx.art.length_drop = None  # neither: the table is not made, and the text says so
    [sec] = figure3.sections(ctx)
    assert sec.blocks[0].endswith("so the figure below has no curves and the length-drop table "
                                  "is not made.")
    assert not [b for b in sec.blocks if isinstance(b, render_.Table)]


def test_figure3_draws_every_curve_past_the_fourth(tmp_path, monkeypatch):
    """Six curves: six lines on each panel, each in a style of its own (none dropped)."""
    from matplotlib.axes import Axes

    from s2s.report import figures

    drawn = []
    plot = Axes.plot

    def record(self, *args, **kwargs):
        drawn.append((kwargs.get("label"), kwargs.get("color"), kwargs.get("marker")))
        return plot(self, *args, **kwargs)

    monkeypatch.setattr(Axes, "plot", record)
    rows = [{"system": f"s{i}", "beam": "12", "axis": axis, "label": f"{lo}-{lo + 5}",
             "mean": lo + 2.5, "bleu": 20.0 - i - g}
            for i in range(6) for axis in ("length", "rarity") for g, lo in enumerate((1, 10))]
    curves = [(f"curve {i}", f"s{i}", "12") for i in range(6)]
    figures.figure3(pd.DataFrame(rows), curves, tmp_path / "f3.png")
    labels = [label for label, _, _ in drawn]
    assert labels == [f"curve {i}" for i in range(6)] * 2
    assert len({(c, m) for _, c, m in drawn}) == 6

