#!/usr/bin/env bash
# The trainer's step at the paper's size on one CUDA GPU, cells lstm and peephole in fp32 and bf16:
# words/s, MFU, memory, projected training time (bench/gpu.py). About 5 minutes on an H200; fails
# with exit status 2 and a one-line message where torch sees no CUDA device.
#   bench/gpu.sh [--cells lstm,peephole] [--modes fp32,bf16] [--steps N] [--batch B] [--json F]
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3
exec timeout "${GPU_BENCH_TIMEOUT:-480}" "$PY" bench/gpu.py "$@"
