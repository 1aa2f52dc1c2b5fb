"""Which device a stage runs on and which GPUs a job takes (s2s.device), on the CPU: the policy
is a function of the device key, the stage's `resources.<kind>.gpus` and what torch sees; GPU
slots are lock files, so two jobs side by side never share a GPU."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import pytest
import torch

from s2s import device


@pytest.fixture
def no_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.fixture
def cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)


def test_auto_follows_the_gpus_the_stage_asks_for(cuda):
    assert device.pick_device("auto", key="train.device", gpus=0).type == "cpu"
    assert device.pick_device("auto", key="train.device", gpus=1).type == "cuda"
    assert device.pick_device("auto", key="train.device", gpus=4).type == "cuda"
    # without resources (one's own text): CUDA where there is one
    assert device.pick_device("auto", key="--device").type == "cuda"
    assert device.pick_device("cpu", key="train.device", gpus=4).type == "cpu"


def test_a_gpu_stage_where_torch_sees_none_is_refused_naming_the_key_and_the_fix(no_cuda):
    assert device.pick_device("auto", key="train.device", gpus=0).type == "cpu"
    assert device.pick_device("auto", key="--device").type == "cpu"
    with pytest.raises(device.NoCudaError) as e:
        device.pick_device("auto", key="train.device", gpus=4, gpus_key="resources.train.gpus")
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith("resources.train.gpus is 4 (train.device: auto), but torch sees no "
                          "CUDA device (torch ")
    assert msg.endswith("): install a CUDA build of torch (docs/gpu.md), or set it to 0 to run "
                        "on the CPU"), msg
    with pytest.raises(device.NoCudaError, match="translate.device is 'cuda'"):
        device.pick_device("cuda", key="translate.device", gpus=0)
    with pytest.raises(ValueError, match="train.device must be auto, cpu or cuda"):
        device.pick_device("gpu", key="train.device")


class _Params:
    def __init__(self, gpus: int):
        from s2s.config import StageResources

        self.res = StageResources(gpus=gpus)

    def resources_for(self, kind):
        return self.res


def test_a_stage_reads_its_own_resources(no_cuda, monkeypatch):
    monkeypatch.delenv(device.JOB_GPUS, raising=False)
    assert device.for_stage(_Params(0), "timing", name="auto", key="translate.device").type \
        == "cpu"
    with pytest.raises(device.NoCudaError, match="resources.timing.gpus is 1"):
        device.for_stage(_Params(1), "timing", name="auto", key="translate.device")


def test_visible_gpus_come_from_cuda_visible_devices_or_the_driver(tmp_path):
    assert device.visible_gpus({"CUDA_VISIBLE_DEVICES": "2, 3"}) == ["2", "3"]
    assert device.visible_gpus({"CUDA_VISIBLE_DEVICES": ""}) == []
    assert device.visible_gpus({}, lambda: 3) == ["0", "1", "2"]  # the driver's count
    assert device.visible_gpus({}, lambda: 0) == []


def test_without_nvml_the_gpus_are_counted_by_torch_in_a_child_process(monkeypatch, tmp_path):
    import subprocess
    import sys

    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed
    monkeypatch.setattr(device, "NVIDIA_PROC", tmp_path / "driver" / "gpus")
    assert device.gpu_count() == 0  # no driver loaded: nothing is started
    (tmp_path / "driver").mkdir()
    asked = []

    def run(cmd, **kw):
        asked.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, stdout="2\n", stderr="")

    assert device.gpu_count(run) == 2
    assert asked == [[sys.executable, "-c", "import torch; print(torch.cuda.device_count())"]]
    assert device.gpu_count(lambda cmd, **kw: subprocess.CompletedProcess(cmd, 1, "", "")) == 0

    def hung(cmd, **kw):
        raise subprocess.TimeoutExpired(cmd, kw["timeout"])

    with pytest.raises(RuntimeError, match=r"gave no answer in 300 s \(a hung NVIDIA driver\?\)"):
        device.gpu_count(hung)


def _claim(n: int, gpus: list[str], lock_dir: str, out, hold: float) -> None:
    import time

    got = device.claim_gpus(n, gpus, lock_dir=Path(lock_dir), wait=0.05)
    out.put((os.getpid(), got, time.monotonic()))
    time.sleep(hold)


def test_jobs_side_by_side_take_different_gpus_and_wait_for_a_free_one(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    gpus = ["0", "1", "2", "3"]
    first = [ctx.Process(target=_claim, args=(2, gpus, str(tmp_path), out, 3.0))
             for _ in range(2)]
    for p in first:
        p.start()
    claims = [out.get(timeout=60) for _ in first]
    taken = [g for _, got, _ in claims for g in got]
    assert sorted(taken) == gpus  # two jobs of two GPUs: all four, none twice
    late = ctx.Process(target=_claim, args=(1, gpus, str(tmp_path), out, 0.0))
    late.start()  # every GPU is held: it waits until a job ends (the kernel drops its locks)
    pid, got, when = out.get(timeout=60)
    assert when >= max(t for *_, t in claims) + 2.5
    assert len(got) == 1 and got[0] in gpus
    for p in (*first, late):
        p.join(timeout=30)


def test_a_job_claims_its_gpus_once_and_not_under_slurm(tmp_path, monkeypatch):
    monkeypatch.setattr(device, "_held", [])
    env = {device.JOB_GPUS: "1", "CUDA_VISIBLE_DEVICES": "4,5", device.LOCK_DIR: str(tmp_path)}
    assert device.claim_job_gpus(env) == ["4"]
    assert env["CUDA_VISIBLE_DEVICES"] == "4"
    assert device.JOB_GPUS not in env  # its data-parallel ranks claim nothing more
    slurm = {device.JOB_GPUS: "2", "SLURM_JOB_ID": "7", "CUDA_VISIBLE_DEVICES": "0,1"}
    assert device.claim_job_gpus(slurm) is None
    assert slurm["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert device.claim_job_gpus({device.JOB_GPUS: "0", "CUDA_VISIBLE_DEVICES": "0"}) is None
    with pytest.raises(ValueError, match="S2S_JOB_GPUS must be a whole number"):
        device.claim_job_gpus({device.JOB_GPUS: "two", "CUDA_VISIBLE_DEVICES": "0"})


def test_the_timing_record_names_the_gpu_it_decoded_on_and_the_cpu_record_is_as_before():
    from s2s.artifacts import CostTiming, TimedSystem

    systems = (TimedSystem(system="ensemble5", beam=2, ms_per_sentence=(1.0, 2.0)),)
    cpu = CostTiming(sentences=3, threads=1, precision="bf16", cpu="AMD EPYC (AVX512-BF16)",
                     systems=systems)
    assert "device" not in cpu.to_json()
    gpu = CostTiming(sentences=3, threads=1, precision="bf16", cpu="AMD EPYC (AVX512-BF16)",
                     systems=systems, device="cuda (NVIDIA H200)")
    assert gpu.to_json()["device"] == "cuda (NVIDIA H200)"
    assert CostTiming.from_json(gpu.to_json(), source="cost.json") == gpu


def _fingerprint_inputs(tmp_path):
    """A model config, vocabularies and an ids record to take training fingerprints of."""
    from s2s.data.ids import SPLITS, IdsRecord, ids_file, offsets_file
    from s2s.data.vocab import Vocab
    from s2s.model.seq2seq import RNNConfig

    files = {}
    for split in SPLITS:
        for lang in ("en", "fr"):
            for name in (ids_file(split, lang), offsets_file(split, lang)):
                files[name] = {"shape": [1], "bytes": 132, "sha256": f"{split} {lang} {name}"}
    (tmp_path / "ids.json").write_text(json.dumps(IdsRecord(
        vocab={"en": "v", "fr": "v"}, lines=dict.fromkeys(SPLITS, 1), files=files).to_json()))
    vocab = Vocab(words=("<pad>", "<unk>", "<s>", "</s>", "a"), fingerprint="v")
    return RNNConfig(), vocab, vocab, tmp_path


def test_a_checkpoint_made_on_one_kind_of_device_never_resumes_on_another(tmp_path):
    from s2s.config import TrainConfig
    from s2s.train import fingerprint

    model_cfg, src, tgt, ids = _fingerprint_inputs(tmp_path)
    args = (model_cfg, TrainConfig(), src, tgt, ids)
    from s2s.precision import plan

    cpu = fingerprint(*args)
    assert fingerprint(*args, chosen=plan(False, device_type="cpu", engine=None)) == cpu
    assert fingerprint(*args, chosen=plan(False, device_type="cuda", engine=None)) != cpu
    gpu = plan(True, device_type="cuda", engine="tensor cores")
    cpu_bf16 = plan(True, device_type="cpu", engine="AVX512-BF16")
    assert fingerprint(*args, chosen=gpu) != fingerprint(*args, chosen=cpu_bf16) != cpu
    # the bf16 recurrence is another plan: its checkpoints never resume a TF32 one's
    assert fingerprint(*args, chosen=plan(True, device_type="cuda", engine="tensor cores",
                                          recurrent=torch.bfloat16)) \
        != fingerprint(*args, chosen=gpu)


def test_a_key_the_run_does_not_read_leaves_its_fingerprint_and_amp_counts_as_its_plan(tmp_path):
    """Adam's keys under SGD, the warmup under the paper's schedule, its halvings under
    inverse_sqrt change no weight: a checkpoint resumes across them. `amp: true` and `auto`
    resolved to one plan are the same run; resolved to two, not."""
    from s2s.config import TrainConfig
    from s2s.precision import plan
    from s2s.train import fingerprint

    model_cfg, src, tgt, ids = _fingerprint_inputs(tmp_path)

    def fp(chosen=None, **train):
        return fingerprint(model_cfg, TrainConfig(**train), src, tgt, ids, chosen=chosen)

    sgd = fp()
    assert fp(adam_eps=1e-6) == fp(adam_betas=(0.8, 0.9)) == fp(warmup_steps=10) == sgd
    assert fp(decay_start=4.0) != sgd and fp(lr=0.5) != sgd
    adam = fp(optimizer="adam")
    assert adam != sgd and fp(optimizer="adam", adam_eps=1e-6) != adam
    inv = fp(schedule="inverse_sqrt")
    assert fp(schedule="inverse_sqrt", decay_start=4.0) == inv
    assert fp(schedule="inverse_sqrt", warmup_steps=10) != inv
    bf16 = plan(True, device_type="cpu", engine="AVX512-BF16")
    assert fp(bf16, amp=True) == fp(bf16, amp="auto") != fp(plan(False, device_type="cpu",
                                                                  engine=None), amp=False)
