"""Attention weights: Bahdanau et al.'s model on a few of its own test translations, and a
Transformer's cross-attention on the same sentences (the attention stage's weights.json)."""

from __future__ import annotations

from s2s.artifacts import Scored
from s2s.report import figures
from s2s.report.render import Image, Section
from s2s.report.sections import Context, prose


def sections(ctx: Context) -> list[Section]:
    """The attention model's weights on a few of its own test translations (and a
    Transformer's cross-attention on the same sentences)."""
    if ctx.art.attention is None:
        return []
    P, params, art, fig_dir = prose("attention"), ctx.params, ctx.art, ctx.fig_dir
    att = art.attention
    e = art.bleu.entry("translate", att.system, att.beam)
    score = f" (tokenized BLEU {e.bleu_tok:.2f})" if isinstance(e, Scored) else ""
    fig = figures.attention_weights(att.examples, fig_dir / "attention.png",
                                    title=P.attention_title(att.model, att.beam))
    cfg = params.model_config(att.model)
    ranking = sorted(((e.bleu_tok, name) for name, beams in art.bleu.translate.items()
                      for b, e in beams.items() if b == att.beam and isinstance(e, Scored)),
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
        e = art.bleu.entry("translate", cross.system, cross.beam)
        fig = figures.attention_weights(cross.examples, fig_dir / "cross_attention.png",
                                        title=P.cross_attention_title(cross.model,
                                                                      cross.beam))
        parts += [
            P.cross_attention_text(
                system=cross.system, model=cross.model, layer=cross.layer,
                architecture=params.model_config(cross.model).describe(),
                score=f" (tokenized BLEU {e.bleu_tok:.2f})" if isinstance(e, Scored) else ""),
            Image("Cross-attention weights", fig, "figures/cross_attention.png",
                  P.attention_caption(examples=len(cross.examples),
                                      shortest=att.source_words[0],
                                      longest=att.source_words[1]))]
    title = ("Attention weights (Bahdanau et al.'s model and the Transformer, trained here)"
             if cross is not None else "Attention weights (Bahdanau et al.'s model, trained here)")
    return [Section(title, parts)]
