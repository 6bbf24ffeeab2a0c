"""CUDA sources compiled by the local nvcc through a genrule (no rules_cuda download).

xhc_cuda_library(name, srcs = [*.cu], hdrs, deps, fallback_srcs, cu_hdrs, cc_srcs):
  with a toolkit (see cuda_configure.bzl): each .cu is compiled by nvcc for sm_90a
  (H100/H200) plus compute_90 PTX, into a position-independent object linked by a
  cc_library together with `cc_srcs` (host code compiled by the C++ toolchain, e.g. the
  absl::Status layer, which may include the toolkit's C headers) and the CUDA libs;
  without one: the cc_library is built from `fallback_srcs` (which report "no CUDA" as a
  Status), so every dependent target still builds and its tests skip visibly.
  Dependents see XHC_CUDA_ENABLED=1 or 0.

.cu files may include headers of this workspace (by workspace-relative path) and of the
toolkit; they should not include Abseil or protobuf (nvcc would need the system include
directory and the host compiler's flags to match): keep those in cc_srcs.
"""

load("@local_cuda//:defs.bzl", "CUDA_ENABLED", "NVCC")

# sm_90a only (H100/H200): compiling more architectures multiplies the build time on the
# 2-core build machine, and the "a" features (wgmma, setmaxnreg) need the exact target.
NVCC_FLAGS = [
    "-std=c++20",
    "-O3",
    "--expt-relaxed-constexpr",
    "-Xcompiler=-fPIC",
    "-gencode=arch=compute_90a,code=sm_90a",
    "-I.",
    "-I$(GENDIR)",
]

def xhc_cuda_library(name, srcs, hdrs = [], deps = [], fallback_srcs = [], cu_hdrs = [],
                     cc_srcs = []):
    if not CUDA_ENABLED:
        native.cc_library(
            name = name,
            srcs = fallback_srcs,
            hdrs = hdrs,
            deps = deps,
            defines = ["XHC_CUDA_ENABLED=0"],
        )
        return
    objs = []
    for src in srcs:
        # ".pic.o" tells Bazel the object is position independent, so it can go into the
        # shared libraries that tests link in dynamic mode as well as into static links.
        obj = src[:-len(".cu")] + ".cu.pic.o"
        native.genrule(
            name = src.replace("/", "_").replace(".", "_") + "_nvcc",
            srcs = [src] + hdrs + cu_hdrs,
            outs = [obj],
            cmd = "{nvcc} {flags} -c $(location {src}) -o $@".format(
                nvcc = NVCC,
                flags = " ".join(NVCC_FLAGS),
                src = src,
            ),
        )
        objs.append(obj)
    native.cc_library(
        name = name,
        srcs = objs + cc_srcs,
        hdrs = hdrs,
        deps = deps + ["//third_party:cuda"],
        defines = ["XHC_CUDA_ENABLED=1"],
        alwayslink = True,
    )
