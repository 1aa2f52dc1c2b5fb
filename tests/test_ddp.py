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
from s2s.layout import TrainPaths
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


def batch_gradient(pairs, world: distributed.World,
                   device: torch.device = torch.device("cpu")) -> dict[str, torch.Tensor]:
    """One training step's gradient as train.main computes it: this rank's share, the loss over
    the global batch size, the gradients summed over ranks (on `device`: tests/test_cuda.py)."""
    torch.manual_seed(0)
    model = Seq2Seq(CFG, src_vocab=len(VOCAB), tgt_vocab=len(VOCAB), pad=VOCAB.pad)
    model.init_weights(7)
    model.to(device)
    share = distributed.shard(list(range(len(pairs))), world)
    nll, _ = shard_nll(model, [pairs[i] for i in share], vocab=VOCAB, device=device,
                       autocast=torch.autocast(device.type, enabled=False))
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


def train_paths(tmp: Path, out: str) -> TrainPaths:
    return TrainPaths(ids=tmp / "ids", vocab=tmp / "vocab", model_dir=tmp / out / "model",
                      ckpt_dir=tmp / out / "ckpt", metrics=tmp / out / "metrics.json",
                      curves=tmp / out / "curves.csv")


def test_two_process_training_ends_with_the_one_process_weights(data):
    tmp, params = data
    one = train_stage.main(params, "reversed_1", train_paths(tmp, "one"))
    distributed.spawn(train_stage.main, 2, params, "reversed_1", train_paths(tmp, "two"))
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


# ---------------------------------------------------------------------------------------------
# The ranks act as one: a signal to one rank stops all after the same step, a dead rank ends the
# run in bounded time, only rank 0 reads the resume point; each case resumes to the weights of an
# uninterrupted two-process run.

FAULT_STEP = 6  # a checkpoint every 4 steps: the last before it is step 4


def _faulty_worker(params, paths: TrainPaths, fault_rank: int, fault_step: int, sig: int | None,
                   unreadable_rank: int | None = None) -> None:
    """train_stage.main on this rank, with rank `fault_rank` sending itself `sig` as its step
    `fault_step` starts, and rank `unreadable_rank` unable to read any checkpoint."""
    import itertools
    import os

    from s2s import checkpoint, train

    world = distributed.World.from_env()
    if sig is not None and world.rank == fault_rank:
        step_of_run, calls = train.train_step, itertools.count(1)

        def train_step(*args, **kw):
            if next(calls) == fault_step:
                os.kill(os.getpid(), sig)
            return step_of_run(*args, **kw)

        train.train_step = train_step
    if world.rank == unreadable_rank:
        def load_payload(path):
            raise checkpoint.CheckpointError(f"{path}: unreadable on rank {world.rank}")

        checkpoint.load_payload = load_payload
    train_stage.main(params, "reversed_1", paths)


@pytest.fixture(scope="module")
def two_process_reference(data):
    """An uninterrupted two-process run with a checkpoint every 4 steps."""
    tmp, params = data
    params = dataclasses.replace(params, train=dataclasses.replace(params.train,
                                                                   checkpoint_every=4))
    distributed.spawn(train_stage.main, 2, params, "reversed_1", train_paths(tmp, "ref2"))
    return params, torch.load(tmp / "ref2" / "model" / "model.pt", weights_only=True)["model"]


def assert_same_weights(got: dict, want: dict) -> None:
    assert set(got) == set(want)
    for k in want:  # the same ranks, shares and reduction order: the same bits
        assert torch.equal(got[k], want[k]), k


def test_a_signal_to_one_rank_stops_every_rank_after_the_same_step_and_the_rerun_resumes(
        data, two_process_reference):
    import signal

    from s2s import runguard

    tmp, _ = data
    params, want = two_process_reference
    paths = train_paths(tmp, "sigterm")
    with pytest.raises(runguard.Stopped) as stopped:
        distributed.spawn(_faulty_worker, 2, params, paths, 1, FAULT_STEP, signal.SIGTERM)
    assert stopped.value.exit_status == 128 + signal.SIGTERM
    assert "SIGTERM" in str(stopped.value)
    # rank 0 was not signalled, yet wrote the resume point at the step where rank 1 stopped
    last = torch.load(tmp / "sigterm" / "ckpt" / "last.pt", weights_only=True)
    assert last["step"] == FAULT_STEP
    assert not (tmp / "sigterm" / "model" / "model.pt").exists()
    distributed.spawn(train_stage.main, 2, params, "reversed_1", paths)
    got = torch.load(tmp / "sigterm" / "model" / "model.pt", weights_only=True)
    assert got["step"] == 12
    assert_same_weights(got["model"], want)


def _late_signal_worker(params, paths: TrainPaths, at: str = "save",
                        rank0_delay: float = 0.0) -> None:
    """train_stage.main with rank 1 sending itself SIGTERM late. `at` "save": as it passes the
    last step's checkpoint (rank 0 writes it): after that step's stop vote, which cannot carry
    the signal, and, in a finished run resumed, during its setup (it trains no step). `at`
    "write_outputs": as it comes to the outputs, after the last check for a signal (rank 0
    writes them, each checkpoint `rank0_delay` seconds late; rank 1 only makes test perplexity,
    with rank 0)."""
    import os
    import signal
    import time

    from s2s import checkpoint, train

    if distributed.World.from_env().rank == 0 and rank0_delay:
        save, write = checkpoint.save, train.Run.write_outputs

        def late(*args, **kwargs):
            time.sleep(rank0_delay)
            return save(*args, **kwargs)

        def writing_late(self, state, **kwargs):
            checkpoint.save = late  # model.pt and best.pt, not the checkpoints before
            return write(self, state, **kwargs)

        train.Run.write_outputs = writing_late
    if distributed.World.from_env().rank == 1:
        method = getattr(train.Run, at)

        def signalled(self, state, **kwargs):
            if at != "save" or state.step == self.total_steps:
                os.kill(os.getpid(), signal.SIGTERM)
            return method(self, state, **kwargs)

        setattr(train.Run, at, signalled)
    train_stage.main(params, "reversed_1", paths)


def test_a_signal_to_one_rank_after_the_last_vote_stops_every_rank_before_the_outputs(
        data, two_process_reference):
    from s2s import runguard

    tmp, _ = data
    params, want = two_process_reference
    paths = train_paths(tmp, "late")
    for signalled_in in ("the last step's checkpoint", "a finished run's setup"):
        with pytest.raises(runguard.Stopped, match="SIGTERM"):
            distributed.spawn(_late_signal_worker, 2, params, paths)
        # rank 0 got no signal, yet stopped with rank 1 instead of writing the outputs
        assert torch.load(paths.last, weights_only=True)["step"] == 12, signalled_in
        assert not paths.metrics.exists(), signalled_in
        assert not (paths.model_dir / "model.pt").exists(), signalled_in
    distributed.spawn(train_stage.main, 2, params, "reversed_1", paths)
    got = torch.load(paths.model_dir / "model.pt", weights_only=True)
    assert got["step"] == 12
    assert_same_weights(got["model"], want)


def test_a_signal_to_one_rank_as_the_outputs_are_written_stops_every_rank_once_they_are(
        data, two_process_reference, monkeypatch):
    from s2s import runguard

    tmp, _ = data
    params, want = two_process_reference
    paths = train_paths(tmp, "outputs_signal")
    # The signal used to vanish: every rank ended with status 0. A rank with nothing to write
    # that stopped at once would have its peers killed GRACE_SECONDS later, rank 0 in the
    # middle of its writes (here 3 s late, against a grace of 1 s): every rank waits for them.
    monkeypatch.setattr(distributed, "GRACE_SECONDS", 1.0)
    with pytest.raises(runguard.Stopped, match="SIGTERM"):
        distributed.spawn(_late_signal_worker, 2, params, paths, "write_outputs", 3.0)
    assert json.loads(paths.metrics.read_text())["steps"] == 12  # rank 0 wrote them all
    assert_same_weights(torch.load(paths.model_dir / "model.pt", weights_only=True)["model"],
                        want)


def _signal_proof_worker(folder: str, ignore: bool) -> None:
    """A rank that says it is ready, then waits for the go file; with `ignore`, deaf to SIGTERM
    (as a rank whose work is done and whose stop handlers are gone is not: it dies of it)."""
    import signal
    import time

    if ignore:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    rank = distributed.World.from_env().rank
    (Path(folder) / f"ready{rank}").touch()
    while not (Path(folder) / "go").exists():
        time.sleep(0.01)


@pytest.mark.parametrize("ignore", [True, False], ids=["ranks-finish", "ranks-die-of-it"])
def test_a_signal_to_spawn_as_its_ranks_finish_or_die_of_it_is_reported(tmp_path, ignore):
    """SIGTERM to the parent is passed on to the ranks. Where they finish all the same, it used to
    vanish (spawn returned); where they died of it (-15), a raw ProcessExitedException escaped
    (a traceback, not the one-line stop with status 143): both now raise Stopped."""
    import os
    import signal
    import threading
    import time

    from s2s import runguard

    def signal_when_ready():
        deadline = time.monotonic() + 120
        while not all((tmp_path / f"ready{r}").exists() for r in (0, 1)):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGTERM)  # spawn's handler passes it on to the ranks
        time.sleep(0.5)
        (tmp_path / "go").touch()

    threading.Thread(target=signal_when_ready, daemon=True).start()
    said = ("SIGTERM received as the training processes finished: their outputs are complete"
            if ignore else r"training process \d stopped by SIGTERM; ")
    with pytest.raises(runguard.Stopped, match=said) as stopped:
        distributed.spawn(_signal_proof_worker, 2, str(tmp_path), ignore)
    assert stopped.value.exit_status == 128 + signal.SIGTERM


def test_a_killed_rank_ends_the_run_in_bounded_time_and_the_rerun_resumes(
        data, two_process_reference):
    import signal
    import time

    from torch.multiprocessing.spawn import ProcessException

    tmp, _ = data
    params, want = two_process_reference
    paths = train_paths(tmp, "sigkill")
    t0 = time.monotonic()
    with pytest.raises(ProcessException):  # rank 1's death or rank 0's failed collective
        distributed.spawn(_faulty_worker, 2, params, paths, 1, FAULT_STEP, signal.SIGKILL)
    # rank 0's collective fails as its peer's socket closes; nothing waits for the timeout
    assert time.monotonic() - t0 < 60 + distributed.GRACE_SECONDS
    assert torch.load(tmp / "sigkill" / "ckpt" / "last.pt", weights_only=True)["step"] == 4
    distributed.spawn(train_stage.main, 2, params, "reversed_1", paths)
    assert_same_weights(torch.load(tmp / "sigkill" / "model" / "model.pt",
                                   weights_only=True)["model"], want)


def test_only_rank_0_reads_the_resume_point(data, two_process_reference):
    """A rank that cannot read the checkpoint folder (another node's disk, a transient error)
    still resumes at rank 0's step, with rank 0's weights."""
    import signal

    from s2s import runguard

    tmp, _ = data
    params, want = two_process_reference
    paths = train_paths(tmp, "unreadable")
    with pytest.raises(runguard.Stopped):
        distributed.spawn(_faulty_worker, 2, params, paths, 0, FAULT_STEP, signal.SIGTERM)
    distributed.spawn(_faulty_worker, 2, params, paths, 0, 0, None, 1)
    got = torch.load(tmp / "unreadable" / "model" / "model.pt", weights_only=True)
    assert_same_weights(got["model"], want)


# One rank of an `srun` step, as its own process: train_stage.main on (params, paths) pickled in
# the file argv[1], the world in the environment (RANK, WORLD_SIZE, MASTER_ADDR/PORT).
RANK_OF_A_STEP = ("import pickle, sys\n"
                  "from s2s.stages import train as train_stage\n"
                  "with open(sys.argv[1], 'rb') as f:\n"
                  "    params, paths = pickle.load(f)\n"
                  "train_stage.main(params, 'reversed_1', paths)\n")


def srun_ranks(jobs: list, prelude: str = "") -> list[tuple[int, str]]:
    """Two ranks started as srun starts them (no parent to end the others when one fails), rank r
    running RANK_OF_A_STEP on the pickled (params, paths) `jobs[r]` after `prelude`: each rank's
    exit status and output, once both ended or 60 s passed (then they are killed)."""
    import os
    import subprocess
    import sys
    import time

    env = {**os.environ, "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(distributed.free_port())}
    ranks = [subprocess.Popen([sys.executable, "-c", prelude + RANK_OF_A_STEP, str(job)],
                              env={**env, "RANK": str(r), "LOCAL_RANK": str(r)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r, job in enumerate(jobs)]
    deadline = time.monotonic() + 60
    try:
        outs = [p.communicate(timeout=max(1.0, deadline - time.monotonic()))[0] for p in ranks]
    finally:
        for p in ranks:
            if p.poll() is None:
                p.kill()
                p.communicate()
    return [(p.returncode, out) for p, out in zip(ranks, outs)]


def test_a_lock_rank_0_cannot_take_fails_every_rank_at_once(data, tmp_path):
    """Ranks started as srun starts them, with no parent to end the others when one fails: rank 0
    cannot take the checkpoint folder's lock (another trainer holds it), and rank 1 fails with
    its error at once instead of waiting for rank 0 in the rendezvous for TIMEOUT."""
    import os
    import pickle

    from s2s import runguard

    tmp, params = data
    paths = train_paths(tmp, "locked")
    job = tmp_path / "job.pkl"
    job.write_bytes(pickle.dumps((params, paths)))
    with runguard.FolderLock(paths.ckpt_dir):  # another trainer's
        ended = srun_ranks([job, job])  # the old rank 1 waited 15 minutes
    holder = f"another trainer (PID {os.getpid()}) is writing {paths.ckpt_dir}"
    for rank, (status, out) in enumerate(ended):
        assert status != 0 and f"LockedError: {paths.ckpt_dir}" in out, (rank, out[-3000:])
        assert holder in out, (rank, out[-3000:])
    assert not paths.last.exists() and not paths.model_dir.exists()


def test_a_resume_point_rank_0_cannot_read_this_time_fails_every_rank_at_once(
        data, two_process_reference, tmp_path):
    """Ranks started as srun starts them: rank 0 meets an I/O error reading the resume point,
    and every rank stops with its error at once (none waits for rank 0 in a collective for
    TIMEOUT), the resume point kept for the rerun."""
    import pickle
    import shutil

    tmp, _ = data
    params, _ = two_process_reference
    paths = train_paths(tmp, "eio")
    shutil.copytree(tmp / "ref2" / "ckpt", paths.ckpt_dir)
    kept = paths.last.read_bytes()
    job = tmp_path / "job.pkl"
    job.write_bytes(pickle.dumps((params, paths)))
    eio_on_rank_0 = ("import errno, os\n"
                     "from s2s import checkpoint\n"
                     "def load(*args, **kw):\n"
                     "    raise OSError(errno.EIO, 'Input/output error')\n"
                     "if os.environ['RANK'] == '0':\n"
                     "    checkpoint.torch.load = load\n")
    said = (f"CheckpointUnread: {paths.last}: cannot read the checkpoint (OSError: [Errno 5] "
            f"Input/output error); the resume point is kept")
    for rank, (status, out) in enumerate(srun_ranks([job, job], eio_on_rank_0)):
        assert status != 0 and said in out, (rank, out[-3000:])
    assert paths.last.read_bytes() == kept and not paths.model_dir.exists()


def test_ranks_that_read_other_data_or_settings_stop_at_once_naming_the_rank(data, tmp_path):
    """Ranks started as srun starts them, rank 1 with another train.batch_size (a node with
    another params file; another ids folder is the same): every rank fingerprints the files it
    reads, and both stop before the first step, naming rank 1. Before, each rank ordered its
    batches by its own data: shares that overlap or leave pairs out, or a step count that
    hangs a collective until TIMEOUT."""
    import dataclasses
    import pickle

    tmp, params = data
    paths = train_paths(tmp, "differ")
    jobs = []
    for rank, batch_size in ((0, params.train.batch_size), (1, params.train.batch_size // 2)):
        job = tmp_path / f"job{rank}.pkl"
        job.write_bytes(pickle.dumps((dataclasses.replace(params, train=dataclasses.replace(
            params.train, batch_size=batch_size)), paths)))
        jobs.append(job)
    said = "ValueError: reversed_1: rank 1 of 2 reads other training data or settings than rank 0"
    for rank, (status, out) in enumerate(srun_ranks(jobs)):
        assert status != 0 and said in out, (rank, out[-3000:])
    assert not paths.last.exists() and not paths.model_dir.exists()


def _adam_worker(out: str) -> None:
    torch.set_num_threads(1)
    world = distributed.World.from_env()
    device = distributed.init(world, torch.device("cpu"))
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    if world.is_main:  # rank 0 resumed an Adam run: it has moments, rank 1 has none
        model(torch.ones(4, 3)).sum().backward()
        opt.step()
    distributed.broadcast_optimizer_state(opt, world, device)
    state = opt.state_dict()["state"]
    torch.save(state, f"{out}.{world.rank}")


def test_adams_moments_reach_every_rank(tmp_path):
    out = str(tmp_path / "adam")
    distributed.spawn(_adam_worker, 2, out)
    a, b = (torch.load(f"{out}.{r}", weights_only=True) for r in (0, 1))
    assert set(a) == set(b) == {0, 1}
    for i in a:
        assert set(a[i]) == set(b[i]) == {"step", "exp_avg", "exp_avg_sq"}
        for k in a[i]:
            assert torch.equal(a[i][k], b[i][k]), (i, k)
        assert a[i]["exp_avg"].abs().sum() > 0


def test_a_rank_that_sees_one_gpu_takes_cuda_0_and_too_few_gpus_are_named(monkeypatch):
    """A scheduler that binds one GPU to each task (each sees one device) gave ranks >= 1
    cuda:<local rank>, an invalid device ordinal; with several visible, each local rank takes its
    own, and a local rank with none is an error that names both numbers."""
    import logging

    chosen = []
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    monkeypatch.setattr(distributed.dist, "is_initialized", lambda: True)  # no process group
    # init quiets ranks >= 1: not this test's process
    monkeypatch.setattr(logging.getLogger("s2s"), "setLevel", lambda level: None)
    world = distributed.World(rank=3, size=4, local_rank=1)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert distributed.init(world, torch.device("cuda")) == torch.device("cuda", 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert distributed.init(world, torch.device("cuda")) == torch.device("cuda", 1)
    assert chosen == [torch.device("cuda", 0), torch.device("cuda", 1)]
    with pytest.raises(RuntimeError, match="local rank 2 .* but 2 are visible"):
        distributed.init(distributed.World(rank=2, size=4, local_rank=2), torch.device("cuda"))


def test_rank_1_keeps_adams_step_on_the_cpu_as_rank_0_does(monkeypatch):
    """Two ranks played in one process on device 'meta' (a stand-in for CUDA): rank 0 holds a
    resumed Adam's `step` on the CPU (the checkpoint is read to the CPU and load_state_dict
    leaves `step` there) and its moments on the device; rank 1 must end the same, or every one
    of its updates reads `step` back from the GPU, a sync per parameter."""
    device = torch.device("meta")
    sent: dict = {}

    def fake_broadcast_object(obj, world, device):
        if world.is_main:
            sent["layout"] = obj
        return sent["layout"]

    def fake_broadcast(t, src):  # rank 0 sends, rank 1 receives (meta tensors hold no data)
        sent["count"] += world.is_main

    sent["count"] = 0

    monkeypatch.setattr(distributed, "broadcast_object", fake_broadcast_object)
    monkeypatch.setattr(distributed.dist, "broadcast", fake_broadcast)

    def adam():
        params = [torch.nn.Parameter(torch.zeros(2, 3, device=device)),
                  torch.nn.Parameter(torch.zeros(2, device=device))]
        return params, torch.optim.Adam(params, lr=0.1)

    p0, opt0 = adam()
    opt0.load_state_dict({"state": {i: {"step": torch.tensor(5.0), "exp_avg": torch.ones(p.shape),
                                        "exp_avg_sq": torch.ones(p.shape)}
                                    for i, p in enumerate(p0)},
                          "param_groups": opt0.state_dict()["param_groups"]})
    assert {opt0.state[p]["step"].device.type for p in p0} == {"cpu"}
    world = distributed.World(rank=0, size=2)
    distributed.broadcast_optimizer_state(opt0, world, device)
    p1, opt1 = adam()
    world = distributed.World(rank=1, size=2)
    distributed.broadcast_optimizer_state(opt1, world, device)
    for p in p1:
        s = opt1.state[p]
        assert s["step"].device.type == "cpu" and s["step"].item() == 5.0
        assert s["exp_avg"].device == s["exp_avg_sq"].device == device
        assert s["exp_avg"].shape == p.shape
    assert sent["count"] == 4  # the moments by broadcast; each `step` went in the layout


def test_each_rank_draws_its_own_dropout_masks_and_rank_0_the_one_process_ones():
    from s2s.train import dropout_seed

    one = dropout_seed(111, 7, distributed.World())
    assert one == 111 * 1_000_003 + 7
    seeds = {dropout_seed(111, step, distributed.World(rank=r, size=4))
             for r in range(4) for step in range(1000)}
    assert len(seeds) == 4000  # no two (rank, step) share a stream
    assert dropout_seed(111, 7, distributed.World(rank=0, size=4)) == one
