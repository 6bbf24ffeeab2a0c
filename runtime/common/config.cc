#include "runtime/common/config.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/bandwidth.h"
#include "base/file_read.h"
#include "base/status_macros.h"
#include "runtime/common/config_reader.h"
#include "yaml-cpp/yaml.h"

namespace xhc {
namespace {

absl::StatusOr<ResidualType> ParseResidualType(const std::string& key, const std::string& name) {
  if (name == "vanilla") return ResidualType::kVanilla;
  if (name == "hc") return ResidualType::kHc;
  if (name == "mhc") return ResidualType::kMhc;
  if (name == "xhc") return ResidualType::kXhc;
  if (name == "xhc_flash") return ResidualType::kXhcFlash;
  return InvalidKey(key, absl::StrCat("unknown residual type '", name,
                                      "' (expected vanilla, hc, mhc, xhc or xhc_flash)"));
}

// Type-dependent defaults (model-spec.md section 1) are applied only to keys not given.
absl::Status ReadResidual(ConfigReader& r, ResidualConfig* res) {
  std::string type = ResidualTypeName(res->type);
  RETURN_IF_ERROR(r.Get("type", &type));
  ASSIGN_OR_RETURN(res->type, ParseResidualType(r.Key("type"), type));
  const bool has_streams = r.Has("n_streams");
  RETURN_IF_ERROR(r.Get("n_streams", &res->n_streams));
  if (res->type == ResidualType::kVanilla) {
    if (has_streams && res->n_streams != 1) {
      return InvalidKey(r.Key("n_streams"), "vanilla residual has exactly 1 stream");
    }
    res->n_streams = 1;
  } else if ((res->type == ResidualType::kMhc || res->type == ResidualType::kHc) && !has_streams) {
    res->n_streams = 4;
  }
  RETURN_IF_ERROR(r.Get("n_active", &res->n_active));
  RETURN_IF_ERROR(r.Get("n_fixed", &res->n_fixed));
  const bool has_conv = r.Has("conv_kernels");
  RETURN_IF_ERROR(r.Get("conv_kernels", &res->conv_kernels));
  if (res->type == ResidualType::kHc) {
    if (has_conv) {
      return InvalidKey(r.Key("conv_kernels"),
                        "hc has no temporal convolutions (use mhc with conv_kernels for the "
                        "convolution ablation)");
    }
    res->conv_kernels.clear();
  } else if (res->type == ResidualType::kMhc && !has_conv) {
    res->conv_kernels.clear();
  }
  RETURN_IF_ERROR(r.Get("gram_schmidt", &res->gram_schmidt));
  RETURN_IF_ERROR(r.Get("sinkhorn_iters", &res->sinkhorn_iters));
  const bool has_window = r.Has("window");
  RETURN_IF_ERROR(r.Get("window", &res->window));
  if (has_window && res->type != ResidualType::kXhcFlash) {
    return InvalidKey(r.Key("window"), "only xhc_flash has a window");
  }
  return r.Finish();
}

absl::Status ReadModel(ConfigReader& r, ModelConfig* m) {
  RETURN_IF_ERROR(r.Get("vocab_size", &m->vocab_size));
  RETURN_IF_ERROR(r.Get("d_model", &m->d_model));
  RETURN_IF_ERROR(r.Get("n_layers", &m->n_layers));
  RETURN_IF_ERROR(r.Get("n_heads", &m->n_heads));
  RETURN_IF_ERROR(r.Get("n_kv_heads", &m->n_kv_heads));
  RETURN_IF_ERROR(r.Get("d_ff", &m->d_ff));
  RETURN_IF_ERROR(r.Get("seq_len", &m->seq_len));
  RETURN_IF_ERROR(r.Get("rope_theta", &m->rope_theta));
  RETURN_IF_ERROR(r.Get("norm_eps", &m->norm_eps));
  ConfigReader res({}, "");
  RETURN_IF_ERROR(r.Child("residual", &res));
  RETURN_IF_ERROR(ReadResidual(res, &m->residual));
  RETURN_IF_ERROR(r.Finish());
  return ValidateModel(*m);
}

absl::Status ReadOptim(ConfigReader& r, OptimConfig* o) {
  RETURN_IF_ERROR(r.Get("lr", &o->lr));
  RETURN_IF_ERROR(r.Get("warmup_steps", &o->warmup_steps));
  RETURN_IF_ERROR(r.Get("min_lr_ratio", &o->min_lr_ratio));
  RETURN_IF_ERROR(r.Get("beta1", &o->beta1));
  RETURN_IF_ERROR(r.Get("beta2", &o->beta2));
  RETURN_IF_ERROR(r.Get("eps", &o->eps));
  RETURN_IF_ERROR(r.Get("weight_decay", &o->weight_decay));
  RETURN_IF_ERROR(r.Get("grad_clip", &o->grad_clip));
  RETURN_IF_ERROR(r.Finish());
  if (!(o->lr > 0)) return InvalidKey("optim.lr", "must be > 0");
  if (o->warmup_steps < 0) return InvalidKey("optim.warmup_steps", "must be >= 0");
  if (o->min_lr_ratio < 0 || o->min_lr_ratio > 1) {
    return InvalidKey("optim.min_lr_ratio", "must be in [0, 1]");
  }
  if (o->beta1 < 0 || o->beta1 >= 1) return InvalidKey("optim.beta1", "must be in [0, 1)");
  if (o->beta2 < 0 || o->beta2 >= 1) return InvalidKey("optim.beta2", "must be in [0, 1)");
  if (o->grad_clip < 0) return InvalidKey("optim.grad_clip", "must be >= 0 (0 disables)");
  return absl::OkStatus();
}

absl::Status ReadTrain(ConfigReader& r, TrainConfig* t) {
  RETURN_IF_ERROR(r.Get("steps", &t->steps));
  RETURN_IF_ERROR(r.Get("batch_size", &t->batch_size));
  RETURN_IF_ERROR(r.Get("microbatches", &t->microbatches));
  RETURN_IF_ERROR(r.Get("seed", &t->seed));
  RETURN_IF_ERROR(r.Get("eval_every", &t->eval_every));
  RETURN_IF_ERROR(r.Get("eval_batches", &t->eval_batches));
  RETURN_IF_ERROR(r.Get("log_every", &t->log_every));
  RETURN_IF_ERROR(r.Finish());
  if (t->steps < 0) return InvalidKey("train.steps", "must be >= 0");
  if (t->batch_size < 1) return InvalidKey("train.batch_size", "must be >= 1");
  if (t->microbatches < 1) return InvalidKey("train.microbatches", "must be >= 1");
  if (t->eval_every < 0) return InvalidKey("train.eval_every", "must be >= 0");
  if (t->eval_batches < 1) return InvalidKey("train.eval_batches", "must be >= 1");
  if (t->log_every < 1) return InvalidKey("train.log_every", "must be >= 1");
  return absl::OkStatus();
}

absl::Status ReadData(ConfigReader& r, DataConfig* d) {
  if (r.Has("train")) {
    // Either one path/glob or a list of them.
    std::string single;
    if (r.Get("train", &single).ok()) {
      d->train = {single};
    } else {
      RETURN_IF_ERROR(r.Get("train", &d->train));
    }
  }
  RETURN_IF_ERROR(r.Get("val_fraction", &d->val_fraction));
  RETURN_IF_ERROR(r.Finish());
  if (d->train.empty()) return InvalidKey("data.train", "needs at least one file or glob");
  if (d->val_fraction <= 0 || d->val_fraction >= 0.5) {
    return InvalidKey("data.val_fraction", "must be in (0, 0.5)");
  }
  return absl::OkStatus();
}

// An optional layer count of pipeline.KEY: within [0, model.n_layers].
absl::Status ReadStageLayers(ConfigReader& p, const std::string& key, int n_layers,
                             std::optional<int>* out) {
  if (!p.Has(key)) return absl::OkStatus();
  int value = 0;
  RETURN_IF_ERROR(p.Get(key, &value));
  if (value < 0) return InvalidKey(p.Key(key), absl::StrCat(value, " must be >= 0"));
  if (value > n_layers) {
    return InvalidKey(p.Key(key), absl::StrCat(value, " exceeds model.n_layers = ", n_layers));
  }
  *out = value;
  return absl::OkStatus();
}

absl::Status ReadPipeline(ConfigReader& p, int n_layers, PipelineConfig* pc) {
  const bool has_schedule = p.Has("schedule"), has_chunks = p.Has("chunks");
  RETURN_IF_ERROR(p.Get("schedule", &pc->schedule));
  RETURN_IF_ERROR(p.Get("workers", &pc->workers));
  RETURN_IF_ERROR(p.Get("chunks", &pc->chunks));
  RETURN_IF_ERROR(p.Get("schedule_csv", &pc->schedule_csv));
  RETURN_IF_ERROR(ReadStageLayers(p, "first_stage_layers", n_layers, &pc->first_stage_layers));
  RETURN_IF_ERROR(ReadStageLayers(p, "last_stage_layers", n_layers, &pc->last_stage_layers));
  RETURN_IF_ERROR(p.Get("data_parallel", &pc->data_parallel));
  ConfigReader link({}, "");
  RETURN_IF_ERROR(p.Child("link", &link));
  std::string bandwidth;
  RETURN_IF_ERROR(link.Get("bandwidth", &bandwidth));
  RETURN_IF_ERROR(link.Finish());
  ASSIGN_OR_RETURN(pc->link_bandwidth_bits_per_s, ParseBandwidth(bandwidth, link.Key("bandwidth")));
  RETURN_IF_ERROR(p.Finish());
  if (!pc->schedule_csv.empty() && (has_schedule || has_chunks)) {
    // The CSV says which stages each rank holds and in what order it runs them.
    return InvalidKey("pipeline.schedule_csv",
                      "the CSV is the schedule and its placement; remove pipeline.schedule and "
                      "pipeline.chunks");
  }
  if (pc->workers < 1) return InvalidKey("pipeline.workers", "must be >= 1");
  if (pc->chunks < 1) return InvalidKey("pipeline.chunks", "must be >= 1");
  if (pc->first_stage_layers && pc->last_stage_layers &&
      *pc->first_stage_layers + *pc->last_stage_layers > n_layers) {
    return InvalidKey("pipeline.first_stage_layers + pipeline.last_stage_layers",
                      absl::StrCat(*pc->first_stage_layers, " + ", *pc->last_stage_layers,
                                   " exceeds model.n_layers = ", n_layers));
  }
  return absl::OkStatus();
}

absl::Status ReadRest(ConfigReader& root, Config* c) {
  ConfigReader p({}, ""), ck({}, ""), f({}, "");
  RETURN_IF_ERROR(root.Child("pipeline", &p));
  RETURN_IF_ERROR(ReadPipeline(p, c->model.n_layers, &c->pipeline));
  RETURN_IF_ERROR(ValidateDataParallel(c->pipeline.data_parallel, c->train.microbatches));
  RETURN_IF_ERROR(root.Child("checkpoint", &ck));
  RETURN_IF_ERROR(ck.Get("every", &c->checkpoint.every));
  RETURN_IF_ERROR(ck.Get("keep", &c->checkpoint.keep));
  RETURN_IF_ERROR(ck.Get("async", &c->checkpoint.async));
  RETURN_IF_ERROR(ck.Finish());
  if (c->checkpoint.every < 0) return InvalidKey("checkpoint.every", "must be >= 0");
  if (c->checkpoint.keep < 1) return InvalidKey("checkpoint.keep", "must be >= 1");
  RETURN_IF_ERROR(root.Child("fault", &f));
  RETURN_IF_ERROR(f.Get("heartbeat_timeout", &c->fault.heartbeat_timeout_s));
  RETURN_IF_ERROR(f.Get("step_timeout", &c->fault.step_timeout_s));
  RETURN_IF_ERROR(f.Get("max_restarts", &c->fault.max_restarts));
  RETURN_IF_ERROR(f.Finish());
  if (c->fault.heartbeat_timeout_s <= 0)
    return InvalidKey("fault.heartbeat_timeout", "must be > 0");
  if (c->fault.step_timeout_s <= 0) return InvalidKey("fault.step_timeout", "must be > 0");
  return absl::OkStatus();
}

absl::StatusOr<YAML::Node> ParseYaml(const std::string& text) {
  try {
    YAML::Node node = YAML::Load(text);
    if (!node.IsMap() && !node.IsNull()) {
      return absl::InvalidArgumentError("config: the top level must be a mapping");
    }
    return node;
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("config: YAML syntax error: ", e.what()));
  }
}

}  // namespace

std::string ResidualTypeName(ResidualType type) {
  switch (type) {
    case ResidualType::kVanilla: return "vanilla";
    case ResidualType::kHc: return "hc";
    case ResidualType::kMhc: return "mhc";
    case ResidualType::kXhc: return "xhc";
    case ResidualType::kXhcFlash: return "xhc_flash";
  }
  return "?";
}

absl::StatusOr<Config> ParseConfig(const std::string& yaml_text) {
  ASSIGN_OR_RETURN(YAML::Node node, ParseYaml(yaml_text));
  Config c;
  c.source_yaml = yaml_text;
  ConfigReader root(node, "");
  ConfigReader model({}, ""), optim({}, ""), train({}, ""), data({}, "");
  RETURN_IF_ERROR(root.Child("model", &model));
  RETURN_IF_ERROR(ReadModel(model, &c.model));
  RETURN_IF_ERROR(root.Child("optim", &optim));
  RETURN_IF_ERROR(ReadOptim(optim, &c.optim));
  RETURN_IF_ERROR(root.Child("train", &train));
  RETURN_IF_ERROR(ReadTrain(train, &c.train));
  RETURN_IF_ERROR(root.Child("data", &data));
  RETURN_IF_ERROR(ReadData(data, &c.data));
  RETURN_IF_ERROR(ReadRest(root, &c));
  RETURN_IF_ERROR(root.Finish());
  return c;
}

absl::StatusOr<ModelConfig> ParseModelOnly(const std::string& yaml_text) {
  ASSIGN_OR_RETURN(YAML::Node node, ParseYaml(yaml_text));
  ConfigReader root(node, "");
  ConfigReader model({}, "");
  RETURN_IF_ERROR(root.Child("model", &model));
  ModelConfig m;
  RETURN_IF_ERROR(ReadModel(model, &m));
  return m;
}

absl::StatusOr<Config> LoadConfigFile(const std::string& path) {
  return ParseFile(path, [](const std::string& text) { return ParseConfig(text); });
}

}  // namespace xhc
