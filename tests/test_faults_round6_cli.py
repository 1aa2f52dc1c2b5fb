"""Faults, sixth round, of the command line: a stage run before its input is made (or with a file
where a folder belongs), a byte-order mark in a scored file, `-` for stdin and stdout and a file
that lost its line breaks in translate-text, an output path of the train stage that could only
fail at the end of training, and a checkpoint that is random bytes, cut short or a folder. Each
is one line naming the file (and its flag), never a traceback, a half-written output or a wrong
score; an -o that is a FIFO, a device or a link written through, not replaced by a file.
Nothing here trains or decodes more than an untrained 1x16 model on a few words."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import BIN, run
from helpers import one_line_error, tiny_params_dict, untrained_forward, write_params


def s2s(args, cwd: Path, **kw) -> subprocess.CompletedProcess:
    return run([str(BIN / "s2s"), *map(str, args)], cwd, check=False, **kw)


def s2s_input(args, cwd: Path, text: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([str(BIN / "s2s"), *map(str, args)], cwd=cwd, input=text, text=True,
                          capture_output=True, env=env, timeout=300)


@pytest.fixture
def project(tmp_path) -> Path:
    """A project of the tiny params and nothing else: no data/, no models/."""
    write_params(tmp_path / "params.yaml", tiny_params_dict())
    return tmp_path


@pytest.fixture
def system(tmp_path) -> Path:
    """The tiny params' system `forward`, untrained, in models/ and vocab/."""
    from s2s import config

    params = config.load(write_params(tmp_path / "params.yaml", tiny_params_dict()))
    untrained_forward(params, tmp_path, words=("The", "man", "."), record_text=True)
    return tmp_path


TEXT = ["translate-text", "--system", "forward", "--vocab", "vocab"]


# --- 1. a stage's input not made yet, or a file where a folder belongs ----------------------------


def test_a_stage_before_its_input_names_the_file_its_flag_and_the_stage_that_writes_it(project):
    one_line_error(s2s(["vocab"], project), "FileNotFoundError: data/prepared/train.tok.en (from "
                   "--prepared data/prepared): no such file yet: `dvc repro prepare` writes it",
                   status=1)
    one_line_error(s2s(["evaluate"], project), "data/prepared/test.tok.fr (from --prepared "
                   "data/prepared): no such file yet: `dvc repro prepare` writes it", status=1)
    for lang in ("en", "fr"):  # the vocabularies there: the test set of --prepared is next
        (project / "data" / "vocab").mkdir(parents=True, exist_ok=True)
        (project / "data" / "vocab" / f"{lang}.tsv").write_text(
            "<pad>\t0\n<unk>\t0\n<bos>\t0\n<eos>\t0\nman\t3\n")
    (project / "pm").mkdir()
    one_line_error(s2s(["translate", "forward", "--prepared", "pm"], project),
                   "pm/test.tok.en (from --prepared pm): no such file: `dvc repro prepare` "
                   "writes it as data/prepared/test.tok.en", status=1)
    assert not (project / "outputs").exists()


def test_a_file_given_for_a_folder_says_so_naming_the_flag(project):
    (project / "odd.txt").write_text("not a folder\n")
    one_line_error(s2s(["translate", "forward", "--vocab", "odd.txt"], project),
                   "NotADirectoryError: odd.txt/en.tsv (from --vocab odd.txt): odd.txt is a file, "
                   "not a folder: `dvc repro vocab` writes the folder data/vocab", status=1)


def test_translate_text_names_the_flag_of_a_folder_that_is_a_file(system):
    (system / "odd.txt").write_text("not a folder\n")
    proc = s2s_input([*TEXT[:3], "--vocab", "odd.txt"], system, "The man .\n")
    one_line_error(proc, "NotADirectoryError: --vocab odd.txt: a file, not a folder", status=1)


def test_a_missing_file_that_is_no_declared_input_is_not_blamed_on_a_stage(project, monkeypatch):
    """Only a stage's declared inputs are mapped to the stage that writes them: any other
    missing file (a bug's) is shown as it is."""
    import argparse

    from s2s import cli, config

    params = config.load(project / "params.yaml")
    args = argparse.Namespace(command="vocab", prepared=Path("data/prepared"),
                              out=Path("data/vocab"), metrics=Path("metrics/vocab.json"))
    spec = cli.stage_of(args, params)
    monkeypatch.chdir(project)  # undone after the test: later tests read paths from the root
    said = cli._input_not_there(FileNotFoundError(2, "No such file", "data/prepared/dev.tok.fr"),
                                args, spec, params)
    assert said == ("data/prepared/dev.tok.fr (from --prepared data/prepared): no such file yet: "
                    "`dvc repro prepare` writes it")
    for elsewhere in ("data/vocab/.tmp-en.tsv", "metrics/vocab.json", "/nowhere/x"):
        assert cli._input_not_there(FileNotFoundError(2, "No such file", elsewhere),
                                    args, spec, params) is None


# --- 2. a byte-order mark in a scored file ---------------------------------------------------------


@pytest.mark.parametrize("which", ["ref", "hyp"])
def test_score_drops_a_byte_order_mark_as_prepare_does(tmp_path, which):
    text = "The cat sat on the mat .\nA dog barks at the man .\n"
    plain, marked = tmp_path / "plain.txt", tmp_path / "marked.txt"
    plain.write_text(text)
    marked.write_bytes(b"\xef\xbb\xbf" + text.encode())
    hyp, ref = (plain, marked) if which == "ref" else (marked, plain)
    proc = s2s(["score", hyp, "-r", ref, "--json"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    scores = json.loads(proc.stdout)["scores"][str(hyp)]
    assert scores["bleu_tok"] == pytest.approx(100.0)
    assert scores["bleu_sacre"] == pytest.approx(100.0)


# --- 3. translate-text: `-`, CR line ends, a file that lost its line breaks ------------------------


def test_a_dash_is_stdin_and_stdout(system):
    proc = s2s_input([*TEXT, "-i", "-", "-o", "-"], system, "The man .\nThe\n")
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.splitlines()) == 2
    assert not (system / "-").exists()
    # a file named - is ./-
    (system / "-").write_text("The man .\n")
    proc = s2s_input([*TEXT, "-i", "./-", "-o", "out.txt"], system, "")
    assert proc.returncode == 0, proc.stderr
    assert len((system / "out.txt").read_text().splitlines()) == 1


def test_a_line_holding_a_bare_cr_is_warned_of_naming_the_file(system):
    (system / "mac.txt").write_bytes(b"The man .\rThe\rThe man .\r")
    proc = s2s([*TEXT, "-i", "mac.txt"], system)
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.splitlines()) == 1  # read as sacreBLEU reads it: one line
    warned = [ln for ln in proc.stderr.splitlines() if "WARNING" in ln]
    assert len(warned) == 1 and "mac.txt:1: a carriage return (CR) inside the line" in warned[0]
    # CR LF line ends are plain line ends: no warning
    (system / "dos.txt").write_bytes(b"The man .\r\nThe\r\n")
    proc = s2s([*TEXT, "-i", "dos.txt"], system)
    assert proc.returncode == 0 and "WARNING" not in proc.stderr, proc.stderr
    assert len(proc.stdout.splitlines()) == 2


def test_a_line_of_more_words_than_prepare_allows_is_refused_unless_asked(system):
    from s2s.data.prepare import MAX_EVAL_WORDS

    words = 20 * MAX_EVAL_WORDS
    (system / "long.txt").write_text("The man .\n" + " ".join(["man"] * words) + "\n")
    proc = s2s([*TEXT, "-i", "long.txt", "-o", "out.txt"], system)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if " ERROR " in ln]  # after the model's INFO
    assert len(errors) == 1 and (f"ValueError: long.txt:2: a line of {words:,} words (at most "
                                 f"{MAX_EVAL_WORDS:,}: did the file lose its line breaks?); "
                                 f"--long-lines translates it anyway") in errors[0], proc.stderr
    assert not (system / "out.txt").exists()
    (system / "short.txt").write_text(" ".join(["man"] * (MAX_EVAL_WORDS + 1)) + "\n")
    proc = s2s([*TEXT, "-i", "short.txt", "-o", "out.txt", "--long-lines", "--beam", "1"],
               system)
    assert proc.returncode == 0, proc.stderr
    assert len((system / "out.txt").read_text().splitlines()) == 1


def test_an_nbest_list_is_tokenised_as_the_translate_stage_writes_it(system, monkeypatch):
    """--nbest writes the hypotheses Moses-tokenised ("la maison ."), as the stage's
    beam<K>.nbest holds them and read_nbest reads n-best lists: they had been detokenised
    ("la maison."). The search is scripted, in process: an untrained model says nothing."""
    from s2s import api, cli
    from s2s.decode.rescore import read_nbest

    hyps = [[("la maison .", -1.5), ("une maison , dit-il .", -2.25)],
            [("l' homme ?", -0.5), ("homme", -3.0)]]

    def searched(self, tokenized, *, nbest=1, **kwargs):
        assert [t.lower() for t in tokenized] == ["the man .", "the"]  # prepare's tokenisation
        return [hs[:nbest] for hs in hyps]

    monkeypatch.setattr(api.Translator, "translate_tokenized", searched)
    (system / "in.txt").write_text("The man.\nThe\n")
    out = system / "out.nbest"
    assert cli.main(["--params", str(system / "params.yaml"), *TEXT[:3], "--models",
                     str(system / "models"), "--vocab", str(system / "vocab"), "-i",
                     str(system / "in.txt"), "-o", str(out), "--beam", "2", "--nbest", "2"]) == 0
    lines = out.read_text(encoding="utf-8").splitlines()
    assert [ln.split(" ||| ")[1] for ln in lines] == [h for hs in hyps for h, _ in hs]
    assert lines[0].startswith("0 ||| la maison . ||| ") and lines[0].endswith(" ||| -1.500000")
    lists = read_nbest(out, sentences=2)
    assert [[(c.text, c.score) for c in cs] for cs in lists] == hyps


def _drain(fd: int) -> bytes:
    """What a FIFO's non-blocking read end holds once its writer is gone (nothing if none came)."""
    data = b""
    try:
        while chunk := os.read(fd, 65536):
            data += chunk
    except BlockingIOError:  # no writer ever opened it
        pass
    return data


def test_an_output_that_is_no_regular_file_is_written_through_not_replaced(system):
    """-o a FIFO, a shell's >(...) (/dev/fd/N) or a link to /proc/self/fd/1 gets the lines, and
    stays what it was: it had been replaced by a regular file (or, for /dev/fd/N, refused after
    decoding, naming a temporary under /dev/fd)."""
    import stat

    (system / "in.txt").write_text("The man .\nThe\n")
    # a FIFO, its reader opened before the command (non-blocking: nothing can hang if no writer
    # ever comes); two short lines fit the pipe's buffer
    fifo = system / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        proc = s2s([*TEXT, "-i", "in.txt", "-o", "fifo"], system)
        got = _drain(reader)
    finally:
        os.close(reader)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(got.decode().splitlines()) == 2, got
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    # /dev/fd/N of a pipe, as bash's -o >(gzip > x.gz) passes it
    read_end, write_end = os.pipe()
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    with os.fdopen(read_end, "rb") as f:
        try:
            proc = subprocess.run([str(BIN / "s2s"), *TEXT, "-i", "in.txt", "-o",
                                   f"/dev/fd/{write_end}"], cwd=system, env=env, text=True,
                                  capture_output=True, pass_fds=(write_end,), timeout=300)
        finally:
            os.close(write_end)  # the command's copy is its own: the read below ends with it
        got = f.read()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(got.decode().splitlines()) == 2, got
    # a link to the command's own stdout, a file a shell opened to append to (`>> log`): the
    # lines follow what was there, and the link stays a link
    (system / "to-stdout").symlink_to("/proc/self/fd/1")
    (system / "log").write_text("kept\n")
    with open(system / "log", "a") as log:
        proc = subprocess.run([str(BIN / "s2s"), *TEXT, "-i", "in.txt", "-o", "to-stdout"],
                              cwd=system, env=env, text=True, stdout=log, stderr=subprocess.PIPE,
                              timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = (system / "log").read_text().splitlines()
    assert lines[0] == "kept" and len(lines) == 3, lines
    assert os.readlink(system / "to-stdout") == "/proc/self/fd/1"


def test_a_link_to_a_file_is_written_at_its_file_and_stays_a_link(system):
    (system / "in.txt").write_text("The man .\nThe\n")
    (system / "runs").mkdir()
    (system / "runs" / "x.fr").write_text("old\n")
    (system / "latest.fr").symlink_to("runs/x.fr")
    proc = s2s([*TEXT, "-i", "in.txt", "-o", "latest.fr"], system)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert os.readlink(system / "latest.fr") == "runs/x.fr"
    assert len((system / "runs" / "x.fr").read_text().splitlines()) == 2
    assert not [p.name for p in (system / "runs").iterdir() if p.name != "x.fr"]  # no temporary
    # a link to a file not there yet: made at the link's target, the link kept
    (system / "next.fr").symlink_to("runs/y.fr")
    proc = s2s([*TEXT, "-i", "in.txt", "-o", "next.fr"], system)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert os.readlink(system / "next.fr") == "runs/y.fr"
    assert len((system / "runs" / "y.fr").read_text().splitlines()) == 2


def test_dev_null_is_written_through_and_stays_the_device(monkeypatch):
    """In process, with every atomic write refused before it makes or renames anything: even
    code that would replace /dev/null (as root) fails here without touching it."""
    import stat

    from s2s import cli
    from s2s import io as s2s_io

    before = os.stat("/dev/null")
    assert stat.S_ISCHR(before.st_mode)

    def refused(*args, **kwargs):
        raise AssertionError(f"an atomic write for /dev/null: {args}")

    monkeypatch.setattr(s2s_io, "_temp_file", refused)  # no temporary beside /dev/null
    monkeypatch.setattr(os, "replace", refused)  # and nothing renamed over it
    monkeypatch.setattr(os, "rename", refused)
    cli._check_output(Path("/dev/null"))
    cli._write_output(Path("/dev/null"), ["une maison .", "le chat ."])
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode)
    assert (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)


def test_an_output_that_cannot_be_written_is_refused_before_the_system_loads(system):
    """Said in one line before a model is loaded (the system named does not exist): a link into
    a folder that is not there; a folder, or a FIFO, we may not write to."""
    (system / "in.txt").write_text("The man .\n")
    (system / "dangling.fr").symlink_to("typo/out.fr")
    proc = s2s(["translate-text", "--system", "no_such_system", "-i", "in.txt",
                "-o", "dangling.fr"], system)
    one_line_error(proc, f"-o dangling.fr (a link to {system.resolve()}/typo/out.fr): no folder "
                         f"{system.resolve()}/typo", status=1)
    assert "no_such_system" not in proc.stderr
    (system / "locked").mkdir(mode=0o555)
    if os.access(system / "locked", os.W_OK):  # root (CAP_DAC_OVERRIDE) may write anywhere
        return
    proc = s2s(["translate-text", "--system", "no_such_system", "-i", "in.txt",
                "-o", "locked/out.fr"], system)
    one_line_error(proc, "PermissionError: -o locked/out.fr: the folder locked is not writable",
                   status=1)
    os.mkfifo(system / "ro-fifo", 0o444)
    proc = s2s(["translate-text", "--system", "no_such_system", "-i", "in.txt",
                "-o", "ro-fifo"], system)
    one_line_error(proc, "PermissionError: -o ro-fifo: not writable", status=1)


# --- 4. the train stage's outputs, checked before training ---------------------------------------


@pytest.mark.parametrize("flag,make,says", [
    ("--curves", "dir", "IsADirectoryError: --curves cv/x.csv: a folder, not a file to write"),
    ("--metrics", "file-parent", "NotADirectoryError: --metrics cv/x.csv: cv is a file, not a "
                                 "folder"),
    ("--model-dir", "file", "NotADirectoryError: --model-dir cv/x.csv: a file, not a folder"),
])
def test_an_output_that_cannot_be_written_is_refused_before_training(project, flag, make, says):
    target = project / "cv" / "x.csv"
    if make == "dir":
        target.mkdir(parents=True)
    elif make == "file":
        target.parent.mkdir()
        target.write_text("")
    else:
        (project / "cv").write_text("")
    proc = s2s(["train", "forward", flag, "cv/x.csv"], project)
    one_line_error(proc, says, status=1)
    for made in ("models", "metrics", "checkpoints"):
        assert not (project / made).exists(), made


# --- 5. checkpoints that are not checkpoints ------------------------------------------------------


@pytest.fixture
def model_pt(system) -> Path:
    return system / "models" / "forward" / "model.pt"


def test_random_bytes_are_not_a_torch_file(model_pt):
    from s2s import checkpoint

    model_pt.write_bytes(bytes(range(1, 256)) * 20)
    with pytest.raises(checkpoint.CheckpointError) as e:
        checkpoint.load_payload(model_pt)
    assert str(e.value) == (f"{model_pt}: not a checkpoint: not a file torch.save writes (it "
                            f"begins with neither a zip archive's header nor a pickle's)")


def test_a_checkpoint_cut_short_says_so_in_a_whole_sentence(model_pt):
    from s2s import checkpoint

    data = model_pt.read_bytes()
    for size in (100, len(data) // 2):
        model_pt.write_bytes(data[:size])
        with pytest.raises(checkpoint.CheckpointError) as e:
            checkpoint.load_payload(model_pt)
        assert str(e.value) == (f"{model_pt}: not a readable checkpoint: cut short ({size:,} "
                                f"bytes, without the end of its zip archive: a copy or download "
                                f"that stopped?)")
    long = RuntimeError("PytorchStreamReader failed reading zip archive: failed finding central "
                        "directory. This is an internal miniz error. If you are seeing this "
                        "error, there is a high likelihood that your checkpoint file is corrupted "
                        "or truncated and the download did not complete.")
    assert checkpoint._first_line(long) == ("RuntimeError: PytorchStreamReader failed reading "
                                            "zip archive: failed finding central directory. This "
                                            "is an internal miniz error")  # whole sentences


def test_a_folder_named_model_pt_is_said_to_be_a_folder(model_pt, system):
    from s2s import checkpoint

    model_pt.unlink()
    model_pt.mkdir()
    with pytest.raises(checkpoint.CheckpointError, match=r"model\.pt: a folder, not a checkpoint"):
        checkpoint.load_payload(model_pt)
    proc = s2s_input(TEXT, system, "The man .\n")
    one_line_error(proc, f"IsADirectoryError: {Path('models/forward/model.pt')}: a folder, not a "
                   f"checkpoint file", status=1)
