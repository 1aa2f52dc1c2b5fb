"""Left-to-right beam search (§3.2 of the paper), greedy search, and teacher-forced scoring
(of sequences, and of a search's n-best lists).

All three are pure functions over the inference contract of :mod:`s2s.model.base` (``encode``,
``step``, ``State.select``), which every model keeps.

An :class:`~s2s.decode.ensemble.Ensemble` has the same contract, so everything here decodes
ensembles too. Callers put the model in ``eval()`` mode; the search itself runs under ``no_grad``.

Dimension letters: N sentences, B beam width, V target vocabulary, S source length, T target length.

Length semantics, shared by the three functions: a *step* predicts one token. ``max_len`` bounds the
number of steps, ``<EOS>`` included, so ``len(Hypothesis.tokens) <= max_len`` always: a hypothesis
that takes ``<EOS>`` at step t has t - 1 tokens; one still open after step ``max_len`` is cut there
with ``max_len`` tokens, no ``<EOS>`` and no ``<EOS>`` log-prob in its score, and
``finished=False``. ``min_len`` is the least number of tokens before ``<EOS>``: ``<EOS>`` is masked
at steps t <= min_len.

Banned tokens: ``<BOS>`` is never predicted (it is the decoder's first input, never a training
target, yet a word of the target vocabulary that ``Vocab.decode`` would write out), nor ``pad``
when given. Masking sets their log-probs to -inf after the model's log-softmax and does not
renormalise the rest, so a hypothesis's score stays the model's log-prob of its tokens, the sum
:func:`score_sequences` recomputes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor

__all__ = [
    "DecoderState",
    "DecodableModel",
    "Hypothesis",
    "beam_search",
    "greedy_search",
    "score_sequences",
]


class DecoderState(Protocol):
    def select(self, index: Tensor) -> DecoderState:
        """Rows ``index`` (M,) of this state along the batch dimension."""
        ...


class DecodableModel(Protocol):
    def encode(self, src: Tensor, lengths: Tensor) -> DecoderState: ...

    def step(self, prev_tokens: Tensor, state: DecoderState) -> tuple[Tensor, DecoderState]: ...


@dataclass(frozen=True)
class Hypothesis:
    """One decoded target sentence.

    Attributes:
        tokens: target token ids, without ``<BOS>`` and without ``<EOS>``.
        score: total log-probability of the predicted tokens under the model, ``<EOS>`` included
            when ``finished``. Always the raw log-prob, also when a length penalty ranked it.
        finished: True if the hypothesis ended with ``<EOS>``; False if it was cut at ``max_len``.
    """

    tokens: tuple[int, ...]
    score: float
    finished: bool = True


@torch.no_grad()
def beam_search(
    model: DecodableModel,
    src: Tensor,
    lengths: Tensor,
    *,
    beam: int,
    bos: int,
    eos: int,
    max_len: Tensor | int,
    nbest: int = 1,
    length_penalty: float = 0.0,
    min_len: int = 0,
    pad: int | None = None,
) -> list[list[Hypothesis]]:
    """Batched beam search: the ``nbest`` best hypotheses of each of the N sentences, best first.

    All active sentences are searched together as one batch of (active sentences × B) rows.

    Each step (fairseq's scheme): every open hypothesis is extended by every token; of those
    B × V candidates, the 2B best are taken. A candidate ending in ``<EOS>`` among the B best moves
    to the sentence's finished set; the B best candidates that do not end in ``<EOS>`` form the next
    beam (2B always hold B of them: each open hypothesis has one ``<EOS>`` candidate). At step 1
    only beam 0 is expanded: the other beams start at -inf, so the beam never holds duplicates.
    Candidates of probability 0 (score -inf) never finish and are never returned.

    Stopping rule, per sentence; the sentence stops after the first step at which any holds:

    1. its ``nbest``-th best finished ranking score is >= the best score any open hypothesis could
       still reach: with ``length_penalty=0`` that is the best open log-prob (log-probs only fall
       as a hypothesis grows, so no open hypothesis can overtake the n-best finished ones and
       stopping loses nothing); with ``length_penalty > 0`` it is the best open log-prob divided
       by the penalty at ``max_len`` (a log-prob <= 0 over a larger penalty is larger, so that is
       the bound). With the default ``nbest=1``: its best finished hypothesis beats all open ones.
    2. it has ``max(beam, nbest)`` finished hypotheses (the open ones are dropped, though one of
       them could still have won: the usual beam-search approximation, and what bounds the work);
    3. it has run ``max_len`` steps: its open hypotheses are then added to the finished set as they
       are, with ``finished=False``.

    Finished sentences are removed from the batch (``state.select`` keeps only active rows), so
    the work per step falls as sentences finish. The output does not depend on which other
    sentences share the batch.

    Ranking: by total log-prob when ``length_penalty == 0`` (the paper's rule: no length
    normalisation). When ``length_penalty = alpha > 0``, finished hypotheses are ranked by
    ``score / ((5 + L) / 6) ** alpha`` (GNMT, Wu et al. 2016), L = number of predicted tokens,
    ``<EOS>`` included when finished; the penalty only ranks finished hypotheses, it does not
    change which candidates the beam keeps.

    Ties (equal scores) are broken deterministically: candidates of one step by the earlier
    (better-ranked) parent beam, then by the lower token id; in the returned list, by the
    hypothesis finished at the earlier step, then by that candidate order (cut hypotheses last).
    Beam 1 therefore equals :func:`greedy_search`, whose argmax takes the lowest token id.

    Args:
        model: the inference contract (see the module docstring); ``eval()`` is the caller's job.
        src: (N, S) source token ids, padded. lengths: (N,) source lengths.
        beam: beam width B >= 1.
        bos, eos: token ids of ``<BOS>`` (the first decoder input, never predicted) and ``<EOS>``.
        max_len: most steps per sentence, ``<EOS>`` included: an int, or (N,) per sentence; >= 1.
        nbest: hypotheses returned per sentence, at most: the finished and cut hypotheses the
            search met, which may be fewer (the beam keeps B prefixes a step, so with ``nbest`` >
            ``beam`` the list is not the ``nbest`` best sequences; translate caps it at ``beam``).
        length_penalty: alpha of the GNMT penalty; 0 (the default) is the paper's raw log-prob.
        min_len: ``<EOS>`` is never predicted before ``min_len`` tokens.
        pad: if given, this token id is never predicted.

    Returns:
        N lists of up to ``nbest`` :class:`Hypothesis`, best first.
    """
    _check_search_args(beam=beam, nbest=nbest, length_penalty=length_penalty, min_len=min_len)
    device = src.device
    n_sent = src.size(0)
    if n_sent == 0:
        return []
    max_len = _as_lengths(max_len, n_sent, device)  # (N,)
    width = max(beam, nbest)  # size of the finished set that stops a sentence (rule 2)

    state = model.encode(src, lengths)
    state = state.select(torch.arange(n_sent, device=device).repeat_interleave(beam))  # N*B rows
    active = torch.arange(n_sent, device=device)  # (n,) original ids of the sentences searched
    prev = torch.full((n_sent * beam,), bos, dtype=torch.long, device=device)
    history = torch.empty((n_sent * beam, 0), dtype=torch.long, device=device)  # (n*B, t-1)
    scores = torch.full((n_sent, beam), -math.inf, device=device)  # (n, B) total log-probs
    scores[:, 0] = 0.0  # only beam 0 is expanded at step 1
    best_finished = torch.full((n_sent, nbest), -math.inf, device=device)  # (n, nbest) ranking
    n_finished = torch.zeros(n_sent, dtype=torch.long, device=device)  # (n,)
    found: list[list[tuple[float, Hypothesis]]] = [[] for _ in range(n_sent)]  # (rank score, hyp)

    for t in range(1, int(max_len.max()) + 1):
        lprobs, state = model.step(prev, state)  # (n*B, V)
        if t == 1:
            dtype = torch.promote_types(lprobs.dtype, torch.float32)
            scores, best_finished = scores.to(dtype), best_finished.to(dtype)
        n = active.numel()
        vocab = lprobs.size(1)
        cand = scores.unsqueeze(2) + lprobs.to(scores.dtype).view(n, beam, vocab)  # (n, B, V)
        banned = _banned(bos=bos, eos=eos, pad=pad, mask_eos=t <= min_len)
        cand[:, :, banned] = -math.inf  # in place: cand is ours, lprobs is the model's
        cand = cand.view(n, beam * vocab)  # (n, B*V)
        top_scores, top_index = _topk_stable(cand, min(2 * beam, beam * vocab))  # (n, 2B)
        top_beam = torch.div(top_index, vocab, rounding_mode="floor")  # (n, 2B) parent beam
        top_token = top_index % vocab  # (n, 2B)
        top_eos = top_token == eos  # (n, 2B)
        first_row = torch.arange(n, device=device).unsqueeze(1) * beam  # (n, 1) row of beam 0

        # Candidates that take <EOS> among the B best leave the beam for the finished set.
        finishing = top_eos[:, :beam] & (top_scores[:, :beam] > -math.inf)  # (n, B)
        rank_scores = _rank(top_scores[:, :beam], t, length_penalty)  # (n, B)
        # Unconditional, so that no host read is needed here: with nothing finishing they add
        # zeros and -inf, and leave both as they were.
        n_finished = n_finished + finishing.sum(1)
        fin_rank = rank_scores.masked_fill(~finishing, -math.inf)
        best_finished = torch.cat([best_finished, fin_rank], 1).topk(nbest, dim=1).values

        # The next beam: the B best candidates that do not take <EOS>, in rank order.
        keep = top_eos.to(torch.uint8).argsort(dim=1, stable=True)[:, :beam]  # (n, B) positions
        scores = top_scores.gather(1, keep)  # (n, B), best first
        parent = (first_row + top_beam.gather(1, keep)).view(-1)  # (n*B,) rows of the parents
        token = top_token.gather(1, keep)  # (n, B)
        old_history = history
        history = torch.cat([history[parent], token.view(-1, 1)], 1)  # (n*B, t)

        at_max = max_len[active] == t  # (n,)
        bound = scores[:, 0]  # (n,) best open log-prob
        if length_penalty > 0:
            bound = bound / _penalty(max_len[active].to(bound.dtype), length_penalty)
        done = at_max | (n_finished >= width) | (best_finished[:, -1] >= bound)  # (n,)
        # The step's decisions in one read from the device (each read waits for it).
        any_finishing, any_at_max, all_done, any_done = torch.stack(
            [finishing.any(), at_max.any(), done.all(), done.any()]).tolist()

        if any_finishing:
            sent, col = finishing.nonzero(as_tuple=True)
            rows = (first_row + top_beam[:, :beam])[sent, col]
            _collect(found, sentence=active[sent], tokens=old_history[rows],
                     scores=top_scores[sent, col], rank_scores=rank_scores[sent, col],
                     finished=True)
        if any_at_max:
            cut = at_max.unsqueeze(1) & (scores > -math.inf)  # (n, B)
            sent, col = cut.nonzero(as_tuple=True)
            cut_rank = _rank(scores, t, length_penalty)  # (n, B)
            _collect(found, sentence=active[sent], tokens=history[sent * beam + col],
                     scores=scores[sent, col], rank_scores=cut_rank[sent, col], finished=False)
        if all_done:
            break
        if any_done:
            alive = (~done).nonzero().squeeze(1)  # (n',)
            alive_rows = (alive.unsqueeze(1) * beam + torch.arange(beam, device=device)).view(-1)
            parent, history, token = parent[alive_rows], history[alive_rows], token[alive]
            scores, active = scores[alive], active[alive]
            best_finished, n_finished = best_finished[alive], n_finished[alive]
        state = state.select(parent)  # one select both reorders the beams and drops done sentences
        prev = token.view(-1)

    out = []
    for hyps in found:
        hyps.sort(key=lambda rh: -rh[0])  # stable: equal scores keep the documented order
        out.append([h for _, h in hyps[:nbest]])
    return out


@torch.no_grad()
def greedy_search(
    model: DecodableModel,
    src: Tensor,
    lengths: Tensor,
    *,
    bos: int,
    eos: int,
    max_len: Tensor | int,
    min_len: int = 0,
    pad: int | None = None,
) -> list[Hypothesis]:
    """Greedy decoding: the most likely token at every step (the lowest id among equals).

    A plain reference for :func:`beam_search` (beam 1 must equal it): all N rows step together
    until every sentence took ``<EOS>`` or ran ``max_len`` steps; no rows are removed. Arguments
    and length semantics as in :func:`beam_search`; there is no ``length_penalty``: with a single
    hypothesis it could change nothing. Returns one :class:`Hypothesis` per sentence.
    """
    _check_search_args(beam=1, nbest=1, length_penalty=0.0, min_len=min_len)
    device = src.device
    n_sent = src.size(0)
    if n_sent == 0:
        return []
    max_len = _as_lengths(max_len, n_sent, device)  # (N,)
    state = model.encode(src, lengths)
    prev = torch.full((n_sent,), bos, dtype=torch.long, device=device)
    score = torch.zeros(n_sent, device=device)  # (N,)
    running = torch.ones(n_sent, dtype=torch.bool, device=device)  # (N,)
    finished = torch.zeros(n_sent, dtype=torch.bool, device=device)  # (N,)
    tokens = []  # per step (N,), -1 where the sentence emitted nothing
    for t in range(1, int(max_len.max()) + 1):
        lprobs, state = model.step(prev, state)  # (N, V)
        score = score.to(torch.promote_types(lprobs.dtype, score.dtype))
        lprobs = _mask(lprobs.to(score.dtype), bos=bos, eos=eos, pad=pad,
                       mask_eos=t <= min_len)
        # (N,) the largest running sum, as beam 1 ranks its candidates (two log-probs that
        # differ by less than the sum's rounding tie there), first maximum: the lowest token id
        token = (score[:, None] + lprobs).argmax(1)
        score = torch.where(running, score + lprobs.gather(1, token[:, None]).squeeze(1), score)
        took_eos = running & (token == eos)
        finished |= took_eos
        tokens.append(torch.where(running & ~took_eos, token, -1))
        running &= ~took_eos & (t < max_len)
        if not bool(running.any()):
            break
        prev = token
    rows = torch.stack(tokens, 1).tolist()  # (N, T)
    return [
        Hypothesis(tuple(w for w in row if w >= 0), s, f)
        for row, s, f in zip(rows, score.tolist(), finished.tolist())
    ]


@torch.no_grad()
def score_sequences(
    model: DecodableModel,
    src: Tensor,
    lengths: Tensor,
    tgt: Tensor,
    tgt_lengths: Tensor,
    *,
    bos: int,
    eos: int,
    finished: Tensor | None = None,
) -> Tensor:
    """Teacher-forced total log-prob of each given target followed by ``<EOS>``: (N,).
    With ``finished`` (N,) bool, rows where it is False leave ``<EOS>`` out, as the score of a
    hypothesis cut at ``max_len`` does.

    ``tgt`` (N, T) holds target ids without ``<BOS>`` and ``<EOS>``, padded with anything past
    ``tgt_lengths`` (N,). The sum runs over the ``tgt_lengths[i] + 1`` predictions of sentence i in
    time order, as :func:`beam_search` accumulates ``Hypothesis.score``, so a finished hypothesis
    scores the same here (used to rescore n-best lists, §3.6).
    """
    n_sent, width = tgt.shape
    tgt_lengths = tgt_lengths.to(tgt.device)
    position = torch.arange(width + 1, device=tgt.device)  # (T+1,)
    target = torch.full((n_sent, width + 1), eos, dtype=torch.long, device=tgt.device)  # (N, T+1)
    target[:, :width] = torch.where(position[:width] < tgt_lengths[:, None], tgt, eos)
    state = model.encode(src, lengths)
    prev = torch.full((n_sent,), bos, dtype=torch.long, device=tgt.device)
    total = torch.zeros(n_sent, device=tgt.device)  # (N,)
    # a row's steps: its tokens, and its <EOS> where counted (a cut hypothesis has none: one
    # step more would run a Transformer past max_positions when max_len reaches it)
    ends = tgt_lengths + (1 if finished is None else finished.to(tgt_lengths.device).long())
    n_steps = int(ends.max()) if n_sent else 0
    for t in range(n_steps):
        lprobs, state = model.step(prev, state)  # (N, V)
        total = total.to(torch.promote_types(lprobs.dtype, total.dtype))
        lp = lprobs.to(total.dtype).gather(1, target[:, t : t + 1]).squeeze(1)  # (N,)
        counted = t <= tgt_lengths if finished is None else (
            (t < tgt_lengths) | ((t == tgt_lengths) & finished))
        total = total + torch.where(counted, lp, 0.0)  # where: padding's -inf * 0 is nan
        prev = target[:, t]
    return total


@torch.no_grad()
def score_hypotheses(model: DecodableModel, src: Tensor, lengths: Tensor,
                     hyps: list[list[Hypothesis]], *, bos: int, eos: int
                     ) -> list[list[Hypothesis]]:
    """`hyps`, the n-best lists of the sentences ``src`` (N, S), each hypothesis scored again by
    :func:`score_sequences`, in the lists' order: run in fp32, it gives a bf16 search's lists the
    scores of the model in fp32 (as :func:`s2s.decode.translate.translate` does)."""
    rows = [i for i, hs in enumerate(hyps) for _ in hs]  # the sentence of each hypothesis
    flat = [h for hs in hyps for h in hs]
    if not flat:
        return hyps
    index = torch.tensor(rows, device=src.device)
    width = max(1, max(len(h.tokens) for h in flat))
    tgt = torch.full((len(flat), width), eos, dtype=torch.long)  # past a length: never read
    for r, h in enumerate(flat):
        tgt[r, : len(h.tokens)] = torch.tensor(h.tokens, dtype=torch.long)
    tgt_lengths = torch.tensor([len(h.tokens) for h in flat])
    finished = torch.tensor([h.finished for h in flat])
    scores = score_sequences(model, src.index_select(0, index), lengths.index_select(0, index),
                             tgt.to(src.device), tgt_lengths.to(src.device), bos=bos, eos=eos,
                             finished=finished.to(src.device)).tolist()
    out: list[list[Hypothesis]] = [[] for _ in hyps]
    for i, h, score in zip(rows, flat, scores):
        out[i].append(Hypothesis(h.tokens, score, h.finished))
    return out


def _check_search_args(*, beam: int, nbest: int, length_penalty: float, min_len: int) -> None:
    if beam < 1:
        raise ValueError(f"beam must be >= 1, got {beam}")
    if nbest < 1:
        raise ValueError(f"nbest must be >= 1, got {nbest}")
    if length_penalty < 0:
        raise ValueError(f"length_penalty must be >= 0, got {length_penalty}")
    if min_len < 0:
        raise ValueError(f"min_len must be >= 0, got {min_len}")


def _as_lengths(max_len: Tensor | int, n_sent: int, device: torch.device) -> Tensor:
    """``max_len`` as a (N,) long tensor on ``device``, checked to be >= 1."""
    if isinstance(max_len, Tensor):
        out = max_len.to(device=device, dtype=torch.long)
        if out.shape != (n_sent,):
            raise ValueError(
                f"max_len must be an int or of shape ({n_sent},), got {tuple(out.shape)}")
    else:
        out = torch.full((n_sent,), int(max_len), dtype=torch.long, device=device)
    if int(out.min()) < 1:
        raise ValueError(f"max_len must be >= 1, got {out.tolist()}")
    return out


def _banned(*, bos: int, eos: int, pad: int | None, mask_eos: bool) -> list[int]:
    """Token ids that may not be predicted at this step: ``<BOS>`` always (it is never a target,
    and a hypothesis holding it would be written out as the word ``<bos>``), ``pad`` when given,
    and ``<EOS>`` while ``mask_eos`` (before ``min_len`` tokens)."""
    return [bos] + ([pad] if pad is not None and pad != bos else []) + (
        [eos] if mask_eos else [])


def _mask(lprobs: Tensor, *, bos: int, eos: int, pad: int | None, mask_eos: bool) -> Tensor:
    """Log-probs with the tokens that may not be predicted set to -inf (out of place)."""
    banned = _banned(bos=bos, eos=eos, pad=pad, mask_eos=mask_eos)
    return lprobs.index_fill(1, torch.tensor(banned, device=lprobs.device), -math.inf)


def _penalty(length: Tensor | float, alpha: float) -> Tensor | float:
    """GNMT length penalty ((5 + L) / 6) ** alpha."""
    return ((5 + length) / 6) ** alpha


def _rank(scores: Tensor, length: int, alpha: float) -> Tensor:
    """Ranking score of hypotheses with ``length`` predictions: the log-prob when alpha is 0."""
    return scores if alpha == 0 else scores / _penalty(float(length), alpha)


def _collect(
    found: list[list[tuple[float, Hypothesis]]],
    *,
    sentence: Tensor,
    tokens: Tensor,
    scores: Tensor,
    rank_scores: Tensor,
    finished: bool,
) -> None:
    """Append hypotheses (rows of ``tokens`` (M, L)) to the finished lists of their sentences."""
    # two reads from the device, not four: ids with ids, scores with scores (one dtype each)
    ids = torch.cat([sentence.unsqueeze(1), tokens], 1).tolist()  # (M, 1 + L)
    both = torch.stack([scores, rank_scores], 1).tolist()  # (M, 2)
    for (i, *toks), (s, r) in zip(ids, both):
        found[i].append((r, Hypothesis(tuple(toks), s, finished)))


def _topk_stable(x: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """The k largest entries of each row of ``x`` (n, M): values and indices (n, k), best first.

    Equal values come in index order, lowest first; ``torch.topk`` leaves both which of several
    equal values it returns and their order unspecified. On the CPU the top 2k of each row are
    sorted by (value, index), which is exact unless the value at the window's end equals the
    k-th (more than k ties at the cut: bf16 logits tie often, -inf at step 1 of a wide beam):
    such rows take an exact, slower path. On CUDA (fp32), where that check would wait for the
    device, each entry's value and index are one int64 key, and the top k keys are the answer
    with no check at all.
    """
    if x.device.type == "cuda" and x.dtype == torch.float32:
        return _topk_by_key(x, k)
    n_rows, width = x.shape
    w = min(2 * k, width)
    values, index = x.topk(w, dim=1)  # (n, w): the window, one more than k at least
    index, order = index.sort(dim=1)  # in index order, then stably by value: ties by index
    values = values.gather(1, order)
    values, order = values.sort(dim=1, descending=True, stable=True)
    index = index.gather(1, order)
    # exact where every entry equal to the k-th is inside the window
    short = (values[:, w - 1] == values[:, k - 1] if width > w
             else x.new_zeros(n_rows, dtype=torch.bool))
    values, index = values[:, :k].contiguous(), index[:, :k].contiguous()  # (n, k)
    if bool(short.any()):
        rows = short.nonzero().squeeze(1)
        xs, kth = x[rows], values[rows, k - 1:]  # (r, M), (r, 1)
        tie = xs == kth
        need = k - (xs > kth).sum(1, keepdim=True)  # (r, 1) how many tied entries to take
        take = (xs > kth) | (tie & (tie.cumsum(1) <= need))  # (r, M), exactly k per row
        exact = take.nonzero()[:, 1].view(-1, k)  # (r, k) ascending index per row
        exact_values = xs.gather(1, exact)
        exact_values, order = exact_values.sort(dim=1, descending=True, stable=True)
        index[rows] = exact.gather(1, order)
        values[rows] = exact_values
    return values, index


def _topk_by_key(x: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """_topk_stable of an fp32 ``x`` (n, M) without a host read: each entry's key orders by its
    value, then by its index (lowest first), so the k largest keys are the stable top k."""
    width = x.shape[1]
    bits = (x + 0.0).view(torch.int32).to(torch.int64)  # (+ 0.0: -0.0 becomes +0.0, its equal)
    # the fp32 order as an integer order: negative floats' magnitude bits reversed
    ordered = torch.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)  # (n, M) in [-2^31, 2^31)
    later = torch.arange(width - 1, -1, -1, device=x.device)  # (M,) lower index, larger key
    index = (ordered * (1 << 32) + later).topk(k, dim=1).indices  # (n, k), best first
    return x.gather(1, index), index
