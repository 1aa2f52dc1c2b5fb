"""Faults, fourth round: damaged runs handed to `s2s verify` and `s2s exps`, profiles that
remove what the pipeline needs or extend without end, exports whose text settings were edited,
and data sources that are gone or refuse us. Each is a one-line error naming the file and the
key, or a result that says what it is; none a traceback or a silently wrong result. Nothing
here runs a pipeline: the published run (reports/default), hand-built exports and the loopback
server of tests/conftest.py."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from conftest import BIN, ROOT, RangeServer, make_project, run
from helpers import one_line_error, report_args, untrained_forward

PUBLISHED = ROOT / "reports" / "default"


def s2s(args, cwd: Path) -> subprocess.CompletedProcess:
    return run([str(BIN / "s2s"), *map(str, args)], cwd, check=False)


# --- s2s verify ----------------------------------------------------------------------------------


def copy_run(dest: Path) -> Path:
    dest.mkdir(parents=True)
    shutil.copy(PUBLISHED / "params.yaml", dest / "params.yaml")
    shutil.copytree(PUBLISHED / "metrics", dest / "metrics")
    return dest


def edit_train(run_dir: Path, model: str, **values) -> None:
    path = run_dir / "metrics" / "train" / f"{model}.json"
    record = json.loads(path.read_text())
    record.update(values)
    path.write_text(json.dumps(record))  # NaN and Infinity as Python's json writes them


def verdict(out: str, key: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(key + " "))


def test_verify_takes_nan_and_infinity_for_different_never_a_traceback(tmp_path):
    ref, rerun = copy_run(tmp_path / "ref"), copy_run(tmp_path / "rerun")
    edit_train(ref, "reversed_2", dev_ppl=math.nan)  # in the reference's seed group
    edit_train(ref, "reversed_3", test_ppl=math.inf)
    edit_train(rerun, "gru", test_ppl=-math.inf)  # borrows the group's spread
    assert "NaN" in (ref / "metrics/train/reversed_2.json").read_text()
    proc = s2s(["verify", rerun, "--against", ref], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]  # the claims' verdicts are the same
    assert "Traceback" not in proc.stderr

    def published(model, key):
        return f"{json.loads((rerun / f'metrics/train/{model}.json').read_text())[key]:.4g}"

    assert verdict(proc.stdout, "train.reversed_2.dev_ppl").split()[1:4] == [
        "nan", published("reversed_2", "dev_ppl"), "different"]
    assert verdict(proc.stdout, "train.reversed_3.test_ppl").split()[1:4] == [
        "inf", published("reversed_3", "test_ppl"), "different"]
    assert "different" in verdict(proc.stdout, "train.gru.test_ppl")
    # the other seeds still give the group its spread: an unchanged number is identical and a
    # moved one is judged against the four finite seeds
    assert verdict(proc.stdout, "train.reversed_1.dev_ppl").endswith("identical")
    assert "3 different" in proc.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("side", ["run", "reference"])
def test_verify_names_the_file_and_line_of_a_claims_file_cut_mid_json(tmp_path, side):
    ref, rerun = copy_run(tmp_path / "ref"), copy_run(tmp_path / "rerun")
    damaged = (rerun if side == "run" else ref) / "metrics" / "claims.json"
    text = damaged.read_text()
    damaged.write_text(text[: len(text) // 2])
    proc = s2s(["verify", rerun, "--against", ref], tmp_path)
    one_line_error(proc, f"{damaged.relative_to(tmp_path)}:", "not valid JSON", status=2)


def test_verify_names_the_key_of_a_verdict_that_is_not_a_string(tmp_path):
    ref, rerun = copy_run(tmp_path / "ref"), copy_run(tmp_path / "rerun")
    path = rerun / "metrics" / "claims.json"
    claims = json.loads(path.read_text())
    first = next(iter(claims))
    claims[first] = 1.5
    path.write_text(json.dumps(claims))
    proc = s2s(["verify", rerun, "--against", ref], tmp_path)
    one_line_error(proc, "rerun/metrics/claims.json", f"'{first}' must be a verdict", status=2)


# --- s2s exps ------------------------------------------------------------------------------------


def test_exps_marks_the_cells_of_a_damaged_summary_and_names_the_file(tmp_path):
    """Against DVC's own `dvc exp show --json` of a project whose workspace summary.json is cut
    mid-JSON (the committed revision has none: its cells stay `-`)."""
    repo = make_project(tmp_path / "repo")
    (repo / "metrics").mkdir()
    (repo / "metrics" / "summary.json").write_text('{"ppl": {"forward": 12.3')
    (repo / "metrics" / "claims.json").write_text('{"ensemble": "holds"}')
    proc = s2s(["exps", "--width", "100"], repo)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = {line.split()[0]: line.split()[1:] for line in proc.stdout.splitlines()
            if line.startswith("  ")}
    assert rows["forward"] == ["!", "-"] and rows["reversed_5"] == ["!", "-"]  # ppl and BLEU
    assert rows["ensemble"] == ["holds", "-"]  # claims.json is readable
    note = next(line for line in proc.stdout.splitlines() if line.startswith("! workspace: "))
    assert note.startswith("! workspace: metrics/summary.json: ")
    assert "JSONFileCorruptedError" in note
    assert "metrics/summary.json" in proc.stderr  # also said where a script sees it


def test_exps_marks_a_summary_of_the_wrong_shape_naming_the_key():
    from s2s import experiments

    def rev(sha, summary):
        return {"rev": sha, "data": {"params": {"params.yaml": {"data": {}}},
                                     "metrics": {experiments.SUMMARY_FILE: {"data": summary}}}}

    exps = experiments.experiments([rev("workspace", {"ppl": {"forward": "12.3"}}),
                                    rev("a" * 40, {"ppl": {"forward": 11.0}})])
    text = experiments.render(exps)
    assert "  forward" in text and text.split("  forward", 1)[1].split()[:2] == ["!", "11.00"]
    assert "! workspace: metrics/summary.json: 'ppl.forward' must be a number, got \"12.3\"" \
        in text


# --- profiles ------------------------------------------------------------------------------------


def profiles(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "profiles", tmp_path / "profiles")
    return tmp_path / "profiles"


@pytest.mark.parametrize("key, says", [
    ("train.epochs", "the code's default 7.5; {base} says 1.0"),
    ("model.hidden_size", "each architecture's own default; {base} says 32"),
    ("evaluate", "the code's default {'min_group': 100"),
    ("translate", "none: the file must have it; {base} says {'batch_size': 32"),
    ("systems.forward.beams", "none: the file must have it; {base} says [12]"),
])
def test_a_profile_cannot_remove_a_key_the_pipeline_reads(tmp_path, key, says):
    from s2s import config

    folder = profiles(tmp_path)
    base = folder / "smoke.yaml"
    (folder / "x.yaml").write_text(f"extends: smoke\nremove: [{key}]\nprofile: x\n")
    with pytest.raises(config.ConfigError) as e:
        config.load(folder / "x.yaml")
    message = str(e.value)
    assert message.startswith(f"{folder / 'x.yaml'}: 'remove[0]' names '{key}', a key the "
                              f"pipeline reads: params.yaml would not show the value that runs")
    assert says.replace("{base}", str(base)) in message, message
    assert "\n" not in message


def test_a_profile_may_remove_entries_and_overrides_that_fall_back_to_the_file(tmp_path):
    from s2s import config

    folder = profiles(tmp_path)
    (folder / "x.yaml").write_text(
        "extends: smoke\nprofile: x\nremove: [models.transformer.train, resources.default, "
        "report.table1.bahdanau, models.baseline.hidden_size]\n")
    p = config.load(folder / "x.yaml")
    assert "bahdanau" not in p.report.table1
    assert p.model_config("baseline").hidden_size == 32  # `model`'s, where the override was 16
    smoke = config.load(folder / "smoke.yaml")
    assert smoke.model_config("baseline").hidden_size == 16


def test_an_extends_chain_longer_than_the_bound_is_one_line_not_a_recursion_error(tmp_path):
    from s2s import config

    folder = profiles(tmp_path)
    previous = "smoke"
    for i in range(1100):
        (folder / f"c{i}.yaml").write_text(f"extends: {previous}\n")
        previous = f"c{i}"
    with pytest.raises(config.ConfigError) as e:
        config.load(folder / "c1099.yaml")
    assert str(e.value).startswith(f"{folder / 'c1099.yaml'}: its 'extends' chain is longer "
                                   f"than {config.MAX_EXTENDS} profiles (c1099.yaml -> "
                                   f"c1098.yaml -> ... -> c1083.yaml)"), e.value
    # at the bound: c13 -> ... -> c0 -> smoke -> default, 16 files
    assert config.MAX_EXTENDS == 16 and config.load(folder / "c13.yaml").profile == "smoke"
    with pytest.raises(config.ConfigError, match="chain is longer than 16 profiles"):
        config.load(folder / "c14.yaml")
    proc = s2s(["profile", "c1099"], tmp_path)
    one_line_error(proc, "'extends' chain is longer than", status=1)


# --- exports: text settings bound to the checkpoints --------------------------------------------


def build_export(tmp_path: Path, *, record_text: bool, words=("The", "man", "rides", "."),
                 lowercase: bool = False):
    """System `forward` of the smoke profile (`prepare.lowercase` as given), untrained,
    exported: its checkpoint saved as the trainer saves it (with the text record) or as earlier
    versions did (without)."""
    from s2s import config, exporting

    params = config.load(ROOT / "profiles" / "smoke.yaml")
    params = dataclasses.replace(params, prepare=dataclasses.replace(params.prepare,
                                                                     lowercase=lowercase))
    models, vocab_dir = untrained_forward(params, tmp_path, words=tuple(words),
                                          record_text=record_text)
    prepared = tmp_path / "prepared"
    prepared.mkdir()
    for lang in ("en", "fr"):
        (prepared / f"train.tok.{lang}").write_text("The man rides .\n")
    out = tmp_path / "exports" / "forward"
    exporting.export(params, "forward", models_dir=models, vocab_dir=vocab_dir,
                     prepared_dir=prepared, out_dir=out)
    return out


@pytest.mark.parametrize("edit, says", [
    (lambda raw: raw["prepare"].update(lowercase=True),
     "'prepare.lowercase' is True, but {ckpt} was trained with False"),
    (lambda raw: raw["model"].update(hidden_size=48),
     "{ckpt}: 'hidden_size' is 32 in the checkpoint but 48 in params 'models.forward'")])
def test_an_export_of_params_that_are_not_the_checkpoints_is_refused_before_writing(
        tmp_path, edit, says):
    """The record is written from params: params edited since training would give an export
    that only the machine it is copied to refuses."""
    import yaml

    from s2s import checkpoint, config, exporting

    raw = config.resolved(ROOT / "profiles" / "smoke.yaml")  # its `extends` merged
    assert raw["model"]["hidden_size"] == 32 and raw["prepare"]["lowercase"] is False
    models, vocab_dir = untrained_forward(config.load(ROOT / "profiles" / "smoke.yaml"), tmp_path,
                                          words=("The", "man"), record_text=True)
    edit(raw)
    (tmp_path / "edited.yaml").write_text(yaml.safe_dump(raw))
    for lang in ("en", "fr"):
        (tmp_path / f"train.tok.{lang}").write_text("The man .\n")
    out = tmp_path / "exports" / "forward"
    with pytest.raises(checkpoint.CheckpointError) as e:
        exporting.export(config.load(tmp_path / "edited.yaml"), "forward", models_dir=models,
                         vocab_dir=vocab_dir, prepared_dir=tmp_path, out_dir=out)
    assert says.format(ckpt=models / "forward" / "model.pt") in str(e.value)
    assert not (tmp_path / "exports").exists()  # nothing written


def test_an_export_stopped_by_a_full_disk_leaves_the_previous_export_and_no_temporary(
        tmp_path):
    """A full disk while a checkpoint is copied (simulated by a file-size limit: the write fails
    with EFBIG, as a full disk's ENOSPC fails it) stops the export naming the file; the
    temporary folder and its partial copies are removed; the previous export stays as it was."""
    import errno
    import resource
    import signal

    from s2s import config, exporting

    out = build_export(tmp_path, record_text=True)  # the previous export
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    old_style = out.parent / ".forward.tmp"  # what an export before this one's left on a failure
    (old_style / "models").mkdir(parents=True)
    (old_style / "models" / "forward.pt").write_bytes(b"partial")
    model = tmp_path / "models" / "forward" / "model.pt"
    limit = model.stat().st_size // 2
    assert max(p.stat().st_size for p in (tmp_path / "vocab").iterdir()) < limit
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the error, not the signal
    try:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
        with pytest.raises(OSError) as e:
            exporting.export(config.load(ROOT / "profiles" / "smoke.yaml"), "forward",
                             models_dir=tmp_path / "models", vocab_dir=tmp_path / "vocab",
                             prepared_dir=tmp_path / "prepared", out_dir=out)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)
    assert e.value.errno == errno.EFBIG and "forward.pt" in str(e.value), e.value
    assert sorted(p.name for p in out.parent.iterdir()) == ["forward"]  # no temporary left
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def forge(folder: Path, change) -> None:
    """Edit export.json and recompute its record digests, as a careful forger would."""
    from s2s.exporting import record_digests

    path = folder / "export.json"
    meta = json.loads(path.read_text())
    change(meta)
    meta["record_sha256"] = record_digests(meta)
    path.write_text(json.dumps(meta, indent=2))


def test_an_export_whose_model_config_was_forged_names_its_record_not_params(tmp_path):
    from s2s import api, checkpoint

    folder = build_export(tmp_path, record_text=True)
    forge(folder, lambda m: m["models"]["forward"].update(hidden_size=48))
    with pytest.raises(checkpoint.CheckpointError) as e:
        api.load_export(folder)
    assert str(e.value) == (f"{folder / 'models' / 'forward.pt'}: 'hidden_size' is 32 in the "
                            f"checkpoint but 48 in {folder / 'export.json'} 'models.forward': it "
                            "is another model; the record was edited; export the system again")


@pytest.mark.parametrize("change, says", [
    (lambda m: m.update(beams=[]), "export.json: 'beams' must list at least one width"),
    (lambda m: m.update(beams=[12, 0]), "export.json: 'beams[1]' must be >= 1"),
    (lambda m: m["translate"].update(max_len_a=1e30), "'translate.max_len_a' must be <= 100"),
])
def test_an_export_whose_beams_or_lengths_were_forged_is_refused_naming_the_key(
        tmp_path, change, says):
    """An empty beam list failed in max() ('max() arg is an empty sequence'), a huge max_len_a
    as 'max_len must be >= 1, got [-9223372036854775803]' (the product overflowed)."""
    from s2s import api
    from s2s.exporting import ExportError

    folder = build_export(tmp_path, record_text=True)
    forge(folder, change)
    with pytest.raises(ExportError) as e:
        api.load_export(folder)
    assert says in str(e.value), str(e.value)


def test_an_export_for_cuda_on_a_machine_without_names_its_record_and_the_cpu_flag(tmp_path):
    import torch

    from s2s import api
    from s2s.device import NoCudaError

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    folder = build_export(tmp_path, record_text=True)
    forge(folder, lambda m: m["translate"].update(device="cuda"))
    with pytest.raises(NoCudaError) as e:
        api.load_export(folder)
    said = str(e.value)
    assert said.startswith(f"{folder / 'export.json'}: 'translate.device' is 'cuda' but torch")
    assert said.endswith("; or translate on the CPU: --device cpu")
    assert api.load_export(folder, device="cpu").device.type == "cpu"


def test_an_export_whose_text_settings_were_forged_is_refused_naming_the_key(tmp_path):
    from s2s import api
    from s2s.exporting import ExportError

    folder = build_export(tmp_path, record_text=True)
    assert api.load_export(folder).lowercase is False
    forge(folder, lambda m: m["text"].update(lowercase=True))
    with pytest.raises(ExportError) as e:
        api.load_export(folder)
    assert "export.json: 'text.lowercase' is True, but" in str(e.value)
    assert "models/forward.pt was trained with False" in str(e.value)
    forge(folder, lambda m: m["text"].update(lowercase=False, src_lang="de"))
    with pytest.raises(ExportError, match=r"'text\.src_lang' is 'de', not this version's 'en'"):
        api.load_export(folder)


def test_a_checkpoint_without_the_record_is_judged_by_its_vocabularies(tmp_path):
    from s2s import api
    from s2s.exporting import ExportError

    cased = build_export(tmp_path / "cased", record_text=False)
    assert api.load_export(cased).lowercase is False  # its vocabularies have capitals
    forge(cased, lambda m: m["text"].update(lowercase=True))
    with pytest.raises(ExportError, match=r"'text\.lowercase' is True, but the vocabularies .* "
                                          r"have capital letters"):
        api.load_export(cased)
    lower = build_export(tmp_path / "lower", record_text=False, words=("the", "man", "."),
                         lowercase=True)
    assert api.load_export(lower).lowercase is True
    forge(lower, lambda m: m["text"].update(lowercase=False))
    with pytest.raises(ExportError, match=r"'text\.lowercase' is False, but .* no capital"):
        api.load_export(lower)


def test_a_checkpoint_text_record_of_another_shape_is_refused(tmp_path):
    from s2s import checkpoint

    with pytest.raises(ValueError, match="a text record has the keys"):
        checkpoint.save(tmp_path / "x.pt", None, src_vocab=None, tgt_vocab=None,  # type: ignore
                        text={"lowercase": True})
    assert not (tmp_path / "x.pt").exists()


# --- data sources that are gone or refuse us -----------------------------------------------------


@pytest.fixture
def server():
    with RangeServer() as s:
        yield s


def at(cid: str, url: str, **remote_changes):
    """The registry entry of `cid` with every remote moved to `url` (its checksums and
    User-Agent kept unless changed)."""
    from s2s.data.sources import CORPORA, NetworkSource

    entry = CORPORA[cid]

    def move(parts):
        return tuple(dataclasses.replace(p, remote=dataclasses.replace(
            p.remote, url=url, **remote_changes)) for p in parts)

    return dataclasses.replace(entry, network=NetworkSource(en=move(entry.network.en),
                                                            fr=move(entry.network.fr)))


def test_tatoeba_is_fetched_with_a_user_agent_the_site_accepts(tmp_path, server, monkeypatch,
                                                                mirror):
    from s2s.config import CorpusRef, DataConfig
    from s2s.data import download
    from s2s.data.sources import CORPORA
    from s2s.stages import download as download_stage

    server.files["/fra-eng.zip"] = (mirror / "tatoeba-anki-fra-eng-2017-09-29" /
                                    "fra-eng.zip").read_bytes()
    server.require_agent = "Mozilla/5.0"  # what manythings.org wants: a browser
    monkeypatch.setitem(CORPORA, "tatoeba.fra_eng", at("tatoeba.fra_eng",
                                                       server.url("/fra-eng.zip")))
    monkeypatch.setattr(download, "network_available", lambda urls, timeout=3.0: True)
    data = DataConfig(train=(CorpusRef("tatoeba.fra_eng"),), dev=(), test=CorpusRef(
        "tatoeba.fra_eng"))
    manifest = download_stage.main(data, out_dir=tmp_path / "raw", mirror=None,
                                   cache_dir=tmp_path / "cache")
    assert manifest["corpora"]["tatoeba.fra_eng"]["pairs"] == 142787
    assert server.agents and all(a.startswith("Mozilla/5.0 (") for a in server.agents)

    # the project's own User-Agent is refused: one line saying so and what can stand in
    monkeypatch.setitem(CORPORA, "tatoeba.fra_eng", at("tatoeba.fra_eng",
                                                       server.url("/fra-eng.zip"),
                                                       user_agent=None))
    with pytest.raises(download.DownloadError) as e:
        download_stage.main(data, out_dir=tmp_path / "raw2", mirror=None,
                            cache_dir=tmp_path / "cache2")
    message = str(e.value)
    assert "HTTP 406" in message and "the server refuses this client (User-Agent 's2s-repro/" \
        in message
    assert "The local mirror's 2017-09-29 snapshot can stand in (set S2S_MIRROR)" in message
    assert "\n" not in message


def test_the_paper_profile_with_its_host_gone_stops_in_one_line_naming_the_alternative(
        tmp_path, monkeypatch):
    from s2s import config
    from s2s.data import download
    from s2s.data.sources import CORPORA
    from s2s.stages import download as download_stage

    with socket.socket() as s:  # a free loopback port, closed again: a host that is gone
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for cid in ("lium.selected", "lium.ntst1213", "lium.ntst14"):
        monkeypatch.setitem(CORPORA, cid, at(cid, f"http://127.0.0.1:{port}/{cid}.tgz"))
    # A machine with network (statmt.org answers): the gone host itself is still probed, on
    # the closed loopback port. (Without any network, both options are named instead:
    # tests/test_download.py.)
    monkeypatch.setattr(download, "network_available", lambda urls, timeout=3.0: True)
    data = config.load(ROOT / "profiles" / "paper.yaml").data
    with pytest.raises(download.DownloadError) as e:
        download_stage.main(data, out_dir=tmp_path / "raw", mirror=None,
                            cache_dir=tmp_path / "cache")
    message = str(e.value)
    assert message.startswith("127.0.0.1 does not answer (needed by lium.selected, "
                              "lium.ntst1213, lium.ntst14); nothing was fetched. Schwenk's LIUM "
                              "host")
    assert "`s2s profile paper_statmt`" in message and "not the paper's selection" in message
    assert "no mirror and no network" not in message and "\n" not in message
    assert not (tmp_path / "raw").exists()


@pytest.mark.parametrize("cid, side, checksum", [
    ("wmt.newstest2012", "en",
     "cda0f85309e8ea4c9c2bc142cd795fb2771a5939ed5b4527b525dae05fa0c145"),  # dev.tgz sha256
    ("lium.selected", "en", "15861dbac4a52c8c75561d5027062d7d"),  # bitexts.tgz md5
    ("multi30k.test_2018_flickr", "fr", "a64563e986438ed731a6713027c36bfd"),  # sacreBLEU's md5
])
def test_the_published_checksums_are_checked(tmp_path, server, cid, side, checksum):
    from s2s.data.files import DownloadError
    from s2s.data.http import fetch
    from s2s.data.sources import CORPORA

    remote = getattr(CORPORA[cid].network, side)[0].remote
    server.files["/x"] = b"not the published file\n"
    with pytest.raises(DownloadError, match=rf"does not match the registry \(expected {checksum};"):
        fetch(dataclasses.replace(remote, url=server.url("/x")), tmp_path, retries=0)


def test_paper_statmt_is_the_papers_setting_on_statmt_data_and_says_so(tmp_path):
    from s2s import config
    from s2s.data.sources import CORPORA

    paper = config.load(ROOT / "profiles" / "paper.yaml")
    ours = config.load(ROOT / "profiles" / "paper_statmt.yaml")
    assert (ours.vocab, ours.model, ours.train, ours.models) == \
        (paper.vocab, paper.model, paper.train, paper.models)
    # the paper's selection as it is; whole corpora, not selected, filtered as the default's
    default = config.load(ROOT / "profiles" / "default.yaml").prepare
    assert (paper.prepare.max_ratio, paper.prepare.dedup) == (1e6, False)
    assert ours.prepare == dataclasses.replace(default, max_len=paper.prepare.max_len) != \
        paper.prepare
    wmt14 = config.load(ROOT / "profiles" / "wmt14.yaml")
    assert [r.corpus for r in ours.data.train] == [r.corpus for r in wmt14.data.train]
    assert all(r.max_lines is None for r in ours.data.train)  # whole, not wmt14's slices
    assert (ours.data.dev, ours.data.test) == (wmt14.data.dev, wmt14.data.test)
    refs = [*ours.data.train, *ours.data.dev, ours.data.test]
    assert {r.url.split("/")[2] for ref in refs for r in CORPORA[ref.corpus].network.remotes} \
        == {"www.statmt.org"}
    assert "not the paper's 12M-pair selection" in ours.report.title
    assert "NOT the paper's training data" in (ROOT / "profiles" / "paper_statmt.yaml").read_text()
    shutil.copytree(ROOT / "profiles", tmp_path / "profiles")
    (tmp_path / "params.yaml").write_text("profile: x\n")
    assert s2s(["profile", "paper_statmt"], tmp_path).returncode == 0
    proc = s2s(["check", "--out", "p.json"], tmp_path)
    assert proc.returncode == 0, proc.stderr


# --- s2s report on a damaged copy of the published run -----------------------------------------


def test_the_report_refuses_a_claims_file_without_a_claim_naming_it(tmp_path):
    p = tmp_path / "run"
    shutil.copytree(PUBLISHED, p)
    path = p / "outputs" / "claims" / "claims.json"
    record = json.loads(path.read_text())
    record["claims"] = [c for c in record["claims"] if c["key"] != "cost"]
    path.write_text(json.dumps(record))
    proc = s2s(report_args(p, tmp_path / "out"), tmp_path)
    line = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert str(path) in line and "no verdict for the claim(s) cost of paper.yaml" in line
    assert not (tmp_path / "out" / "report.md").exists()


def test_the_report_refuses_a_forget_summary_without_a_traced_model(tmp_path):
    """Its rows of one model gone, the report would have said that model is no LSTM."""
    p = tmp_path / "run"
    shutil.copytree(PUBLISHED, p)
    path = p / "analysis" / "forget_summary.csv"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(ln for ln in lines if not ln.startswith("reversed_1,")))
    proc = s2s(report_args(p, tmp_path / "out"), tmp_path)
    line = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert f"{path}: no rows of reversed_1, whose forget gates analysis.json says were traced" \
        in line
    assert not (tmp_path / "out" / "report.md").exists()


@pytest.mark.parametrize("damage", ["header only", "absent"])
def test_the_report_says_where_figure_3_or_its_length_drop_has_no_rows(tmp_path, damage):
    """Neither a table left out without a word nor a figure without curves captioned as if it
    had them."""
    p = tmp_path / "run"
    shutil.copytree(PUBLISHED, p)
    for name in ("length_drop.csv", "figure3.csv"):
        path = p / "metrics" / name
        if damage == "absent":
            path.unlink()
        else:
            path.write_text(path.read_text().splitlines()[0] + "\n")
        out = tmp_path / f"out_{name}"
        proc = s2s(report_args(p, out), tmp_path)
        assert proc.returncode == 0, proc.stderr[-2000:]
        md = (out / "report.md").read_text(encoding="utf-8")
        section = md[md.index("## Figure 3"):md.index("\n## ", md.index("## Figure 3") + 1)]
        dropped = "The drop from the shortest to the longest sentences of ensemble5"
        if name == "length_drop.csv":  # Figure 3's groups still there
            assert dropped in section and "No Figure 3" not in section
            assert "Does the fixed vector fade" not in section
        else:
            assert "No Figure 3: the evaluate stage's groups" in section
            assert dropped not in section  # said once
        if damage == "absent":
            assert f"absent: {path}" in proc.stderr


def test_an_export_over_a_folder_of_the_user_s_is_refused_and_an_earlier_export_replaced(
        tmp_path):
    """export replaced whatever was at exports/<system> (a user's notes, anything); now only an
    earlier export, and the refusal comes before anything is written."""
    from s2s import config, exporting
    from s2s.io import OutDirError

    out = build_export(tmp_path, record_text=True)
    first = (out / "export.json").read_bytes()
    params = config.load(ROOT / "profiles" / "smoke.yaml")
    again = dict(models_dir=tmp_path / "models", vocab_dir=tmp_path / "vocab",
                 prepared_dir=tmp_path / "prepared")
    assert again["models_dir"].is_dir() and again["vocab_dir"].is_dir()
    exporting.export(params, "forward", out_dir=out, **again)  # an earlier export: replaced
    assert sorted(p.name for p in out.iterdir()) == ["en.tsv", "export.json", "fr.tsv", "models"]
    assert (out / "export.json").read_bytes() == first
    (out / "notes.txt").write_text("mine\n")
    with pytest.raises(OutDirError, match=rf"^--out {out}: holds notes.txt, which the export "
                                          r"does not write"):
        exporting.export(params, "forward", out_dir=out, **again)
    assert (out / "notes.txt").read_text() == "mine\n"
    with pytest.raises(OutDirError, match="is .*models, an input of the export"):
        exporting.export(params, "forward", out_dir=again["models_dir"], **again)
