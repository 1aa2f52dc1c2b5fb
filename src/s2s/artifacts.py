"""The pipeline's JSON artifacts as typed records: one schema for the stage that writes a file and
for every stage that reads it. Each record's docstring names its file (an export's
``export.json``: :mod:`s2s.exporting`).

Each record is a frozen dataclass. ``Record.read(path)`` and ``Record.from_json(obj, source=path)``
check the whole file against the record's fields and their types (:func:`s2s.schema.decode`, which
reads params too): a missing key, an unknown key or a value of the wrong type raises
:class:`ArtifactError` naming the file and the key path
(``metrics/bleu.json: 'translate.ensemble5.12.bleu_tok' must be a number, got str 'x'``).
``to_json()`` is what the writer writes (``Record.write``). A mapping keyed by beam width holds int
keys here and decimal strings (``"12"``) in the file, as JSON keys must be strings.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from s2s.schema import Rules, decode

R = TypeVar("R", bound="Record")
log = logging.getLogger("s2s.artifacts")

# A field with this metadata is left out of the file when it is None (the writer writes the key
# only sometimes: `processes` of a data-parallel run, `downloads` of a network download).
OMIT_NONE = {"omit_none": True}


class ArtifactError(ValueError):
    """An artifact file that does not match its record: the message names the file and the key."""


RULES = Rules(ArtifactError)  # how s2s.schema reads an artifact: what its writer wrote, typed


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ArtifactError(f"{path}: not found") from None
    except UnicodeDecodeError as e:
        raise ArtifactError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None


def read_table(path: str | Path, *, columns: tuple[str, ...], numbers: tuple[str, ...] = (),
               later: tuple[str, ...] = (), **read_csv):
    """A CSV file a stage wrote (pandas ``to_csv``), checked before anything is drawn from it,
    then parsed by ``pandas.read_csv(**read_csv)``: UTF-8; a header holding `columns`; every row
    with as many fields as the header and a line end after the last (a file cut mid-row is an
    error, never fewer points); each value of `numbers` a number (or empty). `later`: columns of
    `columns` that a file of an earlier writer lacks: where absent they are neither required
    nor checked (the caller fills them). ArtifactError naming the file, the line and what is
    wrong."""
    import csv
    import io

    import pandas as pd

    path = Path(path)
    text = _read_text(path)
    if not text.strip():
        raise ArtifactError(f"{path}: empty (no header line)")
    if not text.endswith("\n"):
        raise ArtifactError(f"{path}: cut short: its last line has no line end (a file cut "
                            f"mid-row); rerun the stage that writes it")
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as e:
        raise ArtifactError(f"{path}: not CSV ({e})") from None
    header = rows[0]
    missing = [c for c in columns if c not in header and c not in later]
    if missing:
        raise ArtifactError(f"{path}: no column '{missing[0]}' (the header has: "
                            f"{', '.join(header) or 'nothing'})")
    for n, row in enumerate(rows[1:], 2):
        if len(row) != len(header):
            raise ArtifactError(f"{path}:{n}: {len(row)} fields, the header has {len(header)}")
    frame = pd.read_csv(io.StringIO(text), **read_csv)
    for c in numbers:
        if c in later and c not in header:
            continue
        raw = frame[c].astype(str)
        values = pd.to_numeric(frame[c], errors="coerce")
        bad = values.isna() & frame[c].notna() & ~raw.isin(["", "nan", "NaN"])
        if bad.any():
            n = int(bad.to_numpy().nonzero()[0][0])
            raise ArtifactError(f"{path}:{n + 2}: column '{c}' must be a number, got "
                                f"{frame[c].iloc[n]!r}")
    return frame


class Record:
    """JSON <-> frozen dataclass, by the dataclass's type hints (see the module docstring)."""

    @classmethod
    def from_json(cls: type[R], obj: Any, *, source: str | Path = "<json>") -> R:
        """The record of `obj` (a parsed JSON object); ArtifactError naming `source` and the key."""
        return decode(cls, obj, str(source), "", RULES)

    @classmethod
    def read(cls: type[R], path: str | Path) -> R:
        """The record of the JSON file `path`; ArtifactError if it is missing, not JSON, or does not
        match."""
        path = Path(path)
        text = _read_text(path)
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise ArtifactError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
        return cls.from_json(obj, source=path)

    @classmethod
    def read_if_present(cls: type[R], path: str | Path, read: list[str]) -> R | None:
        """The record of `path`, appended to `read`; None (logged) where there is no such file.
        A file that is there and does not match is an error, as with :meth:`read`."""
        if not Path(path).is_file():
            log.warning("absent: %s", path)
            return None
        read.append(str(path))
        return cls.read(path)

    def to_json(self) -> dict:
        """The JSON object of the file, keys in the order of the fields."""
        return _encode(self)

    def write(self, path: str | Path) -> None:
        """Write the file atomically (s2s.io), as every stage writes JSON."""
        from s2s.io import atomic_write_json

        atomic_write_json(Path(path), self.to_json())


# --- metrics/bleu.json ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Scored(Record):
    """The BLEU of one output: tokenised (the paper's method) and sacreBLEU 13a, with its
    signature, over `sentences` test sentences."""

    bleu_tok: float
    bleu_sacre: float
    sacre_signature: str
    sentences: int


@dataclass(frozen=True)
class Absent(Record):
    """An output that was not there to score (the report shows it as "not run": `reason`)."""

    absent: Literal[True]
    reason: str

    @classmethod
    def because(cls, reason: str) -> "Absent":
        return cls(absent=True, reason=reason)


BleuEntry = typing.Union[Scored, Absent]


@dataclass(frozen=True)
class Bleu(Record):
    """``metrics/bleu.json``: every translation (system, beam) and rescoring output, scored."""

    test_sentences: int
    bleu_tok_method: str
    bleu_tok_signature: str
    translate: dict[str, dict[int, BleuEntry]]  # system -> beam -> entry
    rescore: dict[str, BleuEntry]  # rescoring output (a rescorer, baseline, oracle) -> entry

    def translation(self, system: str, beam: int) -> BleuEntry | None:
        """The entry of system `system` at beam `beam`; None if the file has none."""
        return self.translate.get(system, {}).get(beam)

    def rescoring(self, name: str) -> BleuEntry | None:
        """The entry of rescoring output `name`; None if the file has none."""
        return self.rescore.get(name)

    def entry(self, kind: str, system: str, beam: int | None = None) -> BleuEntry | None:
        """The entry of a translation (`kind` "translate": `system` at `beam`) or of a rescoring
        output (any other kind: `system` names it); None if the file has none."""
        return self.translation(system, beam) if kind == "translate" else self.rescoring(system)


# --- outputs/translate/<system>/timing.json ------------------------------------------------------




@dataclass(frozen=True)
class BeamTiming(Record):
    sentences: int
    seconds: float  # decoding only: no model loading
    sents_per_sec: float

    @property
    def ms_per_sentence(self) -> float:
        return 1000.0 * self.seconds / max(self.sentences, 1)


@dataclass(frozen=True)
class Timing(Record):
    """``outputs/translate/<system>/timing.json``: the decoding time of each beam width."""

    system: str
    members: tuple[str, ...]
    device: str
    threads: int
    precision: str  # s2s.precision.name: of the matmuls
    beams: dict[int, BeamTiming]


# --- outputs/timing/cost.json --------------------------------------------------------------------


@dataclass(frozen=True)
class TimedSystem(Record):
    system: str
    beam: int
    ms_per_sentence: tuple[float, ...]  # one per repetition, in the order they ran


@dataclass(frozen=True)
class CostTiming(Record):
    """``outputs/timing/cost.json``: the cost claim's systems, decoded in turns (system 1, system
    2, ..., then again), each `repetitions` times in one process on one thread. `device`: the
    GPU they decoded on (s2s.device.describe), absent for the CPU, whose kind `cpu` names."""

    sentences: int
    threads: int
    precision: str
    cpu: str
    systems: tuple[TimedSystem, ...]
    device: str | None = dataclasses.field(default=None, metadata=OMIT_NONE)

    @classmethod
    def from_json(cls, obj: Any, *, source: str | Path = "<json>") -> "CostTiming":
        """The record, refused (ArtifactError naming the key) where the cost claim could not
        pair its repetitions: a system timed twice, repetition counts that differ or are below
        two, a time that is not a positive number, no sentence."""
        record = super().from_json(obj, source=source)
        if record.sentences < 1:
            raise ArtifactError(f"{source}: 'sentences' must be >= 1, got {record.sentences}")
        seen: dict[tuple[str, int], int] = {}
        first = len(record.systems[0].ms_per_sentence) if record.systems else 0
        for i, t in enumerate(record.systems):
            key = f"systems[{i}]"
            if (t.system, t.beam) in seen:
                raise ArtifactError(f"{source}: '{key}' times {t.system} at beam {t.beam} again "
                                    f"(also 'systems[{seen[t.system, t.beam]}]')")
            seen[t.system, t.beam] = i
            n = len(t.ms_per_sentence)
            if n < 2 or n != first:
                raise ArtifactError(f"{source}: '{key}.ms_per_sentence' has {n} repetition(s); "
                                    f"expected two or more, as many as 'systems[0]' ({first}): "
                                    f"the systems are timed in turns")
            bad = next((j for j, v in enumerate(t.ms_per_sentence)
                        if not (math.isfinite(v) and v > 0)), None)
            if bad is not None:
                raise ArtifactError(f"{source}: '{key}.ms_per_sentence[{bad}]' must be a "
                                    f"positive number of milliseconds, got "
                                    f"{t.ms_per_sentence[bad]!r}")
        return record


# --- metrics/train/<model>.json ------------------------------------------------------------------


@dataclass(frozen=True)
class TrainMetrics(Record):
    """``metrics/train/<model>.json``: what training one model gave and cost (s2s.train)."""

    model: str
    reverse_source: bool
    # The recurrent models' size; another architecture's is `architecture` (its config's shape()).
    cell: str | None = dataclasses.field(default=None, metadata=OMIT_NONE, kw_only=True)
    num_layers: int | None = dataclasses.field(default=None, metadata=OMIT_NONE, kw_only=True)
    hidden_size: int | None = dataclasses.field(default=None, metadata=OMIT_NONE, kw_only=True)
    embed_size: int | None = dataclasses.field(default=None, metadata=OMIT_NONE, kw_only=True)
    architecture: dict[str, int | str] | None = dataclasses.field(default=None, metadata=OMIT_NONE,
                                                                   kw_only=True)
    parameters: int
    device: str
    precision: str  # s2s.precision.name: of the matmuls
    threads: int
    epochs: float
    steps: int
    train_pairs: int
    train_target_words: int  # <eos> included
    tgt_words_per_sec: float
    train_seconds: float
    wall_seconds: float  # the whole stage: loading, training, evaluation
    dev_ppl: float  # at the last evaluation
    test_ppl: float
    best_dev_ppl: float
    processes: int | None = dataclasses.field(default=None, metadata=OMIT_NONE)  # data-parallel
    # off the CPU: every part's precision in one phrase (s2s.precision.Precision.engine)
    engine: str | None = dataclasses.field(default=None, metadata=OMIT_NONE)
    # on the CPU: its kind (s2s.precision.cpu_kind), on which bf16 bits depend; absent in
    # records written before it was recorded
    cpu: str | None = dataclasses.field(default=None, metadata=OMIT_NONE)

    def machine(self) -> str:
        """Where it trained, in words: "cpu (AMD EPYC (...))", "cuda (NVIDIA H200)"."""
        return f"{self.device} ({self.cpu})" if self.cpu else self.device


# --- what the summary, claims and report stages read of the others' measurements ---------------


@dataclass(frozen=True)
class Measured:
    """What the evaluate, train and translate stages measured, as the summary, claims and report
    stages read it (:func:`read_measured`): the BLEU of every output, each model's training
    metrics and each system's decoding timing."""

    bleu: Bleu
    train: dict[str, TrainMetrics]  # by model
    timing: dict[str, Timing]  # by system


class MeasuredFiles(typing.Protocol):
    """Where they are (:class:`s2s.layout.SummaryPaths`, ``ClaimsPaths``, ``ReportPaths``)."""

    @property
    def bleu(self) -> Path: ...

    def train_metrics(self, model: str) -> Path: ...

    def timing(self, system: str) -> Path: ...


def read_measured(paths: MeasuredFiles, models: typing.Iterable[str],
                  systems: typing.Iterable[str], read: list[str]) -> Measured:
    """`metrics/bleu.json` (required: FileNotFoundError naming it), and the training metrics of
    `models` and the timings of `systems` where they are there (each absent one logged); every
    file read is appended to `read`. A training metrics file of another model than its name
    says, or a timing of another system, is an ArtifactError naming the file."""
    if not paths.bleu.is_file():
        raise FileNotFoundError(f"{paths.bleu}: no BLEU metrics; run the evaluate stage first")
    read.append(str(paths.bleu))
    bleu = Bleu.read(paths.bleu)
    train = _read_each(TrainMetrics, models, paths.train_metrics, "model", "train", read)
    timing = _read_each(Timing, systems, paths.timing, "system", "translate", read)
    return Measured(bleu=bleu, train=train, timing=timing)


def _read_each(record, names: typing.Iterable[str], path_of, field: str, stage: str,
               read: list[str]) -> dict:
    """The `record` at ``path_of(name)`` of each of `names` that has one, by name; one whose
    `field` is another name than its path's is an ArtifactError naming the file."""
    got = {n: r for n in names if (r := record.read_if_present(path_of(n), read)) is not None}
    for n, r in got.items():
        if getattr(r, field) != n:
            raise ArtifactError(f"{path_of(n)}: {field!r} is {getattr(r, field)!r}, not the "
                                f"{field} its path names ({n!r}); rerun {stage}-{n}")
    return got


# --- data/raw/manifest.json ----------------------------------------------------------------------


@dataclass(frozen=True)
class RawFile(Record):
    path: str  # relative to the manifest's folder
    source: str  # the mirror file, or the URL(s) and archive member(s) it was cut from
    sha256: str
    bytes: int
    lines: int


@dataclass(frozen=True)
class Download(Record):
    url: str
    sha256: str
    bytes: int
    verified: Literal["sha256", "md5", "none"]  # the checksum checked against the registry


@dataclass(frozen=True)
class CorpusRecord(Record):
    mode: Literal["mirror", "network"]
    source: str | tuple[str, ...]  # the mirror folder, or the URLs downloaded
    format: str
    pairs: int
    whole_corpus: bool  # false for a mirror's head of a corpus
    max_lines: int | None  # as params asked (prepare applies it); None: all
    lines: dict[str, int]  # side -> lines
    files: dict[str, RawFile]  # side (en, fr) -> file
    downloads: dict[str, Download] | None = dataclasses.field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True)
class Manifest(Record):
    """``data/raw/manifest.json``: every corpus fetched, where from, and its files' checksums."""

    mode: Literal["mirror", "network"]
    mirror: str | None
    corpora: dict[str, CorpusRecord]


# --- metrics/params.json, metrics/prepare.json, metrics/vocab.json ----------------------------------


@dataclass(frozen=True)
class ParamsCheck(Record):
    """``metrics/params.json``: the parameter file passed ``s2s check`` (the check-params stage)."""

    valid: Literal[True]
    name_pattern: str  # what a model, system or rescorer name must match


@dataclass(frozen=True)
class TrainCounts(Record):
    """A training corpus through the filters of ``prepare`` (s2s.data.prepare.FilterCounts)."""

    lines_in: int
    removed: dict[str, int]  # by filter: empty, too_long, ratio, duplicate
    lines_out: int
    tokens_en: int
    tokens_fr: int
    cleaned: dict[str, int]  # what reading it normalised (s2s.data.text.read_corpus)


@dataclass(frozen=True)
class EvalCounts(Record):
    """A dev or test corpus: read whole, never filtered."""

    lines_in: int
    lines_out: int
    empty_en: int
    empty_fr: int
    cleaned: dict[str, int]


@dataclass(frozen=True)
class SplitTotal(Record):
    lines_out: int


@dataclass(frozen=True)
class PrepareMetrics(Record):
    """``metrics/prepare.json``: what each filter removed, by split and corpus."""

    splits: dict[str, dict[str, TrainCounts | EvalCounts]]  # split -> corpus -> counts
    totals: dict[str, SplitTotal]


@dataclass(frozen=True)
class VocabSide(Record):
    size: int  # with the 4 specials
    words: int
    train_types: int
    unk_rate: dict[str, float]  # split -> share of tokens outside the vocabulary


@dataclass(frozen=True)
class VocabMetrics(Record):
    """``metrics/vocab.json``: each side's vocabulary."""

    en: VocabSide
    fr: VocabSide

    def sides(self) -> dict[str, VocabSide]:
        return {"en": self.en, "fr": self.fr}


# --- metrics/summary.json ------------------------------------------------------------------------


@dataclass(frozen=True)
class Summary(Record):
    """``metrics/summary.json``: the run in a few numbers (git-tracked; `dvc exp show`)."""

    bleu: dict[str, dict[str, float]]  # system -> "b<beam>" -> tokenised BLEU
    rescore: dict[str, float]  # rescoring output -> tokenised BLEU
    ppl: dict[str, float]  # model -> test perplexity
    minutes: dict[str, float]  # train (the training loops, over every resume), decode


# --- outputs/claims/claims.json -----------------------------------------------------------------




# What a claim's verdict can be (Claim.status; s2s.claims.verdicts names each), in the order the
# summary lists them.
# "not run in this profile": the profile lacks the systems, rows or stages the claim rests on.
VERDICTS = ("holds", "does not hold", "no significant difference", "cannot tell",
            "not run in this profile")


def read_verdicts(path: str | Path) -> dict[str, str]:
    """``metrics/claims.json`` as the claims stage writes it (:meth:`Claims.verdicts`): a
    non-empty object of claim id -> one of :data:`VERDICTS`, for the readers that render or
    compare a run's verdicts (the headline, `s2s verify`): ArtifactError naming the file, and
    the line or the key. (`s2s exps` reads every experiment's copy more leniently, marking only
    what is not an object of strings: an older experiment may hold verdicts of an older
    version.)"""
    path = Path(path)
    text = _read_text(path)
    try:
        claims = json.loads(text)
    except json.JSONDecodeError as e:
        raise ArtifactError(f"{path}:{e.lineno}: not valid JSON ({e.msg}): cut short or "
                            f"edited; rerun the stage that writes it") from None
    if not isinstance(claims, dict):
        raise ArtifactError(f"{path}: expected an object of claim id -> verdict, got "
                            f"{type(claims).__name__}")
    if not claims:
        raise ArtifactError(f"{path}: no claim's verdict (an empty object): rerun the claims "
                            f"stage that writes it")
    for cid, verdict in claims.items():
        if not isinstance(verdict, str):
            raise ArtifactError(f"{path}: '{cid}' must be a verdict (a string), got "
                                f"{json.dumps(verdict)}")
        if verdict not in VERDICTS:
            raise ArtifactError(f"{path}: '{cid}' must be a verdict ({', '.join(VERDICTS)}), "
                                f"got {json.dumps(verdict)}")
    return claims


@dataclass(frozen=True)
class ClaimDifference(Record):
    """A difference a verdict rests on: `value` (the side the claim favours minus the other,
    as `label` says), in `unit`, with its 95% interval over `over` (lo and hi None: none)."""

    label: str  # "reversed - forward", "ensemble5 beam 12 - beam 1", "forward - reversed"
    unit: str  # "BLEU" (tokenized), "dev ppl", "ms/sentence", "share" (of the gradient at the
    #            first source words), "gradient norm", "distance" (relative, Figure 2)
    value: float
    lo: float | None
    hi: float | None
    over: str  # what the interval is over: "test sentences" (a paired bootstrap), "3 seed pairs",
    #            "5 repetitions"; "" without one


@dataclass(frozen=True)
class Claim(Record):
    """One claim checked against our numbers (s2s.claims): what it says and the paper's numbers
    (paper.yaml), ours in the same form, the differences its verdict rests on with their
    intervals, the verdict, and the evidence in words."""

    key: str  # its id: paper.yaml `claims`, or baseline_strength
    statement: str  # the claim, without numbers
    paper: str  # where the paper makes it, with its numbers ("paper: 26.17 -> 30.59 at beam 12")
    status: str  # holds | does not hold | no significant difference | cannot tell
    ours: str  # our numbers in the paper's form; "" when there are none
    differences: tuple[ClaimDifference, ...]
    evidence: str  # the numbers it rests on, with their intervals, in words

    @property
    def claim(self) -> str:
        """The claim as the claims table words it: the statement, then the paper's numbers."""
        return f"{self.statement} ({self.paper})" if self.paper else self.statement


@dataclass(frozen=True)
class Claims(Record):
    """``outputs/claims/claims.json``: every verdict of the report, computed by the claims stage
    (the paired bootstraps over test sentences, the intervals over seeds, the timing interval),
    so that the report only renders them and re-rendering it recomputes nothing."""

    intervals: bool  # the BLEU differences carry paired-bootstrap intervals (hypotheses read)
    claims: tuple[Claim, ...]  # the claims table, in its order
    setting: Claim  # Table 2's setting: is our baseline as strong as the paper's?
    forget_bias: tuple[str, ...]  # the forget-bias section's verdicts, one per compared pair

    def verdicts(self) -> dict[str, str]:
        """claim id -> verdict: metrics/claims.json."""
        return {c.key: c.status for c in (*self.claims, self.setting) if c.key}


# --- snapshots/<model>/snapshots.json ------------------------------------------------------------


@dataclass(frozen=True)
class SnapshotEntry(Record):
    epoch: float
    step: int  # taken before this step's update
    file: str  # in the snapshot folder


@dataclass(frozen=True)
class SnapshotIndex(Record):
    """``snapshots/<model>/snapshots.json`` (s2s.snapshots): the snapshots a train stage kept."""

    steps_per_epoch: int
    total_steps: int
    final_epoch: float
    snapshots: tuple[SnapshotEntry, ...]


# --- outputs/analysis/analysis.json --------------------------------------------------------------


@dataclass(frozen=True)
class AnalysedModel(Record):
    """A model the analyze stage measured, as its checkpoint describes it."""

    path: str
    reverse_source: bool
    arch: str
    cell: str
    forget_gates: bool  # its gates were traced (s2s.arch: the capability `forget_gates`)
    num_layers: int
    hidden_size: int


@dataclass(frozen=True)
class AnalysisTest(Record):
    """How many test sentences each analysis read."""

    pairs: int  # the test set
    gate_sentences: int  # forget gates and memory
    reach_sentences: int  # gradient reach: those of at least `reach_min_length` words
    reach_min_length: int
    sentences_cap: int  # analysis.sentences


@dataclass(frozen=True)
class Phrase(Record):
    """A phrase of Figure 2, as encoded: its tokens, and those the vocabulary lacks."""

    text: str
    group: int  # its meaning: 1-based
    tokens: tuple[str, ...]
    unk: tuple[str, ...]


@dataclass(frozen=True)
class Figure2Meta(Record):
    representation: Literal["top", "all", "state"]  # analysis.representation
    groups: int
    phrases: tuple[Phrase, ...]
    lowercase: bool


@dataclass(frozen=True)
class ForgetMeta(Record):
    bins: int
    boundary: str  # what a boundary step is (s2s.analysis.measures.BOUNDARY_DEFINITION)


@dataclass(frozen=True)
class ReachMeta(Record):
    max_position: int
    definition: str  # s2s.analysis.measures.REACH_DEFINITION


@dataclass(frozen=True)
class BootstrapMeta(Record):
    samples: int
    interval: float
    seed: int
    over: str  # what is resampled


@dataclass(frozen=True)
class ReachTrainingMeta(Record):
    epochs: dict[str, tuple[float, ...]]  # model -> the epochs measured (snapshots, then the end)
    first: int  # "the first source words": positions 1..first
    statistics: dict[str, str]  # statistic -> its definition
    compared: tuple[str, ...]  # (forward, reversed) of the paired difference, or none
    bootstrap: BootstrapMeta
    # (forward, reversed) of each seed pair of gradient_reach_seed_pairs.csv; None (no key): a
    # file written before it existed, which round-trips as it was
    seed_pairs: tuple[tuple[str, str], ...] | None = dataclasses.field(default=None,
                                                                      metadata=OMIT_NONE)


@dataclass(frozen=True)
class MemoryModel(Record):
    cell: str
    reverse_source: bool
    gate: str  # which gate keeps the memory traced


@dataclass(frozen=True)
class Substitution(Record):
    """One substituted source word (an example of the memory analysis)."""

    sentence: str
    position: int  # 1-based
    old: str
    new: str


@dataclass(frozen=True)
class MemoryMeta(Record):
    models: dict[str, MemoryModel]
    steps: int
    sentences: int
    substituted: int
    rule: str  # how the word to substitute and its replacement are chosen
    examples: tuple[Substitution, ...]


@dataclass(frozen=True)
class AnalysisMeta(Record):
    """``outputs/analysis/analysis.json``: what the analyze stage measured and on what (models,
    counts, definitions, phrases). No timings: DVC hashes it and a rerun writes the same bytes."""

    models: dict[str, AnalysedModel]
    test: AnalysisTest
    figure2: Figure2Meta
    forget: ForgetMeta
    gradient_reach: ReachMeta
    gradient_reach_training: ReachTrainingMeta
    memory: MemoryMeta
    threads: int


# --- outputs/attention/weights.json --------------------------------------------------------------


@dataclass(frozen=True)
class AttentionExample(Record):
    """One test sentence and a model's own translation of it: the weight of each source word
    (column) for each target word (row; the last is <eos>)."""

    index: int  # 0-based test line
    source: tuple[str, ...]
    target: tuple[str, ...]
    weights: tuple[tuple[float, ...], ...]

    def __post_init__(self):
        rows = len(self.weights)
        cols = {len(w) for w in self.weights}
        if rows != len(self.target) or cols - {len(self.source)}:
            raise ArtifactError(
                f"test line {self.index + 1}: {rows} rows of weights for {len(self.target)} "
                f"target words, of {sorted(cols)} columns for {len(self.source)} source words")


@dataclass(frozen=True)
class CrossAttention(Record):
    """A Transformer's cross-attention on the same test sentences."""

    system: str
    model: str
    beam: int
    layer: str  # which weights: s2s.analysis.alignments
    examples: tuple[AttentionExample, ...]


@dataclass(frozen=True)
class AttentionWeights(Record):
    """``outputs/attention/weights.json``: the attention stage's alignment figure's weights."""

    system: str  # analysis.attention_system
    model: str  # its one member
    beam: int  # its widest beam, whose translations are drawn
    source_words: tuple[int, int]  # the shortest and longest source drawn
    examples: tuple[AttentionExample, ...]
    cross_attention: CrossAttention | None = dataclasses.field(default=None, metadata=OMIT_NONE)


# --- decoding and encoding -----------------------------------------------------------------------


def _encode(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)
                if not (f.metadata.get("omit_none") and getattr(value, f.name) is None)}
    if isinstance(value, dict):
        return {str(k): _encode(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    return value
