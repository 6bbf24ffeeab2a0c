#ifndef XHC_RUNTIME_WORKER_SHARD_WRITER_H_
#define XHC_RUNTIME_WORKER_SHARD_WRITER_H_

// Writes this worker's checkpoint shard: the canonical copies of its stages' parameters and
// AdamW moments under their global names. Asynchronous by default: the tensors are copied
// to memory at the step boundary (the only stall training sees) and a background thread
// encodes, writes, fsyncs and renames the shard, then reports it to the controller, which
// commits the step once every shard is durable.

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "proto/xhc.pb.h"
#include "runtime/worker/stage_executor.h"

namespace xhc::worker {

class ShardWriter {
 public:
  using ReportFn = std::function<void(const proto::StepReport&)>;
  explicit ShardWriter(ReportFn report) : report_(std::move(report)) {}
  ~ShardWriter() { Wait(); }

  // Snapshots now; writes in the background when `async` (else before returning). A write
  // still in flight from the previous checkpoint is finished first.
  void Start(const proto::Command& cmd, int rank, StageExecutor* exec, bool async);
  // Waits for the write in flight, if any.
  void Wait();

 private:
  struct Snapshot {
    std::string dir, file;
    std::vector<std::string> names;
    std::vector<std::vector<int64_t>> shapes;
    std::vector<std::vector<float>> values;
  };
  static proto::StepReport Write(const Snapshot& snap, proto::StepReport report);

  ReportFn report_;
  std::thread thread_;
};

}  // namespace xhc::worker

#endif  // XHC_RUNTIME_WORKER_SHARD_WRITER_H_
