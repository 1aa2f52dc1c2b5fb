"""Self-describing checkpoints: tensors and plain Python containers only, loaded with
``torch.load(weights_only=True)``.

A checkpoint holds the model's config, the fingerprints of the vocabularies it was trained with,
and its weights, so decoding rebuilds the model from the file alone and refuses a checkpoint whose
vocabulary is not the one it is given.

It also holds the sha256 of its weights (``weights_sha256``), checked on every load: torch's zip
reader does not notice a flipped byte inside a tensor, which would otherwise decode silently with
a damaged model. (Checkpoints written before the digest existed load without the check.) Every
refusal is a :class:`CheckpointError` naming the file and the mismatch.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

import torch

from s2s.config import ModelConfig
from s2s.data.vocab import Vocab
from s2s.io import atomic_write_with
from s2s.model import build_model
from s2s.model.seq2seq import EncoderDecoder

FORMAT = "s2s-checkpoint/1"


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be used: names the file and the mismatch."""


def weights_digest(state: dict[str, torch.Tensor]) -> str:
    """sha256 of a state dict: every tensor's name, dtype, shape and bytes, in name order."""
    h = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().cpu().contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def save(path: Path, model: EncoderDecoder, *, src_vocab: Vocab, tgt_vocab: Vocab,
         **extra: Any) -> None:
    weights = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    payload = {
        "format": FORMAT,
        "config": dataclasses.asdict(model.cfg),
        "vocab": {"src": src_vocab.fingerprint, "tgt": tgt_vocab.fingerprint,
                  "src_size": len(src_vocab), "tgt_size": len(tgt_vocab)},
        "model": weights,
        "weights_sha256": weights_digest(weights),
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
    recorded = payload.get("weights_sha256")
    if recorded is not None and weights_digest(payload["model"]) != recorded:
        raise CheckpointError(f"{path}: weights do not match their recorded sha256 "
                              f"{recorded[:12]}: the file is damaged")
    return payload


def load_model(path: Path, *, src_vocab: Vocab, tgt_vocab: Vocab,
               device: torch.device | str = "cpu") -> EncoderDecoder:
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
    model = build_model(cfg, src_vocab=len(src_vocab), tgt_vocab=len(tgt_vocab), pad=src_vocab.pad)
    try:
        model.load_state_dict(payload["model"])
    except RuntimeError as e:
        # torch's first line only says "Error(s) in loading state_dict"; the next ones say which.
        lines = [ln.strip() for ln in str(e).splitlines()[1:] if ln.strip()]
        raise CheckpointError(f"{path}: weights do not fit the model config {payload['config']}: "
                              f"{'; '.join(lines)[:400]}") from None
    return model.to(device).eval()
