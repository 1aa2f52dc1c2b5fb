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
import subprocess
from pathlib import Path

import pytest

from conftest import BIN, run
from helpers import profile_dict, write_params


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


# --- an ids record of the wrong shape ------------------------------------------------------------


RECORDS = {
    "files_a_list": (lambda r: r.update(files=[]), "'files' is [], not an object"),
    "shape_a_string": (lambda r: r["files"]["train.en.npy"].update(shape="x"),
                       "'files.train.en.npy.shape' is \"x\", not a list of one integer"),
    "shape_of_a_string": (lambda r: r["files"]["dev.fr.npy"].update(shape=["3"]),
                          "'files.dev.fr.npy.shape[0]' is \"3\", not an integer of at least 0"),
    "no_sha256": (lambda r: r["files"]["test.fr.offsets.npy"].pop("sha256"),
                  "'files.test.fr.offsets.npy.sha256' is missing"),
    "lines_negative": (lambda r: r["lines"].update(dev=-1),
                       "'lines.dev' is -1, not an integer of at least 0"),
    "vocab_null": (lambda r: r.update(vocab=None), "'vocab' is null, not an object"),
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
