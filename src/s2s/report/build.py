"""The report's document, assembled from the inputs (:mod:`s2s.report.inputs`), the tables
(:mod:`s2s.report.tables`), the claims (:mod:`s2s.report.claims`), the figures
(:mod:`s2s.report.figures`) and the prose (``templates/prose.j2``); rendered by
:mod:`s2s.report.render`, written by :mod:`s2s.stages.report`.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd

from s2s.config import Params
from s2s.evaluate.outputs import BASELINE, rescore_system
from s2s.report import analysis as analysis_sections
from s2s.report import claims as claims_
from s2s.report import figures, forget_bias, tables
from s2s.report.inputs import Artifacts
from s2s.report.paper import paper
from s2s.report.provenance import provenance
from s2s.report.render import Bullets, Document, Image, Section, Table

TEMPLATES_DIR = Path(__file__).with_name("templates")


class Prose:
    """The macros of ``templates/prose.j2``, each returning one paragraph (whitespace folded),
    and the template's mappings (``status_heads``, ``example_rows``)."""

    def __init__(self, module: Any):
        self._module = module

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name)
        if not callable(value):
            return value
        return lambda *args, **kwargs: " ".join(str(value(*args, **kwargs)).split())


@functools.cache
def prose() -> Prose:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES_DIR),
                             undefined=jinja2.StrictUndefined, autoescape=False)
    return Prose(env.get_template("prose.j2").make_module({"paper": paper()}))


def build(params: Params, art: Artifacts, fig_dir: Path) -> tuple[Document, dict[str, Table],
                                                                      dict[str, pd.DataFrame]]:
    """The report document, its tables for ``tables/*.md`` and their raw frames for ``*.csv``."""
    P = prose()
    t1 = tables.table1(params, art.bleu, art.train, art.vocab)
    t1_other = tables.other_systems(params, art.bleu, art.train, art.vocab)
    t2 = tables.table2(params, art.bleu, art.train, art.vocab)
    ppl = tables.perplexity_table(params, art.train)
    trained = tables.models_table(params, art.train)
    cost = tables.cost_table(params, art.timing)
    found = art.claims  # the claims stage's verdicts: rendered here, never recomputed
    checks = [claims_.from_record(c) for c in found.claims]
    cost_check = next(c for c in checks if c.key == "cost")
    setting = claims_.from_record(found.setting)
    claims = claims_.claims_table(checks)

    bleu_notes = (P.bleu_tok_note(art.bleu.bleu_tok_signature),
                  P.bleu_sacre_note(tables.signatures(t1, t2)), P.paper_conditions())
    lead1, shown1 = tables.split_conditions(tables.display_bleu_table(t1))
    lead1o, shown1o = tables.split_conditions(tables.display_bleu_table(t1_other))
    lead2, shown2 = tables.split_conditions(tables.display_bleu_table(t2))
    T = {
        "table1": Table(P.table1_title(), shown1, bleu_notes, "table1", lead1),
        "table1_other": Table(P.table1_other_title(), shown1o, (P.table1_other_note(),),
                              "table1_other", lead1o),
        "table2": Table(P.table2_title(), shown2, bleu_notes + (P.oracle_note(),), "table2",
                        lead2),
        "perplexity": Table(P.perplexity_title(), _fmt_frame(ppl, {"epochs": 2}),
                            (P.perplexity_note(),), "perplexity"),
        "models": Table(P.models_title(),
                        _fmt_frame(trained, {"epochs": 2, "target words/s": 0, "minutes": 1}),
                        (P.models_note(),), "models"),
        "cost": Table(P.cost_title(),
                      _fmt_frame(cost, {"seconds": 1, "sents_per_sec": 2, "ms_per_sentence": 1}),
                      (P.cost_note(cost_check, cost_check.status != claims_.UNKNOWN),), "cost"),
        "claims": Table(P.claims_title(), claims,
                        ((P.bootstrap_note(),) if found.intervals else ()), "claims"),
    }
    raw = {"table1": t1, "table1_other": t1_other, "table2": t2, "perplexity": ppl,
           "models": trained, "cost": cost, "claims": claims}

    fig3 = figures.figure3(art.groups, _figure3_curves(params, art), fig_dir / "figure3.png",
                           note=P.figure3_note())
    lc = figures.learning_curves(art.curves, fig_dir / "learning_curves.png",
                                 groups=curve_groups(params))

    doc = Document(params.report.title)
    doc.sections.append(summary_section(checks, art))
    doc.sections.append(Section("About this report", [
        P.about(params.profile, params.data.test.corpus, tables.fmt(art.bleu.test_sentences)),
        P.about_bleu()]))
    doc.sections.append(Section("Table 1: direct translation", [T["table1"]] + (
        [T["table1_other"]] if len(t1_other) else [])))
    doc.sections.append(Section("Table 2: rescoring", [
        P.table2_setting(setting, claims_.claims_table([setting])["here"].iloc[0],
                         tables.baseline_text(params)), T["table2"]]))
    doc.sections.append(Section("The paper's claims, checked", [P.claims_intro(), T["claims"]]))
    if art.examples:
        doc.sections.append(examples_section(art.examples))
    doc.sections.append(Section("Source reversal and perplexity", [T["perplexity"]]))
    doc.sections.append(Section("The models", [T["models"]]))
    doc.sections.append(Section("Decoding cost", [T["cost"]]))
    fig3_parts = [Image("Figure 3 (ours)", fig3, "figures/figure3.png",
                        P.figure3_caption(params.evaluate.min_group))]
    drop = length_drop_table(params, art)
    if drop is not None and params.report.figure3_compare:
        T["length"] = Table(P.length_drop_title(), drop, (P.length_drop_note(),), "length")
        raw["length"] = drop
        fig3_parts.append(T["length"])
    doc.sections.append(Section("Figure 3: BLEU by sentence length and word rarity", fig3_parts))
    doc.sections.append(Section("Learning curves", [
        Image("Learning curves", lc, "figures/learning_curves.png",
              P.learning_curves_caption())]))
    if art.attention is not None:
        doc.sections.append(attention_section(params, art, fig_dir))
    if art.analysis is not None:
        doc.sections.extend(analysis_sections.sections(art.analysis, fig_dir))
    fb = forget_bias.section(params, art, fig_dir, P, found.forget_bias)
    if fb is not None:
        doc.sections.append(fb)
        for block in fb.blocks:  # its tables are written to reports/tables/ as the others
            if isinstance(block, Table) and block.anchor:
                T[block.anchor], raw[block.anchor] = block, block.frame
    data_blocks: list = []
    if art.prepare:
        T["data"] = Table(P.data_title(), tables.prepare_table(art.prepare), (P.data_note(),),
                          "data")
        raw["data"] = T["data"].frame
        data_blocks.append(T["data"])
    if art.vocab:
        T["vocab"] = Table(P.vocab_title(), tables.vocab_table(art.vocab), (P.vocab_note(),),
                           "vocab")
        raw["vocab"] = T["vocab"].frame
        data_blocks.append(T["vocab"])
    doc.sections.append(Section("Data", data_blocks or ["no data metrics found"]))
    doc.sections.append(Section("Provenance", [Bullets(tuple(provenance(
        params, train=art.train, timing=art.timing, manifest=art.manifest)))]))
    return doc, T, raw


def summary_section(checks: list[claims_.Claim], art: Artifacts) -> Section:
    """What held and what did not, first, with the numbers."""
    P = prose()
    order = [claims_.HOLDS, claims_.FAILS, claims_.NO_DIFFERENCE, claims_.UNKNOWN]
    items = [P.summary_item(c.status, c.claim, c.evidence)
             for status in order for c in checks if c.status == status]
    items += [P.summary_item(c.status, c.claim, c.evidence) for c in checks
              if c.status not in order]
    blocks: list = [Bullets(tuple(items))]
    if art.claims.intervals:
        blocks.append(P.summary_intervals())
    return Section("Summary", blocks)


def examples_section(examples: list[dict]) -> Section:
    """Source, reference and every system's output for a few sentences of different lengths."""
    P = prose()
    blocks: list = [P.examples_intro()]
    for ex in examples:
        rows = [(P.example_rows["source"], ex["source"]),
                (P.example_rows["reference"], ex["reference"]), *ex["outputs"].items()]
        blocks.append(Table(P.example_title(ex["line"], ex["words"]),
                            pd.DataFrame(rows, columns=["", "text"])))
    return Section("Example translations", blocks)


def attention_section(params: Params, art: Artifacts, fig_dir: Path) -> Section:
    """The attention model's weights on a few of its own test translations."""
    P = prose()
    att = art.attention
    e = tables.bleu_entry(art.bleu, "translate", att.system, att.beam)
    score = f" (tokenized BLEU {e.bleu_tok:.2f})" if tables.scored(e) else ""
    fig = figures.attention_weights(att.examples, fig_dir / "attention.png",
                                    title=P.attention_title(att.model, att.beam))
    cfg = params.model_config(att.model)
    ranking = sorted(((e.bleu_tok, name) for name, beams in art.bleu.translate.items()
                      for b, e in beams.items() if b == att.beam and tables.scored(e)),
                     reverse=True)
    names = [name for _, name in ranking]
    rank = names.index(att.system) + 1 if att.system in names else None
    parts = [
        P.attention_text(system=att.system, score=score,
                         architecture=cfg.describe(), layers=cfg.num_layers,
                         hidden=cfg.hidden_size, beam=att.beam,
                         ranked=", ".join(f"{name} {bleu:.2f}" for bleu, name in ranking),
                         rank=rank, systems=len(ranking)),
        Image("Attention weights", fig, "figures/attention.png",
              P.attention_caption(examples=len(att.examples), shortest=att.source_words[0],
                                  longest=att.source_words[1])),
    ]
    cross = att.cross_attention
    if cross is not None:  # a Transformer's cross-attention on the same sentences
        e = tables.bleu_entry(art.bleu, "translate", cross.system, cross.beam)
        fig = figures.attention_weights(cross.examples, fig_dir / "cross_attention.png",
                                        title=P.cross_attention_title(cross.model,
                                                                      cross.beam))
        parts += [
            P.cross_attention_text(
                system=cross.system, model=cross.model, layer=cross.layer,
                architecture=params.model_config(cross.model).describe(),
                score=f" (tokenized BLEU {e.bleu_tok:.2f})" if tables.scored(e) else ""),
            Image("Cross-attention weights", fig, "figures/cross_attention.png",
                  P.attention_caption(examples=len(cross.examples),
                                      shortest=att.source_words[0],
                                      longest=att.source_words[1]))]
    title = ("Attention weights (Bahdanau et al.'s model and the Transformer, trained here)"
             if cross is not None else "Attention weights (Bahdanau et al.'s model, trained here)")
    return Section(title, parts)


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


def _figure3_curves(params: Params, art: Artifacts) -> list[tuple[str, str, str]]:
    """Figure 3's curves, (legend label, system, beam) of the groups table: our "LSTM" system
    (params report.figure3_*), and the baseline's rescoring 1-best, else its own translation."""
    sys_, beam = params.report.figure3_system, params.report.figure3_beam
    e = tables.bleu_entry(art.bleu, "translate", sys_, beam)
    lstm = f"LSTM: {sys_} beam {beam}" + (f" ({e.bleu_tok:.1f})" if tables.scored(e) else "")
    curves = [(lstm, sys_, str(beam))]
    b = tables.bleu_entry(art.bleu, "rescore", BASELINE)
    have_rescore = (art.groups["system"] == rescore_system(BASELINE)).any() if len(
        art.groups) else False
    if have_rescore:
        curves.append(("baseline: rescore 1-best" + (f" ({b.bleu_tok:.1f})"
                                                     if tables.scored(b) else ""),
                       rescore_system(BASELINE), ""))
    else:
        ref = tables.baseline_ref(params)
        e = tables.bleu_entry(art.bleu, ref.kind, ref.system, ref.beam)
        curves.append((f"baseline: {ref.system} beam {ref.beam}"
                       + (f" ({e.bleu_tok:.1f})" if tables.scored(e) else ""),
                       ref.system if ref.kind == "translate" else rescore_system(ref.system),
                       str(ref.beam) if ref.kind == "translate" else ""))
    for name in params.report.figure3_compare:  # the models that look back at the source
        b = compare_beam(params, name)
        e = tables.bleu_entry(art.bleu, "translate", name, b)
        curves.append((f"{name} beam {b}" + (f" ({e.bleu_tok:.1f})" if tables.scored(e) else ""),
                       name, str(b)))
    return curves


def compare_beam(params: Params, system: str) -> int:
    """The beam a Figure 3 comparison system is drawn at: figure3_beam, else its widest."""
    beams = params.systems[system].beams
    return params.report.figure3_beam if params.report.figure3_beam in beams else max(beams)


def length_drop_table(params: Params, art: Artifacts) -> pd.DataFrame | None:
    """Figure 3's left panel in numbers, for the drawn systems: BLEU of the shortest and of the
    longest group, the drop, and the drop minus the LSTM's, each with its 95% interval."""
    if art.length_drop is None or not len(art.length_drop):
        return None
    want = [(params.report.figure3_system, str(params.report.figure3_beam))] + [
        (s, str(compare_beam(params, s))) for s in params.report.figure3_compare]
    d = art.length_drop.set_index(["system", "beam"])
    rows = []
    for system, beam in want:
        if (system, beam) not in d.index:
            continue
        r = d.loc[(system, beam)]  # (a Series: its fields by name, `drop` is also a method)
        model = params.model_config(params.systems[system].members[0])
        diff = r["drop_minus_reference"]
        rows.append({
            "system": f"{system} beam {beam}", "model": model.describe(),
            f"BLEU, {r['short_label']} words": round(float(r["short_bleu"]), 2),
            f"BLEU, {r['long_label']} words": round(float(r["long_bleu"]), 2),
            "drop (95% CI)": f"{float(r['drop']):.2f} ({float(r['drop_lo']):.2f} to "
                             f"{float(r['drop_hi']):.2f})",
            f"drop minus {want[0][0]}'s (95% CI)":
                "" if system == want[0][0] or diff == "" else
                f"{float(diff):+.2f} ({float(r['diff_lo']):+.2f} to {float(r['diff_hi']):+.2f})"})
    return pd.DataFrame(rows) if rows else None


def _fmt_frame(df: pd.DataFrame, nd: dict[str, int]) -> pd.DataFrame:
    out = df.copy().astype(object)
    for col in out.columns:
        out[col] = [tables.fmt(v, nd.get(col, 2)) if not isinstance(v, str) else v
                    for v in df[col]]
    return out
