"""A corpus built from its official downloads: each archive fetched (:mod:`s2s.data.http`), the
members the corpus needs extracted (:mod:`s2s.data.archives`), each side's parts gunzipped, cut
to a column where the registry says so and joined, and the product checked: as many pairs on
both sides, the registry's pair count, and the mirror's sha256 where the mirror holds the same
text.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import tarfile
import zipfile
import zlib
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from s2s.data.archives import MissingMemberError, NotAnArchiveError, safe_extract
from s2s.data.files import DownloadError, copy_with_progress, file_stats, recorded
from s2s.data.http import cache_path, discard, fetch
from s2s.data.sources import Corpus, Part, Remote, raw_names
from s2s.io import atomic_open, corpus_dir

# What reading a cut or garbled archive or .gz raises. Remotes without a checksum (multi30k's,
# Tatoeba's zip) pass verification as they are, so a download cut short is only seen here.
_DAMAGED = (EOFError, zlib.error, gzip.BadGzipFile, tarfile.ReadError, zipfile.BadZipFile,
            NotAnArchiveError)


def build_corpus(entry: Corpus, out_dir: Path, cache_dir: Path) -> dict:
    """Fetch `entry`'s downloads into `cache_dir` and build ``out_dir/<id>/`` from them; return
    its manifest record (without ``max_lines`` and ``lines``, which the stage adds)."""
    assert entry.network is not None
    names = dict(zip(("en", "fr"), raw_names(entry.id)))
    downloads = {}
    archives: dict[str, Path] = {}
    read: dict[str, os.stat_result] = {}
    remotes = {r.url: r for r in entry.network.remotes}
    for remote in entry.network.remotes:
        try:
            path, info = fetch(remote, cache_dir)
        except DownloadError as e:
            if not entry.alternative:
                raise
            raise DownloadError(f"{e}. {entry.alternative}") from e
        archives[remote.url] = path
        read[remote.url] = os.stat(path)  # the copy read: the one a damage may discard
        downloads[remote.url] = info
    files = {}
    with corpus_dir(out_dir, entry.id) as tmp:
        # One pass over each archive, for the members of both sides.
        extracted: dict[tuple[str, str], Path] = {}
        for url, path in archives.items():
            members = {p.member for p in entry.network.en + entry.network.fr
                       if p.remote.url == url and p.member is not None}
            if members:
                try:
                    got = safe_extract(path, tmp / ".extract", members)
                except (*_DAMAGED, MissingMemberError) as e:
                    if isinstance(e, MissingMemberError) and _checked(remotes[url]):
                        raise  # the published file: the registry names a member it lacks
                    raise _damaged(remotes[url], e, member=", ".join(sorted(members)),
                                   cache_dir=cache_dir, read=read[url]) from e
                extracted.update({(url, m): p for m, p in got.items()})
        for side, parts in (("en", entry.network.en), ("fr", entry.network.fr)):
            with atomic_open(tmp / names[side], "wb") as out:
                for part in parts:
                    src = (extracted[(part.remote.url, part.member)] if part.member
                           else archives[part.remote.url])
                    try:
                        _append_part(src, out, part)
                    except _DAMAGED as e:
                        raise _damaged(part.remote, e, member=part.member,
                                       cache_dir=cache_dir, read=read[part.remote.url]) from e
            files[side] = {**recorded(file_stats(tmp / names[side])),
                           "path": f"{entry.id}/{names[side]}",
                           "source": " ".join(_describe(p) for p in parts)}
        shutil.rmtree(tmp / ".extract", ignore_errors=True)
        pairs = _verify_product(entry, tmp, names, files)
    return {"mode": "network", "source": sorted(downloads), "downloads": downloads,
            "format": entry.format, "pairs": pairs, "whole_corpus": True, "files": files}


def _checked(remote: Remote) -> bool:
    """Whether the registry gives `remote`'s checksum, so that a copy that passed the fetch's
    verification holds the published bytes."""
    return bool(remote.sha256 or remote.md5)


def _damaged(remote: Remote, e: BaseException, *, member: str | None, cache_dir: Path,
             read: os.stat_result) -> DownloadError:
    """The error for a cached download that cannot be read to its end, once that file is
    deleted: a rerun downloads it again instead of failing on the same bytes. A file of a known
    checksum (it passed it) holds the published bytes: it is kept, and said to be the
    publisher's, which no rerun mends."""
    what = f"{remote.url}, member {member}" if member else remote.url
    if _checked(remote):
        cached = cache_path(remote, cache_dir)
        return DownloadError(f"{what}: the downloaded file {cached} has the published checksum "
                             f"but cannot be read: {type(e).__name__}: {e}; the published file "
                             f"itself is damaged, which no rerun mends (kept)")
    cached, deleted = discard(remote, cache_dir, read)
    done = ("deleted it" if deleted else
            "another process has replaced or deleted it since")
    return DownloadError(f"{what}: the downloaded file {cached} is damaged (cut short?): "
                         f"{type(e).__name__}: {e}; {done}, run the download again")


def _describe(part: Part) -> str:
    text = part.remote.url + (f"#{part.member}" if part.member else "")
    if part.column is not None:
        text += f" (column {part.column})"
    return text


def _append_part(src: Path, out: BinaryIO, part: Part) -> None:
    """Append one part to `out`, gunzipped / cut to one column as the part says.

    A part whose last line has no newline gets one, so that concatenated parts never merge lines
    (a member cut by its maker, or a file of another source).
    """
    opener = gzip.open if part.gunzip else open
    last = b"\n"
    with opener(src, "rb") as f:
        if part.column is None:
            last = copy_with_progress(f, out, total=None if part.gunzip else src.stat().st_size,
                                      desc=PurePosixPath(part.member or src.name).name)
        else:
            for n, line in enumerate(f, 1):
                cols = line.rstrip(b"\r\n").split(b"\t")
                if len(cols) <= part.column:
                    raise DownloadError(f"{_describe(part)}: line {n} has {len(cols)} "
                                        f"tab-separated columns, expected > {part.column}")
                out.write(cols[part.column] + b"\n")
    if last not in (b"", b"\n"):
        out.write(b"\n")


def _verify_product(entry: Corpus, tmp: Path, names: dict[str, str],
                    files: dict[str, dict]) -> int:
    """Check the built files: same pairs on both sides, the known count, the mirror's sha256."""
    counts = {side: _count_pairs(tmp / names[side], entry.format) for side in ("en", "fr")}
    if counts["en"] != counts["fr"]:
        raise DownloadError(f"{entry.id}: en has {counts['en']:,} pairs, fr {counts['fr']:,}")
    pairs = counts["en"]
    if entry.pairs is not None and pairs != entry.pairs:
        raise DownloadError(f"{entry.id}: expected {entry.pairs:,} pairs, got {pairs:,}")
    m = entry.mirror
    if m is not None and m.relation in ("identical", "head"):
        for side, ref in (("en", m.en), ("fr", m.fr)):
            path = tmp / names[side]
            actual = (files[side]["sha256"] if m.relation == "identical"
                      else _head_sha256(path, ref.lines))
            if actual != ref.sha256:
                what = "file" if m.relation == "identical" else f"first {ref.lines:,} lines"
                raise DownloadError(f"{entry.id}: downloaded {side} {what} sha256 {actual} != "
                                    f"{ref.sha256} (the mirror's {ref.path})")
    return pairs


def _count_pairs(path: Path, fmt: str) -> int:
    """The sentences the corpus reader will find (s2s.data.text.read_corpus): the lines, or an
    SGML file's lines that start with a ``<seg `` element, as its reader takes them."""
    if fmt != "sgm":
        return file_stats(path)["lines"]
    with open(path, "rb") as f:
        return sum(1 for line in f if line.startswith(b"<seg "))


def _head_sha256(path: Path, lines: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for _, line in zip(range(lines), f):
            h.update(line)
    return h.hexdigest()
