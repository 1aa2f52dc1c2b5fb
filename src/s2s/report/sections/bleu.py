"""The notes under both BLEU tables (Tables 1 and 2): what each BLEU column is, the signatures
behind them, the paper's conditions. Not a section of its own: :mod:`table1` and :mod:`table2`
put them under their tables; its prose is ``templates/bleu.j2``."""

from __future__ import annotations

from s2s.report import tables
from s2s.report.sections import Context, prose


def notes(ctx: Context) -> tuple[str, ...]:
    """The notes under a BLEU table: the tokenized column's method, the sacreBLEU signatures of
    both tables, the paper's conditions."""
    P, art = prose("bleu"), ctx.art
    return (P.bleu_tok_note(art.bleu.bleu_tok_signature),
            P.bleu_sacre_note(tables.signatures(ctx.params, art.bleu)), P.paper_conditions())
