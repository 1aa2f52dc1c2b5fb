"""The deep LSTM encoder-decoder of Sutskever et al. (2014), §2 and §3.4.

Two separate stacked RNNs: the encoder reads the (optionally reversed) source; its final state of
every layer is the decoder's initial state. The decoder is a conditional language model whose
first input is <bos>; every target ends in <eos>. A full softmax over the target vocabulary.
`model.cell: gru` (torch's nn.GRU) or `cho_gru` (Cho et al.'s, ``s2s.model.gru``) puts GRUs in
both stacks (the state is then h alone). It keeps the inference contract of s2s.model.base, on
the shared base of s2s.model.encdec.

Dimension letters: see ``s2s.model.lstm``.
"""

from __future__ import annotations

from torch import Tensor

from s2s.arch.rnn import RNNConfig
from s2s.model.encdec import EncoderDecoder, State
from s2s.model.stacks import make_stack

__all__ = ["RNNConfig", "Seq2Seq", "State"]


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
