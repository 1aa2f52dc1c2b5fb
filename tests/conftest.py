"""Shared fixtures: the mirror, and one run of the smoke profile through `dvc repro`.

The suite runs in two processes (pytest-xdist, ``-n 2`` in pyproject.toml), one per core of the
CI machine. The smoke run is made once for both (the first process to ask makes it, the other
waits) and each process works on its own copy; the tests of one module stay together, so a
module's own fixtures are made once; the Snakemake and SLURM runs of the smoke DAG go to one
process, handed out first; and each process computes at one thread (two processes of two
OpenMP threads each on two cores degrade badly).
"""

from __future__ import annotations

import collections
import fcntl
import functools
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import NoReturn

import pytest

if os.environ.get("PYTEST_XDIST_WORKER"):  # before torch is imported, here and in subprocesses
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")

ROOT = Path(__file__).resolve().parents[1]
MIRROR = Path(os.environ.get("S2S_MIRROR", ROOT.parent / "shared" / "data")).resolve()
BIN = Path(sys.executable).parent  # the environment's scripts: s2s, dvc


SINGLE_LSTMS = ("forward", "forward_2", "forward_3", "reversed_1", "reversed_2", "reversed_3",
                "reversed_4", "reversed_5", "reversed_fb1", "reversed_fb1_2", "reversed_fb1_3")
RNN_TRAIN = {f"train-{m}" for m in (*SINGLE_LSTMS, "baseline", "gru", "attention")}
RNN_TRANSLATE = {f"translate-{s}" for s in (
    "forward", "forward_2", "forward_3", "reversed", "reversed_2", "reversed_3", "reversed_4",
    "reversed_5", "reversed_fb1", "reversed_fb1_2", "reversed_fb1_3", "ensemble5", "ensemble2",
    "baseline", "gru", "attention")}
RESCORERS = {f"rescore-{r}" for r in ("forward", "reversed", "ensemble5", "gru", "forward_2",
                                      "forward_3", "reversed_2", "reversed_3")}
# For the default and smoke profiles (the same names): the stages whose dependencies name each
# file, written out. A change to the file reruns exactly these (and what reads their outputs, if
# they change).
EXPECTED_READERS = {
    "model/transformer.py": {"train-transformer", "translate-transformer", "attention"},
    "model/lstm.py": RNN_TRAIN | RNN_TRANSLATE | RESCORERS | {"analyze", "attention", "timing"},
    "decode/beam.py": RNN_TRANSLATE | {"translate-transformer"} | RESCORERS | {"rescore-oracle",
                                                                              "timing"},
    "evaluate/bleu.py": RESCORERS | {"rescore-oracle", "evaluate", "claims", "report"},
    "claims/verdicts.py": {"claims", "report"},
    # the snapshot index's format: the trainer writes it, the analyze stage reads it
    "snapshots.py": RNN_TRAIN | {"train-transformer", "analyze"},
    # the ids' format: the ids stage writes them, every train stage maps them
    "data/ids.py": {"ids"} | RNN_TRAIN | {"train-transformer"},
    "report/render.py": {"report"},
}


# The runs of the smoke DAG by the other engines: the tests that read them share one process.
ENGINE_RUNS = {"snakemake_repo", "slurm_run"}


@pytest.hookimpl(wrapper=True)  # before xdist's own hook, which reads the marks
def pytest_collection_modifyitems(config, items):
    """One xdist group per module, and one ("engines") for every test that reads the Snakemake
    or the SLURM run of the smoke DAG (``--dist loadgroup`` runs a group in one process, so each
    run is made once: a module-scoped fixture is made again in every process that uses it).

    Groups are handed out in the order of their first test (``--no-loadscope-reorder``): the
    engines first (their jobs are Snakemake's and SLURM's processes, beside the tests), then the
    modules that read the smoke run (so it is made at the start), then the cluster's other
    tests (minutes each), then the rest."""
    def rank(item) -> int:
        names = set(item.fixturenames)
        if ENGINE_RUNS & names:
            return 0
        if "smoke_run" in names:
            return 1
        return 2 if item.get_closest_marker("slurm") else 3

    for item in items:
        group = "engines" if rank(item) == 0 else item.module.__name__
        item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=rank)  # stable: a module's tests keep their order
    return (yield)


def pytest_configure(config):
    """xdist marks each test with its group by renaming it; from pytest 9.2 the rename no longer
    takes (pytest-xdist#1386, open as of xdist 3.8.0) and every test goes anywhere, silently: each
    shared run would be made twice. Refuse that pairing in one line."""
    if os.environ.get("PYTEST_XDIST_WORKER") or config.getoption("dist", "no") != "loadgroup":
        return
    from importlib.metadata import version

    xdist = tuple(int(p) for p in version("pytest-xdist").split(".")[:3] if p.isdigit())
    if pytest.version_tuple[:2] >= (9, 2) and xdist <= (3, 8, 0):
        raise pytest.UsageError(
            f"pytest {pytest.__version__} with pytest-xdist {version('pytest-xdist')} does not "
            "group tests (pytest-xdist#1386): install the test extra's pytest "
            "(pip install -e '.[test]'), or run in one process (-n0)")


# The services CI provides (.ci/run installs and starts them; .ci/services.sh lists their
# programs): a test that needs one is marked ``@pytest.mark.service(NAME)``. Under CI (CI=true) a
# test that finds its service missing fails with the reason, since a skip there would hide that
# the suite did not prove what it claims; on a laptop without it, it skips. The end of the run
# says in one line which of them ran (and writes it to $S2S_SERVICES_REPORT, which .ci/run prints
# last).
SERVICE_NAMES = {"slurm": "SLURM", "sshd": "sshd", "chromium": "Chromium"}
CHROMIUM = Path("/usr/bin/chromium")


def chromium(tmp: Path, *args: str, timeout: float = 90) -> subprocess.CompletedProcess:
    """Headless Chromium run once on a page, with a profile of its own under `tmp` and none of
    its background connections (this machine's network refuses them)."""
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-dev-shm-usage", f"--user-data-dir={tmp / 'profile'}"]
    return subprocess.run([str(CHROMIUM), *flags, *args], capture_output=True, text=True,
                          timeout=timeout)


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def service_missing(name: str, reason: str) -> NoReturn:
    """`name`'s service is not here: fail under CI, skip elsewhere, with `reason`."""
    if in_ci():
        pytest.fail(f"{reason} (under CI=true the {SERVICE_NAMES[name]} service must be "
                    "there: .ci/run installs and starts it)", pytrace=False)
    pytest.skip(reason)


@functools.cache
def _service_problem(name: str) -> str | None:
    """Why `name`'s service cannot be used here, or None. Asked once per process."""
    if name == "slurm":
        if not shutil.which("sbatch"):
            return "no sbatch: the SLURM tests need a cluster (.ci/slurm.sh start, as root)"
        try:
            sinfo = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True,
                                   timeout=60)
        except subprocess.TimeoutExpired:
            return "no SLURM controller answers: sinfo gave no answer in 60 s"
        if sinfo.returncode != 0:
            return f"no SLURM controller answers: {(sinfo.stderr.strip() or '?').splitlines()[0]}"
        return None
    if name == "sshd":
        if not (shutil.which("sshd") or os.path.exists("/usr/sbin/sshd")):
            return "no sshd here (Debian: apt-get install openssh-server)"
        return None
    if name == "chromium":
        if not CHROMIUM.is_file():
            return f"headless chromium not installed at {CHROMIUM} (apt-get install chromium)"
        return None
    raise ValueError(f"unknown service {name!r}: expected one of {sorted(SERVICE_NAMES)}")


@pytest.hookimpl(tryfirst=True)  # before the test's fixtures are made
def pytest_runtest_setup(item):
    for mark in item.iter_markers("service"):
        name = mark.args[0]
        item.user_properties.append(("service", name))  # for the summary line
        problem = _service_problem(name)
        if problem:
            service_missing(name, problem)


_service_outcomes: dict[str, dict[str, str]] = {}  # service -> test id -> outcome


def pytest_runtest_logreport(report):
    """A service's test ran if its call phase did; one that stopped in its setup (the service
    missing, or a fixture of it failing) did not."""
    for key, name in report.user_properties:
        if key != "service":
            continue
        tests = _service_outcomes.setdefault(name, {})
        if report.when == "call":
            tests[report.nodeid] = report.outcome
        elif report.when == "setup" and not report.passed:
            tests[report.nodeid] = "skipped" if report.skipped else "failed in setup"
        elif report.when == "teardown" and report.failed:
            tests[report.nodeid] = "failed"


def services_line(outcomes: dict[str, dict[str, str]]) -> str:
    """One line: each service CI provides, and how many of its tests ran."""
    parts = []
    for name, label in SERVICE_NAMES.items():
        counts = collections.Counter(outcomes.get(name, {}).values())
        ran = counts["passed"] + counts["failed"]
        detail = ", ".join(f"{n} {o}" for o, n in sorted(counts.items()))
        if not counts:
            parts.append(f"{label}: no test asked for it")
        elif ran == 0:
            parts.append(f"{label} did NOT run ({detail})")
        else:
            parts.append(f"{label} ran {ran} of {sum(counts.values())} tests ({detail})")
    return "services: " + "; ".join(parts)


def pytest_terminal_summary(terminalreporter):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    line = services_line(_service_outcomes)
    terminalreporter.write_line(line)
    if os.environ.get("S2S_SERVICES_REPORT"):
        Path(os.environ["S2S_SERVICES_REPORT"]).write_text(line + "\n", encoding="utf-8")


def need_mirror() -> Path:
    if not (MIRROR / "README.md").exists():
        pytest.skip(f"no data mirror at {MIRROR} (set S2S_MIRROR)")
    return MIRROR


@pytest.fixture
def one_thread():
    """torch at one intra-op thread for the test, then as before: the modules whose numbers
    (golden values, bf16 agreement) were computed at one thread use it for every test
    (``pytestmark = pytest.mark.usefixtures("one_thread")``)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def mirror() -> Path:
    return need_mirror()


def run(cmd: list[str], cwd: Path, *, check: bool = True, timeout: float = 900,
        env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "S2S_MIRROR": str(MIRROR),
                "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **(env or {})}
    proc = subprocess.run(cmd, cwd=cwd, env=full_env, capture_output=True, text=True,
                          timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n"
                             f"{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    return proc


def make_project(dest: Path, profile: str = "smoke") -> Path:
    """A fresh git+DVC project with this repo's pipeline and the given profile as params.yaml."""
    from s2s import pipeline
    from s2s.config import load

    dest.mkdir(parents=True, exist_ok=True)
    if (ROOT / ".dvcignore").exists():
        shutil.copy(ROOT / ".dvcignore", dest / ".dvcignore")
    shutil.copytree(ROOT / "profiles", dest / "profiles")
    (dest / ".dvc").mkdir()
    shutil.copy(ROOT / ".dvc" / "config", dest / ".dvc" / "config")
    shutil.copy(ROOT / ".gitignore", dest / ".gitignore")
    # Every stage depends on the source files it runs; give the copy its own.
    shutil.copytree(ROOT / "src" / "s2s", dest / "src" / "s2s",
                    ignore=shutil.ignore_patterns("__pycache__"))
    from helpers import profile_text

    (dest / "params.yaml").write_text(profile_text(profile), encoding="utf-8")
    pipeline.write(load(dest / "params.yaml"), dest / "dvc.yaml")  # as `s2s profile` does
    run(["git", "init", "-q"], dest)
    run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A"], dest)
    run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"], dest)
    return dest


def project(dest: Path, profile: str = "smoke") -> Path:
    """make_project plus the workflow: a git+DVC project Snakemake can run."""
    repo = make_project(dest, profile)
    shutil.copytree(ROOT / "workflow", repo / "workflow",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return repo


def run_data_stages(params, tmp: Path, mirror: Path) -> None:
    """download, prepare, vocab and ids of `params` into tmp/{raw,prepared,vocab,ids} (+ metrics
    json)."""
    from s2s.layout import IdsPaths, PreparePaths, VocabPaths
    from s2s.stages import download as download_stage
    from s2s.stages import ids as ids_stage
    from s2s.stages import prepare as prepare_stage
    from s2s.stages import vocab as vocab_stage

    download_stage.main(params.data, out_dir=tmp / "raw", mirror=mirror)
    prepare_stage.main(params.data, params.prepare, PreparePaths(
        raw=tmp / "raw", out=tmp / "prepared", metrics=tmp / "prepare.json"))
    vocab_stage.main(params.vocab, VocabPaths(
        prepared=tmp / "prepared", out=tmp / "vocab", metrics=tmp / "vocab.json"))
    ids_stage.main(IdsPaths(prepared=tmp / "prepared", vocab=tmp / "vocab", out=tmp / "ids"))


@pytest.fixture(scope="session")
def smoke_data(tmp_path_factory, mirror):
    """The smoke profile's data stages, run once for the session: (dir, params). Tests write
    their own outputs into subdirectories of their own names."""
    from s2s import config

    tmp = tmp_path_factory.mktemp("smoke_data")
    params = config.load(ROOT / "profiles" / "smoke.yaml")
    run_data_stages(params, tmp, mirror)
    return tmp, params


def shared_dir(tmp_path_factory) -> Path:
    """A directory every process of the session shares (xdist's workers make theirs in one)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> Path:
    """The smoke profile, run end to end once by `dvc repro` for the whole session (a few
    minutes on 2 cores): the first process to ask makes it while the other waits. Read only:
    a test that changes a run takes a copy (:func:`smoke_repo`, or its own).

    ``S2S_SMOKE_REPO=DIR`` reuses a finished run made by :func:`make_project` and `dvc repro`
    (for working on one test; CI never sets it)."""
    need_mirror()
    if os.environ.get("S2S_SMOKE_REPO"):
        return Path(os.environ["S2S_SMOKE_REPO"]).resolve()
    shared = shared_dir(tmp_path_factory) / "smoke-run"
    shared.mkdir(exist_ok=True)
    repo, done, failed = shared / "repo", shared / "done", shared / "failed"
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # held while the run is made
        if failed.exists():
            raise AssertionError(f"the smoke run failed in another process:\n{failed.read_text()}")
        if not done.exists():
            try:
                make_project(repo)
                t0 = time.perf_counter()
                proc = run([str(BIN / "dvc"), "repro"], repo, timeout=1500)
            except BaseException as e:
                failed.write_text(str(e)[-8000:])
                raise
            (repo / "repro.log").write_text(proc.stdout + proc.stderr)
            print(f"smoke dvc repro: {time.perf_counter() - t0:.0f}s")
            done.touch()
    return repo


@pytest.fixture(scope="session")
def smoke_repo(smoke_run, tmp_path_factory) -> Path:
    """This process's own copy of the smoke run, for the tests that edit a file and put it back
    or run `dvc repro` in it (a copy takes about a second)."""
    repo = tmp_path_factory.mktemp("smoke") / "repo"
    shutil.copytree(smoke_run, repo, symlinks=True)
    return repo


@pytest.fixture(scope="session")
def snakemake_repo(tmp_path_factory) -> Path:
    """The smoke profile run end to end once by Snakemake, two jobs at a time. Read only: a test
    that changes it takes a copy (tests/test_slurm.py starts its SLURM run from one)."""
    need_mirror()
    repo = project(tmp_path_factory.mktemp("snakemake") / "repo")
    t0 = time.perf_counter()
    proc = run([str(BIN / "snakemake"), "--profile", "workflow/profiles/local", "--cores", "2"],
               repo, timeout=1500)
    (repo / "snakemake.log").write_text(proc.stdout + proc.stderr)
    print(f"smoke snakemake: {time.perf_counter() - t0:.0f}s")
    return repo


class RangeServer:
    """A loopback HTTP server (127.0.0.1 only) serving `files` with Range support, and switches
    to misbehave: `ignore_range`, `drop_after` (close after that many body bytes), `chunked`
    (chunked transfer encoding, no Content-Length: a cut then ends inside a chunk), `delay`
    (seconds of sleep after each 16 KiB chunk), `require_agent` (answer 406 to a User-Agent
    without that text, as manythings.org does to non-browsers). `requests` records (path, Range
    header), `agents` the User-Agent of each request."""

    CHUNK = 16384

    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.requests: list[tuple[str, str | None]] = []
        self.ignore_range = False
        self.drop_after: int | None = None
        self.chunked = False
        self.delay = 0.0
        self.require_agent: str | None = None
        self.agents: list[str] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                rng = self.headers.get("Range")
                outer.requests.append((self.path, rng))
                agent = self.headers.get("User-Agent") or ""
                outer.agents.append(agent)
                if outer.require_agent is not None and outer.require_agent not in agent:
                    self.send_error(406)
                    return
                body = outer.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                start = 0
                if rng and not outer.ignore_range:
                    start = int(re.match(r"bytes=(\d+)-$", rng)[1])
                    if start >= len(body):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(body)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                else:
                    self.send_response(200)
                payload = body[start:]
                if outer.chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                else:
                    self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if outer.drop_after is not None:
                    self.close_connection = True
                if outer.chunked:
                    wire = self.chunks(payload, outer.drop_after)
                else:
                    wire = payload[:outer.drop_after]
                try:
                    for i in range(0, len(wire), RangeServer.CHUNK):
                        self.wfile.write(wire[i:i + RangeServer.CHUNK])
                        if outer.delay:
                            time.sleep(outer.delay)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client was killed

            @staticmethod
            def chunks(payload: bytes, drop_after: int | None) -> bytes:
                """`payload` in chunked transfer encoding; cut after `drop_after` body bytes,
                inside a chunk announced whole and without the closing empty chunk."""
                wire, sent = bytearray(), 0
                for i in range(0, len(payload), RangeServer.CHUNK):
                    piece = payload[i:i + RangeServer.CHUNK]
                    wire += b"%x\r\n" % len(piece)
                    if drop_after is not None and sent + len(piece) > drop_after:
                        return bytes(wire + piece[:drop_after - sent])
                    wire += piece + b"\r\n"
                    sent += len(piece)
                return bytes(wire + b"0\r\n\r\n")

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,),
                                       daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"

    def __enter__(self) -> "RangeServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="session")
def sshd(tmp_path_factory):
    """An OpenSSH server (Debian's openssh-server) on 127.0.0.1 at a free port that lets this user
    in with a key made here, and a HOME whose known_hosts has its host key (so ssh and DVC check
    it): a namespace of host, port, user, key, home. Stopped by its PID at the end."""
    import getpass
    import socket
    import types

    exe = shutil.which("sshd") or "/usr/sbin/sshd"
    if not os.path.exists(exe):  # a test that asks for it is marked service("sshd")
        service_missing("sshd", "no sshd here (Debian: apt-get install openssh-server)")
    d = tmp_path_factory.mktemp("sshd")
    for key in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", key, "-f",
                        str(d / key)], check=True)
    (d / "authorized_keys").write_text((d / "client_key.pub").read_text())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (d / "sshd_config").write_text(f"""Port {port}
ListenAddress 127.0.0.1
HostKey {d}/host_key
PidFile {d}/sshd.pid
AuthorizedKeysFile {d}/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
# the test's files live under /tmp, which is world-writable
StrictModes no
Subsystem sftp internal-sftp
""")
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # privilege separation directory
    home = d / "home"
    (home / ".ssh").mkdir(parents=True)
    host_key = (d / "host_key.pub").read_text().split()
    (home / ".ssh" / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_key[0]} {host_key[1]}\n")
    log = open(d / "sshd.log", "wb")
    proc = subprocess.Popen([exe, "-D", "-e", "-f", str(d / "sshd_config")], stdout=log,
                            stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 15
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"sshd did not start: {(d / 'sshd.log').read_text()[-2000:]}")
            time.sleep(0.1)
    try:
        yield types.SimpleNamespace(host="127.0.0.1", port=port, user=getpass.getuser(),
                                    key=d / "client_key", home=home)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
