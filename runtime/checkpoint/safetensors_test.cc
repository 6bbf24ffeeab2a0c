// Hostile shard files: each case once crashed DecodeSafetensors or made it allocate what the
// header claimed (the same inputs are in tests/fuzz/corpus/safetensors_fuzzer/). Every one
// must be refused with kDataLoss naming the file and what is wrong, before any allocation.
#include "runtime/checkpoint/safetensors.h"

#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace xhc {
namespace {

// [u64 header length][header]: what a hostile writer controls.
std::string File(const std::string& header, const std::string& data = "") {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

void ExpectRefused(const std::string& bytes, const std::string& why) {
  absl::StatusOr<SafetensorsContents> c = DecodeSafetensors(bytes, "hostile.safetensors");
  ASSERT_FALSE(c.ok()) << why;
  EXPECT_TRUE(absl::IsDataLoss(c.status())) << c.status();
  EXPECT_TRUE(absl::StartsWith(c.status().message(), "hostile.safetensors: ")) << c.status();
  EXPECT_TRUE(absl::StrContains(c.status().message(), why)) << c.status();
}

TEST(Safetensors, RoundTripsIncludingEmptyTensors) {
  const float a[] = {1, 2, 3, 4, 5, 6};
  const std::string bytes =
      EncodeSafetensors({{"a", {2, 3}, a}, {"empty", {0, 4}, nullptr}, {"s", {}, a}}, {{"k", "v"}});
  // The empty tensor passed a null source to memcpy (undefined; UBSan in safetensors_fuzzer).
  absl::StatusOr<SafetensorsContents> c = DecodeSafetensors(bytes, "ok");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->tensors.at("a").values, std::vector<float>(a, a + 6));
  EXPECT_TRUE(c->tensors.at("empty").values.empty());
  EXPECT_EQ(c->tensors.at("empty").shape, (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(c->metadata.at("k"), "v");
}

TEST(Safetensors, ShapeClaimingMoreThanTheFileIsRefusedBeforeAllocating) {
  // 2^58 floats = 2^60 bytes, with offsets that claim them too.
  ExpectRefused(File(R"({"x":{"dtype":"F32","shape":[288230376151711744],)"
                     R"("data_offsets":[0,1152921504606846976]}})"),
                "needs more than the 0 data bytes");
  // The int64 product of the dims overflowed (UBSan) and could wrap to a small number.
  ExpectRefused(File(R"({"x":{"dtype":"F32","shape":[4611686018427387904,4],)"
                     R"("data_offsets":[0,0]}})"),
                "overflows 64-bit sizes");
  ExpectRefused(File(R"({"x":{"dtype":"F32","shape":[4611686018427387904,4,0],)"
                     R"("data_offsets":[0,0]}})"),
                "overflows 64-bit sizes");
  ExpectRefused(
      File(R"({"x":{"dtype":"F32","shape":{"a":2},"data_offsets":[0,8]}})", std::string(8, '\0')),
      "tensor 'x': bad shape");
}

TEST(Safetensors, MalformedHeadersAreNamed) {
  // __metadata__ as a string: nlohmann's iterator::key() threw (uncaught exception).
  ExpectRefused(File(R"({"__metadata__":"abc"})"), "__metadata__ is not a JSON object");
  std::string huge_len(8, '\0');
  huge_len[7] = 0x10;  // 2^60
  ExpectRefused(huge_len + "{}", "header length exceeds the file size");
  ExpectRefused("1234", "shorter than the 8-byte header length");
  ExpectRefused(File("{\"x\": 1"), "header is not a JSON object");
}

}  // namespace
}  // namespace xhc
