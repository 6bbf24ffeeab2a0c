"""CUDA sources compiled by the local nvcc through a genrule (no rules_cuda download).

xhc_cuda_library(name, srcs = [*.cu], hdrs, deps, fallback_srcs):
  with a toolkit (see cuda_configure.bzl): each .cu is compiled for sm_90a (H100/H200) plus
  PTX for forward compatibility, into an object linked by a cc_library with the CUDA libs;
  without one: the cc_library is built from fallback_srcs (which report "no CUDA" as a
  Status), so every dependent target still builds and its tests skip visibly.
"""

load("@local_cuda//:defs.bzl", "CUDA_ENABLED", "NVCC")

NVCC_FLAGS = [
    "-std=c++20",
    "-O3",
    "--expt-relaxed-constexpr",
    "-Xcompiler=-fPIC",
    "-gencode=arch=compute_90a,code=sm_90a",
    "-gencode=arch=compute_90,code=compute_90",
    "-I.",
    "-I$(GENDIR)",
]

def xhc_cuda_library(name, srcs, hdrs = [], deps = [], fallback_srcs = [], cu_hdrs = []):
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
        obj = src[:-len(".cu")] + ".cu.o"
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
        srcs = objs,
        hdrs = hdrs + cu_hdrs,
        deps = deps + ["//third_party:cuda"],
        defines = ["XHC_CUDA_ENABLED=1"],
        alwayslink = True,
    )
