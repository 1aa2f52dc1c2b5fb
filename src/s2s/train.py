"""Training one model: the procedure of §3.4, resumable (the library of :mod:`s2s.stages.train`).

Plain SGD without momentum at `lr`, halved every `decay_every` epochs after `decay_start` (or the
architecture's recipe, s2s.arch); the loss summed over each sentence's target tokens and divided
by the batch's sentences; the gradient's L2 norm clipped to `clip_norm`. A killed run resumes
from its last checkpoint and, on the CPU, ends with the weights of an uninterrupted one: the
batch order is a function of (order_seed, epoch), the schedule of the step, and the optimizer's
state (Adam's; SGD has none beyond the rate) is in the checkpoint.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import functools
import hashlib
import io
import json
import logging
import math
import shutil
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from s2s import arch, checkpoint, distributed, precision, runguard
from s2s.dag import code_digests
from s2s.artifacts import SnapshotEntry, SnapshotIndex, TrainMetrics
from s2s.config import AnalysisConfig, Params, TrainConfig, train_record
from s2s.data.batching import (Batch, collate, collate_ids, epoch_batches, eval_batches,
                                prefetch_batches, steps_per_epoch)
from s2s.data.ids import IdCorpus, IdsRecord, ids_file, offsets_file, open_split
from s2s.data.vocab import Vocab
from s2s.device import for_resources, out_of_memory
from s2s.io import (atomic_open, atomic_write_json, atomic_write_text, remove_dead_temporaries,
                    remove_dead_temporaries_in, remove_temporaries)
from s2s.layout import BEST_FILE, CURVE_COLUMNS, MODEL_FILE, CurveRow, TrainPaths
from s2s.losses import linear_cross_entropy, smoothed_cross_entropy, summed_nll
from s2s.model import build_model, config_record
from s2s.model.base import Model, host_lengths
from s2s.progress import progress
from s2s.schema import Rules, decode
from s2s.text_settings import text_record
from s2s.snapshots import SNAPSHOT_INDEX, snapshot_file, snapshots_due

log = logging.getLogger("s2s.train")


class TrainingError(RuntimeError):
    """Training cannot go on (a non-finite loss, gradient or weight; out of memory); the last good
    checkpoint is kept."""


class Interrupted(RuntimeError):
    """Raised by `stop_after` (tests): the run stopped as if killed right after a checkpoint."""


def lr_at(step: int, steps_per_epoch: int, cfg: TrainConfig) -> float:
    """The learning rate of update `step` (0-based). `schedule: paper` (§3.4): constant, then
    halved every `decay_every` epochs from epoch `decay_start` on, the first halving at
    `decay_start` itself (the paper's 7.5 epochs end at lr / 32). `inverse_sqrt` (Vaswani et al.
    2017, §5.3, with `lr` as the peak): lr * min(n / warmup, sqrt(warmup / n)) for update n =
    step + 1, a linear warmup to `lr` over `warmup_steps`, then decay as 1/sqrt(n)."""
    if cfg.schedule == "inverse_sqrt":
        n, warmup = step + 1, cfg.warmup_steps
        return cfg.lr * min(n / warmup, math.sqrt(warmup / n))
    epoch = step / steps_per_epoch
    if epoch < cfg.decay_start:
        return cfg.lr
    halvings = math.floor((epoch - cfg.decay_start) / cfg.decay_every + 1e-9) + 1
    return cfg.lr * cfg.decay_factor ** halvings


# `train` keys that change no number of the outputs (at a fixed thread count:
# docs/reproducibility.md), so a checkpoint resumes across a change of them. Every other key is in
# the fingerprint.
BOOKKEEPING = ("device", "threads", "log_every", "checkpoint_every")


# The recipe keys a run reads under one optimizer or one schedule only (make_optimizer, lr_at):
# under another, a change to them changes no weight, and a checkpoint resumes across it.
READ_ONLY_WITH = {"adam_betas": ("optimizer", "adam"), "adam_eps": ("optimizer", "adam"),
                  "warmup_steps": ("schedule", "inverse_sqrt"),
                  **{k: ("schedule", "paper")
                     for k in ("decay_start", "decay_every", "decay_factor")}}


def reads(cfg: TrainConfig, key: str) -> bool:
    """Whether a run of recipe `cfg` reads `train` key `key` (READ_ONLY_WITH)."""
    chooser, value = READ_ONLY_WITH.get(key, (None, None))
    return chooser is None or getattr(cfg, chooser) == value


def make_optimizer(model: nn.Module, cfg: TrainConfig) -> torch.optim.Optimizer:
    """The recipe's optimizer: plain SGD (§3.4: no momentum), or Adam with `adam_betas` and
    `adam_eps` (Vaswani et al.); the learning rate is set every step from lr_at. SGD of a model
    on CUDA is torch's fused kernel, one pass over every parameter with the clipping folded in
    (train_step); elsewhere the foreach SGD (the CPU's numbers, which the golden tests pin)."""
    if cfg.optimizer == "adam":
        return torch.optim.Adam(model.parameters(), lr=cfg.lr, betas=tuple(cfg.adam_betas),
                                eps=cfg.adam_eps)
    on_cuda = next(model.parameters()).device.type == "cuda"
    return torch.optim.SGD(model.parameters(), lr=cfg.lr, fused=True if on_cuda else None)


def _clip(model: nn.Module, opt: torch.optim.Optimizer,
          clip_norm: float) -> torch.Tensor | None:
    """The gradient's L2 norm clipped to `clip_norm` (§3.4), without a host read; returns the
    norm before clipping (a 0-dim tensor, on the device; None where no parameter has a gradient,
    with a fused SGD), which train_step reads with the loss. For a fused SGD the clipping is
    folded into its step: one pass over the gradients for the norm, and the step divides them
    by max(norm / clip_norm, 1) (its `grad_scale`, which torch's GradScaler uses to unscale),
    where clip_grad_norm_ would also rescale them in a pass of their own."""
    if not (isinstance(opt, torch.optim.SGD) and opt.defaults.get("fused")):
        return nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    if not grads:  # an empty share: the step changes nothing
        opt.grad_scale = None
        return None
    norm = nn.utils.get_total_norm(grads, 2.0, foreach=True)  # a 0-dim tensor on the device
    # clip_grad_norm_'s coefficient max_norm / (norm + 1e-6), at most 1, as a divisor
    opt.grad_scale = torch.clamp((norm + 1e-6) / clip_norm, min=1.0)
    return norm


def fingerprint(model_cfg, cfg: TrainConfig, src: Vocab, tgt: Vocab,
                ids_dir: Path, *, chosen: precision.Precision | None = None) -> str:
    """What the weights, the curves and best.pt depend on: the model config, every `train` key
    but BOOKKEEPING and those of another optimizer or schedule than the run's (READ_ONLY_WITH),
    the precision `amp` resolved to on this machine (`chosen`: `auto` is bf16 on one and fp32 on
    another; off the CPU its whole plan, so a CPU checkpoint never resumes on a GPU), both
    vocabularies, and the training and dev ids (the sha256 of each file's values, as the ids
    record gives them: s2s.data.ids.open_split checks the files against it). A checkpoint with
    another fingerprint is never resumed. (The test set is read only after training.)"""
    # Later keys enter only where a run uses them (train_record, config_record: the rule is
    # s2s.arch.config_record's); `amp` enters as the plan it resolved to (none: fp32 on the CPU,
    # which adds nothing), so that `true` and `auto` resolved alike resume each other.
    relevant = {k: v for k, v in train_record(cfg).items()
                if k not in (*BOOKKEEPING, "amp") and reads(cfg, k)}
    if chosen is not None:
        relevant.update(chosen.fingerprint_entries())
    files = IdsRecord.read(ids_dir).files
    data = {name: files[name]["sha256"] for split in ("train", "dev") for lang in ("en", "fr")
            for name in (ids_file(split, lang), offsets_file(split, lang))}
    return hashlib.sha256(json.dumps([config_record(model_cfg), relevant, src.fingerprint,
                                      tgt.fingerprint, data], sort_keys=True).encode()).hexdigest()


def code_record(model_cfg) -> dict[str, str]:
    """The code a model of `model_cfg` is trained by: the sha256 of each s2s file the train stage
    runs for it, by its name in dvc.yaml, where the same files are its dependencies
    (s2s.dag.code_digests). A resume point records it; one of other code is not resumed (a
    change to any of these files reruns the stage, and the rerun must train by the new code)."""
    return code_digests("s2s.stages.train", arch.ARCHITECTURES[model_cfg.arch].model_module)


def _where(threads: int | None, cpu: str | None) -> str:
    """A trainer's thread count and CPU kind, in words."""
    return f"{threads} thread{'' if threads == 1 else 's'}" + (f" on {cpu}" if cpu else "")


def _code_changes(old, new: Mapping[str, str]) -> str:
    """The files whose contents differ between two code records, for a message."""
    if not isinstance(old, dict):
        return "its code record is no record of files"
    changed = sorted(f for f in old.keys() | new.keys() if old.get(f) != new.get(f))
    shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
    return f"{shown} changed"


def shard_loss(model: Model, pairs: Sequence[tuple[list[int], list[int]]] | Batch | None, *,
               vocab: Vocab, device: torch.device, autocast,
               label_smoothing: float = 0.0) -> tuple[torch.Tensor, torch.Tensor, int]:
    """The training loss of `pairs`, their summed NLL (what perplexity reports) and their target
    tokens. `pairs`: id pairs (collated here), or their Batch already collated (on any device;
    ``s2s.data.batching.prefetch_batches``), or empty/None for an empty share. Without label
    smoothing the loss is the NLL itself; with it, the loss is (1 - eps) NLL + eps * the mean
    over the vocabulary of -log p (s2s.losses). Nothing here waits for the device."""
    if not pairs:
        zero = torch.zeros((), device=device)
        return zero, zero, 0
    b = pairs if isinstance(pairs, Batch) else collate(pairs, pad=vocab.pad, bos=vocab.bos,
                                                       eos=vocab.eos)
    b = b.to(device)
    with autocast, host_lengths(b.src_lengths, b.src_lengths_cpu):  # packing reads them there
        feats = model.features(b.src, b.src_lengths, b.tgt_in)  # (N, T, D)
        # The softmax layer and the loss in one, over the real target positions only
        # (s2s.losses; the same value and gradients as cross_entropy(proj(feats)) up to rounding).
        if label_smoothing:
            loss, nll = smoothed_cross_entropy(
                feats, model.proj.weight, model.proj.bias, b.tgt_out, ignore_index=vocab.pad,
                epsilon=label_smoothing, mm_dtype=precision.matmul_dtype(feats),
                rows=b.target_rows)
            return loss, nll, b.ntokens
        nll = linear_cross_entropy(feats, model.proj.weight, model.proj.bias, b.tgt_out,
                                   ignore_index=vocab.pad, mm_dtype=precision.matmul_dtype(feats),
                                   rows=b.target_rows)
    return nll, nll, b.ntokens


class NonFiniteGradient(FloatingPointError):
    """A step whose gradient norm is not finite (NaN or inf) though its loss is: raised by
    train_step before the update, so the weights stay those before the step."""

    def __init__(self, norm: float, nll: float):
        super().__init__(f"non-finite gradient norm ({norm})")
        self.norm, self.nll = norm, nll


def train_step(model: nn.Module, opt: torch.optim.Optimizer,
               pairs: Sequence[tuple[list[int], list[int]]] | Batch | None, *, batch_size: int,
               lr: float, cfg: TrainConfig, vocab: Vocab, device: torch.device, autocast,
               world: distributed.World | None = None,
               vote: distributed.StopVote | None = None) -> tuple[float, int]:
    """One update (§3.4) on a minibatch of `batch_size` sentences, of which `pairs` is this
    process's share (as shard_loss takes it): the loss summed per sentence and averaged over the
    batch, its gradient summed over processes, clipped to `clip_norm`, and one step of the
    recipe's optimizer at `lr`. Returns the batch's summed NLL and target tokens over all
    processes; a non-finite NLL is returned before any update (the caller stops), and a
    non-finite gradient norm with a finite NLL raises NonFiniteGradient before any update (an
    update would make every weight NaN, and the next checkpoint would keep them).

    Reading the NLL and the gradient's norm together, after the backward pass and before the
    update, is the step's one wait for the device: on a GPU, the update may still be running
    when this returns (the next step's read waits for it), so a caller that times steps
    synchronises the device before it stops its clock (at an evaluation, say); over consecutive
    steps the time adds up. bench/train.py times this function. `vote`: this rank's stop vote,
    summed over the ranks with the NLL (one collective and one read for all three); its
    `agreed` is set here."""
    world = world or distributed.World()
    for group in opt.param_groups:
        group["lr"] = lr
    with torch.profiler.record_function("forward+loss"):
        total, nll, ntok = shard_loss(model, pairs, vocab=vocab, device=device, autocast=autocast,
                                      label_smoothing=cfg.label_smoothing)
        loss = total / batch_size  # summed per sentence, averaged over the batch (§3.4)
    with torch.profiler.record_function("zero_grad"):
        opt.zero_grad(set_to_none=True)
    with torch.profiler.record_function("backward"):
        if pairs:
            loss.backward()
        distributed.all_reduce_gradients(model, world)  # summed: the whole batch's gradient
    with torch.profiler.record_function("clip_grad_norm"):
        norm = _clip(model, opt, cfg.clip_norm)
    with torch.profiler.record_function("read_loss"):
        asked = vote is not None and vote.asks()
        batch_nll, batch_tok, grad_norm, *votes = _read_step(
            nll, ntok, norm, [float(asked)] if world.size > 1 else [], world, device)
        if vote is not None:
            vote.agreed = bool(votes[0]) if votes else asked
    if not math.isfinite(batch_nll):
        return batch_nll, int(batch_tok)
    if not math.isfinite(grad_norm):
        if hasattr(opt, "grad_scale"):
            opt.grad_scale = None
        raise NonFiniteGradient(grad_norm / world.size, batch_nll)  # summed over the ranks
    with torch.profiler.record_function("optimizer_step"):
        opt.step()
    return batch_nll, int(batch_tok)


def _read_step(nll: torch.Tensor, ntok: int, norm: torch.Tensor | None, votes: list[float],
               world: distributed.World, device: torch.device) -> list[float]:
    """[NLL, target tokens, gradient norm, *votes], each summed over the ranks (the norm, the
    same on every rank, times their number), read from the device in one transfer: with several
    processes in the step's one collective (s2s.distributed.all_reduce_sum); with one, the NLL
    and the norm stacked on the NLL's device and read together. `norm` None (no gradient): 0."""
    if world.size > 1:
        return distributed.all_reduce_sum(
            [nll.detach(), ntok, 0.0 if norm is None else norm.detach(), *votes], world, device)
    if norm is None:
        return [float(nll), float(ntok), 0.0]
    got = torch.stack([nll.detach().to(torch.float64).reshape(()),
                       norm.detach().to(nll.device, torch.float64).reshape(())]).tolist()
    return [got[0], float(ntok), got[1]]


@torch.no_grad()
def perplexity(model: Model, corpus: IdCorpus, *, vocab: Vocab, device: torch.device,
               batch_size: int = 64) -> float:
    """exp(summed NLL / target tokens) of `corpus`'s pairs, teacher-forced, in eval mode and
    fp32, in batches of `batch_size` sorted by length; nan for no tokens. The softmax layer
    runs over the real target positions only, in row chunks (``s2s.losses.summed_nll``: on the
    CPU each batch's NLL is ``F.cross_entropy``'s over the (N, T, V) logits to the bit); the
    sum stays on the device in fp64 (as Python floats would add the batches) and is read once.
    The model is left in train mode. Out of memory on a batch: a TrainingError in one line
    naming the batch's lengths and the key that bounds them."""
    model.eval()
    total = torch.zeros((), dtype=torch.float64, device=device)
    ntok = 0
    for idx in eval_batches(corpus.src_lengths, corpus.tgt_lengths, batch_size):
        try:
            b = collate_ids(corpus, idx, pad=vocab.pad, bos=vocab.bos, eos=vocab.eos).to(device)
            with host_lengths(b.src_lengths, b.src_lengths_cpu):
                feats = model.features(b.src, b.src_lengths, b.tgt_in)  # (N, T, D)
            total += summed_nll(feats, model.proj.weight, model.proj.bias, b.tgt_out,
                                ignore_index=vocab.pad, rows=b.target_rows).double()
        except RuntimeError as e:  # out of memory as a training step's (Run.update): one line
            what = out_of_memory(e)
            if what is None:
                raise
            model.train()
            raise TrainingError(
                f"perplexity: out of {device.type.upper()} memory on an evaluation batch of "
                f"{len(idx)} pairs, source length {max(int(corpus.src_lengths[idx].max()), 1)}, "
                f"target length {int(corpus.tgt_lengths[idx].max()) + 1} ({what}); lower "
                f"prepare.max_len, "
                f"which bounds the lengths, and rerun: training resumes from its last "
                f"checkpoint") from e
        ntok += b.ntokens
    model.train()
    return exp_mean(total.item(), ntok) if ntok else float("nan")


_LOG_MAX = math.log(sys.float_info.max)  # ~709.78: exp of more overflows a float


def exp_mean(nll: float, tokens: int) -> float:
    """exp(nll / tokens), a perplexity; inf beyond a float's range (a mean of over 709 nats a
    token: a diverged model, whose loss is still finite), where math.exp would raise; nan of a
    nan."""
    mean = nll / tokens
    return math.inf if mean > _LOG_MAX else math.exp(mean)


@dataclass
class TrainState:
    """Where a run is: everything a resumed run needs besides the weights and the optimizer's
    state, written into ``last.pt`` beside them (:meth:`payload`) and read back as a typed record
    (:meth:`from_payload`). `best_state`: the weights of the lowest dev perplexity so far, on the
    CPU (rank 0 only; None before any evaluation, or on other ranks)."""

    fingerprint: str
    step: int = 0
    history: list[dict] = field(default_factory=list)  # the curves' rows, one per evaluation
    best_dev_ppl: float = math.inf
    best_step: int | None = None
    best_state: dict[str, torch.Tensor] | None = None
    train_seconds: float = 0.0
    train_tokens: int = 0
    window_nll: float = 0.0  # training loss since the last dev evaluation
    window_tok: int = 0
    # what trained its steps (the last process that trained one): the metrics say it, not the
    # machine that only rewrote a finished run's outputs
    threads: int | None = None
    cpu: str | None = None  # s2s.precision.cpu_kind, on the CPU

    @property
    def window_ppl(self) -> float:
        return exp_mean(self.window_nll, self.window_tok)

    @property
    def words_per_sec(self) -> float:
        return self.train_tokens / max(self.train_seconds, 1e-9)

    def payload(self) -> dict:
        """The entries of ``last.pt`` beside the weights (s2s.checkpoint.save's `extra`). The best
        weights travel with the resume point unless they are its own, so that a rerun can always
        write best.pt, even when no later evaluation improves."""
        return dict(fingerprint=self.fingerprint, step=self.step, history=self.history,
                    best_dev_ppl=self.best_dev_ppl, best_step=self.best_step,
                    best_model=None if self.best_step == self.step else self.best_state,
                    train_seconds=self.train_seconds, train_tokens=self.train_tokens,
                    window_nll=self.window_nll, window_tok=self.window_tok, threads=self.threads,
                    cpu=self.cpu)

    @classmethod
    def from_payload(cls, payload: dict, *, source: Path, weights: dict,
                     model: nn.Module | None = None, opt: torch.optim.Optimizer | None = None,
                     total_steps: int | None = None) -> TrainState:
        """The state a checkpoint's entries record; `weights`: its own weights (the best ones when
        it does not carry others). A ResumeError names the entry that is missing, mistyped or
        impossible: with `model`, `opt` and `total_steps` (the run it would resume), a step
        beyond the schedule, a history that does not end where the step is, best weights without
        their dev perplexity (or the reverse), and any tensor (the weights, the best weights,
        the optimizer's moments) that is not finite or not of the shape of the model's."""
        scalars = {f.name: payload.get(f.name, _MISSING) for f in fields(_ResumeRecord)}
        missing = [k for k, v in scalars.items() if v is _MISSING]
        if missing:
            raise ResumeError(f"{source}: no '{missing[0]}' in the resume point")
        decode(_ResumeRecord, scalars, source, "", _RESUME_RULES)  # raises on a mistyped entry
        best = payload.get("best_model")
        if best is not None and not isinstance(best, dict):
            raise ResumeError(f"{source}: 'best_model' must be the best weights (a state dict), "
                              f"got {type(best).__name__}")
        if best is None and scalars["best_step"] is not None:
            if scalars["best_step"] != scalars["step"]:  # payload() writes them unless its own
                raise ResumeError(f"{source}: best step {scalars['best_step']} but no best "
                                  f"weights ('best_model') for it")
            best = weights
        _check_schedule(scalars, source, total_steps)
        if model is not None:
            _check_tensors(weights, model, source, "model")
            if best is not None and best is not weights:
                _check_tensors(best, model, source, "best_model")
        if opt is not None:
            _check_optimizer(payload.get("optimizer"), opt, model, source, scalars["step"])
        return cls(**scalars, best_state=best)

    def agreed(self, world: distributed.World, device: torch.device) -> TrainState:
        """Rank 0's state on every rank (the best weights stay with rank 0, the only writer)."""
        if world.size == 1:
            return self
        shared = distributed.broadcast_object(
            dataclasses.replace(self, best_state=None), world, device)
        return dataclasses.replace(shared, best_state=self.best_state if world.is_main else None)


class ResumeError(ValueError):
    """A resume point whose entries are not those of this version's trainer, or impossible for
    the run it would resume (TrainState.from_payload): it is set aside, and the run starts
    afresh."""


def _check_schedule(s: dict, source: Path, total_steps: int | None) -> None:
    """A resume point's step within the schedule, its history before it and ending at it when
    the run is finished, and its best dev perplexity that of the best step's curve row (so that
    best weights never come without theirs)."""
    step, rows = s["step"], s["history"]
    if step < 0 or (total_steps is not None and step > total_steps):
        raise ResumeError(f"{source}: step {step} is not within this run's schedule of "
                          f"{total_steps} steps (train.epochs times the steps of an epoch)")
    at = [r["step"] for r in rows]
    if any(b <= a for a, b in zip(at, at[1:])) or (at and not 0 < at[0] <= at[-1] <= step):
        raise ResumeError(f"{source}: its curve rows are at steps {at[:3]}...{at[-1:]}, not in "
                          f"order before its step {step}")
    if total_steps is not None and step == total_steps and at[-1:] != [step]:
        raise ResumeError(f"{source}: a finished run (step {step}) without the dev perplexity "
                          f"of its last step in its history")
    best_step, best = s["best_step"], s["best_dev_ppl"]
    if best_step is None:
        if best != math.inf:
            raise ResumeError(f"{source}: best dev perplexity {best} but no best step")
        return
    row = next((r for r in rows if r["step"] == best_step), None)
    if (not (math.isfinite(best) and best > 0) or row is None or row["dev_ppl"] != round(best, 4)
            or any(r["dev_ppl"] < row["dev_ppl"] for r in rows)):
        raise ResumeError(f"{source}: best step {best_step} with dev perplexity {best}, which is "
                          f"not the lowest dev perplexity of its history: the best weights "
                          f"would be written without their own")


def _check_tensors(state: dict, model: nn.Module, source: Path, entry: str) -> None:
    """`state` (weights of a resume point) has the model's every entry, of its shape, finite."""
    want = model.state_dict()
    if set(state) != set(want):
        odd = sorted(set(state) ^ set(want))[0]
        what = ("has the weight '{}', which the model has not" if odd in state
                else "lacks the model's weight '{}'")
        raise ResumeError(f"{source}: '{entry}' {what.format(odd)}")
    for key, t in state.items():
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != tuple(want[key].shape):
            shape = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise ResumeError(f"{source}: '{entry}.{key}' is of shape {shape}, the model's "
                              f"{tuple(want[key].shape)}")
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise ResumeError(f"{source}: '{entry}.{key}' holds non-finite values (NaN or inf)")


def _check_optimizer(saved, opt: torch.optim.Optimizer, model: nn.Module | None, source: Path,
                     step: int) -> None:
    """The optimizer's state of a resume point: that of this optimizer (its parameter groups),
    every moment finite and of its parameter's shape; Adam's present once a step was taken."""
    if saved is None:
        if step > 0 and isinstance(opt, torch.optim.Adam):
            raise ResumeError(f"{source}: no 'optimizer' state (Adam's moments) at step {step}")
        return
    params = [p for g in opt.param_groups for p in g["params"]]
    groups = saved.get("param_groups") if isinstance(saved, dict) else None
    if (not isinstance(groups, list) or not isinstance(saved.get("state"), dict)
            or [len(g.get("params", ())) for g in groups] != [len(g["params"])
                                                               for g in opt.param_groups]):
        raise ResumeError(f"{source}: 'optimizer' is not the state of this run's optimizer "
                          f"({len(params)} parameters in {len(opt.param_groups)} group(s))")
    names = {id(p): n for n, p in model.named_parameters()} if model is not None else {}
    index = [i for g in groups for i in g["params"]]
    for i, entries in saved["state"].items():
        if i not in index or not isinstance(entries, dict):
            raise ResumeError(f"{source}: 'optimizer.state.{i}' belongs to no parameter")
        param = params[index.index(i)]
        for key, t in entries.items():
            where = f"'optimizer.state.{i}.{key}' ({names.get(id(param), 'a parameter')})"
            if not isinstance(t, torch.Tensor):
                continue
            if t.dim() and tuple(t.shape) != tuple(param.shape):
                raise ResumeError(f"{source}: {where} is of shape {tuple(t.shape)}, the "
                                  f"parameter's {tuple(param.shape)}")
            if t.is_floating_point() and not bool(torch.isfinite(t).all()):
                raise ResumeError(f"{source}: {where} holds non-finite values (NaN or inf)")


_MISSING = object()
_RESUME_RULES = Rules(ResumeError)


@dataclass(frozen=True)
class _ResumeRecord:
    """The typed scalar entries of a resume point (TrainState.payload)."""

    fingerprint: str
    step: int
    history: tuple[CurveRow, ...]
    best_dev_ppl: float
    best_step: int | None
    train_seconds: float
    train_tokens: int
    window_nll: float
    window_tok: int
    threads: int | None
    cpu: str | None


@dataclass
class Run:
    """What one training run holds fixed: its job (:class:`TrainJob`), and what :func:`setup`
    built for it: data, model, optimizer, batch plan and files. :func:`run` is its loop; the
    methods are the loop's parts."""

    job: TrainJob
    world: distributed.World
    device: torch.device
    chosen: precision.Precision
    src_vocab: Vocab
    tgt_vocab: Vocab
    train: IdCorpus
    dev: IdCorpus
    model: Model
    opt: torch.optim.Optimizer
    steps_per_epoch: int
    total_steps: int
    eval_steps: int
    fingerprint: str
    paths: TrainPaths
    snaps: Snapshots | None = None
    # this step's vote on stopping (stop_together)
    stop_vote: distributed.StopVote = field(default_factory=distributed.StopVote)

    @property
    def autocast(self):
        """The forward pass's precision context (s2s.precision.Precision.autocast)."""
        return self.chosen.autocast()

    @property
    def name(self) -> str:
        return self.job.name

    @property
    def cfg(self) -> TrainConfig:
        return self.job.cfg

    @property
    def model_cfg(self):
        return self.job.model_cfg

    @property
    def text(self) -> dict:
        """The text settings the data was prepared with (s2s.text_settings), in every file."""
        return self.job.text

    def sync(self) -> None:
        """Wait for the device to finish what this process queued (a GPU runs behind)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    @property
    def last(self) -> Path:
        return self.paths.last

    def batches_of(self, epoch: int) -> list[np.ndarray]:
        """The minibatches of `epoch` in training order: a function of (order_seed, epoch)."""
        return epoch_batches(self.train.src_lengths, self.train.tgt_lengths,
                             batch_size=self.cfg.batch_size,
                             bucket_batches=self.cfg.bucket_batches, seed=self.model_cfg.order_seed,
                             epoch=epoch)

    def resume(self) -> TrainState:
        """The state to go on from: ``last.pt`` where it belongs to this run (its fingerprint and
        name, every snapshot before its step present), else a fresh start. Rank 0 decides and
        reads (one it cannot read this time stops every rank: distributed.on_main); every rank
        then holds its step, weights and optimizer state."""
        def read() -> TrainState | None:
            found = self._read_resume_point()
            if found is None and self.snaps is not None:
                self.snaps.clear()
            return found

        state = distributed.on_main(read, self.world, self.device)
        state = TrainState.agreed(state or TrainState(self.fingerprint), self.world, self.device)
        distributed.broadcast_parameters(self.model, self.world)
        distributed.broadcast_optimizer_state(self.opt, self.world, self.device)
        if state.step < self.total_steps:  # this process trains: its steps are trained here
            here = (torch.get_num_threads(),
                    precision.cpu_kind() if self.device.type == "cpu" else None)
            if (state.step and self.device.type == "cpu" and self.world.is_main
                    and (state.threads, state.cpu) != here):  # a GPU's numbers are not the CPU's
                log.warning("%s: trained to step %d under %s; goes on under %s: its numbers are "
                            "those of neither, and its metrics name the second", self.name,
                            state.step, _where(state.threads, state.cpu), _where(*here))
            state.threads, state.cpu = here
        return state

    def _read_resume_point(self) -> TrainState | None:
        """``last.pt`` as a state to go on from, after checking it whole (its digest, its entries,
        its step and history against this run's schedule, every tensor finite and of the model's
        shape: TrainState.from_payload); a resume point that fails is set aside as
        ``last.pt.rejected`` with one warning naming it, and the run starts afresh (it is only a
        cache). One of other params or data is left for the first checkpoint to replace. One that
        cannot be read this time (an I/O error, too little memory: checkpoint.CheckpointUnread)
        stops the run and is kept, as are the snapshots."""
        if not self.last.exists():
            return None
        try:
            payload = checkpoint.load_payload(self.last)
            if "code" not in payload:
                log.info("%s: %s was written by an earlier version of s2s, which did not record "
                         "its code; starting afresh", self.name, self.last)
                return None
            if payload.get("fingerprint") != self.fingerprint or payload.get("name") != self.name:
                log.info("%s: %s belongs to other params or data; starting afresh", self.name,
                         self.last)
                return None
            if payload.get("code") != self.job.code:
                changes = _code_changes(payload.get("code"), self.job.code)
                if not self.job.resume_other_code:
                    log.info("%s: %s was trained by other code (%s); starting afresh (after a "
                             "change that alters no number, --resume-other-code goes on from "
                             "it)", self.name, self.last, changes)
                    return None
                log.warning("%s: going on from %s, trained by other code (%s), as "
                            "--resume-other-code asks: the outputs are not a run from scratch's",
                            self.name, self.last, changes)
            state = TrainState.from_payload(payload, source=self.last, weights=payload["model"],
                                            model=self.model, opt=self.opt,
                                            total_steps=self.total_steps)
        except checkpoint.CheckpointUnread as e:  # not found damaged: kept for a rerun
            raise checkpoint.CheckpointUnread(f"{e}; the resume point is kept: rerun the stage "
                                              f"once it can be read") from None
        except (checkpoint.CheckpointError, ResumeError) as e:
            aside = self.last.with_name(self.last.name + ".rejected")
            try:
                self.last.replace(aside)
                kept = f"{self.last.name} set aside as {aside.name}"
            except OSError as why:
                kept = f"it could not be set aside: {why.strerror}"
            log.warning("%s; starting afresh (%s)", e, kept)
            return None
        if self.snaps is not None and not self.snaps.complete_before(state.step):
            log.warning("%s: a snapshot before step %d is missing; starting afresh", self.name,
                        state.step)
            return None
        self.model.load_state_dict(payload["model"])
        if "optimizer" in payload:  # Adam's moments (SGD has no state beyond the rate)
            self.opt.load_state_dict(payload["optimizer"])
        if state.step >= self.total_steps:
            log.info("%s: resuming a finished run from %s (step %d of %d): no step is trained; "
                     "outputs rewritten from the checkpoint", self.name, self.last, state.step,
                     self.total_steps)
        else:
            log.info("%s: resuming from %s at step %d of %d", self.name, self.last, state.step,
                     self.total_steps)
        return state

    def batches(self, order: list[np.ndarray]):
        """This rank's share of each minibatch of `order` (all of it with one process) as a
        Batch: on a GPU collated one step ahead on a side thread, in pinned memory for an
        asynchronous copy; on the CPU when it is asked for."""
        on_gpu = self.device.type == "cuda"
        shares = (distributed.shard(idx, self.world) for idx in order)
        return prefetch_batches(shares, pad=self.tgt_vocab.pad, bos=self.tgt_vocab.bos,
                                eos=self.tgt_vocab.eos, pin=on_gpu, ahead=1 if on_gpu else 0,
                                corpus=self.train)

    def update(self, state: TrainState, idx: np.ndarray, batch, *,
               stop_after: int | None, stop: runguard.StopSignals | None = None) -> float:
        """One SGD step on this rank's share (`batch`) of minibatch `idx`, counted in `state`;
        returns its learning rate. A non-finite loss or gradient norm, or a step out of memory,
        stops training (TrainingError) before the update, with the last good checkpoint kept.
        With several processes, a stop signal seen by the step's collective votes in it
        (``stop_vote``: stop_together)."""
        t0 = time.perf_counter()
        lr = lr_at(state.step, self.steps_per_epoch, self.cfg)
        if self.model_cfg.dropout > 0:  # masks a function of the step: a resumed run draws the same
            torch.manual_seed(dropout_seed(self.model_cfg.order_seed, state.step, self.world))
        try:
            self.stop_vote = distributed.StopVote(
                asks=lambda: stop is not None and stop.requested is not None)
            batch_nll, batch_tok = train_step(
                self.model, self.opt, batch, batch_size=len(idx), lr=lr, cfg=self.cfg,
                vocab=self.tgt_vocab, device=self.device, autocast=self.autocast,
                world=self.world, vote=self.stop_vote)
        except NonFiniteGradient as e:  # the update not taken: no checkpoint will hold it
            raise TrainingError(
                f"{self.name}: non-finite gradient norm ({e.norm}) with a finite loss "
                f"({e.nll / len(idx):g}) at step {state.step + 1} (epoch "
                f"{state.step / self.steps_per_epoch:.2f}, lr {lr:g}); {self._kept()}") from e
        except RuntimeError as e:  # torch.OutOfMemoryError is one
            if out_of_memory(e) is None:
                raise
            raise TrainingError(self._out_of_memory(e, state, idx, batch)) from e
        if not math.isfinite(batch_nll):
            raise TrainingError(
                f"{self.name}: non-finite loss ({batch_nll / len(idx)}) at step {state.step + 1} "
                f"(epoch {state.step / self.steps_per_epoch:.2f}, lr {lr:g}); {self._kept()}")
        step = state.step + 1
        if (step % self.cfg.log_every == 0 or step % self.eval_steps == 0
                or step in (self.total_steps, stop_after)):
            self.sync()  # a GPU may still run the update: its time belongs to this step
        state.train_seconds += time.perf_counter() - t0
        state.train_tokens += int(batch_tok)
        state.window_nll += batch_nll
        state.window_tok += int(batch_tok)
        state.step = step
        return lr

    def _kept(self) -> str:
        return f"the last good checkpoint {self.last} is kept" + (
            "" if self.last.exists() else " (none written yet)")

    def _out_of_memory(self, e: Exception, state: TrainState, idx: np.ndarray, batch) -> str:
        """One line for a step that ran out of memory: the batch and lengths that did it, the
        keys that bound them, torch's own first words (what it tried to allocate)."""
        what = out_of_memory(e)
        n, src_len, tgt_len = (0, 0, 0) if batch is None else (
            batch.src.shape[0], batch.src.shape[1], batch.tgt_in.shape[1])
        share = f" ({n} on this rank)" if self.world.size > 1 else ""
        return (f"{self.name}: out of {self.device.type.upper()} memory at step {state.step + 1} "
                f"on a batch of {len(idx)} pairs{share}, source length {src_len}, "
                f"target length {tgt_len} ({what}); lower train.batch_size "
                f"(now {self.cfg.batch_size}) or prepare.max_len, which bounds the lengths, and "
                f"rerun: {self._kept()}")

    def save(self, state: TrainState) -> None:
        """Write the resume point (rank 0). Weights that are not all finite are never written:
        every rank (each holds the same weights) stops with a TrainingError naming the first
        such tensor, and the last good checkpoint is kept (a rerun would set a poisoned one
        aside and start afresh)."""
        bad = _non_finite(self.model)
        if bad is not None:
            raise TrainingError(
                f"{self.name}: non-finite weights ('{bad}' holds NaN or inf) at step "
                f"{state.step}, not written; {self._kept()}")
        if not self.world.is_main:
            return
        # on the host once: the digest and torch.save would each copy a GPU Adam's moments
        opt_state = _on_cpu(self.opt.state_dict())
        checkpoint.save(self.last, self.model, src_vocab=self.src_vocab,
                        tgt_vocab=self.tgt_vocab, name=self.name, text=self.text,
                        **state.payload(), code=dict(self.job.code),
                        **({"optimizer": opt_state} if opt_state["state"] else {}))

    def evaluate(self, state: TrainState, lr: float) -> None:
        """Dev perplexity now: a row of the curves, the training loss window restarted, the best
        weights kept if it is the lowest so far."""
        with self.chosen.strict_fp32():
            dev_ppl = perplexity(self.model, self.dev, vocab=self.tgt_vocab,
                                 device=self.device)
        row = dataclasses.asdict(CurveRow(
            step=state.step, epoch=round(state.step / self.steps_per_epoch, 4), lr=lr,
            train_ppl=round(state.window_ppl, 4),
            dev_ppl=round(dev_ppl, 4)))
        state.history.append(row)
        state.window_nll, state.window_tok = 0.0, 0
        log.info("%s: step %d epoch %.2f lr %.4g train ppl %.2f dev ppl %.2f "
                 "(%.0f target words/s)", self.name, state.step, row["epoch"], lr,
                 row["train_ppl"], dev_ppl, state.train_tokens / max(state.train_seconds, 1e-9))
        if dev_ppl < state.best_dev_ppl:
            state.best_dev_ppl, state.best_step = dev_ppl, state.step
            state.best_state = _cpu_copy(self.model) if self.world.is_main else None

    def stop_together(self, state: TrainState, stop: runguard.StopSignals | None) -> None:
        """Every rank stops after this step if any rank has a stop signal: rank 0 writes the
        resume point, and all raise Stopped once it is written. With several processes the ranks
        agree in the step's own collective (update's vote): a signal that comes after it (during
        the update, the evaluation or the checkpoint) stops them all after the next
        step."""
        signum = self.stop_agreed(stop, voted=True)
        if signum is None:
            return
        self.save(state)
        distributed.barrier(self.world)
        raise runguard.Stopped(f"{self.name}: stopped by {signal.Signals(signum).name} at step "
                               f"{state.step} of {self.total_steps}; {self.last} holds it: rerun "
                               f"to resume", signum)

    def stop_after_training(self, stop: runguard.StopSignals | None) -> None:
        """After the last step, its resume point written: every rank stops before the outputs if
        any rank has a stop signal. No step is left to vote in, and a signal may come after the
        last step's vote (during its evaluation or checkpoint, or during the setup of a finished
        run, which trains no step), so the ranks agree in a collective of their own, which also
        waits for rank 0's checkpoint: either all write the outputs or all raise Stopped."""
        signum = self.stop_agreed(stop, voted=False)
        if signum is not None:
            raise runguard.Stopped(f"{self.name}: stopped by {signal.Signals(signum).name} after "
                                   f"the last step; {self.last} holds it: rerun to write the "
                                   f"outputs", signum)

    def stop_after_outputs(self, stop: runguard.StopSignals | None) -> None:
        """After the outputs: a signal that came as they were written (after the last check for
        one) still stops the run, where it used to vanish and the run end with status 0. The
        ranks agree once rank 0 has written them all, so none is killed mid-write by a peer that
        stopped first; every rank raises Stopped, the outputs complete."""
        signum = self.stop_agreed(stop, voted=False)
        if signum is not None:
            raise runguard.Stopped(f"{self.name}: stopped by {signal.Signals(signum).name} as "
                                   f"its outputs were written; they are complete, and a rerun "
                                   f"writes them again from {self.last}", signum)

    def stop_agreed(self, stop: runguard.StopSignals | None, *, voted: bool) -> int | None:
        """The signal every rank stops on, or None if no rank has one. `voted`: the ranks agreed
        in this step's collective (update's vote); else they agree here, in one all-reduce. A
        rank that got no signal itself stops on SIGTERM (what spawn passes on)."""
        asked = stop is not None and stop.requested is not None
        if self.world.size == 1:
            agreed = asked
        elif voted:
            agreed = self.stop_vote.agreed
        else:
            agreed = distributed.all_reduce_sum([float(asked)], self.world, self.device)[0] > 0
        if not agreed:
            return None
        return stop.requested if asked else signal.SIGTERM

    def write_outputs(self, state: TrainState, *, t_start: float) -> dict:
        """After the last step: test perplexity, model.pt (the final weights: the paper's
        choice), best.pt, the snapshots, the metrics and the curves (rank 0 writes)."""
        test = open_split(self.paths.ids, "test", src_vocab=self.src_vocab,
                          tgt_vocab=self.tgt_vocab)
        with self.chosen.strict_fp32():
            test_ppl = perplexity(self.model, test, vocab=self.tgt_vocab,
                                  device=self.device)
        dev_ppl = state.history[-1]["dev_ppl"]
        save = functools.partial(checkpoint.save, src_vocab=self.src_vocab,
                                 tgt_vocab=self.tgt_vocab, name=self.name, text=self.text)
        if self.world.is_main:
            save(self.paths.model_dir / MODEL_FILE, self.model, step=state.step, dev_ppl=dev_ppl,
                 test_ppl=test_ppl)
            if state.best_state is not None:  # None only if no dev perplexity was finite
                save(self.paths.model_dir / BEST_FILE, self.model, state=state.best_state,
                     step=state.best_step, dev_ppl=state.best_dev_ppl)
            if self.snaps is not None:
                self.snaps.publish()
        metrics = TrainMetrics(  # the record the report and the summary read (s2s.artifacts)
            model=self.name, reverse_source=self.model_cfg.reverse_source,
            **self.model_cfg.shape(), parameters=self.model.num_parameters(),
            device=str(self.device), precision=self.chosen.name,
            threads=state.threads, epochs=self.cfg.epochs, steps=state.step,
            train_pairs=len(self.train), train_target_words=self.train.target_tokens,
            tgt_words_per_sec=round(state.train_tokens / max(state.train_seconds, 1e-9), 1),
            train_seconds=round(state.train_seconds, 1),
            wall_seconds=round(time.perf_counter() - t_start, 1),
            dev_ppl=dev_ppl, test_ppl=round(test_ppl, 4),
            best_dev_ppl=round(state.best_dev_ppl, 4),
            processes=self.world.size if self.world.size > 1 else None,
            engine=None if self.device.type == "cpu" else self.chosen.engine,
            cpu=state.cpu,
        ).to_json()
        if not self.world.is_main:
            return metrics
        atomic_write_json(self.paths.metrics, metrics)
        write_curves(self.paths.curves, state.history)
        log.info("%s: dev ppl %.2f, test ppl %.2f, %.0f target words/s; wrote %s, %s, %s in "
                 "%.1fs", self.name, dev_ppl, test_ppl, metrics["tgt_words_per_sec"],
                 self.paths.model_dir, self.paths.metrics, self.paths.curves,
                 time.perf_counter() - t_start)
        return metrics


@dataclass(frozen=True)
class TrainJob:
    """One model's training as params ask for it, resolved once in each process (:meth:`of`, by
    the train stage): its name, its recipe (`train` with its architecture's and its own,
    :meth:`s2s.config.Params.train_config`), its architecture's config, the GPUs its resources
    ask for, the text settings its data was prepared with (s2s.text_settings), the epochs to
    snapshot (none: no snapshots), and the key its device was set by (what a device that cannot
    be had is named by). The trainer reads nothing else of params."""

    name: str
    cfg: TrainConfig
    model_cfg: object
    gpus: int  # resources.train.gpus
    text: dict
    snapshot_epochs: tuple[float, ...] = ()
    device_key: str = "train.device"  # or models.<name>.train.device
    code: Mapping[str, str] = field(default_factory=dict)  # code_record: what trains it
    resume_other_code: bool = False  # go on from a resume point of other code (--resume-other-code)

    @classmethod
    def of(cls, params: Params, name: str, *, snapshots: bool = False,
           resume_other_code: bool = False) -> TrainJob:
        """Model `name` of params (ConfigError naming the key of an unknown or bad one), with
        params' `analysis.snapshots` where `snapshots`, and the code it is trained by."""
        model_cfg = params.model_config(name)
        return cls(name=name, cfg=params.train_config(name), model_cfg=model_cfg,
                   code=code_record(model_cfg), resume_other_code=resume_other_code,
                   gpus=params.resources_for("train").gpus, text=text_record(params.prepare),
                   snapshot_epochs=(tuple(AnalysisConfig.read(params, "snapshots"))
                                    if snapshots else ()),
                   device_key=(f"models.{name}.train.device"
                               if "device" in (params.models[name].get("train") or {})
                               else "train.device"))


def join(job: TrainJob, world: distributed.World) -> torch.device:
    """This rank's device for `job`, with every rank in the process group (s2s.distributed.init;
    a second call, setup's after the train stage's, finds it joined). The train stage joins
    before rank 0 takes the checkpoint folder's lock, so that every rank hears if it cannot."""
    return distributed.init(world, for_resources(job.gpus, "train", name=job.cfg.device,
                                                 key=job.device_key))


def setup(job: TrainJob, paths: TrainPaths, *, world: distributed.World) -> Run:
    """Read the data, build and initialise the model on its device, plan the batches."""
    name, cfg, model_cfg = job.name, job.cfg, job.model_cfg
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    device = join(job, world)
    src_vocab, tgt_vocab = Vocab.load_pair(paths.vocab)
    # mapped, not read: checked against the ids stage's record (s2s.data.ids)
    t0 = time.perf_counter()
    train = open_split(paths.ids, "train", src_vocab=src_vocab, tgt_vocab=tgt_vocab)
    dev = open_split(paths.ids, "dev", src_vocab=src_vocab, tgt_vocab=tgt_vocab)
    log.info("%s: %d training pairs, %d dev pairs (%s, checked in %.1fs), vocab %d/%d, device %s",
             name, len(train), len(dev), paths.ids, time.perf_counter() - t0, len(src_vocab),
             len(tgt_vocab), device)

    model = build_model(model_cfg, src_vocab=len(src_vocab), tgt_vocab=len(tgt_vocab),
                        pad=src_vocab.pad)
    model.init_weights(model_cfg.init_seed)
    log.info("%s: %s, %d parameters (the paper's 4x1000 model: 384M)", name, model_cfg,
             model.num_parameters())
    model.to(device).train()
    opt = make_optimizer(model, cfg)
    log.info("%s: recipe: %s, lr %g, schedule %s%s%s", name, cfg.optimizer, cfg.lr, cfg.schedule,
             f" (warmup {cfg.warmup_steps} steps)" if cfg.schedule == "inverse_sqrt" else "",
             f", label smoothing {cfg.label_smoothing:g}" if cfg.label_smoothing else "")
    chosen = precision.choose(cfg.amp, device)
    fp = fingerprint(model_cfg, cfg, src_vocab, tgt_vocab, paths.ids, chosen=chosen)
    # Each rank reads its own files and orders its batches from them: another rank's data would
    # make the shares overlap or leave pairs out, or another step count hang a collective.
    fps = distributed.all_gather_object(fp, world)
    if other := [rank for rank, f in enumerate(fps) if f != fps[0]]:
        raise ValueError(f"{name}: rank{'s' * (len(other) > 1)} {', '.join(map(str, other))} "
                         f"of {world.size} read{'s' * (len(other) == 1)} other training data or "
                         f"settings than rank 0 (the run's fingerprint: the model and train "
                         f"params, the precision, the vocabularies {paths.vocab} and the ids "
                         f"{paths.ids}): every process of a run must read the same files")
    for split, pairs in (("train", train), ("dev", dev)):  # (after: every rank hears of it)
        if not len(pairs):  # (prepare refuses an empty one: a folder made by hand)
            raise ValueError(f"{paths.ids}: its {split} split holds no pairs: nothing to "
                             f"{'train on' if split == 'train' else 'choose the best model by'}")
    if world.is_main:
        # A run killed inside torch.save leaves its temporary file (as large as a checkpoint) in
        # the checkpoint folder, which DVC keeps across runs (persist: true).
        for folder in (paths.ckpt_dir, paths.model_dir):
            for tmp in remove_temporaries(folder):
                log.info("%s: removed %s, left by a killed run", name, tmp)
        # The metrics and curves files lie in folders other stages write to and depend on whole
        # (metrics/train/, the report's input): only their own temporaries, a dead run's, go.
        for path in (paths.metrics, paths.curves):
            remove_dead_temporaries(path)
    per_epoch = steps_per_epoch(len(train), cfg.batch_size)
    total_steps = max(1, round(cfg.epochs * per_epoch))
    snaps = None if paths.snapshots is None else Snapshots(
        job.snapshot_epochs, steps_per_epoch=per_epoch, total_steps=total_steps,
        ckpt_dir=paths.ckpt_dir, out_dir=paths.snapshots, fingerprint=fp, writer=world.is_main,
        save=functools.partial(checkpoint.save, model=model, src_vocab=src_vocab,
                               tgt_vocab=tgt_vocab, name=name, text=job.text))
    return Run(job=job, world=world, device=device, chosen=chosen, src_vocab=src_vocab,
               tgt_vocab=tgt_vocab, train=train, dev=dev, model=model, opt=opt,
               steps_per_epoch=per_epoch, total_steps=total_steps,
               eval_steps=max(1, round(cfg.eval_every * per_epoch)), fingerprint=fp,
               paths=paths, snaps=snaps)


def run(job: TrainJob, paths: TrainPaths, *, stop_after: int | None, world: distributed.World,
        stop: runguard.StopSignals | None) -> dict:
    """Train `job` to its last step, resuming from ``paths.last`` where it can, and write its
    outputs (s2s.stages.train says which). Returns its metrics."""
    t_start = time.perf_counter()
    name = job.name
    r = setup(job, paths, world=world)
    state = r.resume()
    if world.is_main:
        paths.model_dir.mkdir(parents=True, exist_ok=True)
    log.info("%s: precision: %s; dev and test perplexity in fp32", name, r.chosen)
    bar = progress(total=r.total_steps, initial=state.step, desc=f"train {name}", unit="step",
                   disable=not world.is_main)
    watch = precision.watch(r.model, r.chosen)  # the first step's dtypes against the record
    while state.step < r.total_steps:
        epoch, offset = divmod(state.step, r.steps_per_epoch)
        order = r.batches_of(epoch)[offset:]
        with contextlib.closing(r.batches(order)) as batches:
            for idx, batch in zip(order, batches):
                if state.step >= r.total_steps:
                    break
                if r.snaps is not None:
                    r.snaps.at(state.step)  # the weights before this step's update
                lr = r.update(state, idx, batch, stop_after=stop_after, stop=stop)
                if watch is not None:
                    watch.check()
                    watch = None
                bar.update(1)
                if state.step % r.cfg.log_every == 0:
                    bar.set_postfix(lr=f"{lr:.3g}", ppl=f"{state.window_ppl:.1f}",
                                    wps=f"{state.words_per_sec:.0f}")
                if state.step % r.eval_steps == 0 or state.step == r.total_steps:
                    r.evaluate(state, lr)
                if state.step % r.cfg.checkpoint_every == 0 or state.step == stop_after:
                    r.save(state)
                r.stop_together(state, stop)  # a signal to any rank stops every rank here
                if state.step == stop_after:
                    bar.close()
                    raise Interrupted(f"{name}: stopped after step {state.step} (stop_after)")
    bar.close()
    if watch is not None:  # no step trained (a finished run): nothing to check, hooks off
        watch.check()
    r.save(state)
    r.stop_after_training(stop)  # a signal after the last step's vote stops every rank
    metrics = r.write_outputs(state, t_start=t_start)
    r.stop_after_outputs(stop)  # and one as they were written, once they are
    return metrics


def dropout_seed(order_seed: int, step: int, world: distributed.World) -> int:
    """The seed of step `step`'s dropout masks on this rank: a function of the step, so that a
    resumed run draws the masks of an uninterrupted one, and of the rank (rank 0's is the
    one-process seed), so that no two ranks draw the same masks for their shares."""
    return order_seed * 1_000_003 + step + world.rank * (1 << 40)


def _non_finite(model: nn.Module) -> str | None:
    """The name of the model's first floating-point tensor holding NaN or inf, or None; one read
    from the device for all of them."""
    named = [(k, v) for k, v in model.state_dict().items() if v.is_floating_point()]
    if not named:
        return None
    finite = torch.stack([torch.isfinite(v).all() for _, v in named]).tolist()
    return next((k for (k, _), ok in zip(named, finite) if not ok), None)


def _cpu_copy(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


def _on_cpu(obj: Any) -> Any:
    """`obj` (an optimizer's state dict) with each tensor on the CPU; one there already is itself,
    not a copy (a CPU checkpoint's bytes are those of the state as it is)."""
    if isinstance(obj, torch.Tensor):
        return obj.cpu()
    if isinstance(obj, dict):
        return {k: _on_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_on_cpu(v) for v in obj)
    return obj


def write_curves(path: Path, history: list[dict]) -> None:
    """The learning curve: one CurveRow a dev evaluation (s2s.layout)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CURVE_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(history)
    atomic_write_text(path, buf.getvalue())


# --- Snapshots: a model during training, for the analyses over training time ------------------
# Params `analysis.snapshots` lists epochs (e.g. 0, 0.25, 0.5, 1, 2); the snapshot of epoch E is
# the weights when ``step == round(E * steps_per_epoch)`` (E = 0: before the first update). A
# snapshot at or past the last step is not written: ``models/<m>/model.pt`` is the end.
#
# DVC deletes a stage's outputs before it reruns it, but keeps the checkpoint folder (persist), so
# the snapshots are written into ``<ckpt_dir>/snapshots/`` as training passes them, and copied into
# the output folder (``snapshots/<m>/``, with ``snapshots.json``, the index) once training ends. A
# run resumes from ``last.pt`` only if every snapshot before its step is there, of the same
# fingerprint; otherwise it starts afresh. So a resumed run writes the same snapshot files as a run
# from scratch.

class Snapshots:
    """The snapshots of one training run. `save(path, **extra)` writes the model's checkpoint
    (s2s.checkpoint.save with the run's vocabularies and name); `writer`: this process writes
    files (rank 0)."""

    def __init__(self, epochs: Sequence[float], *, steps_per_epoch: int, total_steps: int,
                 ckpt_dir: Path, out_dir: Path, fingerprint: str,
                 save: Callable[..., None], writer: bool = True):
        self.due = snapshots_due(epochs, steps_per_epoch=steps_per_epoch, total_steps=total_steps)
        past = sorted(set(map(float, epochs)) - set(self.due))
        if past and writer:  # the end is models/<m>/model.pt; say so rather than drop them
            log.warning("analysis.snapshots %s: at or past the end of training (%d steps, %d "
                        "an epoch): no snapshot there; the end is the model itself",
                        ", ".join(f"{e:g}" for e in past), total_steps, steps_per_epoch)
        self.steps_per_epoch, self.total_steps = steps_per_epoch, total_steps
        self.work = Path(ckpt_dir) / "snapshots"
        self.out = Path(out_dir)
        self.fingerprint, self._save, self.writer = fingerprint, save, writer
        if writer and self.work.exists():
            remove_temporaries(self.work)

    def complete_before(self, step: int) -> bool:
        """Every snapshot of a step before `step` is in the checkpoint folder, of this run's
        fingerprint (a resume point at `step` can be used)."""
        for epoch, s in self.due.items():
            if s >= step:
                continue
            path = self.work / snapshot_file(epoch)
            try:
                payload = checkpoint.load_payload(path)
            except checkpoint.CheckpointUnread as e:  # kept, with the resume point: no clear()
                raise checkpoint.CheckpointUnread(f"{e}; the snapshots and the resume point are "
                                                  f"kept: rerun the stage once it can be read"
                                                  ) from None
            except checkpoint.CheckpointError as e:
                log.warning("snapshot of epoch %g missing or unreadable (%s)", epoch, e)
                return False
            if payload.get("fingerprint") != self.fingerprint or payload.get("step") != s:
                log.warning("%s belongs to another run", path)
                return False
        return True

    def clear(self) -> None:
        """A run from scratch: drop the snapshots of any earlier run."""
        if self.writer and self.work.exists():
            shutil.rmtree(self.work)

    def at(self, step: int) -> None:
        """Write the snapshots due at `step` (call before that step's update)."""
        if not self.writer:
            return
        for epoch, s in self.due.items():
            if s == step:
                self._save(self.work / snapshot_file(epoch), step=step, epoch=epoch,
                           fingerprint=self.fingerprint)

    def publish(self) -> list[Path]:
        """Copy the snapshots into the output folder beside their index; returns the files."""
        if not self.writer:
            return []
        self.out.mkdir(parents=True, exist_ok=True)
        remove_dead_temporaries_in(self.out)  # a killed publish's
        written = []
        for epoch in self.due:
            src, dst = self.work / snapshot_file(epoch), self.out / snapshot_file(epoch)
            with open(src, "rb") as f, atomic_open(dst, "wb") as g:
                shutil.copyfileobj(f, g, 1 << 20)
            written.append(dst)
        SnapshotIndex(
            steps_per_epoch=self.steps_per_epoch, total_steps=self.total_steps,
            final_epoch=round(self.total_steps / self.steps_per_epoch, 6),
            snapshots=tuple(SnapshotEntry(epoch=e, step=s, file=snapshot_file(e))
                          for e, s in self.due.items())).write(self.out / SNAPSHOT_INDEX)
        written.append(self.out / SNAPSHOT_INDEX)
        return written
