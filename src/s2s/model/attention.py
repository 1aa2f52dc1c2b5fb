"""An attention encoder-decoder after Bahdanau, Cho and Bengio (2014), "Neural machine translation
by jointly learning to align and translate", with Luong et al.'s (2015) scores as options.

A bidirectional encoder (`model.cell`: lstm, gru or cho_gru, L layers of H units each way) gives
one annotation m_j = [h_j(fwd); h_j(bwd)] per source word (D_m = 2H). At each target step the
previous decoder state's top layer s (the query) scores every annotation through keys
k_j = W_k m_j (H):
    additive (Bahdanau):  e_j = v^T tanh(W_s s + k_j)
    dot (Luong):          e_j = s . k_j
    general (Luong):      e_j = s^T W_a k_j
Padded source positions get e_j = -inf, hence weight exactly 0; a_j = softmax(e)_j and the context
is ctx = sum_j a_j m_j. The context is fed to the decoder with the previous word, and the output
layer sees it too:
    s_t = RNN(s_{t-1}, [E y_{t-1}; ctx_t])
    o_t = tanh(W_out [s_t; ctx_t])    (Bahdanau's maxout layer, as a tanh layer of H units)
    s_0 = tanh(W_init [h_S(fwd); h_1(bwd)]) of the encoder's top layer, every decoder layer.

Dimension letters: see ``s2s.model.lstm``; M = 2H, the annotation size.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from s2s.model import recurrence
from s2s.model.base import in_source_order
from s2s.model.gru import ChoGRU
from s2s.model.lstm import run_padded
from s2s.model.recurrence import linear
from s2s.arch.rnn import RNNConfig
from s2s.model.encdec import EncoderDecoder, start_from_summary
from s2s.model.stacks import make_stack
from s2s.precision import full, recurrent_dtype


@dataclass(frozen=True)
class AttentionState:
    """h, c: (L, N, H), c None for GRUs. memory: (N, S, M) annotations, keys: (N, S, H),
    src_mask: (N, S) True at real source words, weights: (N, S) the last step's attention."""

    h: Tensor
    c: Tensor | None
    memory: Tensor
    keys: Tensor
    src_mask: Tensor
    weights: Tensor

    def select(self, index: Tensor) -> "AttentionState":
        return AttentionState(
            self.h.index_select(1, index),
            None if self.c is None else self.c.index_select(1, index),
            self.memory.index_select(0, index), self.keys.index_select(0, index),
            self.src_mask.index_select(0, index), self.weights.index_select(0, index))


class AttentionEncoderDecoder(EncoderDecoder):
    """Attributes besides EncoderDecoder's:
    encoder: bidirectional nn.LSTM/nn.GRU/ChoGRU, L layers, H each way
    decoder: stack over E + M inputs
    key_proj: (M -> H)   query_proj: (H -> H) and v: (H -> 1) for `additive`, bilinear: (H -> H)
    for `general`   init_proj: (M -> L*H)   out_proj: (H + M -> H); D = H
    """

    def __init__(self, cfg: RNNConfig, *, src_vocab: int, tgt_vocab: int, pad: int):
        super().__init__(cfg, src_vocab=src_vocab, tgt_vocab=tgt_vocab, pad=pad,
                         feature_size=cfg.hidden_size)
        E, H, L = cfg.embed_size, cfg.hidden_size, cfg.num_layers
        if cfg.cell == "cho_gru":
            self.encoder = ChoGRU(E, H, L, bidirectional=True)
        else:  # config refuses `peephole` here
            rnn = {"lstm": nn.LSTM, "gru": nn.GRU}[cfg.cell]
            self.encoder = rnn(E, H, L, batch_first=True, bidirectional=True)
        self.decoder = make_stack(cfg.cell, E + 2 * H, H, L)
        self.key_proj = nn.Linear(2 * H, H, bias=cfg.attention == "additive")
        if cfg.attention == "additive":
            self.query_proj = nn.Linear(H, H, bias=False)
            self.v = nn.Linear(H, 1, bias=False)
        elif cfg.attention == "general":
            self.bilinear = nn.Linear(H, H, bias=False)
        self.init_proj = nn.Linear(2 * H, L * H)
        self.out_proj = nn.Linear(3 * H, H)

    def encode(self, src: Tensor, lengths: Tensor) -> AttentionState:
        x = self.source(src, lengths)  # (N, S, E)
        S = x.shape[1]
        if isinstance(self.encoder, ChoGRU):  # it takes lengths itself
            memory, final = self.encoder(x, lengths=lengths)  # (N, S, M)
        else:
            # off the CPU under autocast: autocast off, the plan's dtype (s2s.precision); on the
            # CPU, bf16 products and fp32 state (run_padded)
            memory, final = run_padded(self.encoder, x, lengths=lengths,
                                       dtype=recurrent_dtype(x))  # (N, S, M)
        h_n = final[0] if isinstance(final, tuple) else final  # (2L, N, H): per layer fwd, bwd
        # the top layer's fwd state after the last word and bwd state after the first: (N, M)
        h, c = start_from_summary(self.init_proj, torch.cat([h_n[-2], h_n[-1]], dim=-1),
                                  self.cfg)  # (L, N, H)
        src_mask = (torch.arange(S, device=x.device)[None, :]
                    < lengths.to(x.device)[:, None])  # (N, S)
        return AttentionState(h, c, memory, self.key_proj(memory), src_mask,
                              src_mask.to(torch.promote_types(memory.dtype, torch.float32))
                              / lengths.to(x.device)[:, None])

    def attend(self, query: Tensor, state: AttentionState) -> tuple[Tensor, Tensor]:
        """query: (N, H) -> context (N, M) and weights (N, S), zero at padded positions."""
        if self.cfg.attention == "additive":
            query = linear(query, self.query_proj.weight)  # (N, H)
            scores = linear(torch.tanh(query[:, None, :] + state.keys), self.v.weight)[..., 0]
        elif self.cfg.attention == "general":
            scores = torch.bmm(state.keys, linear(query, self.bilinear.weight)[:, :, None])[..., 0]
        else:
            scores = torch.bmm(state.keys, query[:, :, None])[..., 0]  # (N, S)
        # fp32 softmax, also under bf16 autocast
        weights = torch.softmax(full(scores).masked_fill(~state.src_mask, float("-inf")), dim=-1)
        return torch.bmm(weights[:, None, :], state.memory)[:, 0], weights  # (N, M), (N, S)

    def step_features(self, prev_tokens: Tensor, state: AttentionState
                      ) -> tuple[Tensor, AttentionState]:
        return self._step(self.tgt_embed(prev_tokens), state)

    def _step(self, emb: Tensor, state: AttentionState) -> tuple[Tensor, AttentionState]:
        """emb: (N, E), the previous target word embedded."""
        context, weights = self.attend(state.h[-1], state)
        x = torch.cat([emb, context], dim=-1)[:, None, :]  # (N, 1, E + M)
        out, (h, c) = self.decoder(x, (state.h, state.c))  # (N, 1, H)
        o = torch.tanh(linear(torch.cat([out[:, 0], context], dim=-1), self.out_proj.weight,
                              self.out_proj.bias))  # (N, H)
        return o, AttentionState(h, c, state.memory, state.keys, state.src_mask, weights)

    def features(self, src: Tensor, src_lengths: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher forcing, one target step at a time (each query is the previous step's
        state): (N, T, H)."""
        return self._teacher_forced(src, src_lengths, tgt_in)[0]

    def teacher_forced(self, src: Tensor, src_lengths: Tensor, tgt_in: Tensor
                       ) -> tuple[Tensor, Tensor]:
        """features (N, T, H) and the attention weights of every step (N, T, S), the source
        axis in the order of `src` as given (un-reversed with `reverse_source`, as the
        Transformer's `cross_attention`): what an alignment figure labels with the source."""
        features, weights = self._teacher_forced(src, src_lengths, tgt_in)
        if self.cfg.reverse_source:
            weights = in_source_order(weights, src_lengths)
        return features, weights

    def _teacher_forced(self, src: Tensor, src_lengths: Tensor, tgt_in: Tensor
                        ) -> tuple[Tensor, Tensor]:
        """features (N, T, H) and the weights (N, T, S) over the positions the encoder read."""
        state = self.encode(src, src_lengths)
        # Every step reads the annotations and keys: in fp32 (a no-op in fp32 runs) each step's
        # product casts them afresh and their gradients add up in fp32, not in bf16
        state = dataclasses.replace(state, memory=full(state.memory), keys=full(state.keys))
        features, weights = [], []
        # one embedding lookup for all steps: a lookup per step would make the backward pass
        # build and add a dense (V, E) gradient per target step
        embedded = self.tgt_embed(tgt_in)  # (N, T, E)
        # the projections of every step share their weights' casts, their gradients summed in
        # fp32 over the steps (s2s.model.recurrence)
        with recurrence.steps(embedded):
            for emb in embedded.unbind(1):  # T x (N, E)
                o, state = self._step(emb, state)
                features.append(o)
                weights.append(state.weights)
        return torch.stack(features, dim=1), torch.stack(weights, dim=1)
