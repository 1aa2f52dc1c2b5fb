"""The local mirror (``$S2S_MIRROR``, laid out as its README.md describes): whether it can serve
a profile, and a corpus copied from it, checked against the registry's sha256, size and lines.
"""

from __future__ import annotations

import os
from pathlib import Path

from s2s.data.files import DownloadError, recorded, stream_stats
from s2s.data.sources import CORPORA, Corpus, MirrorFile, raw_names
from s2s.io import atomic_open, corpus_dir

MIRROR_ENV = "S2S_MIRROR"


def default_mirror() -> Path | None:
    """The mirror named by ``$S2S_MIRROR``, or None."""
    value = os.environ.get(MIRROR_ENV, "").strip()
    return Path(value) if value else None


def corpus_source(entry: Corpus, mirror: Path) -> str:
    """The mirror folder a corpus is copied from, as the manifest records it."""
    assert entry.mirror is not None
    return str(mirror / Path(entry.mirror.en.path).parent)


def check_mirror(wanted: dict[str, int | None], mirror: Path) -> None:
    """Refuse, naming every problem at once, a mirror that lacks a corpus of `wanted` (corpus
    id -> pairs asked for, None: all), holds fewer pairs than asked, or misses one of its files.
    """
    if not mirror.is_dir():
        raise DownloadError(f"mirror {mirror} is not a directory (set {MIRROR_ENV} to a folder "
                            "laid out as its README.md describes)")
    problems = []
    for cid, max_lines in wanted.items():
        entry = CORPORA[cid]
        shortfall = entry.mirror_shortfall(max_lines)
        if shortfall is not None:
            if entry.mirror is None:
                shortfall += f" ({_network_hint(entry)})"
            problems.append(shortfall)
            continue
        for f in (entry.mirror.en, entry.mirror.fr):
            if not (mirror / f.path).is_file():
                problems.append(f"{cid}: {mirror / f.path} is missing from the mirror")
    if problems:
        # a corpus whose only host may be gone (LIUM's): what runs instead, said once
        instead = dict.fromkeys(CORPORA[cid].alternative for cid in wanted
                                if CORPORA[cid].mirror is None and CORPORA[cid].alternative)
        raise DownloadError(f"the mirror {mirror} cannot serve this profile; nothing was copied:\n"
                            + "\n".join(f"  - {p}" for p in problems)
                            + "".join(f"\n{a}" for a in instead))


def _network_hint(entry: Corpus) -> str:
    if entry.network is None:
        return entry.network_note
    return "available over the network: unset S2S_MIRROR on a machine with network access"


def copy_corpus(entry: Corpus, mirror: Path, out_dir: Path) -> dict:
    """Copy `entry`'s two mirror files to ``out_dir/<id>/``, verified; return its manifest
    record (without ``max_lines`` and ``lines``, which the stage adds)."""
    assert entry.mirror is not None
    names = dict(zip(("en", "fr"), raw_names(entry.id)))
    refs = {"en": entry.mirror.en, "fr": entry.mirror.fr}
    files = {}
    with corpus_dir(out_dir, entry.id) as tmp:
        for side in ("en", "fr"):
            src = mirror / refs[side].path
            stats = _copy_verified(src, tmp / names[side], refs[side])
            files[side] = {**recorded(stats), "path": f"{entry.id}/{names[side]}",
                           "source": str(src)}
    return {"mode": "mirror", "source": corpus_source(entry, mirror),
            "format": entry.format, "pairs": entry.mirror.pairs,
            "whole_corpus": entry.mirror.relation != "head", "files": files}


def _copy_verified(src: Path, dst: Path, ref: MirrorFile) -> dict:
    """Copy `src` to `dst` (atomically), checking sha256, bytes and lines against `ref`."""
    with atomic_open(dst, "wb") as out, open(src, "rb") as f:
        stats = stream_stats(f, out)
        wrong = [f"{what}: expected {want}, got {got}" for what, want, got in (
            ("sha256", ref.sha256, stats["sha256"]), ("bytes", ref.bytes, stats["bytes"]),
            ("lines", ref.lines, stats["lines"])) if want != got]
        if wrong:
            raise DownloadError(f"mirror file {src} does not match the registry: "
                                + "; ".join(wrong))
    return stats
