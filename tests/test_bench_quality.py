"""bench/quality.py: its params file trains what it says, and its table pairs runs on seeds."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from s2s.config import load as load_params

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import quality  # noqa: E402


def test_params_pair_the_precisions_on_seeds(tmp_path):
    names = quality.write_params(tmp_path, ROOT / "params.yaml", ["rev", "fwd"], ["fp32", "auto"],
                                 [11, 12])
    assert names == ["q_rev_fp32_s11", "q_rev_auto_s11", "q_rev_fp32_s12", "q_rev_auto_s12",
                     "q_fwd_fp32_s11", "q_fwd_auto_s11", "q_fwd_fp32_s12", "q_fwd_auto_s12"]
    p = load_params(tmp_path / "params.yaml")  # valid params, as `s2s train` reads them
    fp32, auto = p.train_config("q_rev_fp32_s12"), p.train_config("q_rev_auto_s12")
    assert (fp32.amp, auto.amp, fp32.threads) == (False, "auto", 1)
    a, b = p.model_config("q_rev_fp32_s12"), p.model_config("q_rev_auto_s12")
    assert a == b and (a.init_seed, a.order_seed, a.reverse_source) == (12, 112, True)
    assert p.model_config("q_fwd_auto_s11").reverse_source is False
    assert p.model_config("q_fwd_auto_s11") == p.model_config("forward")  # the profile's seed 11
    assert p.translate.amp is False and p.systems["q_fwd_fp32_s11"].members == ("q_fwd_fp32_s11",)


def test_params_refuse_another_profile(tmp_path):
    params = tmp_path / "other.yaml"
    params.write_text(yaml.safe_dump({**yaml.safe_load((ROOT / "params.yaml").read_text()),
                                      "profile": "wmt14"}))
    with pytest.raises(SystemExit, match="other.yaml: profile 'wmt14'"):
        quality.write_params(tmp_path, params, ["rev"], ["fp32"], [11])


def _run(out: Path, name: str, dev: float) -> None:
    path = out / "metrics" / "train" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"model": name, "precision": "fp32" if "fp32" in name else "bf16",
                                "tgt_words_per_sec": 2000.0, "train_seconds": 1200.0,
                                "dev_ppl": dev, "best_dev_ppl": dev, "test_ppl": dev - 1}))


def test_table_pairs_runs_on_their_seeds(tmp_path):
    _run(tmp_path, "q_rev_fp32_s11", 8.0)
    _run(tmp_path, "q_rev_auto_s11", 8.4)  # +5.0%
    _run(tmp_path, "q_rev_fp32_s12", 10.0)
    _run(tmp_path, "q_rev_auto_s12", 9.8)  # -2.0%
    _run(tmp_path, "q_fwd_fp32_s11", 12.0)  # its auto twin has not run: no fwd summary row
    text = quality.report(tmp_path, None, ["rev", "fwd"], ["fp32", "auto"], [11, 12])
    lines = text.splitlines()
    assert any(line.startswith("q_fwd_auto_s11") and "not run" in line for line in lines)
    summary = [line for line in lines if line.startswith("rev ")]
    assert len(summary) == 1 and not any(line.startswith("fwd ") for line in lines)
    # means 9.000 and 9.100; per seed +5.0% and -2.0%; of the means +1.1%
    assert summary[0].split() == ["rev", "11,12", "9.000", "9.100", "+5.0%", "-2.0%", "+1.1%"]


def test_the_commands_it_runs_are_ones_the_cli_takes(tmp_path, monkeypatch):
    """Each training and decoding command parses as `s2s` parses it (the train stage reads the
    ids, translate the prepared text), and points at the data folder's ids and vocabularies."""
    from s2s.cli import build_parser

    asked: list[list[str]] = []
    monkeypatch.setattr(quality, "run_jobs",
                        lambda out, jobs, n, what: asked.extend(cmd for _, cmd, _ in jobs))
    data = tmp_path / "data"
    quality.train_and_decode(tmp_path / "out", data, ["rev_fp32_11"], jobs=1)
    assert [cmd[0] for cmd in asked] == ["train", "translate"]
    for cmd in asked:
        args = build_parser().parse_args(cmd)  # argparse exits on a flag the stage lacks
        assert args.vocab == data / "vocab"
    train, translate = (build_parser().parse_args(cmd) for cmd in asked)
    assert train.ids == data / "ids" and translate.prepared == data / "prepared"
