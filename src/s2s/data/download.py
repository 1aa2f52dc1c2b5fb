"""The download stage's output folder (``data/raw``) and what goes into it.

Which corpora the params name (:func:`requested_corpora`), whether the network can serve those
the mirror does not (:func:`check_network`), which corpora of the previous run are still complete
(:func:`reusable`), and the folder's bookkeeping: a ``manifest.json`` removed before anything is
written and written last, ``.tmp-*`` folders whose owner is gone (a killed run) removed and
those of a live process left alone, corpora the params no longer name removed. A corpus itself
comes from :mod:`s2s.data.mirror` or :mod:`s2s.data.network`; the stage is
:mod:`s2s.stages.download`.
"""

from __future__ import annotations

import json
import logging
import urllib.parse
from pathlib import Path

from s2s.artifacts import RULES, ArtifactError, CorpusRecord
from s2s.config import CorpusRef, DataConfig, data_roles
from s2s.data.files import DownloadError, file_stats
from s2s.io import TMP_PREFIX, remove, remove_dead_temporaries, remove_leftovers
from s2s.data.http import network_available, unreachable_hosts
from s2s.data.mirror import MIRROR_ENV, corpus_source
from s2s.data.sources import CORPORA, raw_names
from s2s.io import atomic_write_text
from s2s.schema import decode, show

log = logging.getLogger("s2s.download")

MANIFEST = "manifest.json"


def requested_corpora(data: DataConfig) -> dict[str, int | None]:
    """Corpus id -> pairs asked for (None: all), for every corpus `data` names, in order.

    A corpus named twice keeps the larger request. An unknown id is a DownloadError that lists
    every unknown id and the known ones.
    """
    refs: list[CorpusRef] = [ref for _, ref in data_roles(data)]
    unknown = [r.corpus for r in refs if r.corpus not in CORPORA]
    if unknown:
        raise DownloadError(f"unknown corpus id(s): {', '.join(dict.fromkeys(unknown))} "
                            f"(known: {', '.join(CORPORA)})")
    wanted: dict[str, int | None] = {}
    for ref in refs:
        if ref.corpus in wanted:
            old = wanted[ref.corpus]
            wanted[ref.corpus] = (None if old is None or ref.max_lines is None
                                  else max(old, ref.max_lines))
        else:
            wanted[ref.corpus] = ref.max_lines
    return wanted


def pairs_shortfall(data: DataConfig, cid: str, pairs: int) -> str | None:
    """Why the `pairs` pairs a corpus holds (as built or kept) cannot serve what `data` asks of
    it: each params key whose ``max_lines`` is larger, in one line naming the corpus; None if
    none is. The registry does not know the size of every corpus (Tatoeba's, LIUM's selection),
    and a kept corpus is not checked against it again: this compares the pairs actually held.
    """
    asked = [(key, ref.max_lines) for key, ref in data_roles(data)
             if ref.corpus == cid and ref.max_lines is not None and ref.max_lines > pairs]
    if not asked:
        return None
    return (f"{cid}: the corpus has {pairs:,} pairs; "
            + ", ".join(f"params {key}.max_lines asks for {n:,}" for key, n in asked)
            + f" (set max_lines <= {pairs:,}, or leave it out for all)")


def check_network(wanted: dict[str, int | None]) -> None:
    """Refuse, before anything is fetched, corpora of `wanted` that have no download or fewer
    pairs than asked, a machine that reaches none of their hosts (naming both options: a mirror
    or the network), and then, on a machine some host answers, a host that does not answer
    where the registry knows an alternative to it (in one line naming the host, its corpora
    and the alternative)."""
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
    # No host answering at all is a machine without network, whatever hosts are known to be
    # gone: it is told both options (a mirror, or the network), not an alternative host that it
    # cannot reach either. Only where some host answers is each fragile host probed.
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
    fragile = [(r.url, cid) for cid in wanted if CORPORA[cid].alternative
               for r in CORPORA[cid].network.remotes]
    for host in unreachable_hosts(url for url, _ in fragile):
        cids = list(dict.fromkeys(cid for url, cid in fragile
                                  if urllib.parse.urlsplit(url).hostname == host))
        raise DownloadError(f"{host} does not answer (needed by {', '.join(cids)}); nothing was "
                            f"fetched. {CORPORA[cids[0]].alternative}")


def reusable(out_dir: Path, wanted: dict[str, int | None], mirror: Path | None
             ) -> dict[str, dict]:
    """The previous run's manifest records of the corpora of `wanted` that are still complete
    and come from the same source (their files are re-hashed), by corpus id. A manifest that
    cannot be read, or is not of the shape this stage writes (cut, edited, of another version),
    keeps nothing: as a corpus of its, it is fetched again (logged, naming the file and what is
    wrong)."""
    previous = _read_manifest(out_dir)
    return {cid: rec for cid in wanted
            if (rec := _reuse(out_dir, cid, previous.get(cid), mirror)) is not None}


def start_writing(out_dir: Path) -> None:
    """Make `out_dir` ready to be written: no manifest (present again only when all is
    complete), no ``.tmp-*`` folder a killed run left (:func:`remove_leftovers`), and no
    temporary of the manifest one left (:func:`remove_dead_temporaries`)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / MANIFEST).unlink(missing_ok=True)
    remove_leftovers(out_dir)
    remove_dead_temporaries(out_dir / MANIFEST)


def write_manifest(out_dir: Path, manifest: dict) -> Path:
    """Write ``out_dir/manifest.json`` (atomically, sorted keys); return its path."""
    path = out_dir / MANIFEST
    atomic_write_text(path, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return path


def _read_manifest(out_dir: Path) -> dict[str, dict]:
    """The corpora of the previous run's manifest, by id: only records of the shape
    :func:`write_manifest` writes (the report's :class:`s2s.artifacts.CorpusRecord`, checked by
    :func:`s2s.schema.decode`); {} where there is no manifest, or one that cannot be read (each
    case logged: those corpora are fetched again)."""
    path = out_dir / MANIFEST
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        log.warning("%s: not readable (%s): every corpus is fetched again", path, e)
        return {}
    if not isinstance(raw, dict) or not isinstance(raw.get("corpora"), dict):
        what = (f"the file is {show(raw)}" if not isinstance(raw, dict) else
                f"'corpora' is {show(raw.get('corpora'))}")
        log.warning("%s: %s, not an object of corpus records: every corpus is fetched again",
                    path, what)
        return {}
    records = {}
    for cid, record in raw["corpora"].items():
        try:
            held = decode(CorpusRecord, record, str(path), f"corpora.{cid}", RULES)
            for side in ("en", "fr"):  # a record's files are both sides' (the reuse reads both)
                if side not in held.files:
                    raise ArtifactError(f"{path}: missing key 'corpora.{cid}.files.{side}'")
        except ArtifactError as e:
            log.warning("%s: that corpus is fetched again", e)
        else:
            records[cid] = record
    return records


def _reuse(out_dir: Path, cid: str, old: dict | None, mirror: Path | None) -> dict | None:
    """The previous run's record of `cid` (of the shape _read_manifest checks) if its files are
    still exactly what it recorded and the source is the same (the same mirror folder, however
    spelled, with the registry's checksums; or the same network downloads). A mirror record's
    source paths are those of `mirror`, as this run spells it (the manifest's top-level
    ``mirror`` is too), not as the run that copied the files did."""
    if old is None or not (out_dir / cid).is_dir():
        return None
    mode = "mirror" if mirror is not None else "network"
    if old.get("mode") != mode:
        return None
    entry = CORPORA[cid]
    files = old["files"]
    if mode == "mirror":
        if entry.mirror is None or not _same_folder(old.get("source"),
                                                    corpus_source(entry, mirror)):
            return None
        expected = {"en": entry.mirror.en.sha256, "fr": entry.mirror.fr.sha256}
    else:
        if entry.network is None or old.get("source") != sorted(r.url for r in
                                                                  entry.network.remotes):
            return None
        expected = {side: f["sha256"] for side, f in files.items()}
    if set(raw_names(cid)) != {Path(files[s]["path"]).name for s in ("en", "fr")}:
        return None
    for side in ("en", "fr"):
        path = out_dir / files[side]["path"]
        if (not path.is_file() or file_stats(path)["sha256"] != expected[side]
                or files[side]["sha256"] != expected[side]):
            return None
    record = dict(old)
    record["files"] = {s: {**files[s]} for s in ("en", "fr")}
    if mode == "mirror":  # the folder as this run spells it, as the manifest's `mirror` does
        record["source"] = corpus_source(entry, mirror)
        for side, ref in (("en", entry.mirror.en), ("fr", entry.mirror.fr)):
            record["files"][side]["source"] = str(mirror / ref.path)
    return record


def _same_folder(recorded_source, source: str) -> bool:
    """Whether the mirror folder a manifest recorded is `source`, however either is spelled:
    ``S2S_MIRROR=../shared/data`` in one run and the absolute path in the next name one folder
    (a relative one is read from the project's root, where every stage runs), and its files
    are re-hashed against the registry anyway; a copy of every corpus again would buy nothing.
    """
    if not isinstance(recorded_source, str):
        return False
    return recorded_source == source or Path(recorded_source).resolve() == Path(source).resolve()


def remove_stale(out_dir: Path, wanted: set[str]) -> None:
    """Remove corpus directories the parameters no longer name, so the out is exactly them."""
    for child in out_dir.iterdir():
        if child.name == MANIFEST or child.name in wanted or child.name.startswith(TMP_PREFIX):
            continue  # temporaries: remove_leftovers, at the start
        if child.is_dir() and child.name in CORPORA:
            log.info("removing %s (not named by the parameters)", child)
            remove(child)
        else:
            log.warning("%s is not a corpus of this profile; left alone", child)
