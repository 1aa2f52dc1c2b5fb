#!/usr/bin/env bash
# The paper-size model on one CUDA GPU: words/s in fp32 and bf16, MFU, memory, projected
# training time (bench/gpu.py). Under 8 minutes on an A100/H100-class GPU; fails with exit
# status 2 and a one-line message where torch sees no CUDA device.
#   bench/gpu.sh [--steps N] [--batch B] [--modes fp32,bf16]
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3
exec timeout 480 "$PY" bench/gpu.py "$@"
