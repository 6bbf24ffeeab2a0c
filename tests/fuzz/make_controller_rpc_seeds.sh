#!/usr/bin/env bash
# Encodes the controller RPC fuzzer's seed sessions, written as text protos under
# seeds/controller_rpc_fuzzer/ (readable, reviewable), into the binary corpus
# corpus/controller_rpc_fuzzer/ with the system protoc. Run after editing a seed.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=tests/fuzz/corpus/controller_rpc_fuzzer
mkdir -p "$out"
for src in tests/fuzz/seeds/controller_rpc_fuzzer/*.txtpb; do
  name=$(basename "$src" .txtpb)
  grep -v '^#' "$src" | protoc --proto_path=. --encode=xhc.fuzz.RpcSession \
    tests/fuzz/controller_rpc.proto > "$out/$name"
  echo "$out/$name: $(stat -c %s "$out/$name") bytes"
done
