#!/usr/bin/env bash
# The bundle runs in a root that holds nothing but itself: no /usr, no /etc, no shell, no
# libraries but its own. make_bundle.sh packs the xhc binary; the test then starts, inside a
# chroot in a fresh user + mount + PID namespace (with /proc mounted, as any machine has it),
# `xhc --help` and a 2-worker pipeline job through the bundle's own loader, and checks that the
# archive leaves room for the source tree in what a device run carries (64 MiB).
# Skips visibly where the machine cannot make unprivileged namespaces.
set -uo pipefail
xhc="$1"
here="$(cd "$(dirname "$0")" && pwd)"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
fail() {
  echo "FAIL: $*"
  exit 1
}

if ! unshare -r -m -p -f true 2>/dev/null; then
  if [[ "${XHC_STRICT:-0}" == "1" ]]; then
    fail "XHC_STRICT=1 and this machine cannot make user + mount + PID namespaces"
  fi
  echo "[  SKIPPED ] Bundle.RunsInABareRoot (no unprivileged user + mount + PID namespaces here)"
  exit 0
fi

bash "$here/make_bundle.sh" "$xhc" "$tmp/xhc-bundle" "$tmp/xhc-bundle.tar.xz" || fail "make_bundle.sh"
size=$(stat -c %s "$tmp/xhc-bundle.tar.xz")
# A device run carries the working tree and its carried paths, 64 MiB in all: the archive may
# take 48 MiB, which leaves the source tree (about 2.5 MB today) six times its size.
limit=$((48 * 1024 * 1024))
echo "archive: $size bytes (limit $limit); unpacked: $(du -sb "$tmp/xhc-bundle" | cut -f1) bytes"
((size <= limit)) || fail "the bundle archive is $size bytes, over $limit"
grep -q "^left to the machine: the GPU driver" "$tmp/xhc-bundle/MANIFEST" || fail "MANIFEST"

# The root: the archive unpacked, plus a tiny job (config and corpus) and the mount points.
root="$tmp/root"
rm -rf "$root"
mkdir -p "$root"
tar -C "$tmp" -xJf "$tmp/xhc-bundle.tar.xz" --transform 's,^xhc-bundle,root,' || fail "unpack"
mkdir -p "$root/proc" "$root/tmp" "$root/job"
for i in $(seq 1 400); do
  echo "Fortune $i: the state that crosses a stage boundary is sixteen streams wide."
done >"$root/job/corpus.txt"
cat >"$root/job/tiny.yaml" <<'YAML'
model:
  vocab_size: 256
  d_model: 32
  n_layers: 2
  n_heads: 2
  n_kv_heads: 1
  seq_len: 32
  residual: {type: xhc, n_streams: 16, n_active: 4, n_fixed: 2, conv_kernels: [4, 8, 12]}
train: {steps: 3, batch_size: 2, microbatches: 2, seed: 7, eval_every: 0}
data: {train: /job/corpus.txt}
pipeline: {schedule: 1f1b, workers: 2}
YAML
stray=$(cd "$root" && find . -mindepth 1 -maxdepth 1 | sort | tr '\n' ' ')
[[ "$stray" == "./MANIFEST ./bin ./job ./lib ./proc ./tmp ./xhc " ]] || fail "the root holds more: $stray"
[[ ! -e "$root/bin/sh" && ! -e "$root/usr" && ! -e "$root/etc" ]] || fail "the root has a system"

in_root() {  # in_root ARGS...: xhc ARGS inside the bare root, through the bundle's loader
  XHC_BUNDLE=/ timeout 240 unshare -r -m -p -f --mount-proc="$root/proc" \
    chroot "$root" /lib/ld-linux-x86-64.so.2 --library-path /lib /bin/xhc "$@"
}
help=$(in_root --help 2>&1) || fail "xhc --help in the bare root: $help"
grep -q "launch" <<<"$help" || fail "xhc --help printed no commands: $help"
echo "ok: xhc --help in the bare root"

log=$(in_root launch --config /job/tiny.yaml --out /tmp/run 2>&1)
rc=$?
echo "$log" | tail -n 8
((rc == 0)) || fail "xhc launch in the bare root exited $rc"
[[ $(grep -c "registered as rank" <<<"$log") -eq 2 ]] || fail "2 workers did not register"
steps=$(grep -c '"step"' "$root/tmp/run/metrics.jsonl" 2>/dev/null || echo 0)
((steps >= 3)) || fail "metrics.jsonl has $steps step records, expected 3"
echo "ok: a 2-worker pipeline job ran in the bare root ($steps step records)"

# The launcher, as a user on a machine with a shell runs it.
"$tmp/xhc-bundle/xhc" --help >/dev/null 2>&1 || fail "the bundle's launcher script"
echo "PASS: the bundle runs in a root holding nothing but itself"
