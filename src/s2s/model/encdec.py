"""What the recurrent encoder-decoders of this package share (the paper's, Cho et al.'s, Bahdanau
et al.'s): the decoder State of a stack of RNNs, embeddings, the softmax layer, the paper's
initialisation, teacher forcing as ``proj(features(...))`` and ``step`` as ``proj`` over
``step_features``. The inference contract they keep is s2s.model.base's.

Dimension letters: see ``s2s.model.lstm``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from s2s.arch import GRU_CELLS
from s2s.arch.rnn import RNNConfig
from s2s.model.base import Model, reverse_padded
from s2s.model.lstm import set_forget_bias
from s2s.precision import full


@dataclass(frozen=True)
class State:
    """Decoder state. h, c: (L, N, H); c is None for GRUs."""

    h: Tensor
    c: Tensor | None = None

    def select(self, index: Tensor) -> "State":
        """Rows `index` of the batch (reorder, repeat or drop), as index_select on dim N."""
        return State(self.h.index_select(1, index),
                     None if self.c is None else self.c.index_select(1, index))


def start_from_summary(init_proj: nn.Linear, summary: Tensor, cfg: RNNConfig
                       ) -> tuple[Tensor, Tensor | None]:
    """The decoder's initial (h, c) from an encoder summary (N, D), as Cho et al. and Bahdanau et
    al. start theirs: h = tanh(init_proj(summary)) (D -> L*H) in every layer, c = 0 (None for
    GRUs). Returns (L, N, H) tensors."""
    N, L, H = summary.shape[0], cfg.num_layers, cfg.hidden_size
    # (.float(): the state is fp32 also under bf16 autocast)
    h = torch.tanh(full(init_proj(summary))).view(N, L, H).transpose(0, 1).contiguous()
    return h, None if cfg.cell in GRU_CELLS else torch.zeros_like(h)


class EncoderDecoder(Model):
    """What every model here shares: embeddings, the softmax layer, the paper's initialisation,
    teacher forcing as `proj(features(...))`, and `step` as `proj` over `step_features`.

    Attributes: src_embed: (V_src, E)   tgt_embed: (V_tgt, E)   proj: (D -> V_tgt)
    Subclasses define encode(src, lengths), features(src, src_lengths, tgt_in) and
    step_features(prev_tokens, state) -> ((N, D), state).
    """

    def __init__(self, cfg: RNNConfig, *, src_vocab: int, tgt_vocab: int, pad: int,
                 feature_size: int):
        super().__init__()
        self.cfg = cfg
        self.pad = pad
        self.src_embed = nn.Embedding(src_vocab, cfg.embed_size, padding_idx=pad)
        self.tgt_embed = nn.Embedding(tgt_vocab, cfg.embed_size, padding_idx=pad)
        self.proj = nn.Linear(feature_size, tgt_vocab)

    def init_weights(self, seed: int) -> None:
        """Uniform in [-init_range, init_range] (§3.4), from its own generator: the init seed;
        then, if `forget_bias` is set, the forget gates' biases of every LSTM layer."""
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.empty_like(p, device="cpu").uniform_(
                    -self.cfg.init_range, self.cfg.init_range, generator=gen))
            self.src_embed.weight[self.pad].zero_()
            self.tgt_embed.weight[self.pad].zero_()
        if self.cfg.forget_bias:
            set_forget_bias(self, self.cfg.forget_bias)

    def source(self, src: Tensor, lengths: Tensor) -> Tensor:
        """The embedded source as the encoder reads it, reversed if `reverse_source`: (N, S, E)."""
        if self.cfg.reverse_source:
            src = reverse_padded(src, lengths)
        return self.src_embed(src)

    def forward(self, src: Tensor, src_lengths: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher forcing. tgt_in: (N, T) = <bos> y_1 .. y_{T-1}. Returns logits (N, T, V)."""
        return self.proj(self.features(src, src_lengths, tgt_in))
