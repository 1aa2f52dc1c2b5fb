"""The models: one module per architecture (``seq2seq``, ``cho``, ``attention``, ``transformer``),
each an ``nn.Module`` built from its config (``s2s.arch``), keeping the inference contract of
``s2s.model.base`` (encode / step / State.select), teacher forcing as ``proj(features(...))`` and
``init_weights(seed)`` (its own initialisation), so beam search, ensembles, rescoring and
training take any of them unchanged.

`build_model` imports only the module of the architecture it builds (:mod:`s2s.arch`).
"""

from __future__ import annotations

from s2s.arch import ARCHITECTURES, config_from_dict, config_record

__all__ = ["ARCHITECTURES", "build_model", "config_from_dict", "config_record"]


def build_model(cfg, *, src_vocab: int, tgt_vocab: int, pad: int):
    """The untrained model of `cfg` (call init_weights(seed) for its initialisation)."""
    return ARCHITECTURES[cfg.arch].model(cfg, src_vocab=src_vocab, tgt_vocab=tgt_vocab, pad=pad)
