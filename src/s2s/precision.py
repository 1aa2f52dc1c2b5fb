"""Mixed precision: which dtype each part of a model runs in, on the CPU and on CUDA.

`train.amp` and `translate.amp` take ``false`` (fp32 throughout), ``true`` (bf16 products wherever
the device runs bf16) or ``"auto"`` (bf16 only where the hardware has a bf16 matrix engine, see
:func:`bf16_engine`; fp32 elsewhere). :func:`choose` resolves it once per run into a
:class:`Precision`, the plan every part follows (:func:`plan` is the same decision as a pure
function of the device type and its engine):

=====================  =====================================  =====================================
part                   CPU                                    CUDA
=====================  =====================================  =====================================
products (GEMMs)       bf16 under ``torch.autocast``, or      bf16 under ``torch.autocast``, or
                       fp32                                   strict fp32 (TF32 off)
nn.LSTM / nn.GRU       bf16 products, fp32 state: the fused   cuDNN with autocast off: fp32 input,
sequences              LSTM (``s2s.model.fused``, either      weights and state, TF32 math in bf16
                       direction), nn.GRU written out         mode, strict fp32 in fp32 mode; or
                       (``gru_sequence``)                     explicit bf16 (``recurrent=bf16``)
LSTM c, h, gates and   fp32                                   fp32 (bf16 inside cuDNN only with
non-linearities                                               ``recurrent=bf16``)
softmax layer's        fp32 (the products before it in the    fp32 (its logits written in fp32
log-softmax and loss   products' dtype)                       from the bf16 product)
master weights, SGD,   fp32                                   fp32
gradients, clipping
a loop's weights'      fp32 sums over the steps               fp32 sums over the steps
gradients              (``s2s.model.recurrence``)             (``s2s.model.recurrence``)
=====================  =====================================  =====================================

torch's autocast would run cuDNN RNNs in fp16 whatever its dtype, with no loss scaling; so the
recurrent layers never run under autocast on CUDA: they take :func:`recurrent_dtype` explicitly
(``s2s.model.lstm.run_padded``). The peephole LSTM, Cho's GRU and single GRU steps run their
products under autocast and everything else in fp32 on both devices. One CPU path keeps its state
in bf16: an nn.LSTM under bf16 autocast over a batch of sequences of one length is oneDNN's bf16
LSTM, which the fused LSTM replaces (for the paper's stacks and the attention model's
bidirectional encoder alike); only ``StandardLSTM.fused_cpu = False`` (a benchmark's switch)
takes it, and :func:`watch` flags it.

TF32: :meth:`Precision.apply` (called by :func:`choose`) sets cuBLAS's and cuDNN's TF32 flags on
CUDA: off where fp32 is promised (fp32 mode), on in bf16 mode (the fp32 recurrence then runs TF32
math, more precise than the bf16 products around it). :meth:`Precision.strict_fp32` turns them
off for a block that promises fp32 inside a bf16 run (dev/test perplexity, exact rescoring). The
CPU's flags are never touched.

Which runs are bit for bit: docs/reproducibility.md (the CPU at a fixed thread count) and
docs/gpu.md (CUDA runs are not).
:func:`watch` checks that what ran is what the plan says.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from dataclasses import dataclass

import torch

__all__ = ["Precision", "PrecisionMismatch", "Watch", "autocast", "bf16_engine", "choose",
           "cpu_kind", "fp32_addmm", "fp32_bmm", "fp32_mm", "full", "matmul_dtype", "name", "name_of", "plan", "recurrent",
           "recurrent_dtype", "set_tf32", "strict_fp32", "tf32_flags", "watch"]

FP32, BF16 = torch.float32, torch.bfloat16


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
    """This machine's CPU in words, with its family and model (which tell generations apart
    where the name does not: AMD's "AMD EPYC" is family 23 on Zen 2, 25 on Zen 3 and 4, 26 on
    Zen 5) and its bf16 engine, which decide bf16 speed and bits: e.g. "AMD EPYC (family 26,
    model 2; AVX512-BF16)", "Intel Xeon ... (family 6, model 143; Intel AMX-BF16)"."""
    info = {}
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if not key.strip():  # the first processor's block ends at its blank line
                    break
                info.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    engine = bf16_engine(torch.device("cpu")) or "no bf16 engine"
    where = (f"family {info['cpu family']}, model {info['model']}; "
             if "cpu family" in info and "model" in info else "")
    return f"{info.get('model name', 'unknown CPU')} ({where}{engine})"


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


def name(dtype: torch.dtype | None) -> str:
    """The precision a resolved matmul dtype stands for, as metrics and timing files record it."""
    return "fp32" if dtype is None else str(dtype).removeprefix("torch.").replace("bfloat16", "bf16")


@dataclass(frozen=True)
class Precision:
    """What `amp` resolved to on a device, once (:func:`choose`, :func:`plan`).

    Attributes:
        dtype: the products' dtype under autocast, torch.bfloat16, or None for fp32
        why: the choice and its reason, in one log phrase (``str(precision)``)
        device_type: "cpu", "cuda", ...
        hardware: the device's bf16 engine in words (:func:`bf16_engine`), or None
        recurrent: the dtype nn.LSTM/nn.GRU sequences run in off the CPU (fp32, or bf16 when
            asked for); on the CPU always fp32 (its recurrent paths are described above)
        tf32: whether fp32 products and the fp32 recurrence may use TF32 (CUDA bf16 mode only)
    """

    dtype: torch.dtype | None
    why: str
    device_type: str = "cpu"
    hardware: str | None = None
    recurrent: torch.dtype = FP32
    tf32: bool = False

    @property
    def name(self) -> str:
        """"fp32" or "bf16", as metrics and timing files record it."""
        return name(self.dtype)

    @property
    def state(self) -> torch.dtype:
        """The dtype of an LSTM's cell state and gates (and a GRU's state): fp32, or bf16 inside
        a cuDNN layer asked to run in bf16."""
        return self.recurrent

    def parts(self) -> dict[str, str]:
        """Each part's precision in words: products, recurrent (the nn.LSTM/nn.GRU layers; on the
        CPU the fused LSTM's products), state, softmax ("fp32", "tf32" or "bf16")."""
        if self.device_type == "cpu":
            recurrent = self.name
        else:
            recurrent = "tf32" if self.recurrent == FP32 and self.tf32 else name_of(self.recurrent)
        return {"products": self.name, "recurrent": recurrent, "state": name_of(self.state),
                "softmax": "fp32"}

    @property
    def engine(self) -> str:
        """The plan in one stable phrase, for metrics and (off the CPU) the training
        fingerprint: e.g. "cpu: bf16 products, bf16 recurrent, fp32 state",
        "cuda: bf16 products, tf32 recurrent, fp32 state"."""
        p = self.parts()
        return (f"{self.device_type}: {p['products']} products, {p['recurrent']} recurrent, "
                f"{p['state']} state")

    def record(self) -> dict:
        """The plan as JSON-able values, for a metrics file."""
        return {"device": self.device_type, **self.parts(), "tf32": self.tf32,
                "hardware": self.hardware, "engine": self.engine}

    def fingerprint_entries(self) -> dict[str, str]:
        """What the plan adds to a training fingerprint, so that a checkpoint resumes only under
        the same plan: on the CPU nothing for fp32 (the rule of s2s.arch.config_record) and
        ``matmul_dtype`` for bf16; elsewhere also the engine (a CPU checkpoint never resumes on
        CUDA, nor a TF32 one under strict fp32). The GPU model is not part of it."""
        entries = {} if self.dtype is None else {"matmul_dtype": str(self.dtype)}
        if self.device_type != "cpu":
            entries["engine"] = self.engine
        return entries

    def apply(self) -> None:
        """Set cuBLAS's and cuDNN's TF32 flags to the plan (CUDA only; a no-op elsewhere)."""
        if self.device_type == "cuda":
            set_tf32(self.tf32)

    @contextlib.contextmanager
    def strict_fp32(self):
        """A block that promises fp32 (perplexity, exact scores): on CUDA, TF32 off inside it and
        the plan's flags back after it; elsewhere nothing to do."""
        if self.device_type != "cuda":
            yield
            return
        set_tf32(False)
        try:
            yield
        finally:
            self.apply()

    def autocast(self) -> contextlib.AbstractContextManager:
        """The context a forward pass runs in: ``torch.autocast`` at the products' dtype, with
        the recurrent layers' dtype (off the CPU) set for :func:`recurrent_dtype`; a no-op
        context in fp32. Re-enterable: one object serves every step."""
        if self.dtype is None:
            return contextlib.nullcontext()
        return _Autocast(self.device_type, self.dtype,
                         None if self.device_type == "cpu" else self.recurrent)

    def __str__(self) -> str:
        return self.why


def name_of(dtype: torch.dtype) -> str:
    """A tensor dtype in the words of :func:`name` ("fp32", "bf16", "float16", ...)."""
    return "fp32" if dtype == FP32 else name(dtype)


def plan(amp: bool | str, *, device_type: str, engine: str | None,
         recurrent: torch.dtype | None = None) -> Precision:
    """The precision `amp` asks for on a device of `device_type` whose bf16 engine is `engine`
    (None: none), as a pure function (:func:`choose` asks the device). `recurrent`: the dtype of
    the nn.LSTM/nn.GRU layers off the CPU in bf16 mode (default fp32 with TF32; bf16 to compare
    the two)."""
    if amp not in (True, False, "auto"):
        raise ValueError(f"amp must be true, false or 'auto', got {amp!r}")
    if recurrent not in (None, FP32, BF16):
        raise ValueError(f"recurrent must be torch.float32 or torch.bfloat16, got {recurrent!r}")
    off_cpu = device_type != "cpu"
    if amp is False or (amp == "auto" and engine is None):
        if recurrent == BF16:
            raise ValueError("recurrent=torch.bfloat16 needs bf16 products (amp true or auto)")
        why = "amp: false" if amp is False else f"no bf16 matrix engine on {device_type}"
        if off_cpu:
            why += "; TF32 off"
        return Precision(None, f"fp32 ({why})", device_type, engine)
    if recurrent is not None and not off_cpu:
        raise ValueError("the CPU runs its own recurrent paths: recurrent applies off the CPU")
    hw = engine or "no bf16 matrix engine: emulated, expect it to be slower"
    rec = recurrent or FP32
    if not off_cpu:
        return Precision(BF16, f"bf16 matmuls, fp32 weights/state/loss ({hw}; amp: "
                               f"{str(amp).lower()})", device_type, engine)
    rnn = "TF32 recurrence, fp32 state" if rec == FP32 else "bf16 recurrence and state"
    return Precision(BF16, f"bf16 matmuls, {rnn}, fp32 weights/loss ({hw}; amp: "
                           f"{str(amp).lower()})", device_type, engine, recurrent=rec, tf32=True)


def choose(amp: bool | str, device: torch.device, *,
           recurrent: torch.dtype | None = None) -> Precision:
    """The precision `amp` asks for on `device` (``amp`` was checked when params were loaded;
    an API caller's value is checked here), applied: on CUDA the TF32 flags are set to it."""
    chosen = plan(amp, device_type=device.type, engine=bf16_engine(device), recurrent=recurrent)
    chosen.apply()
    return chosen


def set_tf32(allowed: bool) -> None:
    """cuBLAS's fp32 matmuls and cuDNN's fp32 RNNs (and convolutions) with TF32 math or strict
    fp32. torch's older flags set its newer per-operation ones consistently, where setting only
    the newer ones would leave the two disagreeing (torch then refuses to answer the older)."""
    torch.backends.cuda.matmul.allow_tf32 = allowed
    torch.backends.cudnn.allow_tf32 = allowed


def tf32_flags() -> dict[str, bool]:
    """Whether TF32 is on now for cuBLAS's fp32 matmuls and for cuDNN's fp32 RNNs, as torch's
    per-operation settings say."""
    return {"matmul": torch.backends.cuda.matmul.fp32_precision == "tf32",
            "cudnn_rnn": torch.backends.cudnn.rnn.fp32_precision == "tf32"}


_RECURRENT: contextvars.ContextVar[torch.dtype | None] = contextvars.ContextVar(
    "s2s_recurrent_dtype", default=None)


class _Autocast:
    """torch.autocast plus the recurrent layers' dtype; entered afresh on every ``with``."""

    def __init__(self, device_type: str, dtype: torch.dtype, recurrent: torch.dtype | None):
        self.device_type, self.dtype, self.recurrent = device_type, dtype, recurrent
        self._stack: list = []

    def __enter__(self):
        cast = torch.autocast(self.device_type, dtype=self.dtype)
        cast.__enter__()
        token = None if self.recurrent is None else _RECURRENT.set(self.recurrent)
        self._stack.append((cast, token))
        return self

    def __exit__(self, *exc):
        cast, token = self._stack.pop()
        if token is not None:
            _RECURRENT.reset(token)
        return cast.__exit__(*exc)


def autocast(device: torch.device, dtype: torch.dtype | None):
    """``torch.autocast`` at `dtype` on `device`, or a no-op context for fp32. The recurrent
    layers off the CPU then run in fp32 (:func:`recurrent_dtype`)."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)


@contextlib.contextmanager
def recurrent(dtype: torch.dtype):
    """Run the nn.LSTM/nn.GRU layers in `dtype` under autocast, on any device (the CPU too:
    tests and benchmarks use it to take the CUDA path there)."""
    token = _RECURRENT.set(dtype)
    try:
        yield
    finally:
        _RECURRENT.reset(token)


def matmul_dtype(x: torch.Tensor) -> torch.dtype | None:
    """The dtype autocast gives matmuls on ``x``'s device here, or None if it is off."""
    kind = x.device.type
    if torch.is_autocast_enabled(kind):
        return torch.get_autocast_dtype(kind)
    return None


def recurrent_dtype(x: torch.Tensor) -> torch.dtype | None:
    """The dtype an nn.LSTM/nn.GRU layer over ``x`` runs in, with autocast off, or None where the
    layer runs as it is: no autocast (it runs in x's own dtype), or the CPU's own paths (see the
    module docstring). Off the CPU under autocast: the plan's (:meth:`Precision.autocast`), fp32
    by default; :func:`recurrent` forces one on any device."""
    if matmul_dtype(x) is None:
        return None
    forced = _RECURRENT.get()
    if forced is not None:
        return forced
    return None if x.device.type == "cpu" else FP32


def full(x: torch.Tensor) -> torch.Tensor:
    """``x`` in fp32 if it is in a 16-bit float dtype (a product under autocast), else ``x``
    itself (fp32 and fp64 tensors pass unchanged: the fp32 path stays bit for bit)."""
    return x.float() if x.dtype in (torch.bfloat16, torch.float16) else x


# Whether this torch's CUDA GEMMs write fp32 from 16-bit operands (``torch.mm(..., out_dtype=)``,
# torch >= 2.8): decided by the first call on CUDA, per overload.
_OUT_DTYPE: dict[str, bool] = {}


def _cuda_out_dtype(op: str, call) -> torch.Tensor | None:
    """``call()`` where the `op` overload with ``out_dtype`` runs here; None where it does not
    (then never tried again)."""
    if _OUT_DTYPE.get(op) is False:
        return None
    try:
        result = call()
    except (TypeError, RuntimeError, NotImplementedError):
        if op in _OUT_DTYPE:  # it ran before: a real error
            raise
        _OUT_DTYPE[op] = False
        return None
    _OUT_DTYPE[op] = True
    return result


def _fp32_product(name: str, op, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if a.dtype == b.dtype and a.dtype not in (torch.bfloat16, torch.float16):
        return op(a, b)  # fp32 as it is; fp64 (a reference check's) too, as full() leaves it
    if a.device.type == "cuda":
        out = _cuda_out_dtype(name, lambda: op(a, b, out_dtype=FP32))
        if out is not None:
            return out
    return op(a.float(), b.float())


def fp32_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` (2-D) with fp32 accumulation and an fp32 result, also for 16-bit operands: on
    CUDA cuBLAS writes the fp32 result itself (``out_dtype``), elsewhere (or where this torch
    lacks it) the operands are widened to fp32, exactly, and multiplied in fp32 (TF32 there only
    where the plan allows it, which rounds no bf16 operand). fp32 (or fp64) operands:
    ``torch.mm``."""
    return _fp32_product("mm", torch.mm, a, b)


def fp32_bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``torch.bmm(a, b)`` (3-D) as :func:`fp32_mm` computes a product: fp32 accumulation and
    result, also for 16-bit operands."""
    return _fp32_product("bmm", torch.bmm, a, b)


def fp32_addmm(bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``bias + a @ b`` as :func:`fp32_mm`, the fp32 bias added to the fp32 result (on CUDA in
    the GEMM's epilogue where torch can)."""
    if a.dtype == FP32 and b.dtype == FP32:
        return torch.addmm(bias, a, b)
    if a.device.type == "cuda":
        out = _cuda_out_dtype("addmm", lambda: torch.addmm(bias, a, b, out_dtype=FP32))
        if out is not None:
            return out
    return fp32_mm(a, b).add_(bias)


@contextlib.contextmanager
def strict_fp32(device: torch.device):
    """fp32 without TF32 for the block on CUDA, the flags as they were after it (a caller that
    holds no Precision: the fp32 rescoring of a bf16 search); a no-op elsewhere."""
    if device.type != "cuda":
        yield
        return
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    set_tf32(False)
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


# The recurrent stacks of s2s.model (by class name: the model imports this module, not the
# other way round), each with the attribute of the torch RNN it wraps ("" where it has none).
STACKS = {"StandardLSTM": "lstm", "StandardGRU": "gru", "PeepholeLSTM": "", "ChoGRU": ""}


class PrecisionMismatch(RuntimeError):
    """A module ran in a dtype the run's precision plan does not name (:class:`Watch`)."""


class Watch:
    """Forward hooks that see the dtypes a model actually runs in, for a step or a few:
    every recurrent stack (its output, h and c), every nn.LSTM/nn.GRU outside a stack (the
    attention encoder) and the model's ``features`` (the softmax layer's input). Built by
    :func:`watch`; :meth:`check` ends it.

    What the plan allows: outputs and features in fp32 or the products' dtype (the fused CPU
    LSTM hands bf16 to the next product) or the recurrent dtype; h and c in fp32 or the recurrent
    dtype; master weights and their gradients in fp32. Anything else (fp16 above all, or a bf16
    cell state where the plan keeps it fp32) is a mismatch.
    """

    def __init__(self, model: torch.nn.Module, precision: Precision):
        self.model, self.precision = model, precision
        products = precision.dtype or FP32
        self._out = {FP32, products, precision.recurrent}
        self._state = {FP32, precision.recurrent}
        self._features = {FP32, products}
        self.seen: dict[str, dict[str, str]] = {}
        self._mismatches: list[str] = []
        # the stacks' own nn.LSTM/nn.GRU are seen through their stack
        inner = {id(getattr(m, STACKS[type(m).__name__])) for m in model.modules()
                 if STACKS.get(type(m).__name__)}
        self._handles = []
        for mod_name, m in model.named_modules():
            if type(m).__name__ in STACKS or (isinstance(m, torch.nn.RNNBase)
                                              and id(m) not in inner):
                self._handles.append(m.register_forward_hook(
                    functools.partial(self._hook, f"{mod_name} ({type(m).__name__})")))
        own = model.features  # every model has it (s2s.model.base.Model)

        def features(*args, **kwargs):
            out = own(*args, **kwargs)
            self._see("features", "output", out, self._features)
            return out

        model.features = features  # an instance attribute over the method, until close()

    def _hook(self, label: str, module, args, result) -> None:
        out, final = result
        if isinstance(out, torch.nn.utils.rnn.PackedSequence):
            out = out.data
        self._see(label, "output", out, self._out)
        h, c = final if isinstance(final, tuple) else (final, None)
        self._see(label, "h", h, self._state)
        if c is not None:
            self._see(label, "c", c, self._state)

    def _see(self, label: str, what: str, t: torch.Tensor, allowed: set) -> None:
        self.seen.setdefault(label, {})[what] = name_of(t.dtype)
        if t.dtype not in allowed:
            expected = " or ".join(sorted(map(name_of, allowed)))
            self._mismatches.append(
                f"{label} returned its {what} in {name_of(t.dtype)}, where the run records "
                f"'{self.precision.engine}' (expected {expected})")

    def close(self) -> None:
        """Remove the hooks (and the features wrapper); idempotent."""
        for handle in self._handles:
            handle.remove()
        self._handles = []
        if "features" in vars(self.model):
            del self.model.features

    def check(self) -> dict[str, dict[str, str]]:
        """Stop watching; raise :class:`PrecisionMismatch` (one line: the module, the dtype seen
        and the dtype recorded) if anything ran in a dtype the plan does not allow, or if a
        parameter or its gradient is not fp32. Returns what was seen, per module: what -> dtype."""
        self.close()
        for p_name, p in self.model.named_parameters():
            for what, t in (("weights", p), ("gradient", p.grad)):
                if t is not None and t.dtype != FP32:
                    self._mismatches.append(f"parameter {p_name} has its {what} in "
                                            f"{name_of(t.dtype)}; master weights are fp32")
        if self._mismatches:
            more = len(self._mismatches) - 1
            raise PrecisionMismatch("precision check: " + self._mismatches[0]
                                    + (f" (and {more} more)" if more else ""))
        return self.seen

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def watch(model: torch.nn.Module, precision: Precision) -> Watch:
    """Start watching the dtypes `model` runs in under `precision` (see :class:`Watch`): call
    ``check()`` after the first training step (or the first decoded batch)."""
    return Watch(model, precision)
