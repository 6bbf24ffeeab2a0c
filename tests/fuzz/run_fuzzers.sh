#!/usr/bin/env bash
# Builds the libFuzzer targets (bazel --config=fuzz: clang-14, ASan + UBSan) and runs each
# for a bounded time, starting from its checked-in seed corpus (tests/fuzz/corpus/TARGET/,
# never written to: new inputs go to a scratch directory). Fails on any crash, sanitizer
# report, leak, timeout or out-of-memory; the input that caused it is saved under
# $XHC_FUZZ_ARTIFACTS/TARGET/ (default /tmp/xhc-fuzz-artifacts).
#
#   tests/fuzz/run_fuzzers.sh [SECONDS_PER_TARGET [TARGET...]]   (default 30 s, every target)
#
# Memory bounds (stated in tests/fuzz/README.md): one allocation over XHC_FUZZ_MALLOC_LIMIT_MB
# (default 256 MiB) is a failure, so a header that claims 2^60 bytes must be refused before
# anything is allocated; the whole process may not exceed XHC_FUZZ_RSS_LIMIT_MB (default
# 1024 MiB).
# Extra bazel flags (e.g. --disk_cache=...) come from XHC_BAZEL_FLAGS.
set -euo pipefail
cd "$(dirname "$0")/../.."

seconds=${1:-30}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(config_fuzzer controller_rpc_fuzzer latest_fuzzer manifest_fuzzer safetensors_fuzzer
           torch_csv_fuzzer)
fi
malloc_limit_mb=${XHC_FUZZ_MALLOC_LIMIT_MB:-256}
rss_limit_mb=${XHC_FUZZ_RSS_LIMIT_MB:-1024}
artifacts=${XHC_FUZZ_ARTIFACTS:-/tmp/xhc-fuzz-artifacts}
# shellcheck disable=SC2206
bazel_flags=(${XHC_BAZEL_FLAGS:-})

labels=()
for t in "${targets[@]}"; do labels+=("//tests/fuzz:$t"); done
bazel build --config=fuzz "${bazel_flags[@]}" "${labels[@]}"
bin="$(bazel info --config=fuzz "${bazel_flags[@]}" bazel-bin)/tests/fuzz"

num_passed=0
failed=()
for t in "${targets[@]}"; do
  scratch=$(mktemp -d "/tmp/xhc-fuzz-${t}.XXXXXX")
  mkdir -p "$artifacts/$t"
  echo "fuzz: $t for ${seconds} s (malloc limit ${malloc_limit_mb} MiB, rss limit ${rss_limit_mb} MiB)"
  set +e
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$bin/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb="$rss_limit_mb" \
    -malloc_limit_mb="$malloc_limit_mb" -print_final_stats=1 \
    -artifact_prefix="$artifacts/$t/" "$scratch" "tests/fuzz/corpus/$t" \
    > "$scratch.log" 2>&1
  rc=$?
  set -e
  tail -n 12 "$scratch.log"
  if [ "$rc" -eq 0 ]; then
    num_passed=$((num_passed + 1))
    echo "fuzz: $t: passed ($(ls "$scratch" | wc -l) new inputs, not kept)"
  else
    failed+=("$t")
    echo "fuzz: $t: FAILED (exit $rc); full log $scratch.log; inputs in $artifacts/$t/:"
    ls -l "$artifacts/$t/" || true
  fi
  rm -rf "$scratch"
done
echo "fuzz: ${num_passed} of ${#targets[@]} fuzz targets passed${failed:+; failed: ${failed[*]}}"
[ ${#failed[@]} -eq 0 ]
