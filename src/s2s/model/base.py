"""What every model of ``s2s.model`` shares: the inference contract, and the helpers all
architectures use.

The inference contract, stated here once, kept by each model and by an ensemble of them (beam
search, rescoring and the analyses use nothing else):
    encode(src (N, S), lengths (N,)) -> State
    step(prev_tokens (N,), State) -> (log-probs (N, V), State)       a new State, never stored
    State.select(index (M,)) -> State                                  rows reordered or repeated
Training reads ``proj(features(src, src_lengths, tgt_in))``: (N, T, D) features, then the softmax
layer, so a loss can fuse the projection with the cross-entropy.

Dimension letters: see ``s2s.model.lstm``.
"""

from __future__ import annotations

import contextlib
import contextvars

import torch
from torch import Tensor, nn

from s2s.precision import full

__all__ = ["Model", "host_lengths", "in_source_order", "on_host", "reverse_padded"]


class Model(nn.Module):
    """The base of every model of the package: what training, decoding, rescoring and
    checkpoints use of it. A subclass sets `cfg` (its architecture's config, s2s.arch) and `proj`
    (the softmax layer, D -> V) and defines ``encode``, ``step``, ``features`` and
    ``init_weights(seed)``, and ``step_features(prev_tokens, State) -> ((N, D), State)``, the
    softmax layer's input: its `step` is ``log_softmax(proj(step_features))`` in fp32, which lets
    an ensemble mix its members' probabilities from their logits (s2s.decode.ensemble)."""

    cfg: object
    proj: nn.Linear

    def encode(self, src: Tensor, lengths: Tensor):
        raise NotImplementedError

    def step(self, prev_tokens: Tensor, state):
        """prev_tokens: (N,) -> log-probs of the next token (N, V), fp32, and the new state."""
        features, state = self.step_features(prev_tokens, state)
        # (full: under bf16 autocast the logits are bf16; the log-softmax is fp32)
        return torch.log_softmax(full(self.proj(features)), dim=-1), state

    def step_features(self, prev_tokens: Tensor, state):
        raise NotImplementedError

    def features(self, src: Tensor, src_lengths: Tensor, tgt_in: Tensor) -> Tensor:
        raise NotImplementedError

    def init_weights(self, seed: int) -> None:
        raise NotImplementedError

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def reverse_padded(src: Tensor, lengths: Tensor) -> Tensor:
    """Reverse the first lengths[n] tokens of each row; padding stays where it is.

    src: (N, S), lengths: (N,). [a b c pad] -> [c b a pad].
    """
    N, S = src.shape
    pos = torch.arange(S, device=src.device).expand(N, S)  # (N, S)
    rev = lengths[:, None] - 1 - pos  # (N, S): the mirrored position inside the sentence
    index = torch.where(rev >= 0, rev, pos)  # padding positions map to themselves
    return src.gather(1, index)


def in_source_order(weights: Tensor, lengths: Tensor) -> Tensor:
    """Weights over the positions a reversed-source encoder read, (N, ..., S), put back in the
    order of the source as given: [w(c) w(b) w(a) pad] -> [w(a) w(b) w(c) pad]. The map is its
    own inverse (encoder position p read source position index[p])."""
    N, S = weights.shape[0], weights.shape[-1]
    index = reverse_padded(torch.arange(S, device=weights.device).expand(N, S),
                           lengths.to(weights.device))  # (N, S)
    index = index.view(N, *(1,) * (weights.dim() - 2), S).expand_as(weights)
    return weights.gather(-1, index)


# (a device tensor of source lengths, its copy on the CPU) of the batch being run
_HOST_LENGTHS: contextvars.ContextVar[tuple[Tensor, Tensor] | None] = contextvars.ContextVar(
    "s2s_host_lengths", default=None)


@contextlib.contextmanager
def host_lengths(lengths: Tensor, cpu_copy: Tensor):
    """Inside: `cpu_copy`, a CPU tensor, holds what `lengths` (that tensor object, on a device)
    holds, so that packing a batch by those lengths (``s2s.model.lstm.run_padded``) reads them
    without waiting for the device (``s2s.data.batching.Batch.src_lengths_cpu``)."""
    token = _HOST_LENGTHS.set((lengths, cpu_copy))
    try:
        yield
    finally:
        _HOST_LENGTHS.reset(token)


def on_host(lengths: Tensor) -> Tensor:
    """`lengths` on the CPU: itself there, the copy :func:`host_lengths` names, else a copy made
    now (which waits for the device)."""
    if lengths.device.type == "cpu":
        return lengths
    known = _HOST_LENGTHS.get()
    if known is not None and known[0] is lengths:
        return known[1]
    return lengths.cpu()
