"""What the trained LSTMs do inside: the paper's Figure 2, forget gates, and gradient reach.

Pure functions on a loaded :class:`~s2s.model.seq2seq.Seq2Seq` and tensors; no I/O, no plotting.

* Figure 2 (§3.8): the encoder's final hidden state of short phrases, projected to 2-D by PCA.
  Phrases come in *meaning groups* (paraphrases of one meaning, e.g. active and passive); two
  phrases of different groups made of the same words are a *word-order swap*. The paper's claim:
  swaps land apart, paraphrases land together.
* Forget gates: the gates recomputed step by step with the model's own weights (an instrumented
  pass, no autograd) over the encoder (reading the source as the model reads it, reversed or not)
  and the decoder (teacher-forced). A unit whose forget gate is f keeps f^n of its cell after n
  steps: its half-life is ln 0.5 / ln f steps.
* Gradient reach: the norm of the gradient of the first target word's loss, -log p(y_1 | source),
  with respect to the embedding of each source word, in the sentence's original word order. The
  paper's argument for reversal (§3.3) is that it puts the first source words next to the first
  target words, so these gradients should reach the first source words better.

Dimension letters: see ``s2s.model.lstm``; G is the number of phrases, P of source positions.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from s2s.data.vocab import SPECIALS, Vocab
from s2s.model.attention import AttentionState
from s2s.model.base import reverse_padded
from s2s.model.cho import ChoState
from s2s.model.gru import ChoGRU
from s2s.model.lstm import PeepholeLSTM, StandardLSTM
from s2s.model.encdec import EncoderDecoder, State
from s2s.model.seq2seq import Seq2Seq
from s2s.model.stacks import StandardGRU

# --- Phrases -------------------------------------------------------------------------------------

# Multi30k image-caption English (the default profile's data): every word is in its training
# vocabulary (min count 2). Each inner tuple is one meaning: an active sentence and its passive.
# Groups 1/2, 3/4 and 5/6 are the same words with subject and object swapped.
MULTI30K_PHRASES: tuple[tuple[str, ...], ...] = (
    ("A man is watching a woman.", "A woman is being watched by a man."),
    ("A woman is watching a man.", "A man is being watched by a woman."),
    ("A dog is chasing a cat.", "A cat is being chased by a dog."),
    ("A cat is chasing a dog.", "A dog is being chased by a cat."),
    ("A boy is pushing a girl.", "A girl is being pushed by a boy."),
    ("A girl is pushing a boy.", "A boy is being pushed by a girl."),
)

# The paper's own phrases (Figure 2), for models trained on WMT'14 news text.
PAPER_PHRASES: tuple[tuple[str, ...], ...] = (
    ("John admires Mary", "John is in love with Mary", "John respects Mary"),
    ("Mary admires John", "Mary is in love with John", "Mary respects John"),
    ("I gave her a card in the garden", "In the garden , I gave her a card",
     "She was given a card by me in the garden"),
    ("She gave me a card in the garden", "In the garden , she gave me a card",
     "I was given a card by her in the garden"),
)


@dataclass(frozen=True)
class Phrase:
    """One phrase as the model sees it. `unk`: its tokens outside the source vocabulary."""

    text: str
    group: int
    tokens: tuple[str, ...]
    ids: tuple[int, ...]
    unk: tuple[str, ...]


GROUP_SEP = "|"


def phrase_groups(phrases: Sequence[str | Sequence[str]]) -> list[tuple[str, ...]]:
    """Meaning groups from a config value. An item is a group of paraphrases: a list of strings,
    or one string with the paraphrases separated by "|" (`analysis.phrases` is a list of
    strings); a string without "|" is a group of its own."""
    groups = [tuple(q.strip() for q in p.split(GROUP_SEP)) if isinstance(p, str)
              else tuple(p) for p in phrases]
    for g in groups:
        if not g or not all(isinstance(p, str) and p.strip() for p in g):
            raise ValueError(f"a phrase group must hold non-empty strings, got {g!r}")
    return groups


def encode_phrases(groups: Sequence[Sequence[str]], vocab: Vocab, tokenize,
                   ) -> list[Phrase]:
    """Tokenise raw phrases with `tokenize` (str -> tokenised str, the prepare stage's source-side
    function) and map them to ids; tokens outside `vocab` become <unk> and are listed."""
    out = []
    for g, group in enumerate(groups):
        for text in group:
            tokens = tuple(tokenize(text).split())
            ids = tuple(vocab.encode(" ".join(tokens)))
            unk = tuple(t for t, i in zip(tokens, ids) if i == vocab.unk)
            out.append(Phrase(text, g, tokens, ids, unk))
    return out


# --- Figure 2: final encoder states and PCA ------------------------------------------------------


def batch_ids(seqs: Sequence[Sequence[int]], pad: int) -> tuple[Tensor, Tensor]:
    """Right-padded (N, S) ids and (N,) lengths; an empty sequence gets one <pad> step."""
    lengths = torch.tensor([max(len(s), 1) for s in seqs])
    src = torch.full((len(seqs), int(lengths.max())), pad, dtype=torch.long)
    for n, s in enumerate(seqs):
        src[n, : len(s)] = torch.tensor(list(s), dtype=torch.long)
    return src, lengths


def encoder_summary(state: State, lengths: Tensor) -> Tensor | None:
    """The encoder's own final state where the decoder starts from a projection of it (its state
    holds tanh(W x), not x): Cho et al.'s summary c, the top encoder layer's final h (N, H); for
    the attention model, its top layer's forward state after the last word beside its backward
    state after the first (N, 2H), what that projection reads. None for seq2seq, whose decoder
    starts from the encoder's states themselves."""
    if isinstance(state, ChoState):
        return state.summary
    if isinstance(state, AttentionState):
        H = state.memory.shape[-1] // 2
        last = (lengths.to(state.memory.device) - 1).clamp(min=0)  # reading order, right-padded
        rows = torch.arange(state.memory.shape[0], device=state.memory.device)
        return torch.cat([state.memory[rows, last, :H], state.memory[:, 0, H:]], dim=-1)
    return None


@torch.no_grad()
def sentence_vectors(model: EncoderDecoder, src: Tensor, lengths: Tensor, *,
                     representation: str = "top") -> Tensor:
    """One vector per sentence from the encoder's final state: "top", the top layer's hidden
    state h (N, H) (the paper's "LSTM hidden states"; the decoder's first prediction reads it),
    for Cho et al.'s and the attention model the encoder's own (:func:`encoder_summary`, not the
    decoder's start computed from it); "all", h of all layers (N, L*H); "state", h and c of all
    layers (N, 2*L*H) (h alone for a GRU). "all" and "state" are the decoder's start for those
    two models, which keep no more of their encoders' final states."""
    state = model.encode(src, lengths)
    N = src.shape[0]
    if representation == "top":
        summary = encoder_summary(state, lengths)
        return state.h[-1] if summary is None else summary  # (N, H) or (N, 2H)
    if representation == "all":
        return state.h.transpose(0, 1).reshape(N, -1)  # (N, L*H)
    if representation == "state":
        hc = state.h if state.c is None else torch.cat([state.h, state.c])  # (2L, N, H)
        return hc.transpose(0, 1).reshape(N, -1)  # (N, 2*L*H)
    raise ValueError(f"unknown representation '{representation}' "
                     "(expected 'top', 'all' or 'state')")


def pca_2d(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first two principal components of the rows of x (G, D): coordinates (G, 2) and the
    share of the total variance each explains (2,). Each axis's sign is fixed so that its
    largest loading is positive: the same vectors always give the same picture."""
    centred = x - x.mean(axis=0, keepdims=True)
    u, s, vt = np.linalg.svd(centred, full_matrices=False)
    k = min(2, len(s))
    signs = np.sign(vt[np.arange(k), np.abs(vt[:k]).argmax(axis=1)])
    signs[signs == 0] = 1
    coords = np.zeros((x.shape[0], 2))
    coords[:, :k] = u[:, :k] * s[:k] * signs
    total = float((s ** 2).sum())
    explained = np.zeros(2)
    if total > 0:
        explained[:k] = s[:k] ** 2 / total
    return coords, explained


def pair_kinds(phrases: Sequence[Phrase]) -> dict[tuple[int, int], str]:
    """Every pair (a, b), a < b: "paraphrase" (same meaning group), "swap" (other groups, the same
    tokens in another order) or "other"."""
    kinds = {}
    for a in range(len(phrases)):
        for b in range(a + 1, len(phrases)):
            pa, pb = phrases[a], phrases[b]
            if pa.group == pb.group:
                kinds[a, b] = "paraphrase"
            elif sorted(pa.tokens) == sorted(pb.tokens):
                kinds[a, b] = "swap"
            else:
                kinds[a, b] = "other"
    return kinds


def phrase_distances(vectors: np.ndarray, phrases: Sequence[Phrase]) -> dict[str, float]:
    """Mean Euclidean distance between paraphrases and between word-order swaps, each divided by
    the mean distance over all pairs (so models of different scales compare), with the standard
    deviation of those relative distances over the pairs of each kind (n - 1; nan under two
    pairs: what the Figure 2 claim's interval rests on), and the share of phrases (of groups
    with two or more) whose nearest neighbour has the same meaning."""
    d = np.linalg.norm(vectors[:, None, :] - vectors[None, :, :], axis=-1)  # (G, G)
    kinds = pair_kinds(phrases)
    mean_all = float(np.mean([d[a, b] for a, b in kinds])) if kinds else float("nan")
    out = {"mean_pair_distance": mean_all}
    spread = {}
    for kind in ("paraphrase", "swap"):
        sel = [d[a, b] for (a, b), k in kinds.items() if k == kind]
        relative = np.array(sel) / mean_all if sel and mean_all > 0 else None
        out[f"{kind}_distance"] = (float(np.mean(sel)) / mean_all if relative is not None
                                   else float("nan"))
        out[f"{kind}_pairs"] = len(sel)
        spread[f"{kind}_sd"] = (float(np.std(relative, ddof=1)) if relative is not None
                                and len(relative) > 1 else float("nan"))
    groups = [p.group for p in phrases]
    eligible = [a for a in range(len(phrases)) if groups.count(groups[a]) > 1]
    hits = 0
    for a in eligible:
        row = d[a].copy()
        row[a] = np.inf
        hits += groups[int(row.argmin())] == groups[a]
    out["nn_same_meaning"] = hits / len(eligible) if eligible else float("nan")
    return {**out, **spread}


# --- Forget gates: an instrumented pass -----------------------------------------------------------


@dataclass(frozen=True)
class GateTrace:
    """An instrumented pass over one LSTM stack (or GRU stack: see :func:`trace_stack`).
    Attributes:
    forget: (L, N, T, H) forget-gate values, 0 at padded steps (a GRU's update gate z)
    mask:   (N, T) true at real steps
    out:    (N, T, H) the top layer's outputs h_t (held at the last real value past the end)
    h, c:   (L, N, H) the final state, each sequence's at its own end (c None for a GRU)
    hiddens, cells: (L, N, T, H) h_t and c_t of every layer and step, held past the end; only
                    with ``states=True`` (else None; cells None for a GRU)
    """

    forget: Tensor
    mask: Tensor
    out: Tensor
    h: Tensor
    c: Tensor | None
    hiddens: Tensor | None = None
    cells: Tensor | None = None


def _layer_weights(stack: nn.Module, k: int) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
    """(W_ih (4H, E_in), W_hh (4H, H), b (4H,), peepholes (3, H) or None) of layer k; gate order
    i, f, g, o in both stacks."""
    if isinstance(stack, StandardLSTM):
        lstm = stack.lstm
        bias = getattr(lstm, f"bias_ih_l{k}") + getattr(lstm, f"bias_hh_l{k}")
        return getattr(lstm, f"weight_ih_l{k}"), getattr(lstm, f"weight_hh_l{k}"), bias, None
    if isinstance(stack, PeepholeLSTM):
        cell = stack.cells[k]
        return cell.weight_ih, cell.weight_hh, cell.bias, cell.peephole
    raise TypeError(f"cannot instrument a {type(stack).__name__}")


@torch.no_grad()
def trace_stack(stack: nn.Module, x: Tensor, lengths: Tensor,
                state: tuple[Tensor, Tensor] | None = None, *, states: bool = False) -> GateTrace:
    """Run `stack` (StandardLSTM or PeepholeLSTM) over x (N, T, E) one step at a time with its own
    weights, recording the forget gates (and with `states`, h_t and c_t). Computes what the
    stack's forward computes (a test holds the final state to it), padding included: past a
    sequence's end its state stops changing. A StandardGRU is traced by :func:`trace_gru`."""
    if isinstance(stack, StandardGRU):
        return trace_gru(stack, x, lengths, None if state is None else state[0], states=states)
    if isinstance(stack, ChoGRU):
        return trace_cho_gru(stack, x, lengths, None if state is None else state[0],
                             states=states)
    N, T, _ = x.shape
    L, H = stack.num_layers, stack.hidden_size
    mask = torch.arange(T, device=x.device)[None, :] < lengths.to(x.device)[:, None]  # (N, T)
    if state is None:
        zeros = x.new_zeros(L, N, H)
        state = (zeros, zeros)
    forget = x.new_zeros(L, N, T, H)
    hs, cs, all_h, all_c = [], [], [], []
    layer_in = x
    for k in range(L):
        w_ih, w_hh, bias, peep = _layer_weights(stack, k)
        gates_x = layer_in @ w_ih.t() + bias  # (N, T, 4H)
        h, c = state[0][k], state[1][k]  # (N, H)
        outs, cells = [], []
        for t in range(T):
            gi, gf, gg, go = (gates_x[:, t] + h @ w_hh.t()).chunk(4, dim=1)  # each (N, H)
            if peep is not None:
                gi, gf = gi + peep[0] * c, gf + peep[1] * c
            f = torch.sigmoid(gf)
            c_new = f * c + torch.sigmoid(gi) * torch.tanh(gg)
            if peep is not None:
                go = go + peep[2] * c_new  # the output peephole sees c_t
            h_new = torch.sigmoid(go) * torch.tanh(c_new)
            m = mask[:, t, None]  # (N, 1)
            h, c = torch.where(m, h_new, h), torch.where(m, c_new, c)
            forget[k, :, t] = f * m
            outs.append(h)
            cells.append(c)
        layer_in = torch.stack(outs, dim=1)  # (N, T, H)
        hs.append(h)
        cs.append(c)
        if states:
            all_h.append(layer_in)
            all_c.append(torch.stack(cells, dim=1))  # (N, T, H)
    return GateTrace(forget, mask, layer_in, torch.stack(hs), torch.stack(cs),
                     torch.stack(all_h) if states else None,
                     torch.stack(all_c) if states else None)


@torch.no_grad()
def _trace_gated(layers, x: Tensor, lengths: Tensor, h0: Tensor | None, hidden: int, *,
                 states: bool) -> GateTrace:
    """Run GRU-like layers over x (N, T, E) one step at a time. `layers`: one function per layer,
    which takes the layer's input (N, T, E_k) and returns step(t, h) -> (candidate n, update z),
    each (N, H); h_t = z_t * h_{t-1} + (1 - z_t) * n_t at real steps, held at padded ones. The
    update gate z, the share of h_{t-1} kept, is recorded as `forget`; `c`, `cells` are None."""
    N, T, _ = x.shape
    L, H = len(layers), hidden
    mask = torch.arange(T, device=x.device)[None, :] < lengths.to(x.device)[:, None]  # (N, T)
    h0 = x.new_zeros(L, N, H) if h0 is None else h0
    update = x.new_zeros(L, N, T, H)
    hs, all_h = [], []
    layer_in = x
    for k, layer in enumerate(layers):
        step = layer(layer_in)
        h = h0[k]
        outs = []
        for t in range(T):
            n, z = step(t, h)
            m = mask[:, t, None]  # (N, 1)
            h = torch.where(m, z * h + (1 - z) * n, h)
            update[k, :, t] = z * m
            outs.append(h)
        layer_in = torch.stack(outs, dim=1)  # (N, T, H)
        hs.append(h)
        if states:
            all_h.append(layer_in)
    return GateTrace(update, mask, layer_in, torch.stack(hs), None,
                     torch.stack(all_h) if states else None, None)


def trace_gru(stack: StandardGRU, x: Tensor, lengths: Tensor, h0: Tensor | None = None, *,
              states: bool = False) -> GateTrace:
    """A StandardGRU over x (N, T, E) one step at a time with nn.GRU's weights and maths
    (s2s.model.stacks.gru_step): n = tanh(W_n x + b_in + r * (W_hn h + b_hn)), h_t = (1 - z_t) *
    n_t + z_t * h_{t-1}. See _trace_gated for what is recorded."""
    gru = stack.gru

    def layer(k: int):
        def start(layer_in: Tensor):
            gx = layer_in @ getattr(gru, f"weight_ih_l{k}").t() + getattr(gru, f"bias_ih_l{k}")
            w_hh, b_hh = getattr(gru, f"weight_hh_l{k}"), getattr(gru, f"bias_hh_l{k}")
            xr, xz, xn = gx.chunk(3, dim=2)  # each (N, T, H)

            def step(t: int, h: Tensor):
                hr, hz, hn = (h @ w_hh.t() + b_hh).chunk(3, dim=1)  # each (N, H)
                r = torch.sigmoid(xr[:, t] + hr)
                z = torch.sigmoid(xz[:, t] + hz)
                return torch.tanh(xn[:, t] + r * hn), z
            return step
        return start

    return _trace_gated([layer(k) for k in range(gru.num_layers)], x, lengths, h0,
                        gru.hidden_size, states=states)


def trace_cho_gru(stack: ChoGRU, x: Tensor, lengths: Tensor, h0: Tensor | None = None, *,
                  states: bool = False) -> GateTrace:
    """A (unidirectional) ChoGRU over x (N, T, E) one step at a time with Cho et al.'s maths
    (s2s.model.gru, their eq. 5-8): r, z = sigma(W x + U h + b), n = tanh(W x + U (r * h) + b),
    h_t = z_t * h_{t-1} + (1 - z_t) * n_t. See _trace_gated for what is recorded."""
    if stack.directions != 1:
        raise ValueError("trace_cho_gru traces a unidirectional ChoGRU")

    def layer(cell):
        def start(layer_in: Tensor):
            gx = layer_in @ cell.weight_ih.t() + cell.bias  # (N, T, 3H)
            xr, xz, xn = gx.chunk(3, dim=2)  # each (N, T, H)
            ur, uz = cell.weight_hh_rz.chunk(2, dim=0)  # (H, H) each

            def step(t: int, h: Tensor):
                r = torch.sigmoid(xr[:, t] + h @ ur.t())
                z = torch.sigmoid(xz[:, t] + h @ uz.t())
                return torch.tanh(xn[:, t] + (r * h) @ cell.weight_hh_n.t()), z
            return step
        return start

    return _trace_gated([layer(c) for c in stack.cells], x, lengths, h0, stack.hidden_size,
                        states=states)


def traceable_stack(stack: nn.Module) -> bool:
    """:func:`trace_stack` can run `stack`: an LSTM stack (nn.LSTM's or peephole), a
    StandardGRU, or a one-directional ChoGRU."""
    return isinstance(stack, (StandardLSTM, PeepholeLSTM, StandardGRU)) or (
        isinstance(stack, ChoGRU) and stack.directions == 1)


def traceable(model: EncoderDecoder) -> bool:
    """The forget-gate pass (:func:`trace_encoder`, :func:`trace_decoder`) runs on `model`: the
    paper's encoder-decoder with LSTM cells (nn.LSTM's or peephole). What the analyses ask is
    the declared capability (``s2s.arch.capable(cfg, "forget_gates")``); tests/test_arch.py holds
    each architecture's declaration to this."""
    return isinstance(model, Seq2Seq) and all(
        isinstance(s, (StandardLSTM, PeepholeLSTM)) for s in (model.encoder, model.decoder))


@torch.no_grad()
def trace_encoder(model: Seq2Seq, src: Tensor, lengths: Tensor, *,
                  states: bool = False) -> tuple[GateTrace, Tensor]:
    """The encoder's gates over src (N, S) in the model's reading order; also returns the ids it
    read, (N, S) (the source reversed for a reversed model, as `model.encode` does). Any model
    whose `encoder` is an LSTM or GRU stack over `src_embed` (seq2seq, cho)."""
    fed = reverse_padded(src, lengths) if model.cfg.reverse_source else src
    return trace_stack(model.encoder, model.src_embed(fed), lengths, states=states), fed


def recurrent_encoder(model: EncoderDecoder) -> bool:
    """:func:`trace_encoder` runs on `model`: a recurrent encoder-decoder (every
    EncoderDecoder holds its encoder stack as `encoder`) whose encoder is a stack
    :func:`trace_stack` can run. What the memory analysis asks is the declared capability
    (``s2s.arch.capable(cfg, "memory")``); tests/test_arch.py holds each architecture's
    declaration to this."""
    return isinstance(model, EncoderDecoder) and traceable_stack(model.encoder)


@torch.no_grad()
def trace_decoder(model: Seq2Seq, state: State, tgt_in: Tensor, lengths: Tensor) -> GateTrace:
    """The decoder's gates, teacher-forced: tgt_in (N, T) = <bos> y_1 .. y_{T-1}, lengths (N,)
    its real steps (len(y) + 1), from the encoder's final State."""
    return trace_stack(model.decoder, model.tgt_embed(tgt_in), lengths, (state.h, state.c))


def boundary_table(vocab: Vocab) -> Tensor:
    """(V,) bool: the word is punctuation (every character a Unicode punctuation, category P*:
    , . ; : ! ? quotes, brackets, dashes): a clause or sentence boundary."""
    return torch.tensor([w not in SPECIALS and bool(w)
                         and all(unicodedata.category(ch).startswith("P") for ch in w)
                         for w in vocab.words])


def word_table(vocab: Vocab) -> Tensor:
    """(V,) bool: an ordinary word (not punctuation, not <pad>/<bos>/<eos>; <unk> is a word)."""
    special = torch.tensor([w in (SPECIALS[0], SPECIALS[2], SPECIALS[3]) for w in vocab.words])
    return ~boundary_table(vocab) & ~special


def step_kinds(tokens: Tensor, mask: Tensor, *, boundary: Tensor, word: Tensor,
               skip_first: bool) -> tuple[Tensor, Tensor]:
    """(boundary steps, inside steps), each (N, T) bool, of a pass that read tokens (N, T);
    boundary, word: the (V,) tables above. `skip_first`: the first step is neither (the encoder's:
    its forget gate multiplies a zero cell, so its value means nothing)."""
    b, i = boundary[tokens] & mask, word[tokens] & mask
    if skip_first:
        b[:, 0] = i[:, 0] = False
    return b, i


@dataclass(frozen=True)
class ForgetStats:
    """Sums over the real steps of one layer, to be added over batches. Attributes:
    hist: (bins,) counts of forget values in equal bins of [0, 1]
    unit_sum, unit_log_sum: (H,) sums of f and of ln f per unit; steps: real steps summed
    boundary_sum, inside_sum: sums of f over (steps, units) at boundary / ordinary-word steps
    boundary_steps, inside_steps: how many steps of each kind
    """

    hist: Tensor
    unit_sum: Tensor
    unit_log_sum: Tensor
    steps: int
    boundary_sum: float
    boundary_steps: int
    inside_sum: float
    inside_steps: int

    def __add__(self, other: "ForgetStats") -> "ForgetStats":
        return ForgetStats(self.hist + other.hist, self.unit_sum + other.unit_sum,
                           self.unit_log_sum + other.unit_log_sum, self.steps + other.steps,
                           self.boundary_sum + other.boundary_sum,
                           self.boundary_steps + other.boundary_steps,
                           self.inside_sum + other.inside_sum,
                           self.inside_steps + other.inside_steps)


def forget_stats(forget: Tensor, mask: Tensor, boundary: Tensor, inside: Tensor, *,
                 bins: int = 50) -> ForgetStats:
    """forget: (N, T, H) one layer's gates; mask, boundary, inside: (N, T) bool (boundary and
    inside are taken within mask)."""
    f = forget.double()
    real = f[mask]  # (steps, H)
    b, i = boundary & mask, inside & mask
    return ForgetStats(
        hist=torch.histc(real.reshape(-1), bins=bins, min=0.0, max=1.0),
        unit_sum=real.sum(0), unit_log_sum=real.clamp_min(1e-30).log().sum(0),
        steps=int(mask.sum()),
        boundary_sum=float(f[b].sum()), boundary_steps=int(b.sum()),
        inside_sum=float(f[i].sum()), inside_steps=int(i.sum()))


def half_life(f: np.ndarray | float) -> np.ndarray:
    """Steps after which a cell multiplied by f at every step keeps half its value: ln 0.5 / ln f
    (inf at f = 1, 0 at f = 0)."""
    f = np.clip(np.asarray(f, dtype=float), 0.0, 1.0)
    with np.errstate(divide="ignore"):
        return np.where(f >= 1.0, np.inf, math.log(0.5) / np.log(f))


# --- Gradient reach ------------------------------------------------------------------------------


def first_word_gradients(model: EncoderDecoder, src: Tensor, lengths: Tensor, first: Tensor, *,
                         bos: int) -> Tensor:
    """(N, S): the L2 norm of d(-log p(y_1 | source)) / d(embedding of source word j), with j in
    the sentence's ORIGINAL order whatever order the model reads it in; 0 at padding.

    src: (N, S) right-padded, lengths: (N,), first: (N,) the first target word y_1. The model's
    own encode and step compute the loss (any architecture); the source embedding's output is
    made the leaf the gradient is taken for. The batch's losses are summed: sentences do not
    interact, so each row is that sentence's own gradient.
    """
    embedded: list[Tensor] = []

    def leaf(module, inputs, out):  # (N, S, E), as the encoder reads it
        out = out.detach().requires_grad_(True)
        embedded.append(out)
        return out

    handle = model.src_embed.register_forward_hook(leaf)
    try:
        with torch.enable_grad():
            state = model.encode(src, lengths)
            logp, _ = model.step(torch.full_like(first, bos), state)  # (N, V)
            loss = -logp.gather(1, first[:, None]).sum()
            grads = torch.autograd.grad(loss, embedded)
    finally:
        handle.remove()
    if len(grads) != 1:
        raise RuntimeError(f"encode embedded the source {len(grads)} times (expected once)")
    norms = grads[0].norm(dim=-1)  # (N, S) in reading order
    # reading position j of a reversed row holds original position len-1-j: the same mirror
    return reverse_padded(norms, lengths) if model.cfg.reverse_source else norms


@dataclass(frozen=True)
class ReachSums:
    """Per original source position (P,): sum of gradient norms, sum of each sentence's share of
    its total norm, and how many sentences have the position. Add over batches."""

    norm_sum: Tensor
    share_sum: Tensor
    count: Tensor

    def __add__(self, other: "ReachSums") -> "ReachSums":
        return ReachSums(self.norm_sum + other.norm_sum, self.share_sum + other.share_sum,
                         self.count + other.count)


def reach_sums(norms: Tensor, lengths: Tensor, *, positions: int) -> ReachSums:
    """norms: (N, S) from :func:`first_word_gradients`; the first `positions` positions kept."""
    N, S = norms.shape
    mask = torch.arange(S)[None, :] < lengths[:, None]  # (N, S)
    norms = norms.double() * mask
    total = norms.sum(1, keepdim=True)  # (N, 1)
    share = torch.where(total > 0, norms / total.clamp_min(1e-300), torch.zeros_like(norms))
    P = positions
    pad = max(0, P - S)

    def keep(t: Tensor) -> Tensor:  # (N, S) -> (P,) summed over sentences
        return nn.functional.pad(t.sum(0), (0, pad))[:P]

    return ReachSums(keep(norms), keep(share), keep(mask.double()).long())
