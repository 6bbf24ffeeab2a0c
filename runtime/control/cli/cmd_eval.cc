// xhc eval (--checkpoint DIR | --config FILE --weights PATH) --data FILE --batch B
//          --seq-len T [--dump-grads OUT.safetensors] [--diagnostics [--diagnostics-out F]]
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/file_read.h"
#include "base/status_macros.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/file_io.h"
#include "runtime/control/cli/cli_util.h"
#include "runtime/control/cli/commands.h"
#include "runtime/control/cli/model_loader.h"
#include "runtime/data/corpus.h"
#include "runtime/data/sampler.h"
#include "runtime/lab/ablation/diagnostics.h"
#include "runtime/model/stage.h"
#include "runtime/train/model_io.h"

namespace xhc::cli {
namespace {

absl::Status DumpGrads(model::StageModel* model, model::ParamSetT<float>& params,
                       const TokenBatch& batch, const std::string& path) {
  ASSIGN_OR_RETURN(double loss, model->Forward(0, batch.batch, batch.inputs.data(),
                                               batch.targets.data(), nullptr, nullptr));
  (void)loss;
  RETURN_IF_ERROR(model->Backward(0, 1.0, nullptr, nullptr));
  params.FinalizeGrads();
  std::vector<TensorView> views;
  for (const auto& p : params.all()) views.push_back({p->name, p->shape, p->grad.data()});
  return WriteFileAtomic(path, EncodeSafetensors(views, {{"format", "pt"}}));
}

absl::Status Eval(const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(
      Flags flags,
      ParseFlagsOrHelp(
          "eval",
          "(--checkpoint DIR | --config FILE --weights PATH) --data FILE --batch B "
          "--seq-len T [--dump-grads OUT.safetensors] [--diagnostics [--diagnostics-out F]]",
          args,
          {{"checkpoint", "run, checkpoint root or step directory"},
           {"config", "config whose model: block describes --weights"},
           {"weights", "safetensors file or directory of them (spec names)"},
           {"data", "file whose first B·(T+1) bytes are evaluated", false, true},
           {"batch", "B rows", false, true},
           {"seq-len", "T tokens per row", false, true},
           {"dump-grads", "write d loss / d parameter as float32 safetensors"},
           {"diagnostics",
            "print the residual stability diagnostics as JSON "
            "(runtime/lab/ablation/diagnostics.h)",
            true},
           {"diagnostics-out", "also write them to this file (atomically)"}}));
  ASSIGN_OR_RETURN(int64_t B, flags.GetCount("batch", 0));
  ASSIGN_OR_RETURN(int64_t T, flags.GetCount("seq-len", 0));
  if (B < 1) return absl::InvalidArgumentError("--batch must be >= 1");
  if (T < 1) return absl::InvalidArgumentError("--seq-len must be >= 1");
  ASSIGN_OR_RETURN(LoadedModel loaded, LoadModelFromFlags(flags, static_cast<int>(T)));
  ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(flags.Get("data")));
  if (static_cast<int64_t>(bytes.size()) < B * (T + 1)) {
    return absl::InvalidArgumentError(absl::StrFormat("--data %s has %d bytes; B·(T+1) = %d needed",
                                                      flags.Get("data"), bytes.size(),
                                                      B * (T + 1)));
  }
  const TokenBatch batch = FirstRows(std::vector<uint8_t>(bytes.begin(), bytes.end()),
                                     static_cast<int>(B), static_cast<int>(T));
  model::StageModel model(loaded.config, model::StageSpec::Full(loaded.config),
                          loaded.params.get());
  ASSIGN_OR_RETURN(double loss, model.ForwardOnly(batch.batch, batch.inputs.data(),
                                                  batch.targets.data(), nullptr, nullptr, nullptr));
  if (flags.Has("dump-grads")) {
    RETURN_IF_ERROR(DumpGrads(&model, *loaded.params, batch, flags.Get("dump-grads")));
  }
  if (flags.GetBool("diagnostics") || flags.Has("diagnostics-out")) {
    // After --dump-grads (which reads the loaded weights' gradients): the diagnostics run
    // their own forward and backward.
    ASSIGN_OR_RETURN(ablation::Diagnostics d,
                     ablation::ComputeDiagnostics(loaded.config, loaded.params.get(), batch));
    const std::string json = ablation::DiagnosticsJson(d);
    if (flags.Has("diagnostics-out")) {
      RETURN_IF_ERROR(WriteFileAtomic(flags.Get("diagnostics-out"), json + "\n"));
    }
    std::printf("{\"loss\": %.9g, \"diagnostics\": %s}\n", loss, json.c_str());
    return absl::OkStatus();
  }
  std::printf("{\"loss\": %.9g}\n", loss);
  return absl::OkStatus();
}

}  // namespace

int RunEval(const std::vector<std::string>& args) {
  absl::Status s = Eval(args);
  return s.ok() ? 0 : Fail("eval", s);
}

}  // namespace xhc::cli
