"""Where a stage runs: `train.device` / `translate.device` (auto, cpu or cuda) and the stage's
`resources.<kind>.gpus` as a torch device, and which of the machine's GPUs a job may use.

Policy (:func:`pick_device`): `cpu` is the CPU; `cuda` is CUDA or an error naming the key;
`auto` follows the GPUs the stage's resources ask for: the CPU at 0, CUDA above, and an error
where torch sees no CUDA device (a GPU job never trains silently on the CPU). Without resources
(translating one's own text) `auto` is CUDA when torch sees a GPU.

Jobs side by side (:func:`claim_gpus`): a job that asks for N GPUs (``S2S_JOB_GPUS``, set by the
Snakemake rule from its `gpu` resource) takes N of the visible GPUs that no other job of this user
holds, by ``flock`` on one lock file per GPU, and narrows ``CUDA_VISIBLE_DEVICES`` to them before
CUDA starts. The kernel drops a dead job's locks. Under SLURM the scheduler has already confined
the job to its GPUs, so nothing is claimed.
"""

from __future__ import annotations

import fcntl
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import torch

log = logging.getLogger("s2s.device")

JOB_GPUS = "S2S_JOB_GPUS"  # how many GPUs the job's rule asks for
LOCK_DIR = "S2S_GPU_LOCK_DIR"  # where the per-GPU lock files live (default: a per-user temp dir)
NVIDIA_PROC = Path("/proc/driver/nvidia/gpus")  # there where an NVIDIA driver is loaded

_held: list[int] = []  # file descriptors of claimed GPUs: open for the life of the process


class NoCudaError(RuntimeError):
    """A stage asks for a GPU where torch sees none."""


def _no_cuda(reason: str, otherwise: str = "") -> NoCudaError:
    build = "a CPU build" if torch.version.cuda is None else f"CUDA {torch.version.cuda}"
    return NoCudaError(f"{reason} but torch sees no CUDA device (torch {torch.__version__}, "
                       f"{build}): install a CUDA build of torch (docs/gpu.md){otherwise}")


# What torch's CPU allocator says when malloc fails: a plain RuntimeError (torch 2.13), not the
# torch.OutOfMemoryError of the CUDA allocator: "[enforce fail at alloc_cpu.cpp:127] err == 0.
# DefaultCPUAllocator: can't allocate memory: you tried to allocate 68719476736 bytes. Error code
# 12 (Cannot allocate memory)".
CPU_OUT_OF_MEMORY = "DefaultCPUAllocator: can't allocate memory"


def out_of_memory(e: BaseException) -> str | None:
    """torch's own first words for an allocator out of memory (what it tried to allocate):
    a torch.OutOfMemoryError, or the CPU allocator's RuntimeError; None for any other error."""
    first = str(e).split("\n")[0]
    if isinstance(e, torch.OutOfMemoryError):
        return ". ".join(first.split(". ")[:2]).rstrip(".")
    if isinstance(e, RuntimeError) and CPU_OUT_OF_MEMORY in first:
        return first[first.index(CPU_OUT_OF_MEMORY):].split(". ")[0]  # after "[enforce fail ...]"
    return None


def pick_device(name: str, *, key: str, gpus: int | None = None,
                gpus_key: str | None = None) -> torch.device:
    """The device of `name` (auto, cpu, cuda), read from params `key`. With `gpus` (the stage's
    `resources.<kind>.gpus`, read from `gpus_key`), `auto` is the CPU at 0 and CUDA above."""
    if name == "cuda":
        if not torch.cuda.is_available():
            raise _no_cuda(f"{key} is 'cuda'")
        return torch.device("cuda")
    if name == "cpu":
        return torch.device("cpu")
    if name != "auto":
        raise ValueError(f"{key} must be auto, cpu or cuda, got {name!r}")
    if gpus is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if gpus == 0:
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise _no_cuda(f"{gpus_key or 'resources'} is {gpus} ({key}: auto),",
                       ", or set it to 0 to run on the CPU")
    return torch.device("cuda")


def for_stage(params, kind: str, *, name: str, key: str) -> torch.device:
    """The device of a stage of `kind` (train, translate, rescore, timing): its GPUs claimed
    first where a Snakemake job asks for them (:func:`claim_job_gpus`), then :func:`pick_device`
    with the stage's resources (:func:`for_resources`)."""
    return for_resources(params.resources_for(kind).gpus, kind, name=name, key=key)


def for_resources(gpus: int, kind: str, *, name: str, key: str) -> torch.device:
    """:func:`for_stage` with `resources.<kind>.gpus` already read: `gpus`."""
    claim_job_gpus()
    return pick_device(name, key=key, gpus=gpus, gpus_key=f"resources.{kind}.gpus")


def visible_gpus(env: Mapping[str, str] | None = None,
                 count: Callable[[], int] | None = None) -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES names them: its entries where it is
    set (an empty value: none), else one index per GPU the driver lets it use (`count`, default
    :func:`gpu_count`)."""
    env = os.environ if env is None else env
    if "CUDA_VISIBLE_DEVICES" in env:
        return [d.strip() for d in env["CUDA_VISIBLE_DEVICES"].split(",") if d.strip()]
    return [str(i) for i in range((count or gpu_count)())]


def gpu_count(run=subprocess.run) -> int:
    """How many GPUs the NVIDIA driver lets this process use, counted without starting CUDA in
    it (once CUDA has started, narrowing CUDA_VISIBLE_DEVICES changes nothing): NVML
    (nvidia-ml-py) where it is installed, else ``torch.cuda.device_count()`` in a child process;
    0 where no NVIDIA driver is loaded. (Not the driver's list in /proc, which in a container can
    name the host's GPUs the container cannot use.)"""
    if not NVIDIA_PROC.parent.exists():
        return 0
    try:
        import pynvml
    except ImportError:
        pynvml = None
    if pynvml is not None:
        try:
            pynvml.nvmlInit()
            try:
                return int(pynvml.nvmlDeviceGetCount())
            finally:
                pynvml.nvmlShutdown()
        except pynvml.NVMLError as e:
            log.warning("NVML could not count the GPUs (%s); asking torch in a child process", e)
    try:
        proc = run([sys.executable, "-c", "import torch; print(torch.cuda.device_count())"],
                   capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        raise RuntimeError("counting the GPUs: torch.cuda.device_count() in a child process "
                           "gave no answer in 300 s (a hung NVIDIA driver?); nvidia-ml-py "
                           "counts them without CUDA (pip install nvidia-ml-py)") from None
    try:
        return int(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else 0
    except (ValueError, IndexError):
        return 0


def _lock_name(gpu: str) -> str:
    return "gpu-" + "".join(c if c.isalnum() or c in "-_" else "_" for c in gpu) + ".lock"


def claim_gpus(n: int, gpus: list[str], *, lock_dir: Path, wait: float = 5.0,
               report_every: float = 60.0) -> list[str]:
    """Take `n` of `gpus` that no other live process holds (one ``flock`` per GPU in `lock_dir`),
    waiting while fewer are free; the locks live as long as this process. Returns their names."""
    if n > len(gpus):
        raise ValueError(f"the job asks for {n} GPUs but {len(gpus)} are visible "
                         f"({','.join(gpus) or 'none'})")
    lock_dir.mkdir(parents=True, exist_ok=True)
    waited, last_report = 0.0, -report_every
    while True:
        taken: list[tuple[str, int]] = []
        for gpu in gpus:
            fd = os.open(lock_dir / _lock_name(gpu), os.O_RDWR | os.O_CREAT, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            taken.append((gpu, fd))
            if len(taken) == n:
                _held.extend(fd for _, fd in taken)
                return [g for g, _ in taken]
        for _, fd in taken:  # not enough: give back what was taken, so no two jobs deadlock
            os.close(fd)
        if waited - last_report >= report_every:
            log.info("waiting for %d free GPU(s) of %s (held by other jobs; locks in %s)", n,
                     ",".join(gpus), lock_dir)
            last_report = waited
        time.sleep(wait)
        waited += wait


def claim_job_gpus(env: dict[str, str] | None = None) -> list[str] | None:
    """Narrow CUDA_VISIBLE_DEVICES to the GPUs this job claims, where its rule asks for some
    (``S2S_JOB_GPUS``) and no scheduler has confined it (``SLURM_JOB_ID``). Returns the GPUs
    claimed, or None. Call before anything starts CUDA."""
    env = os.environ if env is None else env
    raw = env.get(JOB_GPUS, "").strip()
    if not raw or "SLURM_JOB_ID" in env:
        return None
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"{JOB_GPUS} must be a whole number of GPUs, got {raw!r}") from None
    gpus = visible_gpus(env)
    if n <= 0 or not gpus:  # no GPU here: the device choice says what that means for the stage
        return None
    lock_dir = Path(env.get(LOCK_DIR) or Path(tempfile.gettempdir()) / f"s2s-gpus-{os.getuid()}")
    mine = claim_gpus(min(n, len(gpus)), gpus, lock_dir=lock_dir)
    env["CUDA_VISIBLE_DEVICES"] = ",".join(mine)
    del env[JOB_GPUS]  # claimed: the job's own processes (data-parallel ranks) claim nothing more
    log.info("job GPUs: %s (of %s)", ",".join(mine), ",".join(gpus))
    return mine


def describe(device: torch.device) -> str:
    """The device in words for records: "cpu", or "cuda (NVIDIA H200)"."""
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return device.type
