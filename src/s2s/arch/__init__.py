"""The architectures: for each ``arch`` name, its config class (torch-free, in ``s2s.arch``), its
model class (``s2s.model``) and its training recipe, named by module and imported only when used.

So validating params (`s2s check`), generating dvc.yaml or writing the report never imports a
model or torch, and a stage that runs one architecture depends on that architecture's files only
(``s2s.pipeline`` adds :attr:`Architecture.model_module` of the models a stage runs to its
dependencies). A new architecture is a config module here, a model module in ``s2s.model`` and
one entry in :data:`ARCHITECTURES`.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Architecture", "ARCHITECTURES", "CAPABILITIES", "capable", "config_record",
           "config_from_dict", "feature_name", "modules"]

#: What a model can be asked for beyond what every architecture does (train, decode, join an
#: ensemble, rescore an n-best list), and what it takes. Each entry of ARCHITECTURES declares
#: which of these its models can do; `s2s check` asks it (``capable``), so an analysis an
#: architecture cannot do is refused naming the key, before any stage runs, and
#: tests/test_arch.py checks each declaration against what the analyses really accept.
CAPABILITIES: dict[str, str] = {
    "analysis": "a final encoder state to draw (Figure 2) and a source embedding to take gradients "
                "of (gradient reach, its snapshots)",
    "memory": "a one-directional recurrent encoder whose gates carry a change along the source",
    "forget_gates": "LSTM cells (lstm or peephole) in the paper's encoder-decoder",
    "attention_map": "attention weights over the source (Bahdanau et al.)",
    "cross_attention_map": "the decoder's cross-attention over the source (a Transformer)",
}
# The recurrent cells (s2s.arch.rnn's `cell`): the LSTMs have a forget gate and a cell state c;
# a GRU's state is h alone (its c is None).
LSTM_CELLS = ("lstm", "peephole")
GRU_CELLS = ("gru", "cho_gru")


@dataclass(frozen=True)
class Architecture:
    """One ``arch``: where its config and model live (``module:Class``).

    config_module / model_module: the module names (dvc.yaml lists their files as dependencies).
    config / model: the classes, imported on first use. recipe: how its papers train it, as
    overrides of params `train` (the config module's RECIPE; empty: the paper's SGD recipe);
    `models.<name>.train` overrides both. can: the CAPABILITIES its models have."""

    name: str
    config_path: str  # "s2s.arch.rnn:RNNConfig"
    model_path: str  # "s2s.model.seq2seq:Seq2Seq"
    can: frozenset[str] = frozenset()

    def __post_init__(self):
        unknown = set(self.can) - set(CAPABILITIES)
        if unknown:
            raise ValueError(f"architecture {self.name!r}: unknown capabilities {sorted(unknown)}")

    @property
    def config_module(self) -> str:
        return self.config_path.partition(":")[0]

    @property
    def model_module(self) -> str:
        return self.model_path.partition(":")[0]

    @property
    def config(self) -> type:
        return _load(self.config_path)

    @property
    def model(self) -> type:
        return _load(self.model_path)

    @property
    def recipe(self) -> Mapping[str, Any]:
        return importlib.import_module(self.config_module).RECIPE


@functools.cache
def _load(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


ARCHITECTURES: dict[str, Architecture] = {a.name: a for a in (
    Architecture("seq2seq", "s2s.arch.rnn:RNNConfig", "s2s.model.seq2seq:Seq2Seq",  # the paper's
                 frozenset({"analysis", "memory", "forget_gates"})),
    Architecture("cho", "s2s.arch.rnn:RNNConfig", "s2s.model.cho:ChoEncoderDecoder",  # Cho 2014
                 frozenset({"analysis", "memory"})),
    Architecture("attention", "s2s.arch.rnn:RNNConfig",  # Bahdanau et al. 2014: bidirectional
                 "s2s.model.attention:AttentionEncoderDecoder",
                 frozenset({"analysis", "attention_map"})),
    Architecture("transformer", "s2s.arch.transformer:TransformerConfig",  # Vaswani et al. 2017
                 "s2s.model.transformer:Transformer", frozenset({"cross_attention_map"})),
)}


def capable(cfg, what: str) -> bool:
    """Whether a model of config `cfg` can do `what` (a key of CAPABILITIES): its architecture
    declares it, and for forget gates its cell has one."""
    if what not in CAPABILITIES:
        raise ValueError(f"unknown capability {what!r} (known: {', '.join(CAPABILITIES)})")
    if what not in ARCHITECTURES[cfg.arch].can:
        return False
    return what != "forget_gates" or cfg.cell in LSTM_CELLS


def able(what: str) -> list[str]:
    """The architectures that declare `what`, for messages."""
    return [a.name for a in ARCHITECTURES.values() if what in a.can]


def modules(params, models, *, part: str = "model") -> tuple[str, ...]:
    """The modules of the architectures of `models` (names under params `models`), each once:
    their model modules (``part="model"``: a stage that builds them) or config modules
    (``part="config"``: a stage that only describes or checks them)."""
    archs = dict.fromkeys(ARCHITECTURES[params.model_config(m).arch] for m in models)
    return tuple(dict.fromkeys(a.model_module if part == "model" else a.config_module
                               for a in archs))


def feature_name(configs) -> str:
    """The n-best feature of a system of models with these configs: their kinds, each once
    (``lstm`` for the paper's ensembles, ``lstm+transformer`` for a mixed one)."""
    return "+".join(dict.fromkeys(c.feature() for c in configs))


def max_tokens(configs) -> int | None:
    """The fewest positions a model of `configs` reads or writes (a Transformer's
    max_positions); None where none has a limit (recurrent models)."""
    return min((n for c in configs if (n := c.max_tokens()) is not None), default=None)


def config_record(cfg) -> dict[str, Any]:
    """`cfg` as checkpoints, fingerprints and exports record it: ``dataclasses.asdict`` without
    its class's LATER_FIELDS while they hold their defaults. A key added to a record later enters
    it only where it is used, so a run that does not use it hashes as it did before the key
    existed and its checkpoints resume (config.train_record and the precision plan's fingerprint
    entries follow the same rule)."""
    defaults = {f.name: f.default for f in dataclasses.fields(cfg)}
    later = getattr(type(cfg), "LATER_FIELDS", ())
    return {k: v for k, v in dataclasses.asdict(cfg).items()
            if not (k in later and v == defaults[k])}


def config_from_dict(values: Mapping[str, Any], *, source: str = "config record",
                     key: str = ""):
    """A config as a checkpoint or an export records it (:func:`config_record`), of the class
    its `arch` names (configs written before `arch` existed are the paper's), decoded as params
    are (:func:`s2s.schema.decode`: an unknown key, a value of the wrong type is a ValueError
    naming `source` and the key path under `key`); a field the record leaves out takes its
    default."""
    from s2s.schema import Rules, decode

    if not isinstance(values, Mapping):
        raise ValueError(f"{source}: '{key or '<top>'}' must be a mapping (a model config), got "
                         f"{type(values).__name__}")
    arch = values.get("arch", "seq2seq")
    if arch not in ARCHITECTURES:
        raise ValueError(f"{source}: '{key + '.' if key else ''}arch' is {arch!r}, not an "
                         f"architecture of this version ({', '.join(ARCHITECTURES)})")
    return decode(ARCHITECTURES[arch].config, dict(values), source, key, Rules(ValueError))
