"""Exports: every system as one versioned folder that translates without the pipeline's folders
(the library of :mod:`s2s.stages.export`; :func:`s2s.api.load_export` reads them)::

    export.json       format, system, members, sha256 of every file, text settings, decoding
                      config, and the fingerprints of the data and params the models were trained
                      with
    en.tsv fr.tsv     the vocabularies
    models/<m>.pt     each member's final checkpoint

Writing one copies files and records configs: it builds no model and runs none. It does read
each member's checkpoint with torch (:func:`check_members`), to refuse one that is not the model
params describe, so the export stage depends on the checkpoint format and the architectures'
configs, not on the models' code. A folder is built under a temporary name that
names its owner (:func:`s2s.io.whole_dir`), each file fsynced, and renamed into place
whole; an error removes it, leaving the previous export as it was.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
import logging
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from s2s.arch import config_record
from s2s.artifacts import Record
from s2s.config import Params, SystemConfig, TranslateConfig, train_record
from s2s.io import atomic_open, whole_dir
from s2s.layout import (ExportPaths, model_file, prepared_file, prepared_name, vocab_file,
                        vocab_name)
from s2s.schema import MAX_SIZE, Rules, decode, rng
# How `prepare` turns raw text into model input, written into every export and checkpoint.
from s2s.text_settings import SRC_LANG, TEXT_PIPELINE, TGT_LANG, text_record  # noqa: F401

log = logging.getLogger("s2s.api")

EXPORT_FORMAT = "s2s-export/2"  # /2: every key of export.json covered by `record_sha256`
EXPORT_FILE = "export.json"


class ExportError(ValueError):
    """An export folder that cannot be used: names the file and what is wrong."""


RULES = Rules(ExportError)  # how s2s.schema reads export.json


@dataclass(frozen=True)
class ExportText(Record):
    """How raw text becomes the models' input (TEXT_PIPELINE), with the run's settings."""

    normalize: str
    tokenizer: str
    detokenizer: str
    src_lang: str
    tgt_lang: str
    lowercase: bool  # prepare.lowercase
    sacremoses: str  # its version


@dataclass(frozen=True)
class Fingerprints(Record):
    training_data_sha256: dict[str, str]  # train.tok.<lang> -> sha256
    params_sha256: str  # params_fingerprint


@dataclass(frozen=True)
class ExportRecord(Record):
    """``export.json``: what an export folder holds and how to use it; written by
    :func:`export`, read by :func:`read_record` (:func:`s2s.api.load_export`)."""

    format: str  # EXPORT_FORMAT
    system: str
    members: tuple[str, ...]
    beams: tuple[int, ...] = field(metadata=rng(1, MAX_SIZE))  # at least one (check_record)
    profile: str
    text: ExportText
    translate: TranslateConfig  # the decoding config it was run with
    models: dict[str, dict[str, Any]]  # member -> its config (s2s.arch.config_record)
    fingerprints: Fingerprints
    files: dict[str, str]  # path in the folder -> sha256
    created_with: dict[str, str]  # package -> version
    record_sha256: dict[str, str]  # key -> sha256 of its value (record_digests)


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def package_version(dist: str) -> str:
    """The installed version of distribution `dist`, or ``not installed``."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


RECORD_KEYS = ("format", "system", "members", "beams", "profile", "text", "translate", "models",
               "fingerprints", "files", "created_with")


def record_digests(meta: dict) -> dict[str, str]:
    """sha256 of each key's value in export.json (canonical JSON): an edit of the record itself
    (members, text settings, decoding config) is refused by name, as a replaced file is."""
    return {k: hashlib.sha256(json.dumps(meta[k], sort_keys=True, ensure_ascii=True).encode())
            .hexdigest() for k in RECORD_KEYS}


def check_record(meta: object, path: Path) -> ExportRecord:
    """`meta` (export.json as read) as its record, if it is a whole, unedited record of this
    version whose files are those of its members; else ExportError naming the file and the
    key."""
    if not isinstance(meta, dict) or meta.get("format") != EXPORT_FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else None
        raise ExportError(f"{path}: format {found!r}, expected {EXPORT_FORMAT!r}: exported by "
                          f"another version (export it again with `s2s export`)")
    for key in (*RECORD_KEYS, "record_sha256"):
        if key not in meta:
            raise ExportError(f"{path}: no key '{key}': not a whole export record")
    unknown = sorted(set(meta) - {*RECORD_KEYS, "record_sha256"})
    if unknown:
        raise ExportError(f"{path}: unknown key '{unknown[0]}' (an edited record)")
    recorded = meta["record_sha256"]
    if not isinstance(recorded, dict):
        raise ExportError(f"{path}: 'record_sha256' must be a mapping of key -> sha256")
    for key, digest in record_digests(meta).items():
        if recorded.get(key) != digest:
            raise ExportError(f"{path}: '{key}' differs from what the export recorded (its "
                              f"sha256 is not the one in 'record_sha256'): the record was "
                              f"edited; export the system again instead")
    record = decode(ExportRecord, meta, path, "", RULES)  # its types: an older or newer version
    if not record.beams:
        raise ExportError(f"{path}: 'beams' must list at least one width")
    want = ({vocab_name(lang) for lang in (SRC_LANG, TGT_LANG)}
            | {f"models/{m}.pt" for m in record.members})
    if set(record.files) != want or set(record.models) != set(record.members):
        raise ExportError(f"{path}: 'files' and 'models' must list exactly the vocabularies and "
                          f"the members {list(record.members)}'s checkpoints, got files "
                          f"{sorted(record.files)}")
    return record


def read_record(folder: Path) -> ExportRecord:
    """The export folder's ``export.json``, checked (:func:`check_record`)."""
    path = Path(folder) / EXPORT_FILE
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ExportError(f"{path}: not readable ({e})") from None
    return check_record(meta, path)


def params_fingerprint(params: Params, members) -> str:
    """sha256 of every parameter the members' weights depend on (data, prepare, vocab, their
    model configs, train)."""
    relevant = {"data": dataclasses.asdict(params.data),
                "prepare": dataclasses.asdict(params.prepare),
                "vocab": dataclasses.asdict(params.vocab),
                "models": {m: config_record(params.model_config(m)) for m in members},
                "train": train_record(params.train)}
    recipes = {m: train_record(params.train_config(m)) for m in members
               if params.train_config(m) != params.train}
    if recipes:  # members trained by another recipe than `train` (a Transformer's)
        relevant["recipes"] = recipes
    return hashlib.sha256(json.dumps(relevant, sort_keys=True, default=str).encode()).hexdigest()


def check_members(params: Params, system: str, *, models_dir: Path, vocab_dir: Path) -> None:
    """Refuse to export `system` unless each member's checkpoint is the model params describe,
    trained with these vocabularies on text prepared as params' `prepare` says: the record is
    written from params, and an export that disagrees with its checkpoints would be refused
    only later, on the machine it was copied to (s2s.checkpoint.check_payload, as a system
    loaded by name is checked)."""
    from s2s import checkpoint
    from s2s.data.vocab import Vocab
    from s2s.text_settings import for_params

    src_vocab, tgt_vocab = Vocab.load_pair(vocab_dir)
    for m in params.systems[system].members:
        path = model_file(models_dir, m)
        checkpoint.check_payload(path, checkpoint.load_payload(path), src_vocab=src_vocab,
                                 tgt_vocab=tgt_vocab, expect=params.model_config(m), name=m,
                                 text=for_params(params, m, checkpoint.CheckpointError))


def export(params: Params, system: str, *, models_dir: Path, vocab_dir: Path,
           prepared_dir: Path, out_dir: Path) -> ExportRecord:
    """Write system ``system`` as one self-contained folder ``out_dir`` (see the module doc)."""
    if system not in params.systems:
        raise KeyError(f"{params.source}: no system '{system}' under 'systems' "
                       f"(known: {', '.join(params.systems)})")
    sys_cfg = params.systems[system]
    check_members(params, system, models_dir=models_dir, vocab_dir=vocab_dir)
    out_dir = Path(out_dir)
    # built whole under a temporary name that names its owner, renamed into place, removed on
    # any error (a full disk, a kill of a copy): the previous export stays as it was
    # the temporary folder of exports before it named its owner, which no version removes now
    shutil.rmtree(out_dir.parent / f".{out_dir.name}.tmp", ignore_errors=True)
    # an existing folder is replaced only when it is an earlier export (s2s.io.check_out_dir)
    owns = {EXPORT_FILE, vocab_name(SRC_LANG), vocab_name(TGT_LANG), "models/"}
    with whole_dir(out_dir, owns=owns, inputs=(models_dir, vocab_dir, prepared_dir),
                   what="the export") as tmp:
        record = _write_export(params, system, sys_cfg, tmp, models_dir=models_dir,
                               vocab_dir=vocab_dir, prepared_dir=prepared_dir)
    return record


def _copy(src: Path, dst: Path) -> None:
    """`src` copied to `dst`, fsynced and renamed (s2s.io.atomic_open): a failed write names
    `dst` and leaves no temporary file."""
    with open(src, "rb") as f, atomic_open(dst, "wb") as g:
        shutil.copyfileobj(f, g, 1 << 20)


def _write_export(params: Params, system: str, sys_cfg: SystemConfig, tmp: Path, *,
                  models_dir: Path, vocab_dir: Path, prepared_dir: Path) -> ExportRecord:
    """The files of export `system` written into the (temporary) folder `tmp`."""
    files = {}
    for lang in (SRC_LANG, TGT_LANG):
        copy = vocab_file(tmp, lang)
        _copy(vocab_file(vocab_dir, lang), copy)
        files[copy.name] = file_sha256(copy)
    for m in sys_cfg.members:
        _copy(model_file(models_dir, m), tmp / "models" / f"{m}.pt")
        files[f"models/{m}.pt"] = file_sha256(tmp / "models" / f"{m}.pt")
    data = {prepared_name("train", lang): file_sha256(prepared_file(prepared_dir, "train", lang))
            for lang in (SRC_LANG, TGT_LANG)}
    record = ExportRecord(
        format=EXPORT_FORMAT, system=system, members=tuple(sys_cfg.members),
        beams=tuple(sys_cfg.beams), profile=params.profile,
        text=ExportText(**text_record(params.prepare),
                        sacremoses=package_version("sacremoses")),
        translate=params.translate,
        # each member's config, checked against its checkpoint when loaded
        models={m: config_record(params.model_config(m)) for m in sys_cfg.members},
        fingerprints=Fingerprints(training_data_sha256=data,
                                  params_sha256=params_fingerprint(params, sys_cfg.members)),
        files=files,
        created_with={"s2s": package_version("s2s-repro"), "torch": package_version("torch")},
        record_sha256={})
    record = dataclasses.replace(record, record_sha256=record_digests(record.to_json()))
    record.write(tmp / EXPORT_FILE)
    return record


def export_all(params: Params, paths: ExportPaths) -> dict[str, ExportRecord]:
    """Stage `export`: every system of ``params.systems`` as ``<out>/<system>/``."""
    t0 = time.perf_counter()
    out = {s: export(params, s, models_dir=paths.models, vocab_dir=paths.vocab,
                     prepared_dir=paths.prepared, out_dir=paths.out / s)
           for s in params.systems}
    log.info("read %s, %s, %s; wrote %d exports under %s in %.1fs", paths.models, paths.vocab,
             paths.prepared, len(out), paths.out, time.perf_counter() - t0)
    return out
