#include "runtime/worker/replica_reducer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace xhc::worker {

ReplicaReducer::ReplicaReducer(Transport* transport, std::vector<int> group, int replica,
                               absl::Duration timeout, size_t bucket_doubles)
    : transport_(transport),
      group_(std::move(group)),
      replica_(replica),
      timeout_(timeout),
      bucket_doubles_(std::max<size_t>(1, bucket_doubles)) {}

ReplicaReducer::~ReplicaReducer() {
  // A healthy transport still owns the buffers of unfinished requests: wait them out (a
  // failed one has closed its engine, and the waits return at once).
  for (auto& [stage, p] : pending_) {
    for (auto& r : p.requests) r->Wait(timeout_).IgnoreError();
  }
}

absl::Status ReplicaReducer::Launch(int stage, model::ParamSetT<float>* params) {
  if (pending_.count(stage)) {
    return absl::InternalError(
        absl::StrCat("replica gradient of stage ", stage, " launched twice in one step"));
  }
  params->MaterializeSums();
  Pending& p = pending_[stage];
  p.params = params;
  p.partial.resize(group_.size());
  std::vector<double>& mine = p.partial[replica_];
  for (const auto& param : params->all()) {
    mine.insert(mine.end(), param->grad_acc.begin(), param->grad_acc.end());
  }
  const size_t n = mine.size();
  for (int r = 0; r < num_replicas(); ++r) {
    if (r != replica_) p.partial[r].resize(n);
  }
  // Doubles travel as raw bytes, two float slots each.
  for (size_t begin = 0, bucket = 0; begin < n; begin += bucket_doubles_, ++bucket) {
    const size_t count = std::min(bucket_doubles_, n - begin);
    const uint64_t tag = MakeTag(TagKind::kReplicaGradient, stage, static_cast<int>(bucket));
    for (int r = 0; r < num_replicas(); ++r) {
      if (r == replica_) continue;
      ASSIGN_OR_RETURN(
          auto recv, transport_->Irecv(group_[r], tag,
                                       reinterpret_cast<float*>(&p.partial[r][begin]), 2 * count));
      p.requests.push_back(std::move(recv));
      ASSIGN_OR_RETURN(
          auto send, transport_->Isend(group_[r], tag, reinterpret_cast<const float*>(&mine[begin]),
                                       2 * count));
      p.requests.push_back(std::move(send));
    }
  }
  return absl::OkStatus();
}

absl::Status ReplicaReducer::Finish(absl::Duration* waited) {
  const absl::Time t0 = absl::Now();
  for (auto& [stage, p] : pending_) {
    for (auto& r : p.requests) RETURN_IF_ERROR(r->Wait(timeout_));
  }
  if (waited != nullptr) *waited = absl::Now() - t0;
  for (auto& [stage, p] : pending_) {
    size_t offset = 0;
    for (const auto& param : p.params->all()) {
      for (double& g : param->grad_acc) {
        double sum = p.partial[0][offset];
        for (int r = 1; r < num_replicas(); ++r) sum += p.partial[r][offset];
        g = sum;
        ++offset;
      }
    }
  }
  pending_.clear();
  return absl::OkStatus();
}

}  // namespace xhc::worker
