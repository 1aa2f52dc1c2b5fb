"""Decoding sentences with a model or an ensemble: batched beam search and the n-best
lists' fp32 scores (the library of :mod:`s2s.stages.translate` and of `s2s translate-text`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

import torch
from torch import Tensor

from s2s import arch, checkpoint, precision
from s2s.config import TranslateConfig
from s2s.data.batching import collate
from s2s.data.vocab import Vocab
from s2s.decode.beam import Hypothesis, beam_search, score_hypotheses
from s2s.decode.ensemble import Ensemble
from s2s.layout import model_file
from s2s.progress import progress

log = logging.getLogger("s2s.translate")

ROWS_BEAM = 12  # translate.batch_size counts sentences at this beam width (see `translate`)
# fp32 words a search step of one model holds per hypothesis and target word: the softmax
# layer's logits, the step's log-probs, the candidate scores (n, B, V) and the top-k's working
# copy of them. Measured by bench/search_memory.py (peak RSS of beam 12 on the CPU, 2,040
# hypotheses x 50,000 words): 4.1 for one model, 6.1 for two, 10.1 for five (step_copies: 4, 7,
# 10).
STEP_COPIES = 4


class SearchTooLarge(ValueError):
    """A beam (or batch) whose search would need more memory than the device has."""


def check_lengths(sources: list[list[int]], *, configs, cfg: TranslateConfig, where: str,
                  lines: list[int] | None = None) -> None:
    """Refuse, naming the line, a source longer than a member's positions allow, or one whose
    longest target, ``max_len_a * S + max_len_b`` tokens, would not fit in them; the message
    says which of the two limits the line exceeds (a source within the positions can still let
    the search write past them). `lines` maps each source to its line number in `where`
    (default: 1, 2, ...)."""
    limit = arch.max_tokens(configs)
    if limit is None:
        return
    longest = max_target_lengths(torch.tensor([len(src) for src in sources]), cfg).tolist()
    for i, src in enumerate(sources):
        n = len(src)
        if n > limit or longest[i] > limit:
            line = lines[i] if lines is not None else i + 1
            if n > limit:
                raise ValueError(f"{where}:{line}: {n} tokens: longer than the {limit} "
                                 f"positions a member of the system reads (max_positions); split "
                                 f"the line or use a recurrent system")
            raise ValueError(f"{where}:{line}: {n} tokens, within the {limit} positions a member "
                             f"of the system reads (max_positions), but the search may write up "
                             f"to {longest[i]} target tokens ({cfg.max_len_a:g} x {max(n, 1)} + "
                             f"{cfg.max_len_b}: translate.max_len_a and max_len_b), more than "
                             f"the {limit} it writes; split the line, lower max_len_a or "
                             f"max_len_b, or use a recurrent system")


def max_target_lengths(src_lengths: Tensor, cfg: TranslateConfig) -> Tensor:
    """The most target tokens the search writes for each source: ``max_len_a * S + max_len_b``,
    S the source's length as the model reads it (at least 1: an empty one counts as 1), the
    product in float32 and rounded down: (N,) int64. The search and :func:`check_lengths` both
    use it, so a source the check lets through never runs past a member's positions."""
    return (cfg.max_len_a * src_lengths.clamp(min=1).float()).long() + cfg.max_len_b


def step_copies(members: int) -> int:
    """The (hypotheses, target words) fp32 tensors one search step holds at once: STEP_COPIES,
    and for an ensemble each member's scores besides their sum (s2s.decode.ensemble: the
    members' logits are kept until the sum is known)."""
    return STEP_COPIES + (members + 1 if members > 1 else 0)


def search_bytes(*, beam: int, batch_size: int, vocab_size: int, members: int = 1) -> int:
    """The memory one search step of `translate` holds for its scores: hypotheses per batch
    (`batch_size` sentences at beam 12, proportionally more at narrower beams, at least one
    sentence) x target words x fp32 x :func:`step_copies`."""
    sentences = max(1, batch_size * ROWS_BEAM // beam)
    return sentences * beam * vocab_size * 4 * step_copies(members)


def available_bytes(device: torch.device) -> int | None:
    """Free memory of `device` (MemAvailable on the CPU), or None where it cannot be read."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def check_search_size(*, beam: int, batch_size: int, vocab_size: int,
                      device: torch.device, members: int = 1) -> None:
    """Refuse, before anything is allocated, a search whose steps would not fit in memory (of
    a system of `members` models)."""
    copies = step_copies(members)
    need = search_bytes(beam=beam, batch_size=batch_size, vocab_size=vocab_size, members=members)
    free = available_bytes(device)
    if free is not None and need > free:
        rows = free // (vocab_size * 4 * copies)  # hypotheses a step can hold

        def batch_at(b: int) -> int:  # the largest batch_size whose step fits at beam b:
            # max(1, batch_size * ROWS_BEAM // b) sentences of b hypotheses, at most rows // b
            return max(1, ((rows // b + 1) * b - 1) // ROWS_BEAM)

        fits = ("not one hypothesis fits" if rows < 1
                else f"at beam {beam} a batch of at most {batch_at(beam):,} fits" if beam <= rows
                else f"a beam of at most {rows:,} fits, with a batch of at most "
                     f"{batch_at(rows):,}")
        raise SearchTooLarge(
            f"beam {beam}: a search step would need about {need / 2**30:.1f} GiB "
            f"({need // (vocab_size * 4 * copies):,} hypotheses x {vocab_size:,} target "
            f"words x 4 bytes x {copies}{f' for {members} models' if members > 1 else ''}), "
            f"more than the {free / 2**30:.1f} GiB free on "
            f"{device.type}; {fits} (--batch-size or translate.batch_size: sentences a batch at "
            f"beam {ROWS_BEAM}, proportionally more at narrower beams)")


def load_members(configs: Mapping[str, object], *, models_dir: Path, src_vocab: Vocab,
                 tgt_vocab: Vocab, device: torch.device, combine: str, text=None):
    """One model, or an Ensemble of several, from their final checkpoints: `configs` maps each
    member's name, in the system's order, to the config params give it
    (:meth:`s2s.config.Params.model_configs`), and each checkpoint is checked to be that model
    (config, name, vocabularies). `text`: a function of the member's name giving the text
    settings its input will be prepared with (s2s.text_settings.for_params), checked against
    each checkpoint's record. The stages pass none: their input is the prepare stage's, and a
    change of ``prepare.lowercase`` retrains every model (the train stages declare it) before
    DVC runs them."""
    models = [checkpoint.load_model(model_file(models_dir, m), src_vocab=src_vocab,
                                    tgt_vocab=tgt_vocab, device=device, expect=cfg, name=m,
                                    text=None if text is None else text(m))
              for m, cfg in configs.items()]
    return models[0] if len(models) == 1 else Ensemble(models, combine=combine)


@torch.no_grad()
def translate(model, sources: list[list[int]], *, cfg: TranslateConfig, beam: int, nbest: int,
              vocab: Vocab, device: torch.device, desc: str = "",
              mm_dtype: torch.dtype | None = None) -> list[list[Hypothesis]]:
    """n-best hypotheses for every source, in input order, sentences batched by length: up to
    `cfg.batch_size` sentences at beam ROWS_BEAM, proportionally more at narrower beams, so a
    narrow beam's steps are as large as a wide one's. With ``mm_dtype`` (bf16) the search runs
    with bf16 matmuls and alone decides what a list holds and in which order (its first entry is
    the 1-best of ``nbest=1``); with ``nbest`` > 1 the returned scores are recomputed in fp32
    (:func:`s2s.decode.beam.score_hypotheses`). What bf16 and the batching change in the output:
    docs/precision-and-speed.md ("Batching", "N-best lists"). An empty source translates to one
    empty hypothesis (score 0, finished) without a search, in the stages as in
    `s2s translate-text` (a search would read it as one <pad>)."""
    per_batch = max(1, cfg.batch_size * ROWS_BEAM // beam)
    results: list[list[Hypothesis] | None] = [
        [Hypothesis(tokens=(), score=0.0, finished=True)] if not s else None for s in sources]
    order = sorted((i for i, s in enumerate(sources) if s), key=lambda i: (len(sources[i]), i))
    bar = progress(total=len(order), desc=desc, unit="sent")
    for k in range(0, len(order), per_batch):
        idx = order[k: k + per_batch]
        max_len = max_target_lengths(torch.tensor([len(sources[i]) for i in idx]), cfg)
        b = collate([(sources[i], []) for i in idx], pad=vocab.pad, bos=vocab.bos, eos=vocab.eos)
        src, src_lengths = b.src.to(device), b.src_lengths.to(device)
        with precision.autocast(device, mm_dtype):
            hyps = beam_search(model, src, src_lengths, beam=beam, bos=vocab.bos, eos=vocab.eos,
                               max_len=max_len.to(device), nbest=nbest,
                               length_penalty=cfg.length_penalty, pad=vocab.pad)
        if mm_dtype is not None and nbest > 1:
            with precision.strict_fp32(device):
                hyps = score_hypotheses(model, src, src_lengths, hyps, bos=vocab.bos,
                                        eos=vocab.eos)
        for i, h in zip(idx, hyps):
            results[i] = h
        bar.update(len(idx))
    bar.close()
    assert all(r is not None for r in results)
    return results  # type: ignore[return-value]
