"""The report's content: loading the artifacts, provenance, and the document built from
them (rendered by :mod:`s2s.report.render`, written by :mod:`s2s.stages.report`).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import platform
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from s2s.config import Params
from s2s.io import atomic_write_text
from s2s.report import analysis as analysis_sections
from s2s.report import figures, tables
from s2s.report.render import (Bullets, Document, Image, Section, Table, md_table, to_html,
                               to_markdown)

log = logging.getLogger(__name__)


@dataclass
class Artifacts:
    """Everything the report reads, loaded once."""

    bleu: dict
    train: dict[str, dict]
    curves: dict[str, pd.DataFrame]
    timing: dict[str, dict]
    groups: pd.DataFrame
    prepare: dict | None
    vocab: dict | None
    manifest: dict | None
    attention: dict | None  # the attention stage's weights.json
    analysis_dir: Path | None  # the analyze stage's folder, when there is one
    read: list[str]
    diff: Any = None  # tables.DiffFn over the hypothesis files, when references are given
    examples: list[dict] | None = None  # a few test sentences with every system's output


def _json(path: Path, read: list[str]) -> Any | None:
    if not path.is_file():
        log.warning("absent: %s", path)
        return None
    read.append(str(path))
    return json.loads(path.read_text(encoding="utf-8"))


def load(params: Params, *, metrics_dir: Path, translate_dir: Path, groups_csv: Path,
         manifest: Path, attention: Path | None = None,
         analysis: Path | None = None, prepared_dir: Path | None = None,
         rescore_dir: Path | None = None) -> Artifacts:
    read: list[str] = []
    bleu_path = metrics_dir / "bleu.json"
    if not bleu_path.is_file():
        raise FileNotFoundError(f"{bleu_path}: no BLEU metrics; run the evaluate stage first")
    bleu = _json(bleu_path, read)
    train = {}
    for p in sorted((metrics_dir / "train").glob("*.json")):
        m = _json(p, read)
        train[m.get("model", p.stem)] = m
    curves = {}
    for p in sorted((metrics_dir / "curves").glob("*.csv")):
        read.append(str(p))
        curves[p.stem] = pd.read_csv(p)
    timing = {}
    for system in params.systems:
        t = _json(translate_dir / system / "timing.json", read)
        if t is not None:
            timing[system] = t
    if groups_csv.is_file():
        read.append(str(groups_csv))
        groups = pd.read_csv(groups_csv, dtype={"system": str, "beam": str, "label": str},
                             keep_default_na=False)
    else:
        log.warning("absent: %s", groups_csv)
        groups = pd.DataFrame(columns=["system", "beam", "axis", "label", "lo", "hi",
                                       "sentences", "mean", "bleu"])
    diff = examples = None
    if prepared_dir is not None:
        diff = BootstrapDiffs(Path(prepared_dir), Path(translate_dir),
                              None if rescore_dir is None else Path(rescore_dir), read)
        examples = load_examples(params, Path(prepared_dir), Path(translate_dir), read)
    return Artifacts(bleu=bleu, train=train, curves=curves, timing=timing, groups=groups,
                     prepare=_json(metrics_dir / "prepare.json", read),
                     vocab=_json(metrics_dir / "vocab.json", read),
                     manifest=_json(manifest, read),
                     attention=_json(attention, read) if attention else None,
                     analysis_dir=_folder(analysis, read), read=read, diff=diff,
                     examples=examples)


class BootstrapDiffs:
    """``tables.DiffFn``: the paired bootstrap (sacreBLEU's, tokenised BLEU) of two outputs, read
    from the translate and rescore folders against ``test.tok.fr``; None when one is missing."""

    def __init__(self, prepared_dir: Path, translate_dir: Path, rescore_dir: Path | None,
                 read: list[str]):
        self.refs_path = prepared_dir / "test.tok.fr"
        self.translate_dir, self.rescore_dir, self.read = translate_dir, rescore_dir, read
        self._refs: list[str] | None = None
        self._cache: dict = {}

    def _path(self, o: tables.Ours) -> Path | None:
        if o.kind == "translate":
            p = self.translate_dir / o.system / f"beam{o.beam}.tok.fr"
            return p if p.is_file() else None
        if self.rescore_dir is None or not self.rescore_dir.is_dir():
            return None
        from s2s.evaluate.outputs import find_rescore_output

        stem = find_rescore_output(self.rescore_dir, o.system)
        return None if stem is None else stem.with_name(stem.name + ".tok.fr")

    def __call__(self, baseline: tables.Ours, system: tables.Ours):
        from s2s.io import read_lines
        from s2s.evaluate.significance import paired_bootstrap

        key = (baseline, system)
        if key not in self._cache:
            a, b = self._path(baseline), self._path(system)
            if a is None or b is None or not self.refs_path.is_file():
                self._cache[key] = None
            else:
                if self._refs is None:
                    self._refs = read_lines(self.refs_path)
                    self.read.append(str(self.refs_path))
                self._cache[key] = paired_bootstrap(read_lines(a), read_lines(b), self._refs)
                log.info("paired bootstrap %s vs %s: %s", b, a, self._cache[key].describe())
        return self._cache[key]


# Example sentences: at these quantiles of the source length, shortest first.
EXAMPLE_QUANTILES = (0.1, 0.4, 0.7, 0.95)


def load_examples(params: Params, prepared_dir: Path, translate_dir: Path,
                  read: list[str]) -> list[dict] | None:
    """A few test sentences of different lengths: source, reference and every system's output
    (its widest beam, detokenised). None without the raw test files."""
    from s2s.io import read_lines

    src_p, ref_p = prepared_dir / "test.raw.en", prepared_dir / "test.raw.fr"
    if not (src_p.is_file() and ref_p.is_file()):
        log.warning("absent: %s or %s (no example translations)", src_p, ref_p)
        return None
    src, ref = read_lines(src_p), read_lines(ref_p)
    read += [str(src_p), str(ref_p)]
    outputs = {}
    for system, cfg in params.systems.items():
        beam = max(cfg.beams)
        p = translate_dir / system / f"beam{beam}.detok.fr"
        if p.is_file():
            lines = read_lines(p)
            if len(lines) == len(src):
                outputs[f"{system} (beam {beam})"] = lines
    order = sorted((len(s.split()), i) for i, s in enumerate(src) if s.strip())
    if not order:
        return []
    picks = sorted({order[min(int(q * len(order)), len(order) - 1)][1]
                    for q in EXAMPLE_QUANTILES}, key=lambda i: (len(src[i].split()), i))
    return [{"line": i + 1, "words": len(src[i].split()), "source": src[i],
             "reference": ref[i], "outputs": {k: v[i] for k, v in outputs.items()}}
            for i in picks]


def _folder(path: Path | None, read: list[str]) -> Path | None:
    if path is None:
        return None
    if not Path(path).is_dir():
        log.warning("absent: %s", path)
        return None
    read.append(f"{path}/")
    return Path(path)


# --- provenance ----------------------------------------------------------------------------------


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def git_revision(where: Path) -> str:
    """``git rev-parse HEAD`` in ``where``; "unknown" outside git (or in a repo with no commit)."""
    try:
        res = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True,
                             text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    rev = res.stdout.strip()
    return rev if res.returncode == 0 and rev else "unknown"


def _sha256(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "unknown (file not readable)"


def manifest_summary(manifest: dict | None) -> list[str]:
    """One line per corpus: name, source, number of files, lines. Tolerant of the exact layout."""
    if not manifest:
        return ["no data manifest found"]
    corpora = manifest.get("corpora", manifest) if isinstance(manifest, dict) else manifest
    items = (list(corpora.items()) if isinstance(corpora, dict)
             else [(c.get("name") or c.get("corpus") or f"#{i}", c) for i, c in enumerate(corpora)])
    out = []
    for name, c in items:
        if not isinstance(c, dict):
            continue
        files = c.get("files") or []
        lines = c.get("lines")
        if lines is None and isinstance(files, list):
            counts = [f.get("lines") for f in files if isinstance(f, dict)]
            lines = sum(counts) if counts and all(isinstance(x, int) for x in counts) else None
        if isinstance(lines, dict):
            lines = ", ".join(f"{k}: {v:,}" if isinstance(v, int) else f"{k}: {v}"
                              for k, v in lines.items())
        elif isinstance(lines, int):
            lines = f"{lines:,}"
        source = c.get("source") or c.get("url") or "?"
        if isinstance(source, (list, tuple)):
            source = ", ".join(map(str, source))
        out.append(f"{name}: {len(files)} file(s) with sha256, {lines or '?'} lines, "
                   f"from {source}")
    return out or ["data manifest has no corpora"]


def provenance(params: Params, art: Artifacts) -> list[str]:
    devices = sorted({str(m["device"]) for m in art.train.values() if m.get("device")})
    dec = sorted({f"{t.get('device', '?')} ({t.get('threads', '?')} threads)"
                  for t in art.timing.values()})
    return [
        f"profile: {params.profile}",
        f"parameter file: {params.source} (sha256 {_sha256(Path(params.source))})",
        f"git revision: {git_revision(Path(params.source).resolve().parent)}",
        f"python {platform.python_version()}, torch {_version('torch')}, "
        f"sacrebleu {_version('sacrebleu')}, sacremoses {_version('sacremoses')}",
        f"training device(s): {', '.join(devices) or 'unknown'}; "
        f"decoding: {', '.join(dec) or 'unknown'}",
        *[f"data: {line}" for line in manifest_summary(art.manifest)],
    ]


# --- the document --------------------------------------------------------------------------------


def _figure3_curves(params: Params, art: Artifacts) -> list[tuple[str, str, str]]:
    sys_, beam = params.report.figure3_system, params.report.figure3_beam
    e = tables.bleu_entry(art.bleu, "translate", sys_, beam)
    lstm = f"LSTM: {sys_} beam {beam}" + (f" ({e['bleu_tok']:.1f})" if tables.scored(e) else "")
    curves = [(lstm, sys_, str(beam))]
    b = tables.bleu_entry(art.bleu, "rescore", "baseline")
    have_rescore = (art.groups["system"] == tables.rescore_system("baseline")).any() if len(
        art.groups) else False
    if have_rescore:
        curves.append(("baseline: rescore 1-best" + (f" ({b['bleu_tok']:.1f})"
                                                     if tables.scored(b) else ""),
                       tables.rescore_system("baseline"), ""))
    else:
        ref = tables.baseline_ref(params)
        e = tables.bleu_entry(art.bleu, ref.kind, ref.system, ref.beam)
        curves.append((f"baseline: {ref.system} beam {ref.beam}"
                       + (f" ({e['bleu_tok']:.1f})" if tables.scored(e) else ""),
                       ref.system if ref.kind == "translate"
                       else tables.rescore_system(ref.system),
                       str(ref.beam) if ref.kind == "translate" else ""))
    return curves


def curve_groups(params: Params) -> dict[str, list[str]]:
    """Learning-curve panels: the largest ensemble's members together, every other model alone."""
    ensembles = [(name, s) for name, s in params.systems.items() if len(s.members) > 1]
    name, ens = max(ensembles, key=lambda x: len(x[1].members), default=(None, None))
    groups: dict[str, list[str]] = {}
    for m in params.models:
        if ens is not None and m in ens.members:
            groups.setdefault(f"{name} members", []).append(m)
        else:
            groups[m] = [m]
    return groups


def _fmt_frame(df: pd.DataFrame, nd: dict[str, int]) -> pd.DataFrame:
    out = df.copy().astype(object)
    for col in out.columns:
        out[col] = [tables.fmt(v, nd.get(col, 2)) if not isinstance(v, str) else v
                    for v in df[col]]
    return out


def build(params: Params, art: Artifacts, fig_dir: Path) -> tuple[Document, dict[str, Table],
                                                                      dict[str, pd.DataFrame]]:
    """The report document, its tables for ``tables/*.md`` and their raw frames for ``*.csv``."""
    t1 = tables.table1(params, art.bleu, art.train, art.vocab)
    t1_other = tables.other_systems(params, art.bleu, art.train, art.vocab)
    t2 = tables.table2(params, art.bleu, art.train, art.vocab)
    ppl = tables.perplexity_table(params, art.train)
    trained = tables.models_table(params, art.train)
    cost = tables.cost_table(params, art.timing)
    checks = tables.claims(params, art.bleu, art.train, cost, diff=art.diff)
    cost_check = checks[-1]
    if art.analysis_dir is not None:
        checks += analysis_sections.claims(art.analysis_dir)
    claims = tables.claims_table(checks)

    sigs = tables.signatures(t1, t2)
    tok_sig = art.bleu.get("bleu_tok_signature", "tok:none")
    bleu_notes = (
        "BLEU tokenized = cased BLEU on Moses-tokenized text, multi-bleu.pl style "
        f"(sacreBLEU {tok_sig}): the paper's method, the column to compare with the paper's.",
        "sacreBLEU 13a = detokenized output against untokenized references, signature: "
        + (" / ".join(sigs) if sigs else "(none: nothing scored)")
        + ". It can differ from the tokenized score by 1-2 BLEU; do not compare it with the paper.",
        tables.PAPER_CONDITIONS + ".",
    )
    n = art.bleu.get("test_sentences")
    lead1, shown1 = tables.split_conditions(tables.display_bleu_table(t1))
    lead1o, shown1o = tables.split_conditions(tables.display_bleu_table(t1_other))
    lead2, shown2 = tables.split_conditions(tables.display_bleu_table(t2))
    T = {
        "table1": Table("Table 1: direct translation, BLEU on the test set", shown1, bleu_notes,
                        "table1", lead1),
        "table1_other": Table("Our other systems: translations the paper has no row for",
                              shown1o, ("Same data, test set and BLEU as Table 1.",),
                              "table1_other", lead1o),
        "table2": Table("Table 2: rescoring the baseline's n-best lists", shown2,
                        bleu_notes + ("Oracle: the n-best entry with the highest sentence BLEU "
                                      "against the reference (an upper bound, not a system).",),
                        "table2", lead2),
        "perplexity": Table("Perplexity: forward vs reversed source (paper's test ppl 5.8 -> 4.7)",
                            _fmt_frame(ppl, {"epochs": 2}),
                            ("The column \"paper's test ppl\" is the paper's number (§3.3), "
                             "not ours.",), "perplexity"),
        "models": Table("Every model trained, at this profile's scale",
                        _fmt_frame(trained, {"epochs": 2, "target words/s": 0, "minutes": 1}),
                        ("Parameters, perplexities and speed are ours (metrics/train/*.json); "
                         "words/s is the whole run's average, lower where the machine was "
                         "shared.",), "models"),
        "cost": Table("Decoding cost per system and beam",
                      _fmt_frame(cost, {"seconds": 1, "sents_per_sec": 2, "ms_per_sentence": 1}),
                      (f"{cost_check.claim}: {cost_check.status}"
                       + ("" if cost_check.status == tables.UNKNOWN else " in our numbers")
                       + f" ({cost_check.evidence}).",), "cost"),
        "claims": Table("The paper's claims against our numbers", claims,
                        ((BOOTSTRAP_NOTE,) if art.diff is not None else ()), "claims"),
    }
    raw = {"table1": t1, "table1_other": t1_other, "table2": t2, "perplexity": ppl, "models": trained, "cost": cost,
           "claims": claims}

    fig3 = figures.figure3(
        art.groups, _figure3_curves(params, art), fig_dir / "figure3.png",
        note="Our curves only; the paper's Figure 3 curves (LSTM 34.8, baseline 33.3) are not "
             "data we have and are not drawn.")
    lc = figures.learning_curves(art.curves, fig_dir / "learning_curves.png",
                                 groups=curve_groups(params))

    doc = Document(params.report.title)
    doc.sections.append(summary_section(checks, art))
    doc.sections.append(Section("About this report", [
        f"Profile '{params.profile}', test set {params.data.test.corpus} "
        f"({tables.fmt(n)} sentences). Every paper number is labelled as the paper's and sits "
        "beside ours, never in its place. Rows we did not produce say 'not run' and why.",
        "Two BLEU columns, never mixed: 'BLEU tokenized' is the paper's method (cased "
        "multi-bleu.pl on tokenized text) and is the one comparable with the paper; "
        "'sacreBLEU 13a' is today's standard on detokenized text and carries its signature.",
    ]))
    doc.sections.append(Section("Table 1: direct translation", [T["table1"]] + (
        [T["table1_other"]] if len(t1_other) else [])))
    doc.sections.append(Section("Table 2: rescoring", [T["table2"]]))
    doc.sections.append(Section("The paper's claims, checked", [
        "Each claim is checked against our numbers; 'holds' and 'does not hold' refer to this "
        "profile's scale (data, model size, training time), not to the paper's.", T["claims"]]))
    if art.examples:
        doc.sections.append(examples_section(art.examples))
    doc.sections.append(Section("Source reversal and perplexity", [T["perplexity"]]))
    doc.sections.append(Section("The models", [T["models"]]))
    doc.sections.append(Section("Decoding cost", [T["cost"]]))
    doc.sections.append(Section("Figure 3: BLEU by sentence length and word rarity", [
        Image("Figure 3 (ours)", fig3, "figures/figure3.png",
              "Tokenized BLEU of groups of test sentences, by source length (left) and by the "
              "average frequency rank of the source words (right); groups hold at least "
              f"{params.evaluate.min_group} sentences. Our curves only."),
    ]))
    doc.sections.append(Section("Learning curves", [
        Image("Learning curves", lc, "figures/learning_curves.png",
              "Dev perplexity per epoch (solid) and train perplexity (dashed), one panel per "
              "model on a shared scale; the members of the largest ensemble share one panel, "
              "as a band from the lowest to the highest member around their median."),
    ]))
    if art.attention is not None:
        doc.sections.append(attention_section(params, art, fig_dir))
    if art.analysis_dir is not None:
        doc.sections.extend(analysis_sections.sections(art.analysis_dir, fig_dir))
    data_blocks: list = []
    if art.prepare:
        T["data"] = Table("Data: lines per corpus, and what each training filter removed",
                          tables.prepare_table(art.prepare),
                          ("Filters apply to training data only; dev and test keep every line.",),
                          "data")
        raw["data"] = T["data"].frame
        data_blocks.append(T["data"])
    if art.vocab:
        T["vocab"] = Table("Vocabularies", tables.vocab_table(art.vocab),
                           ("UNK rate: share of running words outside the vocabulary.",), "vocab")
        raw["vocab"] = T["vocab"].frame
        data_blocks.append(T["vocab"])
    doc.sections.append(Section("Data", data_blocks or ["no data metrics found"]))
    doc.sections.append(Section("Provenance", [Bullets(tuple(provenance(params, art)))]))
    return doc, T, raw


BOOTSTRAP_NOTE = (
    "Every BLEU difference a claim rests on carries the 95% interval of paired bootstrap "
    "resampling (sacreBLEU's significance module, 1000 resamples, seed 12345) on tokenized "
    "BLEU, the column comparable with the paper; where the interval contains 0 the verdict is "
    "'no significant difference'. `s2s score BASE SYSTEM --ref REF --tokenized` recomputes one.")


def summary_section(checks: list, art: Artifacts) -> Section:
    """What held and what did not, first, with the numbers."""
    order = [tables.HOLDS, tables.FAILS, tables.NO_DIFFERENCE, tables.UNKNOWN]
    heads = {tables.HOLDS: "Holds here", tables.FAILS: "Does not hold here",
             tables.NO_DIFFERENCE: "No significant difference here",
             tables.UNKNOWN: "Cannot tell"}
    items = [f"{heads.get(c.status, c.status)}: {c.claim}. {c.evidence}."
             for status in order for c in checks if c.status == status]
    items += [f"{c.status}: {c.claim}. {c.evidence}." for c in checks if c.status not in order]
    blocks: list = [Bullets(tuple(items))]
    if art.diff is not None:
        blocks.append("Intervals: paired bootstrap on tokenized BLEU (sacreBLEU, 1000 "
                      "resamples); details under 'The paper's claims, checked'.")
    return Section("Summary", blocks)


def examples_section(examples: list[dict]) -> Section:
    """Source, reference and every system's output for a few sentences of different lengths."""
    blocks: list = ["A few test sentences of different lengths (source words), with the "
                    "reference and every system's detokenized output at its widest beam."]
    for ex in examples:
        rows = [("source (English)", ex["source"]), ("reference (French)", ex["reference"]),
                *ex["outputs"].items()]
        blocks.append(Table(f"Test sentence {ex['line']} ({ex['words']} words)",
                            pd.DataFrame(rows, columns=["", "text"])))
    return Section("Example translations", blocks)


def attention_section(params: Params, art: Artifacts, fig_dir: Path) -> Section:
    """The attention model's weights on a few of its own test translations."""
    att = art.attention
    e = tables.bleu_entry(art.bleu, "translate", att["system"], att["beam"])
    score = f" (tokenized BLEU {e['bleu_tok']:.2f})" if tables.scored(e) else ""
    fig = figures.attention_weights(
        att["examples"], fig_dir / "attention.png",
        title=f"Attention weights of '{att['model']}' on its beam-{att['beam']} translations")
    cfg = params.model_config(att["model"])
    ranking = sorted(((e["bleu_tok"], name) for name, beams in art.bleu.get("translate", {}).items()
                      for b, e in beams.items() if b == str(att["beam"]) and tables.scored(e)),
                     reverse=True)
    ranked = ", ".join(f"{name} {bleu:.2f}" for bleu, name in ranking)
    rank = [name for _, name in ranking].index(att["system"]) + 1 if ranking and any(
        name == att["system"] for _, name in ranking) else None
    return Section("Attention weights (Bahdanau et al.'s model, trained here)", [
        f"Our '{att['system']}' system{score} is {tables.architecture(cfg)}, "
        f"{cfg.num_layers} layer{'s' if cfg.num_layers > 1 else ''} of {cfg.hidden_size} units, trained on the same data, "
        f"vocabulary and schedule as the LSTMs. Tokenized BLEU of every system at beam "
        f"{att['beam']}: {ranked or 'none scored'}"
        + (f"; the attention model ranks {rank} of {len(ranking)}." if rank else ".")
        + " Each row of the figure shows where the model "
        "looked in the source while it produced that target word: the weights it gave the source "
        "words when fed its own 1-best translation. Padded source positions get weight 0 by "
        "construction (masked before the softmax). The paper cites this model's 28.45 BLEU "
        "(Bahdanau et al. 2014); it did not train one.",
        Image("Attention weights", fig, "figures/attention.png",
              f"{len(att['examples'])} test sentences of {att['source_words'][0]}-"
              f"{att['source_words'][1]} source words, spread over the test set; darker = more "
              "weight."),
    ])
