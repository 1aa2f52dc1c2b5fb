"""The CUDA path's decisions where the trainer and the stages meet them, on the CPU: a training
run whose recurrence would run in fp16 stops before it writes anything, and the fp32 blocks of a
bf16 run (perplexity, rescoring) turn TF32 off and back. (The precision plan itself, the recurrent
layers' dtypes and the compiled peephole step: tests/test_precision.py,
tests/test_peephole_compiled.py, tests/test_cuda_precision.py.)"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from s2s import precision
from s2s.model import lstm as lstm_module

CUDA = torch.device("cuda")  # never touched: only its type decides
CPU = torch.device("cpu")


@pytest.fixture
def tf32_flags():
    before = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = before


def test_strict_fp32_turns_tf32_off_for_its_block_on_a_gpu_only(tf32_flags):
    precision.plan(True, device_type="cuda", engine="tensor cores").apply()
    assert torch.backends.cudnn.allow_tf32 and torch.backends.cuda.matmul.allow_tf32
    with precision.strict_fp32(CUDA):  # the fp32 rescoring of a bf16 search
        assert not torch.backends.cudnn.allow_tf32
        assert not torch.backends.cuda.matmul.allow_tf32
    assert torch.backends.cudnn.allow_tf32 and torch.backends.cuda.matmul.allow_tf32
    with precision.strict_fp32(CPU):
        assert torch.backends.cudnn.allow_tf32


def test_a_training_run_whose_recurrence_runs_in_fp16_stops_before_writing(
        smoke_data, monkeypatch, tmp_path):
    from s2s.layout import TrainPaths
    from s2s.stages import train as train_stage

    tmp, params = smoke_data
    params = dataclasses.replace(params, train=dataclasses.replace(
        params.train, epochs=0.05, threads=1, amp=False))
    forward = lstm_module.StandardLSTM.forward

    def half(self, x, state=None, lengths=None):  # what cuDNN under CUDA autocast returns
        out, (h, c) = forward(self, x, state, lengths)
        return out, (h.half(), c.half())

    monkeypatch.setattr(lstm_module.StandardLSTM, "forward", half)
    with pytest.raises(precision.PrecisionMismatch) as e:
        train_stage.main(params, "reversed_1", TrainPaths(
            ids=tmp / "ids", vocab=tmp / "vocab", model_dir=tmp_path / "model",
            ckpt_dir=tmp_path / "ckpt", metrics=tmp_path / "m.json", curves=tmp_path / "c.csv"))
    msg = str(e.value)
    assert "\n" not in msg and "encoder (StandardLSTM) returned its h in float16" in msg
    assert not (tmp_path / "m.json").exists() and not (tmp_path / "model" / "model.pt").exists()
