"""Training (§3.4) on a real slice of the mirror: the loss falls, the schedule is the paper's, a
resumed run ends with the same weights as an uninterrupted one, a NaN stops training cleanly."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from s2s import checkpoint, distributed, train
from s2s.config import TrainConfig
from s2s.data import vocab
from s2s.model.seq2seq import Seq2Seq
from s2s.layout import TrainPaths
from s2s.stages import train as train_stage
from helpers import profile_dict

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def data(smoke_data):
    """The smoke profile's data stages (shared with other modules)."""
    return smoke_data


def run_train(tmp: Path, params, name: str, out: str, **kw) -> dict:
    return train_stage.main(params, name, TrainPaths(
        ids=tmp / "ids", vocab=tmp / "vocab", model_dir=tmp / out / "model",
        ckpt_dir=tmp / out / "ckpt", metrics=tmp / out / "metrics.json",
        curves=tmp / out / "curves.csv"), **kw)


def with_train(params, **changes):
    return dataclasses.replace(params, train=dataclasses.replace(params.train, **changes))


def test_learning_rate_schedule_is_the_papers():
    cfg = TrainConfig(lr=0.7, epochs=7.5, decay_start=5.0, decay_every=0.5, decay_factor=0.5)
    steps = 100  # per epoch
    assert train.lr_at(0, steps, cfg) == 0.7
    assert train.lr_at(499, steps, cfg) == 0.7
    assert train.lr_at(500, steps, cfg) == 0.35  # "after 5 epochs ... halving every half epoch"
    assert train.lr_at(549, steps, cfg) == 0.35
    assert train.lr_at(550, steps, cfg) == 0.175
    assert train.lr_at(749, steps, cfg) == pytest.approx(0.7 / 2 ** 5)
    # a halving interval binary floating point cannot hold: (5.3 - 5.0) / 0.1 is 2.9999999999999982,
    # and step 530 (epoch 5.3) starts the fourth halving all the same
    tenth = dataclasses.replace(cfg, decay_every=0.1)
    assert [train.lr_at(s, steps, tenth) for s in (509, 510, 529, 530, 531)] == pytest.approx(
        [0.7 / 2, 0.7 / 4, 0.7 / 8, 0.7 / 16, 0.7 / 16])


def test_a_perplexity_beyond_a_floats_range_is_inf_not_a_traceback():
    """A diverged model's mean NLL can pass 709 nats a token with its loss still finite:
    math.exp raised OverflowError out of the evaluation; the perplexity is inf (never the best,
    as a nan is not)."""
    import math

    from s2s.data.ids import IdCorpus
    from s2s.model import build_model
    from s2s.model.seq2seq import RNNConfig
    from helpers import Specials, tiny_pairs

    model = build_model(RNNConfig(num_layers=1, hidden_size=8, embed_size=8), src_vocab=30,
                        tgt_vocab=31, pad=0)
    model.init_weights(5)
    corpus = IdCorpus.from_pairs(tiny_pairs())
    finite = train.perplexity(model, corpus, vocab=Specials, device=torch.device("cpu"))
    assert 1 < finite < 1e4
    with torch.no_grad():
        model.proj.weight.mul_(1e6)
    assert train.perplexity(model, corpus, vocab=Specials, device=torch.device("cpu")) == math.inf
    assert train.exp_mean(709.0 * 3, 3) == pytest.approx(math.exp(709.0))
    assert train.exp_mean(710.0 * 3, 3) == math.inf
    assert math.isnan(train.exp_mean(math.nan, 3))
    state = train.TrainState(fingerprint="f", window_nll=1e6, window_tok=10)
    assert state.window_ppl == math.inf


def test_loss_falls_on_real_data(data):
    tmp, params = data
    m = run_train(tmp, params, "forward", "fall")
    curves = (tmp / "fall" / "curves.csv").read_text().splitlines()[1:]
    dev = [float(row.split(",")[4]) for row in curves]
    trn = [float(row.split(",")[3]) for row in curves]
    assert len(dev) == 2
    # From ~vocabulary size (2.6k) at initialisation to well below it after one epoch.
    assert dev[-1] < dev[0] < 400 and trn[-1] < trn[0]
    assert m["dev_ppl"] == dev[-1] and m["steps"] == 96
    assert m["parameters"] == sum(p.numel() for p in checkpoint.load_model(
        tmp / "fall" / "model" / "model.pt",
        src_vocab=vocab.Vocab.load(tmp / "vocab" / "en.tsv"),
        tgt_vocab=vocab.Vocab.load(tmp / "vocab" / "fr.tsv")).parameters())


def test_resumed_run_ends_with_the_same_weights(data):
    tmp, params = data
    params = with_train(params, checkpoint_every=1000)  # only the interruption writes one
    run_train(tmp, params, "reversed_1", "whole")
    with pytest.raises(train.Interrupted):
        run_train(tmp, params, "reversed_1", "resumed", stop_after=37)
    assert json.loads(json.dumps(checkpoint.load_payload(
        tmp / "resumed" / "ckpt" / "last.pt")["step"])) == 37
    run_train(tmp, params, "reversed_1", "resumed")
    a = torch.load(tmp / "whole" / "model" / "model.pt", weights_only=True)["model"]
    b = torch.load(tmp / "resumed" / "model" / "model.pt", weights_only=True)["model"]
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert (tmp / "whole" / "curves.csv").read_text() == (tmp / "resumed" / "curves.csv").read_text()


def test_a_checkpoint_of_other_params_is_not_resumed(data):
    tmp, params = data
    with pytest.raises(train.Interrupted):
        run_train(tmp, params, "forward", "stale", stop_after=20)
    other = with_train(params, lr=0.5)
    m = run_train(tmp, other, "forward", "stale")
    ref = run_train(tmp, other, "forward", "fresh")
    assert m == {**ref, "wall_seconds": m["wall_seconds"], "train_seconds": m["train_seconds"],
                 "tgt_words_per_sec": m["tgt_words_per_sec"]}


def test_nan_loss_stops_with_the_step_and_keeps_the_last_checkpoint(data, monkeypatch):
    tmp, params = data
    params = with_train(params, checkpoint_every=10)
    real_features = Seq2Seq.features
    calls = {"n": 0}

    def poisoned(self, *args):
        features = real_features(self, *args)
        if self.training:
            calls["n"] += 1
            if calls["n"] == 25:
                return features * float("nan")
        return features

    monkeypatch.setattr(Seq2Seq, "features", poisoned)
    with pytest.raises(train.TrainingError, match=r"non-finite loss \(nan\) at step 25 .*last\.pt"):
        run_train(tmp, params, "forward", "nan")
    kept = checkpoint.load_payload(tmp / "nan" / "ckpt" / "last.pt")
    assert kept["step"] == 20
    assert all(torch.isfinite(v).all() for v in kept["model"].values())
    assert not (tmp / "nan" / "model" / "model.pt").exists()


def test_inverse_sqrt_schedule_warms_up_linearly_then_decays_as_one_over_sqrt():
    cfg = TrainConfig(schedule="inverse_sqrt", lr=1e-3, warmup_steps=100)
    assert train.lr_at(0, 50, cfg) == pytest.approx(1e-5)  # update 1 of 100
    assert train.lr_at(49, 50, cfg) == pytest.approx(5e-4)
    assert train.lr_at(99, 50, cfg) == pytest.approx(1e-3)  # the peak, at the end of warmup
    assert train.lr_at(399, 50, cfg) == pytest.approx(5e-4)  # sqrt(100 / 400)


def test_a_models_recipe_is_train_then_its_architectures_then_its_own(tmp_path):
    import yaml

    from s2s.config import load

    raw = profile_dict("smoke")
    raw["models"]["tf"] = {"arch": "transformer", "d_model": 16, "heads": 2, "kv_heads": 1,
                           "ff_size": 32,
                           "encoder_layers": 1, "decoder_layers": 1,
                           "train": {"warmup_steps": 50, "label_smoothing": 0.2}}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    params = load(path)
    assert params.train_config("forward") is params.train  # the paper's recipe: `train` itself
    tf = params.train_config("tf")
    assert (tf.optimizer, tf.schedule, tf.lr, tf.adam_eps) == ("adam", "inverse_sqrt", 5e-4, 1e-9)
    assert (tf.warmup_steps, tf.label_smoothing) == (50, 0.2)  # its own keys win
    assert (tf.batch_size, tf.epochs) == (params.train.batch_size, params.train.epochs)
    cfg = params.model_config("tf")  # the Transformer's own config: `model`'s RNN keys unused
    assert type(cfg).__name__ == "TransformerConfig" and (cfg.heads, cfg.kv_heads) == (2, 1)
    assert not hasattr(cfg, "cell") and cfg.reverse_source is False


def test_a_train_job_resolves_params_once_and_the_trainer_follows_the_job(data, tmp_path):
    """TrainJob.of reads the model's own recipe and architecture, the train resources, the text
    settings and (asked for) the snapshot epochs; an unknown model is refused naming the key. The
    trainer reads nothing else: a job changed by hand trains as the job says."""
    import yaml

    from s2s.config import ConfigError, load
    from s2s.device import NoCudaError

    tmp, params = data
    raw = profile_dict("smoke")
    raw["models"]["forward"]["train"] = {"device": "cpu", "epochs": 0.25}
    raw["analysis"]["snapshots"] = [0, 0.5]
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    own = load(path)
    job = train.TrainJob.of(own, "forward", snapshots=True)
    assert (job.cfg.device, job.cfg.epochs, params.train.device) == ("cpu", 0.25, "auto")
    assert job.snapshot_epochs == (0.0, 0.5)
    assert train.TrainJob.of(own, "forward").snapshot_epochs == ()
    assert job.gpus == own.resources_for("train").gpus and job.model_cfg.init_seed == 11
    with pytest.raises(ConfigError, match="nosuch"):
        train.TrainJob.of(own, "nosuch")
    # a device set by the model's own recipe is named by its key where it cannot be had
    assert (job.device_key, train.TrainJob.of(params, "forward").device_key) \
        == ("models.forward.train.device", "train.device")
    if not torch.cuda.is_available():
        on_cuda = dataclasses.replace(job, cfg=dataclasses.replace(job.cfg, device="cuda"))
        with pytest.raises(NoCudaError, match=r"^models\.forward\.train\.device is 'cuda'"):
            train.setup(on_cuda, TrainPaths(
                ids=tmp / "ids", vocab=tmp / "vocab", model_dir=tmp_path / "m",
                ckpt_dir=tmp_path / "c", metrics=tmp_path / "m.json", curves=tmp_path / "c.csv"),
                world=distributed.World())

    by_hand = dataclasses.replace(train.TrainJob.of(params, "forward"),
                                  cfg=dataclasses.replace(params.train, epochs=0.5))
    m = train.run(by_hand, TrainPaths(
        ids=tmp / "ids", vocab=tmp / "vocab", model_dir=tmp_path / "model",
        ckpt_dir=tmp_path / "ckpt", metrics=tmp_path / "metrics.json",
        curves=tmp_path / "curves.csv"), stop_after=None, world=distributed.World(),
        stop=None)
    assert (m["steps"], m["epochs"]) == (48, 0.5)  # 96 steps an epoch (test_loss_falls...)


def test_a_step_out_of_memory_names_the_batch_and_the_keys_and_keeps_the_last_checkpoint(
        data, monkeypatch):
    tmp, params = data
    params = with_train(params, checkpoint_every=10)
    real_step, calls, seen = train.train_step, {"n": 0}, {}

    def out_of_memory_at_step_25(model, opt, batch, **kw):
        calls["n"] += 1
        if calls["n"] == 25:
            seen.update(n=batch.src.shape[0], s=batch.src.shape[1], t=batch.tgt_in.shape[1])
            raise torch.OutOfMemoryError(
                "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
                "139.8 GiB of which 1.2 GiB is free.\nIf reserved but unallocated memory is large "
                "try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
        return real_step(model, opt, batch, **kw)

    monkeypatch.setattr(train, "train_step", out_of_memory_at_step_25)
    with pytest.raises(train.TrainingError) as err:
        run_train(tmp, params, "forward", "oom")
    message = str(err.value)
    assert "\n" not in message
    assert message == (
        f"forward: out of CPU memory at step 25 on a batch of {seen['n']} pairs, source length "
        f"{seen['s']}, target length {seen['t']} (CUDA out of memory. Tried to allocate 2.00 "
        f"GiB); lower train.batch_size (now {params.train.batch_size}) or prepare.max_len, which "
        f"bounds the lengths, and rerun: the last good checkpoint "
        f"{tmp / 'oom' / 'ckpt' / 'last.pt'} is kept")
    kept = checkpoint.load_payload(tmp / "oom" / "ckpt" / "last.pt")
    assert kept["step"] == 20  # the checkpoint of step 20, not the failed step's state
    assert not (tmp / "oom" / "model" / "model.pt").exists()
    # and the rerun resumes there and ends as an uninterrupted run does
    monkeypatch.setattr(train, "train_step", real_step)
    assert run_train(tmp, params, "forward", "oom")["steps"] == run_train(
        tmp, params, "forward", "whole_oom")["steps"]
    a = torch.load(tmp / "oom" / "model" / "model.pt", weights_only=True)["model"]
    b = torch.load(tmp / "whole_oom" / "model" / "model.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)
