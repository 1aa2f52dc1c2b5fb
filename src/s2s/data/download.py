"""The ``download`` stage: fetch every corpus the parameters name, verified, into ``data/raw``.

Reads
    params ``data.train``, ``data.dev``, ``data.test``, ``data.nbest`` (corpus ids of
    :mod:`s2s.data.sources` with optional ``max_lines``), and either

    - the local mirror (``mirror``, at the CLI ``$S2S_MIRROR``; layout of its README.md): the
      files are copied and their sha256, size and line count checked against the registry, or
    - the network (no mirror): official archives are downloaded with HTTP Range resume into a
      download cache (``$S2S_DOWNLOAD_CACHE``, default ``~/.cache/s2s/downloads``), checked
      against the archive checksums known to the registry, and the needed members extracted
      safely (gunzipped where compressed).

Writes
    ``out_dir/<corpus id>/{en,fr}.{txt,sgm}`` for exactly the corpora named (directories of other
    corpora, left by another profile, are removed) and ``out_dir/manifest.json``::

        {"mode": "mirror"|"network", "mirror": <dir>|null, "corpora": {<id>: {
            "mode", "source" (mirror folder, or the list of URLs), "format", "pairs",
            "whole_corpus" (false for a mirror head), "max_lines" (asked for; null = all),
            "lines": {"en", "fr"},
            "downloads" (network: per URL its sha256, bytes, and the checksum verified),
            "files": {"en"|"fr": {"path" (relative to out_dir), "source", "sha256", "bytes",
                                  "lines"}}}}}

``max_lines`` is checked here (the source must hold that many pairs) but applied by ``prepare``:
a corpus is always written whole, as its source has it, so its checksums are the source's.

Every file is written under a temporary name and renamed; a corpus directory is built under
``.tmp-*`` and renamed into place only when complete, and ``manifest.json`` is removed at the start
and written last, so after an interrupted run nothing partial passes for complete. Interrupted
downloads stay as ``<file>.part`` in the cache and are resumed, then verified, never trusted.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
import shutil
import socket
import stat
import tarfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Collection, Iterable
from contextlib import AbstractContextManager
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import BinaryIO

from tqdm import tqdm

from s2s.config import CorpusRef, DataConfig
from s2s.data.sources import CORPORA, Corpus, MirrorFile, Part, Remote, raw_names
from s2s.io import atomic_open, temp_dir

log = logging.getLogger("s2s.download")

MANIFEST = "manifest.json"
CHUNK = 1 << 20
USER_AGENT = "s2s-repro/0.1 (seq2seq reproduction; python urllib)"
MIRROR_ENV = "S2S_MIRROR"
CACHE_ENV = "S2S_DOWNLOAD_CACHE"
_TMP_PREFIX = ".tmp-"


class DownloadError(RuntimeError):
    """A corpus that cannot be fetched, or fetched bytes that do not match what is expected."""


class UnsafeArchiveError(DownloadError):
    """An archive member that would be written outside the target directory."""


# ---------------------------------------------------------------------------------------------
# The stage


def fetch_all(data: DataConfig, *, out_dir: Path, mirror: Path | None,
              cache_dir: Path | None = None) -> dict:
    """Fetch every corpus `data` names into `out_dir`; return the manifest (also written there)."""
    start = time.monotonic()
    out_dir = Path(out_dir)
    wanted = requested_corpora(data)
    mirror = Path(mirror) if mirror is not None else None
    previous = _read_manifest(out_dir).get("corpora", {})
    # Corpora already complete from the same source are kept (their files are re-hashed).
    kept = {cid: rec for cid in wanted
            if (rec := _reuse(out_dir, cid, previous.get(cid), mirror)) is not None}
    if mirror is not None:
        _check_mirror(wanted, mirror)
    else:
        _check_network({cid: n for cid, n in wanted.items() if cid not in kept})
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    log.info("download: %d corpora (%s) from %s into %s", len(wanted), ", ".join(wanted),
             f"mirror {mirror}" if mirror else "the network", out_dir)

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / MANIFEST).unlink(missing_ok=True)  # present again only when all is complete
    for leftover in out_dir.glob(f"{_TMP_PREFIX}*"):
        _remove(leftover)

    corpora: dict[str, dict] = {}
    for cid, max_lines in wanted.items():
        t0 = time.monotonic()
        entry = CORPORA[cid]
        if cid in kept:
            record = kept[cid]
        elif mirror is not None:
            record = _fetch_from_mirror(entry, mirror, out_dir)
        else:
            record = _fetch_from_network(entry, out_dir, cache_dir)
        record["max_lines"] = max_lines
        record["lines"] = {side: f["lines"] for side, f in record["files"].items()}
        corpora[cid] = record
        sizes = ", ".join(f"{f['path']} ({f['lines']:,} lines, {f['bytes']:,} B)"
                          for f in record["files"].values())
        how = "kept, already complete (checksums match)" if cid in kept else "written"
        log.info("%s: %s %s in %.1f s", cid, how, sizes, time.monotonic() - t0)

    _remove_stale(out_dir, set(wanted))
    manifest = {
        "mode": "mirror" if mirror is not None else "network",
        "mirror": str(mirror) if mirror is not None else None,
        "corpora": corpora,
    }
    _write_atomic(out_dir / MANIFEST, (json.dumps(manifest, indent=2, sort_keys=True) + "\n")
                  .encode("utf-8"))
    log.info("download: wrote %s (%d corpora) in %.1f s", out_dir / MANIFEST, len(corpora),
             time.monotonic() - start)
    return manifest


def requested_corpora(data: DataConfig) -> dict[str, int | None]:
    """Corpus id -> pairs asked for (None: all), for every corpus `data` names, in order.

    A corpus named twice keeps the larger request. An unknown id is a DownloadError that lists
    every unknown id and the known ones.
    """
    refs: list[CorpusRef] = [*data.train, *data.dev, data.test]
    if data.nbest is not None:
        refs.append(data.nbest)
    unknown = [r.corpus for r in refs if r.corpus not in CORPORA]
    if unknown:
        raise DownloadError(f"unknown corpus id(s): {', '.join(dict.fromkeys(unknown))} "
                            f"(known: {', '.join(CORPORA)})")
    wanted: dict[str, int | None] = {}
    for ref in refs:
        if ref.corpus in wanted:
            old = wanted[ref.corpus]
            wanted[ref.corpus] = None if old is None or ref.max_lines is None \
                else max(old, ref.max_lines)
        else:
            wanted[ref.corpus] = ref.max_lines
    return wanted


def default_mirror() -> Path | None:
    """The mirror named by ``$S2S_MIRROR``, or None."""
    value = os.environ.get(MIRROR_ENV, "").strip()
    return Path(value) if value else None


def default_cache_dir() -> Path:
    """``$S2S_DOWNLOAD_CACHE``, else ``$XDG_CACHE_HOME/s2s/downloads`` (``~/.cache``)."""
    value = os.environ.get(CACHE_ENV, "").strip()
    if value:
        return Path(value)
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(base) / "s2s" / "downloads"


# ---------------------------------------------------------------------------------------------
# Checks made before anything is written


def _check_mirror(wanted: dict[str, int | None], mirror: Path) -> None:
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
        raise DownloadError(f"the mirror {mirror} cannot serve this profile; nothing was copied:\n"
                            + "\n".join(f"  - {p}" for p in problems))


def _network_hint(entry: Corpus) -> str:
    if entry.network is None:
        return entry.network_note
    return "available over the network: unset S2S_MIRROR on a machine with network access"


def _check_network(wanted: dict[str, int | None]) -> None:
    if not wanted:
        return
    problems = []
    for cid, max_lines in wanted.items():
        entry = CORPORA[cid]
        if entry.network is None:
            problems.append(f"{cid}: {entry.network_note}")
        elif max_lines is not None and entry.pairs is not None and max_lines > entry.pairs:
            problems.append(f"{cid}: the corpus has {entry.pairs:,} pairs; the profile asks for "
                            f"{max_lines:,}")
    if problems:
        raise DownloadError("these corpora cannot be downloaded; nothing was fetched:\n"
                            + "\n".join(f"  - {p}" for p in problems))
    urls = sorted({r.url for cid in wanted for r in CORPORA[cid].network.remotes})
    hosts = sorted({urllib.parse.urlsplit(u).hostname or "" for u in urls})
    if not network_available(urls):
        raise DownloadError(
            "no mirror and no network: the download stage needs one of them. Either\n"
            f"  - set {MIRROR_ENV}=<dir> to a local mirror laid out as its README.md describes "
            "(one folder per data set, e.g. wmt14-newstest2014-fren/sgm/...; CI uses "
            "../shared/data), or\n"
            f"  - give this machine network access to {', '.join(hosts)} "
            "(none answered within a few seconds).")


def network_available(urls: Iterable[str], timeout: float = 3.0) -> bool:
    """Whether the host of any of `urls` accepts a TCP connection within `timeout` seconds.

    Name resolution has no timeout of its own, so each probe runs in a daemon thread and is
    abandoned when the time is up: an air-gapped machine answers False in `timeout` seconds.
    A bare host name is probed on port 443.
    """
    targets = set()
    for url in urls:
        parts = urllib.parse.urlsplit(url if "://" in url else f"https://{url}")
        if parts.hostname:
            port = parts.port or (80 if parts.scheme == "http" else 443)
            targets.add((parts.hostname, port))
    reachable = threading.Event()

    def probe(host: str, port: int) -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                reachable.set()
        except OSError:
            pass

    threads = [threading.Thread(target=probe, args=t, daemon=True) for t in sorted(targets)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    while not reachable.is_set() and time.monotonic() < deadline \
            and any(t.is_alive() for t in threads):
        reachable.wait(0.05)
    return reachable.is_set()


# ---------------------------------------------------------------------------------------------
# Mirror mode


def _fetch_from_mirror(entry: Corpus, mirror: Path, out_dir: Path) -> dict:
    assert entry.mirror is not None
    names = dict(zip(("en", "fr"), raw_names(entry.id)))
    refs = {"en": entry.mirror.en, "fr": entry.mirror.fr}
    files = {}
    with _corpus_dir(out_dir, entry.id) as tmp:
        for side in ("en", "fr"):
            src = mirror / refs[side].path
            stats = _copy_verified(src, tmp / names[side], refs[side])
            files[side] = {**_public(stats), "path": f"{entry.id}/{names[side]}",
                           "source": str(src)}
    return {"mode": "mirror", "source": str(mirror / Path(refs["en"].path).parent),
            "format": entry.format, "pairs": entry.mirror.pairs,
            "whole_corpus": entry.mirror.relation != "head", "files": files}


def _copy_verified(src: Path, dst: Path, ref: MirrorFile) -> dict:
    """Copy `src` to `dst` (atomically), checking sha256, bytes and lines against `ref`."""
    with _atomic_writer(dst) as out, open(src, "rb") as f:
        stats = _stream(f, out)
        wrong = [f"{what}: expected {want}, got {got}" for what, want, got in (
            ("sha256", ref.sha256, stats["sha256"]), ("bytes", ref.bytes, stats["bytes"]),
            ("lines", ref.lines, stats["lines"])) if want != got]
        if wrong:
            raise DownloadError(f"mirror file {src} does not match the registry: "
                                + "; ".join(wrong))
    return stats


# ---------------------------------------------------------------------------------------------
# Network mode


def _fetch_from_network(entry: Corpus, out_dir: Path, cache_dir: Path) -> dict:
    assert entry.network is not None
    names = dict(zip(("en", "fr"), raw_names(entry.id)))
    downloads = {}
    archives: dict[str, Path] = {}
    for remote in entry.network.remotes:
        path, info = fetch(remote, cache_dir)
        archives[remote.url] = path
        downloads[remote.url] = info
    files = {}
    with _corpus_dir(out_dir, entry.id) as tmp:
        # One pass over each archive, for the members of both sides.
        extracted: dict[tuple[str, str], Path] = {}
        for url, path in archives.items():
            members = {p.member for p in entry.network.en + entry.network.fr
                       if p.remote.url == url and p.member is not None}
            if members:
                got = safe_extract(path, tmp / ".extract", members)
                extracted.update({(url, m): p for m, p in got.items()})
        for side, parts in (("en", entry.network.en), ("fr", entry.network.fr)):
            with _atomic_writer(tmp / names[side]) as out:
                for part in parts:
                    src = extracted[(part.remote.url, part.member)] if part.member \
                        else archives[part.remote.url]
                    _append_part(src, out, part)
            files[side] = {**_public(_file_stats(tmp / names[side])), "path": f"{entry.id}/{names[side]}",
                           "source": " ".join(_describe(p) for p in parts)}
        shutil.rmtree(tmp / ".extract", ignore_errors=True)
        pairs = _verify_network_product(entry, tmp, names, files)
    return {"mode": "network", "source": sorted(downloads), "downloads": downloads,
            "format": entry.format, "pairs": pairs, "whole_corpus": True, "files": files}


def _describe(part: Part) -> str:
    text = part.remote.url + (f"#{part.member}" if part.member else "")
    if part.column is not None:
        text += f" (column {part.column})"
    return text


def _append_part(src: Path, out: BinaryIO, part: Part) -> None:
    """Append one part to `out`, gunzipped / cut to one column as the part says.

    A part whose last line has no newline gets one, so that concatenated parts never merge lines
    (the official europarl-v7 files lack their final newline).
    """
    opener = gzip.open if part.gunzip else open
    last = b"\n"
    with opener(src, "rb") as f:
        if part.column is None:
            last = _copy(f, out, total=None if part.gunzip else src.stat().st_size,
                         desc=PurePosixPath(part.member or src.name).name)
        else:
            for line in f:
                cols = line.rstrip(b"\r\n").split(b"\t")
                if len(cols) <= part.column:
                    raise DownloadError(f"{_describe(part)}: a line has {len(cols)} "
                                        f"tab-separated columns, expected > {part.column}")
                out.write(cols[part.column] + b"\n")
    if last not in (b"", b"\n"):
        out.write(b"\n")


def _verify_network_product(entry: Corpus, tmp: Path, names: dict[str, str],
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
            actual = files[side]["sha256"] if m.relation == "identical" \
                else _head_sha256(path, ref.lines)
            if actual != ref.sha256:
                what = "file" if m.relation == "identical" else f"first {ref.lines:,} lines"
                raise DownloadError(f"{entry.id}: downloaded {side} {what} sha256 {actual} != "
                                    f"{ref.sha256} (the mirror's {ref.path})")
    return pairs


def _count_pairs(path: Path, fmt: str) -> int:
    if fmt != "sgm":
        return _file_stats(path)["lines"]
    with open(path, "rb") as f:
        return sum(1 for line in f if b"<seg" in line)


def _head_sha256(path: Path, lines: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for _, line in zip(range(lines), f):
            h.update(line)
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------
# Downloads with resume


def cache_path(remote: Remote, cache_dir: Path) -> Path:
    """Where `remote` is kept in the cache: its basename, prefixed by a hash of the URL."""
    name = PurePosixPath(urllib.parse.urlsplit(remote.url).path).name or "download"
    tag = hashlib.sha256(remote.url.encode("utf-8")).hexdigest()[:10]
    return Path(cache_dir) / f"{tag}-{name}"


def fetch(remote: Remote, cache_dir: Path, *, retries: int = 3, backoff: float = 2.0,
          timeout: float = 60.0) -> tuple[Path, dict]:
    """Download `remote` into `cache_dir` (resuming a ``.part``), verify it, return its path.

    The file is renamed from ``<name>.part`` only once complete and verified (sha256, else md5,
    where the registry knows one; its size where known). A ``.part`` left by an interrupted run is
    resumed with an HTTP Range request; if the server ignores the range the download restarts.
    Returns the path and a record: url, sha256, bytes, and which checksum was verified.
    """
    dest = cache_path(remote, cache_dir)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists():
        info = _verify_download(remote, dest)
        if info is not None:
            log.info("%s: in the cache (%s), verified", remote.url, dest)
            return dest, info
        log.warning("%s: cached copy %s fails verification, downloading again", remote.url, dest)
        dest.unlink()
    part = dest.with_name(dest.name + ".part")
    attempt = 0
    while True:
        try:
            _download_to_part(remote.url, part, timeout=timeout)
            break
        except (urllib.error.URLError, OSError, _Incomplete) as e:
            if isinstance(e, urllib.error.HTTPError) and e.code < 500 and e.code != 416:
                raise DownloadError(f"{remote.url}: HTTP {e.code} {e.reason}") from e
            attempt += 1
            if attempt > retries:
                raise DownloadError(f"{remote.url}: download failed after {attempt} attempt(s): "
                                    f"{e}; {part} is kept and will be resumed") from e
            log.warning("%s: %s; resuming (attempt %d of %d)", remote.url, e, attempt, retries)
            time.sleep(backoff * attempt)
    info = _verify_download(remote, part)
    if info is None:
        actual = _file_stats(part)
        part.unlink()
        want = remote.sha256 or remote.md5 or f"{remote.bytes} bytes"
        raise DownloadError(f"{remote.url}: downloaded file does not match the registry "
                            f"(expected {want}; got sha256 {actual['sha256']}, md5 "
                            f"{actual['md5']}, {actual['bytes']} bytes); the partial file was "
                            "removed")
    os.replace(part, dest)
    return dest, info


class _Incomplete(Exception):
    """The connection closed before the announced length arrived."""


def _download_to_part(url: str, part: Path, *, timeout: float) -> None:
    offset = part.stat().st_size if part.exists() else 0
    headers = {"User-Agent": USER_AGENT}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    request = urllib.request.Request(url, headers=headers)
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as e:
        if e.code == 416 and offset:
            # Range past the end: the .part may already be whole; verification decides.
            total = _content_range_total(e.headers.get("Content-Range", ""))
            if total == offset:
                return
            part.unlink()
            raise
        raise
    with response:
        status = response.status
        length = response.headers.get("Content-Length")
        if status == 206:
            start = _content_range_start(response.headers.get("Content-Range", ""))
            if start != offset:
                part.unlink(missing_ok=True)
                raise _Incomplete(f"server resumed at byte {start}, not {offset}; restarting")
            mode = "ab"
            log.info("%s: resuming at byte %d", url, offset)
        else:
            if offset:
                log.info("%s: the server ignored the range request; restarting", url)
            offset, mode = 0, "wb"
        expected = int(length) if length is not None else None
        total = offset + expected if expected is not None else None
        received = 0
        with open(part, mode) as f, tqdm(total=total, initial=offset, unit="B", unit_scale=True,
                                         unit_divisor=1024, desc=PurePosixPath(url).name,
                                         disable=None, leave=False) as bar:
            while chunk := response.read(CHUNK):
                f.write(chunk)
                received += len(chunk)
                bar.update(len(chunk))
    if expected is not None and received < expected:
        raise _Incomplete(f"connection closed after {offset + received} of {total} bytes")


def _content_range_start(value: str) -> int | None:
    # "bytes 100-999/1000"
    try:
        return int(value.split()[1].split("-")[0])
    except (IndexError, ValueError):
        return None


def _content_range_total(value: str) -> int | None:
    # "bytes */1000"
    try:
        return int(value.rsplit("/", 1)[1])
    except (IndexError, ValueError):
        return None


def _verify_download(remote: Remote, path: Path) -> dict | None:
    """The download record of `path` if it matches what the registry knows, else None."""
    stats = _file_stats(path)
    if remote.bytes is not None and stats["bytes"] != remote.bytes:
        return None
    if remote.sha256 is not None:
        checked = "sha256"
        ok = stats["sha256"] == remote.sha256
    elif remote.md5 is not None:
        checked = "md5"
        ok = stats["md5"] == remote.md5
    else:
        checked = "none"
        ok = True
        log.warning("%s: no checksum is known for this file; recorded sha256 %s",
                    remote.url, stats["sha256"])
    if not ok:
        return None
    return {"url": remote.url, "sha256": stats["sha256"], "bytes": stats["bytes"],
            "verified": checked}


# ---------------------------------------------------------------------------------------------
# Safe extraction


def safe_extract(archive: Path, dest: Path, members: Collection[str] | None = None
                 ) -> dict[str, Path]:
    """Extract `members` (None: every regular file) of a tar or zip `archive` under `dest`.

    Every member the scan meets is checked first: an absolute path, a ``..`` component, a link
    whose target leaves `dest`, or a device or fifo refuses the whole archive (UnsafeArchiveError);
    links are never created, and asking for a link is also refused. Each file is written under a
    temporary name and renamed. A named member the archive lacks is a DownloadError. Returns
    member name -> extracted path.
    """
    archive, dest = Path(archive), Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    wanted = None if members is None else set(members)
    if zipfile.is_zipfile(archive):
        got = _extract_zip(archive, dest, wanted)
    elif tarfile.is_tarfile(archive):
        got = _extract_tar(archive, dest, wanted)
    else:
        raise DownloadError(f"{archive}: neither a tar nor a zip archive")
    if wanted is not None and wanted - set(got):
        raise DownloadError(f"{archive}: no member(s) {', '.join(sorted(wanted - set(got)))}")
    return got


def _member_target(dest: Path, name: str, archive: Path) -> Path:
    """`dest / name`, refusing names that are absolute or climb out of `dest`."""
    posix, windows = PurePosixPath(name), PureWindowsPath(name)
    if posix.is_absolute() or windows.is_absolute() or windows.drive or name.startswith(("/", "\\")):
        raise UnsafeArchiveError(f"{archive}: member '{name}' has an absolute path; refused")
    if ".." in posix.parts or ".." in windows.parts:
        raise UnsafeArchiveError(f"{archive}: member '{name}' climbs out of the target "
                                 "directory with '..'; refused")
    target = (dest / name).resolve()
    if not target.is_relative_to(dest.resolve()):
        raise UnsafeArchiveError(f"{archive}: member '{name}' would be written outside "
                                 f"{dest}; refused")
    return target


def _check_link(dest: Path, name: str, link: str, *, hard: bool, archive: Path) -> None:
    kind = "hard link" if hard else "symlink"
    if PurePosixPath(link).is_absolute() or PureWindowsPath(link).drive:
        raise UnsafeArchiveError(f"{archive}: {kind} '{name}' points to the absolute path "
                                 f"'{link}'; refused")
    # A symlink's target is relative to its own folder; a hard link's to the archive root.
    base = dest if hard else (dest / name).parent
    target = Path(os.path.normpath(base / link))
    if not target.is_relative_to(Path(os.path.normpath(dest))):
        raise UnsafeArchiveError(f"{archive}: {kind} '{name}' -> '{link}' points outside the "
                                 f"target directory; refused")


def _extract_tar(archive: Path, dest: Path, wanted: set[str] | None) -> dict[str, Path]:
    got: dict[str, Path] = {}
    with tarfile.open(archive, "r:*") as tar:
        for info in tar:
            target = _member_target(dest, info.name, archive)
            if info.issym() or info.islnk():
                _check_link(dest, info.name, info.linkname, hard=info.islnk(), archive=archive)
                if wanted is not None and info.name in wanted:
                    raise UnsafeArchiveError(f"{archive}: member '{info.name}' is a link, not a "
                                             "file; refused")
                continue
            if not (info.isfile() or info.isdir()):
                raise UnsafeArchiveError(f"{archive}: member '{info.name}' is a device or fifo; "
                                         "refused")
            if info.isdir() or (wanted is not None and info.name not in wanted):
                continue
            src = tar.extractfile(info)
            assert src is not None
            with src, _atomic_writer(target) as out:
                _copy(src, out, total=info.size, desc=info.name)
            got[info.name] = target
            if wanted is not None and set(got) == wanted:
                break  # the rest of a large archive need not be read
    return got


def _extract_zip(archive: Path, dest: Path, wanted: set[str] | None) -> dict[str, Path]:
    got: dict[str, Path] = {}
    with zipfile.ZipFile(archive) as zf:
        infos = zf.infolist()
        for info in infos:  # a zip has a directory: check every member before writing any
            _member_target(dest, info.filename, archive)
            if stat.S_ISLNK(info.external_attr >> 16):
                link = zf.read(info).decode("utf-8", "replace")
                _check_link(dest, info.filename, link, hard=False, archive=archive)
                if wanted is not None and info.filename in wanted:
                    raise UnsafeArchiveError(f"{archive}: member '{info.filename}' is a link, "
                                             "not a file; refused")
        for info in infos:
            if info.is_dir() or stat.S_ISLNK(info.external_attr >> 16):
                continue
            if wanted is not None and info.filename not in wanted:
                continue
            target = _member_target(dest, info.filename, archive)
            with zf.open(info) as src, _atomic_writer(target) as out:
                _copy(src, out, total=info.file_size, desc=info.filename)
            got[info.filename] = target
    return got


# ---------------------------------------------------------------------------------------------
# Files: atomic writes, statistics, corpus directories, reuse, stale removal


def _atomic_writer(path: Path) -> AbstractContextManager[BinaryIO]:
    """A temporary file next to `path`, renamed to `path` on success (:func:`s2s.io.atomic_open`:
    a failed write, e.g. a full disk, names `path` and leaves no temporary file)."""
    return atomic_open(Path(path), "wb")


def _write_atomic(path: Path, payload: bytes) -> None:
    with _atomic_writer(path) as f:
        f.write(payload)


class _corpus_dir:
    """A temporary corpus directory in `out_dir`, renamed to ``out_dir/<cid>`` on success."""

    def __init__(self, out_dir: Path, cid: str):
        self.final = out_dir / cid
        self.tmp = temp_dir(out_dir, f"{_TMP_PREFIX}{cid}-")

    def __enter__(self) -> Path:
        return self.tmp

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            return
        if self.final.exists():
            _remove(self.final)
        os.replace(self.tmp, self.final)


def _copy(src: BinaryIO, out: BinaryIO, *, total: int | None, desc: str) -> bytes:
    """Copy `src` to `out` with a progress bar; return the last byte written (b"" if none)."""
    last = b""
    with tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=desc,
              disable=None, leave=False) as bar:
        while chunk := src.read(CHUNK):
            out.write(chunk)
            last = chunk[-1:]
            bar.update(len(chunk))
    return last


def _stream(src: BinaryIO, out: BinaryIO | None = None) -> dict:
    sha, md5 = hashlib.sha256(), hashlib.md5(usedforsecurity=False)
    size = lines = 0
    while chunk := src.read(CHUNK):
        sha.update(chunk)
        md5.update(chunk)
        size += len(chunk)
        lines += chunk.count(b"\n")
        if out is not None:
            out.write(chunk)
    return {"sha256": sha.hexdigest(), "md5": md5.hexdigest(), "bytes": size, "lines": lines}


def _file_stats(path: Path) -> dict:
    with open(path, "rb") as f:
        return _stream(f)


def _public(stats: dict) -> dict:
    return {k: stats[k] for k in ("sha256", "bytes", "lines")}


def _read_manifest(out_dir: Path) -> dict:
    try:
        return json.loads((out_dir / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _reuse(out_dir: Path, cid: str, old: dict | None, mirror: Path | None) -> dict | None:
    """The previous run's record of `cid` if its files are still exactly what it recorded and
    the source is the same (the mirror's registry checksums, or the same network downloads)."""
    if not old or not (out_dir / cid).is_dir():
        return None
    mode = "mirror" if mirror is not None else "network"
    if old.get("mode") != mode:
        return None
    entry = CORPORA[cid]
    if mode == "mirror":
        if entry.mirror is None or old.get("source") != str(mirror / Path(entry.mirror.en.path)
                                                             .parent):
            return None
        expected = {"en": entry.mirror.en.sha256, "fr": entry.mirror.fr.sha256}
    else:
        if entry.network is None or old.get("source") != sorted(r.url for r in
                                                                  entry.network.remotes):
            return None
        expected = {side: f.get("sha256") for side, f in old.get("files", {}).items()}
    files = old.get("files", {})
    if set(files) != {"en", "fr"} or set(raw_names(cid)) != \
            {Path(files[s]["path"]).name for s in ("en", "fr")}:
        return None
    for side in ("en", "fr"):
        path = out_dir / files[side]["path"]
        if not path.is_file() or _file_stats(path)["sha256"] != expected[side] \
                or files[side].get("sha256") != expected[side]:
            return None
    record = dict(old)
    record["files"] = {s: {**files[s]} for s in ("en", "fr")}
    return record


def _remove_stale(out_dir: Path, wanted: set[str]) -> None:
    """Remove corpus directories the parameters no longer name, so the out is exactly them."""
    for child in out_dir.iterdir():
        if child.name == MANIFEST or child.name in wanted:
            continue
        if child.is_dir() and (child.name in CORPORA or child.name.startswith(_TMP_PREFIX)):
            log.info("removing %s (not named by the parameters)", child)
            _remove(child)
        else:
            log.warning("%s is not a corpus of this profile; left alone", child)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
