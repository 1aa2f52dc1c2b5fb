"""Self-describing checkpoints: tensors and plain Python containers only, loaded with
``torch.load(weights_only=True)``.

A checkpoint holds the model's config, the fingerprints of the vocabularies it was trained with,
and its weights, so decoding rebuilds the model from the file alone and refuses a checkpoint whose
vocabulary is not the one it is given.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import torch

from s2s.config import ModelConfig
from s2s.data.vocab import Vocab
from s2s.io import atomic_write_with
from s2s.model.seq2seq import Seq2Seq

FORMAT = "s2s-checkpoint/1"


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be used: names the file and the mismatch."""


def save(path: Path, model: Seq2Seq, *, src_vocab: Vocab, tgt_vocab: Vocab, **extra: Any) -> None:
    payload = {
        "format": FORMAT,
        "config": dataclasses.asdict(model.cfg),
        "vocab": {"src": src_vocab.fingerprint, "tgt": tgt_vocab.fingerprint,
                  "src_size": len(src_vocab), "tgt_size": len(tgt_vocab)},
        "model": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        **extra,
    }
    atomic_write_with(Path(path), lambda f: torch.save(payload, f))


def load_payload(path: Path) -> dict:
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"{path}: checkpoint not found")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # truncated, corrupted, or not a torch file at all
        raise CheckpointError(f"{path}: not a readable checkpoint ({type(e).__name__}: "
                              f"{str(e).splitlines()[0][:200]})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not an s2s checkpoint (expected format {FORMAT})")
    return payload


def load_model(path: Path, *, src_vocab: Vocab, tgt_vocab: Vocab,
               device: torch.device | str = "cpu") -> Seq2Seq:
    """Rebuild the model of a checkpoint; refuse one trained with other vocabularies."""
    payload = load_payload(path)
    for side, vocab in (("src", src_vocab), ("tgt", tgt_vocab)):
        if payload["vocab"][side] != vocab.fingerprint:
            raise CheckpointError(
                f"{path}: trained with another {side} vocabulary (fingerprint "
                f"{payload['vocab'][side][:12]}, size {payload['vocab'][side + '_size']}) than the "
                f"one given ({vocab.fingerprint[:12]}, size {len(vocab)}): retrain or use the "
                f"matching data/vocab")
    try:
        cfg = ModelConfig(**payload["config"])
    except TypeError as e:
        raise CheckpointError(f"{path}: model config does not match this version: {e}") from None
    model = Seq2Seq(cfg, src_vocab=len(src_vocab), tgt_vocab=len(tgt_vocab), pad=src_vocab.pad)
    try:
        model.load_state_dict(payload["model"])
    except RuntimeError as e:
        raise CheckpointError(f"{path}: weights do not fit the model config: "
                              f"{str(e).splitlines()[0][:300]}") from None
    return model.to(device).eval()
