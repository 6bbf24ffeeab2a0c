#include "runtime/worker/shard_writer.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/train/model_io.h"

namespace xhc::worker {

void ShardWriter::Wait() {
  if (thread_.joinable()) thread_.join();
}

proto::StepReport ShardWriter::Write(const Snapshot& snap, proto::StepReport report) {
  const absl::Time t0 = absl::Now();
  std::vector<TensorView> views;
  for (size_t i = 0; i < snap.names.size(); ++i) {
    views.push_back({snap.names[i], snap.shapes[i], snap.values[i].data()});
  }
  absl::StatusOr<ShardRecord> rec = WriteShard(snap.dir, snap.file, views);
  // Fault injection for tests: hold the shard unreported (its step uncommitted) for a while,
  // so a test can kill a worker in the middle of a checkpoint.
  if (const char* delay = std::getenv("XHC_FAULT_CHECKPOINT_DELAY_MS"); delay != nullptr) {
    absl::SleepFor(absl::Milliseconds(std::atoi(delay)));
  }
  report.mutable_checkpoint_result()->set_write_s(absl::ToDoubleSeconds(absl::Now() - t0));
  if (!rec.ok()) {
    report.set_error(std::string(rec.status().message()));
    return report;
  }
  proto::ShardInfo* info = report.mutable_checkpoint_result()->add_shards();
  info->set_file(rec->file);
  info->set_bytes(rec->bytes);
  info->set_xxhash64(rec->xxhash64);
  for (const std::string& t : rec->tensors) info->add_tensors(t);
  return report;
}

void ShardWriter::Start(const proto::Command& cmd, int rank, StageExecutor* exec, bool async) {
  Wait();
  const absl::Time t0 = absl::Now();
  Snapshot snap;
  snap.dir = cmd.checkpoint_dir();
  std::string name = "chunk";
  for (auto& [s, ps] : exec->Stages()) {
    if (!exec->IsCanonical(s)) continue;  // a DualPipe mirror copy is written once
    absl::StrAppend(&name, "-s", s);
    std::vector<float> zeros;
    for (const TensorView& v : train::ParamViews(*ps, true, &zeros)) {
      snap.names.push_back(v.name);
      snap.shapes.push_back(v.shape);
      snap.values.emplace_back(v.data, v.data + NumElements(v.shape));
    }
  }
  snap.file = name + ".safetensors";
  proto::StepReport report;
  report.set_rank(rank);
  report.set_generation(cmd.generation());
  proto::CheckpointResult* result = report.mutable_checkpoint_result();
  result->set_step(cmd.step());
  result->set_snapshot_stall_s(absl::ToDoubleSeconds(absl::Now() - t0));
  if (snap.names.empty()) {
    report_(report);
    return;
  }
  if (!async) {
    report_(Write(snap, report));
    return;
  }
  thread_ = std::thread([this, snap = std::move(snap), report]() { report_(Write(snap, report)); });
}

}  // namespace xhc::worker
