"""Rescoring n-best lists with LSTMs: reading Moses n-best lists and scoring their
hypotheses (the library of :mod:`s2s.stages.rescore`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import torch

from s2s.config import Params
from s2s.data.batching import collate
from s2s.data.text import CorpusError
from s2s.data.vocab import Vocab
from s2s.decode.beam import score_sequences
from s2s.io import read_lines
from s2s.progress import progress

log = logging.getLogger("s2s.rescore")


@dataclass(frozen=True)
class Candidate:
    sentence: int
    text: str  # tokenised
    score: float  # the baseline's own score


def read_nbest(path: Path, *, sentences: int) -> list[list[Candidate]]:
    """Moses n-best list -> candidates per sentence; every sentence must have at least one."""
    lists: list[list[Candidate]] = [[] for _ in range(sentences)]
    for n, line in enumerate(read_lines(path), 1):
        fields = line.split(" ||| ")
        if len(fields) < 4:
            raise CorpusError(f"{path}:{n}: expected 'id ||| hypothesis ||| features ||| score' "
                              f"(4 fields), got {len(fields)}")
        try:
            sid, score = int(fields[0]), float(fields[-1])
        except ValueError:
            raise CorpusError(f"{path}:{n}: sentence id and score must be numbers, got "
                              f"{fields[0]!r} and {fields[-1]!r}") from None
        if not 0 <= sid < sentences:
            raise CorpusError(f"{path}:{n}: sentence id {sid} outside 0..{sentences - 1}")
        lists[sid].append(Candidate(sid, fields[1].strip(), score))
    empty = [i for i, c in enumerate(lists) if not c]
    if empty:
        raise CorpusError(f"{path}: no hypotheses for {len(empty)} of {sentences} sentences "
                          f"(first: {empty[0]})")
    return lists


@torch.no_grad()
def lstm_scores(model, cands: list[Candidate], sources: list[list[int]], *, vocab: Vocab,
                src_pad: int, batch_size: int, device: torch.device, desc: str) -> list[float]:
    """Total log-prob (eos included) of every candidate under the model, batched by length."""
    order = sorted(range(len(cands)), key=lambda i: (len(sources[cands[i].sentence]),
                                                     len(cands[i].text.split()), i))
    scores = [0.0] * len(cands)
    bar = progress(total=len(cands), desc=desc, unit="hyp")
    for k in range(0, len(order), batch_size):
        idx = order[k: k + batch_size]
        pairs = [(sources[cands[i].sentence], vocab.encode(cands[i].text)) for i in idx]
        b = collate(pairs, pad=src_pad, bos=vocab.bos, eos=vocab.eos)
        tgt_lengths = torch.tensor([len(t) for _, t in pairs])
        tgt = b.tgt_in[:, 1:]  # (N, T-1): the words without <bos>, padded
        out = score_sequences(model, b.src.to(device), b.src_lengths.to(device), tgt.to(device),
                              tgt_lengths.to(device), bos=vocab.bos, eos=vocab.eos)
        for i, s in zip(idx, out.tolist()):
            scores[i] = s
        bar.update(len(idx))
    bar.close()
    return scores


def nbest_path(params: Params, *, translate_dir: Path, raw_dir: Path) -> Path:
    """The external n-best list of `data.nbest` if the profile names one, else the n-best output
    of the `rescore.baseline` system at its widest beam."""
    if params.data.nbest is not None:
        from s2s.data import sources

        return sources.raw_pair(raw_dir, params.data.nbest.corpus).fr
    system = params.rescore.baseline
    return translate_dir / system / f"beam{max(params.systems[system].beams)}.nbest"
