#ifndef XHC_BASE_PROCESS_ENV_H_
#define XHC_BASE_PROCESS_ENV_H_

// Debian 12's OpenBLAS 0.3.21 does not recognise recent Xeons (reported as "Intel(R) Xeon(R)
// Processor") and falls back to its Prescott (SSE3) kernels, 4-7x slower than the AVX2/AVX-512
// ones the CPU supports. OpenBLAS reads OPENBLAS_CORETYPE only when it is loaded, so the `xhc`
// binary re-executes itself once with the variable set to the best family the CPU reports
// (SkylakeX with AVX-512F, else Haswell with AVX2+FMA). An OPENBLAS_CORETYPE already in the
// environment is always respected, and XHC_BLAS_AUTOTUNE=0 disables this. Child processes
// (workers) inherit the choice, so every process of a job runs the same kernels (which matters
// for bit-identical results).
//
// The same re-exec sets OMP_WAIT_POLICY=passive unless set: libgomp's default spin-waiting
// at barriers collapses throughput by 100x or more when the cores are shared (several worker
// processes, or a build running beside training): measured 42 vs 10842 tokens/s on a tiny
// model on this 2-core machine under load. Like OPENBLAS_CORETYPE it is read at load time.
//
// And it adds glibc.malloc.hugetlb=1 to GLIBC_TUNABLES (read by glibc at start-up) unless the
// variable already sets that tunable: malloc then asks for transparent huge pages
// (madvise(MADV_HUGEPAGE)) on the memory it takes from the OS, which a kernel whose THP mode
// is `madvise` (as on the VMs measured here) otherwise backs with 4 KiB pages. The fused
// kernels stream [tokens, N, C] states a 64 KiB token row at a time, 16 pages per row; with
// 2 MiB pages xhc_bench's fwd+bwd ran ~3% faster on Zen 4, avx512 and avx2 paths
// (docs/design/state-buffers-and-memory.md).

namespace xhc {

// What the re-exec appends to GLIBC_TUNABLES.
inline constexpr char kHugePagesTunable[] = "glibc.malloc.hugetlb=1";

// Returns only if no re-exec was needed (or it failed, which is harmless: slower BLAS).
void MaybeReexecWithTunedEnv(char** argv);

// glibc serves blocks above its mmap threshold (128 KiB, adapting up to 32 MiB) with fresh
// mmaps and returns them to the OS when freed, and trims the heap's free top: a training step
// that allocates its activations anew (a [tokens, N, C] state is 32 MiB at d_model 512, N 16)
// then takes a page fault and a page clear per 4 KiB on every step. This keeps freed memory
// in the process for reuse (no mmap'd chunks, no trimming); the resident set stays at the
// step's peak, which it reaches every step anyway. Call first thing in main.
void KeepFreedMemoryInProcess();

}  // namespace xhc

#endif  // XHC_BASE_PROCESS_ENV_H_
