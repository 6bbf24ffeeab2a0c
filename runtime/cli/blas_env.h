#ifndef XHC_RUNTIME_CLI_BLAS_ENV_H_
#define XHC_RUNTIME_CLI_BLAS_ENV_H_

// Debian 12's OpenBLAS 0.3.21 does not recognise recent Xeons (reported as "Intel(R) Xeon(R)
// Processor") and falls back to its Prescott (SSE3) kernels, 4-7x slower than the AVX2/AVX-512
// ones the CPU supports. OpenBLAS reads OPENBLAS_CORETYPE only when it is loaded, so the `xhc`
// binary re-executes itself once with the variable set to the best family the CPU reports
// (SkylakeX with AVX-512F, else Haswell with AVX2+FMA). An OPENBLAS_CORETYPE already in the
// environment is always respected, and XHC_BLAS_AUTOTUNE=0 disables this. Child processes
// (workers) inherit the choice, so every process of a job runs the same kernels (which matters
// for bit-identical results).

namespace xhc::cli {

// Returns only if no re-exec was needed (or it failed, which is harmless: slower BLAS).
void MaybeReexecWithBlasCoretype(char** argv);

}  // namespace xhc::cli

#endif  // XHC_RUNTIME_CLI_BLAS_ENV_H_
