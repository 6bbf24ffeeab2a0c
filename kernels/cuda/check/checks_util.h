#ifndef XHC_KERNELS_CUDA_CHECK_CHECKS_UTIL_H_
#define XHC_KERNELS_CUDA_CHECK_CHECKS_UTIL_H_

// Host-side helpers of the checks: random data, device buffers, poisoning (comparison is
// compare.h).

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kernels/cuda/check/checks.h"
#include "kernels/cuda/check/compare.h"
#include "kernels/cuda/xhc_cuda.h"

namespace xhc::cuda::check {

// The CPU reference a check compares against must run: a shape it refuses is a bug in the
// check itself, reported and fatal rather than compared against an unwritten buffer.
inline void RequireRef(const absl::Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "CPU reference failed: %s\n", std::string(s.message()).c_str());
    std::abort();
  }
}

// Rounds to bf16 and back, so the CPU reference sees exactly what the GPU stores.
inline std::vector<float> RoundBf16(std::vector<float> v) {
  for (float& x : v) x = Bf16ToFloat(FloatToBf16(x));
  return v;
}
inline std::vector<float> Randn(size_t n, float scale, std::mt19937_64& rng) {
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}
inline std::vector<float> Uniform(size_t n, float lo, float hi, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// A device buffer that frees itself; records the first error of any operation.
class Dev {
 public:
  Dev() = default;
  explicit Dev(size_t bytes, int* err) : bytes_(bytes) {
    if (*err == 0 && bytes > 0) *err = Malloc(&ptr_, bytes);
  }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  ~Dev() {
    if (ptr_) Free(ptr_);
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

inline void UploadF(Dev& d, const std::vector<float>& v, int* err) {
  if (*err == 0) *err = MemcpyH2D(d.as<void>(), v.data(), v.size() * 4);
}
inline void UploadBf16(Dev& d, const std::vector<float>& v, int* err) {
  std::vector<bf16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = FloatToBf16(v[i]);
  if (*err == 0) *err = MemcpyH2D(d.as<void>(), h.data(), h.size() * 2);
}
inline std::vector<float> DownloadF(const Dev& d, size_t n, int* err) {
  std::vector<float> v(n, NAN);
  if (*err == 0) *err = MemcpyD2H(v.data(), d.as<void>(), n * 4);
  return v;
}
inline std::vector<float> DownloadBf16(const Dev& d, size_t n, int* err) {
  std::vector<bf16_t> h(n, 0xFFFF);
  if (*err == 0) *err = MemcpyD2H(h.data(), d.as<void>(), n * 2);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = Bf16ToFloat(h[i]);
  return v;
}
// 0xFF bytes are NaN both as float32 and as bf16.
inline void Poison(Dev& d, int* err) {
  if (*err == 0) *err = Memset(d.as<void>(), 0xFF, d.bytes());
}

inline Result Failed(const std::string& name, int err) {
  Result r;
  r.name = name;
  r.note = std::string("CUDA error ") + std::to_string(err) + ": " + ErrorString(err);
  return r;
}

}  // namespace xhc::cuda::check

#endif  // XHC_KERNELS_CUDA_CHECK_CHECKS_UTIL_H_
