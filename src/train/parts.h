// The parts of a training run that `train` and `bench` build alike: the model
// (seeded, in its runtime, on its device, in training mode), its unique parameters
// in one order on every rank, the gradient all-reduce and the optimizer (AdamW,
// sharded or not, or Muon with AdamW: optim/run_optimizer.h). One function builds
// them, so `bench` times the optimizer and the runtime that `train` runs; the
// optimizers' settings come from the train.* keys, whose member initialisers
// (config/run_config.h) are the only copy of their defaults.
#pragma once

#include "config/run_config.h"
#include "distributed/context.h"
#include "model/gpt.h"
#include "optim/run_optimizer.h"

#include <memory>
#include <vector>

namespace xsagpt {

struct TrainingParts {
  GPT model{nullptr};
  std::vector<torch::Tensor> params;  // GPTImpl::unique_parameters, the order every rank shares
  std::unique_ptr<GradientSync> sync;
  std::unique_ptr<RunOptimizer> optimizer;
};

// AdamW as train.beta1, beta2, eps, weight_decay and adamw set it, with the model's
// μP factors on its hidden matrices' rates (GPTImpl::rate_scales; none under "sp").
AdamWConfig adamw_config(const TrainConfig& train, const GPTImpl& model);

// A new model of config `model`, initialised from train.seed on every rank and then
// given rank 0's weights, running in `rt` on `device`, with its optimizer and sync.
TrainingParts build_training(const ModelConfig& model, const TrainConfig& train, const Runtime& rt,
                             torch::Device device, DistContext& dist);

// The same parts around a model that exists (already seeded, placed and set up).
TrainingParts build_training(GPT model, const TrainConfig& train, DistContext& dist);

}  // namespace xsagpt
