#ifndef XHC_RUNTIME_MODEL_STAGE_H_
#define XHC_RUNTIME_MODEL_STAGE_H_

// One pipeline stage of the xHC language model (model-spec.md sections 2–4): a contiguous
// range of layers, plus the embedding + expand on the first stage and the head reduce,
// final norm, LM head and loss on the last. The whole model is the stage with
// StageSpec::Full.
//
// Work on micro-batch `mb` comes in three calls, which the pipeline schedules issue at
// different times (F, I, W; a plain backward is I then W):
//   Forward(mb)        saves activations for mb;
//   BackwardInput(mb)  produces the gradient for the previous stage and queues mb's
//                      weight-gradient work (a FIFO per micro-batch);
//   BackwardWeight(mb) runs that queue into ParamT::grad, adds that into ParamT::grad_acc
//                      (double) and frees mb; ParamSetT::FinalizeGrads ends the step.
// Several micro-batches may be in flight at once.

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/common/config.h"
#include "runtime/model/params.h"
#include "runtime/model/phase_times.h"
#include "runtime/model/stage_weights.h"

namespace xhc::model {

template <typename T>
struct MicrobatchState;  // activations of one micro-batch (stage.cc)

template <typename T>
class StageModelT {
 public:
  // `params` must hold this stage's tensors (BuildStageParams with the same spec).
  StageModelT(const ModelConfig& cfg, const StageSpec& spec, ParamSetT<T>* params);
  ~StageModelT();

  // tokens (B, T) on the first stage, else x_in (B, T, N, C). Non-last stages write
  // x_out (B, T, N, C); the last stage reads targets (B, T) and returns the mean loss. x_out
  // may be x_in (a middle stage then runs in that buffer, with no copy in).
  absl::StatusOr<double> Forward(int mb, int B, const int32_t* tokens, const int32_t* targets,
                                 const T* x_in, T* x_out);

  // The last stage starts from d(loss_scale · loss); others from dx_out (B, T, N, C).
  // Non-first stages write dx_in (B, T, N, C). dx_in may be dx_out (the gradient is then
  // computed in that buffer, with no copy).
  absl::Status BackwardInput(int mb, double loss_scale, const T* dx_out, T* dx_in);

  // With `done`, this is the stage's last weight pass of the step: each group of parameters
  // (GroupByWeightPass: one sublayer's, the head's, the embedding's) is added into grad_acc as
  // soon as the part of the pass that writes it has run, and handed to `done`, whose sums are
  // then final for the step: DualPipe sends them to the mirror copy while the rest of the
  // pass runs. Every parameter is handed over once; same bits as without (stage_split_test).
  using ParamsDone = std::function<absl::Status(const std::vector<ParamT<T>*>& group)>;
  absl::Status BackwardWeight(int mb, const ParamsDone& done = nullptr);

  // BackwardInput then BackwardWeight, for callers that run them back to back with nothing
  // waiting on dx_in in between (single-process training, evaluation): each sublayer's weight
  // gradients right after its input gradient, from the input state the input pass has just
  // rebuilt, so X_out is neither copied nor rebuilt a second time. Same bits as the two calls
  // (stage_split_test).
  absl::Status Backward(int mb, double loss_scale, const T* dx_out, T* dx_in);

  // Forward without saving anything for backward (evaluation, sampling). Returns the
  // loss on the last stage when targets are given; writes logits (B, T, V) when asked.
  absl::StatusOr<double> ForwardOnly(int B, const int32_t* tokens, const int32_t* targets,
                                     const T* x_in, T* x_out, std::vector<T>* logits);

  // Elements of the inter-stage state of B sequences: B·T·N·C.
  int64_t StateElements(int B) const;
  int NumInFlight() const { return static_cast<int>(inflight_.size()); }
  // Finished micro-batches' states kept for reuse by the next Forward (see spare_).
  int NumSpare() const { return static_cast<int>(spare_.size()); }
  const StageSpec& spec() const { return spec_; }
  const ModelConfig& config() const { return cfg_; }
  // Accumulates wall time per kind of work into `times` (null: off, the default).
  void set_phase_times(PhaseTimes* times) { phases_ = times; }
  // Called after each residual sublayer's forward (not for vanilla) with its global index
  // q (2l attention, 2l+1 MLP) and its cache (active set, Hres, ...): the diagnostics read
  // the per-token maps the step really used. Empty: off, the default.
  using SublayerObserver = std::function<void(int q, const kernels::XhcCacheT<T>& cache)>;
  void set_sublayer_observer(SublayerObserver observer) { observer_ = std::move(observer); }

 private:
  absl::StatusOr<double> RunForward(MicrobatchState<T>* st, int B, const int32_t* tokens,
                                    const int32_t* targets, const T* x_in, T* x_out,
                                    std::vector<T>* logits);
  // X (n, N, C): the sublayer's input state on entry, its output state on exit.
  absl::Status ForwardSublayer(MicrobatchState<T>* st, int sub_idx, T* X);
  // X: the state after sublayer sub_idx on entry, its residual input on exit. dX (n, N, C):
  // the gradient of the state after the sublayer on entry, of its input on exit.
  // weights_now: its weight gradients too (from X, the rebuilt input), else they are queued.
  absl::Status BackwardSublayer(MicrobatchState<T>* st, int sub_idx, T* dX, std::vector<T>* X,
                                bool weights_now);
  // BackwardInput's work; weights_now: Backward's (every weight gradient as it is queued).
  absl::Status BackwardInputPass(int mb, double loss_scale, const T* dx_out, T* dx_in,
                                 bool weights_now);
  absl::Status RunQueuedWeights(MicrobatchState<T>* st);  // in order, emptying the queue
  // The same, accumulating each group and handing it to `done` once its last part has run.
  absl::Status RunQueuedWeightsByGroup(MicrobatchState<T>* st, const ParamsDone& done);
  absl::StatusOr<double> ForwardHead(MicrobatchState<T>* st, const T* X, std::vector<T>* logits);
  // Writes the head's gradient into every element of dX (n, N, C).
  absl::Status BackwardHead(MicrobatchState<T>* st, double loss_scale, T* dX);

  ModelConfig cfg_;
  StageSpec spec_;
  ParamSetT<T>* params_;
  ParamT<T>* embed_ = nullptr;
  std::vector<LayerWeights<T>> layers_;
  std::vector<std::vector<ParamT<T>*>> weight_groups_;  // GroupByWeightPass
  HeadWeights<T> head_;
  std::map<int, std::unique_ptr<MicrobatchState<T>>> inflight_;
  // States of finished micro-batches, reused by the next Forward: their buffers keep their
  // size, so a step does not zero-fill ~200 MiB of caches and activations again (xhc, d_model
  // 512, 1024 tokens). At most as many as were ever in flight at once (max_in_flight_).
  // Every kernel writes what it reads later in the same pass (stage_recycle_test: a state
  // that held other micro-batches gives the fresh state's bits).
  std::vector<std::unique_ptr<MicrobatchState<T>>> spare_;
  size_t max_in_flight_ = 0;
  std::unique_ptr<MicrobatchState<T>> TakeState();
  void Recycle(std::unique_ptr<MicrobatchState<T>> st);
  // BackwardInput's running copy of the state (rebuilt into each sublayer's input) and, on
  // the first stage, the state's gradient: kept from one micro-batch to the next (2 x 32 MiB
  // for xhc at d_model 512 and 1024 tokens), not allocated and zero-filled afresh for each:
  // that cost ~8 ms each per micro-batch (docs/design/state-buffers-and-memory.md).
  std::vector<T> bwd_X_, bwd_dX_;
  PhaseTimes* phases_ = nullptr;
  SublayerObserver observer_;
};

using StageModel = StageModelT<float>;

extern template class StageModelT<float>;
extern template class StageModelT<double>;

}  // namespace xhc::model

#endif  // XHC_RUNTIME_MODEL_STAGE_H_
