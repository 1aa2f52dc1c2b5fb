"""Training one model: the procedure of §3.4, resumable (the library of
:mod:`s2s.stages.train`, which holds the stage's documentation).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import math
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from torch import nn

from s2s import checkpoint, distributed, precision, runguard
from s2s.artifacts import SnapshotEntry, SnapshotIndex, TrainMetrics
from s2s.config import Params, TrainConfig, train_record
from s2s.data.batching import Batch, collate, epoch_batches, eval_batches, load_parallel
from s2s.data.vocab import Vocab
from s2s.device import pick_device
from s2s.io import atomic_open, atomic_write_json, atomic_write_text, remove_temporaries
from s2s.losses import linear_cross_entropy, smoothed_cross_entropy, summed_nll
from s2s.model import build_model, config_record
from s2s.model.base import Model
from s2s.progress import progress
from s2s.snapshots import SNAPSHOT_INDEX, snapshot_file, snapshots_due

log = logging.getLogger("s2s.train")


class TrainingError(RuntimeError):
    """Training cannot go on (a non-finite loss); the last good checkpoint is kept."""


class Interrupted(RuntimeError):
    """Raised by `stop_after` (tests): the run stopped as if killed right after a checkpoint."""


def lr_at(step: int, steps_per_epoch: int, cfg: TrainConfig) -> float:
    """The learning rate of update `step` (0-based). `schedule: paper` (§3.4): constant, then
    halved every `decay_every` epochs from epoch `decay_start` on. `inverse_sqrt` (Vaswani et al.
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


# `train` keys that change no number of the outputs (at a fixed thread count: see README), so a
# checkpoint resumes across a change of them. Every other key is in the fingerprint.
BOOKKEEPING = ("device", "threads", "log_every", "checkpoint_every")


def make_optimizer(model: nn.Module, cfg: TrainConfig) -> torch.optim.Optimizer:
    """The recipe's optimizer: plain SGD (§3.4: no momentum), or Adam with `adam_betas` and
    `adam_eps` (Vaswani et al.); the learning rate is set every step from lr_at."""
    if cfg.optimizer == "adam":
        return torch.optim.Adam(model.parameters(), lr=cfg.lr, betas=tuple(cfg.adam_betas),
                                eps=cfg.adam_eps)
    return torch.optim.SGD(model.parameters(), lr=cfg.lr)


def fingerprint(model_cfg, cfg: TrainConfig, src: Vocab, tgt: Vocab,
                prepared_dir: Path, *, mm_dtype: torch.dtype | None = None) -> str:
    """What the weights, the curves and best.pt depend on: the model config, every `train` key
    but BOOKKEEPING, the precision `amp` resolved to on this machine (`auto` is bf16 on one and
    fp32 on another), both vocabularies, the training and the dev files. A checkpoint with
    another fingerprint is never resumed. (The test set is read only after training.)"""
    # (train_record: the recipe keys only where they are not the paper's, so a run of the
    # paper's recipe hashes as it did before they existed)
    relevant = {k: v for k, v in train_record(cfg).items() if k not in BOOKKEEPING}
    if mm_dtype is not None:  # fp32 adds nothing: a run with amp false hashes as before amp
        relevant["matmul_dtype"] = str(mm_dtype)
    h = hashlib.sha256(json.dumps([config_record(model_cfg), relevant, src.fingerprint,
                                   tgt.fingerprint], sort_keys=True).encode())
    for split in ("train", "dev"):
        for lang in ("en", "fr"):
            path = Path(prepared_dir) / f"{split}.tok.{lang}"
            h.update(f"{split}.{lang}:{path.stat().st_size};".encode())
            with open(path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
    return h.hexdigest()


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
    with autocast:
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


def train_step(model: nn.Module, opt: torch.optim.Optimizer,
               pairs: Sequence[tuple[list[int], list[int]]] | Batch | None, *, batch_size: int,
               lr: float, cfg: TrainConfig, vocab: Vocab, device: torch.device, autocast,
               world: distributed.World | None = None) -> tuple[float, int]:
    """One update (§3.4) on a minibatch of `batch_size` sentences, of which `pairs` is this
    process's share (as shard_loss takes it): the loss summed per sentence and averaged over the
    batch, its gradient summed over processes, clipped to `clip_norm`, and one step of the
    recipe's optimizer at `lr`. Returns the batch's summed NLL and target tokens over all
    processes; a non-finite NLL is returned before any update (the caller stops).

    Reading the NLL is the step's one wait for the device: on a GPU, the backward pass and the
    update may still be running when this returns (the next step's read waits for them), so a
    caller that times steps synchronises the device before it stops its clock (at an
    evaluation, say); over consecutive steps the time adds up. bench/train.py times this
    function."""
    world = world or distributed.World()
    for group in opt.param_groups:
        group["lr"] = lr
    with torch.profiler.record_function("forward+loss"):
        total, nll, ntok = shard_loss(model, pairs, vocab=vocab, device=device, autocast=autocast,
                                      label_smoothing=cfg.label_smoothing)
        loss = total / batch_size  # summed per sentence, averaged over the batch (§3.4)
        batch_nll, batch_tok = distributed.all_reduce_sum([nll.detach(), ntok], world, device)
    if not math.isfinite(batch_nll):
        return batch_nll, int(batch_tok)
    with torch.profiler.record_function("zero_grad"):
        opt.zero_grad(set_to_none=True)
    with torch.profiler.record_function("backward"):
        if pairs:
            loss.backward()
        distributed.all_reduce_gradients(model, world)  # summed: the whole batch's gradient
    with torch.profiler.record_function("clip_grad_norm"):
        nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_norm)
    with torch.profiler.record_function("optimizer_step"):
        opt.step()
    return batch_nll, int(batch_tok)


@torch.no_grad()
def perplexity(model: Model, pairs, *, vocab: Vocab, device: torch.device,
               batch_size: int = 64) -> float:
    """exp(summed NLL / target tokens) of `pairs` (id pairs), teacher-forced, in eval mode and
    fp32, in batches of `batch_size` sorted by length; nan for no tokens. The softmax layer
    runs over the real target positions only, in row chunks (``s2s.losses.summed_nll``: on the
    CPU each batch's NLL is ``F.cross_entropy``'s over the (N, T, V) logits to the bit); the
    sum stays on the device in fp64 (as Python floats would add the batches) and is read once.
    The model is left in train mode."""
    model.eval()
    total = torch.zeros((), dtype=torch.float64, device=device)
    ntok = 0
    for idx in eval_batches(pairs, batch_size):
        b = collate([pairs[i] for i in idx], pad=vocab.pad, bos=vocab.bos, eos=vocab.eos).to(device)
        feats = model.features(b.src, b.src_lengths, b.tgt_in)  # (N, T, D)
        total += summed_nll(feats, model.proj.weight, model.proj.bias, b.tgt_out,
                            ignore_index=vocab.pad, rows=b.target_rows).double()
        ntok += b.ntokens
    model.train()
    return math.exp(total.item() / ntok) if ntok else float("nan")


def run(params: Params, name: str, *, prepared_dir: Path, vocab_dir: Path, model_dir: Path,
           ckpt_dir: Path, metrics_out: Path, curves_out: Path, stop_after: int | None,
           world: distributed.World, stop: runguard.StopSignals | None,
           snapshot_dir: Path | None = None, snapshot_epochs: tuple[float, ...] = ()) -> dict:
    cfg = params.train_config(name)  # `train`, with the model's recipe
    model_cfg = params.model_config(name)
    t_start = time.perf_counter()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    device = distributed.init(world, pick_device(cfg.device, key="train.device"))
    src_vocab = Vocab.load(vocab_dir / "en.tsv")
    tgt_vocab = Vocab.load(vocab_dir / "fr.tsv")
    train_pairs = load_parallel(prepared_dir / "train.tok", src_vocab, tgt_vocab)
    dev_pairs = load_parallel(prepared_dir / "dev.tok", src_vocab, tgt_vocab)
    lengths = [(len(s), len(t)) for s, t in train_pairs]
    log.info("%s: %d training pairs, %d dev pairs, vocab %d/%d, device %s", name,
             len(train_pairs), len(dev_pairs), len(src_vocab), len(tgt_vocab), device)

    model = build_model(model_cfg, src_vocab=len(src_vocab), tgt_vocab=len(tgt_vocab),
                        pad=src_vocab.pad)
    model.init_weights(model_cfg.init_seed)
    n_params = model.num_parameters()
    log.info("%s: %s, %d parameters (the paper's 4x1000 model: 384M)", name, model_cfg, n_params)
    model.to(device).train()
    distributed.broadcast_parameters(model, world)
    opt = make_optimizer(model, cfg)
    log.info("%s: recipe: %s, lr %g, schedule %s%s%s", name, cfg.optimizer, cfg.lr, cfg.schedule,
             f" (warmup {cfg.warmup_steps} steps)" if cfg.schedule == "inverse_sqrt" else "",
             f", label smoothing {cfg.label_smoothing:g}" if cfg.label_smoothing else "")

    def batches_of(epoch: int) -> list[list[int]]:
        return epoch_batches(len(train_pairs), lengths, batch_size=cfg.batch_size,
                             bucket_batches=cfg.bucket_batches, seed=model_cfg.order_seed,
                             epoch=epoch)

    steps_per_epoch = len(batches_of(0))
    total_steps = max(1, round(cfg.epochs * steps_per_epoch))
    eval_steps = max(1, round(cfg.eval_every * steps_per_epoch))
    chosen = precision.choose(cfg.amp, device)
    mm_dtype = chosen.dtype
    fp = fingerprint(model_cfg, cfg, src_vocab, tgt_vocab, prepared_dir, mm_dtype=mm_dtype)

    step, history, best = 0, [], math.inf
    best_step, best_state = None, None  # the weights of the lowest dev perplexity so far (CPU)
    train_seconds, train_tokens = 0.0, 0
    window_nll, window_tok = 0.0, 0  # training loss since the last dev evaluation
    last = ckpt_dir / "last.pt"
    if world.is_main:
        # A run killed inside torch.save leaves its temporary file (as large as a checkpoint) in
        # the checkpoint folder, which DVC keeps across runs (persist: true).
        for folder in (ckpt_dir, model_dir):
            for tmp in remove_temporaries(folder):
                log.info("%s: removed %s, left by a killed run", name, tmp)
    payload = None
    if last.exists():
        try:
            payload = checkpoint.load_payload(last)
        except checkpoint.CheckpointError as e:  # a resume point is only a cache: recompute
            log.warning("%s; starting afresh", e)
    snaps = None if snapshot_dir is None else Snapshots(
        snapshot_epochs, steps_per_epoch=steps_per_epoch, total_steps=total_steps,
        ckpt_dir=ckpt_dir, out_dir=snapshot_dir, fingerprint=fp, writer=world.is_main,
        save=lambda path, **kw: checkpoint.save(path, model, src_vocab=src_vocab,
                                                tgt_vocab=tgt_vocab, name=name, **kw))
    if snaps is not None and payload is not None and payload.get("fingerprint") == fp \
            and not snaps.complete_before(payload["step"]):
        log.warning("%s: a snapshot before step %d is missing; starting afresh", name,
                    payload["step"])
        payload = None
    if payload is not None:
        if payload.get("fingerprint") == fp and payload.get("name") == name:
            model.load_state_dict(payload["model"])
            if "optimizer" in payload:  # Adam's moments (SGD has no state beyond the rate)
                opt.load_state_dict(payload["optimizer"])
            step, history, best = payload["step"], payload["history"], payload["best_dev_ppl"]
            train_seconds, train_tokens = payload["train_seconds"], payload["train_tokens"]
            window_nll, window_tok = payload["window_nll"], payload["window_tok"]
            best_step = payload.get("best_step")
            if best_step is not None:
                best_state = payload["best_model"] if payload.get("best_model") is not None else \
                    _cpu_copy(model)  # None: the best weights were the checkpoint's own
            if step >= total_steps:
                log.info("%s: resuming a finished run from %s (step %d of %d): no step is "
                         "trained; outputs rewritten from the checkpoint", name, last, step,
                         total_steps)
            else:
                log.info("%s: resuming from %s at step %d of %d", name, last, step, total_steps)
        else:
            log.info("%s: %s belongs to other params or data; starting afresh", name, last)
    if snaps is not None and step == 0:
        snaps.clear()
    if world.is_main:
        model_dir.mkdir(parents=True, exist_ok=True)

    def save_last() -> None:
        if not world.is_main:
            return
        # The best weights travel with the resume point (unless they are its own), so that a
        # rerun can always write best.pt, even when no later evaluation improves.
        checkpoint.save(last, model, src_vocab=src_vocab, tgt_vocab=tgt_vocab, name=name,
                        fingerprint=fp, step=step, history=history, best_dev_ppl=best,
                        best_step=best_step,
                        best_model=None if best_step == step else best_state,
                        train_seconds=train_seconds, train_tokens=train_tokens,
                        window_nll=window_nll, window_tok=window_tok,
                        **({"optimizer": opt.state_dict()} if opt.state_dict()["state"] else {}))

    autocast = precision.autocast(device, mm_dtype)
    stochastic = model_cfg.dropout > 0  # every config declares its dropout (RNNs: none)
    log.info("%s: precision: %s; dev and test perplexity in fp32", name, chosen)
    bar = progress(total=total_steps, initial=step, desc=f"train {name}", unit="step",
                   disable=not world.is_main)
    while step < total_steps:
        epoch, offset = divmod(step, steps_per_epoch)
        for idx in batches_of(epoch)[offset:]:
            if step >= total_steps:
                break
            if snaps is not None:
                snaps.at(step)  # the weights before this step's update
            t0 = time.perf_counter()
            lr = lr_at(step, steps_per_epoch, cfg)
            share = distributed.shard(idx, world)  # all of idx with one process
            if stochastic:  # dropout masks a function of the step: a resumed run draws the same
                torch.manual_seed(model_cfg.order_seed * 1_000_003 + step)
            batch_nll, batch_tok = train_step(
                model, opt, [train_pairs[i] for i in share], batch_size=len(idx), lr=lr,
                cfg=cfg, vocab=tgt_vocab, device=device, autocast=autocast, world=world)
            if not math.isfinite(batch_nll):
                raise TrainingError(
                    f"{name}: non-finite loss ({batch_nll / len(idx)}) at step {step + 1} (epoch "
                    f"{step / steps_per_epoch:.2f}, lr {lr:g}); the last good checkpoint "
                    f"{last} is kept" + ("" if last.exists() else " (none written yet)"))
            train_seconds += time.perf_counter() - t0
            train_tokens += int(batch_tok)
            window_nll += batch_nll
            window_tok += int(batch_tok)
            step += 1
            bar.update(1)
            if step % cfg.log_every == 0:
                bar.set_postfix(lr=f"{lr:.3g}", ppl=f"{math.exp(window_nll / window_tok):.1f}",
                                wps=f"{train_tokens / train_seconds:.0f}")
            if step % eval_steps == 0 or step == total_steps:
                dev_ppl = perplexity(model, dev_pairs, vocab=tgt_vocab, device=device)
                row = {"step": step, "epoch": round(step / steps_per_epoch, 4), "lr": lr,
                       "train_ppl": round(math.exp(window_nll / window_tok), 4),
                       "dev_ppl": round(dev_ppl, 4)}
                history.append(row)
                window_nll, window_tok = 0.0, 0
                log.info("%s: step %d epoch %.2f lr %.4g train ppl %.2f dev ppl %.2f "
                         "(%.0f target words/s)", name, step, row["epoch"], lr, row["train_ppl"],
                         dev_ppl, train_tokens / max(train_seconds, 1e-9))
                if dev_ppl < best:
                    best, best_step, best_state = dev_ppl, step, _cpu_copy(model)
            if step % cfg.checkpoint_every == 0 or step == stop_after:
                save_last()
            if stop is not None and stop.requested:
                save_last()
                bar.close()
                raise runguard.Stopped(f"{name}: stopped by {stop.name} at step {step} of "
                                       f"{total_steps}; {last} holds it: rerun to resume",
                                       stop.requested)
            if step == stop_after:
                bar.close()
                raise Interrupted(f"{name}: stopped after step {step} (stop_after)")
    bar.close()
    save_last()
    if stop is not None and stop.requested:  # during the last evaluation
        raise runguard.Stopped(f"{name}: stopped by {stop.name} after the last step; {last} "
                               f"holds it: rerun to write the outputs", stop.requested)

    test_pairs = load_parallel(prepared_dir / "test.tok", src_vocab, tgt_vocab)
    test_ppl = perplexity(model, test_pairs, vocab=tgt_vocab, device=device)
    dev_ppl = history[-1]["dev_ppl"]
    if world.is_main:
        checkpoint.save(model_dir / "model.pt", model, src_vocab=src_vocab, tgt_vocab=tgt_vocab,
                        name=name, step=step, dev_ppl=dev_ppl, test_ppl=test_ppl)
        if best_state is not None:  # None only if no dev perplexity was finite
            checkpoint.save(model_dir / "best.pt", model, src_vocab=src_vocab,
                            tgt_vocab=tgt_vocab, name=name, state=best_state, step=best_step,
                            dev_ppl=best)
        if snaps is not None:
            snaps.publish()
    metrics = TrainMetrics(  # the record the report and the summary read (s2s.artifacts)
        model=name, reverse_source=model_cfg.reverse_source, **model_cfg.shape(),
        parameters=n_params, device=str(device), precision=precision.name(mm_dtype),
        threads=torch.get_num_threads(), epochs=cfg.epochs, steps=step,
        train_pairs=len(train_pairs),
        train_target_words=sum(len(t) + 1 for _, t in train_pairs),
        tgt_words_per_sec=round(train_tokens / max(train_seconds, 1e-9), 1),
        train_seconds=round(train_seconds, 1),
        wall_seconds=round(time.perf_counter() - t_start, 1),
        dev_ppl=dev_ppl, test_ppl=round(test_ppl, 4), best_dev_ppl=round(best, 4),
        processes=world.size if world.size > 1 else None,
    ).to_json()
    if not world.is_main:
        return metrics
    atomic_write_json(metrics_out, metrics)
    write_curves(curves_out, history)
    log.info("%s: dev ppl %.2f, test ppl %.2f, %.0f target words/s; wrote %s, %s, %s in %.1fs",
             name, dev_ppl, test_ppl, metrics["tgt_words_per_sec"], model_dir, metrics_out,
             curves_out, time.perf_counter() - t_start)
    return metrics


def _cpu_copy(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


def write_curves(path: Path, history: list[dict]) -> None:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=["step", "epoch", "lr", "train_ppl", "dev_ppl"],
                            lineterminator="\n")
    writer.writeheader()
    writer.writerows(history)
    atomic_write_text(path, buf.getvalue())


# --- Snapshots (issue 16) ---------------------------------------------------------------------
# Snapshots of a model during training, for the analyses over training time.
#
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
