"""Self-describing checkpoints: tensors and plain Python containers only, loaded with
``torch.load(weights_only=True)``.

A checkpoint holds the model's config, the name it was trained as, the fingerprints of the
vocabularies it was trained with, the text settings its training text was prepared with
(``text``: :func:`s2s.text_settings.text_record`, where the trainer gives them), and its
weights, so decoding rebuilds the model from the file alone; readers that know what the model
should be (``expect=``: ``params.model_config(name)``) refuse a checkpoint whose config, name or
vocabulary is another, and readers that know how its input will be prepared (``text=``: params'
``prepare`` for a system loaded by name, ``export.json`` for an export) refuse one trained on
text prepared otherwise (:func:`check_text`).

It also holds ``digest``: the sha256 of everything else in it (config, name, vocabulary
fingerprints, weights, and any extra entry: a resume point's step and history), checked on every
load. torch's zip reader does not notice a flipped byte inside a tensor, and a flipped byte in the
pickled config can still unpickle, as another model. Checkpoints of format 1 (``weights_sha256``
over the weights only, no name) still load, their weights checked; readers with ``expect=``
compare their config with params as for any other. Every refusal is a :class:`CheckpointError`:
one line naming the file and the mismatch.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import pickle
from pathlib import Path
from typing import Any

import torch

from s2s.data.vocab import Vocab
from s2s.device import out_of_memory
from s2s.io import atomic_write_with
from s2s.model import build_model, config_from_dict, config_record
from s2s.model.base import Model
from s2s.text_settings import TEXT_PIPELINE, Expected, cased, first_difference
from s2s.text_settings import check_record as check_text_record

FORMAT = "s2s-checkpoint/2"
LEGACY_FORMATS = ("s2s-checkpoint/1",)  # weights_sha256 over the weights only

log = logging.getLogger("s2s.checkpoint")


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be used: names the file and the mismatch."""


class CheckpointUnread(CheckpointError):
    """A checkpoint that could not be read this time (an I/O error, a file it may not open, too
    little memory to hold it), not one found damaged: a resume point is kept, not set aside, and
    the stage stops for a rerun to read it again."""


def weights_digest(state: dict[str, torch.Tensor]) -> str:
    """sha256 of a state dict: every tensor's name, dtype, shape and bytes, in name order."""
    h = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().cpu().contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _feed(h, obj: Any) -> None:
    """Hash `obj` (tensors, dicts, lists and JSON scalars) so that any change of a value, a key,
    a type, a dtype or a shape changes the digest."""
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        h.update(f"T{t.dtype}{tuple(t.shape)};".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(obj, dict):
        h.update(f"D{len(obj)};".encode())
        for key in sorted(obj, key=repr):
            _feed(h, key)
            _feed(h, obj[key])
    elif isinstance(obj, (list, tuple)):
        h.update(f"L{len(obj)};".encode())
        for item in obj:
            _feed(h, item)
    elif obj is None or isinstance(obj, (bool, int, float, str)):
        # repr keeps the type (1 vs 1.0 vs True) and every bit of a float
        h.update(f"S{type(obj).__name__}:{obj!r};".encode())
    else:
        raise TypeError(f"cannot digest a {type(obj).__name__} in a checkpoint")


def payload_digest(payload: dict) -> str:
    """sha256 of every entry of a checkpoint but `digest` itself."""
    h = hashlib.sha256()
    _feed(h, {k: v for k, v in payload.items() if k != "digest"})
    return h.hexdigest()


def save(path: Path, model: Model, *, src_vocab: Vocab, tgt_vocab: Vocab,
         name: str | None = None, state: dict[str, torch.Tensor] | None = None,
         text: dict[str, Any] | None = None, **extra: Any) -> None:
    """Write `model` (or `state`, weights for model's config) with its config, `name` (the key of
    params `models`), the vocabularies' fingerprints, the text settings it was trained with
    (`text`: ``s2s.text_settings.text_record(params.prepare)``; a record of another shape is a
    ValueError) and `extra`, under a digest of all of it."""
    if text is not None:
        text = check_text_record(text)
    weights = {k: v.detach().cpu() for k, v in (state or model.state_dict()).items()}
    payload = {
        "format": FORMAT,
        "name": name,
        "config": config_record(model.cfg),
        "vocab": {"src": src_vocab.fingerprint, "tgt": tgt_vocab.fingerprint,
                  "src_size": len(src_vocab), "tgt_size": len(tgt_vocab)},
        **({"text": text} if text is not None else {}),
        "model": weights,
        **extra,
    }
    payload["digest"] = payload_digest(payload)
    atomic_write_with(Path(path), lambda f: torch.save(payload, f))


def _first_line(e: BaseException, limit: int = 200) -> str:
    """The error's first line; a longer one cut after its last whole sentence that fits (torch's
    zip reader goes on for 300 characters of advice), else at a word, marked with '...'."""
    lines = str(e).strip().splitlines()
    if not lines:
        return type(e).__name__
    line = lines[0]
    if len(line) > limit:
        end = line.rfind(". ", 0, limit)
        if end > 0:
            line = line[:end]
        else:
            cut = line.rfind(" ", 0, limit)
            line = line[:cut if cut > 0 else limit] + "..."
    return f"{type(e).__name__}: {line}"


# The errors of the machine (the disk, the file system, permissions, memory), which say nothing
# of a file's bytes; torch.load's others do (a file cut short gives EINVAL).
_NOT_THE_FILE = frozenset({errno.EIO, errno.EACCES, errno.EPERM, errno.ESTALE, errno.ENOMEM,
                           errno.EAGAIN, errno.EINTR, errno.EBUSY, errno.ETIMEDOUT})
_ZIP, _PICKLE = b"PK\x03\x04", b"\x80"  # how torch.save's files begin: a zip, or the old pickle


def _zip_cut_short(path: Path) -> bool:
    """Whether a zip file lacks its end record (in its last 64 KiB): a copy or download cut
    short."""
    with open(path, "rb") as f:
        f.seek(max(0, path.stat().st_size - (1 << 16) - 22))
        return b"PK\x05\x06" not in f.read()


def load_payload(path: Path) -> dict:
    """A checkpoint's entries, its digest checked; CheckpointError (one line) otherwise."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"{path}: checkpoint not found")
    if path.is_dir():
        raise CheckpointError(f"{path}: a folder, not a checkpoint file")
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(len(_ZIP))
    except OSError as e:
        raise CheckpointUnread(f"{path}: cannot read the checkpoint ({_first_line(e)})") from None
    if size == 0:
        raise CheckpointError(f"{path}: not a readable checkpoint (an empty file, 0 bytes)")
    if not (head.startswith(_ZIP) or head.startswith(_PICKLE)):
        raise CheckpointError(f"{path}: not a checkpoint: not a file torch.save writes (it begins "
                              f"with neither a zip archive's header nor a pickle's)")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        if "weights only load failed" not in str(e).lower():
            raise CheckpointError(f"{path}: not a readable checkpoint ({_first_line(e)})") from None
        # torch's message goes on to advise loading it with weights_only=False: never for a file
        # whose objects the safe loader refuses (a pickle can run any code when it is read)
        raise CheckpointError(f"{path}: not an s2s checkpoint: it holds objects other than "
                              f"tensors and plain values, which are not loaded") from None
    except Exception as e:  # truncated, corrupted, or not a torch file at all; or the machine
        if isinstance(e, MemoryError) or (isinstance(e, OSError) and e.errno in _NOT_THE_FILE):
            raise CheckpointUnread(f"{path}: cannot read the checkpoint ({_first_line(e)})"
                                   ) from None
        if (oom := out_of_memory(e)) is not None:
            raise CheckpointUnread(f"{path}: cannot load the checkpoint ({oom})") from None
        if head.startswith(_ZIP) and _zip_cut_short(path):
            raise CheckpointError(f"{path}: not a readable checkpoint: cut short ({size:,} bytes, "
                                  f"without the end of its zip archive: a copy or download that "
                                  f"stopped?)") from None
        raise CheckpointError(f"{path}: not a readable checkpoint ({_first_line(e)})") from None
    fmt = payload.get("format") if isinstance(payload, dict) else None
    if fmt not in (FORMAT, *LEGACY_FORMATS) or not isinstance(payload.get("model"), dict):
        raise CheckpointError(f"{path}: not an s2s checkpoint (expected format {FORMAT})")
    if fmt == FORMAT:
        recorded = payload.get("digest")
        try:
            actual = payload_digest(payload)
        except TypeError as e:
            raise CheckpointError(f"{path}: not an s2s checkpoint ({e})") from None
        if not isinstance(recorded, str) or actual != recorded:
            raise CheckpointError(f"{path}: contents do not match their recorded digest "
                                  f"{str(recorded)[:12]}: the file is damaged or was edited")
        return payload
    recorded = payload.get("weights_sha256")  # format 1
    if recorded is not None and weights_digest(payload["model"]) != recorded:
        raise CheckpointError(f"{path}: weights do not match their recorded sha256 "
                              f"{recorded[:12]}: the file is damaged")
    log.warning("%s: an older checkpoint (%s): its digest covers the weights only, not its "
                "config; retrain to get one that identifies itself", path, fmt)
    return payload


def check_identity(path: Path, payload: dict, *, expect, name: str | None = None,
                   source: str | None = None, fix: str | None = None) -> None:
    """Refuse a checkpoint that is not the model `expect` describes: its config differs (the
    first differing field is named) or it was trained under another name. `source`: where
    `expect` comes from (default: params 'models.<name>'); `fix`: what to do (default: retrain
    it)."""
    recorded = payload.get("config")
    if not isinstance(recorded, dict):
        raise CheckpointError(f"{path}: no model config in the checkpoint")
    want = config_record(expect)
    source = source or (f"params 'models.{name}'" if name else "params")
    fix = fix or ("retrain it" + (f" (dvc repro train-{name})" if name else ""))
    for key, value in want.items():
        if key not in recorded:
            raise CheckpointError(f"{path}: the checkpoint's config has no '{key}' ({source} "
                                  f"says {value!r}): it is not this model; {fix}")
        if recorded[key] != value:
            raise CheckpointError(f"{path}: '{key}' is {recorded[key]!r} in the checkpoint but "
                                  f"{value!r} in {source}: it is another model; {fix}")
    extra = sorted(set(recorded) - set(want))
    for key in extra:  # a later field params hold at its default (config_record leaves it out)
        if key in getattr(type(expect), "LATER_FIELDS", ()):
            raise CheckpointError(f"{path}: '{key}' is {recorded[key]!r} in the checkpoint but "
                                  f"{getattr(expect, key)!r} in {source}: it is another model; "
                                  f"{fix}")
    if extra:
        raise CheckpointError(f"{path}: the checkpoint's config has '{extra[0]}', which "
                              f"{source} do not have: it is another model")
    got = payload.get("name")
    if name is not None and got is not None and got != name:
        raise CheckpointError(f"{path}: the checkpoint of model '{got}', not of '{name}': it is "
                              f"another model (a swapped or copied file)")


def load_model(path: Path, *, src_vocab: Vocab, tgt_vocab: Vocab,
               device: torch.device | str = "cpu", expect=None,
               name: str | None = None, text: Expected | None = None) -> Model:
    """Rebuild the model of a checkpoint; refuse one trained with other vocabularies, with
    `expect` (``params.model_config(name)``) one that is not the model params describe, and with
    `text` one trained on text prepared otherwise (:func:`check_text`)."""
    return model_from_payload(path, load_payload(path), src_vocab=src_vocab,
                              tgt_vocab=tgt_vocab, device=device, expect=expect, name=name,
                              text=text)


def text_of(path: Path, payload: dict) -> dict[str, Any] | None:
    """The text settings a checkpoint records (None for one saved without them: older
    checkpoints); CheckpointError for a record that is not one."""
    if "text" not in payload:
        return None
    try:
        return check_text_record(payload["text"])
    except ValueError as e:
        raise CheckpointError(f"{path}: {e}") from None


def check_text(path: Path, payload: dict, text: Expected, vocabs: tuple[Vocab, ...]) -> None:
    """Refuse a checkpoint trained on text prepared otherwise than `text` says its input will be
    (``text.error``, one line naming the file that says so and the key). A checkpoint saved
    before checkpoints recorded their settings binds only its vocabularies, so they decide
    ``lowercase`` (a vocabulary of lowercased text has no capital letter); the other settings
    are then this version's."""
    trained = text_of(path, payload)
    claimed = text.record
    if trained is not None:
        key = first_difference(trained, claimed)
        if key is None:
            return
        if key != "lowercase" and claimed[key] == TEXT_PIPELINE[key]:
            raise text.error(f"{path}: trained on text prepared by another version of s2s "
                             f"('{key}' is {trained[key]!r}, this version's {claimed[key]!r}): "
                             f"retrain it with this one")
        raise text.error(f"{text.source}: '{text.prefix}{key}' is {claimed[key]!r}, but {path} "
                         f"was trained with {trained[key]!r}: {text.fix}")
    if claimed["lowercase"] == any(cased(v.words[4:]) for v in vocabs):
        seen = "capital letters" if claimed["lowercase"] else "no capital letter"
        raise text.error(f"{text.source}: '{text.prefix}lowercase' is {claimed['lowercase']!r}, "
                         f"but the vocabularies {path} was trained with have {seen}: {text.fix}")


def check_payload(path: Path, payload: dict, *, src_vocab: Vocab, tgt_vocab: Vocab,
                  expect=None, name: str | None = None, text: Expected | None = None,
                  identity: tuple[str, str] | None = None) -> None:
    """What :func:`model_from_payload` refuses before it builds the model: with `expect`, a
    checkpoint that is not that model (:func:`check_identity`, `identity` its (source, fix));
    one trained with other vocabularies; with `text`, one trained on text prepared otherwise
    (:func:`check_text`)."""
    if expect is not None:
        source, fix = identity or (None, None)
        check_identity(path, payload, expect=expect, name=name, source=source, fix=fix)
    for side, vocab in (("src", src_vocab), ("tgt", tgt_vocab)):
        if payload["vocab"][side] != vocab.fingerprint:
            raise CheckpointError(
                f"{path}: trained with another {side} vocabulary (fingerprint "
                f"{payload['vocab'][side][:12]}, size {payload['vocab'][side + '_size']}) than the "
                f"one given ({vocab.fingerprint[:12]}, size {len(vocab)}): retrain it, or give "
                f"the vocabularies it was trained with")
    if text is not None:
        check_text(path, payload, text, (src_vocab, tgt_vocab))


def model_from_payload(path: Path, payload: dict, *, src_vocab: Vocab, tgt_vocab: Vocab,
                       device: torch.device | str = "cpu", expect=None,
                       name: str | None = None, text: Expected | None = None,
                       identity: tuple[str, str] | None = None) -> Model:
    """:func:`load_model` of a payload already read by :func:`load_payload` from `path`, checked
    by :func:`check_payload`."""
    check_payload(path, payload, src_vocab=src_vocab, tgt_vocab=tgt_vocab, expect=expect,
                  name=name, text=text, identity=identity)
    try:
        cfg = config_from_dict(payload["config"], source=str(path), key="config")
    except ValueError as e:  # a config of another version: an unknown or retyped field
        raise CheckpointError(f"{e} (the checkpoint's model config, in this version's "
                              f"terms)") from None
    model = build_model(cfg, src_vocab=len(src_vocab), tgt_vocab=len(tgt_vocab), pad=src_vocab.pad)
    try:
        model.load_state_dict(payload["model"])
    except RuntimeError as e:
        # torch's first line only says "Error(s) in loading state_dict"; the next ones say which.
        lines = [ln.strip() for ln in str(e).splitlines()[1:] if ln.strip()]
        raise CheckpointError(f"{path}: weights do not fit the model config {payload['config']}: "
                              f"{'; '.join(lines)[:400]}") from None
    return model.to(device).eval()
