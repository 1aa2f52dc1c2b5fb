"""The trainer on a CUDA GPU, end to end (marker `cuda`: run by bench/gpu_check.sh on a GPU
machine, skipped without CUDA): a train stage on CUDA records its plan and lands near its CPU
twin, and two NCCL ranks give one process's gradient. (Per-architecture dtypes, TF32 and the
compiled peephole step: tests/test_cuda_precision.py.)"""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from s2s import distributed

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def _train(params, tmp, out, device: str, amp) -> dict:
    from s2s.stages import train as train_stage

    params = dataclasses.replace(params, train=dataclasses.replace(
        params.train, device=device, amp=amp, epochs=0.25, threads=4))
    return train_stage.main(params, "reversed_1", prepared_dir=tmp / "prepared",
                            vocab_dir=tmp / "vocab", model_dir=tmp / out / "model",
                            ckpt_dir=tmp / out / "ckpt", metrics_out=tmp / out / "m.json",
                            curves_out=tmp / out / "c.csv")


@pytest.mark.parametrize("amp", [False, True], ids=["fp32", "bf16"])
def test_a_train_stage_on_cuda_records_its_plan_and_lands_near_its_cpu_twin(smoke_data, amp):
    tmp, params = smoke_data
    tag = "bf16" if amp else "fp32"
    gpu = _train(params, tmp, f"cuda-{tag}", "cuda", amp)
    cpu = _train(params, tmp, f"cpu-{tag}", "cpu", False)
    assert gpu["device"].startswith("cuda") and gpu["precision"] == ("bf16" if amp else "fp32")
    assert gpu["engine"] == ("cuda: bf16 products, tf32 recurrent, fp32 state" if amp
                             else "cuda: fp32 products, fp32 recurrent, fp32 state")
    assert "engine" not in cpu
    # fp32 on both: only the order of reductions differs; bf16: its rounding on top
    assert gpu["dev_ppl"] == pytest.approx(cpu["dev_ppl"], rel=1e-3 if not amp else 3e-2)
    assert json.loads((tmp / f"cuda-{tag}" / "m.json").read_text()) == gpu


def _nccl_worker(out: str) -> None:
    from test_ddp import batch_gradient, tiny_batch

    world = distributed.World.from_env()
    device = distributed.init(world, torch.device("cuda"))
    assert device == torch.device("cuda", world.rank)
    grads = batch_gradient(tiny_batch(9, seed=9), world, device=device)
    if world.is_main:
        torch.save({k: v.cpu() for k, v in grads.items()}, out)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="NCCL needs a GPU per rank: 2 GPUs")
def test_two_nccl_ranks_give_the_full_batch_gradient(tmp_path):
    from test_ddp import batch_gradient, tiny_batch

    out = tmp_path / "grads.pt"
    distributed.spawn(_nccl_worker, 2, str(out))
    got = torch.load(out, weights_only=True)
    want = batch_gradient(tiny_batch(9, seed=9), distributed.World(),
                          device=torch.device("cuda"))
    for k in want:
        torch.testing.assert_close(got[k], want[k].cpu(), rtol=1e-5, atol=1e-6, msg=k)
