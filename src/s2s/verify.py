"""`s2s verify RUN [--against reports/default]`: does a rerun reproduce a published run?

Training runs its products in bf16 where the CPU has a bf16 engine, and bf16 kernels differ
between CPU kinds (Intel AMX, AMD AVX512-BF16) and thread counts, so a rerun on another machine
is not bit-identical to the published run. This compares the numbers of RUN's metrics that a
rerun moves (each model's dev, best dev and test perplexity; each system's tokenised BLEU at each
beam and each rescoring output's, from ``bleu.json`` at 4 decimals; sacreBLEU's score follows the
tokenised one from the same outputs) with the reference's and says, per number:

- ``identical``: the same value as written (bit-identical runs agree to every digit);
- ``within the seed spread``: the difference is at most twice the standard deviation that the
  reference's own seeds give that number (models of one configuration but their seeds, such as
  reversed_1..5: their dev and test perplexity, and the BLEU of one-model systems of them);
  a model or system without seeds of its own takes its group's relative spread ("borrowed"),
  and a rescoring output the spread of the rescorers of one seed group where the reference has
  two or more of them (the default profile's forward..forward_3 and reversed_1..reversed_3),
  else a borrowed one;
- ``different``: outside that, with both values; a number that is not finite (NaN, Infinity: a
  diverged run) on either side is always different, and takes no part in a seed spread.

A number or claim of one run only (a model, system or beam the other has not, a claim added
since) is listed as not in both runs. Then one line per claim (``metrics/claims.json``): the same
verdict or not; a claim missing from either run is "not run", never a verdict. The exit status is
0 when every claim of the reference has the same verdict in RUN, 1 otherwise (with ``--strict``,
also when a number of the reference is different in RUN or missing from it); 2 when RUN or the
reference is not a run, or they are not runs of one configuration: of different profiles, or of
one profile whose settings differ but for where and how it ran (:data:`HOW`: the scheduler's
resources, devices, threads, precision, translation and rescoring batch sizes, log and
checkpoint cadence) and for what only adds measurements (:data:`ADDED_KEYS`: the seed replicas
the gradient reach is also measured on, a rescorer of one run only; named in the output).

A run is a folder with ``params.yaml`` and ``metrics/`` (``train/<model>.json``, ``bleu.json``,
``claims.json``): a project after ``dvc repro``, or a published copy such as ``reports/default``.
A damaged file (cut mid-JSON, a verdict that is not a string) is exit status 2 with one line
naming the file, and the line or the key.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from s2s.artifacts import ArtifactError, Bleu, TrainMetrics, read_verdicts
from s2s.config import ConfigError, Params, dotted, load
from s2s.layout import VERDICTS_FILE, bleu_file, train_metrics_files

TRAIN_NUMBERS = ("dev_ppl", "test_ppl", "best_dev_ppl")  # timings differ between any two runs
IDENTICAL, WITHIN, DIFFERENT, MISSING = ("identical", "within the seed spread", "different",
                                         "not in both runs")
NEW_CLAIM = "not in the reference"


# Settings of where and how a run ran, not of what it computes (a rerun on a GPU, on another
# thread count or in fp32 is a rerun of the same configuration): the last part of a key, or its
# first for `resources`. Params.source, .written and .origins say where the file is, what it
# spells out and which profile wrote each key.
HOW = frozenset({"device", "threads", "amp", "log_every", "checkpoint_every"})
HOW_KEYS = frozenset({"resources", "source", "written", "origins", "translate.batch_size",
                      "rescore.batch_size"})
# Settings that add measurements and change none of the others: the seed replicas the gradient
# reach is also measured on, and a rescorer one run has and the other not (the same name with
# other members is another configuration). A rerun of a profile that has since gained one is a
# rerun; what it adds is listed as not in both runs, and a claim it decides (the reach's verdict
# over seed pairs, rescoring's over seed replicas) as the verdict it is.
ADDED_KEYS = frozenset({"analysis.reach_replicas"})
ADDED_ENTRIES = ("rescore.rescorers.",)


class NotARun(ValueError):
    """A folder that is not a run (or a run of another profile): exit status 2."""


@dataclass(frozen=True)
class Run:
    root: Path
    params: Params
    train: dict[str, TrainMetrics]
    bleu: Bleu | None
    claims: dict[str, str] | None


def read_run(root: Path) -> Run:
    """The run in `root`; NotARun (one line) when it is none."""
    root = Path(root)
    params_file, metrics = root / "params.yaml", root / "metrics"
    if not params_file.is_file() or not (metrics / "train").is_dir():
        raise NotARun(f"{root}: not a run (a run has params.yaml and metrics/train/; "
                      f"run `dvc repro` there, or give a published copy such as "
                      f"reports/default)")
    try:
        params = load(params_file)
        train = {}
        for p in train_metrics_files(metrics):
            m = TrainMetrics.read(p)
            if m.model != p.stem:  # a copied file: it would stand in for another model's
                raise NotARun(f"{p}: 'model' is {m.model!r}, not the model its name says "
                              f"({p.stem!r})")
            train[m.model] = m
        bleu = Bleu.read(bleu_file(metrics)) if bleu_file(metrics).is_file() else None
        claims = _read_claims(root / VERDICTS_FILE)
    except (ConfigError, ArtifactError) as e:  # both name the file
        raise NotARun(f"not a readable run: {e}") from None
    if not train:
        raise NotARun(f"{root}: not a run: metrics/train/ holds no model's metrics")
    return Run(root, params, train, bleu, claims)


def _read_claims(path: Path) -> dict[str, str] | None:
    """claim id -> verdict, as the claims stage writes them (s2s.artifacts.read_verdicts); None
    where the run has none."""
    return read_verdicts(path) if path.is_file() else None


def seed_groups(params: Params) -> list[tuple[str, ...]]:
    """The models that differ only in their seeds (s2s.claims.seeds), in groups of two or more."""
    from s2s.claims.seeds import replica_key

    groups: dict[str, list[str]] = {}
    for name in params.models:
        groups.setdefault(replica_key(params, name), []).append(name)
    return [tuple(g) for g in groups.values() if len(g) > 1]


@dataclass(frozen=True)
class Line:
    key: str
    reference: float | None
    run: float | None
    verdict: str
    tolerance: float | None = None
    basis: str = ""  # whose seeds gave the tolerance


def _finite(values) -> list[float]:
    """The finite numbers of `values`: a diverged seed (NaN, Infinity) has no spread to give."""
    return [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]


class Spreads:
    """Twice the seed standard deviation of each number of the reference, where its seeds give
    one (or, borrowed as a relative spread, where another group's seeds do)."""

    def __init__(self, ref: Run):
        self.ref = ref
        self.groups = seed_groups(ref.params)
        self.of_model = {m: g for g in self.groups for m in g}
        one_model = {s.members[0]: ("translate", name, s.widest_beam)
                     for name, s in ref.params.systems.items() if len(s.members) == 1}
        # per group, the tokenised BLEU of its members' one-model systems (their widest beam)
        self.bleu_of = self._per_group(one_model)
        # and of its members' one-model rescorers (forward..forward_3, reversed_1..reversed_3 in
        # the default profile); a model's first, where two rescore with it
        rescorer: dict[str, tuple] = {}
        for name, members in ref.params.rescore.rescorers.items():
            if len(members) == 1:
                rescorer.setdefault(members[0], ("rescore", name))
        self.rescored_of = self._per_group(rescorer)

    def _per_group(self, output_of: dict[str, tuple]) -> dict[tuple[str, ...], list[float]]:
        """Per seed group, the tokenised BLEU of the output (`Bleu.entry`'s arguments) of each
        member that has one in `output_of` and was scored."""
        def tok(*where) -> float | None:
            return getattr(self.ref.bleu.entry(*where) if self.ref.bleu else None, "bleu_tok",
                           None)

        return {g: [v for v in (tok(*output_of[m]) for m in g if m in output_of) if v is not None]
                for g in self.groups}

    def train(self, model: str, key: str, value: float | None) -> tuple[float | None, str]:
        values = {g: [getattr(self.ref.train[m], key) for m in g if m in self.ref.train]
                  for g in self.groups}
        if model in self.of_model:
            group = self.of_model[model]
            return _twice_sd(values[group]), label(group)
        return _borrow(values, value)

    def bleu(self, members: tuple[str, ...], value: float | None) -> tuple[float | None, str]:
        return self._of_group(members, value, self.bleu_of, "")

    def rescored(self, members: tuple[str, ...], value: float | None
                 ) -> tuple[float | None, str]:
        """A rescorer's: the spread of its group's rescorers where it is one model of a seed
        group that rescores with two or more of its seeds, else a translation's borrowed (a
        rescorer of several models has no seeds of its own)."""
        return self._of_group(members, value, self.rescored_of, " rescoring")

    def _of_group(self, members: tuple[str, ...], value: float | None,
                  per_group: dict[tuple[str, ...], list[float]], what: str
                  ) -> tuple[float | None, str]:
        """The spread `per_group` gives the seed group of a one-model output's model, where it
        gives one; else the relative spread of a translation group, borrowed."""
        if len(members) == 1 and members[0] in self.of_model:
            group = self.of_model[members[0]]
            tol = _twice_sd(per_group[group])
            if tol is not None:
                return tol, label(group) + what
        return _borrow(self.bleu_of, value)


def label(group: tuple[str, ...]) -> str:
    return f"{group[0]}..{group[-1]}" if len(group) > 2 else " and ".join(group)


def _twice_sd(values: list[float]) -> float | None:
    values = _finite(values)
    return 2 * statistics.stdev(values) if len(values) > 1 else None


def _borrow(per_group: dict[tuple[str, ...], list[float]], value: float | None
            ) -> tuple[float | None, str]:
    """The relative spread of the group with the most seeds, applied to `value`."""
    finite = {g: _finite(v) for g, v in per_group.items()}
    group = max((g for g, v in finite.items() if len(v) > 1), key=lambda g: len(finite[g]),
                default=None)
    if (group is None or value is None or not math.isfinite(value)
            or not statistics.fmean(finite[group])):
        return None, ""
    values = finite[group]
    rel = statistics.stdev(values) / abs(statistics.fmean(values))
    return 2 * rel * abs(value), f"borrowed from {label(group)}"


def settings_differ(run: Params, ref: Params, *, added: bool = False) -> list[str]:
    """The params keys (dotted) whose values differ between two runs, but for :data:`HOW`'s and
    those that add measurements (:data:`ADDED_KEYS`, :data:`ADDED_ENTRIES`); `added`: only
    those."""
    a, b = (dict(dotted(dataclasses.asdict(p))) for p in (run, ref))
    gone = object()

    def adds(k: str) -> bool:
        return k in ADDED_KEYS or ((k not in a or k not in b)
                                   and k.startswith(ADDED_ENTRIES))

    return sorted(k for k in a.keys() | b.keys()
                  if a.get(k, gone) != b.get(k, gone) and k.split(".")[-1] not in HOW
                  and k.split(".")[0] not in HOW_KEYS and k not in HOW_KEYS
                  and adds(k) == added)


def compare(run: Run, ref: Run) -> tuple[list[Line], list[tuple[str, str, str, str]]]:
    """The numbers, then the claims: (id, reference verdict, run verdict, same / not)."""
    if run.params.profile != ref.params.profile:
        raise NotARun(f"{run.root} is a run of profile '{run.params.profile}', {ref.root} of "
                      f"'{ref.params.profile}': compare runs of one profile")
    differ = settings_differ(run.params, ref.params)
    if differ:
        raise NotARun(f"{run.root / 'params.yaml'} differs from {ref.root / 'params.yaml'} in "
                      f"{len(differ)} setting{'s' if len(differ) > 1 else ''} ("
                      f"{', '.join(differ[:6])}{', ...' if len(differ) > 6 else ''}): not a rerun "
                      "of that run's configuration (`dvc metrics diff` compares experiments)")
    spreads = Spreads(ref)
    lines: list[Line] = []
    for model in _union(ref.params.models, run.params.models):
        for key in TRAIN_NUMBERS:
            a = getattr(ref.train.get(model), key, None)
            b = getattr(run.train.get(model), key, None)
            lines.append(_line(f"train.{model}.{key}", a, b, *spreads.train(model, key, a)))
    ref_bleu, run_bleu = ref.bleu, run.bleu
    ref_t, run_t = (b.translate if b else {} for b in (ref_bleu, run_bleu))
    for system in _union(ref_t, run_t):
        members = ref.params.systems[system].members if system in ref.params.systems else ()
        for beam in _union(ref_t.get(system, {}), run_t.get(system, {})):
            a, b = (getattr(x.translation(system, beam) if x else None, "bleu_tok", None)
                    for x in (ref_bleu, run_bleu))
            lines.append(_line(f"bleu.{system}.b{beam}", a, b, *spreads.bleu(members, a)))
    for name in _union(*(b.rescore if b else {} for b in (ref_bleu, run_bleu))):
        a, b = (getattr(x.rescoring(name) if x else None, "bleu_tok", None)
                for x in (ref_bleu, run_bleu))
        members = ref.params.rescore.rescorers.get(name, ())
        lines.append(_line(f"rescore.{name}", a, b, *spreads.rescored(members, a)))
    claims = []
    for cid, verdict in (ref.claims or {}).items():
        mine = (run.claims or {}).get(cid)
        if mine is None:
            claims.append((cid, verdict, "not run", "not run: no verdict in "
                           f"{run.root / VERDICTS_FILE}"))
        else:
            claims.append((cid, verdict, mine, "same verdict" if mine == verdict
                           else "another verdict"))
    for cid, mine in (run.claims or {}).items():  # claims the reference does not have
        if ref.claims is not None and cid not in ref.claims:
            claims.append((cid, "not run", mine, f"{NEW_CLAIM}: no verdict in "
                           f"{ref.root / VERDICTS_FILE}"))
    return lines, claims


def _union(first, second) -> list:
    """The keys of `first`, then those of `second` that `first` lacks."""
    return [*first, *(k for k in second if k not in first)]


def _line(key: str, a: float | None, b: float | None, tol: float | None, basis: str) -> Line:
    if a is None or b is None:
        return Line(key, a, b, MISSING)
    if not (math.isfinite(a) and math.isfinite(b)):  # a diverged run reproduces nothing
        return Line(key, a, b, DIFFERENT, tol, basis)
    if a == b:
        return Line(key, a, b, IDENTICAL, tol, basis)
    if tol is not None and abs(a - b) <= tol:
        return Line(key, a, b, WITHIN, tol, basis)
    return Line(key, a, b, DIFFERENT, tol, basis)


def render(run: Run, ref: Run, lines: list[Line], claims) -> str:
    groups = ", ".join(label(g) for g in seed_groups(ref.params)) or "none"
    added = settings_differ(run.params, ref.params, added=True)
    out = [f"{run.root} against {ref.root} (profile {ref.params.profile}); seeds of the "
           f"reference: {groups}", *machine_lines(run, ref),
           *([f"settings that only add measurements, not the same in both runs: "
               f"{', '.join(added)}"] if added else []), ""]
    width = max(len(x.key) for x in lines) if lines else 10
    out.append(f"{'number':<{width}}  {'reference':>10}  {'this run':>10}  verdict")
    for x in lines:
        tol = (f" (2 sd {x.tolerance:.3g}, {x.basis})" if x.tolerance is not None
               and x.verdict != IDENTICAL else "")
        out.append(f"{x.key:<{width}}  {_num(x.reference):>10}  {_num(x.run):>10}  "
                   f"{x.verdict}{tol}")
    out += ["", "claims"]
    for cid, a, b, same in claims:
        out.append(f"  {cid:<20} {a:<26} {b:<26} {same}")
    counts = {v: sum(x.verdict == v for x in lines) for v in (IDENTICAL, WITHIN, DIFFERENT,
                                                              MISSING)}
    theirs = _of_reference(claims)
    same = sum(c[3] == "same verdict" for c in theirs)
    new = len(claims) - len(theirs)
    out += ["", ", ".join(f"{n} {v}" for v, n in counts.items() if n) +
            f"; claims: {same} of {len(theirs)} with the same verdict" +
            (f"; {new} not in the reference" if new else "")]
    return "\n".join(out) + "\n"


def machine_lines(run: Run, ref: Run) -> list[str]:
    """Where each run trained and in what precision, and, where that differs, why its numbers
    need not be identical: bf16 bits depend on the CPU kind or GPU (and fp32 sums on the thread
    count and kernels). A record without the CPU kind says so (written before it was kept)."""
    def machines(r: Run) -> list[str]:
        return sorted({f"{'cpu (kind not recorded)' if m.device == 'cpu' and not m.cpu else m.machine()}"
                       f", {m.precision}" for m in r.train.values()})

    mine, theirs = machines(run), machines(ref)
    out = [f"trained on: reference {'; '.join(theirs) or 'unknown'}",
           f"            this run  {'; '.join(mine) or 'unknown'}"]
    if mine != theirs:
        out.append("            (not the same machines or precision: bf16 products differ between "
                   "CPU kinds and GPUs, so expect numbers within the seed spread, not identical)")
    return out


def _num(v: float | None) -> str:
    if v is None:
        return "-"
    if not math.isfinite(v):
        return str(v)  # nan, inf, -inf
    return f"{v:.4g}" if abs(v) < 1e4 else f"{v:.0f}"


def main(run_dir: Path, against: Path, *, strict: bool = False) -> int:
    """Print the comparison; the exit status (the module's docstring). `strict`: a number of the
    reference that is different in RUN, or missing from it, fails too (1)."""
    try:
        ref = read_run(against)
    except NotARun as e:
        raise NotARun(f"the reference (--against): {e}") from None
    run = read_run(run_dir)
    lines, claims = compare(run, ref)
    print(render(run, ref, lines, claims), end="")
    status = 0
    if ref.claims is None:
        print("the reference has no metrics/claims.json: no verdict to compare")
        status = 1
    elif not all(c[3] == "same verdict" for c in _of_reference(claims)):
        status = 1
    if strict:
        failed = [x.key for x in lines if x.verdict == DIFFERENT
                  or (x.verdict == MISSING and x.reference is not None)]
        if failed:
            print(f"--strict: {len(failed)} number{'s' if len(failed) > 1 else ''} of the "
                  f"reference different or missing in this run: {', '.join(failed[:5])}"
                  + (", ..." if len(failed) > 5 else ""))
            status = 1
    return status


def _of_reference(claims: list) -> list:
    """The lines of the reference's claims (a claim of RUN's only has no verdict to match)."""
    return [c for c in claims if not c[3].startswith(NEW_CLAIM)]
