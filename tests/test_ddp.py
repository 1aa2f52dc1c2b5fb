"""Data-parallel training (s2s.distributed) on CPU with the gloo backend: two processes, each with
its share of a minibatch, produce after the all-reduce the gradient of one process on the whole
batch; and two-process training ends with the weights of one-process training."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import pytest
import torch

from s2s import distributed
from s2s.data.vocab import Vocab
from s2s.model.seq2seq import Seq2Seq

from helpers import shard_nll
from s2s.stages import train as train_stage
from s2s.model.seq2seq import RNNConfig

VOCAB = Vocab(words=tuple(f"w{i}" for i in range(40)), fingerprint="test")
CFG = RNNConfig(cell="lstm", num_layers=2, hidden_size=16, embed_size=12, reverse_source=True)


def tiny_batch(n: int, seed: int) -> list[tuple[list[int], list[int]]]:
    """`n` pairs of random lengths, sorted by source length as epoch_batches sorts them."""
    rng = random.Random(seed)
    pairs = [([rng.randrange(4, 40) for _ in range(rng.randint(1, 9))],
              [rng.randrange(4, 40) for _ in range(rng.randint(1, 11))]) for _ in range(n)]
    return sorted(pairs, key=lambda p: (len(p[0]), len(p[1])))


def batch_gradient(pairs, world: distributed.World) -> dict[str, torch.Tensor]:
    """One training step's gradient as train.main computes it: this rank's share, the loss over
    the global batch size, the gradients summed over ranks."""
    torch.manual_seed(0)
    model = Seq2Seq(CFG, src_vocab=len(VOCAB), tgt_vocab=len(VOCAB), pad=VOCAB.pad)
    model.init_weights(7)
    share = distributed.shard(list(range(len(pairs))), world)
    cpu = torch.device("cpu")
    nll, _ = shard_nll(model, [pairs[i] for i in share], vocab=VOCAB, device=cpu,
                             autocast=torch.autocast("cpu", enabled=False))
    loss = nll / len(pairs)
    if share:
        loss.backward()
    distributed.all_reduce_gradients(model, world)
    return {k: p.grad.clone() for k, p in model.named_parameters()}


def _gradient_worker(out: str) -> None:
    """Runs in each of the spawned processes (s2s.distributed.spawn sets the environment)."""
    torch.set_num_threads(1)
    world = distributed.World.from_env()
    distributed.init(world, torch.device("cpu"))
    grads = {n: batch_gradient(tiny_batch(n, seed=n), world) for n in (9, 1)}
    if world.is_main:
        torch.save(grads, out)


def test_two_gloo_processes_give_the_full_batch_gradient(tmp_path):
    out = tmp_path / "grads.pt"
    distributed.spawn(_gradient_worker, 2, str(out))
    got = torch.load(out, weights_only=True)
    for n in (9, 1):  # 9: shares of 5 and 4 sentences; 1: the second rank's share is empty
        want = batch_gradient(tiny_batch(n, seed=n), distributed.World())
        assert set(got[n]) == set(want)
        for k in want:
            assert want[k].abs().max() > 0, (n, k)  # every parameter takes part
            torch.testing.assert_close(got[n][k], want[k], rtol=0, atol=1e-6, msg=f"{n} {k}")


def test_shares_of_a_batch_are_disjoint_and_cover_it():
    idx = list(range(11))
    shares = [distributed.shard(idx, distributed.World(rank=r, size=3)) for r in range(3)]
    assert sorted(sum(shares, [])) == idx
    assert [len(s) for s in shares] == [4, 4, 3]
    assert distributed.shard(idx, distributed.World()) == idx


def test_one_gpu_or_none_means_one_process():
    assert distributed.processes_for(0, "auto") == 1
    assert distributed.processes_for(1, "cuda") == 1
    assert distributed.processes_for(8, "cpu") == 1


@pytest.fixture(scope="module")
def data(smoke_data):
    """The smoke profile's data stages (shared with other modules)."""
    tmp, params = smoke_data
    # An eighth of an epoch (12 steps of 32 sentences), one thread per process (2 cores), in fp32:
    # under bf16 each process's half-batch products round differently from the whole batch's.
    params = dataclasses.replace(params, train=dataclasses.replace(
        params.train, epochs=0.125, eval_every=0.0625, threads=1, amp=False))
    return tmp, params


def train_kwargs(tmp: Path, out: str) -> dict:
    return dict(prepared_dir=tmp / "prepared", vocab_dir=tmp / "vocab",
                model_dir=tmp / out / "model", ckpt_dir=tmp / out / "ckpt",
                metrics_out=tmp / out / "metrics.json", curves_out=tmp / out / "curves.csv")


def test_two_process_training_ends_with_the_one_process_weights(data):
    tmp, params = data
    one = train_stage.main(params, "reversed_1", **train_kwargs(tmp, "one"))
    distributed.spawn(train_stage.main, 2, params, "reversed_1", **train_kwargs(tmp, "two"))
    two = json.loads((tmp / "two" / "metrics.json").read_text())
    assert two["processes"] == 2 and "processes" not in one
    assert two["steps"] == one["steps"] == 12
    for key in ("dev_ppl", "test_ppl", "best_dev_ppl"):
        assert two[key] == pytest.approx(one[key], rel=1e-4), key
    a = torch.load(tmp / "one" / "model" / "model.pt", weights_only=True)["model"]
    b = torch.load(tmp / "two" / "model" / "model.pt", weights_only=True)["model"]
    for k in a:  # 12 SGD steps at lr 0.7 amplify the summation-order differences to ~1e-5
        torch.testing.assert_close(b[k], a[k], rtol=1e-4, atol=1e-5, msg=k)
    # Only rank 0 wrote, and the resume point is the same step.
    assert sorted(p.name for p in (tmp / "two" / "model").iterdir()) == ["best.pt", "model.pt"]
    assert torch.load(tmp / "two" / "ckpt" / "last.pt", weights_only=True)["step"] == 12
