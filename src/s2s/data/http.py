"""The download client: one file over HTTP(S) into a cache, resumed and verified.

A file is downloaded to ``<cache>/<hash>-<name>.part`` and renamed to its final name only once
complete and verified against the registry (sha256, else md5, where one is known; its size where
known). A ``.part`` left by an interrupted run is resumed with an HTTP Range request; if the
server ignores the range the download restarts. A connection cut mid-file is retried, resuming
where it stopped. The cache is ``$S2S_DOWNLOAD_CACHE``, else ``$XDG_CACHE_HOME/s2s/downloads``
(``~/.cache``), shared by every project of the user: a process fetching into it holds the cache
folder (``flock`` on the folder itself, so no lock file shows in it) and another waits, so no
process appends to or removes a ``.part`` another is writing; the second then finds a file both
wanted in the cache.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import http.client
import logging
import os
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from tqdm import tqdm

from s2s.data.files import CHUNK, DownloadError, file_stats
from s2s.data.sources import Remote

log = logging.getLogger("s2s.download")

USER_AGENT = "s2s-repro/0.1 (seq2seq reproduction; python urllib)"
CACHE_ENV = "S2S_DOWNLOAD_CACHE"


def default_cache_dir() -> Path:
    """``$S2S_DOWNLOAD_CACHE``, else ``$XDG_CACHE_HOME/s2s/downloads`` (``~/.cache``)."""
    value = os.environ.get(CACHE_ENV, "").strip()
    if value:
        return Path(value)
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(base) / "s2s" / "downloads"


def unreachable_hosts(urls: Iterable[str], timeout: float = 3.0) -> list[str]:
    """The hosts of `urls` that do not accept a connection within `timeout` seconds (each
    probed as :func:`network_available` probes), sorted."""
    by_host: dict[str, list[str]] = {}
    for url in urls:
        by_host.setdefault(urllib.parse.urlsplit(url).hostname or url, []).append(url)
    return sorted(h for h, us in by_host.items() if not network_available(us, timeout))


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
    while (not reachable.is_set() and time.monotonic() < deadline
           and any(t.is_alive() for t in threads)):
        reachable.wait(0.05)
    return reachable.is_set()


def cache_path(remote: Remote, cache_dir: Path) -> Path:
    """Where `remote` is kept in the cache: its basename, prefixed by a hash of the URL."""
    name = PurePosixPath(urllib.parse.urlsplit(remote.url).path).name or "download"
    tag = hashlib.sha256(remote.url.encode("utf-8")).hexdigest()[:10]
    return Path(cache_dir) / f"{tag}-{name}"


def fetch(remote: Remote, cache_dir: Path, *, retries: int = 3, backoff: float = 2.0,
          timeout: float = 60.0) -> tuple[Path, dict]:
    """Download `remote` into `cache_dir` (resuming a ``.part``), verify it, return its path.

    A verified copy already in the cache is used as it is. A failed attempt (a connection
    error, HTTP 5xx, a cut transfer, chunked or not, a range the server cannot satisfy) is
    retried up to `retries` times, after `backoff` × attempt seconds, resuming the ``.part``;
    any other HTTP 4xx is a DownloadError at once. Returns the path and a record: url, sha256,
    bytes, and which checksum was verified (``sha256``, ``md5`` or ``none``).
    """
    dest = cache_path(remote, cache_dir)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with _cache_lock(dest.parent, remote.url):
        return _fetch(remote, dest, retries=retries, backoff=backoff, timeout=timeout)


def discard(remote: Remote, cache_dir: Path, read: os.stat_result | None = None
            ) -> tuple[Path, bool]:
    """Delete `remote`'s cached copy (under the cache's lock), so that the next fetch downloads
    it again: the file whose stat was `read` (the cache is shared: another process may have
    replaced a damaged copy with a whole one since, which stays). (its path, whether it went)"""
    dest = cache_path(remote, cache_dir)
    with _cache_lock(dest.parent, remote.url):
        try:
            now = dest.stat()
        except FileNotFoundError:
            return dest, False
        same = read is None or ((now.st_dev, now.st_ino, now.st_size, now.st_mtime_ns)
                                == (read.st_dev, read.st_ino, read.st_size, read.st_mtime_ns))
        if same:
            dest.unlink(missing_ok=True)
    return dest, same


@contextlib.contextmanager
def _cache_lock(cache_dir: Path, url: str):
    """Hold the cache folder while a file is looked up, downloaded and verified there; wait,
    saying so, while another process holds it."""
    fd = os.open(cache_dir, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno in (errno.EAGAIN, errno.EACCES):
                log.info("%s: another process is downloading into %s; waiting for it", url,
                         cache_dir)
                fcntl.flock(fd, fcntl.LOCK_EX)
            else:  # a file system without flock on folders (some NFS): as before, unlocked
                log.debug("%s: cannot lock the download cache (%s)", cache_dir, e)
        yield
    finally:
        os.close(fd)  # drops the flock


def _fetch(remote: Remote, dest: Path, *, retries: int, backoff: float, timeout: float
           ) -> tuple[Path, dict]:
    if dest.exists():
        info = _verify(remote, dest)
        if info is not None:
            log.info("%s: in the cache (%s), verified", remote.url, dest)
            return dest, info
        log.warning("%s: cached copy %s fails verification, downloading again", remote.url, dest)
        dest.unlink()
    part = dest.with_name(dest.name + ".part")
    attempt = 0
    user_agent = remote.user_agent or USER_AGENT
    while True:
        try:
            _download_to_part(remote.url, part, timeout=timeout, user_agent=user_agent)
            break
        # A chunked transfer cut short is an IncompleteRead, a garbled answer a BadStatusLine:
        # neither is an OSError, and both are worth a retry (not every http.client error is:
        # an InvalidURL is not).
        except (urllib.error.URLError, OSError, http.client.IncompleteRead,
                http.client.BadStatusLine, _Incomplete) as e:
            if isinstance(e, urllib.error.HTTPError) and e.code in (403, 406):
                raise DownloadError(f"{remote.url}: HTTP {e.code} {e.reason}: the server refuses "
                                    f"this client (User-Agent '{user_agent}')") from e
            if isinstance(e, urllib.error.HTTPError) and e.code < 500 and e.code != 416:
                raise DownloadError(f"{remote.url}: HTTP {e.code} {e.reason}") from e
            attempt += 1
            if attempt > retries:
                raise DownloadError(f"{remote.url}: download failed after {attempt} attempt(s): "
                                    f"{e}; {part} is kept and will be resumed") from e
            log.warning("%s: %s; resuming (attempt %d of %d)", remote.url, e, attempt, retries)
            time.sleep(backoff * attempt)
        except http.client.HTTPException as e:  # an answer no retry mends (a header too long)
            kept = f"; {part} is kept" if part.exists() else ""
            raise DownloadError(f"{remote.url}: the server's answer cannot be read "
                                f"({type(e).__name__}: {e}){kept}") from e
    info = _verify(remote, part)
    if info is None:
        actual = file_stats(part)
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


def _download_to_part(url: str, part: Path, *, timeout: float, user_agent: str) -> None:
    offset = part.stat().st_size if part.exists() else 0
    headers = {"User-Agent": user_agent}
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


def _verify(remote: Remote, path: Path) -> dict | None:
    """The download record of `path` if it matches what the registry knows, else None."""
    stats = file_stats(path)
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
