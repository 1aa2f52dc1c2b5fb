"""Stage `download`: every corpus params `data` names, verified, into ``data/raw``.

Reads
    params ``data.train``, ``data.dev``, ``data.test``, ``data.nbest`` (corpus ids of
    :mod:`s2s.data.sources` with optional ``max_lines``), and either

    - the local mirror (``mirror``, at the CLI ``$S2S_MIRROR``; layout of its README.md): the
      files are copied and their sha256, size and line count checked against the registry
      (:mod:`s2s.data.mirror`), or
    - the network (no mirror): official archives are downloaded with HTTP Range resume into a
      download cache (``$S2S_DOWNLOAD_CACHE``, default ``~/.cache/s2s/downloads``), checked
      against the archive checksums known to the registry, and the needed members extracted
      safely, gunzipped where compressed (:mod:`s2s.data.network`, :mod:`s2s.data.http`,
      :mod:`s2s.data.archives`).

Writes
    ``out_dir/<corpus id>/{en,fr}.{txt,sgm}`` for exactly the corpora named (directories of other
    corpora, left by another profile, are removed) and ``out_dir/manifest.json``
    (:class:`s2s.artifacts.Manifest`: per corpus its source, files, sha256, bytes and lines).

``max_lines`` is checked here (the source must hold that many pairs: before anything is fetched
where the registry or the kept corpus knows its pairs, else once it is built, which is then
removed) but applied by ``prepare``: a corpus is always written whole, as its source has it, so
its checksums are the source's.

Every file is written under a temporary name and renamed; a corpus directory is built under
``.tmp-*`` and renamed into place only when complete, and ``manifest.json`` is removed at the start
and written last, so after an interrupted run nothing partial passes for complete. Interrupted
downloads stay as ``<file>.part`` in the cache and are resumed, then verified, never trusted.
Corpora already complete from the same source are kept (their files are re-hashed). A
``manifest.json`` that is cut or not of the shape written here (edited, of another version)
keeps nothing it does not describe as written here: those corpora are fetched again, with a
warning naming the file and the key (the manifest is this stage's own bookkeeping, not an
input to refuse). Temporaries of the manifest that a killed run left are removed.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from s2s.config import DataConfig, Params
from s2s.dag import Arg, Stage, command

log = logging.getLogger("s2s.download")

HELP = "fetch the corpora (or copy them from $S2S_MIRROR)"
ARGS = (Arg("--out", "data/raw", writes=True, help="folder of the raw corpora and their manifest"),)


def stages(params: Params) -> list[Stage]:
    return [command("download", "download", ARGS, deps=("metrics/params.json",),
                    params=("data",))]


def cli(args, params) -> None:
    from s2s.data.mirror import default_mirror

    main(params.data, out_dir=args.out, mirror=default_mirror())


def main(data: DataConfig, *, out_dir: Path, mirror: Path | None,
         cache_dir: Path | None = None) -> dict:
    """Fetch every corpus `data` names into `out_dir`; return the manifest (also written there)."""
    from s2s.data import download, mirror as mirrored, network
    from s2s.data.files import DownloadError
    from s2s.io import remove
    from s2s.data.http import default_cache_dir
    from s2s.data.sources import CORPORA

    start = time.monotonic()
    out_dir = Path(out_dir)
    mirror = Path(mirror) if mirror is not None else None
    wanted = download.requested_corpora(data)
    kept = download.reusable(out_dir, wanted, mirror)
    if mirror is not None:
        mirrored.check_mirror(wanted, mirror)
    else:
        download.check_network({cid: n for cid, n in wanted.items() if cid not in kept})
    short = [why for cid, record in kept.items()
             if (why := download.pairs_shortfall(data, cid, record["pairs"])) is not None]
    if short:
        raise DownloadError("these corpora hold fewer pairs than the params ask; nothing was "
                            "fetched:\n" + "\n".join(f"  - {why}" for why in short))
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    log.info("download: %d corpora (%s) from %s into %s", len(wanted), ", ".join(wanted),
             f"mirror {mirror}" if mirror else "the network", out_dir)

    download.start_writing(out_dir)
    corpora: dict[str, dict] = {}
    for cid, max_lines in wanted.items():
        t0 = time.monotonic()
        if cid in kept:
            record = kept[cid]
        elif mirror is not None:
            record = mirrored.copy_corpus(CORPORA[cid], mirror, out_dir)
        else:
            record = network.build_corpus(CORPORA[cid], out_dir, cache_dir)
        why = download.pairs_shortfall(data, cid, record["pairs"])
        if why is not None:  # a corpus of unknown size, known only once built
            remove(out_dir / cid)  # no manifest either (start_writing): nothing passes for done
            raise DownloadError(f"{why}; it was not kept, and no manifest was written")
        record["max_lines"] = max_lines
        record["lines"] = {side: f["lines"] for side, f in record["files"].items()}
        corpora[cid] = record
        sizes = ", ".join(f"{f['path']} ({f['lines']:,} lines, {f['bytes']:,} B)"
                          for f in record["files"].values())
        how = "kept, already complete (checksums match)" if cid in kept else "written"
        log.info("%s: %s %s in %.1f s", cid, how, sizes, time.monotonic() - t0)

    download.remove_stale(out_dir, set(wanted))
    manifest = {
        "mode": "mirror" if mirror is not None else "network",
        "mirror": str(mirror) if mirror is not None else None,
        "corpora": corpora,
    }
    path = download.write_manifest(out_dir, manifest)
    log.info("download: wrote %s (%d corpora) in %.1f s", path, len(corpora),
             time.monotonic() - start)
    return manifest
