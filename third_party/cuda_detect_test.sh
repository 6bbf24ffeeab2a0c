#!/usr/bin/env bash
# cuda_detect.sh against fake install trees: every layout it promises to find is found, and
# every miss names what is missing. No real toolkit is needed (the fake nvcc is a script).
set -uo pipefail
detect="$(cd "$(dirname "$0")" && pwd)/cuda_detect.sh"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0

# tree NAME: a fresh empty fake root.
tree() {
  local r="$tmp/$1"
  rm -rf "$r"
  mkdir -p "$r"
  echo "$r"
}
put() {  # put ROOT PATH...: empty files (nvcc executable)
  local r="$1" p
  shift
  for p in "$@"; do
    mkdir -p "$(dirname "$r$p")"
    : >"$r$p"
    [[ "$p" == */nvcc ]] && chmod +x "$r$p"
  done
}
toolkit() {  # toolkit ROOT PREFIX: nvcc, headers, cudart and cuBLAS in PREFIX's layout
  put "$1" "$2/bin/nvcc" "$2/include/cuda_runtime.h" "$2/lib64/libcudart.so.13" \
    "$2/lib64/libcublas.so.13"
}
# run ROOT [VAR=VALUE...]: detection output, with PATH holding only the basics.
run() {
  local r="$1"
  shift
  env -i PATH="/usr/bin:/bin" XHC_CUDA_DETECT_ROOT="$r" "$@" bash "$detect"
}
expect() {  # expect CASE OUTPUT KEY VALUE
  local got
  got=$(grep "^$3=" <<<"$2" | head -1 | cut -d= -f2-)
  if [[ "$got" == "$4" ]]; then
    echo "[       OK ] $1: $3=$4"
  else
    echo "[  FAILED  ] $1: $3 is '$got', expected '$4'"
    echo "$2" | sed 's/^/    /'
    failures=$((failures + 1))
  fi
}
expect_reason() {  # expect_reason CASE OUTPUT SUBSTRING
  if grep "^reason=" <<<"$2" | grep -qF -- "$3"; then
    echo "[       OK ] $1: reason names '$3'"
  else
    echo "[  FAILED  ] $1: reason does not name '$3'"
    echo "$2" | sed 's/^/    /'
    failures=$((failures + 1))
  fi
}

# NVIDIA's runfile layout, NCCL inside the toolkit (this machine's kind today).
r=$(tree nccl_in_toolkit)
toolkit "$r" /usr/local/cuda
put "$r" /usr/local/cuda/include/nccl.h /usr/local/cuda/lib64/libnccl.so.2
out=$(run "$r")
expect nccl_in_toolkit "$out" enabled 1
expect nccl_in_toolkit "$out" nvcc "$r/usr/local/cuda/bin/nvcc"
expect nccl_in_toolkit "$out" nccl_include "$r/usr/local/cuda/include"

# The case that used to skip every CUDA test: NCCL from a -dev package in /usr/include.
r=$(tree nccl_in_usr)
toolkit "$r" /usr/local/cuda
put "$r" /usr/include/nccl.h /usr/lib/x86_64-linux-gnu/libnccl.so.2
out=$(run "$r")
expect nccl_in_usr "$out" enabled 1
expect nccl_in_usr "$out" nccl_include "$r/usr/include"
expect nccl_in_usr "$out" nccl_lib "$r/usr/lib/x86_64-linux-gnu"
expect nccl_in_usr "$out" cuda_lib "$r/usr/local/cuda/lib64"

# A versioned toolkit with no /usr/local/cuda link: the newest is taken.
r=$(tree versioned)
toolkit "$r" /usr/local/cuda-12.4
toolkit "$r" /usr/local/cuda-12.10
put "$r" /usr/include/nccl.h /usr/lib/x86_64-linux-gnu/libnccl.so
out=$(run "$r")
expect versioned "$out" enabled 1
expect versioned "$out" nvcc "$r/usr/local/cuda-12.10/bin/nvcc"

# Debian's nvidia-cuda-toolkit: nvcc in /usr/bin, everything in /usr.
r=$(tree debian)
put "$r" /usr/bin/nvcc /usr/include/cuda_runtime.h /usr/include/nccl.h \
  /usr/lib/x86_64-linux-gnu/libcudart.so /usr/lib/x86_64-linux-gnu/libcublas.so \
  /usr/lib/x86_64-linux-gnu/libnccl.so
out=$(run "$r")
expect debian "$out" enabled 1
expect debian "$out" cuda_include "$r/usr/include"
expect debian "$out" cuda_lib "$r/usr/lib/x86_64-linux-gnu"

# nvcc found on PATH only, in a folder no standard place names.
r=$(tree on_path)
toolkit "$r" /work/tk
put "$r" /work/tk/include/nccl.h /work/tk/lib64/libnccl.so
out=$(env -i PATH="$r/work/tk/bin:/usr/bin:/bin" XHC_CUDA_DETECT_ROOT="$r" bash "$detect")
expect on_path "$out" enabled 1
expect on_path "$out" nvcc "$r/work/tk/bin/nvcc"

# CUDA_HOME wins over a toolkit in the standard place; NCCL_HOME over the toolkit's NCCL.
r=$(tree homes)
toolkit "$r" /usr/local/cuda
toolkit "$r" /opt/mine
put "$r" /usr/local/cuda/include/nccl.h /usr/local/cuda/lib64/libnccl.so \
  /opt/nccl-2.21/include/nccl.h /opt/nccl-2.21/lib/libnccl.so.2
out=$(run "$r" CUDA_HOME="$r/opt/mine" NCCL_HOME="$r/opt/nccl-2.21")
expect homes "$out" nvcc "$r/opt/mine/bin/nvcc"
expect homes "$out" nccl_include "$r/opt/nccl-2.21/include"
expect homes "$out" nccl_lib "$r/opt/nccl-2.21/lib"

# Misses: each says what is missing.
r=$(tree no_nvcc)
put "$r" /usr/include/nccl.h
out=$(run "$r")
expect no_nvcc "$out" enabled 0
expect_reason no_nvcc "$out" "no nvcc"

r=$(tree no_nccl)
toolkit "$r" /usr/local/cuda
out=$(run "$r")
expect no_nccl "$out" enabled 0
expect_reason no_nccl "$out" "no nccl.h"
expect_reason no_nccl "$out" "$r/usr/include"

r=$(tree no_libnccl)
toolkit "$r" /usr/local/cuda
put "$r" /usr/include/nccl.h
out=$(run "$r")
expect no_libnccl "$out" enabled 0
expect_reason no_libnccl "$out" "no libnccl.so"

r=$(tree no_cublas)
put "$r" /usr/local/cuda/bin/nvcc /usr/local/cuda/include/cuda_runtime.h \
  /usr/local/cuda/lib64/libcudart.so /usr/local/cuda/include/nccl.h /usr/local/cuda/lib64/libnccl.so
out=$(run "$r")
expect no_cublas "$out" enabled 0
expect_reason no_cublas "$out" "no libcublas.so"

r=$(tree disabled)
toolkit "$r" /usr/local/cuda
put "$r" /usr/local/cuda/include/nccl.h /usr/local/cuda/lib64/libnccl.so
out=$(run "$r" XHC_DISABLE_CUDA=1)
expect disabled "$out" enabled 0
expect_reason disabled "$out" "XHC_DISABLE_CUDA=1"

if [[ $failures -ne 0 ]]; then
  echo "cuda_detect_test: $failures expectation(s) failed"
  exit 1
fi
echo "cuda_detect_test: every layout detected as expected"
