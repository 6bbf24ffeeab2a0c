#ifndef XHC_RUNTIME_WORKER_REPLICA_REDUCER_H_
#define XHC_RUNTIME_WORKER_REPLICA_REDUCER_H_

// Sums a stage's step gradient over the data-parallel replicas of the pipeline.
//
// Why an all-gather and not a ring all-reduce: a ring adds the replicas' partial sums in an
// order that depends on the rank, so replicas could end a step with gradients that differ in
// the last bit and drift apart. Here every replica receives every other replica's partial sum
// (the double accumulators, ParamT::grad_acc) and adds them in replica order 0, 1, ..., D-1,
// so all replicas compute the same bits. Replica r holds the contiguous micro-batches
// [r M/D, (r+1) M/D) (JobPlan::GlobalMicrobatch), so the grouping is that of single-process
// training's left-to-right sum, and a double holds a sum of float gradients exactly unless
// their exponents span more than ~29 binades: rounded back to float the result is
// single-process training's bit for bit (tests/pipeline/data_parallel_test.cc checks it).
// For D = 2 the bytes moved equal a ring's; for larger D an all-gather moves (D-1)/2 times
// more, the price of determinism across replicas.
//
// Launch is asynchronous (the transport's engine threads move the bytes), so the exchange of
// one stage overlaps the backward of this rank's other stages and chunks; Finish waits.

#include <map>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "runtime/model/params.h"
#include "runtime/transport/transport.h"

namespace xhc::worker {

class ReplicaReducer {
 public:
  // `group[r]` is the transport rank of replica r's holder of the same pipeline position;
  // this process is group[replica]. `bucket_doubles` bounds one message (the stage's
  // gradient is cut into buckets so each message stays moderate). `transport` must outlive
  // the reducer.
  ReplicaReducer(Transport* transport, std::vector<int> group, int replica, absl::Duration timeout,
                 size_t bucket_doubles = kDefaultBucketDoubles);
  // Pending exchanges are waited for (their buffers are in use by the engine).
  ~ReplicaReducer();

  static constexpr size_t kDefaultBucketDoubles = size_t{1} << 20;  // 8 MiB per message

  int num_replicas() const { return static_cast<int>(group_.size()); }

  // Copies `params`' grad_acc (the step's complete gradient on this replica) and posts its
  // buckets to every other replica, and receives theirs; returns at once. Once per stage
  // and step; `params` must stay alive until Finish.
  absl::Status Launch(int stage, model::ParamSetT<float>* params);

  // Waits for every launched exchange, then sets each launched stage's grad_acc to the sum
  // of all replicas' in replica order. `waited` (may be null) gets the time spent blocked:
  // the part of the exchange that backward did not hide.
  absl::Status Finish(absl::Duration* waited);

 private:
  struct Pending {
    model::ParamSetT<float>* params = nullptr;
    std::vector<std::vector<double>> partial;  // by replica (this replica's own copy too)
    std::vector<std::unique_ptr<Request>> requests;
  };

  Transport* transport_;
  std::vector<int> group_;
  int replica_;
  absl::Duration timeout_;
  size_t bucket_doubles_;
  std::map<int, Pending> pending_;  // by stage
};

}  // namespace xhc::worker

#endif  // XHC_RUNTIME_WORKER_REPLICA_REDUCER_H_
