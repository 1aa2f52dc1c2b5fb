"""The Transformer's architecture: :class:`TransformerConfig` (the model: ``s2s.model.transformer``)
and its training recipe, :data:`RECIPE`.

No torch here: params validation (`s2s check`) and the report read it without the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from s2s.schema import MAX_SIZE, rng

# Vaswani et al. 2017 (§5.3, §5.4): Adam (0.9, 0.98, 1e-9), linear warmup then inverse square
# root decay, label smoothing 0.1 (dropout is the model's: TransformerConfig.dropout). The peak
# learning rate and warmup are fairseq's transformer defaults; small runs set their own.
RECIPE = {"optimizer": "adam", "adam_betas": (0.9, 0.98), "adam_eps": 1e-9,
          "schedule": "inverse_sqrt", "lr": 5e-4, "warmup_steps": 4000, "label_smoothing": 0.1}


@dataclass(frozen=True)
class TransformerConfig:
    """Architecture of one Transformer. The first four fields are common to all architectures."""

    recurrent: ClassVar[bool] = False  # no num_layers x hidden_size: its own size()
    arch: Literal["transformer"] = "transformer"
    reverse_source: bool = False
    init_seed: int = field(default=1, metadata=rng(0, 2**32 - 1))  # as RNNConfig's
    order_seed: int = field(default=1, metadata=rng(0, 2**32 - 1))
    # The ranges (metadata) are what params and records are checked against (s2s.schema.decode),
    # a `model` default even where no model of the file is a Transformer; __post_init__ checks
    # them again for a config built in code.
    d_model: int = field(default=512, metadata=rng(1, MAX_SIZE))
    heads: int = field(default=8, metadata=rng(1, MAX_SIZE))
    # kv_heads == heads: multi-head; 1 < kv_heads < heads: grouped-query; 1: multi-query
    kv_heads: int = field(default=8, metadata=rng(1, MAX_SIZE))
    ff_size: int = field(default=2048, metadata=rng(1, MAX_SIZE))
    encoder_layers: int = field(default=6, metadata=rng(1, MAX_SIZE))
    decoder_layers: int = field(default=6, metadata=rng(1, MAX_SIZE))
    dropout: float = field(default=0.1, metadata=rng(0.0, 1.0, hi_open=True))
    positions: Literal["sinusoidal", "learned"] = "sinusoidal"
    # the longest source or target either kind of positions accepts
    max_positions: int = field(default=1024, metadata=rng(1, MAX_SIZE))
    norm: Literal["pre", "post"] = "pre"
    tie_embeddings: bool = False  # the decoder's input embedding is the softmax layer's weight

    def describe(self) -> str:
        """What the model is, in one line (the report's models table), e.g. "Transformer, 3+3 layers, d_model 256, 4 heads (2 kv,
        grouped-query), ff 1024, pre-norm, sinusoidal positions"."""
        c = self
        if c.kv_heads == c.heads:
            heads = f"{c.heads} heads"
        else:
            kind = "multi-query" if c.kv_heads == 1 else "grouped-query"
            heads = f"{c.heads} heads ({c.kv_heads} kv, {kind})"
        parts = [f"Transformer, {c.encoder_layers}+{c.decoder_layers} layers",
                 f"d_model {c.d_model}", heads, f"ff {c.ff_size}", f"{c.norm}-norm",
                 f"{c.positions} positions", f"dropout {c.dropout:g}"]
        if c.tie_embeddings:
            parts.append("tied target embeddings")
        if c.reverse_source:
            parts.append("reversed source")
        return ", ".join(parts)

    def max_tokens(self) -> int | None:
        """The longest source or target it can read or write: its positions' table."""
        return self.max_positions

    def feature(self) -> str:
        """Its name as an n-best list's feature (``id ||| text ||| transformer=-3.2 ||| -3.2``)."""
        return "transformer"

    def size(self) -> str:
        """Its size in a few characters: encoder+decoder layers x d_model."""
        return f"{self.encoder_layers}+{self.decoder_layers} x {self.d_model}"

    def shape(self) -> dict:
        """The numbers that size it, as the training metrics record them (s2s.artifacts)."""
        return {"architecture": {"arch": self.arch, "d_model": self.d_model, "heads": self.heads,
                "kv_heads": self.kv_heads, "ff_size": self.ff_size,
                "encoder_layers": self.encoder_layers, "decoder_layers": self.decoder_layers}}

    def __post_init__(self):
        if self.arch != "transformer":
            raise ValueError(f"arch must be 'transformer', got {self.arch!r}")
        for name in ("d_model", "heads", "kv_heads", "ff_size", "encoder_layers",
                     "decoder_layers", "max_positions"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if self.d_model % self.heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by heads ({self.heads})")
        if self.heads % self.kv_heads:
            raise ValueError(f"kv_heads ({self.kv_heads}) must divide heads ({self.heads})")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")
        if self.positions not in ("sinusoidal", "learned"):
            raise ValueError(f"positions must be 'sinusoidal' or 'learned', got {self.positions!r}")
        if self.norm not in ("pre", "post"):
            raise ValueError(f"norm must be 'pre' or 'post', got {self.norm!r}")
