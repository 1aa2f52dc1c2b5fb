"""The notes under both BLEU tables (Tables 1 and 2): what each BLEU column is, the signatures
behind them, the paper's conditions. Not a section of its own: :mod:`table1` and :mod:`table2`
put them under their tables; its prose is ``templates/bleu.j2``."""

from __future__ import annotations

from s2s.report.sections import Context, prose


def notes(ctx: Context, signatures: list[str]) -> tuple[str, ...]:
    """The notes under a BLEU table: the tokenized column's method, the sacreBLEU `signatures`
    of both tables (s2s.report.tables.signatures), the paper's conditions."""
    P = prose("bleu")
    return (P.bleu_tok_note(ctx.art.bleu.bleu_tok_signature), P.bleu_sacre_note(signatures),
            P.paper_conditions())
