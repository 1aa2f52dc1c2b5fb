"""s2s.io: a folder written whole replaces the old one so that a kill at any point leaves, under
the final name, one of them whole (never a half-deleted old folder; where the file system cannot
swap two folders in one step, a kill between its two renames leaves nothing there); the
temporaries of a killed write are cleared once their owner is gone."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from s2s import io

ROOT = Path(__file__).resolve().parents[1]

# Replaces folder argv[1] whole with a.txt and b.txt ("new"), killed (SIGKILL, no cleanup) by
# the first rmtree once it has deleted one file of the folder it removes.
KILLED_IN_RMTREE = """
import os, shutil, signal, sys
from pathlib import Path
from s2s import io

def rmtree(path, *args, **kwargs):
    sorted(Path(path).iterdir())[0].unlink()
    os.kill(os.getpid(), signal.SIGKILL)

shutil.rmtree = rmtree
with io.whole_dir(Path(sys.argv[1])) as tmp:
    for name in ("a.txt", "b.txt"):
        (tmp / name).write_text("new", encoding="utf-8")
"""


def files(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.iterdir())}


def test_a_kill_while_the_old_folder_is_deleted_leaves_the_new_one_whole_and_the_rerun_cleans(
        tmp_path):
    out = tmp_path / "vocab"
    out.mkdir()
    for name in ("a.txt", "b.txt"):
        (out / name).write_text("old", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-c", KILLED_IN_RMTREE, str(out)],
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, timeout=120)
    assert proc.returncode == -9  # killed inside the rmtree
    assert files(out) == {"a.txt": "new", "b.txt": "new"}  # never a half-deleted folder
    left = [p.name for p in tmp_path.iterdir() if p != out]
    assert len(left) == 1 and left[0].startswith(f"{io.TMP_PREFIX}vocab-")  # the old, aside

    with io.whole_dir(out) as tmp:  # the next run: the dead run's folder aside is removed
        (tmp / "c.txt").write_text("newer", encoding="utf-8")
    assert [p.name for p in tmp_path.iterdir()] == ["vocab"]
    assert files(out) == {"c.txt": "newer"}


# Replaces folder argv[1] whole with a.txt ("new"), killed (SIGKILL) as soon as a folder has
# been renamed onto a temporary name: where the old folder was set aside before the new one was
# renamed into place, nothing was left under the final name, and the next run removed both.
KILLED_BETWEEN_RENAMES = """
import os, signal, sys
from pathlib import Path
from s2s import io

real = os.replace
def replace(src, dst):
    real(src, dst)
    if Path(dst).name.startswith(io.TMP_PREFIX):
        os.kill(os.getpid(), signal.SIGKILL)

io.os.replace = replace
with io.whole_dir(Path(sys.argv[1])) as tmp:
    (tmp / "a.txt").write_text("new", encoding="utf-8")
"""


def test_a_folder_is_swapped_with_the_old_one_in_one_step(tmp_path):
    import pytest

    import ctypes

    probe = [tmp_path / "a", tmp_path / "b"]
    for p in probe:
        p.mkdir()
        (p / p.name).touch()
    # asked of the kernel here, not of the code under test (a broken one would skip the test)
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    at_cwd, exchange = -100, 2  # AT_FDCWD, RENAME_EXCHANGE
    if renameat2 is None or renameat2(at_cwd, bytes(probe[0]), at_cwd, bytes(probe[1]),
                                      exchange) != 0:
        pytest.skip("this file system cannot swap two folders in one step (renameat2)")
    assert io._exchange(*probe)  # and back, by the code under test
    assert [sorted(q.name for q in p.iterdir()) for p in probe] == [["a"], ["b"]]
    for p in probe:
        shutil.rmtree(p)
    out = tmp_path / "vocab"
    out.mkdir()
    (out / "a.txt").write_text("old", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-c", KILLED_BETWEEN_RENAMES, str(out)],
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, timeout=120)
    assert proc.returncode == 0  # no rename set the old folder aside
    assert files(out) == {"a.txt": "new"} and [p.name for p in tmp_path.iterdir()] == ["vocab"]


def test_a_folder_replaces_a_file_or_a_link_and_a_failed_rename_puts_the_old_folder_back(
        tmp_path, monkeypatch):
    for kind in ("file", "link"):
        final, new = tmp_path / f"{kind}-out", tmp_path / f"{kind}-new"
        if kind == "file":
            final.write_text("a file", encoding="utf-8")
        else:
            final.symlink_to(tmp_path / "nowhere")
        new.mkdir()
        (new / "x").write_text("x", encoding="utf-8")
        io.replace_dir(new, final)
        assert final.is_dir() and not final.is_symlink() and files(final) == {"x": "x"}

    final, new = tmp_path / "out", tmp_path / "new"
    final.mkdir()
    (final / "old").write_text("old", encoding="utf-8")
    new.mkdir()
    real = os.replace

    def replace(src, dst):
        if Path(src) == new:
            raise OSError(28, "No space left on device")
        return real(src, dst)

    monkeypatch.setattr(io.os, "replace", replace)
    monkeypatch.setattr(io, "_exchange", lambda a, b: False)  # a file system that cannot swap
    try:
        io.replace_dir(new, final)
    except OSError:
        pass
    else:
        raise AssertionError("the failed rename was not raised")
    assert files(final) == {"old": "old"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file-out", "link-out", "new", "out"]


def test_remove_dead_temporaries_in_a_folder_leaves_a_live_owners_and_other_files(tmp_path):
    proc = subprocess.run([sys.executable, "-c", "from s2s.io import owner_tag; print(owner_tag())"],
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, check=True,
                          capture_output=True, text=True, timeout=120)
    dead, live = proc.stdout.strip(), io.owner_tag()
    names = [f".epoch1.pt.{dead}-0a1b.tmp", f".snapshots.json.{dead}-2c.tmp",
             f".epoch2.pt.{live}-3d.tmp", "epoch1.pt", ".hidden.tmp"]
    for name in names:
        (tmp_path / name).write_text("", encoding="utf-8")
    removed = io.remove_dead_temporaries_in(tmp_path)
    assert sorted(p.name for p in removed) == sorted(names[:2])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names[2:])
