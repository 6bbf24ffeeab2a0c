#include "runtime/worker/grpc_kv_store.h"

#include <grpcpp/grpcpp.h>

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
  grpc::ClientContext ctx;
  PrepareContext(&ctx, token_, absl::ToDoubleSeconds(timeout) + 10.0);
  proto::KvGetRequest req;
  for (const std::string& k : keys) req.add_keys(k);
  req.set_timeout_ms(absl::ToInt64Milliseconds(timeout));
  proto::KvGetResponse resp;
  absl::Status s = FromGrpc(stub_->KvGet(&ctx, req, &resp), "KvGet");
  if (!s.ok()) return s;
  return std::vector<std::string>(resp.values().begin(), resp.values().end());
}

}  // namespace xhc::worker
