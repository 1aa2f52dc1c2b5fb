"""Exports: every system as one versioned folder that translates without the pipeline's folders
(the library of :mod:`s2s.stages.export`; :func:`s2s.api.load_export` reads them)::

    export.json       format, system, members, sha256 of every file, text settings, decoding
                      config, and the fingerprints of the data and params the models were trained
                      with
    en.tsv fr.tsv     the vocabularies
    models/<m>.pt     each member's final checkpoint

Writing one copies files and records configs: it runs no model code (no torch), so the export
stage depends on the architectures' configs only.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
import logging
import shutil
import time
from pathlib import Path

from s2s.arch import config_record
from s2s.config import Params, train_record
from s2s.io import atomic_write_json

log = logging.getLogger("s2s.api")

EXPORT_FORMAT = "s2s-export/1"
EXPORT_FILE = "export.json"
SRC_LANG, TGT_LANG = "en", "fr"
# How `prepare` turns raw text into model input, written into every export (and checked there).
TEXT_PIPELINE = {
    "normalize": "s2s.data.text.normalize: NFC, control characters dropped, Unicode spaces -> ' '",
    "tokenizer": "sacremoses MosesTokenizer(lang).tokenize(escape=False, "
                 "aggressive_dash_splits=False)",
    "detokenizer": "sacremoses MosesDetokenizer(lang).detokenize(line.split())",
    "src_lang": SRC_LANG,
    "tgt_lang": TGT_LANG,
}


class ExportError(ValueError):
    """An export folder that cannot be used: names the file and what is wrong."""


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


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


def export(params: Params, system: str, *, models_dir: Path, vocab_dir: Path,
           prepared_dir: Path, out_dir: Path) -> dict:
    """Write system ``system`` as one self-contained folder ``out_dir`` (see the module doc)."""
    if system not in params.systems:
        raise KeyError(f"{params.source}: no system '{system}' under 'systems' "
                       f"(known: {', '.join(params.systems)})")
    sys_cfg = params.systems[system]
    out_dir = Path(out_dir)
    tmp = out_dir.with_name(f".{out_dir.name}.tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    (tmp / "models").mkdir(parents=True)
    files = {}
    for lang in (SRC_LANG, TGT_LANG):
        shutil.copyfile(Path(vocab_dir) / f"{lang}.tsv", tmp / f"{lang}.tsv")
        files[f"{lang}.tsv"] = _sha256(tmp / f"{lang}.tsv")
    for m in sys_cfg.members:
        shutil.copyfile(Path(models_dir) / m / "model.pt", tmp / "models" / f"{m}.pt")
        files[f"models/{m}.pt"] = _sha256(tmp / "models" / f"{m}.pt")
    data = {f"train.tok.{lang}": _sha256(Path(prepared_dir) / f"train.tok.{lang}")
            for lang in (SRC_LANG, TGT_LANG)}
    meta = {
        "format": EXPORT_FORMAT, "system": system, "members": list(sys_cfg.members),
        "beams": list(sys_cfg.beams), "profile": params.profile,
        "text": {**TEXT_PIPELINE, "lowercase": params.prepare.lowercase,
                 "sacremoses": _version("sacremoses")},
        "translate": dataclasses.asdict(params.translate),
        # each member's config, checked against its checkpoint when loaded
        "models": {m: config_record(params.model_config(m)) for m in sys_cfg.members},
        "fingerprints": {"training_data_sha256": data,
                         "params_sha256": params_fingerprint(params, sys_cfg.members)},
        "files": files,
        "created_with": {"s2s": _version("s2s-repro"), "torch": _version("torch")},
    }
    atomic_write_json(tmp / EXPORT_FILE, meta)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    tmp.rename(out_dir)
    return meta


def export_all(params: Params, *, models_dir: Path, vocab_dir: Path, prepared_dir: Path,
               out_dir: Path) -> dict[str, dict]:
    """Stage `export`: every system of ``params.systems`` as ``<out_dir>/<system>/``."""
    t0 = time.perf_counter()
    out = {s: export(params, s, models_dir=models_dir, vocab_dir=vocab_dir,
                     prepared_dir=prepared_dir, out_dir=Path(out_dir) / s)
           for s in params.systems}
    log.info("read %s, %s, %s; wrote %d exports under %s in %.1fs", models_dir, vocab_dir,
             prepared_dir, len(out), out_dir, time.perf_counter() - t0)
    return out
