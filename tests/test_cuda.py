"""The trainer on a CUDA GPU, end to end (marker `cuda`: run by bench/gpu_check.sh on a GPU
machine, skipped without CUDA): a train stage on CUDA records its plan and lands near its CPU
twin; a whole train step waits for the device only to read its loss; the fused SGD takes the
clipped step; one NCCL rank starts, reduces, broadcasts and ends (the lent machines have one
GPU), and two NCCL ranks give one process's gradient where two GPUs exist. (Per-architecture
dtypes, TF32, the compiled peephole step and its wavefront: tests/test_cuda_precision.py.)"""

from __future__ import annotations

import dataclasses
import json
import warnings

import pytest
import torch

from s2s import distributed

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def _train(params, tmp, out, device: str, amp) -> dict:
    from s2s.layout import TrainPaths
    from s2s.stages import train as train_stage

    params = dataclasses.replace(params, train=dataclasses.replace(
        params.train, device=device, amp=amp, epochs=0.25, threads=4))
    return train_stage.main(params, "reversed_1", TrainPaths(
        ids=tmp / "ids", vocab=tmp / "vocab", model_dir=tmp / out / "model",
        ckpt_dir=tmp / out / "ckpt", metrics=tmp / out / "m.json", curves=tmp / out / "c.csv"))


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


def _one_nccl_rank(out: str) -> None:
    """A one-rank NCCL world (as torchrun would start it), through the trainer's own helpers
    (given a World of two, so that none of them takes its one-process shortcut)."""
    import datetime

    import torch.distributed as dist

    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=device,
                            timeout=datetime.timedelta(seconds=60))
    world = distributed.World(rank=0, size=2)  # collectives over the one rank's group
    sums = distributed.all_reduce_sum([torch.tensor(2.5, device=device), 7, 1.0], world, device)
    shared = distributed.broadcast_object({"step": 3}, world, device)
    model = torch.nn.Linear(4, 3).to(device)
    model(torch.ones(2, 4, device=device)).sum().backward()
    before = [p.grad.clone() for p in model.parameters()]
    distributed.all_reduce_gradients(model, world)
    distributed.barrier(world)
    same = all(torch.equal(a, p.grad) for a, p in zip(before, model.parameters()))
    backend = dist.get_backend()
    distributed._destroy()
    torch.save({"sums": sums, "shared": shared, "same": same, "backend": backend,
                "after": dist.is_initialized()}, out)


def test_one_nccl_rank_starts_reduces_broadcasts_and_ends(tmp_path):
    out = tmp_path / "nccl.pt"
    distributed.spawn(_one_nccl_rank, 1, str(out))
    got = torch.load(out, weights_only=True)
    assert got == {"sums": [2.5, 7.0, 1.0], "shared": {"step": 3}, "same": True,
                   "backend": "nccl", "after": False}


@pytest.mark.parametrize("arch,cell", [("seq2seq", "lstm"), ("seq2seq", "peephole"),
                                       ("seq2seq", "gru"), ("attention", "gru")],
                         ids=["lstm", "peephole", "gru", "attention"])
@pytest.mark.parametrize("amp", [False, True], ids=["fp32", "bf16"])
def test_a_train_step_waits_for_the_device_only_to_read_its_loss(arch, cell, amp):
    """torch.cuda.set_sync_debug_mode warns at each wait for the device: a step from a prefetched
    batch (pinned, its lengths on the host) waits once, to read the loss (its non-finite check)."""
    from s2s import precision
    from s2s.config import TrainConfig
    from s2s.data.batching import prefetch_batches
    from s2s.model import build_model
    from s2s.model.seq2seq import RNNConfig
    from s2s.train import make_optimizer, train_step
    from helpers import Specials, tiny_pairs

    device = torch.device("cuda")
    cfg = RNNConfig(arch=arch, cell=cell, num_layers=2 if arch == "seq2seq" else 1,
                    hidden_size=32, embed_size=24, reverse_source=True, init_seed=3)
    model = build_model(cfg, src_vocab=30, tgt_vocab=31, pad=0)
    model.init_weights(3)
    model.to(device).train()
    tcfg = TrainConfig(amp=amp)
    chosen = precision.choose(amp, device)
    opt = make_optimizer(model, tcfg)
    assert opt.defaults.get("fused")  # SGD on CUDA: the fused step, the clip folded in
    pairs = tiny_pairs()
    batches = list(prefetch_batches([pairs] * 3, pad=0, bos=1, eos=2, pin=True, ahead=1))

    def step(batch):
        return train_step(model, opt, batch, batch_size=len(pairs), lr=0.7, cfg=tcfg,
                          vocab=Specials, device=device, autocast=chosen.autocast())

    step(batches[0])  # compiles, allocates, fills caches
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            step(batches[1])
        finally:
            torch.cuda.set_sync_debug_mode("default")
    waits = [f"{w.filename}:{w.lineno}: {str(w.message).splitlines()[0]}" for w in caught
             if "synchroniz" in str(w.message).lower()]
    assert len(waits) == 1, "\n".join(waits)  # reading the NLL


def test_the_fused_sgd_takes_the_clipped_step_of_clip_grad_norm():
    from s2s import precision
    from s2s.config import TrainConfig
    from s2s.model import build_model
    from s2s.model.seq2seq import RNNConfig
    from s2s.train import make_optimizer, train_step
    from helpers import Specials, tiny_pairs

    device = torch.device("cuda")
    precision.choose(False, device)  # strict fp32
    weights = []
    for fused in (True, False):
        cfg = RNNConfig(cell="lstm", num_layers=2, hidden_size=32, embed_size=24, init_seed=3)
        model = build_model(cfg, src_vocab=30, tgt_vocab=31, pad=0)
        model.init_weights(3)
        model.to(device).train()
        tcfg = TrainConfig(clip_norm=0.01)  # the clip bites
        opt = make_optimizer(model, tcfg) if fused else torch.optim.SGD(model.parameters(),
                                                                        lr=0.7)
        assert bool(opt.defaults.get("fused")) == fused
        train_step(model, opt, tiny_pairs(), batch_size=4, lr=0.7, cfg=tcfg, vocab=Specials,
                   device=device, autocast=precision.autocast(device, None))
        weights.append([p.detach().cpu() for p in model.parameters()])
    for a, b in zip(*weights):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)
