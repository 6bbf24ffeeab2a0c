#!/usr/bin/env bash
# Per-kernel time of the device check's benchmark under Nsight Compute (a lent GPU only):
#   kernels/cuda/profile.sh [OUT_DIR]
# Builds the check binary (device_check.sh --no-bench, which also runs the correctness
# checks), profiles one timed run of every launch (--reps 1) with ncu, and prints one line
# per kernel: launches, median duration, DRAM bytes read + written and the rate they imply.
# ncu is told to leave the clocks alone (--clock-control none). The raw CSV lands in OUT_DIR.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT_DIR="${1:-/tmp/xhc_cuda_profile}"
mkdir -p "$OUT_DIR"
export XHC_CHECK_OUT="${XHC_CHECK_OUT:-/tmp/xhc_cuda_check}"
bash "$ROOT/kernels/cuda/device_check.sh" --no-bench > "$OUT_DIR/check.log" 2>&1 || {
  tail -20 "$OUT_DIR/check.log"; echo "profile: the device check failed; nothing profiled"; exit 1; }
grep -E "correctness:|no CUDA device" "$OUT_DIR/check.log"
grep -q "no CUDA device" "$OUT_DIR/check.log" && exit 0
NCU="${NCU:-$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)}"
if [[ -z "$NCU" || ! -x "$NCU" ]]; then echo "profile: no ncu found (set NCU)"; exit 2; fi
timeout "${XHC_PROFILE_TIMEOUT:-300}" "$NCU" --clock-control none \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
    --csv --page raw "$XHC_CHECK_OUT/xhc_cuda_check" --no-correctness --reps 1 \
    > "$OUT_DIR/ncu.csv" 2> "$OUT_DIR/ncu.err"
rc=$?
[[ $rc -ne 0 ]] && { echo "profile: ncu exit $rc"; tail -5 "$OUT_DIR/ncu.err"; }
python3 "$ROOT/kernels/cuda/check/ncu_table.py" "$OUT_DIR/ncu.csv"
