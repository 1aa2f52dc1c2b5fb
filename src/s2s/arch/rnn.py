"""The recurrent encoder-decoders' architecture: :class:`RNNConfig`, for the paper's model
(``s2s.model.seq2seq``), Cho et al.'s (``s2s.model.cho``) and Bahdanau et al.'s
(``s2s.model.attention``). Trained by the paper's recipe (params `train`): no RECIPE of their own.

No torch here: params validation (`s2s check`) and the report read it without the models.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from s2s.arch import GRU_CELLS, LSTM_CELLS
from s2s.schema import MAX_SIZE, rng

RECIPE: dict = {}  # the paper's SGD and schedule: params `train` as written

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
    cell: Literal[LSTM_CELLS + GRU_CELLS] = "lstm"
    attention: Literal["additive", "dot", "general"] = "additive"  # the score, for `attention`
    num_layers: int = field(default=4, metadata=rng(1, MAX_SIZE))
    hidden_size: int = field(default=1000, metadata=rng(1, MAX_SIZE))
    embed_size: int = field(default=1000, metadata=rng(1, MAX_SIZE))
    init_range: float = field(default=0.08, metadata=rng(0.0, lo_open=True))  # uniform init
    reverse_source: bool = False
    # seeds: numpy's range, whose products the training seeds (s2s.train.dropout_seed) keep in
    # torch's 64 bits
    init_seed: int = field(default=1, metadata=rng(0, 2**32 - 1))
    order_seed: int = field(default=1, metadata=rng(0, 2**32 - 1))
    # The LSTM forget gates' bias after the uniform init, in every LSTM layer (nn.LSTM: b_ih's
    # forget chunk, b_hh's forget chunk 0); 0.0 leaves the paper's uniform init untouched.
    forget_bias: float = 0.0

    # Left out of a config record while at their defaults (s2s.arch.config_record).
    LATER_FIELDS: ClassVar[tuple[str, ...]] = ("forget_bias",)
    # The paper's models have no dropout (a constant, not a field: no record or fingerprint
    # holds it); TransformerConfig's is a field. The trainer reads `dropout` of every config.
    dropout: ClassVar[float] = 0.0
    recurrent: ClassVar[bool] = True  # a stack of num_layers recurrent layers of hidden_size

    def __post_init__(self):
        if self.forget_bias != 0.0 and self.cell not in LSTM_CELLS:
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

    def max_tokens(self) -> int | None:
        """The longest source or target it can read or write: a recurrent model has no limit."""
        return None

    def feature(self) -> str:
        """Its name as an n-best list's feature (``id ||| text ||| lstm=-3.2 ||| -3.2``)."""
        if self.arch != "seq2seq":
            return self.arch  # cho, attention
        return "lstm" if self.cell in LSTM_CELLS else "gru"

    def size(self) -> str:
        """Its size in a few characters: layers x cells."""
        return f"{self.num_layers} x {self.hidden_size}"

    def shape(self) -> dict:
        """The numbers that size it, as the training metrics record them."""
        return {"cell": self.cell, "num_layers": self.num_layers, "hidden_size": self.hidden_size,
                "embed_size": self.embed_size}
