#!/usr/bin/env bash
# Finds the CUDA toolkit (nvcc, CUDA runtime headers, cudart and cuBLAS) and NCCL (nccl.h and
# libnccl) wherever a standard install puts them, and prints what it found as key=value lines:
#
#   enabled=1|0
#   reason=<why not, or where everything came from>
#   nvcc=<path>  cuda_include=<dir>  cuda_lib=<dir>  nccl_include=<dir>  nccl_lib=<dir>
#
# cuda_configure.bzl runs it to create @local_cuda; cuda_detect_test runs it against fake
# roots. It is a script rather than Starlark so that every layout it accepts is tested.
#
# Where it looks, first hit wins:
#   nvcc:   $CUDA_HOME/bin, then PATH, then /usr/local/cuda/bin, /usr/local/cuda-*/bin (newest
#           first), /opt/cuda/bin, /usr/bin. The toolkit's root is the folder above nvcc's bin/
#           (symlinks resolved), so Debian's /usr/bin/nvcc means /usr.
#   CUDA headers and libraries: under that root (include/, targets/x86_64-linux/include/;
#           lib64/, lib/, targets/x86_64-linux/lib/), then /usr/include and
#           /usr/lib/x86_64-linux-gnu.
#   NCCL:   $NCCL_HOME, the toolkit's own folders, /usr/include and /usr/lib/x86_64-linux-gnu
#           (Debian's and NVIDIA's libnccl-dev), /usr/local, /opt/nccl.
# XHC_DISABLE_CUDA=1 reports disabled whatever is installed. XHC_CUDA_DETECT_ROOT (tests only)
# is prepended to every absolute standard path, so a fake tree can stand in for /.
set -uo pipefail

root="${XHC_CUDA_DETECT_ROOT:-}"

# first_dir_with FILE_GLOB DIR...: the first DIR holding a file matching FILE_GLOB.
first_dir_with() {
  local pattern="$1" dir f
  shift
  for dir in "$@"; do
    [[ -n "$dir" && -d "$dir" ]] || continue
    for f in "$dir"/$pattern; do
      if [[ -e "$f" ]]; then
        echo "$dir"
        return 0
      fi
    done
  done
  return 1
}

report() {  # enabled reason
  echo "enabled=$1"
  echo "reason=$2"
  echo "nvcc=${nvcc:-}"
  echo "cuda_include=${cuda_include:-}"
  echo "cuda_lib=${cuda_lib:-}"
  echo "nccl_include=${nccl_include:-}"
  echo "nccl_lib=${nccl_lib:-}"
  exit 0
}

if [[ "${XHC_DISABLE_CUDA:-0}" == "1" ]]; then
  report 0 "XHC_DISABLE_CUDA=1: built without CUDA whatever is installed"
fi

nvcc=""
candidates=()
[[ -n "${CUDA_HOME:-}" ]] && candidates+=("$CUDA_HOME/bin/nvcc")
if on_path=$(command -v nvcc 2>/dev/null); then candidates+=("$on_path"); fi
candidates+=("$root/usr/local/cuda/bin/nvcc")
for d in $(ls -d "$root"/usr/local/cuda-* 2>/dev/null | sort -V -r); do
  candidates+=("$d/bin/nvcc")
done
candidates+=("$root/opt/cuda/bin/nvcc" "$root/usr/bin/nvcc")
for c in "${candidates[@]}"; do
  if [[ -x "$c" && ! -d "$c" ]]; then
    nvcc="$c"
    break
  fi
done
if [[ -z "$nvcc" ]]; then
  report 0 "no nvcc in \$CUDA_HOME/bin, on PATH, in /usr/local/cuda*/bin, /opt/cuda/bin or /usr/bin"
fi

real_nvcc=$(readlink -f "$nvcc")
cuda_root=$(dirname "$(dirname "$real_nvcc")")
triple="targets/x86_64-linux"
cuda_include=$(first_dir_with cuda_runtime.h "$cuda_root/include" "$cuda_root/$triple/include" \
  "$root/usr/include") || cuda_include=""
cuda_lib=$(first_dir_with 'libcudart.so*' "$cuda_root/lib64" "$cuda_root/lib" \
  "$cuda_root/$triple/lib" "$root/usr/lib/x86_64-linux-gnu") || cuda_lib=""
if [[ -z "$cuda_include" ]]; then
  report 0 "nvcc at $nvcc, but no cuda_runtime.h under $cuda_root/include or /usr/include"
fi
if [[ -z "$cuda_lib" ]]; then
  report 0 "nvcc at $nvcc, but no libcudart.so under $cuda_root/lib64 or /usr/lib/x86_64-linux-gnu"
fi
if ! first_dir_with 'libcublas.so*' "$cuda_lib" >/dev/null; then
  report 0 "nvcc at $nvcc, but no libcublas.so beside libcudart in $cuda_lib"
fi

nccl_dirs_inc=() nccl_dirs_lib=()
if [[ -n "${NCCL_HOME:-}" ]]; then
  nccl_dirs_inc+=("$NCCL_HOME/include")
  nccl_dirs_lib+=("$NCCL_HOME/lib" "$NCCL_HOME/lib64")
fi
nccl_dirs_inc+=("$cuda_include" "$root/usr/include" "$root/usr/local/include"
  "$root/usr/local/nccl/include" "$root/opt/nccl/include")
nccl_dirs_lib+=("$cuda_lib" "$root/usr/lib/x86_64-linux-gnu" "$root/usr/local/lib"
  "$root/usr/local/nccl/lib" "$root/opt/nccl/lib")
nccl_include=$(first_dir_with nccl.h "${nccl_dirs_inc[@]}") || nccl_include=""
if [[ -z "$nccl_include" ]]; then
  report 0 "nvcc at $nvcc, but no nccl.h in ${nccl_dirs_inc[*]} (set NCCL_HOME)"
fi
nccl_lib=$(first_dir_with 'libnccl.so*' "${nccl_dirs_lib[@]}") || nccl_lib=""
if [[ -z "$nccl_lib" ]]; then
  report 0 "nccl.h in $nccl_include, but no libnccl.so in ${nccl_dirs_lib[*]} (set NCCL_HOME)"
fi
report 1 "nvcc $nvcc; CUDA headers $cuda_include, libraries $cuda_lib; NCCL $nccl_include, $nccl_lib"
