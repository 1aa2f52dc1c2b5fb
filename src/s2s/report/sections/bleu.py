"""Tables 1 and 2, the paper's two BLEU tables: direct translation (with our systems the paper has
no row for) and rescoring the baseline's n-best lists, with the claim that says whether our
baseline is as strong as the paper's; and the notes under both. Its prose: ``templates/bleu.j2``.

The paper's rows and numbers come from :mod:`s2s.paper` (``paper.yaml``), which of our outputs
answers each row from params ``report.table1`` / ``report.table2``; our numbers from the records
of :mod:`s2s.artifacts` (``metrics/bleu.json``, ``metrics/train/*.json``, ``metrics/vocab.json``).
A row we could not produce stays in its table as "not run" with the reason; it is never dropped.

Two BLEU columns, never mixed: ``ours_bleu_tok`` is cased BLEU on tokenized text, the paper's method
(multi-bleu.pl), comparable to the paper's column; ``ours_bleu_sacre`` is sacreBLEU 13a on
detokenized text and carries its signature.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from s2s.artifacts import Absent, Bleu, BleuEntry, Scored, TrainMetrics, VocabMetrics
from s2s.config import Params
from s2s.layout import BASELINE, ORACLE, RESCORE_FIXED, rescore_system
from s2s.paper import Ours, answer, baseline_ref, paper
from s2s.report.render import NOT_RUN, Section, Table, fmt
from s2s.report.sections import Context, prose
from s2s.report.sections.paper_claims import here

TABLE1 = "Table 1: direct translation"
TABLE2 = "Table 2: rescoring"


def sections(ctx: Context) -> list[Section]:
    """Table 1, then Table 2 where the profile rescores (params rescore.baseline); the summary
    names Table 2's claims as not run where it does not."""
    P, params, art = prose("bleu"), ctx.params, ctx.art
    notes = (P.bleu_tok_note(art.bleu.bleu_tok_signature),
             P.bleu_sacre_note(signatures(params, art.bleu)), P.paper_conditions())
    t1 = table1(params, art.bleu, art.train, art.vocab)
    other = other_systems(params, art.bleu, art.train, art.vocab)
    lead, shown = split_conditions(display_bleu_table(t1))
    lead_o, shown_o = split_conditions(display_bleu_table(other))
    main = Table(P.table1_title(), shown, notes, "table1", lead, numbers=t1)
    rest = Table(P.table1_other_title(), shown_o, (P.table1_other_note(),), "table1_other", lead_o,
                 numbers=other)
    # table1_other is written (with its header) where no system of ours is outside Table 1's
    # rows, so that tables/ holds the same files in every run; shown only where it has rows
    out = [Section(TABLE1, [main, rest]) if len(other) else
           Section(TABLE1, [main], unshown=[rest])]
    if params.rescore.baseline is None:
        return out
    t2 = table2(params, art.bleu, art.train, art.vocab)
    lead, shown = split_conditions(display_bleu_table(t2))
    table = Table(P.table2_title(), shown, notes + (P.oracle_note(),), "table2", lead,
                  numbers=t2)
    setting = art.claims.setting
    return out + [Section(TABLE2, [
        P.table2_setting(setting, here(setting.status), baseline_text(params)), table])]


@dataclass(frozen=True)
class Row:
    """A row of a BLEU table: the paper's (or none: ``paper_bleu`` NaN) and what of ours answers
    it (None: nothing, for ``why_not``)."""

    method: str
    paper_bleu: float
    paper_text: str  # as printed in the paper ("~45")
    ours: Ours | None
    why_not: str = ""  # why ours is None


def rows(params: Params, table: str) -> tuple[Row, ...]:
    """The rows of the paper's `table` ("table1" or "table2"), in its order, each with the output
    of ours that params ``report.<table>`` says answers it."""
    out = []
    for r in paper().rows(table):
        ours = answer(params, table, r.id)
        why = r.ours_never or (f"no output of profile '{params.profile}' answers this row "
                               f"(params report.{table}.{r.id})")
        out.append(Row(r.method, r.paper_bleu, r.paper_text, ours, "" if ours else why))
    return tuple(out)


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



def baseline_text(params: Params) -> str:
    """What the n-best lists Table 2 rescores come from, in words: the external lists of
    `data.nbest`, or the `rescore.baseline` system's models and its n-best size and beam."""
    if params.data.nbest is not None:
        return f"the external n-best lists of data.nbest ({params.data.nbest.corpus})"
    name = params.rescore.baseline
    system = params.systems[name]
    kinds = list(dict.fromkeys(f"{c.describe()}, {c.size()}"
                               for c in params.model_configs(system.members).values()))
    count = f"{len(system.members)} model{'s' if len(system.members) > 1 else ''}"
    return (f"'{name}' ({count}: {'; '.join(kinds)}), its {system.nbest}-best lists at beam "
            f"{system.widest_beam}")


def _resolve(params: Params, ours: Ours) -> Ours:
    return baseline_ref(params) if ours.kind == "baseline" else ours


def _describe(params: Params, ours: Ours, *, is_baseline: bool = False) -> str:
    if ours.kind == "translate":
        members = params.systems[ours.system].members if ours.system in params.systems else ()
        what = f"{ours.system}, beam {ours.beam}"
        if members:
            what += f" ({len(members)} model{'s' if len(members) > 1 else ''})"
        if is_baseline:
            what += "; a neural baseline of ours, not phrase-based SMT"
        return what
    if ours.system == BASELINE:
        return (f"rescore/baseline: 1-best of the n-best lists of '{params.rescore.baseline}'"
                + ("" if params.data.nbest is None else " (external n-best lists)"))
    if ours.system == ORACLE:
        return "rescore/oracle: best n-best entry by sentence BLEU (needs the references)"
    members = params.rescore.rescorers.get(ours.system, ())
    name = rescore_system(ours.system)
    return f"{name} ({', '.join(members)})" if members else name


def _why_absent(params: Params, ours: Ours, entry: BleuEntry | None) -> str:
    if ours.kind == "translate":
        if ours.system not in params.systems:
            return f"{NOT_RUN}: no system '{ours.system}' in profile '{params.profile}'"
        if ours.beam not in params.systems[ours.system].beams:
            return (f"{NOT_RUN}: system '{ours.system}' is not decoded at beam {ours.beam} "
                    f"in profile '{params.profile}'")
    elif ours.system not in RESCORE_FIXED and ours.system not in params.rescore.rescorers:
        return f"{NOT_RUN}: no rescorer '{ours.system}' in profile '{params.profile}'"
    reason = entry.reason if isinstance(entry, Absent) else "no score in metrics/bleu.json"
    return f"{NOT_RUN}: {reason}"


def _model_conditions(params: Params, members: tuple[str, ...],
                      train: dict[str, TrainMetrics]) -> str:
    m = train.get(members[0]) if members else None
    cfg = params.model_config(members[0]) if members and members[0] in params.models else None
    count = f"{len(members)} models" if len(members) != 1 else "1 model"
    pairs_text = f"{m.train_pairs:,} train pairs" if m else "train pairs unknown"
    if cfg is not None and not cfg.recurrent:  # no layers x cells: its own description
        return f"{pairs_text}; {count}: {cfg.describe()}"
    layers = m.num_layers if m else (cfg.num_layers if cfg else "?")
    hidden = m.hidden_size if m else (cfg.hidden_size if cfg else "?")
    layer_text = "1 layer" if layers == 1 else f"{layers} layers"
    return f"{pairs_text}; {count} of {layer_text} x {hidden} cells" + (
        f" ({cfg.describe()})" if cfg and cfg.arch != "seq2seq" else "")


def vocab_text(params: Params, vocab: VocabMetrics | None) -> str:
    """Vocabulary sizes (words, specials not counted) as built, else the configured caps."""
    if vocab is None:
        return f"vocab <= {params.vocab.src_size:,}/{params.vocab.tgt_size:,} words"
    return f"vocab {vocab.en.words:,}/{vocab.fr.words:,} words"


def _conditions(params: Params, ours: Ours, bleu: Bleu, train: dict[str, TrainMetrics],
                vocab_sizes: str) -> str:
    test = f"test {params.data.test.corpus} ({fmt(bleu.test_sentences)} sentences)"
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


def _bleu_table(params: Params, rows: tuple[Row, ...], bleu: Bleu,
                train: dict[str, TrainMetrics], vocab: VocabMetrics | None) -> pd.DataFrame:
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
        entry = bleu.entry(ours.kind, ours.system, ours.beam)
        rec["ours_system"] = _describe(params, ours, is_baseline=row.ours.kind == "baseline")
        rec["conditions"] = _conditions(params, ours, bleu, train, vocab_sizes)
        if isinstance(entry, Scored):
            rec.update(ours_bleu_tok=entry.bleu_tok, ours_bleu_sacre=entry.bleu_sacre,
                       sacre_signature=entry.sacre_signature, status="ours")
        else:
            rec["status"] = _why_absent(params, ours, entry)
        out.append(rec)
    return pd.DataFrame(out, columns=BLEU_COLUMNS)


def table1(params: Params, bleu: Bleu, train: dict[str, TrainMetrics],
           vocab: VocabMetrics | None = None) -> pd.DataFrame:
    """Table 1 (direct translation) in the paper's row order; columns :data:`BLEU_COLUMNS`.
    ``train``: metrics/train/<model>.json by model; ``vocab``: metrics/vocab.json."""
    return _bleu_table(params, rows(params, "table1"), bleu, train, vocab)


def other_systems(params: Params, bleu: Bleu, train: dict[str, TrainMetrics],
                  vocab: VocabMetrics | None = None) -> pd.DataFrame:
    """Our translations that answer no row of the paper's Table 1 (e.g. the Cho et al. GRU model
    decoding on its own), with Table 1's columns; their paper columns say there is no such row."""
    covered = {(o.system, o.beam) for o in
               (_resolve(params, r.ours) for r in rows(params, "table1") if r.ours)
               if o.kind == "translate"}
    others = tuple(
        Row(f"ours only: {system}, beam {beam}", math.nan, "no paper row",
            Ours("translate", system, beam))
        for system, cfg in params.systems.items() for beam in cfg.beams
        if (system, beam) not in covered)
    return _bleu_table(params, others, bleu, train, vocab)


def table2(params: Params, bleu: Bleu, train: dict[str, TrainMetrics],
           vocab: VocabMetrics | None = None) -> pd.DataFrame:
    """Table 2 (rescoring the baseline's n-best lists) in the paper's row order."""
    return _bleu_table(params, rows(params, "table2"), bleu, train, vocab)


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


def signatures(params: Params, bleu: Bleu) -> list[str]:
    """The distinct sacreBLEU signatures of the outputs answering the rows of Tables 1 and 2,
    in their order: the notes under both tables name them all."""
    sigs: list[str] = []
    for table in ("table1", "table2"):
        for row in rows(params, table):
            if row.ours is None:
                continue
            ours = _resolve(params, row.ours)
            e = bleu.entry(ours.kind, ours.system, ours.beam)
            if isinstance(e, Scored) and e.sacre_signature and e.sacre_signature not in sigs:
                sigs.append(e.sacre_signature)
    return sigs
