"""What several test files share: the tiny vocabulary's special ids, the golden values' four
pairs, one summed NLL, and two training steps done by the trainer's own ``train_step``.

(Fixtures stay in conftest.py; these are plain functions, imported as ``from helpers import``.)
"""

from __future__ import annotations

from pathlib import Path

import torch

from s2s import precision
from s2s.config import TrainConfig
from s2s.train import shard_loss, train_step

CPU = torch.device("cpu")
ROOT = Path(__file__).resolve().parents[1]


def profile_dict(name: str) -> dict:
    """profiles/<name>.yaml resolved (a profile may be the differences from another): the
    complete mapping, as `s2s profile NAME` writes it to params.yaml."""
    from s2s.config import resolved

    return resolved(ROOT / "profiles" / f"{name}.yaml")


def profile_text(name: str) -> str:
    """The complete params.yaml text `s2s profile NAME` writes."""
    from s2s.cli import profile_text as text

    return text(ROOT / "profiles" / f"{name}.yaml")


class Specials:  # the vocabulary attributes collate, the losses and translate use
    pad, bos, eos = 0, 1, 2


def tiny_pairs():
    """The four (source, target) id pairs the golden values of tests/test_golden.py were
    computed on (sources over ids 3..29, targets over 3..30)."""
    g = torch.Generator().manual_seed(5)
    return [([int(x) for x in torch.randint(3, 30, (n,), generator=g)],
             [int(x) for x in torch.randint(3, 31, (m,), generator=g)])
            for n, m in [(5, 6), (3, 2), (7, 8), (1, 3)]]


def shard_nll(model, pairs, *, vocab=Specials, device=CPU, autocast=None):
    """The summed NLL of `pairs` and their target tokens, as the trainer computes them
    (``s2s.train.shard_loss`` without label smoothing); `autocast` defaults to fp32."""
    _, nll, ntok = shard_loss(model, pairs, vocab=vocab, device=device,
                              autocast=autocast or precision.autocast(device, None))
    return nll, ntok


def two_training_steps(model, mm_dtype=None, pairs=None) -> list[float]:
    """Two updates of `model` on `pairs` (default: tiny_pairs) by ``s2s.train.train_step``, the
    trainer's own step (the paper's SGD at lr 0.7, the gradient norm clipped at 5), in fp32 or
    with bf16 products (`mm_dtype`): the two mean losses per sentence."""
    model.train()
    pairs = tiny_pairs() if pairs is None else pairs
    opt = torch.optim.SGD(model.parameters(), lr=0.7)
    losses = []
    for _ in range(2):
        nll, _ = train_step(model, opt, pairs, batch_size=len(pairs), lr=0.7, cfg=TrainConfig(),
                            vocab=Specials, device=CPU,
                            autocast=precision.autocast(CPU, mm_dtype))
        losses.append(nll / len(pairs))
    return losses


def analysis_markdown(analysis_dir, figures_dir, *, rel_dir: str = "figures") -> str:
    """The analyses' report sections alone, as Markdown (## headings), without the document's
    own title: what the report writes for them."""
    from s2s.report.inputs import read_analysis
    from s2s.report.render import Document, to_markdown
    from s2s.report.sections.analysis import render

    doc = Document("Analyses", render(read_analysis(analysis_dir), figures_dir, rel_dir=rel_dir))
    return to_markdown(doc, contents=False).split("\n", 2)[2]
