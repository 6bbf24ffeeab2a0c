#ifndef XHC_BASE_TEST_SEED_H_
#define XHC_BASE_TEST_SEED_H_

// Seeds of randomized tests. XHC_TEST_SEED=<n> fixes the process's base seed; otherwise one is
// drawn from std::random_device once per process. Each call derives a seed from the base, the
// running gtest test's full name and `salt`, and prints the base seed together with the test
// name, so the printed line reproduces any failure:
//   [seed] XhcOpsTest.MatchesReferenceOverGrid: XHC_TEST_SEED=1234 (derived 0x...)

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <string_view>

#include "gtest/gtest.h"

namespace xhc::testing {

inline uint64_t TestBaseSeed() {
  static const uint64_t base = [] {
    const char* env = std::getenv("XHC_TEST_SEED");
    if (env != nullptr && *env != '\0')
      return static_cast<uint64_t>(std::strtoull(env, nullptr, 0));
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }();
  return base;
}

// splitmix64 finaliser: a different, well-mixed stream per (base, test, salt).
inline uint64_t MixSeed(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline uint64_t TestSeed(std::string_view salt = "") {
  std::string name = "(no test)";
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (info != nullptr) name = std::string(info->test_suite_name()) + "." + info->name();
  uint64_t h = TestBaseSeed();
  for (char c : name) h = MixSeed(h ^ static_cast<unsigned char>(c));
  for (char c : salt) h = MixSeed(h ^ static_cast<unsigned char>(c));
  std::fprintf(stderr, "[seed] %s%s%.*s: XHC_TEST_SEED=%llu (derived %#llx)\n", name.c_str(),
               salt.empty() ? "" : " ", static_cast<int>(salt.size()), salt.data(),
               static_cast<unsigned long long>(TestBaseSeed()), static_cast<unsigned long long>(h));
  if (info != nullptr) {
    ::testing::Test::RecordProperty("xhc_test_seed", std::to_string(TestBaseSeed()));
  }
  return h;
}

}  // namespace xhc::testing

#endif  // XHC_BASE_TEST_SEED_H_
