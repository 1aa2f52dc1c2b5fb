"""Mixed precision: bf16 matrix products, fp32 everything that accumulates.

`train.amp` and `translate.amp` take ``false`` (fp32 throughout: today's numbers, bit for bit),
``true`` (bf16 matmuls wherever the device runs bf16) or ``"auto"`` (bf16 only where the hardware
has a bf16 matrix engine, see :func:`bf16_engine`; fp32 elsewhere).

What runs in bf16 when it is on: the GEMMs, i.e. the products of activations and weights (the
LSTM input and recurrent products, the softmax layer, the attention and output layers). What
stays fp32: the master weights and their gradients, SGD, gradient-norm clipping, the LSTM cell
state and gate non-linearities, the log-softmax, the loss and its sum, beam-search scores. The
hand-written CPU paths (``s2s.model.fused``, ``s2s.losses``) take the product dtype explicitly
(:func:`matmul_dtype`); everything else runs under ``torch.autocast``, which casts the inputs of
``linear``/``mm``/``bmm`` and caches each weight's bf16 copy for the life of the context.
nn.GRU has no autocast rule on the CPU, so a GRU's recurrence stays fp32 there.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass

import torch

__all__ = ["Precision", "autocast", "bf16_engine", "choose", "cpu_kind", "full", "matmul_dtype",
           "name"]


@functools.lru_cache(maxsize=None)
def _cpu_flags() -> frozenset[str]:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def cpu_kind() -> str:
    """This machine's CPU in words, with its bf16 engine, which decides bf16 speed and bits:
    e.g. "AMD EPYC (AVX512-BF16)", "Intel Xeon ... (Intel AMX-BF16)"."""
    name = "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{name} ({bf16_engine(torch.device('cpu')) or 'no bf16 engine'})"


def bf16_engine(device: torch.device) -> str | None:
    """The bf16 matrix hardware of ``device``, in words, or None if it has none.

    CPU: Intel AMX (``amx_bf16``) or AVX512-BF16 dot products (``avx512_bf16``: Intel Cooper Lake
    and later, AMD Zen 4 and later), which oneDNN uses for bf16 GEMMs. CUDA: tensor cores with
    bf16 (compute capability 8.0 and later)."""
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        if major >= 8:
            return f"bf16 tensor cores (sm_{major}{minor}, {torch.cuda.get_device_name(device)})"
        return None
    if device.type == "cpu":
        flags = _cpu_flags()
        if "amx_bf16" in flags or torch.cpu._is_amx_tile_supported():
            return "Intel AMX-BF16"
        if "avx512_bf16" in flags or torch.cpu._is_avx512_bf16_supported():
            return "AVX512-BF16"
    return None


@dataclass(frozen=True)
class Precision:
    """What `amp` resolved to on a device, once (:func:`choose`): the matmul dtype
    (torch.bfloat16, or None for fp32) and why, in one log phrase."""

    dtype: torch.dtype | None
    why: str

    @property
    def name(self) -> str:
        """"fp32" or "bf16", as metrics and timing files record it."""
        return name(self.dtype)

    def __str__(self) -> str:
        return self.why


def choose(amp: bool | str, device: torch.device) -> Precision:
    """The precision `amp` asks for on `device` (``amp`` was checked when params were loaded;
    an API caller's value is checked here)."""
    if amp not in (True, False, "auto"):
        raise ValueError(f"amp must be true, false or 'auto', got {amp!r}")
    engine = bf16_engine(device)
    if amp is False or (amp == "auto" and engine is None):
        why = "amp: false" if amp is False else f"no bf16 matrix engine on {device.type}"
        return Precision(None, f"fp32 ({why})")
    hw = engine or "no bf16 matrix engine: emulated, expect it to be slower"
    return Precision(torch.bfloat16,
                     f"bf16 matmuls, fp32 weights/state/loss ({hw}; amp: {str(amp).lower()})")


def name(dtype: torch.dtype | None) -> str:
    """The precision a resolved matmul dtype stands for, as metrics and timing files record it."""
    return "fp32" if dtype is None else str(dtype).removeprefix("torch.").replace("bfloat16", "bf16")


def autocast(device: torch.device, dtype: torch.dtype | None):
    """``torch.autocast`` at `dtype` on `device`, or a no-op context for fp32."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)


def matmul_dtype(x: torch.Tensor) -> torch.dtype | None:
    """The dtype autocast gives matmuls on ``x``'s device here, or None if it is off."""
    kind = x.device.type
    if torch.is_autocast_enabled(kind):
        return torch.get_autocast_dtype(kind)
    return None


def full(x: torch.Tensor) -> torch.Tensor:
    """``x`` in fp32 if it is in a 16-bit float dtype (a product under autocast), else ``x``
    itself (fp32 and fp64 tensors pass unchanged: the fp32 path stays bit for bit)."""
    return x.float() if x.dtype in (torch.bfloat16, torch.float16) else x
