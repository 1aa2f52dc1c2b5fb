"""Figure 3: BLEU by sentence length and by word rarity (our curves), and under it the drop from
the shortest to the longest sentences of the models drawn, with intervals."""

from __future__ import annotations

import pandas as pd

from s2s.artifacts import Scored
from s2s.config import Params
from s2s.layout import BASELINE, rescore_system
from s2s.report import figures
from s2s.report.inputs import Artifacts
from s2s.paper import baseline_ref
from s2s.report.render import Image, Section, Table
from s2s.report.sections import Context, prose


# The compared models that look back at every source word (attention over the encoder's states),
# by `arch`, and what to call one; the others read the source into one fixed vector.
LOOKS_BACK = {"attention": "Bahdanau et al.'s attention model", "transformer": "a Transformer"}


def sections(ctx: Context) -> list[Section]:
    P, params = prose("figure3"), ctx.params
    fig = figures.figure3(ctx.art.groups, _figure3_curves(params, ctx.art),
                          ctx.fig_dir / "figure3.png", note=P.figure3_note())
    compare = params.report.figure3_compare
    drop = length_drop_table(params, ctx.art)
    shown = drop is not None and bool(compare)
    parts: list = [] if len(ctx.art.groups) else [P.figure3_none(shown)]
    parts.append(Image("Figure 3 (ours)", fig, "figures/figure3.png",
                       P.figure3_caption(params.evaluate.min_group)))
    if shown:
        attend, fixed = looking_back(params, compare)
        parts.append(Table(P.length_drop_title(), drop, (P.length_drop_note(attend, fixed),),
                           "length"))
    elif compare and len(ctx.art.groups):  # said once, by figure3_none, where there are no groups
        parts.append(P.length_drop_none([params.report.figure3_system, *compare]))
    return [Section("Figure 3: BLEU by sentence length and word rarity", parts)]


def looking_back(params: Params, compare) -> tuple[list[str], list[str]]:
    """The compared systems that look back at the source words, each as 'name (what it is)', and
    those that read it into one fixed vector (by name), in report.figure3_compare's order."""
    attend, fixed = [], []
    for s in compare:
        arch = params.model_config(params.systems[s].members[0]).arch
        if arch in LOOKS_BACK:
            attend.append(f"{s} ({LOOKS_BACK[arch]})")
        else:
            fixed.append(s)
    return attend, fixed


def _figure3_curves(params: Params, art: Artifacts) -> list[tuple[str, str, str]]:
    """Figure 3's curves, (legend label, system, beam) of the groups table: our "LSTM" system
    (params report.figure3_*), and the baseline's rescoring 1-best, else its own translation."""
    sys_, beam = params.report.figure3_system, params.report.figure3_beam
    e = art.bleu.entry("translate", sys_, beam)
    lstm = f"LSTM: {sys_} beam {beam}" + (f" ({e.bleu_tok:.1f})" if isinstance(e, Scored) else "")
    curves = [(lstm, sys_, str(beam))]
    b = art.bleu.entry("rescore", BASELINE)
    have_rescore = (art.groups["system"] == rescore_system(BASELINE)).any() if len(
        art.groups) else False
    if have_rescore:
        curves.append(("baseline: rescore 1-best" + (f" ({b.bleu_tok:.1f})"
                                                     if isinstance(b, Scored) else ""),
                       rescore_system(BASELINE), ""))
    elif params.rescore.baseline is not None:  # else a profile without a baseline: no curve
        ref = baseline_ref(params)
        e = art.bleu.entry(ref.kind, ref.system, ref.beam)
        curves.append((f"baseline: {ref.system} beam {ref.beam}"
                       + (f" ({e.bleu_tok:.1f})" if isinstance(e, Scored) else ""),
                       ref.system if ref.kind == "translate" else rescore_system(ref.system),
                       str(ref.beam) if ref.kind == "translate" else ""))
    for name in params.report.figure3_compare:  # the models that look back at the source
        b = compare_beam(params, name)
        e = art.bleu.entry("translate", name, b)
        curves.append((f"{name} beam {b}" + (f" ({e.bleu_tok:.1f})" if isinstance(e, Scored) else ""),
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
    # what each drop is compared with, as the evaluate stage wrote it (a file of another
    # figure3_system, read directly, must not be labelled with this one)
    reference = next((str(r) for r in d["reference"] if isinstance(r, str) and r), None)
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
            f"drop minus {(reference or want[0][0]).split(' beam ')[0]}'s (95% CI)":
                "" if f"{system} beam {beam}" == reference or diff == "" else
                f"{float(diff):+.2f} ({float(r['diff_lo']):+.2f} to {float(r['diff_hi']):+.2f})"})
    return pd.DataFrame(rows) if rows else None
