#!/usr/bin/env bash
# The one command for a lent GPU (the device tool's `run`, from the repository root):
#   bash kernels/cuda/device_session.sh [OUT_DIR]
# 1. the card and driver; 2. device_check.sh --sanitize: build, every op against the CPU
# reference, the ceilings and the xHC table, then the checks again under memcheck; 3. a second
# timing run of the same binary (the spread between runs); 4. profile.sh: each kernel's time
# and DRAM traffic under Nsight Compute. Logs land in OUT_DIR (default $OUT, the device
# tool's folder that comes back, else /tmp/xhc_device_session); the summary is printed last.
# About 30 s on an H200 after the machine's start. Exit: device_check.sh's status.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DIR="${1:-${OUT:-/tmp/xhc_device_session}}"
mkdir -p "$DIR"
if [[ -z "${CUDA_HOME:-}" ]]; then
  nvcc_path="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
  CUDA_HOME="$(dirname "$(dirname "$(readlink -f "$nvcc_path")")")"
  export CUDA_HOME
fi
export COMPUTE_SANITIZER="${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo "$CUDA_HOME/bin/compute-sanitizer")}"
export XHC_CHECK_OUT="${XHC_CHECK_OUT:-/tmp/xhc_cuda_check}"
if command -v nvidia-smi > /dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader \
    > "$DIR/gpu.txt" 2>&1
else
  echo "no nvidia-smi" > "$DIR/gpu.txt"
fi
bash "$ROOT/kernels/cuda/device_check.sh" "$DIR/check" --sanitize > "$DIR/check.log" 2>&1
rc=$?
if grep -q "^no CUDA device" "$DIR/check.log"; then
  grep "^no CUDA device" "$DIR/check.log"
  echo "device_session: nothing ran on a GPU; logs in $DIR"
  exit "$rc"
fi
cp "$XHC_CHECK_OUT/memcheck.log" "$DIR/" 2>/dev/null
if [[ -x "$XHC_CHECK_OUT/xhc_cuda_check" ]]; then
  timeout 60 "$XHC_CHECK_OUT/xhc_cuda_check" --no-correctness > "$DIR/bench2.log" 2>&1
  bash "$ROOT/kernels/cuda/profile.sh" "$DIR/prof" > "$DIR/profile.txt" 2>&1
fi
echo "== $(cat "$DIR/gpu.txt")"
grep -E "^FAIL|^correctness:|ERROR SUMMARY|^memcheck|^CUDA error|^device_check" "$DIR/check.log"
sed -n '/^ceilings/,/^MLP/p' "$DIR/check.log"
echo "== second timing run"
sed -n '/^xHC launch/,/^MLP/p' "$DIR/bench2.log" 2>/dev/null
# Every kernel but the input fills: the plain sublayer's (F's) kernels too, since a slow one
# there flatters every ratio (a one-thread-per-column RMSNorm weight gradient took 1.78 ms of
# F: docs/design/cuda-kernels.md), and cuBLAS's, which carry part of the xHC launches.
echo "== per kernel"
grep -v "FillUniform" "$DIR/profile.txt" 2>/dev/null
echo "device_session: device_check.sh exit $rc; logs in $DIR"
exit $rc
