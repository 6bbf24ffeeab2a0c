// xhc ckpt verify DIR | xhc ckpt inspect DIR
#include <cstdio>

#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/common/config.h"
#include "runtime/control/cli/cli_util.h"
#include "runtime/control/cli/commands.h"

namespace xhc::cli {
namespace {

absl::Status Verify(const std::string& dir) {
  ASSIGN_OR_RETURN(std::string step_dir, ResolveCheckpointDir(dir));
  ASSIGN_OR_RETURN(Manifest m, VerifyCheckpoint(step_dir));
  int64_t bytes = 0, tensors = 0;
  for (const ShardRecord& s : m.shards) {
    bytes += s.bytes;
    tensors += static_cast<int64_t>(s.tensors.size());
  }
  std::printf("OK %s: step %lld, %zu shard(s), %lld tensors, %lld bytes, checksums match\n",
              step_dir.c_str(), static_cast<long long>(m.step), m.shards.size(),
              static_cast<long long>(tensors), static_cast<long long>(bytes));
  return absl::OkStatus();
}

absl::Status Inspect(const std::string& dir) {
  ASSIGN_OR_RETURN(std::string step_dir, ResolveCheckpointDir(dir));
  ASSIGN_OR_RETURN(LoadedCheckpoint c, LoadCheckpoint(step_dir));
  std::printf("checkpoint %s\n  step %lld, layout: %s, sampler step %lld\n", step_dir.c_str(),
              static_cast<long long>(c.manifest.step), c.manifest.layout.c_str(),
              static_cast<long long>(c.manifest.sampler_step));
  absl::StatusOr<ModelConfig> m = ParseModelOnly(c.manifest.config_yaml);
  if (m.ok()) {
    std::printf("  model: %s residual, N=%d k=%d, %d layers, d_model %d, %d heads, seq %d\n",
                ResidualTypeName(m->residual.type).c_str(), m->residual.n_streams,
                m->residual.n_active, m->n_layers, m->d_model, m->n_heads, m->seq_len);
  }
  int64_t model_elems = 0;
  for (const auto& [name, t] : c.tensors) {
    std::printf("  %-48s [%s] %lld\n", name.c_str(), absl::StrJoin(t.shape, ", ").c_str(),
                static_cast<long long>(t.values.size()));
    if (name.rfind("optim.", 0) != 0) model_elems += static_cast<int64_t>(t.values.size());
  }
  std::printf("  %zu tensors, %lld model parameters\n", c.tensors.size(),
              static_cast<long long>(model_elems));
  return absl::OkStatus();
}

absl::Status Ckpt(const std::vector<std::string>& args) {
  if (args.size() != 2 || (args[0] != "verify" && args[0] != "inspect")) {
    if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
      std::printf("usage: xhc ckpt verify DIR | xhc ckpt inspect DIR\n");
      return absl::CancelledError("help");
    }
    return absl::InvalidArgumentError("usage: xhc ckpt verify DIR | xhc ckpt inspect DIR");
  }
  return args[0] == "verify" ? Verify(args[1]) : Inspect(args[1]);
}

}  // namespace

int RunCkpt(const std::vector<std::string>& args) {
  absl::Status s = Ckpt(args);
  return s.ok() ? 0 : Fail("ckpt", s);
}

}  // namespace xhc::cli
