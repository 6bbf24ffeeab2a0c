#!/usr/bin/env bash
# Builds the standalone device check from this tree (kernels/cuda/device_check.sh) and runs
# its correctness part. Without a GPU the binary must say, in one line, that nothing was
# proved, and exit 3 (never 0); with one, every check must pass. No nvcc: a visible skip,
# which XHC_STRICT_GPU=1 turns into a failure.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
nvcc="${CUDA_HOME:-/usr/local/cuda}/bin/nvcc"
if [[ ! -x "$nvcc" ]]; then
  if [[ "${XHC_STRICT_GPU:-0}" == "1" ]]; then
    echo "FAIL: XHC_STRICT_GPU=1 and there is no nvcc at $nvcc"
    exit 1
  fi
  echo "[  SKIPPED ] DeviceCheckBuild.BuildsAndRuns (no nvcc at $nvcc)"
  exit 0
fi
out="${TEST_TMPDIR:-$(mktemp -d)}/device_check"
results="${TEST_TMPDIR:-$(mktemp -d)}/device_check_results"
log=$(XHC_CHECK_OUT="$out" bash kernels/cuda/device_check.sh "$results" --no-bench 2>&1)
rc=$?
echo "$log" | tail -n 20
[[ -x "$out/xhc_cuda_check" ]] || { echo "FAIL: no binary at $out/xhc_cuda_check"; exit 1; }
# The staged record: every stage it reached, as a table and as JSON that parses.
for stage in gpu build correctness model_step training pipeline xhc_check; do
  grep -q "^$stage	" "$results/stages.tsv" || { echo "FAIL: stage $stage not in stages.tsv"; exit 1; }
done
if command -v python3 >/dev/null; then
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert len(d['stages']) >= 7" \
    "$results/summary.json" || { echo "FAIL: summary.json does not parse"; exit 1; }
fi
if [[ $rc -eq 3 && $(grep -c "nothing was proved" <<<"$log") -ne 1 ]]; then
  echo "FAIL: without a GPU, 'nothing was proved' must be said in exactly one line"
  exit 1
fi
case $rc in
  0)
    if ! echo "$log" | grep -qE "^correctness: ([0-9]+) of \1 checks passed"; then
      echo "FAIL: device_check.sh exited 0 without its closing line"
      exit 1
    fi
    echo "PASS: device_check.sh built, and every check passed on the GPU" ;;
  3)
    if [[ "${XHC_STRICT_GPU:-0}" == "1" ]]; then
      echo "FAIL: XHC_STRICT_GPU=1 and the device check found no CUDA device"
      exit 1
    fi
    if ! echo "$log" | grep -qE "^no CUDA device .*nothing was proved$"; then
      echo "FAIL: exit 3 (no device) without the one line saying nothing was proved"
      exit 1
    fi
    echo "PASS: device_check.sh built; no GPU here, and it said nothing was proved (exit 3)" ;;
  *)
    echo "FAIL: device_check.sh exited $rc (2: the build failed; 1: a check or the driver failed)"
    exit 1 ;;
esac
