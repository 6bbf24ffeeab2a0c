"""Compiles .proto files with the system protoc + grpc_cpp_plugin (no downloaded rules)."""

def xhc_cc_grpc_library(name, srcs, deps = [], grpc = True):
    """A cc_library holding the messages (and gRPC stubs when grpc=True) of `srcs`.

    Each src `foo.proto` yields foo.pb.{h,cc} (and foo.grpc.pb.{h,cc}); includes are relative
    to the workspace root, so users write #include "proto/foo.pb.h".
    """
    outs = []
    for src in srcs:
        base = src[:-len(".proto")]
        outs += [base + ".pb.h", base + ".pb.cc"]
        if grpc:
            outs += [base + ".grpc.pb.h", base + ".grpc.pb.cc"]
    pkg = native.package_name()
    grpc_flags = "--grpc_out=$(GENDIR) --plugin=protoc-gen-grpc=$$(command -v grpc_cpp_plugin)" if grpc else ""
    native.genrule(
        name = name + "_gen",
        srcs = srcs,
        outs = outs,
        cmd = " ".join([
            "protoc",
            "--proto_path=.",
            "--cpp_out=$(GENDIR)",
            grpc_flags,
        ] + ["{}/{}".format(pkg, s) if pkg else s for s in srcs]),
    )
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        deps = deps + ["//third_party:grpc", "//third_party:protobuf"],
    )
