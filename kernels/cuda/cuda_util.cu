// Device query, memory, events and host bf16 conversion behind the C-style API.

#include <cublas_v2.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstring>

#include "kernels/cuda/cuda_common.cuh"

namespace xhc::cuda {

// Whether a CUDA driver is installed at all: the runtime loads libcuda.so.1 and reports a
// missing one with the same codes (insufficient driver, stub library) as a broken one.
bool DriverInstalled() {
  void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (h == nullptr) return false;
  dlclose(h);
  return true;
}

int DeviceCount(int* count) {
  *count = 0;
  const cudaError_t e = cudaGetDeviceCount(count);
  if (e == cudaSuccess) return 0;
  *count = 0;
  cudaGetLastError();  // clear the error so later calls start clean
  // No driver, or a driver with no GPU, is a fact about the machine: callers skip. A driver
  // that is there and fails (version mismatch, module not loaded, GPU fallen off the bus)
  // is an error: reporting it as "0 devices" would turn a broken GPU machine into skips.
  if (e == cudaErrorNoDevice || !DriverInstalled()) return 0;
  return static_cast<int>(e);
}

const char* ErrorString(int err) {
  if (err == kXhcErrInvalidArgument) return "shape outside the CUDA kernels' limits";
  if (err == kXhcErrNoCuda) return "built without the CUDA toolkit";
  if (err >= kXhcErrCublasBase && err < kXhcErrCublasBase + 1000) return "cuBLAS error";
  return cudaGetErrorString(static_cast<cudaError_t>(err));
}

int Malloc(void** ptr, size_t bytes) { return static_cast<int>(cudaMalloc(ptr, bytes)); }
int Free(void* ptr) { return static_cast<int>(cudaFree(ptr)); }
int MemcpyH2D(void* d, const void* s, size_t b) {
  return static_cast<int>(cudaMemcpy(d, s, b, cudaMemcpyHostToDevice));
}
int MemcpyD2H(void* d, const void* s, size_t b) {
  return static_cast<int>(cudaMemcpy(d, s, b, cudaMemcpyDeviceToHost));
}
int MemcpyD2D(void* d, const void* s, size_t b, void* stream) {
  return static_cast<int>(cudaMemcpyAsync(d, s, b, cudaMemcpyDeviceToDevice, as_stream(stream)));
}
int Memset(void* d, int byte, size_t b) { return static_cast<int>(cudaMemset(d, byte, b)); }
int Synchronize() { return static_cast<int>(cudaDeviceSynchronize()); }

int CublasCreate(void** handle) {
  cublasHandle_t h = nullptr;
  const cublasStatus_t st = cublasCreate(&h);
  if (st != CUBLAS_STATUS_SUCCESS) return kXhcErrCublasBase + static_cast<int>(st);
  *handle = h;
  return 0;
}
int CublasDestroy(void* handle) {
  const cublasStatus_t st = cublasDestroy(static_cast<cublasHandle_t>(handle));
  return st == CUBLAS_STATUS_SUCCESS ? 0 : kXhcErrCublasBase + static_cast<int>(st);
}

bf16_t FloatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<bf16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<bf16_t>(u >> 16);
}
float Bf16ToFloat(bf16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

int EventCreate(void** ev) {
  cudaEvent_t e;
  XHC_CUDA_TRY(cudaEventCreate(&e));
  *ev = e;
  return 0;
}
int EventRecord(void* ev, void* stream) {
  return static_cast<int>(cudaEventRecord(static_cast<cudaEvent_t>(ev), as_stream(stream)));
}
int EventElapsedMs(void* a, void* b, float* ms) {
  XHC_CUDA_TRY(cudaEventSynchronize(static_cast<cudaEvent_t>(b)));
  return static_cast<int>(
      cudaEventElapsedTime(ms, static_cast<cudaEvent_t>(a), static_cast<cudaEvent_t>(b)));
}
namespace {

// splitmix64 of (seed, index): independent of the launch shape, so a fill is reproducible.
__device__ __forceinline__ uint64_t Mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__global__ void FillUniformKernel(void* dst, long n, bool bf16, float lo, float hi, uint64_t seed) {
  const float span = hi - lo;
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n;
       i += long(gridDim.x) * blockDim.x) {
    const float v = lo + span * float(Mix(seed ^ Mix(uint64_t(i))) >> 40) * (1.0f / 16777216.0f);
    if (bf16)
      st(static_cast<bf16_t*>(dst) + i, v);
    else
      static_cast<float*>(dst)[i] = v;
  }
}

}  // namespace

int FillUniform(void* dst, long n, bool bf16, float lo, float hi, uint64_t seed, void* stream) {
  if (n <= 0) return 0;
  const int blocks = static_cast<int>(std::min<long>(4096, (n + 255) / 256));
  FillUniformKernel<<<blocks, 256, 0, as_stream(stream)>>>(dst, n, bf16, lo, hi, seed);
  return static_cast<int>(cudaGetLastError());
}

int EventDestroy(void* ev) {
  return static_cast<int>(cudaEventDestroy(static_cast<cudaEvent_t>(ev)));
}

}  // namespace xhc::cuda
