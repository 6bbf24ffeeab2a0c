#!/usr/bin/env bash
# Packs the xhc binary to run on a machine that has none of its libraries: a lent GPU machine
# (CUDA toolkit, driver and Python, but no Bazel, no Debian gRPC, protobuf, gloo or OpenBLAS,
# no network), or a root that holds nothing but the bundle.
#
# usage: make_bundle.sh XHC_BINARY OUT_DIR [ARCHIVE.tar.xz]
#
# OUT_DIR gets:
#   bin/xhc    the binary, debug info stripped (its symbols stay, for stack traces)
#   lib/       every shared library it loads, resolved on this machine, and the dynamic
#              loader (lib/ld-linux-x86-64.so.2), whose glibc the libraries were built for
#   xhc        the launcher: runs bin/xhc through lib/'s loader and libraries, with
#              $CUDA_HOME/lib64 after them (the GPU machine's toolkit) and the machine's own
#              driver found by the loader's usual search (its cache of /etc/ld.so.conf)
#   MANIFEST   what is in it, and what it leaves to the machine
# Never bundled: the driver's libraries (libcuda, libnvidia-*), which must match the kernel
# module, and the CUDA toolkit's, which are hundreds of MB and on the GPU machine already.
# ARCHIVE, when given, is OUT_DIR as a tar.xz (what travels).
set -euo pipefail

if [[ $# -lt 2 || $# -gt 3 ]]; then
  echo "usage: make_bundle.sh XHC_BINARY OUT_DIR [ARCHIVE.tar.xz]" >&2
  exit 2
fi
binary="$1" out="$2" archive="${3:-}"
[[ -x "$binary" ]] || { echo "make_bundle: $binary is not an executable" >&2; exit 2; }
for tool in ldd strip objcopy; do
  command -v "$tool" >/dev/null || { echo "make_bundle: needs $tool (binutils, libc-bin)" >&2; exit 2; }
done

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
cp "$binary" "$out/bin/xhc"
chmod u+w "$out/bin/xhc"
strip --strip-debug "$out/bin/xhc"

# left_to_machine PATH: the driver's and the CUDA toolkit's libraries stay on the machine.
left_to_machine() {
  case "$(basename "$1")" in
    libcuda.so* | libnvidia-* | libcudart.so* | libcublas*.so* | libnccl.so* | libnvrtc*) return 0 ;;
  esac
  return 1
}

loader=""
left=()
while read -r line; do
  # "libfoo.so.1 => /lib/x86_64-linux-gnu/libfoo.so.1 (0x...)" or "/lib64/ld-linux-x86-64.so.2 (0x...)"
  if [[ "$line" == *"=> not found"* ]]; then
    echo "make_bundle: $binary needs a library this machine lacks: $line" >&2
    exit 1
  fi
  path=""
  if [[ "$line" == *" => /"* ]]; then
    path=$(sed -E 's/.* => ([^ ]+) .*/\1/' <<<"$line")
  elif [[ "$line" == /* ]]; then
    loader=$(awk '{print $1}' <<<"$line")
    continue
  fi
  [[ -n "$path" ]] || continue
  if left_to_machine "$path"; then
    left+=("$(basename "$path")")
    continue
  fi
  cp -L "$path" "$out/lib/$(basename "$path")"
done < <(ldd "$binary")
[[ -n "$loader" ]] || { echo "make_bundle: ldd named no dynamic loader for $binary" >&2; exit 1; }
cp -L "$loader" "$out/lib/ld-linux-x86-64.so.2"
chmod -R u+w "$out/lib"
for lib in "$out"/lib/*.so*; do
  [[ "$(basename "$lib")" == ld-linux* ]] && continue
  strip --strip-unneeded "$lib"
done

cat >"$out/xhc" <<'LAUNCHER'
#!/bin/sh
# Runs the bundled xhc through the bundled loader and libraries (see MANIFEST). Workers that
# `xhc launch` spawns start the same way (XHC_BUNDLE, base/self_exec.h).
here=$(cd "$(dirname "$0")" && pwd)
XHC_BUNDLE="$here"
XHC_BUNDLE_LIBRARY_PATH="$here/lib:${CUDA_HOME:-/usr/local/cuda}/lib64"
export XHC_BUNDLE XHC_BUNDLE_LIBRARY_PATH
exec "$here/lib/ld-linux-x86-64.so.2" --library-path "$XHC_BUNDLE_LIBRARY_PATH" "$here/bin/xhc" "$@"
LAUNCHER
chmod +x "$out/xhc"

{
  echo "xhc bundle, made $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m) from $binary"
  echo "glibc: $("$out/lib/ld-linux-x86-64.so.2" --version 2>/dev/null | head -1)"
  echo "run: ./xhc ARGS (or lib/ld-linux-x86-64.so.2 --library-path lib bin/xhc ARGS, with XHC_BUNDLE set)"
  echo "left to the machine: the GPU driver (libcuda.so.1)${left:+ and ${left[*]}}"
  echo "files:"
  (cd "$out" && find . -type f -printf '%s %p\n' | sort -k2)
} >"$out/MANIFEST"

if [[ -n "$archive" ]]; then
  tar -C "$(dirname "$out")" -cf - "$(basename "$out")" | xz -6 -T2 >"$archive"
fi
echo "make_bundle: $(du -sb "$out" | cut -f1) bytes in $out${archive:+, $(stat -c %s "$archive") bytes in $archive}"
