"""The Transformer encoder-decoder of Vaswani et al. (2017), "Attention is all you need", with
grouped-query (Ainslie et al. 2023) and multi-query (Shazeer 2019) attention as options.

Encoder: token embeddings x sqrt(D) plus positions (sinusoidal, §3.5, or learned), dropout, then
``encoder_layers`` blocks of self-attention and a ReLU feed-forward layer. Decoder: the same over
the target prefix, with causal self-attention, and cross-attention over the encoder's output
after the self-attention of every block. Each sublayer is residual with dropout on its output:
    pre-norm  (`norm: pre`, the default; Xiong et al. 2020):  x = x + drop(f(LN(x))), and one more
              LayerNorm after each stack
    post-norm (`norm: post`, the paper):                       x = LN(x + drop(f(x)))
Attention: softmax(Q K^T / sqrt(K) + mask) V per head, H query heads sharing G key/value heads
(query head i reads key/value head i // (H / G)); dropout on the attention weights in training.
Padded source positions are masked with -inf, so their weight is exactly 0.

It keeps the inference contract of :mod:`s2s.model.base`; its state, TransformerState, holds
every decoder layer's cross-attention keys/values of the source (computed once, at ``encode``)
and the self-attention keys/values of the prefix decoded so far (one position a ``step``).

Mixed precision (``s2s.precision``): under bf16 autocast the products (linear layers, attention)
run in bf16; the residual stream (and the LayerNorm outputs that become it), the softmax of
`cross_attention`'s weights and the log-softmax stay fp32. Caches keep the dtype they were made
in and are cast to the queries' dtype when read.

Dimension letters: N, S, T, V, L as in ``s2s.model.lstm``, and
    D  d_model        F  ff_size        H  query heads        G  key/value heads (kv_heads)
    K  D / H, the size of one head      P  max_positions

Parameters (weights and biases; ``Transformer.num_parameters``, checked by the tests):
    attention        A  = 2 D^2 + 2 D G K + 2 D + 2 G K        (q, out: D x D; k, v: D x G K)
    feed-forward     F' = 2 D F + F + D
    encoder layer       A + F' + 4 D                            (two LayerNorms)
    decoder layer       2 A + F' + 6 D                          (three LayerNorms)
    total = (V_src + V_tgt) D + L_enc (A + F' + 4 D) + L_dec (2 A + F' + 6 D)
            + V_tgt (D + 1)  [V_tgt only with tie_embeddings]
            + 4 D  [pre-norm: the stacks' final LayerNorms]  + 2 P D  [learned positions]
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from s2s.arch.transformer import TransformerConfig
from s2s.model.base import Model, in_source_order, reverse_padded
from s2s.precision import full

__all__ = ["TransformerConfig", "Transformer", "TransformerState", "Attention"]

# scaled_dot_product_attention takes `enable_gqa` (fewer key/value heads than query heads) from 2.5
_SDPA_GQA = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 5)


@dataclass(frozen=True)
class TransformerState:
    """Decoder state after t target positions.

    memory_keys, memory_values: per decoder layer (N, G, S, K), the cross-attention keys/values
        of the encoder output (fixed for the sentence).
    src_mask: (N, S) True at real source words.
    self_keys, self_values: per decoder layer (N, G, t, K), the self-attention keys/values of
        the t target positions fed so far.
    t: the number of target positions fed so far (the position of the next one).
    """

    memory_keys: tuple[Tensor, ...]
    memory_values: tuple[Tensor, ...]
    src_mask: Tensor
    self_keys: tuple[Tensor, ...]
    self_values: tuple[Tensor, ...]
    t: int

    def select(self, index: Tensor) -> "TransformerState":
        """Rows `index` of the batch (reorder, repeat or drop), as index_select on dim N."""
        def pick(xs: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
            return tuple(x.index_select(0, index) for x in xs)

        return TransformerState(pick(self.memory_keys), pick(self.memory_values),
                                self.src_mask.index_select(0, index), pick(self.self_keys),
                                pick(self.self_values), self.t)


def _sdpa(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, dropout_p: float) -> Tensor:
    """softmax(q k^T / sqrt(K) + mask) v; q: (N, H, T, K), k, v: (N, G, S, K), mask broadcastable
    to (N, H, T, S), True where a query may attend."""
    if k.size(1) != q.size(1):
        if _SDPA_GQA:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p,
                                                   enable_gqa=True)
        rep = q.size(1) // k.size(1)
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)  # (N, H, S, K)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)


class Attention(nn.Module):
    """Multi-head attention with H query heads over G key/value heads (G divides H).

    Attributes: q_proj: (D -> D)   k_proj, v_proj: (D -> G K)   out_proj: (D -> D)
    """

    def __init__(self, d_model: int, heads: int, kv_heads: int, dropout: float):
        super().__init__()
        self.d_model, self.heads, self.kv_heads = d_model, heads, kv_heads
        self.head_size = d_model // heads
        self.dropout = dropout
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, kv_heads * self.head_size)
        self.v_proj = nn.Linear(d_model, kv_heads * self.head_size)
        self.out_proj = nn.Linear(d_model, d_model)

    def keys_values(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """x: (N, S, D) -> keys and values (N, G, S, K)."""
        N, S, _ = x.shape
        k = self.k_proj(x).view(N, S, self.kv_heads, self.head_size).transpose(1, 2)  # (N,G,S,K)
        v = self.v_proj(x).view(N, S, self.kv_heads, self.head_size).transpose(1, 2)  # (N,G,S,K)
        return k, v

    def forward(self, x: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, *,
                need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """Queries from x: (N, T, D) over keys/values (N, G, S, K); mask broadcastable to
        (N, H, T, S), True where a query may attend, or None. Returns (N, T, D) and, with
        `need_weights`, the weights (N, H, T, S) from the formula written out (no dropout)."""
        N, T, _ = x.shape
        q = self.q_proj(x).view(N, T, self.heads, self.head_size).transpose(1, 2)  # (N, H, T, K)
        k, v = k.to(q.dtype), v.to(q.dtype)  # caches made outside this autocast context
        weights = None
        if need_weights:
            rep = self.heads // self.kv_heads
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)  # (N,H,S,K)
            scores = full(q @ k.transpose(-2, -1)) / math.sqrt(self.head_size)  # (N, H, T, S)
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, dim=-1)  # (N, H, T, S)
            out = weights.to(v.dtype) @ v  # (N, H, T, K)
        else:
            out = _sdpa(q, k, v, mask, self.dropout if self.training else 0.0)  # (N, H, T, K)
        out = out.transpose(1, 2).reshape(N, T, self.d_model)  # (N, T, D)
        return self.out_proj(out), weights


class Positions(nn.Module):
    """Position vectors (P, D): the paper's sinusoids (a buffer, not saved: it is a formula)
    PE[p, 2i] = sin(p / 10000^(2i/D)), PE[p, 2i+1] = cos(p / 10000^(2i/D)), or learned."""

    def __init__(self, kind: str, max_positions: int, d_model: int):
        super().__init__()
        self.max_positions = max_positions
        if kind == "learned":
            self.embed = nn.Embedding(max_positions, d_model)
        else:
            self.embed = None
            pos = torch.arange(max_positions, dtype=torch.float64)[:, None]  # (P, 1)
            rate = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
            table = torch.zeros(max_positions, d_model, dtype=torch.float64)  # (P, D)
            table[:, 0::2] = torch.sin(pos * rate)
            table[:, 1::2] = torch.cos(pos * rate[: d_model // 2])
            self.register_buffer("table", table.float(), persistent=False)

    def forward(self, start: int, length: int) -> Tensor:
        """The vectors of positions start .. start + length - 1: (length, D)."""
        if start + length > self.max_positions:
            raise ValueError(f"a sequence of {start + length} positions is longer than "
                             f"max_positions ({self.max_positions}) allows")
        if self.embed is not None:
            return self.embed.weight[start:start + length]
        return self.table[start:start + length]


class _Block(nn.Module):
    """What encoder and decoder layers share: a residual sublayer, pre- or post-norm."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.pre = cfg.norm == "pre"
        self.dropout = cfg.dropout

    def _input(self, x: Tensor, norm: nn.LayerNorm) -> Tensor:
        return norm(x) if self.pre else x

    def _residual(self, x: Tensor, y: Tensor, norm: nn.LayerNorm) -> Tensor:
        """x: the residual stream (fp32 under autocast), y: the sublayer's output."""
        y = F.dropout(y, self.dropout, self.training)
        return x + y if self.pre else full(norm(x + y))


class FeedForward(nn.Module):
    """ReLU(x W1 + b1) W2 + b2. Attributes: ff1: (D -> F)   ff2: (F -> D)"""

    def __init__(self, d_model: int, ff_size: int):
        super().__init__()
        self.ff1 = nn.Linear(d_model, ff_size)
        self.ff2 = nn.Linear(ff_size, d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.ff2(torch.relu(self.ff1(x)))


class EncoderLayer(_Block):
    """Attributes: self_attn, self_norm, ff, ff_norm."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__(cfg)
        D = cfg.d_model
        self.self_attn = Attention(D, cfg.heads, cfg.kv_heads, cfg.dropout)
        self.self_norm = nn.LayerNorm(D)
        self.ff = FeedForward(D, cfg.ff_size)
        self.ff_norm = nn.LayerNorm(D)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        """x: (N, S, D), mask: (N, 1, 1, S) True at real words -> (N, S, D)."""
        h = self._input(x, self.self_norm)
        k, v = self.self_attn.keys_values(h)  # (N, G, S, K)
        x = self._residual(x, self.self_attn(h, k, v, mask)[0], self.self_norm)
        return self._residual(x, self.ff(self._input(x, self.ff_norm)), self.ff_norm)


class DecoderLayer(_Block):
    """Attributes: self_attn, self_norm, cross_attn, cross_norm, ff, ff_norm."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__(cfg)
        D = cfg.d_model
        self.self_attn = Attention(D, cfg.heads, cfg.kv_heads, cfg.dropout)
        self.self_norm = nn.LayerNorm(D)
        self.cross_attn = Attention(D, cfg.heads, cfg.kv_heads, cfg.dropout)
        self.cross_norm = nn.LayerNorm(D)
        self.ff = FeedForward(D, cfg.ff_size)
        self.ff_norm = nn.LayerNorm(D)

    def forward(self, x: Tensor, *, past: tuple[Tensor, Tensor] | None,
                memory: tuple[Tensor, Tensor], src_mask: Tensor, need_weights: bool = False
                ) -> tuple[Tensor, tuple[Tensor, Tensor], Tensor | None]:
        """x: (N, T, D), the target positions t0 .. t0 + T - 1 after the t0 in `past`
        ((N, G, t0, K) keys and values, or None for t0 = 0); memory: cross-attention keys and
        values (N, G, S, K); src_mask: (N, S). Returns x (N, T, D), the self-attention keys and
        values of all t0 + T positions (N, G, t0 + T, K), and with `need_weights` the
        cross-attention weights (N, H, T, S)."""
        h = self._input(x, self.self_norm)
        k, v = self.self_attn.keys_values(h)  # (N, G, T, K)
        if past is not None:
            k = torch.cat([past[0].to(k.dtype), k], dim=2)  # (N, G, t0 + T, K)
            v = torch.cat([past[1].to(v.dtype), v], dim=2)
        T, Tk = x.size(1), k.size(2)
        # query i (position t0 + i) sees keys 0 .. t0 + i; one query sees them all
        causal = (None if T == 1 else
                  torch.ones(T, Tk, dtype=torch.bool, device=x.device).tril(Tk - T))  # (T, Tk)
        x = self._residual(x, self.self_attn(h, k, v, causal)[0], self.self_norm)
        y, weights = self.cross_attn(self._input(x, self.cross_norm), *memory,
                                     src_mask[:, None, None, :], need_weights=need_weights)
        x = self._residual(x, y, self.cross_norm)
        x = self._residual(x, self.ff(self._input(x, self.ff_norm)), self.ff_norm)
        return x, (k, v), weights


class Transformer(Model):
    """The Transformer encoder-decoder with the package's model contract.

    Attributes:
        cfg: the TransformerConfig.   pad: the padding id (both vocabularies).
        src_embed: (V_src, D)   tgt_embed: (V_tgt, D)   proj: (D -> V_tgt), its weight the same
            tensor as tgt_embed's with `tie_embeddings`.
        src_positions, tgt_positions: Positions (P, D).
        encoder: L_enc EncoderLayers   decoder: L_dec DecoderLayers
        encoder_norm, decoder_norm: the final LayerNorms of pre-norm stacks (None for post-norm).
    """

    def __init__(self, cfg: TransformerConfig, *, src_vocab: int, tgt_vocab: int, pad: int):
        super().__init__()
        self.cfg = cfg
        self.pad = pad
        D = cfg.d_model
        self.src_embed = nn.Embedding(src_vocab, D, padding_idx=pad)
        self.tgt_embed = nn.Embedding(tgt_vocab, D, padding_idx=pad)
        self.src_positions = Positions(cfg.positions, cfg.max_positions, D)
        self.tgt_positions = Positions(cfg.positions, cfg.max_positions, D)
        self.encoder = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.encoder_layers))
        self.decoder = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.decoder_layers))
        pre = cfg.norm == "pre"
        self.encoder_norm = nn.LayerNorm(D) if pre else None
        self.decoder_norm = nn.LayerNorm(D) if pre else None
        self.proj = nn.Linear(D, tgt_vocab)
        if cfg.tie_embeddings:
            self.proj.weight = self.tgt_embed.weight

    def init_weights(self, seed: int) -> None:
        """From its own generator (the init seed), on the CPU whatever the device: Xavier-uniform
        linear weights (fairseq, tensor2tensor), embeddings (words, learned positions)
        N(0, 1/D), biases 0, LayerNorm gain 1 and bias 0; the padding rows of word embeddings 0.
        A tied weight is initialised once, as an embedding."""
        gen = torch.Generator().manual_seed(seed)
        std = self.cfg.d_model ** -0.5
        done: set[int] = set()

        def put(p: Tensor, values: Tensor) -> None:
            if id(p) not in done:
                p.copy_(values)
                done.add(id(p))

        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, nn.Embedding):
                    put(m.weight, torch.empty(m.weight.shape).normal_(0.0, std, generator=gen))
                elif isinstance(m, nn.Linear):
                    fan_out, fan_in = m.weight.shape
                    bound = math.sqrt(6.0 / (fan_in + fan_out))
                    put(m.weight, torch.empty(m.weight.shape).uniform_(-bound, bound,
                                                                       generator=gen))
                    put(m.bias, torch.zeros(m.bias.shape))
                elif isinstance(m, nn.LayerNorm):
                    put(m.weight, torch.ones(m.weight.shape))
                    put(m.bias, torch.zeros(m.bias.shape))
            assert done == {id(p) for p in self.parameters()}, "a parameter has no init rule"
            self.src_embed.weight[self.pad].zero_()
            self.tgt_embed.weight[self.pad].zero_()

    def _embed(self, embed: nn.Embedding, positions: Positions, tokens: Tensor, start: int
               ) -> Tensor:
        """tokens: (N, T) at positions start .. -> (N, T, D) embedded, scaled, with positions."""
        x = embed(tokens) * math.sqrt(self.cfg.d_model) + positions(start, tokens.size(1))
        return F.dropout(x, self.cfg.dropout, self.training)

    def _memory(self, src: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """The encoder's output (N, S, D) and the source mask (N, S), True at real words."""
        lengths = lengths.to(src.device)
        if self.cfg.reverse_source:
            src = reverse_padded(src, lengths)
        src_mask = torch.arange(src.size(1), device=src.device) < lengths[:, None]  # (N, S)
        x = self._embed(self.src_embed, self.src_positions, src, 0)  # (N, S, D)
        mask = src_mask[:, None, None, :]  # (N, 1, 1, S)
        for layer in self.encoder:
            x = layer(x, mask)
        return (x if self.encoder_norm is None else full(self.encoder_norm(x))), src_mask

    def _decoded(self, x: Tensor) -> Tensor:
        return x if self.decoder_norm is None else full(self.decoder_norm(x))

    def encode(self, src: Tensor, lengths: Tensor) -> TransformerState:
        """src: (N, S) right-padded source ids, lengths: (N,) -> the decoder's initial state."""
        memory, src_mask = self._memory(src, lengths)
        kv = [layer.cross_attn.keys_values(memory) for layer in self.decoder]  # (N, G, S, K)
        N, G, K = src.size(0), self.cfg.kv_heads, self.cfg.d_model // self.cfg.heads
        empty = tuple(k.new_empty(N, G, 0, K) for k, _ in kv)  # (N, G, 0, K)
        return TransformerState(tuple(k for k, _ in kv), tuple(v for _, v in kv), src_mask,
                                empty, empty, 0)

    def step_features(self, prev_tokens: Tensor, state: TransformerState
                      ) -> tuple[Tensor, TransformerState]:
        """prev_tokens: (N,) -> the softmax layer's input for the next position (N, D) and the
        new state (the old one is left as it was)."""
        x = self._embed(self.tgt_embed, self.tgt_positions, prev_tokens[:, None], state.t)
        keys, values = [], []
        for i, layer in enumerate(self.decoder):
            x, (k, v), _ = layer(x, past=(state.self_keys[i], state.self_values[i]),
                                 memory=(state.memory_keys[i], state.memory_values[i]),
                                 src_mask=state.src_mask)  # x: (N, 1, D)
            keys.append(k)
            values.append(v)
        return self._decoded(x)[:, 0], replace(state, self_keys=tuple(keys),
                                               self_values=tuple(values), t=state.t + 1)

    def _teacher_forced(self, src: Tensor, src_lengths: Tensor, tgt_in: Tensor, *,
                        need_weights: bool) -> tuple[Tensor, list[Tensor | None]]:
        memory, src_mask = self._memory(src, src_lengths)
        x = self._embed(self.tgt_embed, self.tgt_positions, tgt_in, 0)  # (N, T, D)
        weights = []
        for layer in self.decoder:
            x, _, w = layer(x, past=None, memory=layer.cross_attn.keys_values(memory),
                            src_mask=src_mask, need_weights=need_weights)
            weights.append(w)
        return self._decoded(x), weights

    def features(self, src: Tensor, src_lengths: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher forcing up to the softmax layer. tgt_in: (N, T) = <bos> y_1 .. y_{T-1}.
        Returns (N, T, D)."""
        return self._teacher_forced(src, src_lengths, tgt_in, need_weights=False)[0]

    def forward(self, src: Tensor, src_lengths: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher forcing: logits (N, T, V)."""
        return self.proj(self.features(src, src_lengths, tgt_in))

    @torch.no_grad()
    def cross_attention(self, src: Tensor, src_lengths: Tensor, tgt_in: Tensor) -> Tensor:
        """Every decoder layer's cross-attention weights under teacher forcing, in eval mode
        (no dropout), from the formula written out: (N, L_dec, H, T, S). The source axis is in
        the order of `src` as given (un-reversed with `reverse_source`); padded positions have
        weight exactly 0. For alignment figures: slower than the model's own attention."""
        was_training = self.training
        self.eval()
        try:
            _, weights = self._teacher_forced(src, src_lengths, tgt_in, need_weights=True)
        finally:
            self.train(was_training)
        w = torch.stack(weights, dim=1)  # (N, L, H, T, S), the encoder's source order
        return in_source_order(w, src_lengths) if self.cfg.reverse_source else w

    def describe(self) -> str:
        """One line for a report: the config's own description."""
        return self.cfg.describe()
