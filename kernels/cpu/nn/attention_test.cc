#include "kernels/cpu/nn/attention.h"

#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/nn/attention_ref.h"
#include "kernels/cpu/nn/test_util.h"

namespace xhc::nn {
namespace {

using testing::random_vec;
using testing::to_double;

struct Shape {
  int B, T, H, Hkv, dh;
  long q_size() const { return static_cast<long>(B) * T * H * dh; }
  long kv_size() const { return static_cast<long>(B) * T * Hkv * dh; }
};

struct Grads {
  std::vector<float> out, lse, dq, dk, dv;
};

Grads run_opt(const Shape& s, const std::vector<float>& q, const std::vector<float>& k,
              const std::vector<float>& v, const std::vector<float>& dout) {
  Grads g{std::vector<float>(s.q_size()), std::vector<float>(s.B * s.H * s.T),
          std::vector<float>(s.q_size()), std::vector<float>(s.kv_size(), 7.0f),
          std::vector<float>(s.kv_size(), 7.0f)};
  XHC_EXPECT_OK(AttentionForward(g.out.data(), g.lse.data(), q.data(), k.data(), v.data(), s.B, s.T,
                                 s.H, s.Hkv, s.dh));
  XHC_EXPECT_OK(AttentionBackward(g.dq.data(), g.dk.data(), g.dv.data(), dout.data(), q.data(),
                                  k.data(), v.data(), g.out.data(), g.lse.data(), s.B, s.T, s.H,
                                  s.Hkv, s.dh));
  return g;
}

class AttentionVsRef : public ::testing::TestWithParam<Shape> {};

TEST_P(AttentionVsRef, ForwardAndBackwardMatchDoubleReference) {
  const Shape s = GetParam();
  // Scaled-up q, k so the softmax is peaked, not uniform.
  const auto q = random_vec(s.q_size(), 111 + s.T, -2.0f, 2.0f),
             k = random_vec(s.kv_size(), 112 + s.H, -2.0f, 2.0f), v = random_vec(s.kv_size(), 113),
             dout = random_vec(s.q_size(), 114);
  const Grads g = run_opt(s, q, k, v, dout);
  const auto qd = to_double(q), kd = to_double(k), vd = to_double(v), dd = to_double(dout);
  std::vector<double> out(s.q_size()), lse(s.B * s.H * s.T), dq(s.q_size()), dk(s.kv_size()),
      dv(s.kv_size());
  XHC_EXPECT_OK(ref::AttentionForward(out.data(), lse.data(), qd.data(), kd.data(), vd.data(), s.B,
                                      s.T, s.H, s.Hkv, s.dh));
  XHC_EXPECT_OK(ref::AttentionBackward(dq.data(), dk.data(), dv.data(), dd.data(), qd.data(),
                                       kd.data(), vd.data(), out.data(), lse.data(), s.B, s.T, s.H,
                                       s.Hkv, s.dh));
  testing::expect_close(g.out, out, 1e-4, 1e-5, "out");
  testing::expect_close(g.lse, lse, 1e-5, 1e-5, "lse");
  testing::expect_close(g.dq, dq, 1e-3, 1e-4, "dq");
  testing::expect_close(g.dk, dk, 1e-3, 1e-4, "dk");
  testing::expect_close(g.dv, dv, 1e-3, 1e-4, "dv");
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionVsRef,
                         ::testing::Values(Shape{1, 1, 1, 1, 2}, Shape{2, 1, 4, 2, 8},
                                           Shape{1, 7, 3, 1, 6}, Shape{2, 13, 4, 2, 10},
                                           Shape{2, 33, 6, 3, 16}, Shape{1, 130, 4, 4, 64},
                                           Shape{1, 64, 8, 2, 32}));

TEST(AttentionRef, GradientsMatchFiniteDifferences) {
  const Shape s{2, 4, 4, 2, 4};
  auto q = to_double(random_vec(s.q_size(), 121)), k = to_double(random_vec(s.kv_size(), 122)),
       v = to_double(random_vec(s.kv_size(), 123));
  const auto dout = to_double(random_vec(s.q_size(), 124));
  std::vector<double> out(s.q_size()), lse(s.B * s.H * s.T), dq(s.q_size()), dk(s.kv_size()),
      dv(s.kv_size());
  auto loss = [&] {
    XHC_EXPECT_OK(ref::AttentionForward(out.data(), lse.data(), q.data(), k.data(), v.data(), s.B,
                                        s.T, s.H, s.Hkv, s.dh));
    return testing::dot(dout, out);
  };
  loss();
  XHC_EXPECT_OK(ref::AttentionBackward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(),
                                       k.data(), v.data(), out.data(), lse.data(), s.B, s.T, s.H,
                                       s.Hkv, s.dh));
  testing::check_fd(q, dq, loss, "dq");
  testing::check_fd(k, dk, loss, "dk");
  testing::check_fd(v, dv, loss, "dv");
}

// Token 0 sees only itself: its output is v[0] exactly, whatever q and k are.
TEST(AttentionRef, FirstTokenCopiesItsValue) {
  const Shape s{1, 3, 2, 1, 2};
  const auto q = to_double(random_vec(s.q_size(), 131)),
             k = to_double(random_vec(s.kv_size(), 132)),
             v = to_double(random_vec(s.kv_size(), 133));
  std::vector<double> out(s.q_size()), lse(s.B * s.H * s.T);
  XHC_EXPECT_OK(ref::AttentionForward(out.data(), lse.data(), q.data(), k.data(), v.data(), s.B,
                                      s.T, s.H, s.Hkv, s.dh));
  for (int h = 0; h < s.H; ++h) {
    for (int d = 0; d < s.dh; ++d) EXPECT_DOUBLE_EQ(out[h * s.dh + d], v[d]);
  }
}

TEST(Attention, BitIdenticalAcrossThreadCounts) {
  const Shape s{2, 45, 6, 2, 24};
  const auto q = random_vec(s.q_size(), 141), k = random_vec(s.kv_size(), 142),
             v = random_vec(s.kv_size(), 143), dout = random_vec(s.q_size(), 144);
  Grads a, b;
  testing::with_threads(1, [&] { a = run_opt(s, q, k, v, dout); });
  testing::with_threads(2, [&] { b = run_opt(s, q, k, v, dout); });
  testing::expect_bitwise_equal(a.out, b.out, "out");
  testing::expect_bitwise_equal(a.lse, b.lse, "lse");
  testing::expect_bitwise_equal(a.dq, b.dq, "dq");
  testing::expect_bitwise_equal(a.dk, b.dk, "dk");
  testing::expect_bitwise_equal(a.dv, b.dv, "dv");
}

}  // namespace
}  // namespace xhc::nn
