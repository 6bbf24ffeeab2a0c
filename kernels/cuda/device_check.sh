#!/usr/bin/env bash
# One-call device check for a session with a lent H200 (or any sm_90a GPU):
#   builds a standalone binary with nvcc + g++ only (no Bazel, no Abseil: the CPU reference
#   is compiled against the tiny shim in check/shim), runs every CUDA op forward and
#   backward against the CPU reference, measures the card's ceilings (device-to-device copy,
#   cuBLAS bf16 GEMM) and prints the xHC bandwidth / sublayer-overhead table.
#
# usage: kernels/cuda/device_check.sh [--no-bench] [--sanitize] [--bazel]
#   --no-bench  correctness checks only
#   --sanitize  afterwards run the correctness checks under compute-sanitizer memcheck
#               (out-of-bounds and misaligned accesses; capped at XHC_SANITIZE_TIMEOUT s)
#   --bazel     afterwards also run `bazel test //kernels/cuda/...` if bazel and Abseil exist
# env: CUDA_HOME (default /usr/local/cuda), XHC_CHECK_OUT (build dir, default
#   /tmp/xhc_cuda_check), XHC_CHECK_TIMEOUT (seconds for the binary, default 420).
# Exit: 0 all checks passed; 1 a check failed (or the driver fails); 2 the build failed;
# 3 no CUDA device (the binary says "no CUDA device ...: nothing was proved").
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT" || exit 2
CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
NVCC="${NVCC:-$CUDA_HOME/bin/nvcc}"
OUT="${XHC_CHECK_OUT:-/tmp/xhc_cuda_check}"
TIMEOUT="${XHC_CHECK_TIMEOUT:-420}"
BIN_ARGS=()
RUN_BAZEL=0
RUN_SANITIZE=0
SANITIZE_TIMEOUT="${XHC_SANITIZE_TIMEOUT:-150}"
for arg in "$@"; do
  case "$arg" in
    --no-bench) BIN_ARGS+=(--no-bench) ;;
    --bazel) RUN_BAZEL=1 ;;
    --sanitize) RUN_SANITIZE=1 ;;
    *) echo "unknown argument: $arg" >&2; exit 2 ;;
  esac
done

if [[ ! -x "$NVCC" ]]; then
  echo "device_check: no nvcc at $NVCC (set CUDA_HOME)" >&2
  exit 2
fi
mkdir -p "$OUT"
rm -f "$OUT"/*.o  # the link takes every object here: none may be left from an older tree
echo "== build ($("$NVCC" --version | tail -1)) into $OUT"
start=$(date +%s)
# sm_90a only: the kernels target H100/H200; one architecture keeps the build ~1 minute.
NVFLAGS=(-std=c++20 -O3 -lineinfo --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a -I"$ROOT")
CXXFLAGS=(-std=c++20 -O2 -I"$ROOT" -I"$ROOT/kernels/cuda/check/shim" -I"$CUDA_HOME/include")
pids=()
for f in cuda_util xhc_forward xhc_backward_out xhc_backward_input xhc_backward_weights nn_ops \
    attention; do
  "$NVCC" "${NVFLAGS[@]}" -c "kernels/cuda/$f.cu" -o "$OUT/$f.o" &
  pids+=($!)
done
HOST_SRCS=(kernels/cuda/check/xhc_checks.cc kernels/cuda/check/nn_checks.cc
           kernels/cuda/check/device_check_main.cc kernels/cpu/xhc/xhc_types.cc
           kernels/cpu/xhc/xhc_reference.cc kernels/cpu/xhc/xhc_reference_backward.cc
           kernels/cpu/xhc/hc_reference.cc kernels/cpu/xhc/head_reference.cc)
for f in "${HOST_SRCS[@]}"; do
  g++ "${CXXFLAGS[@]}" -c "$f" -o "$OUT/$(basename "$f" .cc).host.o" &
  pids+=($!)
done
ok=1
for p in "${pids[@]}"; do wait "$p" || ok=0; done
if [[ $ok -ne 1 ]]; then echo "device_check: compile failed" >&2; exit 2; fi
# nvcc links cudart statically by default; cuBLAS from the toolkit, found through rpath.
if ! "$NVCC" -o "$OUT/xhc_cuda_check" "$OUT"/*.o -L"$CUDA_HOME/lib64" -lcublas \
    -Xlinker -rpath -Xlinker "$CUDA_HOME/lib64"; then
  echo "device_check: link failed" >&2
  exit 2
fi
echo "== built in $(( $(date +%s) - start )) s"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader

echo "== run"
timeout "$TIMEOUT" "$OUT/xhc_cuda_check" "${BIN_ARGS[@]}"
rc=$?
if [[ $rc -eq 124 ]]; then echo "device_check: binary timed out after ${TIMEOUT}s" >&2; fi

if [[ $RUN_SANITIZE -eq 1 ]]; then
  SAN="${COMPUTE_SANITIZER:-$CUDA_HOME/bin/compute-sanitizer}"
  if [[ -x "$SAN" ]]; then
    echo "== compute-sanitizer memcheck (correctness checks only, at most ${SANITIZE_TIMEOUT}s)"
    timeout "$SANITIZE_TIMEOUT" "$SAN" --tool memcheck --error-exitcode 3 \
        "$OUT/xhc_cuda_check" --no-bench > "$OUT/memcheck.log" 2>&1
    src=$?
    grep -E "ERROR SUMMARY|correctness:|Invalid|out of bounds|misaligned" "$OUT/memcheck.log" | head -20
    if [[ $src -eq 124 ]]; then
      echo "memcheck: timed out after ${SANITIZE_TIMEOUT}s (not a pass; log in $OUT/memcheck.log)"
    elif [[ $src -ne 0 ]]; then
      echo "memcheck: exit $src (log in $OUT/memcheck.log)"
      rc=1
    fi
  else
    echo "== no compute-sanitizer at $SAN: memcheck not run"
  fi
fi

if [[ $RUN_BAZEL -eq 1 ]]; then
  if command -v bazel >/dev/null && [[ -d /usr/include/absl ]]; then
    echo "== bazel test //kernels/cuda/..."
    bazel --output_base=/tmp/bazel_cuda_device test //kernels/cuda/... --test_output=errors || rc=1
  else
    echo "== bazel or Abseil missing: gtest suite not run (the standalone checks above are the same code)"
  fi
fi
exit $rc
