#ifndef XHC_RUNTIME_TRANSPORT_FAKE_TRANSPORT_H_
#define XHC_RUNTIME_TRANSPORT_FAKE_TRANSPORT_H_

// An in-process Transport for N ranks that live as threads of one process (executor unit
// tests). It keeps the contract of transport.h, including its failure model, so code tested
// against it behaves the same over gloo:
//  * a send and a receive with the same (sender, receiver, tag) match in posting order and
//    the payload is copied when both are posted (a count mismatch fails both with
//    kInvalidArgument);
//  * an expired wait, Abort(), or a destroyed in-flight request fails this rank's transport;
//    peers then see kUnavailable for everything they wait on with this rank (and for
//    collectives), as they would when its gloo connections close;
//  * collectives sum in rank order (deterministic).

#include <memory>
#include <vector>

#include "runtime/transport/transport.h"

namespace xhc {

namespace fake_transport_internal {
struct World;
}  // namespace fake_transport_internal

class FakeTransport : public Transport {
 public:
  // Creates the `world_size` connected endpoints of one world; index = rank. Endpoints may
  // be destroyed in any order (the shared state lives until the last one goes).
  static std::vector<std::unique_ptr<FakeTransport>> CreateWorld(int world_size);

  ~FakeTransport() override;

  int rank() const override { return rank_; }
  int world_size() const override;

  absl::StatusOr<std::unique_ptr<Request>> Isend(int peer, uint64_t tag, const float* data,
                                                 size_t count) override;
  absl::StatusOr<std::unique_ptr<Request>> Irecv(int peer, uint64_t tag, float* data,
                                                 size_t count) override;
  absl::Status AllReduceSum(double* data, size_t count, absl::Duration timeout) override;
  absl::Status AllReduceSum(float* data, size_t count, absl::Duration timeout) override;
  absl::Status Barrier(absl::Duration timeout) override;
  void Abort() override;

 private:
  FakeTransport(std::shared_ptr<fake_transport_internal::World> world, int rank);

  absl::StatusOr<std::unique_ptr<Request>> Post(bool is_send, int peer, uint64_t tag, float* data,
                                                size_t count);
  template <typename T>
  absl::Status AllReduceImpl(T* data, size_t count, absl::Duration timeout, const char* what);

  std::shared_ptr<fake_transport_internal::World> world_;
  const int rank_;
  int64_t num_collectives_ = 0;  // sequence number of this rank's next collective
};

}  // namespace xhc

#endif  // XHC_RUNTIME_TRANSPORT_FAKE_TRANSPORT_H_
