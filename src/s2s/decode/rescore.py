"""Stage `rescore@<rescorer>`: rescoring a baseline's n-best lists with LSTMs (Table 2).

Reads:  the baseline's n-best list in Moses format (``id ||| hypothesis ||| features ||| score``;
        in the paper profile the LIUM baseline's 1000-best lists, elsewhere the n-best output of the
        system named by `rescore.baseline`), ``<prepared>/test.tok.{en,fr}``, the rescorer's
        checkpoints, params `rescore`.
Writes: ``<out>/<rescorer>.{tok,detok}.fr``: per sentence the hypothesis with the best
        ``(1 - weight) * baseline score + weight * LSTM log-probability`` (weight 0.5: the paper's
        even average). The rescorer ``oracle`` instead writes ``<out>/baseline.*`` (the
        baseline's own 1-best) and ``<out>/oracle.*`` (per sentence, the hypothesis with the best
        sentence-level BLEU against the reference: an upper bound of any rescoring).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from s2s.config import Params
from s2s.data.batching import collate
from s2s.data.text import CorpusError, detokenize
from s2s.data.vocab import Vocab
from s2s.decode.beam import score_sequences
from s2s.decode.translate import load_members
from s2s.io import atomic_write_lines, read_lines
from s2s.progress import progress
from s2s.train import pick_device

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


def main(params: Params, rescorer: str, *, translate_dir: Path, raw_dir: Path,
         prepared_dir: Path, vocab_dir: Path, models_dir: Path, out_dir: Path) -> dict:
    t_start = time.perf_counter()
    nbest = nbest_path(params, translate_dir=translate_dir, raw_dir=raw_dir)
    sources_tok = read_lines(prepared_dir / "test.tok.en")
    lists = read_nbest(nbest, sentences=len(sources_tok))
    n_cands = sum(len(c) for c in lists)

    if rescorer == "oracle":
        from s2s.evaluate.bleu import sentence_bleu_tok

        refs = read_lines(prepared_dir / "test.tok.fr")
        picks = {"baseline": [c[0].text for c in lists],
                 "oracle": [max(c, key=lambda x: sentence_bleu_tok(x.text, refs[i])).text
                            for i, c in enumerate(lists)]}
    else:
        cfg = params.rescore
        if rescorer not in cfg.rescorers:
            raise KeyError(f"{params.source}: no rescorer '{rescorer}' under 'rescore.rescorers' "
                           f"(known: {', '.join(cfg.rescorers)}, or 'oracle')")
        device = pick_device(params.translate.device)
        src_vocab = Vocab.load(vocab_dir / "en.tsv")
        tgt_vocab = Vocab.load(vocab_dir / "fr.tsv")
        model = load_members(cfg.rescorers[rescorer], params=params, models_dir=models_dir,
                             src_vocab=src_vocab, tgt_vocab=tgt_vocab, device=device,
                             combine=params.translate.combine)
        sources = [src_vocab.encode(s) for s in sources_tok]
        flat = [c for cands in lists for c in cands]
        lstm = lstm_scores(model, flat, sources, vocab=tgt_vocab, src_pad=src_vocab.pad,
                           batch_size=cfg.batch_size, device=device, desc=f"rescore {rescorer}")
        combined = [(1 - cfg.weight) * c.score + cfg.weight * s for c, s in zip(flat, lstm)]
        best: dict[int, tuple[float, str]] = {}
        for c, s in zip(flat, combined):
            if c.sentence not in best or s > best[c.sentence][0]:  # first wins a tie
                best[c.sentence] = (s, c.text)
        picks = {rescorer: [best[i][1] for i in range(len(lists))]}

    for name, lines in picks.items():
        atomic_write_lines(out_dir / f"{name}.tok.fr", lines)
        atomic_write_lines(out_dir / f"{name}.detok.fr", [detokenize(s, "fr") for s in lines])
    log.info("%s: %d sentences, %d candidates from %s; wrote %s in %.1fs", rescorer, len(lists),
             n_cands, nbest, ", ".join(f"{out_dir}/{n}.*" for n in picks),
             time.perf_counter() - t_start)
    return {"sentences": len(lists), "candidates": n_cands}
