"""The architectures: each is a config (beside its model, as nanoGPT keeps GPTConfig beside GPT),
a model class and a training recipe; `build_model` turns a config into the model its `arch`
names.

Every model keeps the inference contract of ``s2s.model.seq2seq`` (encode / step / State.select),
teacher forcing as ``proj(features(...))`` and ``init_weights(seed)`` (its own initialisation),
so beam search, ensembles, rescoring and training take any of them unchanged. A new architecture
is a module here and one entry in :data:`ARCHITECTURES`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from s2s.model.attention import AttentionEncoderDecoder
from s2s.model.cho import ChoEncoderDecoder
from s2s.model.seq2seq import EncoderDecoder, RNNConfig, Seq2Seq
from s2s.model.transformer import Transformer, TransformerConfig


@dataclass(frozen=True)
class Architecture:
    """config: its config dataclass; model: the nn.Module built from one; recipe: how its
    papers train it, as overrides of params `train` (empty: the paper's SGD recipe, params
    `train` itself); `models.<name>.train` overrides both."""

    config: type
    model: type
    recipe: Mapping[str, Any] = field(default_factory=dict)


# Vaswani et al. 2017 (§5.3, §5.4): Adam (0.9, 0.98, 1e-9), linear warmup then inverse square
# root decay, label smoothing 0.1 (dropout is the model's: TransformerConfig.dropout). The peak
# learning rate and warmup are fairseq's transformer defaults; small runs set their own.
TRANSFORMER_RECIPE = {"optimizer": "adam", "adam_betas": (0.9, 0.98), "adam_eps": 1e-9,
                      "schedule": "inverse_sqrt", "lr": 5e-4, "warmup_steps": 4000,
                      "label_smoothing": 0.1}

ARCHITECTURES: dict[str, Architecture] = {
    "seq2seq": Architecture(RNNConfig, Seq2Seq),  # the paper's
    "cho": Architecture(RNNConfig, ChoEncoderDecoder),  # Cho et al. 2014
    "attention": Architecture(RNNConfig, AttentionEncoderDecoder),  # Bahdanau et al. 2014
    "transformer": Architecture(TransformerConfig, Transformer, TRANSFORMER_RECIPE),
}


def config_record(cfg) -> dict[str, Any]:
    """`cfg` as checkpoints, fingerprints and exports record it: ``dataclasses.asdict`` without
    the fields added after records existed (its class's LATER_FIELDS) while they hold their
    defaults, so a config that does not use them records as it did before they existed."""
    defaults = {f.name: f.default for f in dataclasses.fields(cfg)}
    later = getattr(type(cfg), "LATER_FIELDS", ())
    return {k: v for k, v in dataclasses.asdict(cfg).items()
            if not (k in later and v == defaults[k])}


def config_from_dict(values: Mapping[str, Any]):
    """A config as a checkpoint records it (:func:`config_record`), of the class its `arch`
    names (configs written before `arch` existed are the paper's); a field the record leaves out
    takes its default."""
    arch = values.get("arch", "seq2seq")
    if arch not in ARCHITECTURES:
        raise ValueError(f"unknown arch {arch!r} (known: {', '.join(ARCHITECTURES)})")
    return ARCHITECTURES[arch].config(**values)


def build_model(cfg, *, src_vocab: int, tgt_vocab: int, pad: int) -> EncoderDecoder | Transformer:
    """The untrained model of `cfg` (call init_weights(seed) for its initialisation)."""
    return ARCHITECTURES[cfg.arch].model(cfg, src_vocab=src_vocab, tgt_vocab=tgt_vocab, pad=pad)
