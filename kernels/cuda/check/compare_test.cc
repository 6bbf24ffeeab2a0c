// The device checks' verdicts (compare.h) on synthetic data: what they must catch and what they
// must let through, checked on every machine since no GPU is needed to judge numbers.

#include "kernels/cuda/check/compare.h"

#include <cstdio>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace xhc::cuda::check {
namespace {

constexpr uint64_t kSeed = 20261207;

std::vector<float> Noise(size_t n, float scale, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// ref plus relative noise of size rel (what bf16 rounding and reordering look like).
std::vector<float> Perturb(const std::vector<float>& ref, double rel, uint64_t seed) {
  std::vector<float> e = Noise(ref.size(), 1.f, seed), got = ref;
  const double rms = Rms(ref);
  for (size_t i = 0; i < got.size(); ++i) got[i] += float(rel * rms * e[i]);
  return got;
}

TEST(Compare, RoundingSizedNoisePassesAtEveryScale) {
  std::printf("seed %llu\n", static_cast<unsigned long long>(kSeed));
  for (float scale : {1e-3f, 1.f, 1e3f}) {
    const std::vector<float> ref = Noise(4096, scale, kSeed);
    Result r = Compare("noise", Perturb(ref, 2e-3, kSeed + 1), ref, 1e-2);
    EXPECT_TRUE(r.ok()) << "scale " << scale << " rel " << r.rel_err << " worst "
                        << r.worst_element;
    EXPECT_LT(r.rel_err, 1e-2);
  }
}

TEST(Compare, OneWrongElementCannotHideInTheNorm) {
  const std::vector<float> ref = Noise(1 << 16, 1.f, kSeed);
  std::vector<float> got = ref;
  got[777] += 0.5f;  // a 0.5 error on a tensor of 65536 unit elements: norm error ~2e-3
  Result r = Compare("one_bad", got, ref, 1e-2);
  EXPECT_LT(r.rel_err, 1e-2) << "the norm alone would pass it";
  EXPECT_GT(r.worst_element, 1.0);
  EXPECT_EQ(r.worst_index, 777);
  EXPECT_FALSE(r.ok());
}

TEST(Compare, NanIsCountedAndFails) {
  const std::vector<float> ref = Noise(64, 1.f, kSeed);
  std::vector<float> got = ref;
  got[3] = NAN;
  Result r = Compare("nan", got, ref, 1e-2);
  EXPECT_EQ(r.nan_count, 1);
  EXPECT_FALSE(r.ok());
}

TEST(Compare, SizeMismatchFails) { EXPECT_FALSE(Compare("size", {1, 2}, {1, 2, 3}, 1e-2).ok()); }

// A [tokens, 16, C] state whose sublayer writes streams {0, 1, a, b} of each token.
struct State {
  size_t tokens = 32;
  int N = 16, k = 4, C = 24;
  std::vector<float> input, ref;
  std::vector<int> idx;
  State() {
    input = Noise(tokens * N * C, 1.f, kSeed);
    ref = input;
    std::vector<float> delta = Noise(ref.size(), 1.f, kSeed + 7);
    for (size_t t = 0; t < tokens; ++t) {
      const int pick[4] = {0, 1, int(2 + t % 7), int(9 + t % 7)};
      for (int j = 0; j < k; ++j) {
        idx.push_back(pick[j]);
        for (int c = 0; c < C; ++c) ref[(t * N + pick[j]) * C + c] += delta[(t * N + j) * C + c];
      }
    }
  }
  size_t At(size_t t, int slot, int c) const { return (t * N + idx[t * k + slot]) * C + c; }
};

TEST(CompareStreams, AnErrorInTheWrittenStreamsIsNotDilutedByTheUntouchedOnes) {
  State s;
  // Every written element off by 1.5% of the state's scale: within 1e-2 over all 16 streams
  // (the 12 untouched ones are exact), beyond it over the 4 written ones.
  std::vector<float> got = s.ref;
  const double rms = Rms(s.ref);
  for (size_t t = 0; t < s.tokens; ++t) {
    for (int j = 0; j < s.k; ++j) {
      for (int c = 0; c < s.C; ++c) got[s.At(t, j, c)] += float(0.015 * rms * ((c & 1) ? 1 : -1));
    }
  }
  EXPECT_TRUE(Compare("whole", got, s.ref, 1e-2).ok()) << "diluted: the old check passed this";
  std::vector<Result> r =
      CompareStreams("X", got, s.ref, s.input, s.idx, s.tokens, s.N, s.k, s.C, 1e-2);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].name, "X.written");
  EXPECT_FALSE(r[0].ok()) << r[0].rel_err;
  EXPECT_TRUE(r[1].ok()) << r[1].note;
}

TEST(CompareStreams, AnyChangeToAnUntouchedStreamFails) {
  State s;
  std::vector<float> got = s.ref;
  got[(5 * s.N + 15) * s.C + 3] += 1e-3f;  // token 5 never writes stream 15 (it writes 0,1,7,14)
  std::vector<Result> r =
      CompareStreams("X", got, s.ref, s.input, s.idx, s.tokens, s.N, s.k, s.C, 1e-2);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_TRUE(r[0].ok());
  EXPECT_FALSE(r[1].ok());
  EXPECT_NE(r[1].note.find("1 elements of untouched streams changed"), std::string::npos)
      << r[1].note;
}

TEST(CompareStreams, APoisonedWrittenElementFails) {
  State s;
  std::vector<float> got = s.ref;
  got[s.At(3, 2, 0)] = NAN;  // a written element the kernel forgot
  std::vector<Result> r =
      CompareStreams("X", got, s.ref, s.input, s.idx, s.tokens, s.N, s.k, s.C, 1e-2);
  EXPECT_EQ(r[0].nan_count, 1);
  EXPECT_FALSE(r[0].ok());
}

TEST(CompareStreams, DenseStateHasNoUntouchedStreams) {
  State s;
  std::vector<Result> r =
      CompareStreams("X", s.ref, s.ref, s.input, {}, s.tokens, s.N, s.k, s.C, 1e-2);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_TRUE(r[0].ok());
  EXPECT_TRUE(r[1].ok());
}

TEST(CompareStreams, BadIndicesAreRefused) {
  State s;
  std::vector<int> idx = s.idx;
  idx[0] = 16;
  std::vector<Result> r =
      CompareStreams("X", s.ref, s.ref, s.input, idx, s.tokens, s.N, s.k, s.C, 1e-2);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_FALSE(r[0].ok());
}

}  // namespace
}  // namespace xhc::cuda::check
