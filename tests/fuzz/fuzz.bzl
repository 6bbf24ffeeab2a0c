"""xhc_fuzzer: one libFuzzer target per parser of untrusted bytes.

NAME is a cc_binary built from a file defining LLVMFuzzerTestOneInput. Under
`--config=fuzz` (clang-14, ASan + UBSan + fuzzer coverage, .bazelrc) it links libFuzzer's
main; under the normal toolchain (gcc cannot link libFuzzer) it links replay_main.cc, which
feeds it the files named on its command line. NAME_corpus_test replays the checked-in seed
corpus corpus/NAME/ (including every crash input found so far) in every `bazel test`, so a
fixed crash that comes back fails the ordinary test run and the asan stage, not only fuzzing.
"""

def xhc_fuzzer(name, srcs, deps):
    corpus = native.glob(["corpus/%s/*" % name])
    native.cc_binary(
        name = name,
        testonly = True,
        srcs = srcs,
        linkopts = select({
            ":fuzzing": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        deps = deps + select({
            ":fuzzing": [],
            "//conditions:default": [":replay_main"],
        }),
    )
    native.cc_test(
        name = name + "_corpus_test",
        size = "small",
        srcs = srcs,
        args = ["$(location %s)" % f for f in corpus],
        data = corpus,
        deps = deps + [":replay_main"],
    )
