"""Rescoring n-best lists with LSTMs: reading Moses n-best lists and scoring their
hypotheses (the library of :mod:`s2s.stages.rescore`).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path

import torch

from s2s import arch
from s2s.config import Params
from s2s.data.batching import collate
from s2s.data.text import CorpusError
from s2s.data.vocab import Vocab
from s2s.layout import nbest_file, translation
from s2s.io import read_lines
from s2s.progress import progress

log = logging.getLogger("s2s.rescore")


@dataclass(frozen=True)
class Candidate:
    sentence: int
    text: str  # tokenised
    score: float  # the baseline's own score


def pick(lists: list[list[Candidate]], lstm: list[float], *, weight: float) -> list[str]:
    """Per sentence, the candidate with the highest ``(1 - weight) * baseline score + weight *
    LSTM log-probability`` (`lstm`: one score per candidate, in the lists' order); the first in
    its list wins a tie."""
    flat = [c for cands in lists for c in cands]
    assert len(flat) == len(lstm), (len(flat), len(lstm))
    best: dict[int, tuple[float, str]] = {}
    for c, s in zip(flat, lstm):
        combined = (1 - weight) * c.score + weight * s
        if c.sentence not in best or combined > best[c.sentence][0]:
            best[c.sentence] = (combined, c.text)
    return [best[i][1] for i in range(len(lists))]


def read_nbest(path: Path, *, sentences: int) -> list[list[Candidate]]:
    """Moses n-best list -> candidates per sentence; every sentence must have at least one.

    A line is ``id ||| hypothesis ||| features ||| score``, or that and ``||| alignment``, the
    word alignment Moses adds with ``-print-alignment-info-in-n-best``: the score is the 4th
    field either way (the last field of a 5-field line is the alignment, not a number). Any
    other number of fields is refused, naming the file and line. No hypothesis of ours holds the
    separator: the tokenizer writes ``|||`` as ``| | |`` (and Moses escapes ``|``)."""
    lists: list[list[Candidate]] = [[] for _ in range(sentences)]
    for n, line in enumerate(read_lines(path), 1):
        # an empty last field (an alignment of nothing) loses its space to the line's strip
        fields = (f"{line} " if line.endswith(" |||") else line).split(" ||| ")
        if len(fields) not in (4, 5):
            raise CorpusError(f"{path}:{n}: expected 'id ||| hypothesis ||| features ||| score' "
                              f"(4 fields), got {len(fields)}; only a word alignment may follow "
                              f"the score, as a 5th field")
        try:
            sid, score = int(fields[0]), float(fields[3])
        except ValueError:
            raise CorpusError(f"{path}:{n}: sentence id and score (fields 1 and 4) must be "
                              f"numbers, got {fields[0]!r} and {fields[3]!r}") from None
        if not math.isfinite(score):  # a NaN or inf would decide, or lose, every comparison
            raise CorpusError(f"{path}:{n}: the score must be a finite number, got "
                              f"{fields[3].strip()!r}")
        if not 0 <= sid < sentences:
            raise CorpusError(f"{path}:{n}: sentence id {sid} outside 0..{sentences - 1}")
        lists[sid].append(Candidate(sid, fields[1].strip(), score))
    empty = [i for i, c in enumerate(lists) if not c]
    if empty:
        raise CorpusError(f"{path}: no hypotheses for {len(empty)} of {sentences} sentences "
                          f"(first: {empty[0]})")
    return lists


def check_lengths(lists: list[list[Candidate]], sources: list[list[int]], *, configs,
                  nbest: Path, source: Path) -> None:
    """Refuse, before a model loads, a source or a hypothesis longer than a member of the
    rescorer has positions for (a Transformer's max_positions; a recurrent member has no
    limit): it reads the source, and writes each hypothesis with an <eos>, which a hypothesis
    the baseline's search cut at its length limit does not have (``n`` tokens need ``n + 1``
    positions). Names the line of the source, or the sentence id of the n-best list."""
    limit = arch.max_tokens(configs)
    if limit is None:
        return
    advice = "split the line, or rescore with a recurrent model"
    for i, src in enumerate(sources):
        if len(src) > limit:
            raise ValueError(f"{source}:{i + 1}: {len(src)} tokens: longer than the {limit} "
                             f"positions a member of the rescorer reads (max_positions); "
                             f"{advice}")
    for cands in lists:
        for c in cands:
            n = len(c.text.split())
            if n + 1 > limit:
                raise ValueError(f"{nbest}: sentence {c.sentence}: a hypothesis of {n} tokens "
                                 f"({n + 1} with the <eos> it is scored with): longer than the "
                                 f"{limit} positions a member of the rescorer writes "
                                 f"(max_positions); {advice}")


@torch.no_grad()
def lstm_scores(model, cands: list[Candidate], sources: list[list[int]], *, vocab: Vocab,
                src_pad: int, batch_size: int, device: torch.device, desc: str) -> list[float]:
    """Total log-prob (eos included) of every candidate under the model: the teacher-forced sum
    :func:`s2s.decode.beam.score_sequences` computes, summed in the same time order.

    The hypotheses of an n-best list share their sentence's source and mostly long prefixes, so
    each sentence's list is scored as a prefix tree (:func:`_score_prefix_tree`): its source is
    encoded once, and each distinct prefix is stepped once, for all the hypotheses that share it.
    Sentences
    go into a batch, by source length, while their hypotheses total at most ``batch_size``
    (always at least one sentence, so a step holds at most max(batch_size, longest list) rows)."""
    by_sentence: dict[int, list[int]] = {}
    for i, c in enumerate(cands):
        by_sentence.setdefault(c.sentence, []).append(i)
    order = sorted(by_sentence, key=lambda s: (len(sources[s]), s))
    groups: list[list[int]] = []
    size = 0
    for s in order:
        if groups and size + len(by_sentence[s]) <= batch_size:
            groups[-1].append(s)
            size += len(by_sentence[s])
        else:
            groups.append([s])
            size = len(by_sentence[s])
    scores = [0.0] * len(cands)
    bar = progress(total=len(cands), desc=desc, unit="hyp")
    for group in groups:
        members = [i for s in group for i in by_sentence[s]]
        got = _score_prefix_tree(model, group, [cands[i] for i in members], sources, vocab=vocab,
                                 src_pad=src_pad, device=device)
        for i, s in zip(members, got):
            scores[i] = s
        bar.update(len(members))
    bar.close()
    return scores


def _score_prefix_tree(model, sentences: list[int], cands: list[Candidate],
                       sources: list[list[int]], *, vocab: Vocab, src_pad: int,
                       device: torch.device) -> list[float]:
    """The scores of `cands` (hypotheses of `sentences`), each sentence's hypotheses as one prefix
    tree stepped breadth first, as beam search grows its beams: a node's row steps on its word,
    and each child adds its word's log-prob to its parent's score and takes its parent's state
    (``state.select``). A hypothesis's score is that of its ``<eos>`` leaf."""
    root = {s: n for n, s in enumerate(sentences)}  # sentence -> its root node (and state row)
    word: list[int] = [vocab.bos] * len(sentences)  # node -> the word it steps on; roots: <bos>
    children: list[dict[int, int]] = [{} for _ in sentences]  # node -> {next word: child node}
    leaves = []
    for c in cands:
        node = root[c.sentence]
        for w in vocab.encode(c.text) + [vocab.eos]:
            child = children[node].get(w)
            if child is None:
                child = children[node][w] = len(word)
                word.append(w)
                children.append({})
            node = child
        leaves.append(node)
    batch = collate([(sources[s], []) for s in sentences], pad=src_pad, bos=vocab.bos,
                    eos=vocab.eos)
    state = model.encode(batch.src.to(device), batch.src_lengths.to(device))
    score = torch.zeros(len(word), dtype=torch.float64)  # a node's score, set when it is reached
    totals = torch.zeros(len(sentences), device=device)  # the frontier's running sums
    frontier = list(range(len(sentences)))  # the nodes with children, a state row each
    while frontier:
        prev = torch.tensor([word[n] for n in frontier], device=device)
        lprobs, state = model.step(prev, state)  # (rows, V)
        totals = totals.to(torch.promote_types(lprobs.dtype, totals.dtype))
        rows = [r for r, n in enumerate(frontier) for _ in children[n]]
        kids = [k for n in frontier for k in children[n].values()]
        rows_t = torch.tensor(rows, device=device)
        lp = lprobs[rows_t, torch.tensor([word[k] for k in kids], device=device)]
        reached = totals[rows_t] + lp.to(totals.dtype)  # (children,): as score_sequences sums
        score[torch.tensor(kids)] = reached.double().cpu()
        inner = [j for j, k in enumerate(kids) if children[k]]
        frontier = [kids[j] for j in inner]
        if frontier:
            keep = torch.tensor(inner, device=device)
            state, totals = state.select(rows_t[keep]), reached[keep]
    return [float(score[n]) for n in leaves]


def nbest_path(params: Params, *, translate_dir: Path, raw_dir: Path) -> Path:
    """The external n-best list of `data.nbest` if the profile names one, else the n-best output
    of the `rescore.baseline` system at its widest beam."""
    if params.data.nbest is not None:
        from s2s.data import sources

        return sources.raw_pair(raw_dir, params.data.nbest.corpus).fr
    system = params.rescore.baseline
    return nbest_file(translation(translate_dir, system, params.systems[system].widest_beam))
