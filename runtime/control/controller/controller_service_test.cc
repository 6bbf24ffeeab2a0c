// The controller's gRPC server on loopback, in process, with a real client stub: the limits
// it enforces before any handler logic runs or any state grows. A request larger than
// kMaxRequestBytes is refused (RESOURCE_EXHAUSTED) and the server keeps serving; a
// registration beyond the job's worker count is refused with the count named.
#include "runtime/control/controller/controller_service.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "proto/xhc.grpc.pb.h"
#include "runtime/control/controller/controller.h"
#include "runtime/control/controller/tiny_controller.h"

namespace xhc::controller {
namespace {

constexpr char kToken[] = "service-test-token";

struct Served {
  std::unique_ptr<Controller> controller;
  std::unique_ptr<ControllerServer> server;
  std::unique_ptr<proto::Controller::Stub> stub;
};

Served Serve() {
  Served s;
  s.controller = MakeTinyController("controller_service_test");
  absl::StatusOr<std::unique_ptr<ControllerServer>> server =
      ControllerServer::Start(s.controller.get(), "127.0.0.1:0", kToken, {});
  EXPECT_TRUE(server.ok()) << server.status();
  s.server = *std::move(server);
  // The client may send far more than the server accepts: the limit under test is the
  // server's.
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(4 * kMaxRequestBytes);
  s.stub = proto::Controller::NewStub(grpc::CreateCustomChannel(
      absl::StrCat("127.0.0.1:", s.server->port()), grpc::InsecureChannelCredentials(), args));
  return s;
}

void Prepare(grpc::ClientContext* ctx) {
  ctx->AddMetadata(kTokenMetadataKey, kToken);
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
}

grpc::Status KvSet(proto::Controller::Stub* stub, const std::string& key, size_t bytes) {
  grpc::ClientContext ctx;
  Prepare(&ctx);
  proto::KvSetRequest req;
  req.set_key(key);
  req.set_value(std::string(bytes, 'x'));
  proto::Empty resp;
  return stub->KvSet(&ctx, req, &resp);
}

TEST(ControllerService, OversizedRequestIsRefusedAndTheServerKeepsServing) {
  Served s = Serve();
  const grpc::Status big = KvSet(s.stub.get(), "big", kMaxRequestBytes + 1);
  EXPECT_EQ(big.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << big.error_message();
  const grpc::Status small = KvSet(s.stub.get(), "small", 1024);
  EXPECT_TRUE(small.ok()) << small.error_message();
  grpc::ClientContext ctx;
  Prepare(&ctx);
  proto::KvGetRequest get;
  get.add_keys("small");
  get.set_timeout_ms(1000);
  proto::KvGetResponse values;
  ASSERT_TRUE(s.stub->KvGet(&ctx, get, &values).ok());
  ASSERT_EQ(values.values_size(), 1);
  EXPECT_EQ(values.values(0).size(), 1024u);
  // The refused request left nothing behind.
  grpc::ClientContext ctx2;
  Prepare(&ctx2);
  proto::KvGetRequest get_big;
  get_big.add_keys("big");
  get_big.set_timeout_ms(100);
  EXPECT_EQ(s.stub->KvGet(&ctx2, get_big, &values).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
}

TEST(ControllerService, RegistrationsBeyondTheWorkerCountAreRefused) {
  Served s = Serve();
  for (int i = 0; i < 3; ++i) {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    proto::RegisterRequest req;
    req.set_worker_id(absl::StrCat("w", i));
    req.set_rank_hint(-1);
    proto::RegisterResponse resp;
    const grpc::Status st = s.stub->Register(&ctx, req, &resp);
    if (i < 2) {
      ASSERT_TRUE(st.ok()) << st.error_message();
      EXPECT_EQ(resp.rank(), i);
    } else {
      EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
      EXPECT_NE(st.error_message().find("already has its 2 workers"), std::string::npos)
          << st.error_message();
    }
  }
}

}  // namespace
}  // namespace xhc::controller
