"""The README's headline table: a run's numbers beside the paper's, generated, never typed.

Reads the parameter file (which of our outputs answers each row of the paper's tables: params
`report.table1` / `report.table2`), the run's ``metrics/summary.json`` and ``metrics/claims.json``
(the two metrics files git tracks) and the paper's numbers (``paper.yaml``). Writes the table
between the two marker lines of README.md:

    python -m s2s.report.headline            # README.md from params.yaml and metrics/
    python -m s2s.report.headline --check    # exit 1 if README.md's table is not current

tests/test_docs.py runs the check, so a republished run that leaves the README's numbers behind
fails the tests.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from s2s.artifacts import VERDICTS_FILE, Summary
from s2s.config import Params, load
from s2s.io import atomic_write_text
from s2s.report.paper import Ours, answer, baseline_ref, paper, perplexity_models

START, END = "<!-- headline:start -->", "<!-- headline:end -->"
SUMMARY_FILE = "metrics/summary.json"


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
    Tables 1 and 2 that params answer, and each claim's verdict."""
    p = paper()
    models = perplexity_models(params)
    ppl = {order: summary.ppl.get(m) for order, m in models.items() if m}
    lines = ["| | ours | the paper's |", "|---|---|---|"]
    if len(ppl) == 2 and None not in ppl.values():
        lines.append(f"| test perplexity, forward → reversed source | {ppl['forward']:.2f} → "
                     f"{ppl['reversed']:.2f} | {p.test_ppl()['forward']} → "
                     f"{p.test_ppl()['reversed']} |")
    for name, rows in (("Table 1", p.table1), ("Table 2", p.table2)):
        for row in rows:
            ours = answer(params, name.lower().replace(" ", ""), row.id)
            if ours is None:
                continue
            theirs = row.paper_text if row.paper_text else "not in the paper"
            lines.append(f"| {name}: {row.method} | {_bleu(summary, params, ours)} | {theirs} |")
    lines += ["", "| the paper's claim | at this scale |", "|---|---|"]
    for claim_id, spec in p.claims.items():
        if claim_id in verdicts:
            lines.append(f"| {spec.statement} | {verdicts[claim_id]} |")
    return "\n".join(lines)


def render(root: Path) -> str:
    """The headline of the run whose params.yaml and metrics/ are under `root`, with a line
    saying where its numbers come from."""
    import json

    params = load(root / "params.yaml")
    summary = Summary.read(root / SUMMARY_FILE)
    verdicts = json.loads((root / VERDICTS_FILE).read_text(encoding="utf-8"))
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=Path("."), help="the project (params, metrics)")
    ap.add_argument("--readme", type=Path, default=Path("README.md"))
    ap.add_argument("--check", action="store_true", help="exit 1 if the README is not current")
    args = ap.parse_args(argv)
    text = args.readme.read_text(encoding="utf-8")
    new = replace_block(text, render(args.root), source=str(args.readme))
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
