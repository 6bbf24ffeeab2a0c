#!/bin/bash
# pipeline_bench on one schedule for a few steps (real `xhc launch` jobs: a one-rank run and
# an R = 2 run): its JSON holds a row for the schedule asked for and no other, with the
# efficiency, the target and each rank's other threads' CPU; an unknown schedule is refused
# by name.
set -euo pipefail
bench=runtime/lab/bench/pipeline_bench
out_dir="${TEST_TMPDIR:-/tmp}/pipeline-bench-smoke"

set +e
err=$("$bench" --schedules 1f1b,gpipe_typo 2>&1 >/dev/null)
rc=$?
set -e
[ "$rc" -eq 2 ] || { echo "FAIL: an unknown schedule exited $rc, not 2"; exit 1; }
grep -q "unknown schedule 'gpipe_typo'" <<<"$err" || { echo "FAIL: error was: $err"; exit 1; }

out=$("$bench" --schedules zb1p --steps 3 --warmup 1 --side_by_side 0 --out "$out_dir")
echo "$out"
grep -Eq '"zb1p": \{"tokens_per_s": [0-9.]+' <<<"$out" || { echo "FAIL: no zb1p row"; exit 1; }
grep -Eq '"efficiency": [0-9.]+, ' <<<"$out" || { echo "FAIL: no efficiency"; exit 1; }
grep -Eq '"efficiency_target": [0-9.]+' <<<"$out" || { echo "FAIL: no target"; exit 1; }
# Each rank's other threads' CPU over its step: reported, and a fraction (the transport's
# threads move every payload, so it is above 0).
grep -Eq '"other_cpu": \[0\.[0-9]*[1-9][0-9]*, 0\.[0-9]*[1-9][0-9]*\]' <<<"$out" ||
  { echo "FAIL: no other_cpu per rank in (0, 1)"; exit 1; }
for other in 1f1b dualpipe dualpipev; do
  if grep -q "\"$other\": {" <<<"$out"; then echo "FAIL: $other ran, not asked for"; exit 1; fi
done
echo PASS
