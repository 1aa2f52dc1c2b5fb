"""The RNN encoder-decoder of Cho et al. (2014), "Learning phrase representations using RNN
encoder-decoder for statistical machine translation", §2.2, at this package's sizes.

Unlike Sutskever et al., the encoder's summary c (its top layer's final h) conditions every
decoder step, not only the first:
    s_0 = tanh(W_init c)                   the decoder's initial state, every layer
    s_t = RNN(s_{t-1}, [E y_{t-1}; c])     (GRUs in the paper; `model.cell` picks)
    o_t = tanh(W_out [s_t; c; E y_{t-1}])  (the paper's maxout layer, as a tanh layer of H units)
    p(y_t | y_<t, x) = softmax(proj o_t)

Dimension letters: see ``s2s.model.lstm``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from s2s.arch.rnn import RNNConfig
from s2s.model.encdec import EncoderDecoder, start_from_summary
from s2s.model.stacks import make_stack


@dataclass(frozen=True)
class ChoState:
    """h, c: (L, N, H), c None for GRUs; summary: (N, H), the encoder's c of the paper."""

    h: Tensor
    c: Tensor | None
    summary: Tensor

    def select(self, index: Tensor) -> "ChoState":
        return ChoState(self.h.index_select(1, index),
                        None if self.c is None else self.c.index_select(1, index),
                        self.summary.index_select(0, index))


class ChoEncoderDecoder(EncoderDecoder):
    """Attributes besides EncoderDecoder's:
    encoder: L-layer stack over E inputs    decoder: L-layer stack over E + H inputs
    init_proj: (H -> L*H)    out_proj: (2H + E -> H); D = H
    """

    def __init__(self, cfg: RNNConfig, *, src_vocab: int, tgt_vocab: int, pad: int):
        super().__init__(cfg, src_vocab=src_vocab, tgt_vocab=tgt_vocab, pad=pad,
                         feature_size=cfg.hidden_size)
        E, H, L = cfg.embed_size, cfg.hidden_size, cfg.num_layers
        self.encoder = make_stack(cfg.cell, E, H, L)
        self.decoder = make_stack(cfg.cell, E + H, H, L)
        self.init_proj = nn.Linear(H, L * H)
        self.out_proj = nn.Linear(2 * H + E, H)

    def encode(self, src: Tensor, lengths: Tensor) -> ChoState:
        _, (h_enc, _) = self.encoder(self.source(src, lengths), lengths=lengths)  # (L, N, H)
        summary = h_enc[-1]  # (N, H)
        h, c = start_from_summary(self.init_proj, summary, self.cfg)  # (L, N, H)
        return ChoState(h, c, summary)

    def step_features(self, prev_tokens: Tensor, state: ChoState) -> tuple[Tensor, ChoState]:
        emb = self.tgt_embed(prev_tokens)  # (N, E)
        x = torch.cat([emb, state.summary], dim=-1)[:, None, :]  # (N, 1, E + H)
        out, (h, c) = self.decoder(x, (state.h, state.c))  # (N, 1, H)
        o = torch.tanh(self.out_proj(torch.cat([out[:, 0], state.summary, emb], dim=-1)))
        return o, ChoState(h, c, state.summary)  # o: (N, H)

    def features(self, src: Tensor, src_lengths: Tensor, tgt_in: Tensor) -> Tensor:
        state = self.encode(src, src_lengths)
        emb = self.tgt_embed(tgt_in)  # (N, T, E)
        summary = state.summary[:, None, :].expand(-1, emb.shape[1], -1)  # (N, T, H)
        out, _ = self.decoder(torch.cat([emb, summary], dim=-1), (state.h, state.c))  # (N, T, H)
        return torch.tanh(self.out_proj(torch.cat([out, summary, emb], dim=-1)))  # (N, T, H)
