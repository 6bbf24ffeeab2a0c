#!/usr/bin/env bash
# Builds the standalone device check from this tree (kernels/cuda/device_check.sh) and runs
# its correctness part: "no CUDA device" and exit 0 on a machine without a GPU, every check
# passing with one. Skips visibly when the CUDA toolkit (nvcc) is not installed.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
nvcc="${CUDA_HOME:-/usr/local/cuda}/bin/nvcc"
if [[ ! -x "$nvcc" ]]; then
  echo "[  SKIPPED ] DeviceCheckBuild.BuildsAndRuns (no nvcc at $nvcc)"
  exit 0
fi
out="${TEST_TMPDIR:-$(mktemp -d)}/device_check"
log=$(XHC_CHECK_OUT="$out" bash kernels/cuda/device_check.sh --no-bench 2>&1)
rc=$?
echo "$log" | tail -n 20
if [[ $rc -ne 0 ]]; then
  echo "FAIL: device_check.sh exited $rc (2: the build failed; 1: a check failed)"
  exit 1
fi
if ! echo "$log" | grep -qE "^no CUDA device|^correctness: ([0-9]+) of \1 checks passed"; then
  echo "FAIL: device_check.sh exited 0 without its closing line"
  exit 1
fi
[[ -x "$out/xhc_cuda_check" ]] || { echo "FAIL: no binary at $out/xhc_cuda_check"; exit 1; }
echo "PASS: device_check.sh built and ran"
