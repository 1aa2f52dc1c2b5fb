"""Profiles as a base plus differences (s2s.config.resolved): each profile resolves to the values
it had as a complete file (tests/fixtures/profiles/, written from the four complete files before
they became differences; since then two changes: wmt14's and paper's forward and reversed_fb1
take reversed_1's seeds, as in the default profile, and their GPUs: paper trains one model per
GPU, and both time the cost claim on one; paper's data stages run over 16 and 8 processes, and its
small stages (check, evaluate, claims, summary, report) ask for little, evaluate's and claims'
what they were measured to use; and default's (so smoke's) seed replicas forward_2, forward_3,
reversed_2, reversed_3 rescore too), `s2s profile NAME` writes that complete file to params.yaml,
and a bad
`extends` or `remove` is one line naming the file and the key. The params file DVC reads must be
complete. A full disk (simulated by a file-size limit) while `s2s profile` writes is one line
naming the file, and leaves no temporary file and no half-written params.yaml."""

import json
import shutil
import sys
from pathlib import Path

import pytest

from s2s import config
from s2s.profiles import profile_text

from conftest import BIN, run

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "profiles"
NAMES = ["default", "smoke", "wmt14", "paper"]


@pytest.mark.parametrize("name", NAMES)
def test_each_profile_resolves_to_the_values_it_had_as_a_complete_file(name):
    want = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    assert config.resolved(ROOT / "profiles" / f"{name}.yaml") == want
    assert config.load(ROOT / "profiles" / f"{name}.yaml").profile == name


def test_only_the_default_is_complete_and_the_others_are_its_differences():
    assert "extends" not in config.read_yaml(ROOT / "profiles" / "default.yaml")
    for name in ("smoke", "wmt14", "paper"):
        raw = config.read_yaml(ROOT / "profiles" / f"{name}.yaml")
        assert raw["extends"] == "default"
        full = config.resolved(ROOT / "profiles" / f"{name}.yaml")
        # a difference file is much shorter than what it stands for
        assert len(json.dumps(raw)) < 0.6 * len(json.dumps(full)), name


@pytest.mark.parametrize("name", NAMES)
def test_the_written_params_file_is_complete_and_loads_to_the_same_params(tmp_path, name):
    text = profile_text(ROOT / "profiles" / f"{name}.yaml")
    out = tmp_path / "params.yaml"
    out.write_text(text, encoding="utf-8")
    assert "extends" not in config.read_yaml(out)
    assert config.read_yaml(out) == config.resolved(ROOT / "profiles" / f"{name}.yaml")
    config.require_complete(out)
    a, b = config.load(out), config.load(ROOT / "profiles" / f"{name}.yaml")
    assert a.models == b.models and a.systems == b.systems and a.train == b.train
    if name == "default":  # the complete base: its own text, comments and all
        assert text == (ROOT / "profiles" / "default.yaml").read_text(encoding="utf-8")
    else:
        assert text.startswith(f"# Written by `s2s profile {name}`: profiles/default.yaml + "
                               f"profiles/{name}.yaml, resolved.")


def _profiles(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "profiles", tmp_path / "profiles")
    return tmp_path / "profiles"


@pytest.mark.parametrize("text, says", [
    ("extends: nosuch\nprofile: x\n", "'extends' names profile 'nosuch', but"),
    ("extends: ../default\nprofile: x\n", "'extends' must name a profile of"),
    ("extends: x\nprofile: x\n", "'extends' makes a cycle"),
    ("extends: default\nremove: [models.nosuch]\nprofile: x\n",
     "'remove[0]' names 'models.nosuch', which"),
    ("extends: default\nremove: models.forward\nprofile: x\n",
     "'remove' must be a list of dotted keys"),
    ("remove: [models.forward]\nprofile: x\n", "'remove' takes keys out of a base profile"),
    # a removal that leaves a reference dangling is caught by the ordinary checks, naming the key
    ("extends: default\nremove: [models.reversed_1]\nprofile: x\n",
     "names model 'reversed_1', which is not under 'models'"),
])
def test_a_bad_profile_is_refused_naming_the_file_and_key(tmp_path, text, says):
    folder = _profiles(tmp_path)
    (folder / "x.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(config.ConfigError) as e:
        config.load(folder / "x.yaml")
    assert str(e.value).startswith(str(folder / "x.yaml")) and says in str(e.value), e.value


def _edit_default(folder: Path, old: str, new: str) -> None:
    """Change one line of the folder's complete base profile."""
    base = folder / "default.yaml"
    text = base.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    base.write_text(text.replace(old, new), encoding="utf-8")


@pytest.mark.parametrize("old, new, says", [
    ("  lr: 0.7\n", "  lr: oops\n", "'train.lr' must be a number, got str 'oops'"),
    ("  hidden_size: 384", "  hidden_size: big",  # checked by each model's config
     "'model.hidden_size' must be an integer, got str 'big'"),
    ("  forward: {members: [forward], beams: [12]}", "  forward: {members: [forward], beams: [0]}",
     "'systems.forward.beams[0]' must be >= 1, got 0"),
])
def test_a_bad_value_of_a_base_profile_is_reported_against_the_base(tmp_path, old, new, says):
    folder = _profiles(tmp_path)
    _edit_default(folder, old, new)
    base, child, grand = folder / "default.yaml", folder / "x.yaml", folder / "z.yaml"
    child.write_text("extends: default\nprofile: x\n", encoding="utf-8")
    grand.write_text("extends: x\nprofile: z\n", encoding="utf-8")
    for path in (base, child, grand):
        with pytest.raises(config.ConfigError) as e:
            config.load(path)
        where = f"{base}" if path == base else f"{base} (extended by {path})"
        assert str(e.value) == f"{where}: {says}"
    # the complete file `s2s profile` writes has every key: it is the one named
    written = tmp_path / "params.yaml"
    written.write_text(profile_text(grand), encoding="utf-8")
    with pytest.raises(config.ConfigError) as e:
        config.load(written)
    assert str(e.value) == f"{written}: {says}"


def test_a_bad_value_is_reported_against_the_profile_that_sets_it_last(tmp_path):
    folder = _profiles(tmp_path)
    _edit_default(folder, "  lr: 0.7\n", "  lr: oops\n")
    child, grand = folder / "x.yaml", folder / "z.yaml"
    child.write_text("extends: default\nprofile: x\ntrain: {lr: still}\n", encoding="utf-8")
    grand.write_text("extends: x\nprofile: z\n", encoding="utf-8")
    with pytest.raises(config.ConfigError) as e:
        config.load(grand)
    assert str(e.value) == (f"{child} (extended by {grand}): 'train.lr' must be a number, "
                            f"got str 'still'")
    with pytest.raises(config.ConfigError) as e:
        config.load(child)
    assert str(e.value) == f"{child}: 'train.lr' must be a number, got str 'still'"
    child.write_text("extends: default\nprofile: x\ntrain: {lr: 0.5}\n", encoding="utf-8")
    assert config.load(grand).train.lr == 0.5 and config.load(grand).source == grand


def test_s2s_profile_writes_the_resolved_file_and_check_refuses_a_copied_difference(tmp_path):
    _profiles(tmp_path)
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    proc = run([str(BIN / "s2s"), "profile", "smoke"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    written = config.read_yaml(tmp_path / "params.yaml")
    assert written == config.resolved(ROOT / "profiles" / "smoke.yaml")
    proc = run([str(BIN / "s2s"), "profile"], cwd=tmp_path)
    assert "current profile: smoke\n" in proc.stdout and "edited since" not in proc.stdout
    # the difference file itself is no params.yaml: DVC reads that file's keys
    shutil.copy(tmp_path / "profiles" / "smoke.yaml", tmp_path / "params.yaml")
    proc = run([str(BIN / "s2s"), "check"], cwd=tmp_path, check=False)
    assert proc.returncode != 0
    assert "'extends' names profile 'default', but default.yaml does not exist" in proc.stderr
    (tmp_path / "default.yaml").write_text(profile_text(ROOT / "profiles" / "default.yaml"))
    proc = run([str(BIN / "s2s"), "check"], cwd=tmp_path, check=False)
    assert proc.returncode != 0 and "'extends' belongs in a profile" in proc.stderr, proc.stderr


def test_commands_that_write_or_check_dvc_yaml_refuse_another_parameter_file(tmp_path):
    """dvc.yaml's stages name their params keys with no file and pass no --params: DVC runs them
    with params.yaml's values. `s2s --params OTHER dag write` wrote OTHER's stages into it (and
    said "regenerated from OTHER"), and `--params OTHER profile NAME` wrote the profile to OTHER
    and dvc.yaml from it. Both refuse, in one line naming the file; `dag show` only prints."""
    _profiles(tmp_path)
    (tmp_path / "params.yaml").write_text(profile_text(ROOT / "profiles" / "smoke.yaml"))
    (tmp_path / "other.yaml").write_text(profile_text(ROOT / "profiles" / "quick.yaml"))
    run([str(BIN / "s2s"), "dag", "write"], cwd=tmp_path)
    files = {n: (tmp_path / n).read_text() for n in ("dvc.yaml", "params.yaml", "other.yaml")}
    for args, named in ((["dag", "write"], "dag write"), (["dag", "check"], "dag check"),
                        (["profile", "quick"], "profile NAME")):
        proc = run([str(BIN / "s2s"), "--params", "other.yaml", *args], cwd=tmp_path,
                   check=False)
        assert proc.returncode == 1, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert (f"other.yaml: `s2s {named}` works on params.yaml only: dvc.yaml's stages read "
                f"params.yaml") in proc.stderr
        assert {n: (tmp_path / n).read_text() for n in files} == files
    shown = run([str(BIN / "s2s"), "--params", "other.yaml", "dag", "show"], cwd=tmp_path)
    assert "other.yaml" in shown.stdout
    proc = run([str(BIN / "s2s"), "--params", str(tmp_path / "params.yaml"), "dag", "check"],
               cwd=tmp_path)  # params.yaml however it is named
    assert "dvc.yaml is up to date" in proc.stdout


# `s2s profile smoke` under a file-size limit: a write past it fails with EFBIG, as a full disk's
# ENOSPC fails the same call (SIGXFSZ ignored, so the process sees the error, not the signal).
_PROFILE_UNDER_LIMIT = """
import resource, signal, sys
from s2s import cli
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
sys.exit(cli.main(["profile", "smoke"]))
"""


def _profile_under_limit(tmp_path: Path, limit: int):
    return run([sys.executable, "-c", _PROFILE_UNDER_LIMIT, str(limit)], cwd=tmp_path,
               check=False)


def _temporaries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_s2s_profile_on_a_full_disk_keeps_the_old_params_and_names_the_file(tmp_path):
    _profiles(tmp_path)
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    old = (tmp_path / "params.yaml").read_bytes()
    assert len(profile_text(ROOT / "profiles" / "smoke.yaml").encode()) > 4096
    proc = _profile_under_limit(tmp_path, 4096)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "File too large" in lines[0], proc.stderr
    assert "'params.yaml'" in lines[0], proc.stderr
    assert (tmp_path / "params.yaml").read_bytes() == old
    assert _temporaries(tmp_path) == []
    assert not (tmp_path / "dvc.yaml").exists()


def test_s2s_profile_says_to_rerun_dag_write_when_dvc_yaml_cannot_be_written(tmp_path):
    # params.yaml (about 11 kB) fits under the limit, dvc.yaml (about 69 kB) does not
    _profiles(tmp_path)
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    text = profile_text(ROOT / "profiles" / "smoke.yaml")
    assert len(text.encode()) < 30000
    proc = _profile_under_limit(tmp_path, 30000)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "params.yaml is now profile 'smoke'" in lines[0], proc.stderr
    assert "File too large: 'dvc.yaml'" in lines[0], proc.stderr
    assert "run `s2s dag write`" in lines[0], proc.stderr
    assert (tmp_path / "params.yaml").read_text(encoding="utf-8") == text
    assert not (tmp_path / "dvc.yaml").exists()
    assert _temporaries(tmp_path) == []
