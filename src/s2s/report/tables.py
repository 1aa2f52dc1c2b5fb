"""The report's tables and claims, computed from the pipeline's metrics; no I/O, no plotting.

Every number the paper reports is a constant here, labelled as the paper's; our numbers come from
``metrics/bleu.json``, ``metrics/train/*.json`` and the decoders' ``timing.json``. A row we could
not produce stays in its table as "not run" with the reason; it is never dropped.

Two BLEU columns, never mixed: ``ours_bleu_tok`` is cased BLEU on tokenized text, the paper's method
(multi-bleu.pl), comparable to the paper's column; ``ours_bleu_sacre`` is sacreBLEU 13a on
detokenized text and carries its signature.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import pandas as pd

from s2s.config import Params

NOT_RUN = "not run"

# --- The paper's numbers (Sutskever et al. 2014, arXiv 1409.3215v3) ------------------------------
PAPER_CONDITIONS = ("paper: WMT'14 en-fr 12M-pair selected subset, 4 layers x 1000 cells, vocab "
                    "160k/80k, test ntst14 (3003 sentences), cased multi-bleu.pl on tokenized text")
PAPER_TEST_PPL = {"forward": 5.8, "reversed": 4.7}  # §3.3, source reversal
PAPER_REVERSAL_BLEU = (25.9, 30.6)  # §3.3 (a different run from Table 1's 26.17)


@dataclass(frozen=True)
class Ours:
    """What of ours answers a paper row: a translation (system, beam), a rescoring output, or the
    pipeline's baseline (resolved from params)."""

    kind: str  # "translate" | "rescore" | "baseline"
    system: str = ""
    beam: int = 0


@dataclass(frozen=True)
class PaperRow:
    method: str
    paper_bleu: float
    paper_text: str  # as printed in the paper ("~45")
    ours: Ours | None  # None: a system we do not train
    why_not: str = ""  # why ours is None


PAPER_TABLE1 = (
    PaperRow("Bahdanau et al. 2014 (attention)", 28.45, "28.45",
             Ours("translate", "attention", 12)),
    PaperRow("Baseline SMT (Schwenk)", 33.30, "33.30", Ours("baseline")),
    PaperRow("Single forward LSTM, beam size 12", 26.17, "26.17", Ours("translate", "forward", 12)),
    PaperRow("Single reversed LSTM, beam size 12", 30.59, "30.59",
             Ours("translate", "reversed", 12)),
    PaperRow("Ensemble of 5 reversed LSTMs, beam size 1", 33.00, "33.00",
             Ours("translate", "ensemble5", 1)),
    PaperRow("Ensemble of 2 reversed LSTMs, beam size 12", 33.27, "33.27",
             Ours("translate", "ensemble2", 12)),
    PaperRow("Ensemble of 5 reversed LSTMs, beam size 2", 34.50, "34.50",
             Ours("translate", "ensemble5", 2)),
    PaperRow("Ensemble of 5 reversed LSTMs, beam size 12", 34.81, "34.81",
             Ours("translate", "ensemble5", 12)),
)

PAPER_TABLE2 = (
    PaperRow("Baseline System", 33.30, "33.30", Ours("rescore", "baseline")),
    PaperRow("Cho et al. 2014 (GRU encoder-decoder rescoring)", 34.54, "34.54",
             Ours("rescore", "gru")),
    PaperRow("Best WMT'14 result", 37.0, "37.0", None,
             "the best system submitted to WMT'14, not reproduced here"),
    PaperRow("Rescoring the baseline 1000-best with a single forward LSTM", 35.61, "35.61",
             Ours("rescore", "forward")),
    PaperRow("Rescoring the baseline 1000-best with a single reversed LSTM", 35.85, "35.85",
             Ours("rescore", "reversed")),
    PaperRow("Rescoring the baseline 1000-best with an ensemble of 5 reversed LSTMs", 36.5, "36.5",
             Ours("rescore", "ensemble5")),
    PaperRow("Oracle Rescoring of the Baseline 1000-best lists", 45.0, "~45",
             Ours("rescore", "oracle")),
)

# paper_bleu: the paper's number (45.0 for "~45"); paper_printed: as the paper prints it.
BLEU_COLUMNS = ["method", "paper_bleu", "paper_printed", "ours_system", "ours_bleu_tok",
                "ours_bleu_sacre", "sacre_signature", "status", "conditions"]
# Headers for the rendered (Markdown/HTML) tables: each BLEU column says what it is.
BLEU_HEADERS = {
    "method": "method (paper's row)",
    "paper_printed": "paper BLEU (paper's number, tokenized)",
    "ours_system": "ours: system",
    "ours_bleu_tok": "ours BLEU tokenized (paper's method)",
    "ours_bleu_sacre": "ours sacreBLEU 13a (signature below; not comparable to paper)",
    "status": "status",
    "conditions": "our conditions",
}


def rescore_system(name: str) -> str:
    """How the evaluate stage names a rescoring output in figure3.csv's ``system`` column."""
    return f"rescore/{name}"


# --- helpers -------------------------------------------------------------------------------------


def fmt(x: Any, nd: int = 2) -> str:
    """A number for a rendered table; '-' for a missing one."""
    if x is None or (isinstance(x, float) and x != x):
        return "-"
    if isinstance(x, float):
        return f"{x:.{nd}f}"
    if isinstance(x, int):
        return f"{x:,}"
    return str(x)


def bleu_entry(bleu: dict, kind: str, system: str, beam: int | None = None) -> dict | None:
    """The entry of bleu.json for a translation (system, beam) or a rescoring output, or None."""
    if kind == "translate":
        return (bleu.get("translate", {}).get(system) or {}).get(str(beam))
    return bleu.get("rescore", {}).get(system)


def scored(entry: dict | None) -> bool:
    return bool(entry) and "bleu_tok" in entry and not entry.get("absent")


def baseline_ref(params: Params) -> Ours:
    """Our stand-in for the paper's SMT baseline: the pipeline's own baseline system at its widest
    beam, or (external n-best lists, baseline not one of our systems) the rescore stage's 1-best."""
    name = params.rescore.baseline
    if name in params.systems:
        return Ours("translate", name, max(params.systems[name].beams))
    return Ours("rescore", "baseline")


def _resolve(params: Params, ours: Ours) -> Ours:
    return baseline_ref(params) if ours.kind == "baseline" else ours


def _describe(params: Params, ours: Ours, *, is_baseline: bool = False) -> str:
    if ours.kind == "translate":
        members = params.systems[ours.system].members if ours.system in params.systems else ()
        what = f"{ours.system}, beam {ours.beam}"
        if members:
            what += f" ({len(members)} model{'s' if len(members) > 1 else ''})"
        if is_baseline:
            what += "; an LSTM baseline of ours, not phrase-based SMT"
        return what
    if ours.system == "baseline":
        return (f"rescore/baseline: 1-best of the n-best lists of '{params.rescore.baseline}'"
                + ("" if params.data.nbest is None else " (external n-best lists)"))
    if ours.system == "oracle":
        return "rescore/oracle: best n-best entry by sentence BLEU (needs the references)"
    members = params.rescore.rescorers.get(ours.system, ())
    return f"rescore/{ours.system} ({', '.join(members)})" if members else f"rescore/{ours.system}"


def _why_absent(params: Params, ours: Ours, entry: dict | None) -> str:
    if ours.kind == "translate":
        if ours.system not in params.systems:
            return f"{NOT_RUN}: no system '{ours.system}' in profile '{params.profile}'"
        if ours.beam not in params.systems[ours.system].beams:
            return (f"{NOT_RUN}: system '{ours.system}' is not decoded at beam {ours.beam} "
                    f"in profile '{params.profile}'")
    elif ours.system not in ("baseline", "oracle") and ours.system not in params.rescore.rescorers:
        return f"{NOT_RUN}: no rescorer '{ours.system}' in profile '{params.profile}'"
    reason = (entry or {}).get("reason", "no score in metrics/bleu.json")
    return f"{NOT_RUN}: {reason}"


def _model_conditions(params: Params, members: tuple[str, ...], train: dict[str, dict]) -> str:
    m = train.get(members[0], {}) if members else {}
    cfg = params.model_config(members[0]) if members and members[0] in params.models else None
    layers = m.get("num_layers", cfg.num_layers if cfg else "?")
    hidden = m.get("hidden_size", cfg.hidden_size if cfg else "?")
    pairs = m.get("train_pairs")
    pairs_text = f"{pairs:,} train pairs" if isinstance(pairs, int) else "train pairs unknown"
    count = f"{len(members)} models" if len(members) > 1 else "1 model"
    layer_text = "1 layer" if layers == 1 else f"{layers} layers"
    return f"{pairs_text}; {count} of {layer_text} x {hidden} cells" + (
        f" ({architecture(cfg)})" if cfg and cfg.arch != "seq2seq" else "")


def architecture(cfg) -> str:
    """What a model is, in words: cell, and for the cited systems their paper's design."""
    if cfg.arch == "cho":
        return f"Cho et al.'s encoder-decoder: the summary feeds every step; {cfg.cell.upper()}"
    if cfg.arch == "attention":
        return (f"Bahdanau et al.'s attention: bidirectional {cfg.cell.upper()} encoder, "
                f"{cfg.attention} score")
    return {"lstm": "LSTM", "peephole": "peephole LSTM", "gru": "GRU"}[cfg.cell]


def vocab_text(params: Params, vocab: dict | None) -> str:
    """Vocabulary sizes (words, specials not counted) as built, else the configured caps."""
    try:
        return f"vocab {vocab['en']['words']:,}/{vocab['fr']['words']:,} words"
    except (KeyError, TypeError):
        return f"vocab <= {params.vocab.src_size:,}/{params.vocab.tgt_size:,} words"


def _conditions(params: Params, ours: Ours, bleu: dict, train: dict[str, dict],
                vocab_sizes: str) -> str:
    test = f"test {params.data.test.corpus} ({fmt(bleu.get('test_sentences'))} sentences)"
    vocab = vocab_sizes
    if ours.kind == "translate":
        members = params.systems[ours.system].members if ours.system in params.systems else ()
        return "; ".join([_model_conditions(params, members, train), vocab,
                          f"beam {ours.beam}", test])
    base = params.rescore.baseline
    nbest = params.systems[base].nbest if base in params.systems else None
    lists = f"{nbest}-best lists of '{base}'" if nbest else f"n-best lists of '{base}'"
    members = params.rescore.rescorers.get(ours.system, ())
    parts = [lists]
    if members:
        parts += [_model_conditions(params, members, train),
                  f"model weight {params.rescore.weight:g}"]
    return "; ".join([*parts, vocab, test])


def _bleu_table(params: Params, rows: tuple[PaperRow, ...], bleu: dict,
                train: dict[str, dict], vocab: dict | None) -> pd.DataFrame:
    vocab_sizes = vocab_text(params, vocab)
    out = []
    for row in rows:
        rec = {"method": row.method, "paper_bleu": row.paper_bleu,
               "paper_printed": row.paper_text, "ours_system": "",
               "ours_bleu_tok": None, "ours_bleu_sacre": None, "sacre_signature": "",
               "status": "", "conditions": ""}
        if row.ours is None:
            rec["status"] = f"{NOT_RUN}: {row.why_not}"
            out.append(rec)
            continue
        ours = _resolve(params, row.ours)
        entry = bleu_entry(bleu, ours.kind, ours.system, ours.beam)
        rec["ours_system"] = _describe(params, ours, is_baseline=row.ours.kind == "baseline")
        rec["conditions"] = _conditions(params, ours, bleu, train, vocab_sizes)
        if scored(entry):
            rec.update(ours_bleu_tok=entry["bleu_tok"], ours_bleu_sacre=entry["bleu_sacre"],
                       sacre_signature=entry.get("sacre_signature", ""), status="ours")
        else:
            rec["status"] = _why_absent(params, ours, entry)
        out.append(rec)
    return pd.DataFrame(out, columns=BLEU_COLUMNS)


def table1(params: Params, bleu: dict, train: dict[str, dict],
           vocab: dict | None = None) -> pd.DataFrame:
    """Table 1 (direct translation) in the paper's row order; columns :data:`BLEU_COLUMNS`.
    ``train``: metrics/train/<model>.json by model; ``vocab``: metrics/vocab.json."""
    return _bleu_table(params, PAPER_TABLE1, bleu, train, vocab)


def other_systems(params: Params, bleu: dict, train: dict[str, dict],
                  vocab: dict | None = None) -> pd.DataFrame:
    """Our translations that answer no row of the paper's Table 1 (e.g. the Cho et al. GRU model
    decoding on its own), with Table 1's columns; their paper columns say there is no such row."""
    covered = {(o.system, o.beam) for o in
               (_resolve(params, r.ours) for r in PAPER_TABLE1 if r.ours) if o.kind == "translate"}
    rows = tuple(
        PaperRow(f"ours only: {system}, beam {beam}", math.nan, "no paper row",
                 Ours("translate", system, beam))
        for system, cfg in params.systems.items() for beam in cfg.beams
        if (system, beam) not in covered)
    return _bleu_table(params, rows, bleu, train, vocab)


def table2(params: Params, bleu: dict, train: dict[str, dict],
           vocab: dict | None = None) -> pd.DataFrame:
    """Table 2 (rescoring the baseline's n-best lists) in the paper's row order."""
    return _bleu_table(params, PAPER_TABLE2, bleu, train, vocab)


def display_bleu_table(df: pd.DataFrame) -> pd.DataFrame:
    """Strings for rendering: 'not run' in the BLEU cells of rows we did not produce."""
    shown = df.drop(columns=["paper_bleu", "sacre_signature"]).copy()
    for col in ("ours_bleu_tok", "ours_bleu_sacre"):
        shown[col] = [fmt(v) if isinstance(v, (int, float)) and v == v else NOT_RUN
                      for v in df[col]]
    return shown.rename(columns=BLEU_HEADERS)


def split_conditions(shown: pd.DataFrame, column: str = "our conditions") -> tuple[str,
                                                                                 pd.DataFrame]:
    """The conditions every row of a table shares (stated once, above it) and the table with
    only each row's own conditions left in ``column``."""
    if column not in shown.columns:
        return "", shown
    parts = [[p for p in str(c).split("; ") if p] for c in shown[column]]
    filled = [p for p in parts if p]
    if not filled:
        return "", shown
    common = [p for p in filled[0] if all(p in q for q in filled)]
    out = shown.copy()
    out[column] = ["; ".join(p for p in q if p not in common) or ("-" if q else "")
                   for q in parts]
    if (out[column].isin(["-", ""])).all():
        out = out.drop(columns=[column])
    else:
        out = out.rename(columns={column: "conditions of this row"})
    return ("Our conditions in every row: " + "; ".join(common) + ".") if common else "", out


def signatures(*tables: pd.DataFrame) -> list[str]:
    """The distinct sacreBLEU signatures behind the sacreBLEU column(s)."""
    sigs: list[str] = []
    for df in tables:
        for s in df["sacre_signature"]:
            if s and s not in sigs:
                sigs.append(s)
    return sigs


# --- perplexity ----------------------------------------------------------------------------------


def forward_and_reversed(params: Params) -> tuple[str | None, str | None]:
    """The single forward model and the reversed model compared with it (``reversed_1``)."""
    def first_member(system: str) -> str | None:
        s = params.systems.get(system)
        return s.members[0] if s else None

    fwd = "forward" if "forward" in params.models else first_member("forward")
    rev = "reversed_1" if "reversed_1" in params.models else first_member("reversed")
    return fwd, rev


def perplexity_table(params: Params, train: dict[str, dict]) -> pd.DataFrame:
    """Dev and test perplexity of the forward model and a reversed one, beside the paper's."""
    fwd, rev = forward_and_reversed(params)
    rows = []
    for role, model in (("forward", fwd), ("reversed", rev)):
        m = train.get(model or "", {})
        rows.append({"source order": role, "model": model or "-",
                     "dev ppl": m.get("dev_ppl"), "best dev ppl": m.get("best_dev_ppl"),
                     "test ppl": m.get("test_ppl"), "epochs": m.get("epochs"),
                     "paper's test ppl": PAPER_TEST_PPL[role],
                     "status": "ours" if m else f"{NOT_RUN}: no metrics/train/{model}.json"})
    return pd.DataFrame(rows)


def models_table(params: Params, train: dict[str, dict]) -> pd.DataFrame:
    """Every model of the profile: what it is, its size, perplexities and training speed."""
    rows = []
    for name in params.models:
        cfg = params.model_config(name)
        m = train.get(name, {})
        seconds = m.get("wall_seconds")
        rows.append({"model": name, "architecture": architecture(cfg),
                     "layers x cells": f"{cfg.num_layers} x {cfg.hidden_size}",
                     "source": "reversed" if cfg.reverse_source else "forward",
                     "parameters": m.get("parameters"), "epochs": m.get("epochs"),
                     "dev ppl": m.get("dev_ppl"), "test ppl": m.get("test_ppl"),
                     "target words/s": m.get("tgt_words_per_sec"),
                     # runs from before train.amp have no "precision": they were fp32
                     "precision": m.get("precision", "fp32") if m else None,
                     "minutes": None if seconds is None else seconds / 60,
                     "status": "ours" if m else f"{NOT_RUN}: no metrics/train/{name}.json"})
    return pd.DataFrame(rows)


# --- decoding cost -------------------------------------------------------------------------------


def cost_table(params: Params, timing: dict[str, dict]) -> pd.DataFrame:
    """Decoding time per system and beam (from each system's timing.json)."""
    rows = []
    for system, scfg in params.systems.items():
        t = timing.get(system) or {}
        for beam in scfg.beams:
            b = (t.get("beams") or {}).get(str(beam))
            rec = {"system": system, "models": len(scfg.members), "beam": beam,
                   "sentences": None, "seconds": None, "sents_per_sec": None,
                   "ms_per_sentence": None, "device": t.get("device", "-"),
                   "threads": t.get("threads"),
                   "precision": t.get("precision", "fp32") if t else None,
                   "status": (f"{NOT_RUN}: no timing.json for '{system}'" if not t
                              else f"{NOT_RUN}: no beam {beam} in its timing.json")}
            if b:
                rec.update(sentences=b["sentences"], seconds=b["seconds"],
                           sents_per_sec=b["sents_per_sec"], status="measured",
                           ms_per_sentence=1000.0 * b["seconds"] / max(b["sentences"], 1))
            rows.append(rec)
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Claim:
    claim: str
    status: str  # "holds" | "does not hold" | "cannot tell"
    evidence: str


HOLDS, FAILS, UNKNOWN = "holds", "does not hold", "cannot tell"
NO_DIFFERENCE = "no significant difference"  # the 95% interval of the difference contains 0
# (baseline, system) -> the paired-bootstrap Difference of their tokenised BLEU, or None when
# either output is not there; the report stage builds it from the hypothesis files.
DiffFn = Callable[[Ours, Ours], Any]


def _verdict(ok: bool) -> str:
    return HOLDS if ok else FAILS


def cost_claim(params: Params, costs: pd.DataFrame) -> Claim:
    """Table 1's caption: five models at beam 2 cost less than one model at beam 12."""
    text = "5 models at beam 2 cost less than 1 model at beam 12 (Table 1 caption)"

    def per_sentence(system: str, beam: int) -> float | None:
        sel = costs[(costs["system"] == system) & (costs["beam"] == beam)]
        v = sel["ms_per_sentence"].iloc[0] if len(sel) else None
        return None if v is None or v != v else float(v)

    e5 = per_sentence("ensemble5", 2)
    single, single_name = None, None
    for name in ("reversed", "forward"):
        single = per_sentence(name, 12)
        if single is not None:
            single_name = name
            break
    if e5 is None or single is None:
        missing = [w for w, v in (("ensemble5 beam 2", e5), ("a single model at beam 12", single))
                   if v is None]
        return Claim(text, UNKNOWN, f"no timing for {' and '.join(missing)}")
    return Claim(text, _verdict(e5 < single),
                 f"ensemble5 beam 2: {e5:.1f} ms/sentence vs {single_name} beam 12: "
                 f"{single:.1f} ms/sentence")


# --- claims --------------------------------------------------------------------------------------


def _tok(bleu: dict, system: str, beam: int) -> float | None:
    e = bleu_entry(bleu, "translate", system, beam)
    return e["bleu_tok"] if scored(e) else None


def _common_beam(params: Params, bleu: dict, a: str, b: str) -> int | None:
    """The widest beam at which both systems were scored (12 in the paper)."""
    if a not in params.systems or b not in params.systems:
        return None
    beams = set(params.systems[a].beams) & set(params.systems[b].beams)
    beams = [k for k in beams if _tok(bleu, a, k) is not None and _tok(bleu, b, k) is not None]
    return max(beams) if beams else None


def _interval(d) -> str:
    return (f"paired-bootstrap 95% CI of the difference {d.lo:+.2f} to {d.hi:+.2f}"
            if d is not None else "")


def _verdict_of(differences: list, deltas: list[float]) -> str:
    """Every difference positive and significant: holds; any significantly negative (or, without
    intervals, not positive): does not hold; else no significant difference."""
    if differences and all(d is not None for d in differences):
        if all(d.significant and d.delta > 0 for d in differences):
            return HOLDS
        if any(d.significant and d.delta < 0 for d in differences):
            return FAILS
        if not any(d.significant for d in differences):
            return NO_DIFFERENCE
        return FAILS  # some significant gains, some not: the claim is not general here
    return _verdict(all(x > 0 for x in deltas))


def _compare_systems(params: Params, bleu: dict, claim: str, worse: str, better: str,
                     diff: DiffFn | None = None) -> Claim:
    beam = _common_beam(params, bleu, worse, better)
    if beam is None:
        return Claim(claim, UNKNOWN, f"no beam at which both '{worse}' and '{better}' were scored")
    lo, hi = _tok(bleu, worse, beam), _tok(bleu, better, beam)
    d = diff(Ours("translate", worse, beam), Ours("translate", better, beam)) if diff else None
    return Claim(claim, _verdict_of([d], [hi - lo]),
                 f"tokenized BLEU at beam {beam}: {better} {hi:.2f} vs {worse} {lo:.2f} "
                 f"({hi - lo:+.2f}" + (f"; {_interval(d)}" if d is not None else "") + ")")


def claims(params: Params, bleu: dict, train: dict[str, dict], costs: pd.DataFrame,
           diff: DiffFn | None = None) -> list[Claim]:
    """Each of the paper's main claims, checked against our numbers (never assumed). With
    ``diff``, every BLEU difference a claim rests on carries its paired-bootstrap 95% interval
    (tokenised BLEU), and a difference whose interval contains 0 is no significant difference."""
    out = []
    fwd, rev = forward_and_reversed(params)
    text = "Reversing the source lowers perplexity (paper: test ppl 5.8 -> 4.7)"
    f, r = train.get(fwd or "", {}), train.get(rev or "", {})
    if f.get("dev_ppl") is not None and r.get("dev_ppl") is not None:
        ev = f"dev ppl: {fwd} {f['dev_ppl']:.2f} vs {rev} {r['dev_ppl']:.2f}"
        if f.get("test_ppl") is not None and r.get("test_ppl") is not None:
            ev += f"; test ppl: {f['test_ppl']:.2f} vs {r['test_ppl']:.2f}"
        out.append(Claim(text, _verdict(r["dev_ppl"] < f["dev_ppl"]), ev))
    else:
        out.append(Claim(text, UNKNOWN, f"training metrics of '{fwd}' or '{rev}' missing"))

    out.append(_compare_systems(params, bleu, "Reversing the source raises BLEU "
                                "(paper: 26.17 -> 30.59 at beam 12)", "forward", "reversed", diff))
    out.append(_compare_systems(params, bleu, "An ensemble of 5 reversed LSTMs beats a single "
                                "reversed LSTM (paper: 34.81 vs 30.59)", "reversed", "ensemble5", diff))

    text = "A wider beam helps (paper: ensemble5 33.00 at beam 1 -> 34.81 at beam 12)"
    pairs = []
    for system, scfg in params.systems.items():
        beams = sorted(k for k in scfg.beams if _tok(bleu, system, k) is not None)
        if len(beams) >= 2:
            pairs.append((system, beams[0], _tok(bleu, system, beams[0]),
                          beams[-1], _tok(bleu, system, beams[-1])))
    if pairs:
        better = [p for p in pairs if p[4] > p[2]]
        ds = [diff(Ours("translate", s, b0), Ours("translate", s, b1)) if diff else None
              for s, b0, _, b1, _ in pairs]
        ev = "; ".join(f"{s}: beam {b0} {x0:.2f} -> beam {b1} {x1:.2f}"
                       + (f" ({x1 - x0:+.2f}, 95% CI {d.lo:+.2f} to {d.hi:+.2f})" if d else "")
                       for (s, b0, x0, b1, x1), d in zip(pairs, ds))
        out.append(Claim(text, _verdict_of(ds, [p[4] - p[2] for p in pairs]),
                         f"higher for {len(better)} of {len(pairs)} systems ({ev})"))
    else:
        out.append(Claim(text, UNKNOWN, "no system scored at two beam widths"))

    text = ("Rescoring the baseline's n-best lists with LSTMs beats the baseline "
            "(paper: 33.30 -> 36.5)")
    base = bleu_entry(bleu, "rescore", "baseline")
    rescored = [(name, bleu_entry(bleu, "rescore", name))
                for name, members in params.rescore.rescorers.items()
                if all(_is_lstm(params, m) for m in members)]  # the paper's claim: LSTMs
    rescored = [(n, e["bleu_tok"]) for n, e in rescored if scored(e)]
    if scored(base) and rescored:
        b = base["bleu_tok"]
        better = [n for n, x in rescored if x > b]
        ds = [diff(Ours("rescore", "baseline"), Ours("rescore", n)) if diff else None
              for n, _ in rescored]
        ev = f"baseline 1-best {b:.2f}; " + "; ".join(
            f"{n} {x:.2f} ({x - b:+.2f}" + (f", 95% CI {d.lo:+.2f} to {d.hi:+.2f}" if d else "")
            + ")" for (n, x), d in zip(rescored, ds))
        out.append(Claim(text, _verdict_of(ds, [x - b for _, x in rescored]),
                         f"higher for {len(better)} of {len(rescored)} rescorers ({ev})"))
    else:
        out.append(Claim(text, UNKNOWN, "no rescoring output or no baseline 1-best was scored"))

    out.append(cost_claim(params, costs))
    return out


def _is_lstm(params: Params, model: str) -> bool:
    cfg = params.model_config(model)
    return cfg.arch == "seq2seq" and cfg.cell in ("lstm", "peephole")


def claims_table(items: list[Claim]) -> pd.DataFrame:
    return pd.DataFrame([{"claim": c.claim, "here": c.status + ("" if c.status in (
                              UNKNOWN, NO_DIFFERENCE) else " at this scale"),
                          "numbers": c.evidence} for c in items])


def prepare_table(prepare: dict) -> pd.DataFrame:
    """One row per split and corpus of metrics/prepare.json."""
    rows = []
    for split, corpora in prepare.get("splits", {}).items():
        for corpus, c in corpora.items():
            removed = c.get("removed", {})
            rows.append({"split": split, "corpus": corpus, "lines in": fmt(c.get("lines_in")),
                         **{f"removed: {k.replace('_', ' ')}": fmt(v) for k, v in removed.items()},
                         "lines out": fmt(c.get("lines_out")),
                         "tokens en": fmt(c.get("tokens_en", "")),
                         "tokens fr": fmt(c.get("tokens_fr", ""))})
    return pd.DataFrame(rows).fillna("")


def vocab_table(vocab: dict) -> pd.DataFrame:
    """One row per side of metrics/vocab.json."""
    rows = []
    for side, v in vocab.items():
        rates = v.get("unk_rate", {})
        rows.append({"side": side, "vocabulary (with 4 specials)": fmt(v.get("size")),
                     "training word types": fmt(v.get("train_types")),
                     **{f"UNK rate {split}": f"{100 * r:.2f}%" for split, r in rates.items()}})
    return pd.DataFrame(rows)
