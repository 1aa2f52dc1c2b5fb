#!/usr/bin/env bash
# The GPU check: everything this project runs on CUDA, on one GPU with no network, within one
# deadline of GPU_CHECK_BUDGET seconds (default 480) counted from the script's start: the CUDA
# probes, the pip install and nvidia-smi included; a run ends at most 5 s after it (the kill
# grace of the part the deadline cuts). A single-shot script: ONE run per device session. A
# session has 900 s of device time in all, the machine's start (minutes) included, so one run
# fits and a second does not; shrinking it to fit two (about 300 s each) would cut the paper-size
# benchmark's rows or `pytest -m cuda` (about 150 s on its own), which are what it is for. To
# look again at one part, run that part's command alone (below). Prepare it
# where there is a network: `S2S_MIRROR=../shared/data bench/gpu_pack.sh` puts the data mirror's
# files it reads and the wheels the GPU machine's Python lacks into .device/, which the device
# call must carry (`carry: [".device"]`). The parts, most valuable first, each given at most
# its limit and never more than the time left (a part with under 10 s left is skipped, and
# counts as cut by the deadline, as a part its limit stops does):
#
#   1. bench/gpu.py at the paper's size: cell lstm in fp32, bf16 and with the bf16 cuDNN
#      recurrence; the paper's peephole cell in bf16 as a wavefront (CUDA's default) and layer
#      after layer (target words/s, MFU, memory, torch/CUDA/cuDNN versions, the RNN kernels
#      that ran, the precision check of step 1);
#   2. pytest -m cuda: each architecture's step under each precision, the dtypes that ran,
#      a whole train step's waits for the device, the fused SGD, one NCCL rank;
#   3. 150 steps of the default profile's reversed_1 on CUDA, against its CPU twin (started in
#      the background after part 1): the loss of the last 50 steps within 3%;
#   4. the smoke profile's whole DAG on CUDA (bench/gpu_dag.py), with the time that is left.
#
# Writes check.log (all of it), gpu_bench.json (row by row), pytest.xml, twin_cpu.csv and
# twin_cuda.csv to $OUT (default gpu-check-out/). Exit status: 0 every part passed; 1 a part
# failed; 4 none failed but the deadline cut or skipped one (its last line says which); 2 and
# one line where torch sees no CUDA device; 3 and one line where .device/ is missing.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
OUT="${OUT:-$ROOT/gpu-check-out}"
PY="${PYTHON:-python3}"
DEVICE_DIR="${S2S_DEVICE_DIR:-$ROOT/.device}"
BUDGET="${GPU_CHECK_BUDGET:-480}"
export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
START=$SECONDS  # the deadline counts from here: the probes and set-up below are in the budget

if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null
then
  echo "bench/gpu_check.sh: no CUDA device ($("$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -1)); this check needs one" >&2
  exit 2
fi
if [ ! -f "$DEVICE_DIR/mirror/README.md" ] || ! ls "$DEVICE_DIR"/wheels/*.whl >/dev/null 2>&1; then
  echo "bench/gpu_check.sh: $DEVICE_DIR holds no mirror/README.md and wheels/*.whl: run S2S_MIRROR=../shared/data bench/gpu_pack.sh where there is a network, and carry .device to this machine" >&2
  exit 3
fi

FAILED=0  # parts that failed
CUT=0  # parts the deadline stopped (timeout's 124, or killed after it: 137) or left no time for

left() { echo $((BUDGET - (SECONDS - START))); }

part() {  # part NAME LIMIT COMMAND...: at most LIMIT seconds and the time left; status and time
  local name="$1" limit="$2" t0=$SECONDS rc room
  shift 2
  room=$(left)
  [ "$room" -lt "$limit" ] && limit=$room
  if [ "$limit" -lt 10 ]; then
    echo "=== $name: SKIPPED (${room}s left of ${BUDGET}s)"
    CUT=$((CUT + 1))
    return 1
  fi
  echo "=== $name (limit ${limit}s, at $((SECONDS - START))s)"
  timeout -k 5 "$limit" "$@"
  rc=$?
  if [ $rc -eq 0 ]; then
    echo "=== $name: ok in $((SECONDS - t0))s"
  elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    echo "=== $name: CUT by its limit of ${limit}s"
    CUT=$((CUT + 1))
  else
    echo "=== $name: FAILED (exit $rc) in $((SECONDS - t0))s"
    FAILED=$((FAILED + 1))
  fi
  return $rc
}

main() {
  "$PY" -m pip install -q --no-index --no-deps --no-compile --target /tmp/s2s-site \
    "$DEVICE_DIR"/wheels/*.whl || { echo "could not install $DEVICE_DIR/wheels"; return 1; }
  export PYTHONPATH="$PYTHONPATH:/tmp/s2s-site"
  export S2S_MIRROR="${S2S_MIRROR:-$DEVICE_DIR/mirror}"
  local work twin=""
  work="$(mktemp -d /tmp/s2s-gpu-check.XXXXXX)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
  "$PY" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "cuDNN", torch.backends.cudnn.version(), "on", torch.cuda.get_device_name())'
  echo "$(nproc) CPUs; budget ${BUDGET}s from the start, $(left)s left for the parts"

  part "bench/gpu.py, paper size" 170 "$PY" bench/gpu.py --size paper \
    --cells lstm,peephole,peephole-layers --modes bf16,bf16r,fp32 --fp32-cells lstm \
    --steps 10 --warmup 3 \
    --json "$OUT/gpu_bench.json"
  # the default profile's data, then its CPU twin beside the parts that follow
  if part "default profile data" 40 "$PY" bench/gpu_dag.py "$work/default" --profile default \
      --device cpu --only ids --jobs 4; then
    timeout -k 5 "$(( $(left) > 60 ? $(left) - 60 : 1 ))" "$PY" bench/gpu_twin.py train \
      "$work/default" --steps 150 --device cpu --threads 4 --out "$OUT/twin_cpu.csv" \
      > "$work/twin_cpu.log" 2>&1 &
    twin=$!
  fi
  local cuda_tests
  cuda_tests=$(grep -l "mark.cuda" tests/test_*.py | tr '\n' ' ')
  part "pytest -m cuda" 150 "$PY" -m pytest -m cuda -o addopts="" -p no:cacheprovider -q \
    --durations=15 --junitxml="$OUT/pytest.xml" $cuda_tests
  if [ -n "$twin" ]; then
    part "reversed_1 on CUDA, 150 steps" 45 "$PY" bench/gpu_twin.py train "$work/default" \
      --steps 150 --device cuda --out "$OUT/twin_cuda.csv"
    echo "=== the CPU twin (started after the benchmark; bounded by the deadline)"
    local rc=0
    wait "$twin" || rc=$?
    cat "$work/twin_cpu.log"
    if [ $rc -eq 0 ]; then
      part "CUDA against CPU, loss per step" 20 "$PY" bench/gpu_twin.py compare \
        "$OUT/twin_cpu.csv" "$OUT/twin_cuda.csv" --margin 0.03
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
      echo "=== the CPU twin: CUT by the deadline"
      CUT=$((CUT + 1))
    else
      echo "=== the CPU twin: FAILED (exit $rc)"
      FAILED=$((FAILED + 1))
    fi
  fi
  part "smoke DAG on CUDA" 150 "$PY" bench/gpu_dag.py "$work/smoke" --profile smoke \
    --device cuda --jobs 8
  echo "=== done in $((SECONDS - START))s of ${BUDGET}s, $FAILED part(s) failed, $CUT cut by the deadline"
  if [ "$FAILED" -gt 0 ]; then return 1; elif [ "$CUT" -gt 0 ]; then return 4; fi
}

mkdir -p "$OUT"
# a pipeline, not `exec > >(tee ...)`: the script ends only when tee has written every line
main 2>&1 | tee "$OUT/check.log"
exit "${PIPESTATUS[0]}"
