"""The pipeline's file layout: where each stage writes what later stages read, and the columns of
the tables they share, named here once for the stages that write them and those that read them
(prepare, vocab, ids, train, translate, rescore, evaluate, summary, export, analyze, attention,
timing, claims, report, verify, experiments). Torch-free and pandas-free, importing nothing of the
package: the ground floor every stage stands on. What a file holds is its typed record in
:mod:`s2s.artifacts`; the analyze stage's tables (:data:`ANALYSIS_TABLES`) are written and read by
:mod:`s2s.analysis.outputs`.

Translations and rescorings:

- ``<translate_dir>/<system>/beam<K>.{tok,detok}.fr``, ``beam<K>.nbest`` and ``timing.json``;
- ``<rescore_dir>/<rescorer>/<rescorer>.{tok,detok}.fr``: one folder per rescore stage, whose
  ``--out`` is :func:`rescore_stage_dir`; the stage ``oracle`` writes the baseline's own 1-best and
  the oracle's picks, ``<rescore_dir>/oracle/{baseline,oracle}.{tok,detok}.fr``.

An output is named by its *stem*, the path without ``.tok.fr`` / ``.detok.fr``
(:func:`hypothesis_files`).

Every stage from prepare to report takes its paths as one frozen record (:class:`PreparePaths`,
..., :class:`ReportPaths`): a field per path flag of the stage's ``ARGS``, built from its command
line by :meth:`StagePaths.from_args`, the files inside those folders its methods. check-params and
download take their one path as it is: importing this module would make them depend on it in
dvc.yaml, and rerun (a download's checksums) whenever the layout changes.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

SRC_LANG, TGT_LANG = "en", "fr"  # the pair the pipeline translates: English -> French
LANGS = (SRC_LANG, TGT_LANG)
SPLITS = ("train", "dev", "test")  # the prepare stage's splits, and the ids stage's

# The metrics folder (``metrics/``, DVC's metrics): the evaluate stage's BLEU, each training
# stage's metrics and learning curve, the summary and the verdicts that experiments compare.
BLEU_FILE = "bleu.json"  # metrics/bleu.json (s2s.artifacts.Bleu)
PREPARE_METRICS = "prepare.json"  # metrics/prepare.json (s2s.artifacts.PrepareMetrics)
VOCAB_METRICS = "vocab.json"  # metrics/vocab.json (s2s.artifacts.VocabMetrics)
TRAIN_DIR = "train"  # metrics/train/<model>.json (s2s.artifacts.TrainMetrics)
CURVES_DIR = "curves"  # metrics/curves/<model>.csv (CurveRow), beside metrics/train/
SUMMARY_FILE = "metrics/summary.json"  # the summary stage's (s2s.artifacts.Summary)
VERDICTS_FILE = "metrics/claims.json"  # claim id -> verdict: what experiments compare (s2s exps)

LENGTH_DROP_FILE = "length_drop.csv"  # the evaluate stage's, beside its Figure 3 groups
TIMING_FILE = "timing.json"  # in each system's folder of translations (s2s.artifacts.Timing)
COST_FILE = "outputs/timing/cost.json"  # the timing stage's (s2s.artifacts.CostTiming)
CLAIMS_OUT = "outputs/claims/claims.json"  # the claims stage's findings, which the report renders


@dataclass(frozen=True)
class CurveRow:
    """One row of a model's learning curve (``metrics/curves/<model>.csv``): a dev evaluation
    during training (s2s.train), also a resume point's history."""

    step: int
    epoch: float
    lr: float
    train_ppl: float
    dev_ppl: float


CURVE_COLUMNS = tuple(f.name for f in fields(CurveRow))

# The evaluate stage's tables: Figure 3's groups (``outputs/evaluate/figure3.csv``), one row per
# (system, beam, axis, group), and the length drop (``length_drop.csv``), with which columns hold
# numbers.
BUCKET_COLUMNS = ("axis", "label", "lo", "hi", "sentences", "mean", "bleu")
GROUP_COLUMNS = ("system", "beam", *BUCKET_COLUMNS)
GROUP_NUMBERS = BUCKET_COLUMNS[2:]  # beam is a label ("12")
DROP_COLUMNS = ("system", "beam", "short_label", "long_label", "short_bleu", "long_bleu", "drop",
                "drop_lo", "drop_hi", "reference", "drop_minus_reference", "diff_lo", "diff_hi")
DROP_NUMBERS = tuple(c for c in DROP_COLUMNS if c not in ("system", "beam", "short_label",
                                                         "long_label", "reference"))


# The analyze stage's folder (``outputs/analysis/``): its record and its tables, each with its
# columns in order, which of them hold numbers (an empty cell, NaN or inf is a number too) and how
# its floats are written. s2s.analysis.outputs writes and reads them (:class:`Analyses` there).
ANALYSIS_META = "analysis.json"  # s2s.artifacts.AnalysisMeta: what was measured, on what
MEASURED_FORMAT = "%.6g"  # the numbers of a measured table: six significant digits


@dataclass(frozen=True)
class AnalysisTable:
    """One table of the analyze stage's folder: its file name, its columns in order, which of them
    hold numbers, and how its floats are written (None: every digit, a float's shortest exact
    form, for the tables derived from the measured ones)."""

    name: str
    columns: tuple[str, ...]
    numbers: tuple[str, ...] = ()
    float_format: str | None = MEASURED_FORMAT
    # columns an earlier analyze stage did not write: a file without them is read with them
    # empty (NaN), so that a published run's folder still reads
    later: tuple[str, ...] = ()
    # a file an earlier analyze stage did not write: a folder without it reads it as no rows
    optional: bool = False


POINTS_COLUMNS = ("model", "reverse_source", "group", "phrase", "tokens", "unk", "x", "y")
FIGURE2_COLUMNS = ("model", "reverse_source", "representation", "dim", "explained_pc1",
                   "explained_pc2", "mean_pair_distance", "paraphrase_distance",
                   "paraphrase_pairs", "swap_distance", "swap_pairs", "nn_same_meaning",
                   "paraphrase_sd", "swap_sd")
HIST_COLUMNS = ("model", "stack", "layer", "bin_lo", "bin_hi", "count", "density")
UNIT_COLUMNS = ("model", "stack", "layer", "unit", "mean_f", "half_life", "geo_mean_f",
                "half_life_geo")
SUMMARY_COLUMNS = ("model", "stack", "layer", "steps", "units", "mean_f", "boundary_mean_f",
                   "inside_mean_f", "boundary_steps", "inside_steps", "median_half_life",
                   "max_half_life", "units_f_above_0.9", "units_half_life_above_10")
STACK_COLUMNS = ("model", "stack", "layers", "units", "mean_f", "units_half_life_above_10",
                 "max_half_life", "max_half_life_layer", "layers_compared",
                 "layers_boundary_lower")
REACH_COLUMNS = ("model", "reverse_source", "position", "sentences", "mean_norm", "mean_share")
REACH_FIRST_COLUMNS = ("model", "reverse_source", "positions", "mean_norm", "mean_share")
TRAINING_COLUMNS = ("model", "reverse_source", "epoch", "step", "position", "sentences",
                    "mean_norm", "mean_share")
TRAINING_FIRST_COLUMNS = ("model", "reverse_source", "epoch", "norm", "share")
TRAINING_DIFF_COLUMNS = ("epoch", "forward", "reversed", "statistic", "sentences",
                         "forward_mean", "reversed_mean", "diff", "lo", "hi")
INIT_REACH_COLUMNS = ("cell", "forget_bias", "step", "steps_back", "mean_norm", "std_norm",
                      "relative")
DECAY_COLUMNS = ("model", "stack", "layer", "steps_after", "sentences", "mean_abs_dc",
                 "mean_abs_dh", "forget_only_dc", "update_only_dh")
HALF_LIFE_COLUMNS = ("model", "layer", "half_life_c", "half_life_forget_only", "half_life_h",
                     "half_life_update_only")
GATE_SHARE_COLUMNS = ("model", "layer", "gate_share")


def _table(name: str, columns: tuple[str, ...], *, text: tuple[str, ...],
           derived: bool = False, later: tuple[str, ...] = (),
           optional: bool = False) -> AnalysisTable:
    return AnalysisTable(name, columns, tuple(c for c in columns if c not in text),
                         None if derived else MEASURED_FORMAT, later, optional)


# key (a field of s2s.analysis.outputs.Analyses) -> its table. Measured first, then derived.
ANALYSIS_TABLES: dict[str, AnalysisTable] = {
    # Figure 2: each phrase's PCA coordinates, and per model the variance and distances
    "points": _table("figure2.csv", POINTS_COLUMNS,
                     text=("model", "reverse_source", "phrase", "tokens", "unk")),
    "figure2": _table("figure2_summary.csv", FIGURE2_COLUMNS,
                      text=("model", "reverse_source", "representation"),
                      later=("paraphrase_sd", "swap_sd")),
    # forget gates: their histogram, each unit's mean and half-life, per layer
    "hist": _table("forget_hist.csv", HIST_COLUMNS, text=("model", "stack")),
    "units": _table("forget_units.csv", UNIT_COLUMNS, text=("model", "stack")),
    "forget": _table("forget_summary.csv", SUMMARY_COLUMNS, text=("model", "stack")),
    # gradient reach at the end of training, at each snapshot, and forward vs reversed
    "reach": _table("gradient_reach.csv", REACH_COLUMNS, text=("model", "reverse_source")),
    "training": _table("gradient_reach_training.csv", TRAINING_COLUMNS,
                       text=("model", "reverse_source")),
    "training_diff": _table("gradient_reach_training_diff.csv", TRAINING_DIFF_COLUMNS,
                            text=("forward", "reversed", "statistic")),
    # the same for every seed pair of a forward and a reversed model (analysis.reach_replicas):
    # the reversal argument's interval over seeds
    "seed_pairs": _table("gradient_reach_seed_pairs.csv", TRAINING_DIFF_COLUMNS,
                         text=("forward", "reversed", "statistic"), optional=True),
    # at initialisation, no trained model (s2s.analysis.init_reach)
    "init_reach": _table("init_reach.csv", INIT_REACH_COLUMNS, text=("cell",)),
    # memory of a one-word change
    "decay": _table("memory_decay.csv", DECAY_COLUMNS, text=("model", "stack")),
    "half_life": _table("memory_half_life.csv", HALF_LIFE_COLUMNS, text=("model",)),
    # derived (s2s.analysis.run): what the report and the claims quote
    "reach_first": _table("gradient_reach_first.csv", REACH_FIRST_COLUMNS,
                          text=("model", "reverse_source"), derived=True),
    "training_first": _table("gradient_reach_training_first.csv", TRAINING_FIRST_COLUMNS,
                             text=("model", "reverse_source"), derived=True),
    "stacks": _table("forget_stacks.csv", STACK_COLUMNS, text=("model", "stack"), derived=True),
    "gate_share": _table("memory_gate_share.csv", GATE_SHARE_COLUMNS, text=("model",),
                         derived=True),
}

BASELINE, ORACLE = "baseline", "oracle"
# Rescoring outputs the rescore stage `oracle` writes besides the rescorers' own.
RESCORE_FIXED = (BASELINE, ORACLE)
ORACLE_STAGE = "oracle"


def prepared_name(split: str, lang: str, form: str = "tok") -> str:
    """A file of the prepare stage's folder: ``<split>.<form>.<lang>``, for the splits ``train``,
    ``dev``, ``test``, the forms ``raw`` (the corpus's text, normalised: what sacreBLEU and the
    report's examples read) and ``tok`` (Moses-tokenised: what the models and the paper's BLEU
    read), and the languages ``en`` and ``fr``."""
    return f"{split}.{form}.{lang}"


def prepared_names(split: str, form: str = "tok") -> tuple[str, str]:
    """:func:`prepared_name` of the source and the target side."""
    return tuple(prepared_name(split, lang, form) for lang in LANGS)


def prepared_file(prepared_dir: Path, split: str, lang: str, form: str = "tok") -> Path:
    """:func:`prepared_name` in `prepared_dir`."""
    return Path(prepared_dir) / prepared_name(split, lang, form)


def vocab_name(lang: str) -> str:
    """The vocabulary of language `lang` (``word<TAB>count`` lines), in the vocab stage's folder
    and in an export."""
    return f"{lang}.tsv"


def vocab_file(vocab_dir: Path, lang: str) -> Path:
    """:func:`vocab_name` in `vocab_dir`."""
    return Path(vocab_dir) / vocab_name(lang)


MODEL_FILE, BEST_FILE = "model.pt", "best.pt"  # a train stage's weights: at the end, best on dev


def model_file(models_dir: Path, model: str) -> Path:
    """Model `model`'s final weights in the models folder (what translation loads)."""
    return Path(models_dir) / model / MODEL_FILE


def bleu_file(metrics_dir: Path) -> Path:
    """The evaluate stage's BLEU of every output (:class:`s2s.artifacts.Bleu`)."""
    return Path(metrics_dir) / BLEU_FILE


def train_metrics_file(metrics_dir: Path, model: str) -> Path:
    """Model `model`'s training metrics (:class:`s2s.artifacts.TrainMetrics`)."""
    return Path(metrics_dir) / TRAIN_DIR / f"{model}.json"


def train_metrics_files(metrics_dir: Path) -> list[Path]:
    """Every model's training metrics in `metrics_dir`, by file name."""
    return sorted((Path(metrics_dir) / TRAIN_DIR).glob("*.json"))


def hypothesis_files(stem: Path) -> tuple[Path, Path]:
    """The tokenised (the paper's BLEU input) and detokenised (sacreBLEU's) files of an output."""
    stem = Path(stem)
    return stem.with_name(stem.name + ".tok.fr"), stem.with_name(stem.name + ".detok.fr")


def nbest_file(stem: Path) -> Path:
    """The n-best list of an output (Moses format, :func:`nbest_line`)."""
    stem = Path(stem)
    return stem.with_name(stem.name + ".nbest")


def nbest_line(sentence: int, text: str, feature: str, score: float) -> str:
    """One line of an n-best list: ``id ||| hypothesis ||| <feature>=<score> ||| <score>``, the
    feature being the kind of the system's models (``lstm``, ``gru``, ``cho``, ...)."""
    return f"{sentence} ||| {text} ||| {feature}={score:.6f} ||| {score:.6f}"


def beam_stem(system_dir: Path, beam: int) -> Path:
    """The stem of a system's translation at beam `beam`, in the system's folder."""
    return Path(system_dir) / f"beam{beam}"


def translation(translate_dir: Path, system: str, beam: int) -> Path:
    """The stem of system `system`'s translation of the test set at beam `beam`."""
    return beam_stem(Path(translate_dir) / system, beam)


def timing_file(translate_dir: Path, system: str) -> Path:
    """System `system`'s timing.json (:class:`s2s.artifacts.Timing`)."""
    return Path(translate_dir) / system / TIMING_FILE


def rescore_stage_dir(rescore_dir: Path, rescorer: str) -> Path:
    """The folder rescore stage `rescorer` (a rescorer, or ``oracle``) writes into."""
    return Path(rescore_dir) / rescorer


def rescore_output(rescore_dir: Path, name: str) -> Path:
    """The stem of rescoring output `name`: a rescorer's, or ``baseline`` / ``oracle`` (both
    written by the stage ``oracle``)."""
    stage = ORACLE_STAGE if name in RESCORE_FIXED else name
    return rescore_stage_dir(rescore_dir, stage) / name


def rescore_system(name: str) -> str:
    """The ``system`` of rescoring output `name` in the evaluate stage's groups table
    (figure3.csv), where translations have their system's name."""
    return f"rescore/{name}"


@dataclass(frozen=True, kw_only=True)
class StagePaths:
    """A stage's paths as one value: a field per path flag of its ``ARGS`` (``--model-dir`` is
    ``model_dir``), each a Path (a string given is made one), None for an optional flag the
    command left out."""

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None and not isinstance(value, Path):
                object.__setattr__(self, f.name, Path(value))

    @classmethod
    def from_args(cls, args) -> StagePaths:
        """The record of a parsed command line (:mod:`s2s.cli`)."""
        return cls(**{f.name: getattr(args, f.name) for f in fields(cls)})


class _TestSet:
    """The test set in the prepare stage's folder `prepared`, for the records that read it."""

    prepared: Path | None

    @property
    def source(self) -> Path:
        """The tokenised source (what the models translate)."""
        return prepared_file(self.prepared, "test", SRC_LANG)

    @property
    def references(self) -> Path:
        """The tokenised references (the paper's BLEU)."""
        return prepared_file(self.prepared, "test", TGT_LANG)

    @property
    def source_raw(self) -> Path:
        """The source as the corpus has it, normalised (the report's examples)."""
        return prepared_file(self.prepared, "test", SRC_LANG, form="raw")

    @property
    def references_raw(self) -> Path:
        """The references as the corpus has them, normalised (sacreBLEU's)."""
        return prepared_file(self.prepared, "test", TGT_LANG, form="raw")


class _Translations(_TestSet):
    """The translate stages' outputs under `translate`."""

    translate: Path

    def translation(self, system: str, beam: int) -> Path:
        return translation(self.translate, system, beam)


class _Measured:
    """What the other stages measured, as the summary, claims and report stages read it
    (:func:`s2s.artifacts.read_measured`): the evaluate and train stages' files under `metrics`,
    the translate stages' timings under `translate`."""

    metrics: Path
    translate: Path

    @property
    def bleu(self) -> Path:
        return bleu_file(self.metrics)

    def train_metrics(self, model: str) -> Path:
        return train_metrics_file(self.metrics, model)

    def timing(self, system: str) -> Path:
        return timing_file(self.translate, system)


class _ScoresOutputs(_Translations):
    """The outputs a stage scores against the references (evaluate, claims): the translations,
    and the rescorings under `rescore`."""

    rescore: Path | None

    def rescoring(self, name: str) -> Path:
        """The stem of rescoring output `name` (under `rescore`, which must be set)."""
        return rescore_output(self.rescore, name)


@dataclass(frozen=True, kw_only=True)
class PreparePaths(StagePaths):
    """The prepare stage's paths (s2s.stages.prepare)."""

    raw: Path  # the download stage's folder
    out: Path  # the prepared text (prepared_file)
    metrics: Path  # metrics/prepare.json


@dataclass(frozen=True, kw_only=True)
class VocabPaths(StagePaths):
    """The vocab stage's paths (s2s.stages.vocab)."""

    prepared: Path
    out: Path  # en.tsv, fr.tsv (vocab_file)
    metrics: Path  # metrics/vocab.json


@dataclass(frozen=True, kw_only=True)
class IdsPaths(StagePaths):
    """The ids stage's paths (s2s.stages.ids)."""

    prepared: Path
    vocab: Path
    out: Path  # the arrays and their record (s2s.data.ids)


@dataclass(frozen=True, kw_only=True)
class TrainPaths(StagePaths):
    """Where one training run reads and writes (s2s.stages.train, s2s.train). `snapshots`: the
    snapshot folder of an analysed model, else None."""

    ids: Path  # the ids stage's folder, memory-mapped
    vocab: Path  # en.tsv, fr.tsv
    model_dir: Path  # model.pt, best.pt
    ckpt_dir: Path  # last.pt, the resume point (no DVC output), and the snapshots' work folder
    metrics: Path  # metrics/train/<name>.json
    curves: Path  # metrics/curves/<name>.csv
    snapshots: Path | None = None

    @property
    def last(self) -> Path:
        return self.ckpt_dir / "last.pt"


@dataclass(frozen=True, kw_only=True)
class TranslatePaths(_TestSet, StagePaths):
    """The translate stage's paths (s2s.stages.translate)."""

    prepared: Path
    vocab: Path
    models: Path  # <models>/<member>/model.pt
    out: Path  # the system's folder

    def outputs(self, beam: int) -> tuple[Path, Path, Path]:
        """The translation at beam `beam`: its tokenised and detokenised best hypotheses
        (:func:`hypothesis_files`) and its n-best list (:func:`nbest_file`)."""
        stem = beam_stem(self.out, beam)
        return (*hypothesis_files(stem), nbest_file(stem))

    @property
    def timing(self) -> Path:
        return self.out / TIMING_FILE


@dataclass(frozen=True, kw_only=True)
class RescorePaths(_TestSet, StagePaths):
    """A rescore stage's paths (s2s.stages.rescore)."""

    translate: Path  # the baseline system's n-best lists, where the profile makes them
    raw: Path  # data.nbest's, where the profile names a baseline's lists
    prepared: Path
    vocab: Path
    models: Path
    out: Path  # the rescore stage's folder

    def output(self, name: str) -> Path:
        """The stem of output `name` (the rescorer, or ``baseline`` / ``oracle``)."""
        return self.out / name


@dataclass(frozen=True, kw_only=True)
class EvaluatePaths(_ScoresOutputs, StagePaths):
    """The evaluate stage's paths (s2s.stages.evaluate). `rescore` None: the profile rescores
    nothing."""

    translate: Path
    rescore: Path | None = None
    prepared: Path
    vocab: Path
    metrics: Path  # metrics/bleu.json
    groups: Path  # Figure 3's groups CSV

    @property
    def source_vocab(self) -> Path:
        """The source vocabulary, whose counts rank the words (Figure 3's rarity)."""
        return vocab_file(self.vocab, SRC_LANG)

    @property
    def length_drop(self) -> Path:
        return self.groups.with_name(LENGTH_DROP_FILE)


@dataclass(frozen=True, kw_only=True)
class SummaryPaths(_Measured, StagePaths):
    """The summary stage's paths (s2s.stages.summary)."""

    metrics: Path  # the metrics folder it reads
    translate: Path  # each system's timing.json
    groups: Path  # Figure 3's groups CSV
    out: Path  # metrics/summary.json
    plots: Path  # DVC's plot data folder

    def figure3_plot(self, axis: str) -> Path:
        """Figure 3's curves on axis `axis` (``length``, ``rarity``) as DVC plot data."""
        return self.plots / f"figure3_{axis}.csv"


@dataclass(frozen=True, kw_only=True)
class ClaimsPaths(_Measured, _ScoresOutputs, StagePaths):
    """The claims stage's paths (s2s.stages.claims). Its command passes every flag but the
    optional ones; a record built in process (a test's) may leave out `prepared`: no paired
    bootstraps over the test sentences (the verdicts that need one say so), and `verdicts`: no
    metrics/claims.json."""

    metrics: Path  # bleu.json and train/
    translate: Path  # each system's outputs and timing.json
    rescore: Path | None = None  # where the profile rescores
    prepared: Path | None = None  # test.tok.fr, the bootstraps' references
    analysis: Path | None = None
    cost: Path | None = None
    out: Path  # the findings, which the report renders
    verdicts: Path | None = None  # claim id -> verdict, which experiments compare


@dataclass(frozen=True, kw_only=True)
class ReportPaths(_Measured, _Translations, StagePaths):
    """The report stage's paths (s2s.stages.report); the optional ones' sections are left out
    without them."""

    metrics: Path  # bleu.json, train/, curves/, prepare.json, vocab.json
    translate: Path  # each system's timing.json and, for the examples, its outputs
    groups: Path  # Figure 3's groups CSV (length_drop.csv beside it)
    manifest: Path  # the download stage's
    attention: Path | None = None
    analysis: Path | None = None
    prepared: Path | None = None  # the raw test set, for the example translations
    cost: Path | None = None
    claims: Path  # the claims stage's findings
    out: Path  # reports/

    @property
    def length_drop(self) -> Path:
        return self.groups.with_name(LENGTH_DROP_FILE)

    @property
    def curves(self) -> Path:
        """The learning curves' folder (metrics/curves/<model>.csv)."""
        return self.metrics / CURVES_DIR

    @property
    def prepare_metrics(self) -> Path:
        return self.metrics / PREPARE_METRICS

    @property
    def vocab_metrics(self) -> Path:
        return self.metrics / VOCAB_METRICS

    @property
    def figures(self) -> Path:
        return self.out / "figures"

    @property
    def tables(self) -> Path:
        return self.out / "tables"

    def table(self, key: str) -> tuple[Path, Path]:
        """The CSV (raw numbers) and Markdown files of the report's table `key`."""
        return self.tables / f"{key}.csv", self.tables / f"{key}.md"

    @property
    def documents(self) -> tuple[Path, Path]:
        """report.md and report.html."""
        return self.out / "report.md", self.out / "report.html"


@dataclass(frozen=True, kw_only=True)
class ExportPaths(StagePaths):
    """The export stage's paths (s2s.stages.export)."""

    models: Path
    vocab: Path
    prepared: Path  # the training text, whose fingerprint an export records
    out: Path  # one folder per system


@dataclass(frozen=True, kw_only=True)
class AnalyzePaths(StagePaths):
    """The analyze stage's paths (s2s.stages.analyze). `models` None: the models are given as
    files by name (a test's); `snapshots` None: no gradient reach over training."""

    prepared: Path
    vocab: Path
    models: Path | None = None
    snapshots: Path | None = None  # the train stages' snapshot folders
    out: Path  # the analyses' folder (s2s.analysis.outputs)


@dataclass(frozen=True, kw_only=True)
class AttentionPaths(_Translations, StagePaths):
    """The attention stage's paths (s2s.stages.attention)."""

    prepared: Path
    vocab: Path
    models: Path
    translate: Path  # the drawn systems' own translations
    out: Path  # weights.json


@dataclass(frozen=True, kw_only=True)
class TimingPaths(_TestSet, StagePaths):
    """The timing stage's paths (s2s.stages.timing)."""

    prepared: Path
    vocab: Path
    models: Path
    out: Path  # cost.json
