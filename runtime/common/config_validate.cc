#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "runtime/common/config.h"
#include "runtime/common/config_reader.h"

// Cross-field checks of the model block (model-spec.md section 1), kept apart from parsing.
namespace xhc {
namespace {

// The model block's keys, named from the config's root.
absl::Status InvalidModelKey(const std::string& key, const std::string& why) {
  return InvalidKey(absl::StrCat("model.", key), why);
}

absl::Status ValidateResidual(const ResidualConfig& r) {
  if (r.sinkhorn_iters < 1) return InvalidModelKey("residual.sinkhorn_iters", "must be >= 1");
  if (r.type == ResidualType::kVanilla) return absl::OkStatus();
  if (r.n_streams < 1) return InvalidModelKey("residual.n_streams", "must be >= 1");
  if (r.n_streams > 256) return InvalidModelKey("residual.n_streams", "must be <= 256");
  for (int width : r.conv_kernels) {
    if (width < 1 || width > 1024) {
      return InvalidModelKey("residual.conv_kernels",
                             absl::StrCat("width ", width, " not in [1, 1024]"));
    }
  }
  if (r.conv_kernels.size() > 32)
    return InvalidModelKey("residual.conv_kernels", "at most 32 kernels");
  if (r.type == ResidualType::kHc) return absl::OkStatus();
  if (r.type == ResidualType::kMhc) {
    if (r.n_streams < 2)
      return InvalidModelKey("residual.n_streams", "mhc needs at least 2 streams");
    if (r.n_streams > 16) {
      return InvalidModelKey("residual.n_streams", "mhc mixes all N streams: N must be <= 16");
    }
    return absl::OkStatus();
  }
  if (r.n_streams == 1) {
    return InvalidModelKey("residual.n_streams",
                           absl::StrCat(ResidualTypeName(r.type), " needs N > 1"));
  }
  if (r.n_active < 1 || r.n_active > r.n_streams) {
    return InvalidModelKey(
        "residual.n_active",
        absl::StrFormat("k = %d must be in [1, n_streams = %d]", r.n_active, r.n_streams));
  }
  if (r.n_fixed < 0 || r.n_fixed > r.n_active) {
    return InvalidModelKey(
        "residual.n_fixed",
        absl::StrFormat("m = %d must be in [0, n_active = %d]", r.n_fixed, r.n_active));
  }
  if (r.n_active > 16) return InvalidModelKey("residual.n_active", "k must be <= 16");
  return absl::OkStatus();
}

// xhc_flash windows: 2 or 4 sublayers, tiling the 2 * n_layers sublayers exactly.
absl::Status ValidateWindow(const ModelConfig& m) {
  const ResidualConfig& r = m.residual;
  if (r.type != ResidualType::kXhcFlash) return absl::OkStatus();
  if (r.window != 2 && r.window != 4) {
    return InvalidModelKey("residual.window",
                           absl::StrCat(r.window,
                                        " is not a valid window (2: xHC-Flash, one block; 4: "
                                        "xHC-Flash-4sub, two blocks)"));
  }
  if ((2 * m.n_layers) % r.window != 0) {
    return InvalidModelKey(
        "residual.window",
        absl::StrFormat("window %d does not tile the %d sublayers of n_layers = %d "
                        "(use an even n_layers, or window: 2)",
                        r.window, 2 * m.n_layers, m.n_layers));
  }
  return absl::OkStatus();
}

}  // namespace

// Upper bounds far above any model this runtime trains, so that derived sizes (4 * d_model,
// 2 * n_layers, seq_len + 1, products of them) cannot overflow int (4 * 2^30 did: found by
// hand-written input in the config_fuzzer corpus).
absl::Status CheckRange(const std::string& key, int value, int lo, int hi) {
  if (value < lo || value > hi) {
    return InvalidModelKey(key, absl::StrFormat("%d is not in [%d, %d]", value, lo, hi));
  }
  return absl::OkStatus();
}

absl::Status ValidateModel(ModelConfig& m) {
  if (m.vocab_size < 2) return InvalidModelKey("vocab_size", "must be >= 2");
  if (m.d_model < 2) return InvalidModelKey("d_model", "must be >= 2");
  if (m.n_layers < 1) return InvalidModelKey("n_layers", "must be >= 1");
  RETURN_IF_ERROR(CheckRange("vocab_size", m.vocab_size, 2, 1 << 24));
  RETURN_IF_ERROR(CheckRange("d_model", m.d_model, 2, 1 << 16));
  RETURN_IF_ERROR(CheckRange("n_layers", m.n_layers, 1, 1 << 12));
  RETURN_IF_ERROR(CheckRange("d_ff", m.d_ff, 0, 1 << 20));
  RETURN_IF_ERROR(CheckRange("seq_len", m.seq_len, 1, 1 << 20));
  if (m.n_heads < 1) return InvalidModelKey("n_heads", "must be >= 1");
  if (m.d_model % m.n_heads != 0) {
    return InvalidModelKey(
        "n_heads", absl::StrFormat("%d heads do not divide d_model %d", m.n_heads, m.d_model));
  }
  if (m.head_dim() % 2 != 0) {
    return InvalidModelKey("n_heads",
                           absl::StrCat("head dim ", m.head_dim(), " is odd (RoPE needs even)"));
  }
  if (m.n_kv_heads < 1 || m.n_heads % m.n_kv_heads != 0) {
    return InvalidModelKey(
        "n_kv_heads", absl::StrFormat("%d does not divide n_heads %d", m.n_kv_heads, m.n_heads));
  }
  if (m.d_ff == 0) m.d_ff = ((4 * m.d_model + 63) / 64) * 64;
  if (m.d_ff < 1) return InvalidModelKey("d_ff", "must be >= 1");
  if (m.seq_len < 1) return InvalidModelKey("seq_len", "must be >= 1");
  if (!(m.rope_theta > 0)) return InvalidModelKey("rope_theta", "must be > 0");
  if (!(m.norm_eps > 0)) return InvalidModelKey("norm_eps", "must be > 0");
  RETURN_IF_ERROR(ValidateResidual(m.residual));
  return ValidateWindow(m);
}

absl::Status ValidateDataParallel(int data_parallel, int microbatches) {
  if (data_parallel < 1 || data_parallel > 4096) {
    return absl::InvalidArgumentError(
        absl::StrFormat("pipeline.data_parallel: %d is not in [1, 4096]", data_parallel));
  }
  if (microbatches % data_parallel != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "pipeline.data_parallel: %d replicas cannot split train.microbatches = %d evenly (each "
        "replica runs the same schedule on train.microbatches / data_parallel micro-batches); "
        "use a divisor of %d",
        data_parallel, microbatches, microbatches));
  }
  return absl::OkStatus();
}

std::string ModelConfigToYaml(const ModelConfig& m) {
  const ResidualConfig& r = m.residual;
  return absl::StrFormat(
             "model:\n  vocab_size: %d\n  d_model: %d\n  n_layers: %d\n  n_heads: %d\n"
             "  n_kv_heads: %d\n  d_ff: %d\n  seq_len: %d\n  rope_theta: %.17g\n  norm_eps: %.17g\n"
             "  residual:\n    type: %s\n    n_streams: %d\n    n_active: %d\n    n_fixed: %d\n"
             "    conv_kernels: [%s]\n    gram_schmidt: %s\n    sinkhorn_iters: %d\n",
             m.vocab_size, m.d_model, m.n_layers, m.n_heads, m.n_kv_heads, m.d_ff, m.seq_len,
             m.rope_theta, m.norm_eps, ResidualTypeName(r.type), r.n_streams, r.n_active, r.n_fixed,
             absl::StrJoin(r.conv_kernels, ", "), r.gram_schmidt ? "true" : "false",
             r.sinkhorn_iters) +
         (r.type == ResidualType::kXhcFlash ? absl::StrFormat("    window: %d\n", r.window)
                                            : std::string());
}

std::string ModelConfigHash(const ModelConfig& m) {
  // FNV-1a over the canonical YAML: stable across processes and hosts.
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : ModelConfigToYaml(m)) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return absl::StrFormat("%016x", h);
}

}  // namespace xhc
