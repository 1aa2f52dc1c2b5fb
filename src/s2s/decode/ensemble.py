"""Ensemble decoding (§3.2, Table 1): several models behind the single-model inference contract.

An :class:`Ensemble` has ``encode``/``step`` and its state has ``select``, so
:func:`~s2s.decode.beam.beam_search`, ``greedy_search`` and ``score_sequences`` take it unchanged.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from s2s.decode.beam import DecodableModel, DecoderState
from s2s.model.base import Model
from s2s.precision import full

__all__ = ["Combine", "Ensemble", "EnsembleState"]

Combine = Literal["mean_prob", "mean_logprob"]


@dataclass(frozen=True)
class EnsembleState:
    """The members' decoder states, in member order.

    Attributes:
        members: one state per member, each with the same batch rows (N rows).
    """

    members: tuple[DecoderState, ...]

    def select(self, index: Tensor) -> EnsembleState:
        """Rows ``index`` (M,) of every member's state."""
        return EnsembleState(tuple(state.select(index) for state in self.members))


class Ensemble:
    """K models decoding as one: each step combines their next-token distributions.

    ``combine`` (the paper says only that an ensemble "averages the predictions"; it does not
    say how):

    - ``"mean_prob"`` (default): log of the arithmetic mean of the members' probabilities,
      ``logsumexp_k(log p_k) - log K``. This is what averaging the predictions of an ensemble
      means: the mixture is itself a proper distribution, needs no renormalisation, and a
      token that one member rules out keeps the probability the others give it.
    - ``"mean_logprob"``: mean of the members' log-probs renormalised with ``log_softmax``
      (a product of experts, the geometric mean): a token any member gives probability 0 gets 0.

    Attributes:
        models: the K members, each with the inference contract; all share one target vocabulary.
        combine: how the members' distributions are combined, as above.
    """

    def __init__(self, models: Sequence[DecodableModel], combine: Combine = "mean_prob") -> None:
        if not models:
            raise ValueError("an Ensemble needs at least one model")
        if combine not in ("mean_prob", "mean_logprob"):
            raise ValueError(f"combine must be 'mean_prob' or 'mean_logprob', got {combine!r}")
        self.models = tuple(models)
        self.combine: Combine = combine

    def encode(self, src: Tensor, lengths: Tensor) -> EnsembleState:
        """Every member's encoding of ``src`` (N, S) with ``lengths`` (N,)."""
        return EnsembleState(tuple(model.encode(src, lengths) for model in self.models))

    def step(self, prev_tokens: Tensor, state: EnsembleState) -> tuple[Tensor, EnsembleState]:
        """Combined log-probs (N, V) of the token after ``prev_tokens`` (N,), and the new state."""
        # (on the CPU only: its exact fallback asks the device whether any mean underflowed, a
        # wait for the device at every step off the CPU, where the log-prob path costs the same
        # passes over memory and no wait)
        if (self.combine == "mean_prob" and prev_tokens.device.type == "cpu"
                and all(isinstance(m, Model) for m in self.models)):
            return self._mean_prob_from_logits(prev_tokens, state)
        outputs = [model.step(prev_tokens, s) for model, s in zip(self.models, state.members)]
        lprobs = [lp for lp, _ in outputs]  # K x (N, V)
        if self.combine == "mean_prob":
            # A chain of logaddexp: the same numbers as logsumexp over a stacked (K, N, V)
            # tensor, without the copy and the strided reduction (bench/README.md).
            combined = functools.reduce(torch.logaddexp, lprobs) - math.log(len(lprobs))
        else:
            combined = torch.log_softmax(sum(lprobs) / len(lprobs), dim=-1)  # (N, V)
        return combined, EnsembleState(tuple(s for _, s in outputs))

    def _mean_prob_from_logits(self, prev_tokens: Tensor, state: EnsembleState
                               ) -> tuple[Tensor, EnsembleState]:
        """``mean_prob`` for members that are the package's models (s2s.model.base.Model): the log
        of the summed softmaxes, one softmax and one add per member where the log-prob path
        needs a log-softmax and a logaddexp (exp and log1p of every entry) per member
        (bench/README.md). Where the members' summed probability is
        too small for float precision (below 1e-30: every member gives the token less) it is
        recomputed from the log-probs, so the result equals the log-prob path up to rounding."""
        logits, states = [], []
        total = None
        for model, s in zip(self.models, state.members):
            features, new_state = model.step_features(prev_tokens, s)
            z = full(model.proj(features))  # (N, V), fp32 also under bf16 autocast
            p = torch.softmax(z, dim=-1)
            total = p if total is None else total.add_(p)
            logits.append(z)
            states.append(new_state)
        rows = None
        if bool(total.min() < _TINY):
            rows = (total < _TINY).any(1).nonzero().squeeze(1)  # (r,) rows to redo exactly
        combined = total.log_().sub_(math.log(len(logits)))  # (N, V)
        if rows is not None:
            exact = functools.reduce(torch.logaddexp, [torch.log_softmax(z[rows], dim=-1)
                                                       for z in logits])  # (r, V)
            tiny = combined[rows] < math.log(_TINY) - math.log(len(logits))  # (r, V)
            combined[rows] = torch.where(tiny, exact - math.log(len(logits)), combined[rows])
        return combined, EnsembleState(tuple(states))


_TINY = 1e-30  # float32 keeps full precision down to 1.2e-38; the log of a sum below this
# is recomputed from log-probs (see Ensemble._mean_prob_from_logits)

