"""The models: `build_model` turns a ModelConfig into the encoder-decoder its `arch` names."""

from __future__ import annotations

from s2s.config import ModelConfig
from s2s.model.attention import AttentionEncoderDecoder
from s2s.model.cho import ChoEncoderDecoder
from s2s.model.seq2seq import EncoderDecoder, Seq2Seq

ARCHITECTURES = {"seq2seq": Seq2Seq, "cho": ChoEncoderDecoder, "attention": AttentionEncoderDecoder}


def build_model(cfg: ModelConfig, *, src_vocab: int, tgt_vocab: int, pad: int) -> EncoderDecoder:
    """The untrained model of `cfg` (call init_weights(seed) for the paper's initialisation)."""
    return ARCHITECTURES[cfg.arch](cfg, src_vocab=src_vocab, tgt_vocab=tgt_vocab, pad=pad)
