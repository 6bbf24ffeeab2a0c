#!/bin/bash
# model_bench at a tiny size: its JSON names the CPU and the skinny-GEMM path that really ran
# (forced here, so a hard-coded name would fail), and every variant asked for has a row with
# its ratios.
set -euo pipefail
bench=runtime/lab/bench/model_bench
for isa in generic avx2; do
  if [ "$isa" = avx2 ] && ! grep -qw avx2 /proc/cpuinfo; then
    echo "SKIP avx2: this CPU has no AVX2"
    continue
  fi
  out=$(XHC_CPU_ISA=$isa OMP_NUM_THREADS=1 "$bench" --d_model 64 --layers 1 --seq 16 --batch 1 \
        --rounds 1 --variants vanilla,xhc 2>/dev/null)
  echo "$out"
  grep -q "\"skinny_isa\": \"$isa\"" <<<"$out" || { echo "FAIL: skinny_isa is not $isa"; exit 1; }
  grep -Eq '"cpu": "[^"]+"' <<<"$out" || { echo "FAIL: no cpu name"; exit 1; }
  grep -q '"xhc": {"step_ms"' <<<"$out" || { echo "FAIL: no xhc row"; exit 1; }
  grep -Eq '"xhc": \{[^}]*"best_vs_vanilla": [0-9.]+' <<<"$out" || { echo "FAIL: no best ratio"; exit 1; }
done
echo PASS
