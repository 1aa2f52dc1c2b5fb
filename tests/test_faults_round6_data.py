"""Faults, sixth round, of the data stages: an ``--out`` that is not the stage's own folder (a
folder of the user's, the current one, one holding the stage's inputs, a file), which the stage
used to delete whole; a download manifest of the wrong shape, which gave a traceback; an ids
record of the wrong shape, whose message pasted in Python's exception text; and the temporary
files a ``kill -9`` leaves beside a metrics file or the manifest, which outlived a rerun. Each
is a one-line refusal naming the path (nothing changed, nothing written), a warning naming the
key, or a rerun that cleans up after the dead; never a traceback or a silent deletion."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BIN, MIRROR, run
from helpers import one_line_error, profile_dict, write_params


def s2s(args, cwd: Path) -> subprocess.CompletedProcess:
    return run([str(BIN / "s2s"), *map(str, args)], cwd, check=False, timeout=300)


def tree(folder: Path) -> dict[str, bytes | None]:
    """Every entry under `folder`, a file's bytes (None for a folder): what must not change."""
    return {str(p.relative_to(folder)): None if p.is_dir() else p.read_bytes()
            for p in sorted(folder.rglob("*"))}


@pytest.fixture
def project(tmp_path, smoke_data) -> Path:
    """A folder with the smoke profile's params.yaml and a copy of its raw, prepared and vocab
    folders (the session's data stages)."""
    data, _ = smoke_data
    write_params(tmp_path / "params.yaml", profile_dict("smoke"))
    for name in ("raw", "prepared", "vocab"):
        shutil.copytree(data / name, tmp_path / name)
    return tmp_path


# --- an --out that is not the stage's own folder ------------------------------------------------


CASES = {
    # a folder of the user's: its files are not the stage's
    "prepare_user_folder": (["prepare", "--raw", "raw", "--out", "pz", "--metrics", "m.json"],
                            "--out pz: holds notes.txt, which the prepare stage does not write"),
    # a folder holding the stage's own input
    "vocab_holding_its_input": (["vocab", "--prepared", "dd/prepared", "--out", "dd",
                                 "--metrics", "m.json"],
                                "--out dd: holds dd/prepared, an input of the vocab stage"),
    # the stage's input itself
    "ids_into_its_vocab": (["ids", "--prepared", "prepared", "--vocab", "vocab", "--out",
                            "vocab"], "--out vocab: is vocab, an input of the ids stage"),
    # the current folder
    "vocab_here": (["vocab", "--prepared", "prepared", "--out", ".", "--metrics", "m.json"],
                   "--out .: the current folder; the vocab stage replaces its --out folder "
                   "whole: name a folder of its own"),
    # a file
    "ids_over_a_file": (["ids", "--prepared", "prepared", "--vocab", "vocab", "--out",
                         "odd.txt"], "--out odd.txt: a file, not a folder"),
}


@pytest.mark.parametrize("case", CASES)
def test_an_out_that_is_not_the_stages_own_folder_is_refused_and_nothing_changes(project, case):
    """The old stages deleted these (the current folder, their own input, the user's notes, a
    file replaced by a folder); now one line names the path, and nothing is read or written."""
    args, says = CASES[case]
    (project / "pz").mkdir()
    (project / "pz" / "notes.txt").write_text("mine\n")
    (project / "dd").mkdir()
    shutil.copytree(project / "prepared", project / "dd" / "prepared")
    (project / "dd" / "notes.txt").write_text("mine\n")
    (project / "odd.txt").write_text("mine\n")
    before = tree(project)
    proc = s2s(args, project)
    line = one_line_error(proc, "OutDirError: ", says, status=1)
    assert "name a folder of its own" in line
    if case == "prepare_user_folder":
        assert line.endswith("name a folder of its own, or remove it (run with -v for the "
                             "traceback)"), line
    assert tree(project) == before  # no metrics, no temporary folder, nothing removed


def test_a_folder_holding_the_current_one_is_refused(project):
    (project / "sub").mkdir()
    before = tree(project)
    proc = s2s(["--params", "../params.yaml", "vocab", "--prepared", "../prepared", "--out", "..",
                "--metrics", "../m.json"], project / "sub")
    one_line_error(proc, "--out ..: a folder holding the current one", status=1)
    assert tree(project) == before


def test_an_earlier_output_of_the_same_stage_is_still_replaced_whole(project):
    """The legitimate case: the folder holds only what the stage writes (its metrics file too,
    where --metrics puts it there), or nothing: it is replaced, no file of the old one left."""
    from s2s.io import OutDirError, out_names, whole_dir
    from s2s.stages import vocab as vocab_stage

    out = project / "vocab"
    (out / "en.tsv").write_text("old\n")
    (out / "fr.tsv").unlink()
    (out / "vocab.json").write_text("{}\n")
    proc = s2s(["vocab", "--prepared", "prepared", "--out", "vocab", "--metrics",
                "vocab/vocab.json"], project)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(p.name for p in out.iterdir()) == ["en.tsv", "fr.tsv", "vocab.json"]
    assert (out / "en.tsv").read_text().startswith("<pad>\t0\n")
    assert json.loads((out / "vocab.json").read_text())["en"]["size"] > 4
    empty = project / "empty"
    empty.mkdir()
    assert s2s(["vocab", "--prepared", "prepared", "--out", "empty", "--metrics", "m.json"],
               project).returncode == 0
    assert sorted(p.name for p in empty.iterdir()) == ["en.tsv", "fr.tsv"]
    # a file put into the folder while the stage ran is not deleted either: the folder is
    # checked again before it is replaced, and the stage's new one is removed instead
    with pytest.raises(OutDirError, match=r"holds late\.txt, which the vocab stage does not "
                                          r"write"):
        with whole_dir(out, owns=out_names(vocab_stage.WRITES, out, out / "vocab.json"),
                       what="the vocab stage") as tmp:
            (tmp / "en.tsv").write_text("new\n")
            (out / "late.txt").write_text("mine\n")
    assert (out / "late.txt").read_text() == "mine\n"
    assert (out / "en.tsv").read_text().startswith("<pad>\t0\n")
    assert not list(project.glob(".tmp-*"))


def test_what_snakemake_a_killed_write_or_a_metrics_subfolder_leave_is_no_foreign_file(project):
    """Refused at first, each a legitimate rerun: the `.snakemake_timestamp` Snakemake writes
    into a directory() output after each job (and with --touch), a killed write's temporary of a
    file the stage writes there, and --metrics in a subfolder of --out."""
    out = project / "vocab"
    (out / ".snakemake_timestamp").touch()
    (out / ".en.tsv.0123abcd.tmp").write_text("cut")  # an older version's name
    (out / ".vocab.json.h00000000p1s1-abcd.tmp").write_text("cut")
    proc = s2s(["vocab", "--prepared", "prepared", "--out", "vocab", "--metrics",
                "vocab/vocab.json"], project)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(p.name for p in out.iterdir()) == ["en.tsv", "fr.tsv", "vocab.json"]
    for _ in range(2):  # the second over the first's output, its metrics in a subfolder
        proc = s2s(["vocab", "--prepared", "prepared", "--out", "v2", "--metrics",
                    "v2/m/vocab.json"], project)
        assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(p.name for p in (project / "v2").iterdir()) == ["en.tsv", "fr.tsv", "m"]
    (out / ".not-ours.tmp").write_text("x")  # a temporary of no file the stage writes
    proc = s2s(["vocab", "--prepared", "prepared", "--out", "vocab", "--metrics", "m.json"],
               project)
    assert proc.returncode == 1 and "holds .not-ours.tmp, vocab.json, which the vocab" in (
        proc.stderr)


# --- a download manifest of the wrong shape ------------------------------------------------------


MANIFESTS = {
    "a_list": ("[]", "the file is list [], not an object of corpus records"),
    "null": ("null", "the file is NoneType None, not an object of corpus records"),
    "a_string": ('"x"', "the file is str 'x', not an object of corpus records"),
    "corpora_a_list": ('{"corpora": []}', "'corpora' is list [], not an object of corpus records"),
    "a_corpus_a_string": ('{"corpora": {"wmt14.giga_fren": "x"}}',
                          "'corpora.wmt14.giga_fren' must be a mapping, got str 'x': that corpus "
                          "is fetched again"),
}


@pytest.mark.parametrize("case", MANIFESTS)
def test_a_manifest_of_the_wrong_shape_is_fetched_again_with_a_warning_not_a_traceback(
        project, case):
    """The manifest is the stage's own bookkeeping: one it cannot read (cut) or of another shape
    keeps nothing, a warning names the file and the key, and the rerun writes a whole one."""
    text, says = MANIFESTS[case]
    good = json.loads((project / "raw" / "manifest.json").read_text())
    (project / "raw" / "manifest.json").write_text(text + "\n")
    proc = s2s(["download", "--out", "raw"], project)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    warned = [ln for ln in proc.stderr.splitlines() if "WARNING" in ln]
    assert len(warned) == 1 and f"raw/manifest.json: {says}" in warned[0], proc.stderr
    rewritten = json.loads((project / "raw" / "manifest.json").read_text())
    assert rewritten["corpora"].keys() == good["corpora"].keys()
    for cid, record in good["corpora"].items():
        assert rewritten["corpora"][cid]["files"] == record["files"]


DAMAGED_RECORDS = {
    "sha256_a_number": (lambda r: r["files"]["en"].update(sha256=7),
                        "'corpora.{cid}.files.en.sha256' must be a string, got int 7"),
    "file_a_string": (lambda r: r["files"].update(en="x"),
                      "'corpora.{cid}.files.en' must be a mapping, got str 'x'"),
    "path_null": (lambda r: r["files"]["en"].update(path=None),
                  "'corpora.{cid}.files.en.path' must be a string, got NoneType None"),
    "a_side_missing": (lambda r: r["files"].pop("fr"), "missing key 'corpora.{cid}.files.fr'"),
    "of_an_older_version": (lambda r: r.pop("whole_corpus"),
                            "missing key 'corpora.{cid}.whole_corpus'"),
    "mode_unknown": (lambda r: r.update(mode="ftp"),
                     "'corpora.{cid}.mode' must be one of ['mirror', 'network'], got str 'ftp'"),
}


@pytest.mark.parametrize("case", DAMAGED_RECORDS)
def test_a_manifest_record_not_of_the_written_shape_is_not_kept_and_the_key_is_named(
        project, caplog, case):
    from s2s.data.download import reusable, requested_corpora
    from s2s.config import load

    damage, says = DAMAGED_RECORDS[case]
    params = load(project / "params.yaml")
    wanted = requested_corpora(params.data)
    path = project / "raw" / "manifest.json"
    manifest = json.loads(path.read_text())
    cid = next(iter(manifest["corpora"]))
    assert reusable(project / "raw", wanted, MIRROR).keys() == wanted.keys()
    damage(manifest["corpora"][cid])
    path.write_text(json.dumps(manifest))
    caplog.clear()
    kept = reusable(project / "raw", wanted, MIRROR)
    assert cid not in kept and len(kept) == len(wanted) - 1
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
        f"{path}: {says.format(cid=cid)}: that corpus is fetched again"]


def test_the_same_mirror_spelled_relative_or_absolute_is_reused_another_is_not(
        project, monkeypatch, tmp_path_factory):
    """S2S_MIRROR=../shared/data in one run and the absolute path in the next are one folder:
    the corpora are kept, not copied again; a mirror elsewhere (a copy) is a new source."""
    import os
    from s2s.data.download import reusable, requested_corpora
    from s2s.config import load

    monkeypatch.chdir(project)
    wanted = requested_corpora(load(project / "params.yaml").data)
    path = project / "raw" / "manifest.json"
    manifest = json.loads(path.read_text())
    for record in manifest["corpora"].values():
        record["source"] = os.path.relpath(record["source"], project)
        assert record["source"].startswith("..")
    path.write_text(json.dumps(manifest))
    assert reusable(project / "raw", wanted, MIRROR).keys() == wanted.keys()
    assert reusable(project / "raw", wanted, Path(os.path.relpath(MIRROR))).keys() == \
        wanted.keys()
    elsewhere = tmp_path_factory.mktemp("mirror-copy")
    assert reusable(project / "raw", wanted, elsewhere) == {}


# --- an ids record of the wrong shape ------------------------------------------------------------


RECORDS = {
    "files_a_list": (lambda r: r.update(files=[]), "'files' must be a mapping, got list []"),
    "shape_a_string": (lambda r: r["files"]["train.en.npy"].update(shape="x"),
                       "'files.train.en.npy.shape' must be a list, got str 'x'"),
    "shape_of_two": (lambda r: r["files"]["train.en.npy"].update(shape=[3, 4]),
                     "'files.train.en.npy.shape' must be a list of 1, got list [3, 4]"),
    "shape_of_a_string": (lambda r: r["files"]["dev.fr.npy"].update(shape=["3"]),
                          "'files.dev.fr.npy.shape[0]' must be an integer, got str '3'"),
    "shape_negative": (lambda r: r["files"]["dev.fr.npy"].update(shape=[-3]),
                       "'files.dev.fr.npy.shape[0]' must be >= 0, got -3"),
    "no_sha256": (lambda r: r["files"]["test.fr.offsets.npy"].pop("sha256"),
                  "missing key 'files.test.fr.offsets.npy.sha256'"),
    "no_file": (lambda r: r["files"].pop("test.fr.offsets.npy"),
                "missing key 'files.test.fr.offsets.npy'"),
    "no_split": (lambda r: r["lines"].pop("dev"), "missing key 'lines.dev'"),
    "lines_negative": (lambda r: r["lines"].update(dev=-1), "'lines.dev' must be >= 0, got -1"),
    "vocab_null": (lambda r: r.update(vocab=None), "'vocab' must be a mapping, got NoneType None"),
    "unknown_key": (lambda r: r.update(extra=1),
                    "unknown key 'extra' (expected one of: format, vocab, lines, files)"),
}


@pytest.mark.parametrize("case", RECORDS)
def test_an_ids_record_of_the_wrong_shape_names_the_key_and_what_was_expected(
        tmp_path, smoke_data, case):
    from s2s.data.ids import IdsError, IdsRecord

    edit, says = RECORDS[case]
    ids = tmp_path / "ic"
    shutil.copytree(smoke_data[0] / "ids", ids)
    record = json.loads((ids / "ids.json").read_text())
    edit(record)
    (ids / "ids.json").write_text(json.dumps(record))
    with pytest.raises(IdsError) as e:
        IdsRecord.read(ids)
    assert str(e.value) == (f"{ids}/ids.json: {says}: run the ids stage again "
                            f"(`dvc repro ids`, or `s2s ids --out {ids}`)")


# --- temporaries a kill -9 left beside a metrics file or the manifest --------------------------


KILLED_MID_WRITE = """
import os, signal, sys
from s2s.io import atomic_open
with atomic_open(sys.argv[1]) as f:
    f.write("{")
    f.flush()
    os.kill(os.getpid(), signal.SIGKILL)
"""


def killed_mid_write(path: Path) -> Path:
    """The temporary file a process killed while writing `path` left (s2s.io.atomic_open)."""
    proc = subprocess.run([sys.executable, "-c", KILLED_MID_WRITE, str(path)], check=False)
    assert proc.returncode == -signal.SIGKILL
    (left,) = path.parent.glob(f".{path.name}.*.tmp")
    return left


@pytest.mark.parametrize("stage", ["vocab", "download"])
def test_a_rerun_removes_the_temporaries_a_killed_run_left_and_no_live_ones(project, stage):
    from s2s.io import owner_tag

    if stage == "vocab":
        written = project / "kv" / "v.json"
        args = ["vocab", "--prepared", "prepared", "--out", "vocab", "--metrics", written]
    else:
        written = project / "raw" / "manifest.json"
        args = ["download", "--out", "raw"]
    dead = killed_mid_write(written)
    older = written.with_name(f".{written.name}.0a1b2c3d.tmp")  # an earlier version's name
    older.write_text("{")
    live = written.with_name(f".{written.name}.{owner_tag()}-0a1b2c3d.tmp")  # this process's
    live.write_text("{")
    other = written.with_name(".other.json.0a1b2c3d.tmp")  # another file's: not this stage's
    other.write_text("{")
    proc = s2s(args, project)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not dead.exists() and not older.exists()
    assert live.exists() and other.exists()
    assert json.loads(written.read_text())
