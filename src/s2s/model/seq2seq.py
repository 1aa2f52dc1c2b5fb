"""The deep LSTM encoder-decoder of Sutskever et al. (2014), §2 and §3.4, and what the encoder-
decoders of this package share.

Two separate stacked RNNs: the encoder reads the (optionally reversed) source; its final state of
every layer is the decoder's initial state. The decoder is a conditional language model whose
first input is <bos>; every target ends in <eos>. A full softmax over the target vocabulary.
`model.cell: gru` (torch's nn.GRU) or `cho_gru` (Cho et al.'s, ``s2s.model.gru``) puts GRUs in
both stacks (the state is then h alone).

Inference contract (used by beam search, ensembles and rescoring; no state is kept on modules):
    encode(src, lengths) -> State
    step(prev_tokens, State) -> (log_probs, State)
    State.select(index) -> State
Training uses `features(src, src_lengths, tgt_in)`, the (N, T, D) inputs of the softmax layer
`proj`, so a loss can fuse the projection with the cross-entropy.

Dimension letters: see ``s2s.model.lstm``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

import torch
from torch import Tensor, nn

from s2s.config import rng
from s2s.model.lstm import set_forget_bias
from s2s.model.stacks import GRU_CELLS, make_stack
from s2s.precision import full


# The cells in words (the models table).
CELL_WORDS = {"lstm": "LSTM", "peephole": "peephole LSTM",
              "gru": "GRU (PyTorch's form: reset gate after the recurrent product)",
              "cho_gru": "GRU (Cho et al.'s form: reset gate before the recurrent product)"}


@dataclass(frozen=True)
class RNNConfig:
    """Architecture of one recurrent encoder-decoder: the paper's (`seq2seq`), Cho et al.'s
    (`cho`) or Bahdanau et al.'s (`attention`). Trained by the paper's recipe (params `train`)."""

    # seq2seq: the paper's model; cho: Cho et al. 2014 (the summary feeds every decoder step);
    # attention: Bahdanau et al. 2014 (bidirectional encoder, attention over its annotations).
    arch: Literal["seq2seq", "cho", "attention"] = "seq2seq"
    # peephole: seq2seq only; gru: torch's nn.GRU (reset gate after the recurrent product);
    # cho_gru: Cho et al.'s eqs. 5-8 (reset gate before it)
    cell: Literal["lstm", "peephole", "gru", "cho_gru"] = "lstm"
    attention: Literal["additive", "dot", "general"] = "additive"  # the score, for `attention`
    num_layers: int = field(default=4, metadata=rng(1))
    hidden_size: int = field(default=1000, metadata=rng(1))
    embed_size: int = field(default=1000, metadata=rng(1))
    init_range: float = field(default=0.08, metadata=rng(0.0, lo_open=True))  # uniform init
    reverse_source: bool = False
    init_seed: int = field(default=1, metadata=rng(0))
    order_seed: int = field(default=1, metadata=rng(0))
    # The LSTM forget gates' bias after the uniform init, in every LSTM layer (nn.LSTM: b_ih's
    # forget chunk, b_hh's forget chunk 0); 0.0 leaves the paper's uniform init untouched.
    forget_bias: float = 0.0

    # Fields added after checkpoints existed: a config record leaves each out while it holds its
    # default (s2s.model.config_record), so old checkpoints and fingerprints stay what they were.
    LATER_FIELDS: ClassVar[tuple[str, ...]] = ("forget_bias",)

    def __post_init__(self):
        if self.forget_bias != 0.0 and self.cell not in ("lstm", "peephole"):
            raise ValueError(f"forget_bias {self.forget_bias} is for LSTM cells; cell "
                             f"'{self.cell}' has no forget gate")

    def describe(self) -> str:
        """What the model is, in words: its cell, and for the cited systems their design."""
        cell = CELL_WORDS[self.cell]
        if self.forget_bias:
            cell += f" (forget-gate bias {self.forget_bias:g})"
        if self.arch == "cho":
            return f"Cho et al.'s encoder-decoder: the summary feeds every step; {cell}"
        if self.arch == "attention":
            return (f"Bahdanau et al.'s attention: bidirectional {cell} encoder, "
                    f"{self.attention} score")
        return cell

    def size(self) -> str:
        """Its size in a few characters: layers x cells."""
        return f"{self.num_layers} x {self.hidden_size}"

    def shape(self) -> dict:
        """The numbers that size it, as the training metrics record them."""
        return {"cell": self.cell, "num_layers": self.num_layers, "hidden_size": self.hidden_size,
                "embed_size": self.embed_size}


@dataclass(frozen=True)
class State:
    """Decoder state. h, c: (L, N, H); c is None for GRUs."""

    h: Tensor
    c: Tensor | None = None

    def select(self, index: Tensor) -> "State":
        """Rows `index` of the batch (reorder, repeat or drop), as index_select on dim N."""
        return State(self.h.index_select(1, index),
                     None if self.c is None else self.c.index_select(1, index))


def reverse_padded(src: Tensor, lengths: Tensor) -> Tensor:
    """Reverse the first lengths[n] tokens of each row; padding stays where it is.

    src: (N, S), lengths: (N,). [a b c pad] -> [c b a pad].
    """
    N, S = src.shape
    pos = torch.arange(S, device=src.device).expand(N, S)  # (N, S)
    rev = lengths[:, None] - 1 - pos  # (N, S): the mirrored position inside the sentence
    index = torch.where(rev >= 0, rev, pos)  # padding positions map to themselves
    return src.gather(1, index)


def start_from_summary(init_proj: nn.Linear, summary: Tensor, cfg: RNNConfig
                       ) -> tuple[Tensor, Tensor | None]:
    """The decoder's initial (h, c) from an encoder summary (N, D), as Cho et al. and Bahdanau et
    al. start theirs: h = tanh(init_proj(summary)) (D -> L*H) in every layer, c = 0 (None for
    GRUs). Returns (L, N, H) tensors."""
    N, L, H = summary.shape[0], cfg.num_layers, cfg.hidden_size
    # (.float(): the state is fp32 also under bf16 autocast)
    h = torch.tanh(full(init_proj(summary))).view(N, L, H).transpose(0, 1).contiguous()
    return h, None if cfg.cell in GRU_CELLS else torch.zeros_like(h)


class EncoderDecoder(nn.Module):
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

    def step(self, prev_tokens: Tensor, state):
        """prev_tokens: (N,) -> log-probs of the next token (N, V) and the new state."""
        features, state = self.step_features(prev_tokens, state)
        # (.float(): under bf16 autocast the logits are bf16; the log-softmax is fp32)
        return torch.log_softmax(full(self.proj(features)), dim=-1), state

    def forward(self, src: Tensor, src_lengths: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher forcing. tgt_in: (N, T) = <bos> y_1 .. y_{T-1}. Returns logits (N, T, V)."""
        return self.proj(self.features(src, src_lengths, tgt_in))

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


class Seq2Seq(EncoderDecoder):
    """The paper's encoder-decoder. Attributes besides EncoderDecoder's:
    encoder, decoder: L-layer stacks of H cells (peephole, nn.LSTM, nn.GRU or ChoGRU); D = H.
    """

    def __init__(self, cfg: RNNConfig, *, src_vocab: int, tgt_vocab: int, pad: int):
        super().__init__(cfg, src_vocab=src_vocab, tgt_vocab=tgt_vocab, pad=pad,
                         feature_size=cfg.hidden_size)
        self.encoder = make_stack(cfg.cell, cfg.embed_size, cfg.hidden_size, cfg.num_layers)
        self.decoder = make_stack(cfg.cell, cfg.embed_size, cfg.hidden_size, cfg.num_layers)

    def encode(self, src: Tensor, lengths: Tensor) -> State:
        """src: (N, S) right-padded source ids, lengths: (N,) -> the decoder's initial State."""
        _, (h, c) = self.encoder(self.source(src, lengths), lengths=lengths)  # (L, N, H) each
        return State(h, c)

    def step_features(self, prev_tokens: Tensor, state: State) -> tuple[Tensor, State]:
        x = self.tgt_embed(prev_tokens)[:, None, :]  # (N, 1, E)
        out, (h, c) = self.decoder(x, (state.h, state.c))  # out: (N, 1, H)
        return out[:, 0], State(h, c)

    def features(self, src: Tensor, src_lengths: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher forcing up to the softmax layer: (N, T, H)."""
        state = self.encode(src, src_lengths)
        out, _ = self.decoder(self.tgt_embed(tgt_in), (state.h, state.c))  # (N, T, H)
        return out
