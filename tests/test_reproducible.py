"""Outputs that should be reproducible are (issue 14, class 5): no wall-clock time in a
content-hashed output, and outputs with the modes the user's umask gives."""

from __future__ import annotations

import os
import stat

from conftest import MIRROR, need_mirror
from s2s.layout import AnalyzePaths
from s2s.stages import analyze as stage
from s2s.config import CorpusRef, DataConfig
from s2s.stages import download as download_stage
from s2s.model.seq2seq import RNNConfig
from helpers import tiny_analysis_project


def test_the_analysis_stage_writes_the_same_bytes_twice(tmp_path):
    prepared, vocab_dir, models_dir = tiny_analysis_project(tmp_path, {
        name: RNNConfig(num_layers=1, hidden_size=8, embed_size=6, reverse_source=reverse)
        for name, reverse in (("fwd", False), ("rev", True))})
    runs = []
    for i in range(2):
        out = tmp_path / f"analysis{i}"
        stage.main(AnalyzePaths(prepared=prepared, vocab=vocab_dir, models=models_dir, out=out),
                   models=["fwd", "rev"], phrases=[("A man is watching a woman.",)],
                   sentences=3, max_position=8, min_length=3, batch_size=2, bins=10)
        runs.append({p.name: p.read_bytes() for p in sorted(out.iterdir())})
    assert "analysis.json" in runs[0] and b"seconds" not in runs[0]["analysis.json"]
    assert runs[0] == runs[1]


def test_corpus_folders_get_the_mode_of_the_umask(tmp_path):
    need_mirror()
    old = os.umask(0o022)  # the process's own umask decides (s2s.io changes nothing at import)
    try:
        data = DataConfig(train=(CorpusRef("wmt14.giga_fren", 10),),
                          dev=(CorpusRef("wmt.newstest2013", 10),),
                          test=CorpusRef("wmt14.newstest2014", 10))
        out = tmp_path / "raw"
        download_stage.main(data, out_dir=out, mirror=MIRROR)
    finally:
        os.umask(old)
    folders = [p for p in out.iterdir() if p.is_dir()]
    assert len(folders) == 3
    for folder in folders:
        assert stat.S_IMODE(folder.stat().st_mode) == 0o755, folder  # mkdtemp gave 0700
        for f in folder.rglob("*"):
            assert stat.S_IMODE(f.stat().st_mode) & 0o044 == 0o044, f
    assert stat.S_IMODE((out / "manifest.json").stat().st_mode) == 0o644
