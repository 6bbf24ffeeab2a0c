#include "runtime/transport/transport_test_util.h"

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace xhc {
namespace {

constexpr absl::Duration kWaitTimeout = absl::Seconds(20);

struct PlannedOp {
  bool is_send;
  int peer;
  int kind_bit;  // 0 = forward activation, 1 = backward gradient
  int microbatch_idx;
  int repeat = 0;  // assigned in posting order, since equal tags match in posting order
  std::vector<float> buffer;
  std::unique_ptr<Request> request;
};

size_t CountFor(int microbatch_idx, size_t large_count) {
  return microbatch_idx == 0 ? large_count : 17 + 97 * static_cast<size_t>(microbatch_idx);
}

std::vector<PlannedOp> PlanOps(const Transport& t, std::mt19937& rng, int num_microbatches) {
  std::vector<PlannedOp> ops;
  for (int peer = 0; peer < t.world_size(); ++peer) {
    if (peer == t.rank()) continue;
    for (int kind_bit = 0; kind_bit < 2; ++kind_bit) {
      for (int mb = 0; mb < num_microbatches; ++mb) {
        for (int copy = 0; copy < 2; ++copy) {
          ops.push_back(PlannedOp{true, peer, kind_bit, mb});
          ops.push_back(PlannedOp{false, peer, kind_bit, mb});
        }
      }
    }
  }
  std::shuffle(ops.begin(), ops.end(), rng);
  std::map<std::tuple<bool, int, int, int>, int> seen;
  for (PlannedOp& op : ops) {
    op.repeat = seen[std::make_tuple(op.is_send, op.peer, op.kind_bit, op.microbatch_idx)]++;
  }
  return ops;
}

absl::Status CheckReceived(const Transport& t, const PlannedOp& op) {
  for (size_t i = 0; i < op.buffer.size(); ++i) {
    const float want = Stamp(op.peer, t.rank(), op.kind_bit, op.repeat, op.microbatch_idx, i);
    if (op.buffer[i] != want) {
      return absl::DataLossError(absl::StrFormat(
          "rank %d: recv from rank %d kind %d mb %d repeat %d: element %d is %.1f, want %.1f",
          t.rank(), op.peer, op.kind_bit, op.microbatch_idx, op.repeat, i, op.buffer[i], want));
    }
  }
  return absl::OkStatus();
}

}  // namespace

float Stamp(int src, int dst, int kind_bit, int repeat, int microbatch_idx, size_t i) {
  const uint32_t header =
      ((((static_cast<uint32_t>(src) * 4 + dst) * 2 + kind_bit) * 2 + repeat) * 8 +
       microbatch_idx) &
      0x1FF;
  return static_cast<float>((header << 15) | (i & 0x7FFF));
}

absl::Status RunStampedExchange(Transport& t, uint32_t seed, int num_microbatches,
                                size_t large_count) {
  std::mt19937 rng(seed + 7919u * static_cast<uint32_t>(t.rank()));
  std::vector<PlannedOp> ops = PlanOps(t, rng, num_microbatches);
  for (PlannedOp& op : ops) {
    const TagKind kind = op.kind_bit ? TagKind::kBackwardGradient : TagKind::kForwardActivation;
    // Stage id of the boundary: the lower of the two ranks (any rule both sides share works).
    const uint64_t tag = MakeTag(kind, std::min(op.peer, t.rank()), op.microbatch_idx);
    const size_t count = CountFor(op.microbatch_idx, large_count);
    op.buffer.assign(count, -1.0f);
    if (op.is_send) {
      for (size_t i = 0; i < count; ++i) {
        op.buffer[i] = Stamp(t.rank(), op.peer, op.kind_bit, op.repeat, op.microbatch_idx, i);
      }
      ASSIGN_OR_RETURN(op.request, t.Isend(op.peer, tag, op.buffer.data(), count));
    } else {
      ASSIGN_OR_RETURN(op.request, t.Irecv(op.peer, tag, op.buffer.data(), count));
    }
  }
  std::shuffle(ops.begin(), ops.end(), rng);
  for (PlannedOp& op : ops) RETURN_IF_ERROR(op.request->Wait(kWaitTimeout));
  for (const PlannedOp& op : ops) {
    if (!op.is_send) RETURN_IF_ERROR(CheckReceived(t, op));
  }
  return absl::OkStatus();
}

absl::Status RunAllReduceChecks(Transport& t) {
  const int n = t.world_size();
  const int r = t.rank();
  for (int round = 0; round < 3; ++round) {
    // Small doubles: loss and squared grad norm; large floats: cross gloo's segmenting.
    std::vector<double> doubles = {1.0 + r, 0.5 * r + round, -3.0 * r};
    std::vector<float> floats(300000 + round);
    for (size_t i = 0; i < floats.size(); ++i) floats[i] = static_cast<float>((i % 1000) + r);
    RETURN_IF_ERROR(t.AllReduceSum(doubles.data(), doubles.size(), kWaitTimeout));
    RETURN_IF_ERROR(t.AllReduceSum(floats.data(), floats.size(), kWaitTimeout));
    const double sum_r = n * (n - 1) / 2.0;
    const std::vector<double> want = {n + sum_r, 0.5 * sum_r + n * round, -3.0 * sum_r};
    for (size_t i = 0; i < want.size(); ++i) {
      if (doubles[i] != want[i]) {
        return absl::DataLossError(absl::StrFormat("rank %d round %d: double[%d] = %g, want %g", r,
                                                   round, i, doubles[i], want[i]));
      }
    }
    for (size_t i = 0; i < floats.size(); ++i) {
      const float want_f = static_cast<float>(n * (i % 1000) + sum_r);
      if (floats[i] != want_f) {
        return absl::DataLossError(absl::StrFormat("rank %d round %d: float[%d] = %g, want %g", r,
                                                   round, i, floats[i], want_f));
      }
    }
    RETURN_IF_ERROR(t.Barrier(kWaitTimeout));
  }
  return absl::OkStatus();
}

}  // namespace xhc
