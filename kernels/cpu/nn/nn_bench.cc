// Quick timing of the optimized attention and matmul at a training-sized shape.
// Usage: nn_bench [B T C H Hkv]   (defaults 4 256 512 8 8); OMP_NUM_THREADS sets threads.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/nn/attention.h"
#include "kernels/cpu/nn/matmul.h"

namespace {

std::vector<float> random_vec(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Median-free but warm: one untimed run, then the mean of `reps` runs, in milliseconds.
// A benchmark of an op that refused its shape measures nothing: stop, saying why.
void Must(const absl::Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "nn_bench: %s\n", std::string(s.message()).c_str());
    std::exit(1);
  }
}

double time_ms(const std::function<void()>& f, int reps = 10) {
  f();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) f();
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::milli>(t1 - t0).count() / reps;
}

}  // namespace

int main(int argc, char** argv) {
  const int B = argc > 1 ? std::atoi(argv[1]) : 4, T = argc > 2 ? std::atoi(argv[2]) : 256,
            C = argc > 3 ? std::atoi(argv[3]) : 512, H = argc > 4 ? std::atoi(argv[4]) : 8,
            Hkv = argc > 5 ? std::atoi(argv[5]) : H;
  const int dh = C / H, M = B * T;
  const auto q = random_vec(static_cast<size_t>(M) * H * dh, 1),
             k = random_vec(static_cast<size_t>(M) * Hkv * dh, 2),
             v = random_vec(static_cast<size_t>(M) * Hkv * dh, 3),
             dout = random_vec(static_cast<size_t>(M) * H * dh, 4);
  std::vector<float> out(q.size()), lse(static_cast<size_t>(B) * H * T), dq(q.size()), dk(k.size()),
      dv(v.size());
  const double fwd = time_ms([&] {
    Must(xhc::nn::AttentionForward(out.data(), lse.data(), q.data(), k.data(), v.data(), B, T, H,
                                   Hkv, dh));
  });
  const double bwd = time_ms([&] {
    Must(xhc::nn::AttentionBackward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(),
                                    k.data(), v.data(), out.data(), lse.data(), B, T, H, Hkv, dh));
  });
  const double attn_flop = 2.0 * B * H * (T * (T + 1) / 2.0) * dh;  // one QKᵀ-sized product
  std::printf(
      "attention B=%d T=%d H=%d Hkv=%d dh=%d: fwd %.2f ms (%.1f GFLOP/s), "
      "bwd %.2f ms (%.1f GFLOP/s)\n",
      B, T, H, Hkv, dh, fwd, 2 * attn_flop / fwd / 1e6, bwd, 4 * attn_flop / bwd / 1e6);

  const auto x = random_vec(static_cast<size_t>(M) * C, 5),
             w = random_vec(static_cast<size_t>(C) * C, 6),
             dy = random_vec(static_cast<size_t>(M) * C, 7);
  std::vector<float> y(x.size()), dx(x.size()), dw(w.size());
  const double mm_flop = 2.0 * M * C * C;
  const double mf =
      time_ms([&] { Must(xhc::nn::MatmulForward(y.data(), x.data(), w.data(), M, C, C)); });
  const double mi =
      time_ms([&] { Must(xhc::nn::MatmulBackwardInput(dx.data(), dy.data(), w.data(), M, C, C)); });
  const double mw = time_ms(
      [&] { Must(xhc::nn::MatmulBackwardWeight(dw.data(), dy.data(), x.data(), M, C, C)); });
  std::printf(
      "matmul M=%d K=%d N=%d: fwd %.2f ms (%.1f GFLOP/s), dx %.2f ms (%.1f), "
      "dW %.2f ms (%.1f)\n",
      M, C, C, mf, mm_flop / mf / 1e6, mi, mm_flop / mi / 1e6, mw, mm_flop / mw / 1e6);
  return 0;
}
