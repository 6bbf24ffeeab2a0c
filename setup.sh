#!/usr/bin/env bash
# Installs every Debian package the build, the tests and the default corpus need.
# Idempotent and non-interactive; nothing else is downloaded (Bazel runs offline).
set -euo pipefail

PACKAGES=(
  bazel-bootstrap          # Bazel 4.2 in WORKSPACE mode
  build-essential
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libyaml-cpp-dev libgtest-dev libgmock-dev
  libgloo-dev libopenblas-dev nlohmann-json3-dev libxxhash-dev
  fortunes                 # default training corpus (real English text)
  iproute2                 # network-namespace test of a worker on a second address
  slurm-wlm                # tests/launch: a one-node Slurm cluster (auth/none) runs examples/slurm/xhc.sbatch
  openssl                  # tests/distributed:mutual_tls_test makes its CA and certificates
  hostname                 # xhc.sbatch: `hostname -I` for each worker's data-plane address
  clang-14 libclang-rt-14-dev  # fuzz targets: libFuzzer + sanitizer runtimes (bazel --config=fuzz)
  python3-torch python3-yaml python3-xxhash  # python/xhc_torch.py and tests/torch (~650 MB, 154 MB download)
  libcairo2-dev fonts-dejavu-core  # study charts: PNG, SVG and PDF in DejaVu Sans
  libcpp-httplib-dev       # the controller's dashboard and /metrics HTTP server (--http)
  chromium                 # tests/dashboard: headless Chromium loads the live dashboard
  prometheus               # tests/dashboard: a real Prometheus server scrapes /metrics; promtool
  zlib1g-dev               # tests/dashboard: reads the screenshots (PNG)
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ "${#missing[@]}" -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Version checks: the build files assume these major versions.
# bazel-bootstrap's binary reports "no_version"; ask dpkg instead.
bazel_version=$(dpkg-query -W -f='${Version}' bazel-bootstrap 2>/dev/null || true)
case "$bazel_version" in
  4.*) ;;
  *) echo "setup: expected Bazel 4.x from bazel-bootstrap, found '${bazel_version}'" >&2; exit 1 ;;
esac
protoc_version=$(protoc --version | awk '{print $2}')
grpc_plugin=$(command -v grpc_cpp_plugin || true)
[ -n "$grpc_plugin" ] || { echo "setup: grpc_cpp_plugin not found" >&2; exit 1; }
[ -f /usr/share/games/fortunes/fortunes ] || { echo "setup: fortunes corpus missing" >&2; exit 1; }
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  cuda="present"
else
  cuda="absent (CUDA targets build as skipping stubs)"
fi
echo "setup: ok (bazel ${bazel_version}, protoc ${protoc_version}, CUDA toolkit ${cuda})"
