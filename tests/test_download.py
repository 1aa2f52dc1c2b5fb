"""The download stage and the corpus registry, on the real mirror (``$S2S_MIRROR``).

Network behaviour is tested against a local HTTP server on 127.0.0.1 only; nothing here reaches
the internet (the network probe is replaced where the stage would call it).
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import socket
import stat
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

from conftest import RangeServer
from s2s.config import CorpusRef, DataConfig
from s2s.data import download, sources
from s2s.data.archives import UnsafeArchiveError, safe_extract
from s2s.data.files import DownloadError
from s2s.data.http import cache_path, fetch
from s2s.data.sources import CORPORA, NetworkSource, Remote, raw_pair
from s2s.stages import download as download_stage

MIRROR = Path(os.environ.get("S2S_MIRROR", "/work/shared/data"))
needs_mirror = pytest.mark.skipif(not (MIRROR / "README.md").is_file(),
                                  reason=f"no data mirror at {MIRROR} (set S2S_MIRROR)")

EXPECTED_IDS = {
    "multi30k.train", "multi30k.val", "multi30k.test_2016_flickr", "multi30k.test_2017_flickr",
    "multi30k.test_2017_mscoco", "multi30k.test_2018_flickr",
    "wmt14.europarl_v7", "wmt14.commoncrawl", "wmt14.un", "wmt14.news_commentary_v9",
    "wmt14.giga_fren", "wmt14.europarl_v7_sample20k_tok",
    "wmt.newstest2008", "wmt.newssyscomb2009", "wmt.newstest2009", "wmt.newstest2010",
    "wmt.newstest2011", "wmt.newstest2012", "wmt.newstest2013", "wmt14.newstest2014",
    "tatoeba.fra_eng", "lium.selected", "lium.ntst1213", "lium.ntst14", "lium.nbest_ntst14",
}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def readme_table(mirror: Path) -> dict[str, dict]:
    """The mirror README's file table: relative path -> lines, bytes, sha256."""
    rows = {}
    for line in (mirror / "README.md").read_text(encoding="utf-8").splitlines():
        m = re.match(r"\| `([^`]+)` \| (\d+) \| (\d+) \| `([0-9a-f]{64})` \|", line)
        if m:
            rows[m[1]] = {"lines": int(m[2]), "bytes": int(m[3]), "sha256": m[4]}
    return rows


def profile(*train: CorpusRef, dev=(), test=CorpusRef("wmt14.newstest2014"), nbest=None):
    return DataConfig(train=tuple(train), dev=tuple(dev), test=test, nbest=nbest)


SMALL = profile(CorpusRef("wmt14.giga_fren", 1000), dev=(CorpusRef("multi30k.val"),))


# ---------------------------------------------------------------------------------------------
# Registry


def test_registry_has_exactly_the_ids_the_params_use():
    assert set(CORPORA) == EXPECTED_IDS
    assert all(c.format in sources.FORMATS for c in CORPORA.values())
    assert CORPORA["wmt14.newstest2014"].format == "sgm"
    assert CORPORA["wmt14.europarl_v7_sample20k_tok"].format == "moses_escaped"
    # A corpus with neither source says why.
    for c in CORPORA.values():
        if c.network is None:
            assert c.network_note


@needs_mirror
def test_registry_mirror_files_match_the_mirror_readme():
    table = readme_table(MIRROR)
    assert len(table) >= 40
    checked = 0
    for c in CORPORA.values():
        if c.mirror is None:
            continue
        for f in (c.mirror.en, c.mirror.fr):
            assert table[f.path] == {"lines": f.lines, "bytes": f.bytes, "sha256": f.sha256}, f.path
            checked += 1
    in_mirror = {c.id for c in CORPORA.values() if c.mirror is not None}
    assert checked == 2 * len(in_mirror)
    assert in_mirror == EXPECTED_IDS - {"wmt14.commoncrawl", "wmt14.un", "wmt14.news_commentary_v9",
                                        "lium.selected", "lium.ntst1213", "lium.ntst14",
                                        "lium.nbest_ntst14"}


def test_a_downloaded_sgml_files_sentences_are_counted_as_its_reader_finds_them(tmp_path):
    """The download's check counted every line holding "<seg" (a document's text may mention
    one); the reader takes the lines that start with a <seg> element."""
    from s2s.data.network import _count_pairs
    from s2s.data.text import read_corpus

    sgm = tmp_path / "t.sgm"
    sgm.write_text('<srcset setid="t">\n<doc docid="d">\n<seg id="1">One .</seg>\n'
                   '<p>a note on <seg id="2"> markup</p>\n<seg id="3">Two .</seg>\n</doc>\n',
                   encoding="utf-8")
    assert read_corpus(sgm, "sgm") == ["One .", "Two ."]
    assert _count_pairs(sgm, "sgm") == 2


def test_unknown_corpus_id_lists_the_known_ones(tmp_path):
    with pytest.raises(DownloadError, match=r"unknown corpus id\(s\): wmt14\.nope .*known: "
                                            r"multi30k\.train, "):
        download_stage.main(profile(CorpusRef("wmt14.nope")), out_dir=tmp_path, mirror=MIRROR)
    with pytest.raises(sources.SourceError, match="unknown corpus 'x'"):
        raw_pair(tmp_path, "x")


def test_raw_pair_names_the_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"wmt14\.giga_fren/en\.txt"):
        raw_pair(tmp_path, "wmt14.giga_fren")


# ---------------------------------------------------------------------------------------------
# Mirror mode


@needs_mirror
def test_mirror_copy_matches_the_readme(tmp_path):
    out = tmp_path / "raw"
    manifest = download_stage.main(SMALL, out_dir=out, mirror=MIRROR)
    assert json.loads((out / "manifest.json").read_text()) == manifest
    assert manifest["mode"] == "mirror"
    assert set(manifest["corpora"]) == {"wmt14.giga_fren", "multi30k.val", "wmt14.newstest2014"}
    table = readme_table(MIRROR)
    expected = {
        "wmt14.giga_fren": ("wmt14-train-gigafren-head30k/giga-fren.release2.fixed.head30000.en",
                            "wmt14-train-gigafren-head30k/giga-fren.release2.fixed.head30000.fr"),
        "multi30k.val": ("multi30k-task1-enfr/val.en", "multi30k-task1-enfr/val.fr"),
        "wmt14.newstest2014": ("wmt14-newstest2014-fren/sgm/newstest2014-fren-src.en.sgm",
                               "wmt14-newstest2014-fren/sgm/newstest2014-fren-ref.fr.sgm"),
    }
    for cid, (en, fr) in expected.items():
        rec = manifest["corpora"][cid]
        for side, rel in (("en", en), ("fr", fr)):
            f = rec["files"][side]
            assert (f["sha256"], f["lines"], f["bytes"]) == (
                table[rel]["sha256"], table[rel]["lines"], table[rel]["bytes"]), (cid, side)
            assert sha256(out / f["path"]) == table[rel]["sha256"]
            assert f["source"] == str(MIRROR / rel)
        pair = raw_pair(out, cid)
        assert pair.en == out / rec["files"]["en"]["path"]
        assert pair.format == rec["format"] == CORPORA[cid].format
    giga = manifest["corpora"]["wmt14.giga_fren"]
    assert (giga["pairs"], giga["max_lines"], giga["whole_corpus"]) == (30000, 1000, False)
    assert manifest["corpora"]["wmt14.newstest2014"]["pairs"] == 3003  # <seg>s, not 3357 lines
    assert raw_pair(out, "wmt14.newstest2014").en.name == "en.sgm"
    assert sorted(p.name for p in out.iterdir()) == [
        "manifest.json", "multi30k.val", "wmt14.giga_fren", "wmt14.newstest2014"]


@needs_mirror
def test_rerun_keeps_complete_corpora_rebuilds_damaged_ones_and_drops_stale(tmp_path):
    out = tmp_path / "raw"
    download_stage.main(SMALL, out_dir=out, mirror=MIRROR)
    # Damage one file, leave a half-built corpus dir behind, as an interrupted run would.
    (out / "multi30k.val" / "fr.txt").write_bytes(b"truncated\n")
    (out / ".tmp-wmt14.newstest2014-abc").mkdir()
    (out / ".tmp-wmt14.newstest2014-abc" / "en.sgm").write_bytes(b"<srcset")
    smaller = profile(dev=(CorpusRef("multi30k.val"),))  # giga no longer named
    manifest = download_stage.main(smaller, out_dir=out, mirror=MIRROR)
    assert set(manifest["corpora"]) == {"multi30k.val", "wmt14.newstest2014"}
    assert sorted(p.name for p in out.iterdir()) == [
        "manifest.json", "multi30k.val", "wmt14.newstest2014"]
    assert sha256(out / "multi30k.val" / "fr.txt") == CORPORA["multi30k.val"].mirror.fr.sha256


@needs_mirror
def test_a_kept_corpus_records_the_mirror_as_this_run_spells_it(tmp_path):
    # The same folder through a link: the corpora are kept, and their records name the link,
    # as the manifest's `mirror` does (they kept the previous run's spelling).
    out = tmp_path / "raw"
    data = profile(dev=(CorpusRef("multi30k.val"),))
    download_stage.main(data, out_dir=out, mirror=MIRROR)
    inodes = {p: p.stat().st_ino for p in out.glob("*/*")}
    link = tmp_path / "mirror-link"
    link.symlink_to(Path(MIRROR).resolve(), target_is_directory=True)  # CI's is relative
    manifest = download_stage.main(data, out_dir=out, mirror=link)
    assert {p: p.stat().st_ino for p in out.glob("*/*")} == inodes  # kept, not copied again
    assert manifest == json.loads((out / "manifest.json").read_text())
    assert manifest["mirror"] == str(link)
    for cid, record in manifest["corpora"].items():
        entry = CORPORA[cid]
        assert record["source"] == str(link / Path(entry.mirror.en.path).parent)
        assert record["files"]["en"]["source"] == str(link / entry.mirror.en.path)
        assert record["files"]["fr"]["source"] == str(link / entry.mirror.fr.path)
        assert record["files"]["en"]["sha256"] == entry.mirror.en.sha256


@pytest.fixture
def umask():
    """Set the process's umask for one test (returns the setter); the old one is restored."""
    old = os.umask(0o022)
    os.umask(old)
    yield os.umask
    os.umask(old)


@needs_mirror
@pytest.mark.parametrize("mask, folder_mode, file_mode", [(0o022, 0o755, 0o644),
                                                          (0o027, 0o750, 0o640)],
                         ids=["umask022", "umask027"])
def test_outputs_get_the_modes_of_the_process_umask(tmp_path, umask, mask, folder_mode,
                                                    file_mode):
    # Corpus folders are built in a temporary folder and files in temporary files (mkdtemp and
    # mkstemp would make them 0700 and 0600): renamed into place, they have the modes a plain
    # mkdir and open give under the umask, and importing s2s changes no umask.
    umask(mask)
    out = tmp_path / "raw"
    download_stage.main(profile(dev=(CorpusRef("multi30k.val"),)), out_dir=out, mirror=MIRROR)
    assert os.umask(mask) == mask
    folders = [p for p in out.iterdir() if p.is_dir()]
    assert sorted(p.name for p in folders) == ["multi30k.val", "wmt14.newstest2014"]
    for folder in folders:
        assert stat.S_IMODE(folder.stat().st_mode) == folder_mode, folder
        for f in folder.iterdir():
            assert stat.S_IMODE(f.stat().st_mode) == file_mode, f
    assert stat.S_IMODE((out / "manifest.json").stat().st_mode) == file_mode
    assert stat.S_IMODE(out.stat().st_mode) == folder_mode


def fake_mirror(tmp_path: Path, *rel_paths: str) -> Path:
    root = tmp_path / "mirror"
    for rel in rel_paths:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(MIRROR / rel, root / rel)
    return root


@needs_mirror
def test_mirror_file_with_wrong_checksum_is_named(tmp_path):
    root = fake_mirror(tmp_path, "multi30k-task1-enfr/val.en", "multi30k-task1-enfr/val.fr",
                       "wmt14-newstest2014-fren/sgm/newstest2014-fren-src.en.sgm",
                       "wmt14-newstest2014-fren/sgm/newstest2014-fren-ref.fr.sgm")
    bad = root / "multi30k-task1-enfr/val.fr"
    data = bytearray(bad.read_bytes())
    data[10] = ord("X") if data[10] != ord("X") else ord("Y")  # same size, same line count
    bad.write_bytes(bytes(data))
    out = tmp_path / "raw"
    expected = CORPORA["multi30k.val"].mirror.fr.sha256
    with pytest.raises(DownloadError) as err:
        download_stage.main(profile(dev=(CorpusRef("multi30k.val"),)), out_dir=out, mirror=root)
    msg = str(err.value)
    assert str(bad) in msg
    assert f"expected {expected}, got {sha256(bad)}" in msg
    assert "bytes" not in msg.split("registry:")[1] and "lines" not in msg.split("registry:")[1]
    # Nothing half-done passes for complete: no manifest, no multi30k.val dir, no temp dir.
    assert not (out / "manifest.json").exists()
    assert not (out / "multi30k.val").exists()
    assert not list(out.glob(".tmp-*"))


@needs_mirror
def test_shortfalls_and_absent_corpora_are_all_named_before_copying(tmp_path):
    out = tmp_path / "raw"
    data = profile(CorpusRef("wmt14.giga_fren"), CorpusRef("wmt14.europarl_v7", 5000),
                   CorpusRef("wmt14.un"), CorpusRef("multi30k.train"),
                   dev=(CorpusRef("lium.ntst1213"),))
    with pytest.raises(DownloadError) as err:
        download_stage.main(data, out_dir=out, mirror=MIRROR)
    msg = str(err.value)
    assert "nothing was copied" in msg
    assert ("wmt14.giga_fren: the mirror holds the first 30,000 pairs; the profile asks for all "
            "22,520,376") in msg
    assert "wmt14.europarl_v7: the mirror holds the first 3,000 pairs; the profile asks for 5,000" \
        in msg
    assert "wmt14.un: not in the mirror" in msg
    assert "lium.ntst1213: not in the mirror" in msg
    assert "multi30k.train" not in msg  # it is there
    # LIUM's only host may be gone: the living alternative is named once, as over the network
    assert msg.endswith(f"\n{CORPORA['lium.ntst1213'].alternative}")
    assert msg.count("paper_statmt") == 1
    assert not out.exists() or not any(out.iterdir())


@needs_mirror
def test_mirror_only_corpus_without_mirror_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(download, "network_available", lambda urls, timeout=3.0: True)
    with pytest.raises(DownloadError, match=r"wmt14\.europarl_v7_sample20k_tok: no network "
                                            r"source.*S2S_MIRROR"):
        download_stage.main(profile(CorpusRef("wmt14.europarl_v7_sample20k_tok")), out_dir=tmp_path,
                      mirror=None)
    with pytest.raises(DownloadError, match=r"lium\.nbest_ntst14: no download is known"):
        download_stage.main(profile(CorpusRef("multi30k.val"), nbest=CorpusRef("lium.nbest_ntst14")),
                      out_dir=tmp_path, mirror=None)


def test_no_network_and_no_mirror_names_both_options(tmp_path, monkeypatch):
    asked = []
    monkeypatch.setattr(download, "network_available",
                        lambda urls, timeout=3.0: asked.append(list(urls)) or False)
    with pytest.raises(DownloadError) as err:
        download_stage.main(SMALL, out_dir=tmp_path / "raw", mirror=None)
    msg = str(err.value)
    assert "no mirror and no network" in msg
    assert "S2S_MIRROR=<dir>" in msg and "README.md" in msg
    assert "network access to raw.githubusercontent.com, www.statmt.org" in msg
    assert len(asked) == 1 and len(asked[0]) == 4  # giga tar, test-full.tgz, val.{en,fr}.gz
    assert {u.split("/")[2] for u in asked[0]} == {"raw.githubusercontent.com", "www.statmt.org"}
    assert not (tmp_path / "raw").exists()


def test_no_network_names_both_options_even_where_a_host_is_known_to_be_gone(tmp_path,
                                                                           monkeypatch):
    # The paper's LIUM host has a known alternative (paper_statmt), which needs the network
    # too: an air-gapped machine is told both options, not that LIUM's host is gone.
    probed = []
    monkeypatch.setattr(download, "network_available", lambda urls, timeout=3.0: False)
    monkeypatch.setattr(download, "unreachable_hosts", lambda urls, timeout=3.0: probed.append(
        urls) or sorted({u.split("/")[2] for u in urls}))
    data = profile(CorpusRef("lium.selected"), dev=(CorpusRef("lium.ntst1213"),))
    with pytest.raises(DownloadError) as err:
        download_stage.main(data, out_dir=tmp_path / "raw", mirror=None)
    msg = str(err.value)
    assert msg.startswith("no mirror and no network: the download stage needs one of them")
    assert "S2S_MIRROR=<dir>" in msg and "does not answer" not in msg
    lium_host = CORPORA["lium.selected"].network.remotes[0].url.split("/")[2]
    assert f"network access to {lium_host}, www.statmt.org" in msg
    assert probed == []  # no host answers: no host is probed on its own
    assert not (tmp_path / "raw").exists()
    # Where some host answers, the gone host is named with its alternative.
    monkeypatch.setattr(download, "network_available", lambda urls, timeout=3.0: True)
    with pytest.raises(DownloadError, match=rf"^{re.escape(lium_host)} does not answer \(needed "
                                            r"by lium\.selected, lium\.ntst1213\); nothing was "
                                            r"fetched\. .*paper_statmt"):
        download_stage.main(data, out_dir=tmp_path / "raw", mirror=None)
    assert not (tmp_path / "raw").exists()


def test_network_probe_answers_quickly_when_nothing_listens():
    # A loopback port with no listener: refused at once, no internet involved.
    with socket.socket() as s:  # a free loopback port, closed again: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    assert download.network_available([f"http://127.0.0.1:{port}/x"], timeout=1.0) is False
    assert time.monotonic() - t0 < 1.5


def test_network_probe_sees_a_listening_host(server):
    assert download.network_available([server.url("/")], timeout=1.0) is True


# ---------------------------------------------------------------------------------------------
# Safe extraction


def make_tar(path: Path, members: list[tarfile.TarInfo], data: bytes = b"evil\n") -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info in members:
            if info.isfile():
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                tar.addfile(info)
    return path


def tar_file(name: str) -> tarfile.TarInfo:
    return tarfile.TarInfo(name)


def tar_link(name: str, target: str, hard: bool = False) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.LNKTYPE if hard else tarfile.SYMTYPE
    info.linkname = target
    return info


def tar_special(name: str, kind: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind  # tarfile.CHRTYPE, BLKTYPE, FIFOTYPE
    return info


@pytest.mark.parametrize("members, why", [
    ([tar_file("ok.txt"), tar_file("../evil")], r"'\.\./evil' climbs out"),
    ([tar_file("dev/../../evil")], r"climbs out"),
    ([tar_file("/tmp/evil")], r"'/tmp/evil' has an absolute path"),
    ([tar_link("dev/link", "../../outside")], r"symlink 'dev/link' -> '\.\./\.\./outside' points "
                                              r"outside"),
    ([tar_link("link", "/etc/passwd")], r"symlink 'link' points to the absolute path"),
    ([tar_link("hard", "../outside", hard=True)], r"hard link 'hard' -> '\.\./outside' points "
                                                  r"outside"),
    ([tar_file("ok.txt"), tar_special("dev/null", tarfile.CHRTYPE)],
     r"'dev/null' is a device or fifo"),
    ([tar_special("pipe", tarfile.FIFOTYPE)], r"'pipe' is a device or fifo"),
])
def test_safe_extract_refuses_members_escaping_the_target(tmp_path, members, why):
    archive = make_tar(tmp_path / "bad.tgz", members)
    dest = tmp_path / "x" / "dest"
    with pytest.raises(UnsafeArchiveError, match=why):
        safe_extract(archive, dest)
    assert not (tmp_path / "x" / "evil").exists() and not (tmp_path / "evil").exists()
    assert not (tmp_path / "x" / "outside").exists()


def test_safe_extract_refuses_a_requested_link_and_extracts_plain_members(tmp_path):
    archive = make_tar(tmp_path / "ok.tgz", [tar_file("dev/a.en"), tar_link("dev/b.en", "a.en")],
                       data=b"hello\n")
    with pytest.raises(UnsafeArchiveError, match="is a link, not a file"):
        safe_extract(archive, tmp_path / "d1", ["dev/b.en"])
    got = safe_extract(archive, tmp_path / "d2", ["dev/a.en"])
    assert got == {"dev/a.en": (tmp_path / "d2" / "dev" / "a.en").resolve()}
    assert got["dev/a.en"].read_bytes() == b"hello\n"
    assert not (tmp_path / "d2" / "dev" / "b.en").exists()  # links are never created
    with pytest.raises(DownloadError, match="no member"):
        safe_extract(archive, tmp_path / "d3", ["dev/missing.en"])


def test_safe_extract_refuses_zip_escape(tmp_path):
    path = tmp_path / "bad.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("fra.txt", "Go.\tVa !\n")
        zf.writestr("../evil", "evil\n")
    with pytest.raises(UnsafeArchiveError, match=r"'\.\./evil' climbs out"):
        safe_extract(path, tmp_path / "dest", ["fra.txt"])
    assert not (tmp_path / "dest" / "fra.txt").exists()  # a zip is checked before any write


# ---------------------------------------------------------------------------------------------
# Downloads: resume against a loopback server


@pytest.fixture
def server():
    with RangeServer() as s:
        yield s


BLOB = bytes(range(256)) * 4096 + b"tail\n"  # 1 MiB + 5 bytes, spans more than one read chunk


def blob_remote(server: RangeServer, **kw) -> Remote:
    server.files["/blob.bin"] = BLOB
    return Remote(server.url("/blob.bin"), sha256=hashlib.sha256(BLOB).hexdigest(), **kw)


def test_fetch_resumes_an_existing_part_with_a_range_request(tmp_path, server):
    remote = blob_remote(server)
    dest = cache_path(remote, tmp_path)
    part = dest.with_name(dest.name + ".part")
    part.parent.mkdir(parents=True, exist_ok=True)
    part.write_bytes(BLOB[:300_000])
    path, info = fetch(remote, tmp_path, retries=0, backoff=0)
    assert server.requests == [("/blob.bin", "bytes=300000-")]
    assert path == dest and path.read_bytes() == BLOB and not part.exists()
    assert info == {"url": remote.url, "sha256": remote.sha256, "bytes": len(BLOB),
                    "verified": "sha256"}
    # Second call: served from the cache, verified, no request.
    fetch(remote, tmp_path, retries=0, backoff=0)
    assert len(server.requests) == 1


def test_fetch_interrupted_keeps_the_part_and_the_next_run_resumes_it(tmp_path, server):
    remote = blob_remote(server)
    server.drop_after = 200_000
    with pytest.raises(DownloadError, match="will be resumed"):
        fetch(remote, tmp_path, retries=0, backoff=0)
    dest = cache_path(remote, tmp_path)
    part = dest.with_name(dest.name + ".part")
    assert not dest.exists()
    assert part.read_bytes() == BLOB[:200_000]
    server.drop_after = None
    path, _ = fetch(remote, tmp_path, retries=0, backoff=0)
    assert server.requests == [("/blob.bin", None), ("/blob.bin", "bytes=200000-")]
    assert path.read_bytes() == BLOB


def test_fetch_retries_an_interrupted_download_within_one_call(tmp_path, server):
    remote = blob_remote(server)
    server.drop_after = 400_000  # every response is cut: three requests are needed
    path, _ = fetch(remote, tmp_path, retries=3, backoff=0)
    assert [r for _, r in server.requests] == [None, "bytes=400000-", "bytes=800000-"]
    assert path.read_bytes() == BLOB


def test_fetch_retries_a_cut_chunked_transfer_resuming_the_part(tmp_path, server):
    # No Content-Length: the cut is seen by http.client as an IncompleteRead inside a chunk.
    # The first MiB arrived whole (one read), so the retry asks for the rest.
    remote = blob_remote(server)
    server.chunked = True
    server.drop_after = len(BLOB) - 3
    path, info = fetch(remote, tmp_path, retries=1, backoff=0)
    assert server.requests == [("/blob.bin", None), ("/blob.bin", "bytes=1048576-")]
    assert path.read_bytes() == BLOB and info["verified"] == "sha256"
    # Cut on every attempt: a DownloadError (one line in the CLI), the part kept for resuming.
    server.files["/other.bin"] = BLOB
    other = Remote(server.url("/other.bin"))
    server.drop_after = 1000
    with pytest.raises(DownloadError, match=r"/other\.bin: download failed after 2 attempt\(s\): "
                                            r"IncompleteRead.*will be resumed"):
        fetch(other, tmp_path, retries=1, backoff=0)


def test_fetch_restarts_when_the_server_ignores_ranges(tmp_path, server):
    remote = blob_remote(server)
    server.ignore_range = True
    dest = cache_path(remote, tmp_path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.with_name(dest.name + ".part").write_bytes(BLOB[:1000])
    path, _ = fetch(remote, tmp_path, retries=0, backoff=0)
    assert path.read_bytes() == BLOB  # not BLOB[:1000] + BLOB


def test_fetch_finishes_a_part_that_was_already_whole(tmp_path, server):
    # Interrupted between the last byte and the rename: the server answers 416 to the range.
    remote = blob_remote(server)
    dest = cache_path(remote, tmp_path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.with_name(dest.name + ".part").write_bytes(BLOB)
    path, info = fetch(remote, tmp_path, retries=0, backoff=0)
    assert server.requests == [("/blob.bin", f"bytes={len(BLOB)}-")]
    assert path.read_bytes() == BLOB and info["verified"] == "sha256"


def test_fetch_does_not_trust_a_corrupt_part(tmp_path, server):
    remote = blob_remote(server)
    dest = cache_path(remote, tmp_path)
    part = dest.with_name(dest.name + ".part")
    part.parent.mkdir(parents=True, exist_ok=True)
    part.write_bytes(b"\0" * 500_000)  # right length prefix, wrong bytes
    with pytest.raises(DownloadError, match=rf"expected {remote.sha256}; got sha256 "):
        fetch(remote, tmp_path, retries=0, backoff=0)
    assert not part.exists() and not dest.exists()
    path, _ = fetch(remote, tmp_path, retries=0, backoff=0)  # a clean retry then succeeds
    assert path.read_bytes() == BLOB


def test_fetch_checks_md5_where_no_sha256_is_known(tmp_path, server):
    server.files["/x.tgz"] = BLOB
    good = Remote(server.url("/x.tgz"), md5=hashlib.md5(BLOB).hexdigest())
    assert fetch(good, tmp_path, retries=0, backoff=0)[1]["verified"] == "md5"
    bad = Remote(server.url("/x.tgz"), md5="0" * 32)
    with pytest.raises(DownloadError, match="does not match the registry"):
        fetch(bad, tmp_path / "other", retries=0, backoff=0)


def test_fetch_http_404_is_an_error_naming_the_url(tmp_path, server):
    remote = Remote(server.url("/missing.tgz"))
    with pytest.raises(DownloadError, match=r"/missing\.tgz: HTTP 404"):
        fetch(remote, tmp_path, retries=2, backoff=0)


# ---------------------------------------------------------------------------------------------
# Network mode end to end, with the official archive layouts rebuilt from mirror files


def tgz(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@needs_mirror
def test_network_mode_builds_the_same_files_as_the_mirror(tmp_path, server, monkeypatch):
    m = lambda rel: (MIRROR / rel).read_bytes()  # noqa: E731
    # dev.tgz layout (plain members), giga-fren tar layout (gzipped members, europarl-style
    # missing final newline), the anki zip (fra.txt, two tab-separated columns).
    dev = tgz({"dev/newstest2012.en": m("wmt-newstest2012-2013-fren/newstest2012.en"),
               "dev/newstest2012.fr": m("wmt-newstest2012-2013-fren/newstest2012.fr"),
               "dev/newstest2013.en": b"unused\n"})
    giga_en = m("wmt14-train-gigafren-head30k/giga-fren.release2.fixed.head30000.en")
    giga_fr = m("wmt14-train-gigafren-head30k/giga-fren.release2.fixed.head30000.fr")
    giga = tgz({"giga-fren.release2.fixed.en.gz": gzip.compress(giga_en + b"extra en"),
                "giga-fren.release2.fixed.fr.gz": gzip.compress(giga_fr + b"extra fr")})
    server.files.update({"/dev.tgz": dev, "/giga.tar": giga,
                         "/fra-eng.zip": m("tatoeba-anki-fra-eng-2017-09-29/fra-eng.zip")})

    def local(cid: str, path: str, *, pairs=..., md5=True) -> None:
        entry = CORPORA[cid]
        body = server.files[path]
        remote = Remote(server.url(path), md5=hashlib.md5(body).hexdigest() if md5 else None)
        swap = lambda parts: tuple(dataclasses.replace(p, remote=remote) for p in parts)  # noqa
        network = NetworkSource(en=swap(entry.network.en), fr=swap(entry.network.fr))
        changes = {"network": network} if pairs is ... else {"network": network, "pairs": pairs}
        monkeypatch.setitem(CORPORA, cid, dataclasses.replace(entry, **changes))

    local("wmt.newstest2012", "/dev.tgz")
    local("wmt14.giga_fren", "/giga.tar", pairs=30001)  # the head and one line without newline
    local("tatoeba.fra_eng", "/fra-eng.zip", md5=False)
    monkeypatch.setattr(download, "network_available", lambda urls, timeout=3.0: True)

    out = tmp_path / "raw"
    data = profile(CorpusRef("wmt14.giga_fren"), CorpusRef("tatoeba.fra_eng"),
                   test=CorpusRef("wmt.newstest2012"))
    manifest = download_stage.main(data, out_dir=out, mirror=None, cache_dir=tmp_path / "cache")
    assert manifest["mode"] == "network"
    table = readme_table(MIRROR)

    news = manifest["corpora"]["wmt.newstest2012"]
    assert news["downloads"][server.url("/dev.tgz")]["verified"] == "md5"
    assert news["files"]["en"]["source"] == server.url("/dev.tgz") + "#dev/newstest2012.en"
    assert news["files"]["fr"]["sha256"] == table["wmt-newstest2012-2013-fren/newstest2012.fr"][
        "sha256"]
    tat = manifest["corpora"]["tatoeba.fra_eng"]
    assert tat["downloads"][server.url("/fra-eng.zip")]["verified"] == "none"
    for side in ("en", "fr"):  # the mirror's .en/.fr are the zip's two columns
        rel = f"tatoeba-anki-fra-eng-2017-09-29/fra-eng.{side}"
        assert tat["files"][side]["sha256"] == table[rel]["sha256"]
        assert tat["files"][side]["lines"] == 142787
    giga_rec = manifest["corpora"]["wmt14.giga_fren"]
    assert giga_rec["pairs"] == 30001
    assert (out / "wmt14.giga_fren" / "en.txt").read_bytes() == giga_en + b"extra en\n"
    assert not list(out.rglob(".extract")) and not list(out.glob(".tmp-*"))

    # Files that differ from the mirror's known sha256 are refused, naming the mirror file.
    bad = tgz({"dev/newstest2012.en": b"changed upstream\n" * 3003,
               "dev/newstest2012.fr": m("wmt-newstest2012-2013-fren/newstest2012.fr")})
    server.files["/dev.tgz"] = bad
    local("wmt.newstest2012", "/dev.tgz")
    with pytest.raises(DownloadError, match=r"wmt\.newstest2012: downloaded en file sha256 "
                                            r"\w+ != f9e51f85.*newstest2012\.en"):
        download_stage.main(profile(test=CorpusRef("wmt.newstest2012")), out_dir=tmp_path / "raw2",
                      mirror=None, cache_dir=tmp_path / "cache2")


def serve_locally(monkeypatch, server: RangeServer, cid: str, path: str, body: bytes) -> None:
    """Have the registry download `cid` from `server` (`body` at `path`), no checksum."""
    server.files[path] = body
    entry = CORPORA[cid]
    remote = Remote(server.url(path))
    swap = lambda parts: tuple(dataclasses.replace(p, remote=remote) for p in parts)  # noqa
    monkeypatch.setitem(CORPORA, cid, dataclasses.replace(entry, network=NetworkSource(
        en=swap(entry.network.en), fr=swap(entry.network.fr))))


@needs_mirror
def test_max_lines_beyond_a_corpus_of_unknown_size_is_refused_once_built(tmp_path, server,
                                                                         monkeypatch):
    # The registry does not know Tatoeba's size, so only the built corpus can say it holds
    # fewer pairs than max_lines asks: the manifest recorded max_lines 200,000 over 142,787
    # pairs, and prepare silently used fewer.
    assert CORPORA["tatoeba.fra_eng"].pairs is None
    serve_locally(monkeypatch, server, "tatoeba.fra_eng", "/fra-eng.zip",
                  (MIRROR / "tatoeba-anki-fra-eng-2017-09-29/fra-eng.zip").read_bytes())
    monkeypatch.setattr(download, "network_available", lambda urls, timeout=3.0: True)
    out, cache = tmp_path / "raw", tmp_path / "cache"
    with pytest.raises(DownloadError) as err:
        download_stage.main(profile(CorpusRef("tatoeba.fra_eng", 200_000),
                                    test=CorpusRef("tatoeba.fra_eng", 100)),
                            out_dir=out, mirror=None, cache_dir=cache)
    assert str(err.value) == (
        "tatoeba.fra_eng: the corpus has 142,787 pairs; params data.train[0].max_lines asks for "
        "200,000 (set max_lines <= 142,787, or leave it out for all); it was not kept, and no "
        "manifest was written")
    assert not (out / "manifest.json").exists() and not (out / "tatoeba.fra_eng").exists()
    assert not list(out.glob(".tmp-*"))
    # As many as it holds is served.
    manifest = download_stage.main(profile(CorpusRef("tatoeba.fra_eng", 142_787),
                                           test=CorpusRef("tatoeba.fra_eng", 100)),
                                   out_dir=out, mirror=None, cache_dir=cache)
    assert manifest["corpora"]["tatoeba.fra_eng"]["max_lines"] == 142_787


@needs_mirror
def test_max_lines_beyond_a_kept_corpus_is_refused_before_anything_is_touched(tmp_path, server,
                                                                              monkeypatch):
    # A kept corpus was not checked again (only those to fetch were): a rerun asking more
    # pairs than it holds wrote a manifest with max_lines > pairs.
    m = lambda rel: (MIRROR / rel).read_bytes()  # noqa: E731
    serve_locally(monkeypatch, server, "wmt.newstest2012", "/dev.tgz", tgz(
        {f"dev/newstest2012.{side}": m(f"wmt-newstest2012-2013-fren/newstest2012.{side}")
         for side in ("en", "fr")}))
    serve_locally(monkeypatch, server, "tatoeba.fra_eng", "/fra-eng.zip",
                  m("tatoeba-anki-fra-eng-2017-09-29/fra-eng.zip"))
    monkeypatch.setattr(download, "network_available", lambda urls, timeout=3.0: True)
    out, cache = tmp_path / "raw", tmp_path / "cache"
    first = download_stage.main(profile(CorpusRef("tatoeba.fra_eng", 1000),
                                        test=CorpusRef("wmt.newstest2012")),
                                out_dir=out, mirror=None, cache_dir=cache)
    before = (out / "manifest.json").read_bytes()
    requests = len(server.requests)
    more = profile(CorpusRef("tatoeba.fra_eng", 150_000),
                   dev=(CorpusRef("tatoeba.fra_eng", 10),),
                   test=CorpusRef("wmt.newstest2012", 5000))
    with pytest.raises(DownloadError) as err:
        download_stage.main(more, out_dir=out, mirror=None, cache_dir=cache)
    assert str(err.value) == (
        "these corpora hold fewer pairs than the params ask; nothing was fetched:\n"
        "  - tatoeba.fra_eng: the corpus has 142,787 pairs; params data.train[0].max_lines asks "
        "for 150,000 (set max_lines <= 142,787, or leave it out for all)\n"
        "  - wmt.newstest2012: the corpus has 3,003 pairs; params data.test.max_lines asks for "
        "5,000 (set max_lines <= 3,003, or leave it out for all)")
    # The previous run's output is as it was: its manifest, its corpora, nothing fetched.
    assert (out / "manifest.json").read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == [
        "manifest.json", "tatoeba.fra_eng", "wmt.newstest2012"]
    assert len(server.requests) == requests
    assert set(first["corpora"]) == {"tatoeba.fra_eng", "wmt.newstest2012"}


@needs_mirror
def test_a_damaged_download_is_discarded_only_if_it_is_still_the_copy_that_was_read(tmp_path):
    """The cache is shared: between reading a cut copy and discarding it, another process may
    have discarded it and fetched a whole one, which must stay."""
    import os

    from s2s.data.http import discard

    remote = Remote("https://example.org/val.en.gz")
    dest = cache_path(remote, tmp_path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(b"cut")
    read = os.stat(dest)
    dest.unlink()
    dest.write_bytes(b"a whole copy, fetched since")  # another file, another size
    assert discard(remote, tmp_path, read) == (dest, False)
    assert dest.read_bytes() == b"a whole copy, fetched since"
    assert discard(remote, tmp_path, os.stat(dest)) == (dest, True) and not dest.exists()
    assert discard(remote, tmp_path, read) == (dest, False)  # already gone


def test_a_cut_gz_in_the_cache_is_named_deleted_and_fetched_again(tmp_path, server, monkeypatch):
    from s2s.data import network

    val = {side: (MIRROR / f"multi30k-task1-enfr/val.{side}").read_bytes() for side in ("en", "fr")}
    whole_en = gzip.compress(val["en"])
    server.files.update({"/val.en.gz": whole_en[: len(whole_en) // 2],  # a download cut short
                         "/val.fr.gz": gzip.compress(val["fr"])})
    entry = CORPORA["multi30k.val"]
    local = {side: Remote(server.url(f"/val.{side}.gz")) for side in ("en", "fr")}  # no checksum
    entry = dataclasses.replace(entry, network=NetworkSource(
        en=(dataclasses.replace(entry.network.en[0], remote=local["en"]),),
        fr=(dataclasses.replace(entry.network.fr[0], remote=local["fr"]),)))
    cache, out = tmp_path / "cache", tmp_path / "raw"
    cached = cache_path(local["en"], cache)
    with pytest.raises(DownloadError, match=re.escape(
            f"{local['en'].url}: the downloaded file {cached} is damaged (cut short?): "
            "EOFError: ")):
        network.build_corpus(entry, out, cache)
    # The cut file is gone (the whole fr one is kept), and no corpus folder is left half built.
    assert sorted(p.name for p in cache.iterdir()) == [cache_path(local["fr"], cache).name]
    assert not out.exists() or not list(out.iterdir())
    server.files["/val.en.gz"] = whole_en
    record = network.build_corpus(entry, out, cache)
    assert record["pairs"] == 1014
    assert (out / "multi30k.val" / "en.txt").read_bytes() == val["en"]
    assert [p for p, _ in server.requests] == ["/val.en.gz", "/val.fr.gz", "/val.en.gz"]


@needs_mirror
@pytest.mark.parametrize("kind", ["zip", "tgz"])
def test_a_cut_archive_in_the_cache_is_named_deleted_and_fetched_again(tmp_path, server,
                                                                       monkeypatch, kind):
    """Tatoeba's zip has no checksum, so a cut copy passes verification. A zip cut short has lost
    its directory (at the end) and reads as no archive at all; a tgz cut short ends inside a
    member. Either is named, deleted from the cache, and a rerun builds the corpus."""
    from s2s.data import network

    m = lambda rel: (MIRROR / rel).read_bytes()  # noqa: E731
    if kind == "zip":
        cid, whole = "tatoeba.fra_eng", m("tatoeba-anki-fra-eng-2017-09-29/fra-eng.zip")
        member, pairs = "fra.txt", 142787
        error = r"NotAnArchiveError: .*: neither a tar nor a zip archive"
    else:
        cid = "wmt.newstest2012"
        folder = "wmt-newstest2012-2013-fren"
        whole = tgz({f"dev/newstest2012.{side}": m(f"{folder}/newstest2012.{side}")
                     for side in ("en", "fr")})
        member, pairs = "dev/newstest2012.en, dev/newstest2012.fr", 3003
        error = r"(EOFError|ReadError): "
    server.files["/archive"] = whole[: len(whole) // 2]
    remote = Remote(server.url("/archive"))  # no checksum
    entry = CORPORA[cid]
    swap = lambda parts: tuple(dataclasses.replace(p, remote=remote) for p in parts)  # noqa
    entry = dataclasses.replace(entry, network=NetworkSource(en=swap(entry.network.en),
                                                              fr=swap(entry.network.fr)))
    cache, out = tmp_path / "cache", tmp_path / "raw"
    cached = cache_path(remote, cache)
    with pytest.raises(DownloadError, match=re.escape(
            f"{remote.url}, member {member}: the downloaded file {cached} is damaged (cut "
            "short?): ") + error + r".*; deleted it, run the download again$"):
        network.build_corpus(entry, out, cache)
    assert not cached.exists()
    assert not out.exists() or not list(out.iterdir())
    server.files["/archive"] = whole
    assert network.build_corpus(entry, out, cache)["pairs"] == pairs
    assert [p for p, _ in server.requests] == ["/archive", "/archive"]


def test_a_line_short_of_the_column_a_part_keeps_is_named_by_its_number(tmp_path):
    from s2s.data.files import DownloadError
    from s2s.data.network import _append_part
    from s2s.data.sources import Part, Remote

    src = tmp_path / "fra.txt"
    src.write_bytes(b"Go.\tVa !\tCC-BY\nHi.\tSalut !\tCC-BY\nRun!\n")  # line 3: one column
    part = Part(Remote("https://example.org/fra-eng.zip"), "fra.txt", column=1)
    with pytest.raises(DownloadError, match=re.escape(
            "https://example.org/fra-eng.zip#fra.txt (column 1): line 3 has 1 tab-separated "
            "columns, expected > 1")):
        _append_part(src, io.BytesIO(), part)
    src.write_bytes(b"Go.\tVa !\tCC-BY\nHi.\tSalut !\tCC-BY\n")
    out = io.BytesIO()
    _append_part(src, out, part)
    assert out.getvalue() == b"Va !\nSalut !\n"


def test_an_answer_http_cannot_read_is_one_download_error(tmp_path):
    """A header line longer than http.client reads (64 KiB) raised its LineTooLong, which is
    neither an OSError nor a ValueError: the command printed a traceback."""
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def answer():
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nX-Long: " + b"a" * 70_000 + b"\r\n\r\n")

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    remote = Remote(f"http://127.0.0.1:{listener.getsockname()[1]}/x.bin", sha256="0" * 64)
    try:
        with pytest.raises(DownloadError, match=r"x\.bin: the server's answer cannot be read "
                                                r"\(LineTooLong: [^;]*\)$"):  # no .part written
            fetch(remote, tmp_path, retries=0, backoff=0)
    finally:
        thread.join(10)
        listener.close()


@needs_mirror
def test_an_archive_without_its_member_is_fetched_again_unless_its_checksum_is_known(
        tmp_path, server):
    """A zip without a checksum (Tatoeba's) that lacks the member is a wrong file: deleted, so a
    rerun fetches it again (before, it stayed and every rerun failed on it). One whose checksum
    is known and matched is the publisher's: it is kept, and so is a damaged one, said to be the
    publisher's damage (before, deleted and fetched again by every rerun, to fail the same)."""
    from s2s.data import network

    whole = (MIRROR / "tatoeba-anki-fra-eng-2017-09-29/fra-eng.zip").read_bytes()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("other.txt", "not the corpus\n")
    wrong = buf.getvalue()
    entry = CORPORA["tatoeba.fra_eng"]

    def build(remote):
        swap = lambda parts: tuple(dataclasses.replace(p, remote=remote) for p in parts)  # noqa
        return network.build_corpus(dataclasses.replace(entry, network=NetworkSource(
            en=swap(entry.network.en), fr=swap(entry.network.fr))), tmp_path / "raw",
            tmp_path / "cache")

    server.files["/fra-eng.zip"] = wrong
    remote = Remote(server.url("/fra-eng.zip"))  # no checksum
    cached = cache_path(remote, tmp_path / "cache")
    with pytest.raises(DownloadError, match=r"MissingMemberError: .*no member\(s\) fra\.txt; "
                                            r"deleted it, run the download again$"):
        build(remote)
    assert not cached.exists()
    server.files["/fra-eng.zip"] = whole
    assert build(remote)["pairs"] == 142787
    for body, error in ((wrong, r"no member\(s\) fra\.txt$"),
                        (whole[: len(whole) // 2], r"has the published checksum but cannot be "
                                                   r"read: NotAnArchiveError: .*; the published "
                                                   r"file itself is damaged, which no rerun "
                                                   r"mends \(kept\)$")):
        server.files["/checked.zip"] = body
        checked = Remote(server.url("/checked.zip"), sha256=hashlib.sha256(body).hexdigest())
        with pytest.raises(DownloadError, match=error):
            build(checked)
        assert cache_path(checked, tmp_path / "cache").read_bytes() == body
        cache_path(checked, tmp_path / "cache").unlink()
