#!/usr/bin/env bash
# Packs what bench/gpu_check.sh needs on a GPU machine with no network into .device/ (ignored by
# git; the device tool carries it): the data mirror's files of the smoke and default profiles and
# the wheels of the packages the GPU machine's Python lacks (built for its CPython 3.12).
#   S2S_MIRROR=../shared/data bench/gpu_pack.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3
: "${S2S_MIRROR:?set S2S_MIRROR to the data mirror}"
rm -rf .device && mkdir -p .device/mirror .device/wheels
PYTHONPATH=src "$PY" - "$S2S_MIRROR" <<'PYEOF'
import shutil, sys
from pathlib import Path
from s2s.config import load
from s2s.data.sources import CORPORA
mirror, out = Path(sys.argv[1]), Path(".device/mirror")
files = {"README.md"}
for profile in ("smoke", "default"):
    p = load(Path("profiles") / f"{profile}.yaml")
    for ref in (*p.data.train, *p.data.dev, p.data.test):
        entry = CORPORA[ref.corpus].mirror
        files |= {entry.en.path, entry.fr.path}
for f in sorted(files):
    (out / f).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(mirror / f, out / f)
print(f"{len(files)} mirror files -> {out}")
PYEOF
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .device/wheels "sacremoses>=0.1.1" "ruamel.yaml>=0.17"
du -sh .device
