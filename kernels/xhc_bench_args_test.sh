#!/bin/bash
# xhc_bench's command line: --help prints the usage; a misspelt flag or one without its value
# stops the run (exit 2, naming it) instead of benchmarking something else; --shape and
# --rounds reach the variant table (--residual), whose JSON reports the shape that ran.
set -uo pipefail
bench=kernels/xhc_bench
fail() { echo "FAIL: $*"; exit 1; }

out=$("$bench" --help 2>&1) || fail "--help exited $?"
grep -q "^usage: xhc_bench" <<<"$out" || fail "--help printed no usage: $out"

expect_refused() {  # expect_refused MESSAGE ARGS...: exit 2, MESSAGE and the usage on stderr
  local msg=$1
  shift
  local err rc
  err=$("$bench" "$@" 2>&1 >/dev/null)
  rc=$?
  [ "$rc" = 2 ] || fail "'$*' exited $rc, expected 2"
  grep -qF "$msg" <<<"$err" || fail "'$*': expected '$msg' in: $err"
  grep -q "^usage: xhc_bench" <<<"$err" || fail "'$*': no usage in: $err"
}
expect_refused "unknown argument '--bogus'" --json --bogus
expect_refused "unknown argument 'model'" model
expect_refused "missing value for '--rounds'" --json --rounds
expect_refused "missing value for '--residual'" --residual

out=$(OMP_NUM_THREADS=1 "$bench" --shape model --residual mhc --rounds 1 --json 2>/dev/null) ||
  fail "the variant table at --shape model exited $?"
echo "$out"
grep -q '"tokens": 1024, "C": 512, "rounds": 1,' <<<"$out" || fail "shape or rounds not applied"
grep -Eq '"mhc": \{[^}]*"fwdbwd_ms_per_sublayer": [0-9.]+' <<<"$out" || fail "no mhc row"
echo PASS
