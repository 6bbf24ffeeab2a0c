"""Detects the local CUDA toolkit (nvcc, cudart, cuBLAS, NCCL) without downloading anything.

Creates @local_cuda with:
  defs.bzl: CUDA_ENABLED (bool), NVCC (path or "")
  BUILD:    :cuda (cudart + cuBLAS + NCCL, headers and linkopts) — empty when absent.
The toolkit is looked for in $CUDA_HOME, then /usr/local/cuda. Set XHC_DISABLE_CUDA=1 to
build as if there were none (this is what CI-without-toolkit looks like).
"""

def _cuda_configure_impl(rctx):
    cuda_home = rctx.os.environ.get("CUDA_HOME", "/usr/local/cuda")
    disabled = rctx.os.environ.get("XHC_DISABLE_CUDA", "0") == "1"
    nvcc = rctx.path(cuda_home + "/bin/nvcc")
    nccl_header = rctx.path(cuda_home + "/include/nccl.h")
    enabled = (not disabled) and nvcc.exists and nccl_header.exists
    if enabled:
        rctx.symlink(cuda_home + "/include", "include")
        build = """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "cuda",
    hdrs = glob(["include/**/*.h", "include/**/*.hpp"], allow_empty = True),
    includes = ["include"],
    linkopts = [
        "-L{home}/lib64",
        "-Wl,-rpath,{home}/lib64",
        "-lcublas",
        "-lnccl",
        "-lcudart",
    ],
)
""".format(home = cuda_home)
    else:
        build = """
package(default_visibility = ["//visibility:public"])

cc_library(name = "cuda")
"""
    rctx.file("BUILD", build)
    rctx.file("defs.bzl", "CUDA_ENABLED = {}\nNVCC = \"{}\"\n".format(
        "True" if enabled else "False",
        str(nvcc) if enabled else "",
    ))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_HOME", "XHC_DISABLE_CUDA"],
    local = True,
)
