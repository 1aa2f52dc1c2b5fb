"""Data-parallel training helpers (torch.distributed): one process per GPU, one global batch.

Every rank walks the same batch order (a function of order_seed and epoch) and takes a disjoint
share of each minibatch's sentences; the per-rank losses are divided by the *global* batch size and
the gradients summed over ranks, so each update is that of single-process training on the whole
batch, up to floating-point reduction order, for every model without dropout (the recurrent
ones). A model with dropout draws its masks from a stream of its own on each rank (the step and
the rank seed it), so its update equals one process's in distribution, not in its bits. The
learning-rate schedule, clipping and checkpoints are unchanged; only rank 0 writes files.

The ranks act as one: rank 0 reads the resume point and sends every rank the step, the weights
and the optimizer's state (:func:`broadcast_object`, :func:`broadcast_parameters`,
:func:`broadcast_optimizer_state`); a stop signal seen by any rank stops all of them after the
same step (the step's :class:`StopVote`, in its loss collective); a lock rank 0 cannot take fails
every rank at once (:func:`held_on_main`); a collective waits at most :data:`TIMEOUT` for a dead
peer.

Processes come from ``torchrun`` (which sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT),
from SLURM's ``srun``, or from :func:`spawn`, which `s2s train` uses when `resources.train.gpus` > 1
and that many CUDA devices are visible (one SLURM job with several GPUs). Backend: NCCL on CUDA,
gloo on CPU.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime
import logging
import os
import pickle
import re
import signal
import socket
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
import torch.distributed as dist
from torch import nn

log = logging.getLogger("s2s.distributed")

T = TypeVar("T")

# Gradients are all-reduced in flat buckets of at most this many elements: one collective per
# bucket instead of one per tensor, without a second copy of a 384M-parameter model's gradients.
BUCKET_NUMEL = 1 << 25
# How long a collective waits for a peer before the rank fails (a dead or hung rank must not hold
# the others and their GPUs for NCCL's default). Longer than any gap between two collectives: a
# dev evaluation and rank 0's checkpoint writes.
TIMEOUT = datetime.timedelta(minutes=15)
# After one rank fails, how long the others get to stop before they are killed (s2s spawn).
GRACE_SECONDS = 30.0


@dataclass(frozen=True)
class World:
    """This process's place among the training processes. One process: rank 0 of size 1."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> "World":
        """The world the environment describes: torchrun's (or :func:`spawn`'s) RANK,
        WORLD_SIZE and LOCAL_RANK; else, in a task of an ``srun`` step, SLURM's SLURM_PROCID,
        SLURM_STEP_NUM_TASKS and SLURM_LOCALID, with the rendezvous filled in by
        :func:`slurm_rendezvous`; else one process. A batch script's own environment is no
        step (SLURM_NTASKS there counts the tasks it *may* start), so it is one process."""
        env = os.environ if env is None else env
        if "WORLD_SIZE" not in env and "SLURM_STEP_ID" in env:
            size = int(env.get("SLURM_STEP_NUM_TASKS") or env.get("SLURM_NTASKS", "1"))
            if size > 1:
                slurm_rendezvous(env)
                return cls(rank=int(env["SLURM_PROCID"]), size=size,
                           local_rank=int(env.get("SLURM_LOCALID", "0")))
            return cls()
        size = int(env.get("WORLD_SIZE", "1"))
        rank = int(env.get("RANK", "0"))
        return cls(rank=rank, size=size, local_rank=int(env.get("LOCAL_RANK", str(rank))))


def slurm_rendezvous(env: dict[str, str]) -> None:
    """Where the ranks of an ``srun`` step meet, unless MASTER_ADDR/MASTER_PORT are set already:
    the step's first node (``gpu[07-09,12],cpu1`` -> ``gpu07``), and a port in 20000-29999 from
    the job and step IDs, so that the ranks agree without talking and two steps running at once
    on one node (different IDs) rarely collide; set MASTER_PORT yourself where that matters."""
    if "MASTER_ADDR" not in env:
        nodes = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST", "")
        first = re.match(r"([^,\[]*)(?:\[([^\],-]*))?", nodes.strip())
        if not first[1] and not first[2]:
            raise ValueError(f"SLURM_STEP_NODELIST {nodes!r}: expected host names like "
                             f"'node[01-04]'")
        env["MASTER_ADDR"] = first[1] + (first[2] or "")
    if "MASTER_PORT" not in env:
        job, step = int(env.get("SLURM_JOB_ID", "0")), int(env.get("SLURM_STEP_ID", "0"))
        env["MASTER_PORT"] = str(20000 + (job * 16 + step) % 10000)


def init(world: World, device: torch.device) -> torch.device:
    """Join the process group (a no-op for one process, or for a rank that has joined already);
    return this rank's device."""
    if world.size == 1:
        return device
    if device.type == "cuda":
        device = rank_device(world, torch.cuda.device_count())
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo",
                                rank=world.rank, world_size=world.size, timeout=TIMEOUT,
                                device_id=device if device.type == "cuda" else None)
        atexit.register(_destroy)
        log.info("rank %d of %d on %s (%s)", world.rank, world.size, device, dist.get_backend())
    if not world.is_main:  # one copy of each progress line: rank 0's
        logging.getLogger("s2s").setLevel(logging.WARNING)
    return device


def rank_device(world: World, visible: int) -> torch.device:
    """This rank's CUDA device among the `visible` ones: cuda:0 where it sees one (a scheduler
    that binds one GPU to each task, SLURM's --gpus-per-task, hides the others: its local rank
    would name a device it cannot see), else cuda:<local rank>."""
    if visible == 1:
        return torch.device("cuda", 0)
    if world.local_rank >= visible:
        raise RuntimeError(f"rank {world.rank}: local rank {world.local_rank} needs a CUDA device "
                           f"of its own, but {visible} are visible on this node (one per local "
                           f"rank, or exactly one per task)")
    return torch.device("cuda", world.local_rank)


def _destroy() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def processes_for(gpus: int, device_name: str) -> int:
    """How many training processes to spawn for `gpus` requested GPUs: never more than the CUDA
    devices visible, and one on CPU (torchrun can still start several there, e.g. for tests)."""
    if gpus <= 1 or device_name == "cpu" or not torch.cuda.is_available():
        return 1
    visible = torch.cuda.device_count()
    if visible < gpus:
        log.warning("resources.train.gpus is %d but %d CUDA devices are visible; using %d",
                    gpus, visible, visible)
    return min(gpus, visible)


def shard(items: Sequence[T], world: World) -> list[T]:
    """This rank's share of a minibatch: every size-th sentence from its rank on. The batch is
    sorted by length, so the shares have about the same lengths; a share may be empty."""
    return list(items[world.rank::world.size])


def all_reduce_sum(values: Iterable[float | torch.Tensor], world: World,
                   device: torch.device) -> list[float]:
    """Sum scalars over ranks (one collective), read back in one transfer (the one wait for the
    device: the values go onto the device without one); with one process, the values as
    floats."""
    values = list(values)
    if world.size == 1:
        return [float(v) for v in values]
    t = torch.stack([v.detach().to(device, torch.float64).reshape(()) if isinstance(v, torch.Tensor)
                     else torch.full((), float(v), dtype=torch.float64, device=device)
                     for v in values])  # (K,) filled on the device: no host-to-device copy
    dist.all_reduce(t)
    return t.tolist()


def _never() -> bool:
    return False


@dataclass
class StopVote:
    """One step's vote on stopping: `asks()`, whether this rank asks to stop (it has a stop
    signal), read as the step's loss collective is sent; `agreed`, set by the step, whether any
    rank asked. Several processes add the vote to that collective (s2s.train.train_step), so that
    stopping together costs no collective and no wait of its own; one process: `agreed` is what
    `asks()` said."""

    asks: Callable[[], bool] = _never
    agreed: bool = False


def broadcast_object(obj: Any, world: World, device: torch.device) -> Any:
    """Rank 0's `obj` (picklable, small: no weights) on every rank."""
    if world.size == 1:
        return obj
    box = [obj if world.is_main else None]
    dist.broadcast_object_list(box, src=0, device=device if device.type == "cuda" else None)
    return box[0]


def all_gather_object(obj: Any, world: World) -> list[Any]:
    """Every rank's `obj` (picklable, small), in rank order, on every rank (on CUDA through the
    rank's own GPU, which :func:`init` made the current one)."""
    if world.size == 1:
        return [obj]
    out: list[Any] = [None] * world.size
    dist.all_gather_object(out, obj)
    return out


def on_main(fn: Callable[[], T], world: World, device: torch.device) -> T | None:
    """`fn()` on rank 0 alone, every rank told whether it failed: if so, every rank raises rank
    0's error (the others a copy) at once, instead of waiting for rank 0 in their next collective
    for up to TIMEOUT. Its value on rank 0, None on the others. The ranks must have joined the
    process group (:func:`init`)."""
    value, error = None, None
    if world.is_main:
        try:
            value = fn()
        except Exception as e:
            error = e
    failed = broadcast_object(None if error is None else _portable(error), world, device)
    if error is not None:
        raise error
    if failed is not None:
        raise failed
    return value


@contextlib.contextmanager
def held_on_main(resource: contextlib.AbstractContextManager, world: World,
                 device: torch.device) -> Iterator[None]:
    """Hold `resource` (a lock that one process may take) on rank 0 alone while the block runs,
    every rank told whether rank 0 could take it (:func:`on_main`)."""
    with contextlib.ExitStack() as held:
        on_main(lambda: held.enter_context(resource), world, device)
        yield


def _portable(error: Exception) -> Exception:
    """`error` as another rank can receive it: itself if it survives pickling, else a
    RuntimeError with its type and text."""
    try:
        return pickle.loads(pickle.dumps(error))
    except Exception:
        return RuntimeError(f"{type(error).__name__}: {error}")


def state_layout(obj: Any, device: torch.device, tensors: list[torch.Tensor]) -> Any:
    """Rank 0's optimizer state as it travels to the other ranks (a picklable object), given the
    ranks' `device`: a tensor on `device` becomes ("tensor", shape, dtype) and is appended to
    `tensors`, for a broadcast on the device (NCCL sends device tensors only); a tensor on the CPU
    while `device` is not (Adam's `step`, a scalar) travels in the layout itself as ("cpu",
    tensor), so that every rank holds it on the CPU as rank 0 does. Optimizer.load_state_dict
    leaves `step` where it finds it (it moves it only for a fused or capturable Adam), and a
    `step` on the GPU makes each update read it back with .item(): a device sync per parameter
    per step for the rest of the run."""
    if isinstance(obj, torch.Tensor):
        if obj.device.type == "cpu" and device.type != "cpu":
            return ("cpu", obj.detach().clone())
        tensors.append(obj)
        return ("tensor", tuple(obj.shape), str(obj.dtype).removeprefix("torch."))
    if isinstance(obj, dict):
        return {k: state_layout(v, device, tensors) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(state_layout(v, device, tensors) for v in obj)
    return obj


def build_state(layout: Any, device: torch.device, received: list[torch.Tensor]) -> Any:
    """The state `layout` (:func:`state_layout`'s) describes: each ("tensor", ...) empty on
    `device` for a broadcast to fill, appended to `received` in the order rank 0 sends them;
    each ("cpu", tensor) that tensor, on the CPU."""
    if isinstance(layout, tuple) and len(layout) == 3 and layout[0] == "tensor":
        t = torch.empty(layout[1], dtype=getattr(torch, layout[2]), device=device)
        received.append(t)
        return t
    if isinstance(layout, tuple) and len(layout) == 2 and layout[0] == "cpu" \
            and isinstance(layout[1], torch.Tensor):
        return layout[1]
    if isinstance(layout, dict):
        return {k: build_state(v, device, received) for k, v in layout.items()}
    if isinstance(layout, (list, tuple)):
        return type(layout)(build_state(v, device, received) for v in layout)
    return layout


def broadcast_optimizer_state(opt: torch.optim.Optimizer, world: World,
                              device: torch.device) -> None:
    """Give every rank rank 0's optimizer state (Adam's moments after a resume; SGD has none),
    each tensor on the device rank 0 holds it on: the layout travels as an object, each device
    tensor by a broadcast on the device (:func:`state_layout`)."""
    if world.size == 1:
        return
    state = opt.state_dict()
    tensors: list[torch.Tensor] = []
    layout = broadcast_object(state_layout(state["state"], device, tensors) if world.is_main
                              else None, world, device)
    if not layout:  # rank 0 has no state to give
        return
    if world.is_main:
        for t in tensors:
            dist.broadcast(t.data if t.device == device else t.to(device), src=0)
        return
    received: list[torch.Tensor] = []
    new_state = build_state(layout, device, received)
    for t in received:
        dist.broadcast(t, src=0)
    opt.load_state_dict({"state": new_state, "param_groups": state["param_groups"]})


def all_reduce_gradients(model: nn.Module, world: World) -> None:
    """Sum every parameter's gradient over ranks, in place. A rank whose share of the batch was
    empty contributes zeros. Reduction in float32 buckets of at most BUCKET_NUMEL elements."""
    if world.size == 1:
        return
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    bucket: list[nn.Parameter] = []
    numel = 0
    for p in params:
        if bucket and numel + p.numel() > BUCKET_NUMEL:
            _reduce_bucket(bucket)
            bucket, numel = [], 0
        bucket.append(p)
        numel += p.numel()
    if bucket:
        _reduce_bucket(bucket)


def _reduce_bucket(params: list[nn.Parameter]) -> None:
    flat = torch.cat([p.grad.reshape(-1) for p in params])  # (sum of numel,)
    dist.all_reduce(flat)
    offset = 0
    for p in params:
        n = p.numel()
        p.grad.copy_(flat[offset: offset + n].view_as(p.grad))
        offset += n


def broadcast_parameters(model: nn.Module, world: World) -> None:
    """Make every rank start from rank 0's weights (they agree already: a safeguard)."""
    if world.size == 1:
        return
    for t in list(model.parameters()) + list(model.buffers()):
        dist.broadcast(t.data, src=0)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def barrier(world: World) -> None:
    """Wait until every rank is here (one process: at once)."""
    if world.size > 1:
        dist.barrier()


def spawn(fn: Callable[..., Any], nprocs: int, *args: Any, **kwargs: Any) -> None:
    """Run fn(*args, **kwargs) in `nprocs` new processes that form one world on this machine,
    as torchrun would; return when all have finished.

    SIGTERM or SIGINT here is passed on to every rank, which then stop together after a step (the
    trainer writes its final checkpoint); a rank that stopped so exits with 128 + the signal, and
    this raises :class:`s2s.runguard.Stopped` with that status, as it does for a signal that came
    as the ranks finished (their work done, it is not lost). If a rank fails, the others get
    GRACE_SECONDS to end before they are killed, and its error is raised here. A rank whose parent
    dies gets SIGINT (torch.multiprocessing), i.e. stops as on a signal."""
    import torch.multiprocessing as mp

    from s2s.runguard import Stopped

    port = free_port()
    root = logging.getLogger()
    formatter = root.handlers[0].formatter if root.handlers else None
    if type(formatter) is not logging.Formatter:  # a subclass (pytest's) may not pickle
        formatter = None
    ctx = mp.start_processes(_worker, nprocs=nprocs, join=False, start_method="spawn",
                             args=(nprocs, port, (root.level, formatter), fn, args, kwargs))
    received: list[int] = []

    def pass_on(signum, frame) -> None:
        if not received:
            log.warning("%s received: passing it on to the %d training processes",
                        signal.Signals(signum).name, nprocs)
        received.append(signum)
        for p in ctx.processes:
            if p.is_alive():
                os.kill(p.pid, signal.SIGTERM)

    old = {}
    if threading.current_thread() is threading.main_thread():
        old = {sig: signal.signal(sig, pass_on) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        while not ctx.join(timeout=1.0, grace_period=GRACE_SECONDS):
            pass
    except mp.ProcessExitedException as e:
        # 128 + N: a rank that stopped on the signal; -N: one it reached after its own handlers
        # were gone (its work done), which the signal then ended
        code = e.exit_code or 0
        stopped_by = code - 128 if code > 128 else -code if code < 0 else None
        if stopped_by in (signal.SIGTERM, signal.SIGINT):
            raise Stopped(f"training process {e.error_index} stopped by "
                          f"{signal.Signals(stopped_by).name}; every rank stopped after the same "
                          f"step with a final checkpoint: rerun to resume", stopped_by) from None
        raise
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    if received:  # it came as the ranks finished: their work is done, and the signal still stops
        raise Stopped(f"{signal.Signals(received[0]).name} received as the training processes "
                      f"finished: their outputs are complete", received[0])


def _worker(rank: int, size: int, port: int, logging_setup: tuple, fn: Callable[..., Any],
            args: tuple, kwargs: dict) -> None:
    from s2s.runguard import Stopped

    level, formatter = logging_setup  # a spawned process starts with logging unconfigured
    handler = logging.StreamHandler()
    handler.setFormatter(formatter)
    logging.basicConfig(level=level, handlers=[handler])
    os.environ.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(size),
                       "LOCAL_WORLD_SIZE": str(size), "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": str(port)})
    try:
        fn(*args, **kwargs)
    except Stopped as e:  # not a failure: the exit status tells the parent which signal
        log.warning("%s", e)
        raise SystemExit(e.exit_status) from None
    finally:
        _destroy()
