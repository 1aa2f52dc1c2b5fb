"""The train stage's snapshots (issue 16, s2s.train.Snapshots): taken at round(E * steps_per_epoch)
before that step's update, the final model excluded, and the same files after a kill and a rerun
(DVC deletes snapshots/<m> and keeps checkpoints/<m>) as from a run from scratch."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path

import pytest
import torch
import yaml

from s2s import checkpoint, config, snapshots, train
from s2s.model import build_model
from s2s.layout import TrainPaths
from s2s.stages import train as train_stage
from helpers import profile_dict, profile_text

ROOT = Path(__file__).resolve().parents[1]


def tiny() -> dict:
    raw = profile_dict("smoke")
    raw["model"].update(num_layers=1, hidden_size=16, embed_size=16)
    raw["train"].update(device="cpu", threads=1, checkpoint_every=4, log_every=8, epochs=1.0,
                        eval_every=0.5, amp=False)
    raw.setdefault("analysis", {})["snapshots"] = [0, 0.25, 0.5, 1, 2]
    return raw


@pytest.fixture(scope="module")
def setup(smoke_data, tmp_path_factory):
    tmp, _ = smoke_data
    work = tmp_path_factory.mktemp("snapshots")
    path = work / "params.yaml"
    path.write_text(yaml.safe_dump(tiny(), sort_keys=False), encoding="utf-8")
    return tmp, work, config.load(path)


def run(params, run_dir: Path, data: Path, **kw) -> None:
    train_stage.main(params, "forward", TrainPaths(
        ids=data / "ids", vocab=data / "vocab", model_dir=run_dir / "models",
        ckpt_dir=run_dir / "checkpoints", metrics=run_dir / "metrics.json",
        curves=run_dir / "curves.csv", snapshots=run_dir / "snapshots"), **kw)


def digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_due_steps_round_and_leave_out_the_end():
    assert snapshots.snapshots_due([2, 0, 0.25, 0.5, 1], steps_per_epoch=10, total_steps=15) == {
        0.0: 0, 0.25: 2, 0.5: 5, 1.0: 10}  # round(2.5) = 2; epoch 2 is past the end
    assert snapshots.snapshot_file(0.25) == "epoch0.25.pt" and snapshots.snapshot_file(1.0) == "epoch1.pt"


def test_every_epoch_has_a_file_of_its_own_and_the_usual_ones_keep_their_names():
    usual = {0: "epoch0.pt", 0.25: "epoch0.25.pt", 0.5: "epoch0.5.pt", 1: "epoch1.pt",
             2.0: "epoch2.pt", 7.5: "epoch7.5.pt"}
    assert {e: snapshots.snapshot_file(e) for e in usual} == usual
    # six significant digits (:g) would give both epoch0.123456.pt: the second overwrote the first
    close = (0.1234561, 0.1234564, 1234567.0, 1234568.0)
    names = [snapshots.snapshot_file(e) for e in close]
    assert names == ["epoch0.1234561.pt", "epoch0.1234564.pt", "epoch1234567.0.pt",
                     "epoch1234568.0.pt"]
    due = snapshots.snapshots_due(close, steps_per_epoch=10_000_000, total_steps=10**15)
    assert len({snapshots.snapshot_file(e) for e in due}) == len(due) == 4


def test_snapshots_are_the_weights_before_that_steps_update_and_a_rerun_writes_the_same(
        setup, caplog):
    data, work, params = setup
    fresh = work / "fresh"
    with caplog.at_level(logging.WARNING, logger="s2s.train"):
        run(params, fresh, data)
    index = snapshots.read_index(fresh / "snapshots")
    spe, total = index.steps_per_epoch, index.total_steps
    assert total == spe and index.final_epoch == 1.0
    assert [(s.epoch, s.step) for s in index.snapshots] == [
        (0.0, 0), (0.25, round(0.25 * spe)), (0.5, round(0.5 * spe))]  # 1 and 2: the end, past it
    assert (f"analysis.snapshots 1, 2: at or past the end of training ({total} steps, {spe} an "
            f"epoch): no snapshot there") in caplog.text  # said, not dropped without a word
    # epoch 0 is the initialisation
    first = checkpoint.load_model(fresh / "snapshots" / "epoch0.pt",
                                  src_vocab=_vocab(data, "en"), tgt_vocab=_vocab(data, "fr"))
    init = build_model(params.model_config("forward"), src_vocab=len(_vocab(data, "en")),
                             tgt_vocab=len(_vocab(data, "fr")), pad=0)
    init.init_weights(params.model_config("forward").init_seed)
    for (k, a), b in zip(first.state_dict().items(), init.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=k)
    payload = checkpoint.load_payload(fresh / "snapshots" / "epoch0.5.pt")
    assert payload["step"] == round(0.5 * spe) and payload["name"] == "forward"

    # killed after the 0.25 snapshot and before the 0.5 one; DVC deletes snapshots/ and models/
    killed = work / "killed"
    stop = round(0.25 * spe) + 2
    with pytest.raises(train.Interrupted):
        run(params, killed, data, stop_after=stop)
    assert not (killed / "snapshots").exists()
    shutil.rmtree(killed / "models")
    with caplog.at_level(logging.INFO, logger="s2s.train"):
        run(params, killed, data)
    assert f"resuming from {killed / 'checkpoints' / 'last.pt'} at step {stop}" in caplog.text
    assert digests(killed / "snapshots") == digests(fresh / "snapshots")

    # a snapshot lost from the checkpoint folder: the resume point is not used
    lost = work / "lost"
    with pytest.raises(train.Interrupted):
        run(params, lost, data, stop_after=stop)
    (lost / "checkpoints" / "snapshots" / "epoch0.25.pt").unlink()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="s2s.train"):
        run(params, lost, data)
    assert "a snapshot before step" in caplog.text and "starting afresh" in caplog.text
    assert digests(lost / "snapshots") == digests(fresh / "snapshots")


def test_only_the_analysed_models_train_stages_take_snapshots(setup, tmp_path):
    import re

    text = profile_text("smoke")  # without analysis.snapshots: the default
    (tmp_path / "params.yaml").write_text(re.sub(r"^  snapshots: .*\n(  +#.*\n)?", "", text,
                                                 flags=re.M))
    params = config.load(tmp_path / "params.yaml")
    assert not re.search(r"^  snapshots:", (tmp_path / "params.yaml").read_text(), flags=re.M)
    by_name = {s.name: s for s in train_stage.stages(params)}
    fwd, rev5 = by_name["train-forward"], by_name["train-reversed_5"]
    assert "--snapshots snapshots/forward" in fwd.cmd
    assert "snapshots/forward" in [o.path for o in fwd.outs]
    # DVC refuses a params key the file lacks: declared only where written
    assert fwd.params == ("model", "models.forward", "train", "prepare.lowercase",
                          "analysis.models")
    assert config.AnalysisConfig.read(config.only(params, fwd.params, stage=fwd.name),
                                      "snapshots") == (0.0, 0.25, 0.5, 1.0, 2.0)
    assert "--snapshots" not in rev5.cmd
    assert rev5.params == ("model", "models.reversed_5", "train", "prepare.lowercase")
    assert sorted(o.path for o in rev5.outs) == [
        "metrics/curves/reversed_5.csv", "metrics/train/reversed_5.json",
        "models/reversed_5"]  # no snapshots
    _, _, written = setup  # a file that writes analysis.snapshots
    fwd = {s.name: s for s in train_stage.stages(written)}["train-forward"]
    assert fwd.params[-2:] == ("analysis.snapshots", "analysis.models")


def _vocab(data: Path, lang: str):
    from s2s.data.vocab import Vocab
    return Vocab.load(data / "vocab" / f"{lang}.tsv")


def test_a_damaged_snapshot_index_is_refused_naming_the_key_or_the_file(tmp_path):
    from s2s.artifacts import ArtifactError

    good = {"steps_per_epoch": 4, "total_steps": 8, "final_epoch": 2.0,
            "snapshots": [{"epoch": 0.0, "step": 0, "file": "epoch0.pt"}]}
    index = tmp_path / snapshots.SNAPSHOT_INDEX
    index.write_text(json.dumps({**good, "snapshots": [{"epoch": 0.0, "step": "0",
                                                         "file": "epoch0.pt"}]}))
    with pytest.raises(ArtifactError, match=r"snapshots.json: 'snapshots\[0\].step' must be an "
                                            r"integer, got str '0'"):
        snapshots.read_index(tmp_path)
    index.write_text(json.dumps(good))
    with pytest.raises(ArtifactError, match=r"lists epoch0.pt, not in"):
        snapshots.read_index(tmp_path)
    (tmp_path / "epoch0.pt").write_bytes(b"")
    assert snapshots.read_index(tmp_path).snapshots[0].file == "epoch0.pt"


def test_a_snapshot_that_cannot_be_read_this_time_stops_the_run_and_nothing_is_cleared(
        setup, tmp_path, monkeypatch):
    """An I/O error on a snapshot says nothing of it: the snapshots and the resume point stay,
    where one found damaged makes the run start afresh and clear them."""
    data, _, params = setup
    run_dir = tmp_path / "run"
    with pytest.raises(train.Interrupted):
        run(params, run_dir, data, stop_after=4)
    work = run_dir / "checkpoints" / "snapshots"
    last = run_dir / "checkpoints" / "last.pt"
    before = digests(work) | {"last.pt": hashlib.sha256(last.read_bytes()).hexdigest()}
    real_load = checkpoint.torch.load

    def eio_on_snapshots(path, *args, **kw):
        if Path(path).name.startswith("epoch"):
            raise OSError(5, "Input/output error")
        return real_load(path, *args, **kw)

    monkeypatch.setattr(checkpoint.torch, "load", eio_on_snapshots)
    with pytest.raises(checkpoint.CheckpointUnread, match=(
            r"epoch0\.pt: cannot read the checkpoint \(OSError: \[Errno 5\] Input/output "
            r"error\); the snapshots and the resume point are kept: rerun the stage")):
        run(params, run_dir, data)
    assert digests(work) | {"last.pt": hashlib.sha256(last.read_bytes()).hexdigest()} == before
    assert set(before) == {"epoch0.pt", "last.pt"}
