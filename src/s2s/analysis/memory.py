"""How fast does the encoder forget a change? One source word is substituted, and the encoder's
state after it is compared with the state of the unchanged sentence, step by step.

Pure functions on a loaded model and id lists; no I/O, no plotting. The passes are the
instrumented ones of :mod:`s2s.analysis.probes` (``trace_encoder(..., states=True)``), which
record every step's gates and state.

* Substitution (:func:`substitutions`): a word is replaced by another word that the test set uses
  in the same context, a practical stand-in for "the same role" without a tagger. The context of
  position p is the word before it (or the sentence start); its candidates are the `candidates`
  most frequent ordinary words (s2s.analysis.probes.word_table; not <unk>) that follow that
  context at least MIN_COUNT times in the given sources (ties by id; <unk> is no context). A
  position is eligible if its word is one of its context's candidates and there is another;
  per sentence, one eligible position is drawn and its word replaced by another candidate of
  its context, both drawn from a generator seeded with `seed` (so "a man" becomes "a woman",
  "the dog" "the child"; function words swap with function words: "in" -> "on"). Sentences
  without an eligible position are left out.
* Decay (:func:`decay_sums`): at k = 0, 1, ... steps after the step that reads the changed word
  (in the model's reading order), the mean over units of |c' - c| and |h' - h| per layer. Beside
  it, the difference rolled forward through the forget gates alone: d_0 = c'_r - c_r,
  d_k = f_{r+k} * d_{k-1} with f the unchanged run's forget gates; nothing is fed back through
  h, the input gate or the candidate. Where the measured difference lasts longer than the rolled
  one, memory comes back through the input path; where it fades faster, the changed h_{t-1}
  feeds later steps a correction that cancels part of it. A GRU has no cell: its h is rolled
  through its update gate z (h_t = z h_{t-1} + (1 - z) n_t).
* Half-life (:func:`half_life`): the steps after which a curve first falls under half its value
  at k = 0, linearly interpolated between the steps around the crossing; inf if it does not
  within the steps measured.

Means at step k are over the sentences that have a step k after their change.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from s2s.analysis import probes
from s2s.data.vocab import Vocab
from s2s.model.encdec import EncoderDecoder

START = -1  # the context of a sentence's first word
MIN_COUNT = 2  # a word seen once after a context says little about the role it plays there

SUBSTITUTION_RULE = (
    "one word per sentence replaced by another word used in the same context: the context of a "
    "position is the word before it (or the sentence start; <unk> is none); its candidates are the {n} most "
    "frequent ordinary words following it at least twice in the test sources; a position is eligible if its "
    "word is a candidate of its context and another candidate exists; the position and the new "
    "word are drawn uniformly (seeded)")


@dataclass(frozen=True)
class Substitution:
    sentence: int  # index into the given sources
    position: int  # 0-based, in the original word order
    old: int
    new: int


def substitutions(sources: Sequence[Sequence[int]], *, word: Tensor, candidates: int,
                  seed: int = 0, min_count: int = MIN_COUNT) -> list[Substitution]:
    """One substitution per sentence that has an eligible position (the rule of the module
    docstring); word: (V,) bool, the ordinary words (probes.word_table)."""
    ok = word.tolist()
    follow: dict[int, Counter] = {}
    for s in sources:
        for p, w in enumerate(s):
            ctx = s[p - 1] if p else START
            if ok[w] and w != Vocab.unk and ctx != Vocab.unk:
                follow.setdefault(ctx, Counter())[w] += 1
    top = {a: [w for w, k in sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[:candidates]
               if k >= min_count] for a, c in follow.items()}
    rng = np.random.default_rng(seed)
    out = []
    for n, s in enumerate(sources):
        eligible = []
        for p, w in enumerate(s):
            cands = top.get(s[p - 1] if p else START, [])
            if w in cands and len(cands) > 1:
                eligible.append((p, [c for c in cands if c != w]))
        if not eligible:
            continue
        p, others = eligible[int(rng.integers(len(eligible)))]
        out.append(Substitution(n, p, s[p], others[int(rng.integers(len(others)))]))
    return out


@dataclass(frozen=True)
class DecaySums:
    """Sums over sentences, per layer and steps after the change k = 0..K, to be added over
    batches. Attributes:
    dc, dh: (L, K+1) sums of the mean over units of |c' - c| and |h' - h| (dc zeros for a GRU)
    gate_only: (L, K+1) the same for the difference rolled through the gate alone (the forget
                gate on c for an LSTM, the update gate on h for a GRU)
    count: (K+1,) sentences that have step k
    """

    dc: Tensor
    dh: Tensor
    gate_only: Tensor
    count: Tensor

    def __add__(self, other: "DecaySums") -> "DecaySums":
        return DecaySums(self.dc + other.dc, self.dh + other.dh,
                         self.gate_only + other.gate_only, self.count + other.count)


def decay_sums(a: probes.GateTrace, b: probes.GateTrace, changed: Tensor, lengths: Tensor, *,
               steps: int) -> DecaySums:
    """a, b: traces (``states=True``) of the unchanged and the changed sources in reading order;
    changed: (N,) the reading step that reads the changed word; lengths: (N,)."""
    L, N, T, H = a.hiddens.shape
    lstm = a.cells is not None
    rows = torch.arange(N)
    dc = torch.zeros(L, steps + 1, dtype=torch.float64)
    dh, gate_only = torch.zeros_like(dc), torch.zeros_like(dc)
    count = torch.zeros(steps + 1, dtype=torch.long)
    kept = a.cells if lstm else a.hiddens  # what the gate carries: c, or a GRU's h
    other = b.cells if lstm else b.hiddens
    rolled = None  # (L, N, H)
    for k in range(steps + 1):
        t = changed + k  # (N,)
        valid = t < lengths  # (N,)
        if not valid.any():
            break
        tt = t.clamp_max(T - 1)
        v = valid.double()  # (N,)
        if rolled is None:
            rolled = (other[:, rows, tt] - kept[:, rows, tt]).double()  # (L, N, H)
        else:
            rolled = a.forget[:, rows, tt].double() * rolled
        dh[:, k] = ((b.hiddens[:, rows, tt] - a.hiddens[:, rows, tt]).double().abs().mean(-1)
                    * v).sum(-1)
        if lstm:
            dc[:, k] = ((b.cells[:, rows, tt] - a.cells[:, rows, tt]).double().abs().mean(-1)
                        * v).sum(-1)
        gate_only[:, k] = (rolled.abs().mean(-1) * v).sum(-1)
        count[k] = int(valid.sum())
    return DecaySums(dc, dh, gate_only, count)


def memory_decay(model: EncoderDecoder, sources: Sequence[Sequence[int]],
                 subs: Sequence[Substitution], *, pad: int, steps: int,
                 batch_size: int = 64) -> DecaySums:
    """DecaySums of `model`'s encoder over the substitutions `subs` of `sources`."""
    total = None
    for i in range(0, len(subs), batch_size):
        chunk = subs[i:i + batch_size]
        orig = [list(sources[s.sentence]) for s in chunk]
        changed = [list(o) for o in orig]
        for c, s in zip(changed, chunk):
            c[s.position] = s.new
        src, lengths = probes.batch_ids(orig, pad)
        src2, _ = probes.batch_ids(changed, pad)
        ta, _ = probes.trace_encoder(model, src, lengths, states=True)
        tb, _ = probes.trace_encoder(model, src2, lengths, states=True)
        pos = torch.tensor([s.position for s in chunk])
        read = lengths - 1 - pos if model.cfg.reverse_source else pos  # (N,) reading step
        s = decay_sums(ta, tb, read, lengths, steps=steps)
        total = s if total is None else total + s
    if total is None:
        L = model.cfg.num_layers
        z = torch.zeros(L, steps + 1, dtype=torch.float64)
        total = DecaySums(z, z, z, torch.zeros(steps + 1, dtype=torch.long))
    return total


def half_life(curve: Sequence[float]) -> float:
    """Steps after which `curve` (k = 0, 1, ...) first falls under half of curve[0], linearly
    interpolated; inf if it does not, nan if curve[0] is 0 or not finite."""
    y = np.asarray(curve, dtype=float)
    if not len(y) or not math.isfinite(y[0]) or y[0] <= 0:
        return math.nan
    half = 0.5 * y[0]
    for k in range(1, len(y)):
        if not math.isfinite(y[k]):
            break
        if y[k] < half:
            return float(k - 1 + (y[k - 1] - half) / (y[k - 1] - y[k]))
    return math.inf
