#include "runtime/worker/buffer_pool.h"

#include <vector>

#include "gtest/gtest.h"

namespace xhc::worker {
namespace {

TEST(BufferPool, TakeReusesAGivenBufferOfThatSizeAsItIs) {
  BufferPool pool;
  std::vector<float> a = pool.Take(1000);
  ASSERT_EQ(a.size(), 1000u);
  a[7] = 3.5f;
  const float* storage = a.data();
  pool.Give(std::move(a));
  EXPECT_EQ(pool.spare(), 1u);
  std::vector<float> b = pool.Take(1000);
  EXPECT_EQ(b.data(), storage);  // the same memory: no allocation, no fill
  EXPECT_EQ(b[7], 3.5f);
  EXPECT_EQ(pool.spare(), 0u);
}

TEST(BufferPool, OtherSizesGetANewBufferAndTheSpareStays) {
  BufferPool pool;
  pool.Give(std::vector<float>(10, 1.0f));
  std::vector<float> b = pool.Take(20);
  EXPECT_EQ(b.size(), 20u);
  EXPECT_EQ(pool.spare(), 1u);
  EXPECT_EQ(pool.Take(10).size(), 10u);
  EXPECT_EQ(pool.spare(), 0u);
}

TEST(BufferPool, KeepsAtMostMaxSpareAndDropsEmptyBuffers) {
  BufferPool pool;
  pool.Give({});
  EXPECT_EQ(pool.spare(), 0u);
  for (size_t i = 0; i < BufferPool::kMaxSpare + 5; ++i) pool.Give(std::vector<float>(4));
  EXPECT_EQ(pool.spare(), BufferPool::kMaxSpare);
}

}  // namespace
}  // namespace xhc::worker
