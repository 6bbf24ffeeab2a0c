"""Detects the local CUDA toolkit (nvcc, cudart, cuBLAS) and NCCL without downloading anything.

Creates @local_cuda with:
  defs.bzl: CUDA_ENABLED (bool), NVCC (path or ""), CUDA_REASON (what detection found or missed)
  BUILD:    :cuda (cudart + cuBLAS + NCCL, headers and linkopts); empty when absent.
Where it looks is third_party/cuda_detect.sh's job (tested by //third_party:cuda_detect_test):
$CUDA_HOME, PATH and the standard install places for nvcc, and for nccl.h and libnccl also
/usr/include and /usr/lib/x86_64-linux-gnu, $NCCL_HOME and /opt/nccl. Set XHC_DISABLE_CUDA=1 to
build as if there were none (this is what CI without a toolkit looks like).
"""

def _parse(stdout):
    found = {}
    for line in stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            found[key] = value
    return found

def _cuda_configure_impl(rctx):
    script = rctx.path(Label("//third_party:cuda_detect.sh"))
    result = rctx.execute(["bash", str(script)])
    if result.return_code != 0:
        fail("cuda_detect.sh failed ({}): {}".format(result.return_code, result.stderr))
    found = _parse(result.stdout)
    enabled = found.get("enabled") == "1"
    if enabled:
        rctx.symlink(found["cuda_include"], "include")

        # NCCL's headers may sit in a folder shared with everything else (/usr/include): link
        # only its own files, so the include path adds nothing but NCCL.
        rctx.file("nccl_include/.keep", "")
        nccl_dir = rctx.path(found["nccl_include"])
        for entry in nccl_dir.readdir():
            if entry.basename.startswith("nccl") and entry.basename.endswith(".h"):
                rctx.symlink(entry, "nccl_include/" + entry.basename)
        lib_dirs = [found["cuda_lib"]]
        if found["nccl_lib"] != found["cuda_lib"]:
            lib_dirs.append(found["nccl_lib"])
        linkopts = []
        for d in lib_dirs:
            linkopts += ["-L" + d, "-Wl,-rpath," + d]
        linkopts += ["-lcublas", "-lnccl", "-lcudart"]
        build = """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "cuda",
    hdrs = glob(
        ["include/**/*.h", "include/**/*.hpp", "nccl_include/*.h"],
        allow_empty = True,
    ),
    includes = ["include", "nccl_include"],
    linkopts = {linkopts},
)
""".format(linkopts = repr(linkopts))
    else:
        build = """
package(default_visibility = ["//visibility:public"])

cc_library(name = "cuda")
"""
    rctx.file("BUILD", build)
    rctx.file("defs.bzl", "CUDA_ENABLED = {}\nNVCC = {}\nCUDA_REASON = {}\n".format(
        "True" if enabled else "False",
        repr(found.get("nvcc", "") if enabled else ""),
        repr(found.get("reason", "")),
    ))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_HOME", "NCCL_HOME", "PATH", "XHC_DISABLE_CUDA"],
    local = True,
)
