"""A resume point is checked whole before a run goes on from it (issue 45): a step beyond the
schedule, a non-finite tensor (weights, best weights, Adam's moments), a tensor of another shape,
best weights claimed with a dev perplexity that is not theirs: each is set aside as
``last.pt.rejected`` with one warning naming it, and the run starts afresh (a resume point is a
cache). And a step out of memory on the CPU (torch's allocator raises a plain RuntimeError) stops
in the one line a torch.OutOfMemoryError gets.

Each case edits a real resume point and re-digests it (s2s.checkpoint.payload_digest), as a bug
of the trainer or a hand would leave it: the digest is intact, its contents impossible.
"""

from __future__ import annotations

import hashlib
import logging
import math
import shutil
from pathlib import Path

import pytest
import torch
import yaml

from s2s import checkpoint, config, precision, train
from s2s.layout import TrainPaths
from s2s.stages import train as train_stage
from helpers import profile_dict


def tiny(**train_changes) -> dict:
    """The smoke profile with a 1x16 model on one thread: 24 steps, evaluated at 12 and 24."""
    raw = profile_dict("smoke")
    raw["model"].update(num_layers=1, hidden_size=16, embed_size=16)
    raw["train"].update(device="cpu", threads=1, checkpoint_every=4, log_every=8, epochs=0.25,
                        eval_every=0.125, **train_changes)
    return raw


def load(raw: dict, path: Path) -> config.Params:
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return config.load(path)


def train_into(params, run_dir: Path, data: Path, **kw) -> dict:
    return train_stage.main(params, "forward", TrainPaths(
        ids=data / "ids", vocab=data / "vocab", model_dir=run_dir / "models" / "forward",
        ckpt_dir=run_dir / "checkpoints" / "forward", metrics=run_dir / "metrics.json",
        curves=run_dir / "curves.csv"), **kw)


def rewrite(path: Path, change) -> None:
    """Edit a checkpoint's entries in place and give it the digest of what it now holds."""
    payload = torch.load(path, map_location="cpu", weights_only=True)
    change(payload)
    payload["digest"] = checkpoint.payload_digest(payload)
    torch.save(payload, path)


@pytest.fixture(scope="module")
def runs(smoke_data, tmp_path_factory):
    """(data, work, params, adam params): a run killed after step 13 (its best weights, of
    step 12, travel with it) and an Adam run killed after step 4 (its moments in the resume
    point)."""
    data, _ = smoke_data
    work = tmp_path_factory.mktemp("resume_points")
    params = load(tiny(), work / "params.yaml")
    adam = load(tiny(optimizer="adam", lr=0.001), work / "adam.yaml")
    with pytest.raises(train.Interrupted):
        train_into(params, work / "killed", data, stop_after=13)
    with pytest.raises(train.Interrupted):
        train_into(adam, work / "adam", data, stop_after=4)
    return data, work, params, adam


def _first(payload: dict, entry: str) -> torch.Tensor:
    state = payload[entry]
    return state[sorted(state)[0]]


def nan_weight(p):
    _first(p, "model")[0] = math.nan


def inf_best_weight(p):
    _first(p, "best_model").view(-1)[3] = math.inf


def nan_adam_moment(p):
    p["optimizer"]["state"][0]["exp_avg_sq"].view(-1)[0] = math.nan


def wider_embedding(p):
    key = next(k for k in p["model"] if "embed" in k)
    t = p["model"][key]
    p["model"][key] = torch.cat([t, t[:1]])


def a_weight_missing(p):
    del p["model"][sorted(p["model"])[-1]]


def another_best_ppl(p):
    p["best_dev_ppl"] = p["best_dev_ppl"] / 2  # lower than any dev perplexity it measured


def beyond_the_schedule(p):
    p["step"] = 30  # of 24: not "a finished run", whose weights would become model.pt


CASES = {  # what is edited -> (the run it is from, the words of the warning)
    "beyond_the_schedule": (beyond_the_schedule, "killed",
                            "step 30 is not within this run's schedule of 24 steps"),
    "nan_weight": (nan_weight, "killed", "holds non-finite values (NaN or inf)"),
    "inf_best_weight": (inf_best_weight, "killed", "'best_model."),
    "nan_adam_moment": (nan_adam_moment, "adam", "'optimizer.state.0.exp_avg_sq'"),
    "wider_embedding": (wider_embedding, "killed", "the model's ("),
    "a_weight_missing": (a_weight_missing, "killed", "'model' lacks the model's weight '"),
    "another_best_ppl": (another_best_ppl, "killed", "not the lowest dev perplexity of its "
                                                     "history"),
}


@pytest.mark.parametrize("case", CASES)
def test_an_impossible_resume_point_is_set_aside_with_one_warning_and_the_run_starts_afresh(
        runs, case, tmp_path, caplog):
    data, work, params, adam = runs
    change, source, says = CASES[case]
    run_dir = tmp_path / "run"
    shutil.copytree(work / source / "checkpoints", run_dir / "checkpoints")
    last = run_dir / "checkpoints" / "forward" / "last.pt"
    rewrite(last, change)
    edited = last.read_bytes()
    with caplog.at_level(logging.INFO, logger="s2s.train"), \
            pytest.raises(train.Interrupted, match="stopped after step 1 "):
        # a fresh start trains step 1 and stops there; a resumed run would go on past it
        train_into(adam if source == "adam" else params, run_dir, data, stop_after=1)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(f"{last}: ") and says in warnings[0], warnings[0]
    assert warnings[0].endswith("; starting afresh (last.pt set aside as last.pt.rejected)")
    assert "resuming" not in caplog.text
    assert (last.with_name("last.pt.rejected")).read_bytes() == edited
    assert checkpoint.load_payload(last)["step"] == 1  # the fresh run's own resume point


def test_a_step_out_of_cpu_memory_stops_in_one_line_as_a_gpu_one_does(runs, tmp_path,
                                                                      monkeypatch):
    """torch's CPU allocator raises a RuntimeError, not torch.OutOfMemoryError: the step that
    meets it stops with the same line (torch's own error, from a real allocation)."""
    data, _, params, _ = runs
    real_step, seen = train.train_step, {}

    def allocates_too_much(model, opt, batch, **kw):
        seen.update(n=batch.src.shape[0], s=batch.src.shape[1], t=batch.tgt_in.shape[1])
        torch.empty(1 << 50, dtype=torch.uint8)  # a PiB: malloc refuses it at once
        return real_step(model, opt, batch, **kw)

    monkeypatch.setattr(train, "train_step", allocates_too_much)
    with pytest.raises(train.TrainingError) as err:
        train_into(params, tmp_path / "oom", data)
    assert str(err.value) == (
        f"forward: out of CPU memory at step 1 on a batch of {seen['n']} pairs, source length "
        f"{seen['s']}, target length {seen['t']} (DefaultCPUAllocator: can't allocate memory: "
        f"you tried to allocate {1 << 50} bytes); lower train.batch_size (now "
        f"{params.train.batch_size}) or prepare.max_len, which bounds the lengths, and rerun: "
        f"the last good checkpoint {tmp_path / 'oom' / 'checkpoints' / 'forward' / 'last.pt'} "
        f"is kept (none written yet)")


def test_an_evaluation_out_of_cpu_memory_stops_in_one_line_too(runs, monkeypatch):
    """The dev perplexity's batches, as a step's: torch's CPU allocator error, from a real
    allocation, is the one line of a torch.OutOfMemoryError."""
    from s2s.data.batching import load_parallel
    from s2s.data.ids import IdCorpus
    from s2s.data.vocab import Vocab
    from s2s.model import build_model

    data, _, params, _ = runs
    src, tgt = (Vocab.load(data / "vocab" / f"{lang}.tsv") for lang in ("en", "fr"))
    pairs = load_parallel(data / "prepared" / "dev.tok", src, tgt)[:3]
    model = build_model(params.model_config("forward"), src_vocab=len(src), tgt_vocab=len(tgt),
                        pad=src.pad)

    def allocates_too_much(*args):
        return torch.empty(1 << 50, dtype=torch.uint8)

    monkeypatch.setattr(model, "features", allocates_too_much)
    with pytest.raises(train.TrainingError) as err:
        train.perplexity(model, IdCorpus.from_pairs(pairs), vocab=tgt,
                         device=torch.device("cpu"))
    assert str(err.value).startswith("perplexity: out of CPU memory on an evaluation batch of 3 "
                                     "pairs, source length ")
    assert f"(DefaultCPUAllocator: can't allocate memory: you tried to allocate {1 << 50} " \
           f"bytes); lower prepare.max_len" in str(err.value)


UNREAD = {  # what torch.load raised: errors of the moment, not of the file's bytes
    "an I/O error": OSError(5, "Input/output error"),
    "no memory to hold it": RuntimeError(
        "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate "
        "memory: you tried to allocate 1073741824 bytes. Error code 12 (Cannot allocate memory)"),
    "Python's MemoryError": MemoryError(),
}


@pytest.mark.parametrize("case", UNREAD)
def test_a_resume_point_that_cannot_be_read_this_time_is_kept_and_the_run_stops(
        runs, case, tmp_path, monkeypatch, caplog):
    """An error of the disk or of memory says nothing of the file: it is neither set aside nor
    trained over, and the stage stops in one line for a rerun to read it again."""
    data, work, params, _ = runs
    run_dir = tmp_path / "run"
    shutil.copytree(work / "killed" / "checkpoints", run_dir / "checkpoints")
    last = run_dir / "checkpoints" / "forward" / "last.pt"
    kept = last.read_bytes()

    def cannot(*args, **kw):
        raise UNREAD[case]

    monkeypatch.setattr(checkpoint.torch, "load", cannot)
    with caplog.at_level(logging.INFO, logger="s2s.train"), \
            pytest.raises(checkpoint.CheckpointUnread) as err:
        train_into(params, run_dir, data, stop_after=1)
    said = {"an I/O error": "OSError: [Errno 5] Input/output error",
            "no memory to hold it": "DefaultCPUAllocator: can't allocate memory: you tried to "
                                    "allocate 1073741824 bytes",
            "Python's MemoryError": "MemoryError"}[case]
    assert str(err.value) == (f"{last}: {'cannot load' if 'memory to' in case else 'cannot read'} "
                              f"the checkpoint ({said}); the resume point is kept: rerun the "
                              f"stage once it can be read")
    assert last.read_bytes() == kept and not last.with_name("last.pt.rejected").exists()
    assert "starting afresh" not in caplog.text and "step 1 " not in caplog.text
    monkeypatch.undo()  # the file was fine: the rerun goes on from it
    with caplog.at_level(logging.INFO, logger="s2s.train"):
        train_into(params, run_dir, data, stop_after=None)
    assert f"resuming from {last} at step 13" in caplog.text


def other_code(p):
    p["code"] = dict(p["code"], **{"src/s2s/losses.py": "0" * 64})


def test_a_resume_point_of_other_code_is_not_resumed_unless_asked(runs, tmp_path, caplog):
    """A change to a file the stage runs reruns it under DVC: the rerun must train by the new
    code, not write the old run's weights again. Asked (a change that alters no number), it goes
    on, and says so."""
    data, work, params, _ = runs
    for asked in (False, True):
        run_dir = tmp_path / str(asked)
        shutil.copytree(work / "killed" / "checkpoints", run_dir / "checkpoints")
        last = run_dir / "checkpoints" / "forward" / "last.pt"
        rewrite(last, other_code)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="s2s.train"), \
                pytest.raises(train.Interrupted, match=f"stopped after step {14 if asked else 1} "):
            train_into(params, run_dir, data, stop_after=14 if asked else 1,
                       resume_other_code=asked)
        said = [r.getMessage() for r in caplog.records if "other code" in r.getMessage()]
        if asked:
            assert said == [f"forward: going on from {last}, trained by other code "
                            f"(src/s2s/losses.py changed), as --resume-other-code asks: the "
                            f"outputs are not a run from scratch's"]
            assert f"resuming from {last} at step 13" in caplog.text
        else:
            assert said == [f"forward: {last} was trained by other code (src/s2s/losses.py "
                            f"changed); starting afresh (after a change that alters no number, "
                            f"--resume-other-code goes on from it)"]
            assert "resuming" not in caplog.text
            assert not last.with_name("last.pt.rejected").exists()  # not damaged: replaced
        assert checkpoint.load_payload(last)["code"] == train.code_record(
            params.model_config("forward"))


def test_the_code_a_resume_point_records_is_the_code_dvc_reruns_the_stage_for(runs):
    """The files of code_record are the train stage's code dependencies in dvc.yaml: a change to
    any reruns the stage, and a rerun after it does not go on from the old run."""
    from s2s import pipeline

    _, _, params, _ = runs
    stage, = [s for s in pipeline.generate(params) if s.name == "train-forward"]
    recorded = train.code_record(params.model_config("forward"))
    assert sorted(recorded) == [d for d in stage.deps if d.startswith("src/")]
    assert "src/s2s/model/lstm.py" in recorded and "src/s2s/train.py" in recorded
    assert "src/s2s/model/transformer.py" not in recorded
    assert recorded["src/s2s/losses.py"] == hashlib.sha256(
        (Path(train.__file__).parent / "losses.py").read_bytes()).hexdigest()


def test_the_metrics_name_the_threads_that_trained_not_those_that_rewrote_the_outputs(
        runs, tmp_path, caplog):
    """A finished run rerun under another train.threads (a bookkeeping key: it resumes) trains
    no step: its metrics keep the thread count that trained it. A killed one that goes on under
    another says so, and its metrics name the threads of its last steps."""
    data, work, params, _ = runs
    raw = tiny()
    raw["train"]["threads"] = 2
    two = load(raw, tmp_path / "two.yaml")
    finished = tmp_path / "finished"
    shutil.copytree(work / "killed" / "checkpoints", finished / "checkpoints")
    assert train_into(params, finished, data)["threads"] == 1  # trained on from step 13
    torch.set_num_threads(1)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="s2s.train"):
        metrics = train_into(two, finished, data)
    assert "no step is trained" in caplog.text
    assert metrics["threads"] == 1 and metrics["cpu"] == precision.cpu_kind()
    killed = tmp_path / "killed"
    shutil.copytree(work / "killed" / "checkpoints", killed / "checkpoints")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="s2s.train"):
        metrics = train_into(two, killed, data)
    torch.set_num_threads(1)
    assert metrics["threads"] == 2
    assert (f"forward: trained to step 13 under 1 thread on {precision.cpu_kind()}; goes on "
            f"under 2 threads on {precision.cpu_kind()}: its numbers are those of neither, and "
            f"its metrics name the second") in caplog.text


def test_a_resume_point_of_a_version_that_recorded_no_code_is_said_to_be_one(
        runs, tmp_path, caplog):
    data, work, params, _ = runs
    run_dir = tmp_path / "run"
    shutil.copytree(work / "killed" / "checkpoints", run_dir / "checkpoints")
    last = run_dir / "checkpoints" / "forward" / "last.pt"
    rewrite(last, lambda p: p.pop("code"))
    with caplog.at_level(logging.INFO, logger="s2s.train"), \
            pytest.raises(train.Interrupted, match="stopped after step 1 "):
        train_into(params, run_dir, data, stop_after=1, resume_other_code=True)
    assert (f"forward: {last} was written by an earlier version of s2s, which did not record "
            f"its code; starting afresh") in caplog.text
    assert "other params or data" not in caplog.text and "resuming" not in caplog.text
