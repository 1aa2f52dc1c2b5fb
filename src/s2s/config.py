"""params.yaml -> frozen dataclasses.

The whole parameter file is validated before any stage does work: an unknown key, a value of the
wrong type or one out of range raises :class:`ConfigError` naming the file, the key path
(``train.lr``) and what was expected. Each stage reads only its own section, and ``dvc.yaml`` lists
the same keys as the stage's ``params``, so DVC reruns exactly what a change touches.

The file is read as DVC reads it (:func:`read_yaml`: YAML 1.2, ruamel.yaml), with duplicate keys
refused, so that s2s and DVC never see two different parameter sets in one file (PyYAML's YAML 1.1
reads ``off`` as False and ``010`` as 8, and keeps the last of two equal keys). Names that reach
``dvc.yaml``'s commands and paths (models, systems, rescorers), and the profile's name (in the
report's and exports' text), must match :data:`NAME_PATTERN`, and every number must be finite.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ruamel.yaml import YAML
from ruamel.yaml.constructor import SafeConstructor
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from s2s.schema import MAX_SIZE, Rules, decode, rng, show

PARAMS_FILE = "params.yaml"

# Model, system and rescorer names become parts of dvc.yaml's shell commands (`s2s train ${key}`),
# stage names (train-<name>) and paths (models/<name>/): letters, digits, `_` and `-` only.
NAME_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
NAME_RULE = "a letter, then letters, digits, '_' or '-'"
# Words that YAML 1.1 readers (PyYAML) take for booleans: as a name, another tool would misread it.
YAML11_BOOLEANS = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false"})


class ConfigError(ValueError):
    """A parameter file that does not match the schema."""


# How s2s.schema reads a parameter file: no empty strings, no .inf or .nan, names as keys.
RULES = Rules(ConfigError, empty_strings=False, finite=True, key_rule=f"strings ({NAME_RULE})")


# ---------------------------------------------------------------------------------------------
# Schema. `field(metadata=rng(..))` gives a range (s2s.schema); Literal gives a choice.


@dataclass(frozen=True)
class CorpusRef:
    """One corpus of the source registry (``s2s.data.sources``), optionally cut to its head."""

    corpus: str
    max_lines: int | None = field(default=None, metadata=rng(1, MAX_SIZE))


@dataclass(frozen=True)
class DataConfig:
    train: tuple[CorpusRef, ...]
    dev: tuple[CorpusRef, ...]
    test: CorpusRef
    # n-best lists of an external baseline (the paper's LIUM 1000-best lists); None: the pipeline
    # produces its own with the system named in rescore.baseline.
    nbest: CorpusRef | None = None


@dataclass(frozen=True)
class PrepareConfig:
    max_len: int = field(default=250, metadata=rng(1, MAX_SIZE))  # tokens per side, training pairs
    max_ratio: float = field(default=1.5, metadata=rng(1.0))  # longer/shorter, training pairs only
    # the ratio filter ignores shorter pairs
    ratio_min_len: int = field(default=1, metadata=rng(1, MAX_SIZE))
    dedup: bool = True
    lowercase: bool = False


@dataclass(frozen=True)
class VocabConfig:
    # words, specials not counted
    src_size: int = field(default=160_000, metadata=rng(1, MAX_SIZE))
    tgt_size: int = field(default=80_000, metadata=rng(1, MAX_SIZE))
    min_count: int = field(default=1, metadata=rng(1, MAX_SIZE))


@dataclass(frozen=True)
class TrainConfig:
    device: Literal["auto", "cpu", "cuda"] = "auto"
    threads: int = field(default=0, metadata=rng(0, MAX_SIZE))  # 0: torch's default
    # bf16 matmuls with fp32 weights, state and loss (s2s.precision): true, false (fp32, bit for
    # bit as before) or auto (bf16 where the hardware has a bf16 matrix engine: AMX/AVX512-BF16 on
    # CPUs, tensor cores on CUDA GPUs of compute capability >= 8)
    amp: bool | Literal["auto"] = False
    batch_size: int = field(default=128, metadata=rng(1, MAX_SIZE))
    lr: float = field(default=0.7, metadata=rng(0.0, lo_open=True))
    epochs: float = field(default=7.5, metadata=rng(0.0, lo_open=True))
    decay_start: float = field(default=5.0, metadata=rng(0.0))  # epoch after which lr decays
    decay_every: float = field(default=0.5, metadata=rng(0.0, lo_open=True))  # epochs
    decay_factor: float = field(default=0.5, metadata=rng(0.0, 1.0, lo_open=True))
    clip_norm: float = field(default=5.0, metadata=rng(0.0, lo_open=True))
    # batches sorted together by length
    bucket_batches: int = field(default=100, metadata=rng(1, MAX_SIZE))
    eval_every: float = field(default=0.5, metadata=rng(0.0, lo_open=True))  # epochs
    checkpoint_every: int = field(default=500, metadata=rng(1, MAX_SIZE))  # steps
    log_every: int = field(default=50, metadata=rng(1, MAX_SIZE))  # steps
    # The training recipe beyond the paper's (whose SGD and schedule are the defaults above).
    # An architecture brings its own (s2s.model: the Transformer's is Adam with the inverse
    # square-root warmup and label smoothing), and `models.<name>.train` overrides any key here.
    optimizer: Literal["sgd", "adam"] = "sgd"  # sgd: plain SGD, no momentum (§3.4)
    # each in [0, 1): the decay of a moving average
    adam_betas: tuple[float, float] = field(default=(0.9, 0.98),
                                            metadata=rng(0.0, 1.0, hi_open=True))
    adam_eps: float = field(default=1e-9, metadata=rng(0.0, lo_open=True))
    # paper: `lr` until `decay_start`, then halved every `decay_every` epochs; inverse_sqrt:
    # linear warmup to `lr` over `warmup_steps`, then lr * sqrt(warmup_steps / step)
    schedule: Literal["paper", "inverse_sqrt"] = "paper"
    warmup_steps: int = field(default=4000, metadata=rng(1, MAX_SIZE))
    # 0: the plain NLL; 1 would spread all of the target's mass over the vocabulary
    label_smoothing: float = field(default=0.0, metadata=rng(0.0, 1.0, hi_open=True))


# The recipe keys beyond the paper's: a record of a `train` config (a fingerprint, an export)
# leaves them out while they hold the paper's values (the rule of s2s.arch.config_record).
RECIPE_KEYS = ("optimizer", "adam_betas", "adam_eps", "schedule", "warmup_steps",
               "label_smoothing")


def train_record(cfg: TrainConfig) -> dict[str, Any]:
    """`cfg` as a dict, without the recipe keys that hold the paper's recipe's values."""
    default = TrainConfig()
    return {k: v for k, v in dataclasses.asdict(cfg).items()
            if not (k in RECIPE_KEYS and v == getattr(default, k))}


@dataclass(frozen=True)
class SystemConfig:
    """One Table 1 system: a model or an ensemble, decoded at each beam width."""

    members: tuple[str, ...]
    beams: tuple[int, ...] = field(metadata=rng(1, MAX_SIZE))  # each decoded once
    # n-best entries written per sentence
    nbest: int = field(default=1, metadata=rng(1, MAX_SIZE))

    @property
    def widest_beam(self) -> int:
        """The widest beam: the one n-best lists, the report's default row and rescoring use."""
        return max(self.beams)


@dataclass(frozen=True)
class TranslateConfig:
    # sentences per search batch at beam 12; narrower beams batch proportionally more sentences
    batch_size: int = field(default=32, metadata=rng(1, MAX_SIZE))
    # max target len = a * src + b (a target 100 times its source is never meant; past it the
    # product no longer fits the search's lengths)
    max_len_a: float = field(default=1.5, metadata=rng(0.0, 100.0))
    max_len_b: int = field(default=10, metadata=rng(1, MAX_SIZE))
    length_penalty: float = field(default=0.0, metadata=rng(0.0))  # 0: the paper's raw log-prob
    combine: Literal["mean_prob", "mean_logprob"] = "mean_prob"  # how an ensemble mixes members
    device: Literal["auto", "cpu", "cuda"] = "auto"
    threads: int = field(default=0, metadata=rng(0, MAX_SIZE))
    # beam search with bf16 matmuls, as train.amp; n-best lists (nbest > 1) keep the search's
    # order and get fp32 scores, so rescoring and Table 2 see the model's own scores
    amp: bool | Literal["auto"] = False


@dataclass(frozen=True)
class RescoreConfig:
    # a system of `systems` whose n-best lists are rescored (Table 2); null: a profile without
    # Table 2 (no rescore stages; then `rescorers` must be empty and no paper row a rescoring)
    baseline: str | None
    weight: float = field(default=0.5, metadata=rng(0.0, 1.0))  # LSTM share of the score
    rescorers: dict[str, tuple[str, ...]] = field(default_factory=dict)  # name -> members
    batch_size: int = field(default=64, metadata=rng(1, MAX_SIZE))


@dataclass(frozen=True)
class EvaluateConfig:
    min_group: int = field(default=100, metadata=rng(1, MAX_SIZE))  # sentences per Figure 3 group
    length_edges: tuple[int, ...] = field(  # the paper's x ticks
        default=(4, 7, 8, 12, 17, 22, 28, 35, 79), metadata=rng(None, MAX_SIZE))
    rarity_groups: int = field(default=8, metadata=rng(1, MAX_SIZE))


@dataclass(frozen=True)
class PaperAnswer:
    """Which of our outputs answers one row of the paper's Table 1 or Table 2 (the rows and the
    paper's numbers: src/s2s/paper.yaml). Exactly one of: a system at a beam; a rescoring
    output (a rescorer of rescore.rescorers, `baseline` or `oracle`); or `baseline: true`, our
    stand-in for the paper's baseline (rescore.baseline's system at its widest beam, else the
    rescore stage's 1-best). The check stage refuses a system, a beam or a rescorer the profile
    lacks (s2s.stages.check); loaded, such a row is shown as not run, as a row with no answer."""

    system: str | None = None
    beam: int | None = field(default=None, metadata=rng(1, MAX_SIZE))
    rescore: str | None = None
    baseline: bool = False


@dataclass(frozen=True)
class ReportConfig:
    title: str = "Sequence to Sequence Learning with Neural Networks: a reproduction"
    figure3_system: str = "ensemble5"  # the "LSTM" curve of Figure 3
    # systems drawn beside it (at figure3_beam, else their widest beam): the models that look
    # back at the source (attention, Transformer), to see whether the fixed vector is what fades
    figure3_compare: tuple[str, ...] = ()
    figure3_beam: int = field(default=12, metadata=rng(1, MAX_SIZE))
    # paper row id (src/s2s/paper.yaml) -> our output; a row with no entry is not run
    table1: dict[str, PaperAnswer] = field(default_factory=dict)
    table2: dict[str, PaperAnswer] = field(default_factory=dict)


@dataclass(frozen=True)
class AnalysisConfig:
    """The report's analyses beyond the paper's tables: Figure 2, forget gates, gradient reach
    (of a forward and a reversed model, also over training), memory of a one-word change, and
    the alignments of an attention system."""

    models: tuple[str, ...] = ("forward", "reversed_1")  # the forward and the reversed model
    phrases: tuple[str, ...] = ()  # Figure 2's phrases, raw English
    # test sentences for the statistics
    sentences: int = field(default=1000, metadata=rng(1, MAX_SIZE))
    # source positions of gradient reach; at least the first 3, which the claim compares
    # (s2s.analysis.outputs.FIRST)
    # at most a test line's longest (s2s.data.prepare.MAX_EVAL_WORDS), as memory_steps
    max_position: int = field(default=20, metadata=rng(3, 1000))
    attention_system: str | None = None  # whose attention weights the report draws
    # a Transformer system whose cross-attention the report draws beside them (same sentences)
    cross_attention_system: str | None = None
    attention_examples: int = field(default=4, metadata=rng(1, MAX_SIZE))
    # Epochs at which the train stages of `models` keep a snapshot (s2s.snapshots): the gradient
    # reach over training time. 0: before the first update; the end is the final model.
    snapshots: tuple[float, ...] = field(default=(0.0, 0.25, 0.5, 1.0, 2.0), metadata=rng(0))
    # Memory (s2s.analysis.memory): the models whose encoder's response to a one-word change is
    # traced (empty: `models`), steps after the change, candidate words per context.
    memory_models: tuple[str, ...] = ()
    # Seed replicas of the forward and the reversed model of `models` whose gradient reach over
    # training is measured too (their train stages keep snapshots), each paired with the model
    # of the other reading order that shares its seeds (:func:`seed_pairs`): the reversal
    # argument's interval over seeds. No other analysis reads them.
    reach_replicas: tuple[str, ...] = ()
    memory_steps: int = field(default=12, metadata=rng(1, 1000))
    memory_candidates: int = field(default=20, metadata=rng(2, MAX_SIZE))

    @staticmethod
    def written(params, key: str) -> bool:
        """Whether `analysis.<key>` is written in the parameter file of `params` (recorded when
        it was loaded: :attr:`Params.written`). DVC refuses to track a params key the file
        lacks, so a stage declares these keys only where they are written; where not, the
        default above holds (a source dependency of the stage)."""
        return f"analysis.{key}" in params.written

    @staticmethod
    def read(params, key: str):
        """`analysis.<key>` through a stage's view of params where the file writes it (and the
        stage declared it), else its default."""
        if AnalysisConfig.written(params, key):
            return getattr(params.analysis, key)
        return getattr(AnalysisConfig(), key)


@dataclass(frozen=True)
class TimingConfig:
    """The timing stage (the paper's cost claim): the systems the claim compares (paper.yaml
    ``claims.cost.rows``, answered by `report.table1`) decode the test set in turns, each
    `repetitions` times in one process on one thread."""

    repetitions: int = field(default=5, metadata=rng(2, MAX_SIZE))
    # the first N test sentences; 0: all
    sentences: int = field(default=0, metadata=rng(0, MAX_SIZE))


@dataclass(frozen=True)
class StageResources:
    """What one job of a stage asks a scheduler for (Snakemake, SLURM). No result depends on
    these, so no stage lists them in dvc.yaml. `gpus` > 1 for `train`: data-parallel training."""

    threads: int = field(default=1, metadata=rng(1, MAX_SIZE))
    mem_mb: int = field(default=4000, metadata=rng(1, MAX_SIZE))
    runtime: int = field(default=60, metadata=rng(1, MAX_SIZE))  # minutes
    gpus: int = field(default=0, metadata=rng(0, MAX_SIZE))


@dataclass(frozen=True)
class Params:
    profile: str
    data: DataConfig
    prepare: PrepareConfig
    vocab: VocabConfig
    # Defaults shared by every model: any field of any architecture's config (s2s.model). A
    # model takes those its architecture has; `models.<name>` overrides them, and its `train`
    # mapping overrides `train` (its recipe); see model_config() and train_config().
    model: dict[str, Any]
    models: dict[str, dict[str, Any]]
    train: TrainConfig
    translate: TranslateConfig
    systems: dict[str, SystemConfig]
    rescore: RescoreConfig
    evaluate: EvaluateConfig = EvaluateConfig()
    report: ReportConfig = ReportConfig()
    analysis: AnalysisConfig = AnalysisConfig()
    timing: TimingConfig = TimingConfig()
    # Keyed by stage kind (`train` for every train-M) or `default`; see resources_for().
    resources: dict[str, StageResources] = field(default_factory=dict)
    source: Path = Path(PARAMS_FILE)
    # The dotted keys the file writes, down to a section's keys (`analysis.snapshots`), recorded
    # by load(): which defaults a file relies on, without reading it again.
    written: frozenset[str] = field(default=frozenset(), compare=False, repr=False)
    # The profile each dotted key came from, where the file `extends` others (resolved()'s
    # `origins`, recorded by load()): a bad value is reported against the file that holds it.
    origins: dict[str, Path] = field(default_factory=dict, compare=False, repr=False)

    def model_config(self, name: str):
        """The architecture of `models.<name>`: the config of its `arch` (s2s.model), from
        `model` and that entry's overrides. Built once (load() builds every model's, so a bad
        one fails there) and then the same value for every caller."""
        if name not in self.models:
            raise ConfigError(f"{self.source}: no model '{name}' under 'models' "
                              f"(known: {', '.join(self.models)})")
        built = self._built("model", name)
        if built is None:
            built = self._built("model", name, model_config(
                self.model, self.models[name], source=self.source, name=name,
                origins=self.origins))
        return built

    def model_configs(self, names: typing.Iterable[str]) -> dict[str, Any]:
        """The model_config of each of `names` (a system's members, a rescorer's), by name, in
        their order; a name given twice is a ConfigError (a dict would keep one member of two)."""
        names = list(names)
        if twice := sorted({n for n in names if names.count(n) > 1}):
            raise ConfigError(f"{self.source}: model(s) {', '.join(twice)} named more than once "
                              f"in {names}; an ensemble's members are distinct models")
        return {name: self.model_config(name) for name in names}

    def train_config(self, name: str) -> TrainConfig:
        """How `models.<name>` is trained: `train`, then its architecture's recipe, then its own
        `train` overrides (`models.<name>.train`). Built once, as model_config."""
        from s2s.arch import ARCHITECTURES

        built = self._built("train", name)
        if built is not None:
            return built
        recipe = dict(ARCHITECTURES[self.model_config(name).arch].recipe)
        own = self.models[name].get("train") or {}
        if not recipe and not own:
            return self._built("train", name, self.train)
        raw = {**dataclasses.asdict(self.train), **recipe, **own}
        return self._built("train", name, _decode(TrainConfig, raw, self.source,
                                                  f"models.{name}.train", self.origins))

    def _built(self, kind: str, name: str, value: Any = None) -> Any:
        """The config of `kind` built for model `name` (None if not yet); with `value`, keep it.
        A Params is immutable, so what is built from it never goes stale."""
        cache = self.__dict__.setdefault("_configs", {})
        if value is not None:
            cache[(kind, name)] = value
        return cache.get((kind, name))

    def resources_for(self, kind: str) -> StageResources:
        """`resources.<kind>`, else `resources.default`, else the defaults of StageResources. A
        loaded file's `resources.<kind>` holds each field it leaves out from `resources.default`
        (:func:`_fill_resources`): `{threads: 8}` asks for the default's memory and GPUs."""
        return self.resources.get(kind) or self.resources.get("default") or StageResources()

    def declares(self, key: str) -> bool:
        """Every key is readable in the whole params (ParamsView.declares: a stage's part)."""
        return True


class UndeclaredParams(ConfigError):
    """A stage read a params key that its dvc.yaml entry does not declare: DVC would not rerun it
    when that key changes."""


def dotted(value: Any, prefix: str = "") -> typing.Iterator[tuple[str, Any]]:
    """A nested mapping's leaves as (dotted key, value), params keys as DVC and `s2s check` spell
    them ("train.epochs"); an empty mapping has no leaf."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from dotted(v, f"{prefix}{k}.")
    else:
        yield prefix.rstrip("."), value


def only(params: Params, keys: typing.Iterable[str], *, stage: str) -> "ParamsView":
    """`params` as stage `stage` may see it: the sections and keys of `keys` (dvc.yaml's `params`
    of the stage: `train`, `models.forward`, `rescore.rescorers.gru`), nothing else."""
    return ParamsView(params, tuple(keys), stage=stage)


class ParamsView:
    """Read-only access to the declared part of a Params (see :func:`only`). Reading any other key
    raises UndeclaredParams naming the stage, the key and what the stage declares; `source` is
    always readable. A partly declared mapping (`models` when only `models.forward` is declared)
    holds only its declared entries; a partly declared section refuses its other fields."""

    def __init__(self, params: Params, keys: tuple[str, ...], *, stage: str,
                 prefix: str = "", value: Any = None):
        object.__setattr__(self, "_params", params)
        object.__setattr__(self, "_keys", keys)
        object.__setattr__(self, "_stage", stage)
        object.__setattr__(self, "_prefix", prefix)
        object.__setattr__(self, "_value", params if value is None else value)

    @property
    def source(self) -> Path:
        return self._params.source

    @property
    def written(self) -> frozenset[str]:
        """Always readable: which keys the file writes (no value of any)."""
        return self._params.written

    @property
    def resources(self) -> dict[str, StageResources]:
        """Always readable: what a job asks a scheduler for; no result depends on it."""
        return self._params.resources

    def _child(self, name: str) -> Any:
        dotted = f"{self._prefix}{name}"
        if any(k == dotted or dotted.startswith(k + ".") for k in self._keys):
            value = self._value[name] if isinstance(self._value, dict) else getattr(self._value, name)
            return value  # declared as a whole
        if not any(k.startswith(dotted + ".") for k in self._keys):
            raise UndeclaredParams(
                f"stage '{self._stage}' reads params '{dotted}', which its dvc.yaml entry does not "
                f"declare (it declares: {', '.join(self._keys) or 'nothing'}); declare it in the "
                f"stage's module (s2s.stages) so that DVC reruns the stage when it changes")
        value = self._value[name] if isinstance(self._value, dict) else getattr(self._value, name)
        return ParamsView(self._params, self._keys, stage=self._stage, prefix=dotted + ".",
                          value=value)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if isinstance(self._value, dict):
            raise AttributeError(f"{self._prefix.rstrip('.')} is a mapping: use [{name!r}]")
        return self._child(name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("params are read-only")

    # A partly declared mapping: only its declared entries exist.
    def _declared(self) -> list[str]:
        return [k for k in self._value if any(
            d == f"{self._prefix}{k}" or d.startswith(f"{self._prefix}{k}.")
            or f"{self._prefix}{k}".startswith(d + ".") for d in self._keys)]

    def __getitem__(self, key: str) -> Any:
        return self._child(key)

    def __iter__(self):
        return iter(self._declared())

    def __len__(self) -> int:
        return len(self._declared())

    def __contains__(self, key: object) -> bool:
        return key in self._declared()

    def keys(self):
        return self._declared()

    def items(self):
        return [(k, self[k]) for k in self._declared()]

    def values(self):
        return [self[k] for k in self._declared()]

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self._declared() else default

    def model_config(self, name: str):
        """As Params.model_config, reading `model` and `models.<name>` through the view."""
        if name not in self._params.models:
            return self._params.model_config(name)  # the error naming the known models
        self.model, self.models[name]  # noqa: B018 -- both must be declared
        return self._params.model_config(name)

    def model_configs(self, names: typing.Iterable[str]) -> dict[str, Any]:
        """As Params.model_configs (a name given twice refused there), each through the view."""
        names = list(names)
        for name in names:
            self.model_config(name)
        return self._params.model_configs(names)

    def train_config(self, name: str) -> TrainConfig:
        """As Params.train_config, reading `train`, `model` and `models.<name>` through the
        view."""
        self.train, self.model_config(name)  # noqa: B018 -- all must be declared
        return self._params.train_config(name)

    def resources_for(self, kind: str) -> StageResources:
        return self._params.resources_for(kind)

    def declares(self, key: str) -> bool:
        """Whether the stage declares params `key` (dotted), whole: what it may read."""
        return any(key == k or key.startswith(k + ".") for k in self._keys)


def model_config(defaults: dict, overrides: dict, *, source: Path, name: str,
                 origins: typing.Mapping[str, Path] | None = None):
    """The config of one model: the fields of its architecture's config class taken from
    `defaults` (params `model`) and `overrides` (params `models.<name>`), each checked and named
    by the key it came from (and the profile that wrote it: `origins`, as Params.origins).
    `overrides.train` is its training recipe (Params.train_config)."""
    origins = origins or {}
    from s2s.arch import ARCHITECTURES

    arch = overrides.get("arch", defaults.get("arch", "seq2seq"))
    where = f"models.{name}.arch" if "arch" in overrides else "model.arch"
    if not isinstance(arch, str) or arch not in ARCHITECTURES:
        raise _error(f"{source}: '{where}' must be one of {list(ARCHITECTURES)}, got "
                     f"{show(arch)}", source, origins)
    cls = ARCHITECTURES[arch].config
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key in overrides:
        if key not in fields and key != "train":
            raise _error(f"{source}: unknown key 'models.{name}.{key}' for arch '{arch}' "
                         f"(expected one of: {', '.join([*fields, 'train'])})", source, origins)
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for key, f in fields.items():
        if key in overrides:
            value, origin = overrides[key], f"models.{name}.{key}"
        elif key in defaults:
            value, origin = defaults[key], f"model.{key}"
        else:
            continue
        kwargs[key] = _decode(hints[key], value, source, origin, origins, f.metadata)
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as e:
        # the settings the message names that the model takes from `model`, not its own
        shared = [k for k in kwargs if k not in overrides and re.search(rf"\b{k}\b", str(e))]
        raise ConfigError(f"{source}: 'models.{name}': {e}"
                          + (f" ({', '.join(f'model.{k}' for k in shared)}, not set in "
                             f"'models.{name}')" if shared else "")) from None


# ---------------------------------------------------------------------------------------------
# Loading


MERGE_TAG = "tag:yaml.org,2002:merge"


class _UniqueKeys(SafeConstructor):
    """ruamel.yaml's safe constructor, refusing two equal keys in every mapping: ruamel checks
    only a mapping without a merge key (``<<: *base``), where the last of two equal keys won.
    The keys a merge brings in may still be overridden by the mapping's own (that is a merge);
    two of its own, or two of one merged mapping's, may not."""

    def flatten_mapping(self, node: Any) -> Any:
        merged = getattr(node, "merge", None) or []  # flattened already (an alias read again)
        seen: dict[Any, Any] = {}
        for key_node, value_node in node.value[len(merged):]:
            if key_node.tag == MERGE_TAG:
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                hash(key)
            except TypeError:
                continue  # unhashable: the construction refuses it, with its own message
            if key in seen:  # ruamel's error, as for a mapping without a merge key
                first = {key: self.construct_object(seen[key], deep=True)}
                self.check_mapping_key(node, key_node, first, key,
                                       self.construct_object(value_node, deep=True))
            seen[key] = value_node
        return super().flatten_mapping(node)


def read_yaml(path: str | Path) -> Any:
    """A YAML file read as DVC reads params.yaml and dvc.yaml (ruamel.yaml's safe loader, YAML 1.2:
    ``off`` is a string, ``010`` is 10), with duplicate keys refused in every mapping, one with a
    merge key (``<<``) too (:class:`_UniqueKeys`); ConfigError on any problem, one line at the
    file's own line and column."""
    path = Path(path)
    reader = YAML(typ="safe", pure=True)
    reader.Constructor = _UniqueKeys
    reader.allow_duplicate_keys = False
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: parameter file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: a folder, not a parameter file") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        return reader.load(text)
    except YAMLError as e:
        mark = getattr(e, "problem_mark", None) if isinstance(e, MarkedYAMLError) else None
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else f"{path}"
        lines = str(e).splitlines()
        what = getattr(e, "problem", None) or (lines[0] if lines else type(e).__name__)
        context = getattr(e, "context", None)
        raise ConfigError(f"{where}: not valid YAML: {what}"
                          + (f" ({context})" if context else "")) from None


# A profile (profiles/<name>.yaml) is a complete parameter file, or the differences from another
# profile: ``extends: <name>`` (a profile in the same folder), ``remove:`` the dotted keys of the
# base it does not have, and the keys whose values it changes. Mappings merge key by key; a list
# or a value replaces the base's. `s2s profile NAME` writes the resolved, complete file to
# params.yaml: DVC reads params.yaml's keys itself, so params.yaml never `extends`.
# `remove` takes out entries (a model, a system, a resources kind, a model's override that then
# falls back to `model` or `train`); a key the pipeline reads with a default in the code is set,
# never removed, so that params.yaml always shows the value that runs (_removal_problem).
PROFILE_KEYS = ("extends", "remove")
MAX_EXTENDS = 16  # profiles in one `extends` chain, the complete base included


def resolved(path: str | Path, _seen: tuple[Path, ...] = (), *,
             chain: list[Path] | None = None, origins: dict[str, Path] | None = None) -> dict:
    """The complete mapping a parameter file stands for: its own, or (with ``extends``) its
    base's resolved mapping with ``remove`` taken out and its keys merged in. ConfigError names
    the file and key of an unknown base, a cycle, or a removed key the base lacks. `chain`, if
    given, receives the files read, the file itself first and the complete base last.
    `origins`, if given, receives the file each dotted key of the result was written in (a
    mapping's own key: the file that wrote it, or the last that removed one of its entries), so
    that a bad value is reported against the profile that holds it (:func:`load`)."""
    path = Path(path)
    if len(_seen) >= MAX_EXTENDS:
        raise ConfigError(f"{_seen[0]}: its 'extends' chain is longer than {MAX_EXTENDS} profiles "
                          f"({_seen[0].name} -> {_seen[1].name} -> ... -> {path.name}); a profile "
                          f"extends at most {MAX_EXTENDS - 1} others: extend a profile nearer the "
                          f"complete one")
    raw = read_yaml(path)
    if chain is not None:
        chain.append(path)
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of sections at the top level")
    if "extends" not in raw:
        if "remove" in raw:
            raise ConfigError(f"{path}: 'remove' takes keys out of a base profile: it needs "
                              f"'extends'")
        if origins is not None:
            origins.update((k, path) for k in _keys(raw))
        return raw
    base_name = raw["extends"]
    if not (isinstance(base_name, str) and NAME_PATTERN.fullmatch(base_name)):
        raise ConfigError(f"{path}: 'extends' must name a profile of {path.parent}/ "
                          f"({NAME_RULE}), got {show(base_name)}")
    base_path = path.parent / f"{base_name}.yaml"
    if base_path.resolve() in [q.resolve() for q in (*_seen, path)]:
        chain = " -> ".join(str(q) for q in (*_seen, path, base_path))
        raise ConfigError(f"{path}: 'extends' makes a cycle: {chain}")
    if not base_path.is_file():
        raise ConfigError(f"{path}: 'extends' names profile '{base_name}', but {base_path} does "
                          f"not exist (a profile extends one in its own folder; the params file "
                          f"DVC reads must be complete: `s2s profile NAME` writes it)")
    merged = resolved(base_path, (*_seen, path), chain=chain, origins=origins)
    removals = raw.get("remove", [])
    if not (isinstance(removals, list) and all(isinstance(k, str) for k in removals)):
        raise ConfigError(f"{path}: 'remove' must be a list of dotted keys, got {show(removals)}")
    for i, dotted in enumerate(removals):
        *parents, last = dotted.split(".")
        node = merged
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if not (isinstance(node, dict) and last in node):
            raise ConfigError(f"{path}: 'remove[{i}]' names '{dotted}', which {base_path} "
                              f"does not have")
        problem = _removal_problem(dotted, merged)
        if problem:
            raise ConfigError(f"{path}: 'remove[{i}]' names '{dotted}', a key the pipeline "
                              f"reads: params.yaml would not show the value that runs "
                              f"({problem}; {base_path} says {_brief(node[last])}); set the "
                              f"value you want instead of removing the key")
        del node[last]
        if origins is not None:  # a missing entry is this file's doing, not the base's
            _forget(origins, dotted)
            if parents:
                origins[".".join(parents)] = path
    change = {k: v for k, v in raw.items() if k not in PROFILE_KEYS}
    if origins is not None:
        _record_change(origins, merged, change, path)
    return _merge(merged, change)


def _keys(value: Any, prefix: str = "") -> typing.Iterator[str]:
    """Every dotted key of a nested mapping, a mapping's own key before its entries'."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield f"{prefix}{k}"
            yield from _keys(v, f"{prefix}{k}.")


def _forget(origins: dict[str, Path], dotted: str) -> None:
    """Take `dotted` and every key under it out of `origins`."""
    for k in [k for k in origins if k == dotted or k.startswith(dotted + ".")]:
        del origins[k]


def _record_change(origins: dict[str, Path], base: dict, change: dict, path: Path,
                   prefix: str = "") -> None:
    """Record in `origins` the keys `change` (of file `path`) gives as _merge(base, change)
    merges them: a mapping into a mapping key by key, anything else replacing the base's value
    and whatever was under it."""
    for k, v in change.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            _record_change(origins, base[k], v, path, key + ".")
        else:
            _forget(origins, key)
            origins[key] = path
            origins.update((f"{key}.{sub}", path) for sub in _keys(v))


def _removal_problem(dotted: str, merged: dict) -> str | None:
    """What would run in place of the key `dotted` if a profile removed it from `merged`, where
    that is a default of the code rather than another key of the file; None for an entry whose
    removal only takes it out (a model, a system, a resources kind, a rescorer, a paper row) or
    a model's override that falls back to a key the file has."""
    parts = dotted.split(".")
    head = parts[0]
    if head == "model":
        return "each architecture's own default"
    if head == "models" and len(parts) > 1:
        if len(parts) == 2:
            return None  # a whole model
        if parts[2] == "train":  # the model's recipe: falls back to the `train` section
            if len(parts) == 3 or parts[3] in (merged.get("train") or {}):
                return None
            return _default_of(TrainConfig, parts[3])
        if parts[2] in (merged.get("model") or {}):
            return None
        return "the architecture's own default"
    hints = typing.get_type_hints(Params)
    if head not in hints:
        return None  # not a key of the schema: load() refuses it anyway
    kind, owner = _unwrap(hints[head]), Params
    for part in parts[1:]:
        if dataclasses.is_dataclass(kind):
            fields = {f.name: f for f in dataclasses.fields(kind)}
            if part not in fields:
                return None
            owner, kind = kind, _unwrap(typing.get_type_hints(kind)[part])
        elif typing.get_origin(kind) is dict:
            owner, kind = None, _unwrap(typing.get_args(kind)[1])  # an entry of a mapping
        else:
            return None
    if owner is None:
        return None
    return _default_of(owner, parts[-1])


def _unwrap(kind):
    """`X | None` -> X; anything else as it is."""
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    if typing.get_origin(kind) in (typing.Union, types.UnionType) and len(args) == 1:
        return args[0]
    return kind


def _default_of(cls, name: str) -> str:
    f = {f.name: f for f in dataclasses.fields(cls)}[name]
    if f.default is not dataclasses.MISSING:
        return f"the code's default {_brief(f.default)}"
    if f.default_factory is not dataclasses.MISSING:
        return f"the code's default {_brief(f.default_factory())}"
    return "none: the file must have it"


def _brief(value: Any) -> str:
    if dataclasses.is_dataclass(value):
        value = dataclasses.asdict(value)
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def require_complete(path: str | Path) -> None:
    """DVC reads the parameter file's keys itself (the params of each stage in dvc.yaml), so
    the file it tracks must be complete, not a profile's differences."""
    raw = read_yaml(path)
    if isinstance(raw, dict) and "extends" in raw:
        raise ConfigError(f"{path}: 'extends' belongs in a profile: DVC reads this file's keys "
                          f"itself, so it must be complete; write it with `s2s profile "
                          f"{raw.get('profile') or 'NAME'}`")


def _merge(base: dict, change: dict) -> dict:
    out = dict(base)
    for k, v in change.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def load(path: str | Path = PARAMS_FILE) -> Params:
    """Read and validate a parameter file (a profile's differences resolved: `resolved`); raise
    ConfigError naming the key on any problem."""
    path = Path(path)
    origins: dict[str, Path] = {}
    raw = resolved(path, origins=origins)
    params = _decode(Params, raw, path, "", origins, skip={"source", "written", "origins"})
    params = dataclasses.replace(params, source=path, origins=origins, written=frozenset(
        [*raw, *(f"{k}.{sub}" for k, v in raw.items() if isinstance(v, dict) for sub in v)]))
    params = _fill_resources(params, raw.get("resources"))
    _check_cross_refs(params)
    return params


def _fill_resources(params: Params, raw: Any) -> Params:
    """`params` with each `resources.<kind>` (decoded from `raw`, the file's `resources`) taking
    the fields it does not write from `resources.default`, field by field: the kind's field,
    else the default's, else StageResources' own default."""
    default = params.resources.get("default")
    if default is None or not isinstance(raw, dict):
        return params
    given = set(raw.get("default") or ())
    filled = {}
    for kind, res in params.resources.items():
        own = set(raw.get(kind) or ()) if kind != "default" else set(given)
        filled[kind] = dataclasses.replace(res, **{f: getattr(default, f)
                                                   for f in given - own})
    return dataclasses.replace(params, resources=filled)


def _decode(tp: Any, value: Any, source: Path, key: str, origins: typing.Mapping[str, Path],
            meta: Any = None, *, skip: frozenset | set = frozenset()) -> Any:
    """s2s.schema.decode with RULES, its error naming the profile that wrote the bad key where
    `source` extends that profile (:func:`_error`)."""
    try:
        return decode(tp, value, source, key, RULES, meta, skip=skip)
    except ConfigError as e:
        raise _error(str(e), source, origins) from None


def _error(message: str, source: Path, origins: typing.Mapping[str, Path]) -> ConfigError:
    """The ConfigError of `message`, a problem of one key's own value (``<source>: '<key>'
    ...``, the key its first quoted name, as s2s.schema.decode words it), naming the profile
    that wrote the key where `source` extends it (`origins`: :func:`resolved`'s), e.g.
    ``profiles/default.yaml (extended by profiles/x.yaml): 'train.lr' must be ...``. A problem
    between keys (a name that is not a model) is the file's that brings them together: `source`,
    so this is for single-key checks only."""
    head = f"{source}: "
    found = re.match(r"[^']*'([^']+)'", message[len(head):]) if message.startswith(head) else None
    if found is None:
        return ConfigError(message)
    key = re.sub(r"\[\d+\]", "", found.group(1))  # an entry of a list: the list's key
    while key not in origins and "." in key:  # a key the file lacks: its mapping's
        key = key.rpartition(".")[0]
    origin = origins.get(key, source)
    if origin == source:
        return ConfigError(message)
    return ConfigError(f"{origin} (extended by {source}): {message[len(head):]}")


def check_name(name: Any, source: Path | str, key: str) -> None:
    """Refuse a name that would reach a shell command or a path unquoted, naming the key."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise ConfigError(f"{source}: '{key}' is not a valid name ({show(name)}): names must "
                          f"be {NAME_RULE}")
    if name.lower() in YAML11_BOOLEANS:
        raise ConfigError(f"{source}: '{key}' is not a valid name ('{name}' is a boolean to "
                          f"YAML 1.1 readers such as PyYAML): pick another")


SEEDS = ("init_seed", "order_seed")  # what seed replicas of one configuration differ in


def model_record(p: Params, model: str) -> dict[str, Any]:
    """What sets `model` apart: its config record (s2s.arch.config_record) and its own recipe
    overrides (`models.<m>.train`; the shared `train` and its architecture's recipe are the same
    for any two models of one architecture). `p`: a Params or a stage's view of it."""
    from s2s.arch import config_record

    return {**config_record(p.model_config(model)),
            **{f"train.{k}": v for k, v in (p.models[model].get("train") or {}).items()}}


def record_key(p: Params, model: str, leave_out: typing.Iterable[str] = ()) -> str:
    """:func:`model_record` without the keys `leave_out`, as one string: equal for two models
    that differ in those keys alone (`SEEDS`: two seed replicas)."""
    import json

    leave_out = set(leave_out)
    return json.dumps({k: v for k, v in model_record(p, model).items() if k not in leave_out},
                      sort_keys=True, default=str)


def seed_pairs(p: Params, names: typing.Iterable[str]) -> list[tuple[str, str]]:
    """The (forward, reversed) pairs among the models `names`: two models that differ in
    ``reverse_source`` alone, their seeds and everything else the same, in the order of the
    forward models in `names`; a model pairs once (the first partner in `names`)."""
    names = list(dict.fromkeys(names))

    def key(m: str) -> str:
        return record_key(p, m, ("reverse_source",))

    reversed_ = [m for m in names if p.model_config(m).reverse_source]
    pairs, taken = [], set()
    for f in names:
        if p.model_config(f).reverse_source:
            continue
        partner = next((r for r in reversed_ if r not in taken and key(r) == key(f)), None)
        if partner is not None:
            pairs.append((f, partner))
            taken.add(partner)
    return pairs


def _check_cross_refs(p: Params) -> None:
    """What the schema cannot say of one key alone: the names one section gives another's
    entries exist and can do what is asked of them. One check per section, in the file's order;
    the first problem raises ConfigError naming its key."""
    _check_names(p)
    _check_data(p)
    _check_models(p)
    _check_systems(p)
    _check_rescore(p)
    _check_report(p)
    _check_analysis(p)
    if list(p.evaluate.length_edges) != sorted(set(p.evaluate.length_edges)):
        raise _error(f"{p.source}: 'evaluate.length_edges' must be strictly increasing",
                     p.source, p.origins)


def _check_names(p: Params) -> None:
    """First of all: these names are pasted into dvc.yaml's commands and paths."""
    if not p.models:
        raise _error(f"{p.source}: 'models' must name at least one model", p.source, p.origins)
    try:
        check_name(p.profile, p.source, "profile")  # in the report, the exports and `s2s dag show`
        for section, names in (("models", p.models), ("systems", p.systems),
                               ("rescore.rescorers", p.rescore.rescorers)):
            for name in names:
                check_name(name, p.source, f"{section}.{name}")
        if p.rescore.baseline is not None:  # outputs/translate/<baseline>
            check_name(p.rescore.baseline, p.source, "rescore.baseline")
    except ConfigError as e:
        raise _error(str(e), p.source, p.origins) from None


def data_roles(p: Params | DataConfig) -> list[tuple[str, CorpusRef]]:
    """(key, corpus) of every corpus params `data` names (of params, or `data` itself): train,
    dev, test, then nbest."""
    d = p if isinstance(p, DataConfig) else p.data
    return [*((f"data.train[{i}]", c) for i, c in enumerate(d.train)),
            *((f"data.dev[{i}]", c) for i, c in enumerate(d.dev)), ("data.test", d.test),
            *((("data.nbest", d.nbest),) if d.nbest is not None else ())]


def _check_data(p: Params) -> None:
    """There is training data and a dev set (training keeps the checkpoint of the best dev
    perplexity), and no corpus serves two roles: a test set trained on, or chosen on as the dev
    set, measures nothing. (That each is a corpus of the registry is the check stage's:
    s2s.stages.check, so that a change of the registry reruns no other stage.)"""
    d = p.data
    roles = data_roles(p)
    for key in ("train", "dev"):
        if not getattr(d, key):
            raise _error(f"{p.source}: 'data.{key}' must name at least one corpus"
                         + (" (training keeps the checkpoint of the best dev perplexity)"
                            if key == "dev" else ""), p.source, p.origins)
    seen: dict[str, str] = {}
    for key, ref in roles[:-1] if d.nbest is not None else roles:
        if ref.corpus in seen:
            first = seen[ref.corpus]
            what = ("the same corpus twice" if first.split("[")[0] == key.split("[")[0]
                    else "a corpus in two roles (a set trained or chosen on is no test of them)")
            raise ConfigError(f"{p.source}: '{key}.corpus' names '{ref.corpus}', which "
                              f"'{first}' names already: {what}")
        seen[ref.corpus] = key


def _check_models(p: Params) -> None:
    from s2s.arch import ARCHITECTURES

    known = sorted({f.name for a in ARCHITECTURES.values() for f in dataclasses.fields(a.config)})
    for key in p.model:
        if key not in known:
            raise _error(f"{p.source}: unknown key 'model.{key}' (expected a field of an "
                         f"architecture's config: {', '.join(known)})", p.source, p.origins)
    for name, overrides in p.models.items():
        if overrides is None:
            raise _error(f"{p.source}: 'models.{name}' must be a mapping (use {{}} for none)",
                         p.source, p.origins)
        if not isinstance(overrides, dict):
            raise _error(f"{p.source}: 'models.{name}' must be a mapping, got {show(overrides)}",
                         p.source, p.origins)
        own = overrides.get("train")
        if own is not None and not isinstance(own, dict):
            raise _error(f"{p.source}: 'models.{name}.train' must be a mapping, got {show(own)}",
                         p.source, p.origins)
        cfg = p.model_config(name)
        p.train_config(name)  # its recipe, checked
        if getattr(cfg, "cell", None) == "peephole" and cfg.arch != "seq2seq":
            key = f"models.{name}.cell" if "cell" in overrides else "model.cell"
            raise ConfigError(f"{p.source}: '{key}' is 'peephole', which only the 'seq2seq' arch "
                              f"has (model '{name}' is arch '{cfg.arch}'): use 'lstm' or 'gru'"
                              + ("" if "cell" in overrides else
                                 f", or give models.{name} a cell of its own"))
    _check_model_defaults(p)
    _check_positions(p)


def _check_positions(p: Params) -> None:
    """A model with a table of positions (a Transformer's max_positions) has enough of them for
    a training pair of prepare.max_len tokens (its target read after its <bos>: max_len + 1
    positions; its source: max_len), which training is certain to meet; else its first long
    batch fails with a message that names no params key. (A test line, whose length no params
    bound, is checked against the search's need by the translate stage, naming the line.)"""
    need = p.prepare.max_len + 1
    for name in p.models:
        have = p.model_config(name).max_tokens()
        if have is not None and have < need:
            key = ("model.max_positions" if "max_positions" not in p.models[name]
                   and "max_positions" in p.model else f"models.{name}.max_positions")
            raise _error(f"{p.source}: '{key}' is {have}, fewer than the {need} positions model "
                         f"'{name}' needs for a training pair's target of prepare.max_len "
                         f"({p.prepare.max_len}) tokens, read after its <bos>", p.source,
                         p.origins)


def _check_model_defaults(p: Params) -> None:
    """Each key of `model` is the default of every model whose architecture's config has that
    field, whether or not a model of the file has that architecture yet: its value is checked
    against the type and range of each such config (after the models', whose messages come
    first), so that adding a model does not turn a default written long ago into an error."""
    from s2s.arch import ARCHITECTURES

    arch = p.model.get("arch", "seq2seq")
    if not isinstance(arch, str) or arch not in ARCHITECTURES:  # even if every model sets it
        raise _error(f"{p.source}: 'model.arch' must be one of {list(ARCHITECTURES)}, got "
                     f"{show(p.model['arch'])}", p.source, p.origins)
    archs: dict[type, list[str]] = {}  # a config class -> the archs it serves
    for a in ARCHITECTURES.values():
        archs.setdefault(a.config, []).append(a.name)
    for key, value in p.model.items():
        if key == "arch":  # each config takes only its own archs: checked above
            continue
        for cls, names in archs.items():
            fields = {f.name: f for f in dataclasses.fields(cls)}
            if key not in fields:
                continue
            try:
                _decode(typing.get_type_hints(cls)[key], value, p.source, f"model.{key}",
                        p.origins, fields[key].metadata)
            except ConfigError as e:
                kinds = " or ".join(f"'{n}'" for n in names)
                raise ConfigError(f"{e} (the default of every model of arch {kinds})") from None


def _check_systems(p: Params) -> None:
    for sname, system in p.systems.items():
        _check_members(p, f"systems.{sname}.members", system.members)
        if not system.beams:
            raise _error(f"{p.source}: 'systems.{sname}.beams' must list at least one width",
                         p.source, p.origins)
        for i, b in enumerate(system.beams):  # each >= 1: the schema's range
            if b in system.beams[:i]:
                raise _error(f"{p.source}: 'systems.{sname}.beams[{i}]' names beam {b} a second "
                             f"time: each beam is decoded once", p.source, p.origins)
        if system.nbest > system.widest_beam:
            raise ConfigError(f"{p.source}: 'systems.{sname}.nbest' ({system.nbest}) must not "
                              f"exceed its widest beam ({system.widest_beam})")


def _check_rescore(p: Params) -> None:
    if p.rescore.baseline is None:  # no Table 2 in this profile: nothing may ask for one
        if p.data.nbest is not None:
            raise ConfigError(f"{p.source}: 'data.nbest' names n-best lists to rescore, but "
                              f"'rescore.baseline' is null (no rescoring): name the baseline")
        for rname in p.rescore.rescorers:
            raise ConfigError(f"{p.source}: 'rescore.rescorers.{rname}' rescores the "
                              f"baseline's n-best lists, but 'rescore.baseline' is null (no "
                              f"rescoring in this profile): remove it or name a baseline")
        return
    if p.data.nbest is None:  # else the n-best lists are data.nbest's, not a system's
        _check_system(p, "rescore.baseline", p.rescore.baseline)
    for rname, members in p.rescore.rescorers.items():
        _check_members(p, f"rescore.rescorers.{rname}", members)


def _check_report(p: Params) -> None:
    r = p.report
    _check_system(p, "report.figure3_system", r.figure3_system)
    if r.figure3_beam not in p.systems[r.figure3_system].beams:
        raise ConfigError(f"{p.source}: 'report.figure3_beam' ({r.figure3_beam}) is not a "
                          f"beam of system '{r.figure3_system}'")
    for i, name in enumerate(r.figure3_compare):
        _check_system(p, f"report.figure3_compare[{i}]", name)
        if name in r.figure3_compare[:i]:
            raise _error(f"{p.source}: 'report.figure3_compare[{i}]' names system '{name}' a "
                         f"second time: each is drawn once", p.source, p.origins)
    # Whether each answer names an output the pipeline makes (a system at one of its beams, a
    # rescorer), and a row of the paper's, the check stage says (s2s.stages.check): loaded,
    # a row whose output the profile lacks is shown as not run.
    for table in ("table1", "table2"):
        for row, answer in getattr(r, table).items():
            key = f"report.{table}.{row}"
            try:
                _check_answer(p.source, key, answer)
            except ConfigError as e:
                raise _error(str(e), p.source, p.origins) from None
            if p.rescore.baseline is None and (answer.rescore is not None or answer.baseline):
                raise ConfigError(f"{p.source}: '{key}' is answered by the baseline or a "
                                  f"rescoring, but 'rescore.baseline' is null (no rescoring in "
                                  f"this profile): remove the row")


def _check_analysis(p: Params) -> None:
    a = p.analysis
    if not a.models:  # no analyze stage (s2s.stages.analyze.stages): nothing else runs in it
        for key in ("memory_models", "reach_replicas"):
            if getattr(a, key):
                raise ConfigError(f"{p.source}: 'analysis.{key}' names models, but "
                                  f"'analysis.models' is empty, and without it the analyze "
                                  f"stage does not run: name the models to analyse in "
                                  f"'analysis.models', or empty 'analysis.{key}'")
    for i, line in enumerate(a.phrases):  # s2s.analysis.probes.phrase_groups reads them
        if not all(q.strip() for q in line.split("|")):
            raise _error(f"{p.source}: 'analysis.phrases[{i}]' must be paraphrases separated by "
                         f"'|', none of them empty, got {line!r}", p.source, p.origins)
    for i, m in enumerate(a.models):
        _check_capable_model(p, f"analysis.models[{i}]", m, "analysis")
    # The memory analysis traces analysis.models where memory_models is empty or not written.
    key = "analysis.memory_models" if a.memory_models else "analysis.models"
    for i, m in enumerate(a.memory_models or a.models):
        try:
            _check_capable_model(p, f"{key}[{i}]", m, "memory")
        except ConfigError as e:
            if a.memory_models:
                raise
            raise ConfigError(f"{e}; 'analysis.memory_models' is empty or not written, so the "
                              f"memory analysis traces 'analysis.models': name the models it "
                              f"should trace in 'analysis.memory_models'") from None
    _check_reach_replicas(p)
    if a.attention_system is not None:
        _check_one_model_system(p, "analysis.attention_system", a.attention_system,
                                "attention_map")
    if a.cross_attention_system is not None:
        if a.attention_system is None:
            raise ConfigError(f"{p.source}: 'analysis.cross_attention_system' is drawn beside "
                              f"'analysis.attention_system', which is null")
        _check_one_model_system(p, "analysis.cross_attention_system", a.cross_attention_system,
                                "cross_attention_map")


def _check_reach_replicas(p: Params) -> None:
    """Each of `analysis.reach_replicas` a model that can be analysed, named once and not among
    `analysis.models`. Whether it pairs (:func:`seed_pairs`) is the analyze stage's to say (it
    leaves an unpaired one out, with a warning): an experiment that changes one model's setting
    or seed unpairs a replica, and must still run."""
    a = p.analysis
    for i, m in enumerate(a.reach_replicas):
        key = f"analysis.reach_replicas[{i}]"
        _check_capable_model(p, key, m, "analysis")
        if m in a.models or m in a.reach_replicas[:i]:
            raise ConfigError(f"{p.source}: '{key}' names model '{m}', which is already "
                              f"measured (in 'analysis.models' or earlier in this list)")


def _check_model(p: Params, key: str, model: str) -> None:
    """`key` names a model of params `models`."""
    if model not in p.models:
        raise ConfigError(f"{p.source}: '{key}' names model '{model}', which is not under "
                          f"'models' (known: {', '.join(p.models)})")


def _check_system(p: Params, key: str, system: str) -> None:
    """`key` names a system of params `systems`."""
    if system not in p.systems:
        raise ConfigError(f"{p.source}: '{key}' names system '{system}', which is not under "
                          f"'systems' (known: {', '.join(p.systems)})")


def _check_members(p: Params, key: str, members: tuple[str, ...]) -> None:
    """`key` lists an ensemble's members: at least one, each a model of params `models`, none
    twice (an ensemble of a model with itself is that model)."""
    if not members:
        raise _error(f"{p.source}: '{key}' must name at least one model", p.source, p.origins)
    for i, m in enumerate(members):
        _check_model(p, f"{key}[{i}]", m)
        if m in members[:i]:
            raise ConfigError(f"{p.source}: '{key}[{i}]' names model '{m}' a second time: an "
                              f"ensemble's members must differ")


def _check_answer(source: Path, key: str, a: PaperAnswer) -> None:
    kinds = [k for k, given in (("system", a.system is not None),
                                ("rescore", a.rescore is not None), ("baseline", a.baseline))
             if given]
    if len(kinds) != 1:
        raise ConfigError(f"{source}: '{key}' must give exactly one of 'system' (with 'beam'), "
                          f"'rescore' or 'baseline: true'"
                          + (f", not {' and '.join(kinds)}" if kinds else ""))
    if (a.system is None) != (a.beam is None):
        raise ConfigError(f"{source}: '{key}' must give 'beam' with 'system' and only with it")


def _check_capable_model(p: Params, key: str, model: str, what: str, *, system: str = "") -> None:
    """`key` names a model of params `models` (or the `system` whose one member it is) whose
    architecture can do `what` (a capability of ``s2s.arch.CAPABILITIES``)."""
    from s2s.arch import CAPABILITIES, able, capable

    _check_model(p, key, model)
    cfg = p.model_config(model)
    if not capable(cfg, what):
        kind = cfg.arch + (f", cell {cfg.cell}" if what == "forget_gates" else "")
        named = (f"system '{system}', whose model '{model}' ({kind})" if system else
                 f"model '{model}' ({kind}), which")
        raise ConfigError(f"{p.source}: '{key}' names {named} cannot do this: it needs "
                          f"{CAPABILITIES[what]} (architectures that can: "
                          f"{', '.join(able(what))})")


def _check_one_model_system(p: Params, key: str, name: str, what: str) -> None:
    """`key` (an analysis key naming a system whose weights are drawn) names a system of params
    `systems` with one model, whose architecture can do `what`."""
    _check_system(p, key, name)
    members = p.systems[name].members
    if len(members) != 1:
        raise ConfigError(f"{p.source}: '{key}' must name a system of one model; '{name}' has "
                          f"members {list(members)}")
    _check_capable_model(p, key, members[0], what, system=name)
