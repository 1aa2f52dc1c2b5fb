"""The README's headline table: a run's numbers beside the paper's, generated, never typed.

Reads the parameter file (which of our outputs answers each row of the paper's tables: params
`report.table1` / `report.table2`), the run's ``metrics/summary.json`` and ``metrics/claims.json``
(the two metrics files git tracks) and the paper's numbers (``paper.yaml``). Writes the table
between the two marker lines of README.md; every row names what our system is (a neural
baseline of ours is not "Baseline SMT"):

    python -m s2s.report.headline            # README.md from params.yaml and metrics/
    python -m s2s.report.headline --check    # exit 1 if README.md's table is not current

A missing, cut or misshapen input (params, either metrics file, the README or its markers) stops
it in one line naming the file, exit status 2; nothing is written. tests/test_docs.py runs the
check, so a republished run that leaves the README's numbers behind fails the tests.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from s2s.artifacts import ArtifactError, Summary, read_verdicts
from s2s.config import Params, load
from s2s.layout import BASELINE, ORACLE, SUMMARY_FILE, VERDICTS_FILE
from s2s.io import atomic_write_text
from s2s.paper import Ours, answer, baseline_ref, paper, perplexity_models

START, END = "<!-- headline:start -->", "<!-- headline:end -->"
_CELLS = {"lstm": "LSTM", "peephole": "peephole LSTM", "gru": "GRU", "cho_gru": "GRU"}


def _model_words(cfg, count: int = 1) -> str:
    """A model in a few words, as a reader of the table needs it: "reversed LSTM, 2 x 384",
    "Cho et al.'s encoder-decoder (GRU), 1 x 128"; `count` > 1: an ensemble of them ("ensemble of
    3 reversed LSTMs (forget-gate bias 1), 2 x 384")."""
    return f"{'ensemble of %d ' % count if count > 1 else ''}{_kind_words(cfg, count)}"


def _kind_words(cfg, count: int = 1) -> str:
    """What `count` models of `cfg` are, and their size: "reversed LSTMs, 2 x 384"."""
    plural = "s" if count > 1 else ""
    if not cfg.recurrent:
        kind = "Transformer" + plural
    else:
        cell = _CELLS.get(cfg.cell, cfg.cell)
        bias = f" (forget-gate bias {cfg.forget_bias:g})" if cfg.forget_bias else ""
        if cfg.arch == "cho":
            kind = f"Cho et al.'s encoder-decoder{plural} ({cell}{bias})"
        elif cfg.arch == "attention":
            kind = f"Bahdanau et al.'s attention model{plural} ({cell}{bias})"
        else:
            kind = cell + plural + bias  # the cell's name is the noun: "LSTMs (forget-gate...)"
    if cfg.reverse_source:
        kind = f"reversed {kind}" if cfg.arch == "seq2seq" else f"{kind}, reversed source"
    elif cfg.arch == "seq2seq":
        kind = f"forward {kind}"
    return f"{kind}, {cfg.size()}"


def _members_words(params: Params, members) -> str:
    """An ensemble's members in words; a mixed one's each kind of model with the number of its
    members ("ensemble of 3: 2 reversed LSTMs, 2 x 384; 1 forward LSTM, 2 x 384")."""
    kinds: dict[str, list] = {}  # one model's words -> the configs of the members of that kind
    for m in members:
        cfg = params.model_config(m)
        kinds.setdefault(_model_words(cfg), []).append(cfg)
    if len(kinds) == 1:
        cfgs = next(iter(kinds.values()))
        return _model_words(cfgs[0], len(cfgs))
    return f"ensemble of {len(members)}: " + "; ".join(
        f"{len(cfgs)} {_kind_words(cfgs[0], len(cfgs))}" for cfgs in kinds.values())


def system_words(params: Params, ours: Ours, *, baseline: bool = False) -> str:
    """What our output answering a row is, in words: its models and beam, or what rescores
    which lists. `baseline`: the row is the paper's baseline (phrase-based SMT), which ours is
    not."""
    if ours.kind == "baseline":
        ours = baseline_ref(params)
    not_smt = "not SMT: " if baseline else ""
    if ours.kind == "translate":
        members = params.systems[ours.system].members if ours.system in params.systems else ()
        what = _members_words(params, members) if members else f"system '{ours.system}'"
        return f"{not_smt}{what}, beam {ours.beam}"
    base = params.rescore.baseline
    if params.data.nbest is not None:
        lists = f"the n-best lists of data.nbest ({params.data.nbest.corpus})"
        not_smt = ""
    elif base in params.systems:
        lists = f"the baseline's {params.systems[base].nbest}-best lists"
    else:
        lists = f"the n-best lists of '{base}'"
    if ours.system == BASELINE:
        if params.data.nbest is None and base in params.systems:
            b = params.systems[base]
            return (f"{not_smt}{_members_words(params, b.members)}, beam {b.widest_beam}: the "
                    f"first entry of each of its {b.nbest}-best lists")
        return f"the first entry of each of {lists}"
    if ours.system == ORACLE:
        return f"the best of {lists} by sentence BLEU against the references"
    members = params.rescore.rescorers.get(ours.system, ())
    who = _members_words(params, members) if members else f"rescorer '{ours.system}'"
    return f"{who}, rescoring {lists}"


def _bleu(summary: Summary, params: Params, ours: Ours | None) -> str:
    if ours is not None and ours.kind == "baseline":
        ours = baseline_ref(params)
    if ours is None:
        return "-"
    if ours.kind == "translate":
        value = summary.bleu.get(ours.system, {}).get(f"b{ours.beam}")
    else:
        value = summary.rescore.get(ours.system)
    return "-" if value is None else f"{value:.2f}"


def table(params: Params, summary: Summary, verdicts: dict[str, str]) -> str:
    """The headline as Markdown: test perplexity by source order, every row of the paper's
    Tables 1 and 2 that params answer with what our system is, and each claim's verdict."""
    p = paper()
    models = perplexity_models(params)
    ppl = {order: summary.ppl.get(m) for order, m in models.items() if m}
    lines = ["| the paper's row | ours: what it is | ours | the paper's |", "|---|---|---|---|"]
    if len(ppl) == 2 and None not in ppl.values():
        what = " → ".join(_model_words(params.model_config(models[o]))
                          for o in ("forward", "reversed"))
        lines.append(f"| test perplexity, forward → reversed source | {what} | "
                     f"{ppl['forward']:.2f} → {ppl['reversed']:.2f} | "
                     f"{p.test_ppl()['forward']} → {p.test_ppl()['reversed']} |")
    for name, rows in (("Table 1", p.table1), ("Table 2", p.table2)):
        for row in rows:
            ours = answer(params, name.lower().replace(" ", ""), row.id)
            if ours is None:
                continue
            theirs = row.paper_text if row.paper_text else "not in the paper"
            baseline = ours.kind == "baseline" or (ours.kind == "rescore"
                                                   and ours.system == BASELINE)
            lines.append(f"| {name}: {row.method} | "
                         f"{system_words(params, ours, baseline=baseline)} | "
                         f"{_bleu(summary, params, ours)} | {theirs} |")
    lines += ["", "| the paper's claim | at this scale |", "|---|---|"]
    for claim_id, spec in p.claims.items():
        if claim_id in verdicts:
            lines.append(f"| {spec.statement} | {verdicts[claim_id]} |")
    return "\n".join(lines)


def render(root: Path) -> str:
    """The headline of the run whose params.yaml and metrics/ are under `root`, with a line
    saying where its numbers come from. A bad input is a ConfigError or ArtifactError naming
    its file."""
    params = load(root / "params.yaml")
    summary = Summary.read(root / SUMMARY_FILE)
    verdicts = read_verdicts(root / VERDICTS_FILE)
    return (f"Tokenised BLEU (the paper's method) on the test set of profile `{params.profile}`; "
            f"the paper's numbers are WMT'14 newstest2014, for orientation only. Generated from "
            f"`{SUMMARY_FILE}` and `{VERDICTS_FILE}` by `python -m s2s.report.headline`.\n\n"
            + table(params, summary, verdicts))


def replace_block(text: str, block: str, *, source: str) -> str:
    """`text` with the lines between START and END replaced by `block`."""
    if text.count(START) != 1 or text.count(END) != 1 or text.index(START) > text.index(END):
        raise ValueError(f"{source}: expected one '{START}' line followed by one '{END}' line")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{block}\n{END}{tail}"


def _read_readme(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ArtifactError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise ArtifactError(f"{path}: cannot read it ({e.strerror})") from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=Path("."), help="the project (params, metrics)")
    ap.add_argument("--readme", type=Path, default=Path("README.md"))
    ap.add_argument("--check", action="store_true", help="exit 1 if the README is not current")
    args = ap.parse_args(argv)
    try:
        text = _read_readme(args.readme)
        new = replace_block(text, render(args.root), source=str(args.readme))
    except (ValueError, KeyError) as e:  # ConfigError, ArtifactError: each names its file
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return 2
    if args.check:
        if new != text:
            print(f"{args.readme}: the headline table is not current: run "
                  f"`python -m s2s.report.headline`", file=sys.stderr)
            return 1
        return 0
    if new != text:
        atomic_write_text(args.readme, new)
    print(f"{args.readme}: headline {'written' if new != text else 'already current'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
