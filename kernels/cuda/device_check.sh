#!/usr/bin/env bash
# The one script a lent GPU machine runs (at most about 5 minutes), in stages:
#   gpu          the card and driver (nvidia-smi)
#   build        a standalone binary with nvcc + g++ only (no Bazel, no Abseil: the CPU
#                reference is compiled against the tiny shim in check/shim)
#   correctness  every CUDA op forward and backward against the CPU reference
#   bandwidth    the card's ceilings (copy, cuBLAS bf16 GEMM) and each fused xHC launch's
#                bandwidth as a fraction of the measured copy bandwidth
#   bundle       the xhc bundle (runtime/control/bundle), when XHC_BUNDLE_DIR names one: a
#                2-worker job on the executor's stream path (--device host) on this machine
#   model_step, training, pipeline, xhc_check
#                reported as not built: there is no CUDA device or GPU model in the runtime yet
# After each stage its log lands in RESULTS_DIR and stages.tsv / summary.json are rewritten,
# so a run cut short still reports what it reached. It ends with one table and one JSON
# object. Without a GPU: one line saying that nothing was proved, exit 3.
#
# usage: kernels/cuda/device_check.sh [RESULTS_DIR] [--no-bench] [--sanitize] [--bazel]
#   RESULTS_DIR default $OUT (the device tool's folder that comes back), else
#               /tmp/xhc_device_check
#   --no-bench  correctness only
#   --sanitize  afterwards the correctness checks under compute-sanitizer memcheck
#               (out-of-bounds and misaligned accesses; capped at XHC_SANITIZE_TIMEOUT s)
#   --bazel     afterwards `bazel test //kernels/cuda/...` if bazel and Abseil exist
# env: CUDA_HOME (default /usr/local/cuda), XHC_CHECK_OUT (build dir, default
#   /tmp/xhc_cuda_check), XHC_CHECK_TIMEOUT (seconds for each run stage, default 120),
#   XHC_BUNDLE_DIR (an unpacked xhc bundle). Sets XHC_STRICT_GPU=1 for what it runs.
# Exit: 0 every stage that ran passed; 1 a stage failed (or the driver fails); 2 the build
# failed; 3 no CUDA device (the binary says "no CUDA device ...: nothing was proved").
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT" || exit 2
CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
NVCC="${NVCC:-$CUDA_HOME/bin/nvcc}"
OUT="${XHC_CHECK_OUT:-/tmp/xhc_cuda_check}"
TIMEOUT="${XHC_CHECK_TIMEOUT:-120}"
RUN_BAZEL=0
RUN_SANITIZE=0
SANITIZE_TIMEOUT="${XHC_SANITIZE_TIMEOUT:-150}"
RESULTS="${OUT:-/tmp/xhc_device_check}"
BENCH=1
for arg in "$@"; do
  case "$arg" in
    --no-bench) BENCH=0 ;;
    --bazel) RUN_BAZEL=1 ;;
    --sanitize) RUN_SANITIZE=1 ;;
    -*) echo "unknown argument: $arg" >&2; exit 2 ;;
    *) RESULTS="$arg" ;;
  esac
done
export XHC_STRICT_GPU=1
mkdir -p "$RESULTS"
: >"$RESULTS/stages.tsv"
GPU_NAME="none"

# stage NAME STATUS SECONDS DETAIL: records a stage, rewrites the summary.
json_escape() { sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' <<<"$1" | tr -d '\n'; }
stage() {
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$RESULTS/stages.tsv"
  {
    printf '{"gpu": "%s", "stages": [' "$(json_escape "$GPU_NAME")"
    local first=1 name status secs detail
    while IFS=$'\t' read -r name status secs detail; do
      [[ $first -eq 1 ]] || printf ', '
      first=0
      printf '{"name": "%s", "status": "%s", "seconds": %s, "detail": "%s"}' "$name" "$status" \
        "$secs" "$(json_escape "$detail")"
    done <"$RESULTS/stages.tsv"
    printf ']}\n'
  } >"$RESULTS/summary.json"
}
finish() {  # finish EXIT_CODE: the table and the JSON, then exit
  echo "== summary ($RESULTS)"
  printf '%-12s %-10s %8s  %s\n' stage status seconds detail
  while IFS=$'\t' read -r name status secs detail; do
    printf '%-12s %-10s %8s  %s\n' "$name" "$status" "$secs" "$detail"
  done <"$RESULTS/stages.tsv"
  cat "$RESULTS/summary.json"
  exit "$1"
}
not_built() {
  local name
  for name in model_step training pipeline xhc_check; do
    stage "$name" not_built 0 "no CUDA device or GPU model in the runtime yet (nothing to run)"
  done
}

if command -v nvidia-smi >/dev/null; then
  GPU_NAME=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)
  stage gpu passed 0 "$GPU_NAME"
else
  stage gpu skipped 0 "no nvidia-smi"
fi
if [[ ! -x "$NVCC" ]]; then
  echo "device_check: no nvcc at $NVCC (set CUDA_HOME)" >&2
  stage build failed 0 "no nvcc at $NVCC"
  finish 2
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
if [[ $ok -ne 1 ]]; then
  echo "device_check: compile failed" >&2
  stage build failed $(( $(date +%s) - start )) "compile failed"
  finish 2
fi
# nvcc links cudart statically by default; cuBLAS from the toolkit, found through rpath.
if ! "$NVCC" -o "$OUT/xhc_cuda_check" "$OUT"/*.o -L"$CUDA_HOME/lib64" -lcublas \
    -Xlinker -rpath -Xlinker "$CUDA_HOME/lib64"; then
  echo "device_check: link failed" >&2
  stage build failed $(( $(date +%s) - start )) "link failed"
  finish 2
fi
echo "== built in $(( $(date +%s) - start )) s"
stage build passed $(( $(date +%s) - start )) "$("$NVCC" --version | tail -1)"

echo "== correctness"
t0=$(date +%s)
timeout "$TIMEOUT" "$OUT/xhc_cuda_check" --no-bench 2>&1 | tee "$RESULTS/correctness.log"
rc=${PIPESTATUS[0]}
line=$(grep -E "^correctness:|^no CUDA device|^CUDA driver error" "$RESULTS/correctness.log" | tail -1)
if [[ $rc -eq 3 ]]; then
  stage correctness skipped 0 "no CUDA device (the line above)"
  not_built
  finish 3
elif [[ $rc -eq 124 ]]; then
  stage correctness timed_out "$TIMEOUT" "cut at ${TIMEOUT}s: $line"
  rc=1
else
  stage correctness "$([[ $rc -eq 0 ]] && echo passed || echo failed)" $(( $(date +%s) - t0 )) "$line"
fi
if [[ $BENCH -eq 1 ]]; then
  echo "== bandwidth"
  t0=$(date +%s)
  timeout "$TIMEOUT" "$OUT/xhc_cuda_check" --no-correctness 2>&1 | tee "$RESULTS/bandwidth.log"
  brc=${PIPESTATUS[0]}
  detail=$(grep -E "^ceilings:" "$RESULTS/bandwidth.log" | head -1)
  stage bandwidth "$([[ $brc -eq 0 ]] && echo passed || echo failed)" $(( $(date +%s) - t0 )) \
    "${detail:-no ceilings line} (table in bandwidth.log)"
  [[ $brc -eq 0 ]] || rc=1
fi
if [[ -n "${XHC_BUNDLE_DIR:-}" && -x "${XHC_BUNDLE_DIR}/xhc" ]]; then
  echo "== bundle: a 2-worker job on the executor's stream path (host device)"
  t0=$(date +%s)
  job="$RESULTS/bundle_job"
  mkdir -p "$job"
  for i in $(seq 1 300); do echo "Line $i of a corpus for the bundle's smoke job."; done >"$job/corpus.txt"
  printf '%s\n' "model: {d_model: 32, n_layers: 2, n_heads: 2, n_kv_heads: 1, seq_len: 32," \
    "  residual: {type: xhc, n_streams: 16, n_active: 4, n_fixed: 2, conv_kernels: [4, 8, 12]}}" \
    "train: {steps: 3, batch_size: 2, microbatches: 2, seed: 7, eval_every: 0}" \
    "data: {train: $job/corpus.txt}" "pipeline: {schedule: 1f1b, workers: 2}" >"$job/tiny.yaml"
  if timeout 120 "$XHC_BUNDLE_DIR/xhc" launch --config "$job/tiny.yaml" --out "$job/run" \
      --device host >"$RESULTS/bundle.log" 2>&1; then
    stage bundle passed $(( $(date +%s) - t0 )) "xhc launch --device host from the bundle"
  else
    stage bundle failed $(( $(date +%s) - t0 )) "see bundle.log"
    rc=1
  fi
else
  stage bundle skipped 0 "XHC_BUNDLE_DIR names no unpacked bundle"
fi
not_built

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
finish $rc
