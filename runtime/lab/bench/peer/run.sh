#!/usr/bin/env bash
# Peer benchmark: this runtime against PyTorch 2.x (torch.distributed.pipelining) on the same
# job. One command from a clean clone (after ./setup.sh):
#
#   bash runtime/lab/bench/peer/run.sh [peer.py flags, e.g. --only xhc --sizes 128]
#
# Installs the pinned PyTorch into runtime/lab/bench/peer/.venv (once; only its CPU path is used), builds
# //:xhc, then runs runtime/lab/bench/peer/peer.py under the machine's CPU lock (/tmp/xhc-build.lock, the
# one builds take, so no build shares the cores with the timing). Prints one JSON object and
# a markdown table; the runs are kept in runtime/lab/bench/peer/runs/.
set -euo pipefail
cd "$(dirname "$0")/../../../.."

# 2.15.0: 2.9 added ScheduleDualPipeV beside Schedule1F1B and ScheduleZBVZeroBubble, but on
# gloo its pipeline set-up fails (2.9 sends an int64 where the peer receives a float32; 2.10,
# and by their code up to 2.13, make a V rank send to itself, which gloo refuses); 2.15 runs
# all three.
TORCH_VERSION=2.15.0
VENV=runtime/lab/bench/peer/.venv
PY=$VENV/bin/python
LOCK=/tmp/xhc-build.lock

if ! "$PY" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" \
    2>/dev/null; then
  echo "runtime/lab/bench/peer: installing torch==$TORCH_VERSION into $VENV" >&2
  python3 -m venv "$VENV"
  # The Linux x86-64 wheel on PyPI is the CUDA build: its CUDA dependencies (several GB)
  # are needed for `import torch` even though only the CPU is used. Where PyTorch's own
  # CPU-only wheel index is reachable, pointing PIP_INDEX_URL at it avoids them.
  "$PY" -m pip install --quiet "torch==$TORCH_VERSION" "numpy==2.4.6" "PyYAML==6.0.4" \
    "xxhash==4.1.0"
fi

flock -o "$LOCK" bazel build --disk_cache=/tmp/xhc-disk-cache //:xhc >&2
OUT=runtime/lab/bench/peer/runs/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$OUT"
start=$(date +%s)
flock -o "$LOCK" "$PY" runtime/lab/bench/peer/peer.py --xhc bazel-bin/xhc --out "$OUT" "$@" |
  tee "$OUT/report.txt"
echo "runtime/lab/bench/peer: $(( $(date +%s) - start )) s; report in $OUT/report.txt" >&2
