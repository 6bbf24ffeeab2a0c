#include <cstdio>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "runtime/data/corpus.h"
#include "runtime/data/sampler.h"

namespace xhc {
namespace {

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = std::string(::testing::TempDir()) + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(Corpus, LoadsGlobSkipsIndexAndSplits) {
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "the quick brown fox " + std::to_string(i) + "\n";
  WriteTemp("c_a.txt", text);
  WriteTemp("c_b.txt", text);
  WriteTemp("c_b.txt.dat", std::string(100, '\0'));  // fortune index beside c_b.txt
  absl::StatusOr<Corpus> c = LoadCorpus({std::string(::testing::TempDir()) + "/c_*"}, 0.1, 1000);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->files.size(), 2u);
  EXPECT_EQ(c->train.size() + c->val.size(), 2 * text.size());
  // Every 10th block is validation: about 10%, drawn from both files.
  EXPECT_NEAR(static_cast<double>(c->val.size()) / (2 * text.size()), 0.1, 0.03);
  const size_t block = SplitBlockSize(2 * text.size(), 10);
  EXPECT_EQ(block, 1024u);
  const std::string val(c->val.begin(), c->val.end());
  EXPECT_EQ(val.substr(0, block), text.substr(9 * block, block));
  EXPECT_EQ(SplitBlockSize(3'000'000, 20), 4096u);  // the fortunes corpus keeps 4 KiB blocks
}

TEST(Corpus, ErrorsNameThePattern) {
  absl::StatusOr<Corpus> c = LoadCorpus({"/nonexistent/*.txt"}, 0.1, 10);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(std::string(c.status().message()).find("/nonexistent/*.txt"), std::string::npos);
  const std::string tiny = WriteTemp("tiny.txt", "abc");
  EXPECT_EQ(LoadCorpus({tiny}, 0.1, 1000).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Sampler, DeterministicAndShifted) {
  std::vector<uint8_t> data(5000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>((i * 7 + i / 13) % 251);
  BatchSampler a(&data, 42, 3, 16), b(&data, 42, 3, 16), other(&data, 43, 3, 16);
  const TokenBatch x = a.Train(5, 1);
  EXPECT_EQ(x.inputs, b.Train(5, 1).inputs);
  EXPECT_NE(x.inputs, a.Train(5, 2).inputs);
  EXPECT_NE(x.inputs, a.Train(6, 1).inputs);
  EXPECT_NE(x.inputs, other.Train(5, 1).inputs);
  for (int r = 0; r < 3; ++r) {
    for (int t = 0; t + 1 < 16; ++t) EXPECT_EQ(x.targets[r * 16 + t], x.inputs[r * 16 + t + 1]);
  }
  EXPECT_EQ(a.Eval(0).inputs, b.Eval(0).inputs);
  EXPECT_NE(a.Eval(0).inputs, a.Eval(1).inputs);
}

TEST(Sampler, FirstRowsFollowsSpecSection8) {
  std::vector<uint8_t> bytes = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const TokenBatch b = FirstRows(bytes, 2, 3);
  EXPECT_EQ(b.inputs, (std::vector<int32_t>{1, 2, 3, 5, 6, 7}));
  EXPECT_EQ(b.targets, (std::vector<int32_t>{2, 3, 4, 6, 7, 8}));
}

}  // namespace
}  // namespace xhc
