"""What every model of ``s2s.model`` shares: the inference contract, and the helpers all
architectures use.

The contract (STYLE.md, convention 4), kept by each model and by an ensemble of them:
    encode(src (N, S), lengths (N,)) -> State
    step(prev_tokens (N,), State) -> (log-probs (N, V), State)       a new State, never stored
    State.select(index (M,)) -> State                                  rows reordered or repeated
Training reads ``proj(features(src, src_lengths, tgt_in))``: (N, T, D) features, then the softmax
layer, so a loss can fuse the projection with the cross-entropy.

Dimension letters: see ``s2s.model.lstm``.
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import Tensor, nn

__all__ = ["Model", "reverse_padded"]


class Model(Protocol):
    """What training, decoding, rescoring and checkpoints use of a model (an ``nn.Module``)."""

    cfg: object  # its architecture's config (s2s.arch)
    proj: nn.Linear  # the softmax layer

    def encode(self, src: Tensor, lengths: Tensor): ...

    def step(self, prev_tokens: Tensor, state): ...

    def features(self, src: Tensor, src_lengths: Tensor, tgt_in: Tensor) -> Tensor: ...

    def init_weights(self, seed: int) -> None: ...


def reverse_padded(src: Tensor, lengths: Tensor) -> Tensor:
    """Reverse the first lengths[n] tokens of each row; padding stays where it is.

    src: (N, S), lengths: (N,). [a b c pad] -> [c b a pad].
    """
    N, S = src.shape
    pos = torch.arange(S, device=src.device).expand(N, S)  # (N, S)
    rev = lengths[:, None] - 1 - pos  # (N, S): the mirrored position inside the sentence
    index = torch.where(rev >= 0, rev, pos)  # padding positions map to themselves
    return src.gather(1, index)
