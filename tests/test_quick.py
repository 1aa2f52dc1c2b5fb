"""The `quick` profile: the paper's reversal claim on forward and reversed 2x384 LSTMs paired on
their seeds, with only the stages that claim needs (no training here: params and DAG only), and
a profile without the ensemble, the baseline or rescoring gets "not run in this profile" for the
claims it cannot test, never a verdict."""

from pathlib import Path

import pytest

from s2s import config, pipeline
from s2s.artifacts import Bleu, Scored
from s2s.claims import paper_claims, seeds
from s2s.claims.verdicts import NOT_RUN, UNKNOWN
from s2s.profiles import profile_text

ROOT = Path(__file__).resolve().parents[1]
QUICK = ROOT / "profiles" / "quick.yaml"
PAIRS = [("forward", "reversed"), ("forward_2", "reversed_2"), ("forward_3", "reversed_3")]


@pytest.fixture(scope="module")
def quick():
    return config.load(QUICK)


def test_the_quick_profile_validates_and_its_written_file_is_complete(tmp_path, quick):
    out = tmp_path / "params.yaml"
    out.write_text(profile_text(QUICK), encoding="utf-8")
    config.require_complete(out)
    assert config.load(out).models == quick.models
    assert quick.profile == "quick" and quick.rescore.baseline is None


def test_its_dag_has_exactly_the_stages_of_the_reversal_claim(quick):
    names = [s.name for s in pipeline.generate(quick)]
    models = ["forward", "forward_2", "forward_3", "reversed_1", "reversed_2", "reversed_3"]
    systems = ["forward", "reversed", "forward_2", "forward_3", "reversed_2", "reversed_3"]
    assert names == (["check-params", "download", "prepare", "vocab", "ids"]
                     + [f"train-{m}" for m in models] + [f"translate-{s}" for s in systems]
                     + ["evaluate", "summary", "export", "analyze", "claims", "report"])
    stages = {s.name: s for s in pipeline.generate(quick)}
    # nothing rescored, so no stage reads or passes outputs/rescore
    assert not any("outputs/rescore" in " ".join((s.cmd, *s.deps)) for s in stages.values())


def test_forward_and_reversed_are_2x384_lstms_paired_on_three_seed_pairs(quick):
    for fwd, rev in PAIRS:
        (f,), (r,) = quick.systems[fwd].members, quick.systems[rev].members
        for c in (quick.model_config(f), quick.model_config(r)):
            assert (c.cell, c.num_layers, c.hidden_size, c.embed_size) == ("lstm", 2, 384, 384)
        assert seeds.differences(quick, f, r) == ["reverse_source"]  # same seeds: paired
    # three pairs: a 95% t-interval over seeds with 2 degrees of freedom
    value = {"forward": 30.0, "forward_2": 31.0, "forward_3": 29.5,
             "reversed": 27.0, "reversed_2": 28.5, "reversed_3": 26.0}
    stats = seeds.paired(quick, "reversed", "forward", value.get)  # forward - reversed
    assert stats.pairs == 3 and stats.diffs == (3.0, 2.5, 3.5)
    lo, hi = stats.interval
    assert lo == pytest.approx(3.0 - 4.303 * 0.5 / 3 ** 0.5, abs=1e-3) and lo > 0


def test_the_claims_it_cannot_test_are_not_run_and_the_others_wait_for_numbers(quick):
    empty = Bleu(test_sentences=1000, bleu_tok_method="m", bleu_tok_signature="s",
                 translate={}, rescore={})
    got = {c.key: c.status for c in paper_claims.claims(quick, empty, {}, {})}
    assert got == {"reversal_perplexity": UNKNOWN, "reversal_bleu": UNKNOWN,
                   "ensemble": NOT_RUN, "wider_beam": NOT_RUN, "rescoring": NOT_RUN,
                   "cost": NOT_RUN}
    assert paper_claims.baseline_strength(quick, empty).status == NOT_RUN
    # with the numbers there, the reversal claim gets a verdict (no intervals without a diff)
    bleu = Bleu(test_sentences=1000, bleu_tok_method="m", bleu_tok_signature="s", rescore={},
                translate={s: {2: Scored(bleu_tok=b, bleu_sacre=b, sacre_signature="x",
                                         sentences=1000)}
                           for s, b in (("forward", 10.0), ("reversed", 14.0),
                                        ("forward_2", 9.0), ("reversed_2", 13.5),
                                        ("forward_3", 10.5), ("reversed_3", 14.5))})
    claim = next(c for c in paper_claims.claims(quick, bleu, {}, {}) if c.key == "reversal_bleu")
    # +4.0, +4.5, +4.0 over the seeds, an interval above 0; no bootstrap over the test sentences
    # (no hypothesis files): no verdict
    assert claim.status == UNKNOWN and "over 3 seed pairs" in claim.evidence
    assert "no paired bootstrap" in claim.evidence


@pytest.mark.parametrize("text, says", [
    ("rescore: {baseline: null, rescorers: {gru: [gru]}}\n",
     "'rescore.rescorers.gru' rescores the baseline's n-best lists, but 'rescore.baseline' is "
     "null"),
    ("rescore: {baseline: null}\nreport: {table1: {baseline: {baseline: true}}}\n",
     "'report.table1.baseline' is answered by the baseline or a rescoring, but"),
])
def test_no_baseline_with_something_that_needs_one_is_refused_naming_the_key(tmp_path, text,
                                                                             says):
    import shutil

    shutil.copytree(ROOT / "profiles", tmp_path / "profiles")
    (tmp_path / "profiles" / "x.yaml").write_text(f"extends: quick\nprofile: x\n{text}",
                                                  encoding="utf-8")
    with pytest.raises(config.ConfigError) as e:
        config.load(tmp_path / "profiles" / "x.yaml")
    assert says in str(e.value)
