#include "runtime/worker/grpc_kv_store.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/worker/rpc_util.h"

namespace xhc::worker {

absl::Status GrpcKvStore::Set(const std::string& key, const std::string& value) {
  grpc::ClientContext ctx;
  PrepareContext(&ctx, token_, 30.0);
  proto::KvSetRequest req;
  req.set_key(key);
  req.set_value(value);
  proto::Empty resp;
  return FromGrpc(stub_->KvSet(&ctx, req, &resp), absl::StrCat("KvSet ", key));
}

absl::StatusOr<std::vector<std::string>> GrpcKvStore::Get(const std::vector<std::string>& keys,
                                                          absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    if (cancelled_ && cancelled_()) {
      return absl::AbortedError("rendezvous abandoned: the controller moved to a newer generation");
    }
    // Short polls, so a cancellation is noticed within half a second.
    const absl::Duration slice = std::min(absl::Milliseconds(500), deadline - absl::Now());
    grpc::ClientContext ctx;
    PrepareContext(&ctx, token_, absl::ToDoubleSeconds(slice) + 10.0);
    proto::KvGetRequest req;
    for (const std::string& k : keys) req.add_keys(k);
    req.set_timeout_ms(std::max<int64_t>(1, absl::ToInt64Milliseconds(slice)));
    proto::KvGetResponse resp;
    absl::Status s = FromGrpc(stub_->KvGet(&ctx, req, &resp), "KvGet");
    if (s.ok()) return std::vector<std::string>(resp.values().begin(), resp.values().end());
    if (!absl::IsDeadlineExceeded(s) || absl::Now() >= deadline) return s;
  }
}

}  // namespace xhc::worker
