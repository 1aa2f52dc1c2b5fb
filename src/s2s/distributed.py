"""Data-parallel training helpers (torch.distributed): one process per GPU, one global batch.

Every rank walks the same batch order (a function of order_seed and epoch) and takes a disjoint
share of each minibatch's sentences; the per-rank losses are divided by the *global* batch size and
the gradients summed over ranks, so each update is that of single-process training on the whole
batch, up to floating-point reduction order. The learning-rate schedule, clipping and checkpoints
are unchanged; only rank 0 writes files.

Processes come from ``torchrun`` (which sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT) or
from :func:`spawn`, which `s2s train` uses when `resources.train.gpus` > 1 and that many CUDA
devices are visible (one SLURM job with several GPUs). Backend: NCCL on CUDA, gloo on CPU.
"""

from __future__ import annotations

import atexit
import logging
import os
import socket
from collections.abc import Callable, Iterable, Sequence
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
    def from_env(cls) -> "World":
        """The world torchrun (or :func:`spawn`) describes in the environment."""
        size = int(os.environ.get("WORLD_SIZE", "1"))
        rank = int(os.environ.get("RANK", "0"))
        return cls(rank=rank, size=size, local_rank=int(os.environ.get("LOCAL_RANK", str(rank))))


def init(world: World, device: torch.device) -> torch.device:
    """Join the process group (a no-op for one process); return this rank's device."""
    if world.size == 1:
        return device
    if device.type == "cuda":
        device = torch.device("cuda", world.local_rank)
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo",
                                rank=world.rank, world_size=world.size,
                                device_id=device if device.type == "cuda" else None)
        atexit.register(_destroy)
    log.info("rank %d of %d on %s (%s)", world.rank, world.size, device, dist.get_backend())
    if not world.is_main:  # one copy of each progress line: rank 0's
        logging.getLogger("s2s").setLevel(logging.WARNING)
    return device


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
    """Sum scalars over ranks (one collective); with one process, the values as floats."""
    values = [float(v) for v in values]
    if world.size == 1:
        return values
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return t.tolist()


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


def spawn(fn: Callable[..., Any], nprocs: int, *args: Any, **kwargs: Any) -> None:
    """Run fn(*args, **kwargs) in `nprocs` new processes that form one world on this machine,
    as torchrun would; return when all have finished (an exception in any is raised here)."""
    import torch.multiprocessing as mp

    port = free_port()
    root = logging.getLogger()
    formatter = root.handlers[0].formatter if root.handlers else None
    if type(formatter) is not logging.Formatter:  # a subclass (pytest's) may not pickle
        formatter = None
    mp.spawn(_worker, args=(nprocs, port, (root.level, formatter), fn, args, kwargs),
             nprocs=nprocs, join=True)


def _worker(rank: int, size: int, port: int, logging_setup: tuple, fn: Callable[..., Any],
            args: tuple, kwargs: dict) -> None:
    level, formatter = logging_setup  # a spawned process starts with logging unconfigured
    handler = logging.StreamHandler()
    handler.setFormatter(formatter)
    logging.basicConfig(level=level, handlers=[handler])
    os.environ.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(size),
                       "LOCAL_WORLD_SIZE": str(size), "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": str(port)})
    try:
        fn(*args, **kwargs)
    finally:
        _destroy()
