#include "runtime/train/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/exact_format.h"
#include "base/status_macros.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/file_io.h"
#include "runtime/common/eta.h"
#include "runtime/common/log.h"
#include "runtime/data/sampler.h"
#include "runtime/train/model_io.h"
#include "runtime/train/optimizer.h"

namespace xhc::train {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// A failed checkpoint (a full disk) stops the run: the step is not committed, its files are
// removed, LATEST still names the previous checkpoint, and `--resume` continues from there
// once there is space (docs/checkpoints.md, "Disk full").
absl::Status SaveCheckpoint(const Config& config, const std::string& out_dir, int64_t step,
                            const model::ParamSetT<float>& params, FileSystem& files) {
  const std::string root = (fs::path(out_dir) / "checkpoints").string();
  const std::string step_dir = (fs::path(root) / StepDirName(step)).string();
  std::vector<float> zeros;
  absl::StatusOr<ShardRecord> written =
      WriteShard(step_dir, "model.safetensors", ParamViews(params, true, &zeros), files);
  if (!written.ok()) {
    AbandonCheckpoint(root, step, files).IgnoreError();
    return absl::Status(written.status().code(),
                        absl::StrCat("checkpoint step ", step, " not committed (removed ", step_dir,
                                     "): ", written.status().message()));
  }
  ShardRecord shard = *std::move(written);
  Manifest m;
  m.step = step;
  m.config_yaml = config.source_yaml;
  m.sampler_step = step;
  m.rng = {{"seed", absl::StrCat(config.train.seed)}};
  m.shards = {shard};
  m.layout = "single-process";
  return CommitCheckpoint(root, m, config.checkpoint.keep, files);
}

// Runs one optimizer step; returns the mean micro-batch loss.
absl::StatusOr<double> TrainStep(const Config& config, const BatchSampler& sampler, int64_t step,
                                 int64_t total, model::StageModel* model,
                                 model::ParamSetT<float>* params, StepStats* stats,
                                 std::vector<double>* mb_losses) {
  params->ZeroGrads();
  const int M = config.train.microbatches;
  double loss_sum = 0;
  for (int mb = 0; mb < M; ++mb) {
    const TokenBatch batch = sampler.Train(step, mb);
    ASSIGN_OR_RETURN(double loss, model->Forward(mb, batch.batch, batch.inputs.data(),
                                                 batch.targets.data(), nullptr, nullptr));
    RETURN_IF_ERROR(model->Backward(mb, 1.0 / M, nullptr, nullptr));
    loss_sum += loss;
    mb_losses->push_back(loss);
  }
  params->FinalizeGrads();
  *stats = ApplyAdamW(config.optim, total, step, std::sqrt(GradSumOfSquares(*params)), params);
  return loss_sum / M;
}

}  // namespace

absl::StatusOr<double> ValidationLoss(const Config& config, const Corpus& corpus,
                                      model::StageModel* model) {
  BatchSampler val(&corpus.val, config.train.seed, config.train.batch_size, config.model.seq_len);
  double total = 0;
  for (int e = 0; e < config.train.eval_batches; ++e) {
    const TokenBatch b = val.Eval(e);
    ASSIGN_OR_RETURN(double loss, model->ForwardOnly(b.batch, b.inputs.data(), b.targets.data(),
                                                     nullptr, nullptr, nullptr));
    total += loss;
  }
  return total / config.train.eval_batches;
}

namespace {

// The run directory, holding the job's config.yaml.
absl::Status PrepareRunDir(const Config& config, const std::string& out_dir) {
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("create ", out_dir, ": ", ec.message()));
  return WriteFileAtomic((fs::path(out_dir) / "config.yaml").string(), config.source_yaml);
}

// Loads the newest valid checkpoint under out_dir into params (weights and optimizer
// moments); returns its step.
absl::StatusOr<int64_t> ResumeFromNewest(const std::string& out_dir,
                                         model::ParamSetT<float>* params) {
  std::vector<std::string> warnings;
  ASSIGN_OR_RETURN(LoadedCheckpoint ckpt,
                   LoadNewestValid((fs::path(out_dir) / "checkpoints").string(), &warnings));
  for (const std::string& w : warnings) LogWarning("%s", w);
  RETURN_IF_ERROR(LoadParams(ckpt.tensors, /*with_optim=*/true, params));
  LogInfo("resumed from %s (step %d)", ckpt.dir, ckpt.manifest.step);
  return ckpt.manifest.step;
}

// One step's metrics.jsonl record, open at the end (a validation loss may follow).
std::string StepRecord(int64_t done, double loss, const StepStats& stats, double step_s,
                       double tokens_per_step, const std::vector<double>& mb_losses) {
  std::string line = absl::StrFormat(
      "{\"step\": %d, \"loss\": %.6f, \"lr\": %.6g, \"grad_norm\": %.6g, \"step_s\": %.4f, "
      "\"tokens_per_s\": %.1f",
      done, loss, stats.lr, stats.grad_norm, step_s, tokens_per_step / step_s);
  absl::StrAppend(&line, ", \"microbatch_losses\": [", ExactList(mb_losses), "]");
  return line;
}

// The progress line on stdout: step, loss (and validation loss where this step ran it),
// learning rate, throughput so far, time left.
void PrintProgress(int64_t done, int64_t total, double loss, const double* val_loss, double lr,
                   double tokens_per_s, double seconds_left) {
  std::printf("step %5d/%d  loss %.4f%s  lr %.2e  %.0f tok/s  ETA %s\n", static_cast<int>(done),
              static_cast<int>(total), loss,
              val_loss ? absl::StrFormat("  val %.4f", *val_loss).c_str() : "", lr, tokens_per_s,
              FormatEta(seconds_left).c_str());
  std::fflush(stdout);
}

}  // namespace

absl::StatusOr<TrainResult> RunTraining(const Config& config, const TrainOptions& options) {
  const int64_t total = options.steps >= 0 ? options.steps : config.train.steps;
  ASSIGN_OR_RETURN(Corpus corpus, LoadTrainingCorpus(config));
  RETURN_IF_ERROR(PrepareRunDir(config, options.out_dir));
  FileSystem& checkpoint_files =
      options.checkpoint_files ? *options.checkpoint_files : DefaultFileSystem();
  const model::StageSpec spec = model::StageSpec::Full(config.model);
  model::ParamSetT<float> params = model::BuildStageParams<float>(config.model, spec);
  model::InitParams(config.model, config.train.seed, &params);
  TrainResult result;
  if (options.resume) {
    ASSIGN_OR_RETURN(result.start_step, ResumeFromNewest(options.out_dir, &params));
  }
  model::StageModel model(config.model, spec, &params);
  BatchSampler sampler(&corpus.train, config.train.seed, config.train.batch_size,
                       config.model.seq_len);
  std::ofstream metrics((fs::path(options.out_dir) / "metrics.jsonl").string(), std::ios::app);
  if (total == 0 && !options.resume) {
    // `--steps 0` exports the seeded initial weights as checkpoint 0, so another framework
    // can start from exactly our init (runtime/lab/bench/peer loads it into PyTorch).
    RETURN_IF_ERROR(SaveCheckpoint(config, options.out_dir, 0, params, checkpoint_files));
    return result;
  }
  const double tokens_per_step = static_cast<double>(config.train.microbatches) *
                                 config.train.batch_size * config.model.seq_len;
  double train_seconds = 0;
  EtaEstimator eta(total, config.train.eval_every);
  for (int64_t step = result.start_step; step < total; ++step) {
    const auto t0 = Clock::now();
    StepStats stats;
    std::vector<double> mb_losses;
    ASSIGN_OR_RETURN(double loss,
                     TrainStep(config, sampler, step, total, &model, &params, &stats, &mb_losses));
    const double dt = Seconds(t0, Clock::now());
    train_seconds += dt;
    result.step_losses.push_back(loss);
    const int64_t done = step + 1;
    std::string line = StepRecord(done, loss, stats, dt, tokens_per_step, mb_losses);
    const bool evaluate =
        config.train.eval_every > 0 && (done % config.train.eval_every == 0 || done == total);
    if (evaluate) {
      ASSIGN_OR_RETURN(result.final_val_loss, ValidationLoss(config, corpus, &model));
      absl::StrAppend(&line, absl::StrFormat(", \"val_loss\": %.6f", result.final_val_loss));
    }
    eta.Add(done, Seconds(t0, Clock::now()), evaluate);
    metrics << line << "}\n" << std::flush;
    if (!options.quiet && (done % config.train.log_every == 0 || done == total)) {
      const double tps =
          tokens_per_step * static_cast<double>(result.step_losses.size()) / train_seconds;
      PrintProgress(done, total, loss, evaluate ? &result.final_val_loss : nullptr, stats.lr, tps,
                    eta.SecondsLeft(done));
    }
    const bool periodic = config.checkpoint.every > 0 && done % config.checkpoint.every == 0;
    const bool stopping = done == options.stop_after;
    if (periodic || done == total || stopping) {
      RETURN_IF_ERROR(SaveCheckpoint(config, options.out_dir, done, params, checkpoint_files));
    }
    if (stopping) {
      result.end_step = done;
      return result;
    }
  }
  result.end_step = total;
  result.tokens_per_s =
      train_seconds > 0 ? tokens_per_step * result.step_losses.size() / train_seconds : 0;
  return result;
}

}  // namespace xhc::train
