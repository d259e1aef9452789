// One optimizer step, exactly as `xsagpt train` runs it and `xsagpt bench` times
// it: forward and backward over the micro-batches (gradients averaged over ranks
// on the last one), global-norm clipping, the optimizer at the given rate, gradients
// cleared, and the model's bf16 weight copies made anew for the next forward. With
// the "clip" kernel row the clip's factor goes to the optimizer, whose fused AdamW
// applies it as it reads each gradient, rather than being applied first.
// Loss and gradient norm come back as device scalars: nothing here waits for the
// GPU, so the host runs ahead and queues the next step's kernels.
#pragma once

#include "distributed/context.h"
#include "model/gpt.h"
#include "optim/run_optimizer.h"

#include <functional>
#include <utility>

namespace xsagpt {

struct StepStats {
  torch::Tensor loss;       // mean training loss over the step's micro-batches (0-dim, float32, on the device)
  torch::Tensor grad_norm;  // global gradient norm before clipping (0-dim, float32, on the device)
};

// A micro-batch of inputs and targets, int64 (B, T), already on the model's device.
using NextBatch = std::function<std::pair<torch::Tensor, torch::Tensor>()>;

class TrainStep {
 public:
  // accumulation: micro-batches per optimizer step; grad_clip <= 0 only measures the norm.
  TrainStep(GPT model, RunOptimizer& optimizer, GradientSync& sync, std::vector<torch::Tensor> params,
            int64_t accumulation, double grad_clip);
  StepStats operator()(const NextBatch& next_batch, double lr);

 private:
  GPT model_;
  RunOptimizer& optimizer_;
  GradientSync& sync_;
  std::vector<torch::Tensor> params_;
  int64_t accumulation_;
  double grad_clip_;
};

}  // namespace xsagpt
