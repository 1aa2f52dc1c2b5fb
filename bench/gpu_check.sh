#!/usr/bin/env bash
# The GPU check: everything this project runs on CUDA, on one GPU with no network, in at most
# 9 minutes (sized for an H200). Prepare it where there is a network: `bench/gpu_pack.sh` puts
# the data mirror's files it reads and the wheels the GPU machine's Python lacks into .device/.
#
#   1. pytest -m cuda: each architecture's train step under each precision, the dtypes that ran,
#      the loss against F.cross_entropy, fp32 against bf16, two NCCL ranks' gradients;
#   2. bench/gpu.py: cells lstm and peephole at the paper's size in fp32 and bf16 (target words/s,
#      MFU against the measured and nominal peaks, peak memory, projected 7.5-epoch time);
#   3. the smoke profile's whole DAG on CUDA (bench/gpu_dag.py);
#   4. 150 steps of the default profile's reversed_1 on CUDA beside its CPU twin's loss curve.
#
# Writes check.log (all of it), gpu_bench.json, twin_cpu.csv and twin_cuda.csv to $OUT (default
# gpu-check-out/). Exit status: 2 and one line where torch sees no CUDA device; else the number
# of parts that failed.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
OUT="${OUT:-$ROOT/gpu-check-out}"
PY="${PYTHON:-python3}"
export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null
then
  echo "bench/gpu_check.sh: no CUDA device ($("$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -1)); this check needs one" >&2
  exit 2
fi

mkdir -p "$OUT"
exec > >(tee "$OUT/check.log") 2>&1
if ls .device/wheels/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --target /tmp/s2s-site \
    .device/wheels/*.whl || { echo "could not install .device/wheels"; exit 3; }
  export PYTHONPATH="$PYTHONPATH:/tmp/s2s-site"
fi
export S2S_MIRROR="${S2S_MIRROR:-$ROOT/.device/mirror}"
WORK="$(mktemp -d /tmp/s2s-gpu-check.XXXXXX)"
FAILED=0
START=$SECONDS

part() {  # part NAME SECONDS COMMAND...: run with a time limit, report its status and time
  local name="$1" limit="$2" t0=$SECONDS rc
  shift 2
  echo "=== $name (limit ${limit}s, at $((SECONDS - START))s)"
  timeout -k 10 "$limit" "$@"
  rc=$?
  echo "=== $name: $([ $rc -eq 0 ] && echo ok || echo "FAILED (exit $rc)") in $((SECONDS - t0))s"
  [ $rc -eq 0 ] || FAILED=$((FAILED + 1))
  return $rc
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
"$PY" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "cuDNN", torch.backends.cudnn.version(), "on", torch.cuda.get_device_name())'
nproc

# The default profile's data, then its CPU twin in the background while the GPU parts run.
part "default profile data" 60 "$PY" bench/gpu_dag.py "$WORK/default" --profile default \
  --device cpu --only vocab --jobs 4
"$PY" bench/gpu_twin.py train "$WORK/default" --steps 150 --device cpu --threads 8 \
  --out "$OUT/twin_cpu.csv" > "$WORK/twin_cpu.log" 2>&1 &
TWIN=$!

CUDA_TESTS=$(grep -l "mark.cuda" tests/test_*.py | tr '\n' ' ')
[ -n "$CUDA_TESTS" ] || { echo "no test module is marked cuda"; exit 4; }
part "pytest -m cuda" 120 "$PY" -m pytest -m cuda -o addopts="" -p no:cacheprovider -q \
  -x --durations=10 $CUDA_TESTS
part "bench/gpu.py, paper size" 240 "$PY" bench/gpu.py --size paper --cells lstm,peephole \
  --modes fp32,bf16,bf16r --steps 12 --warmup 3 --json "$OUT/gpu_bench.json"
part "reversed_1 on CUDA, 150 steps" 60 "$PY" bench/gpu_twin.py train "$WORK/default" \
  --steps 150 --device cuda --out "$OUT/twin_cuda.csv"
part "smoke DAG on CUDA" 150 "$PY" bench/gpu_dag.py "$WORK/smoke" --profile smoke \
  --device cuda --jobs 8

echo "=== the CPU twin (started at the beginning)"
if wait $TWIN; then
  cat "$WORK/twin_cpu.log"
  part "CUDA against CPU, loss per step" 30 "$PY" bench/gpu_twin.py compare \
    "$OUT/twin_cpu.csv" "$OUT/twin_cuda.csv"
else
  cat "$WORK/twin_cpu.log"; echo "=== the CPU twin FAILED"; FAILED=$((FAILED + 1))
fi
echo "=== done in $((SECONDS - START))s, $FAILED part(s) failed"
exit $FAILED
