// A model's training step in one process, built as the trainer builds it (AdamW,
// gradient sync, TrainStep), for tests that train a few steps.
#pragma once

#include "dist/context.h"
#include "model/gpt.h"
#include "train/step.h"
#include "train/zero.h"

#include <memory>

namespace xsagpt::test {

struct StepRig {
  StepRig(GPT model, int64_t accumulation, double grad_clip = 1.0) {
    auto named = model->unique_named_parameters();
    for (auto& [n, p] : named) params.push_back(p);
    optimizer = std::make_unique<ShardedAdamW>(named, AdamWConfig{}, single, /*shard=*/false);
    sync = single.gradient_sync(params);
    step = std::make_unique<TrainStep>(model, *optimizer, *sync, params, accumulation, grad_clip);
  }
  StepStats operator()(const NextBatch& next, double lr) { return (*step)(next, lr); }

  DistContext single;
  std::vector<torch::Tensor> params;
  std::unique_ptr<ShardedAdamW> optimizer;
  std::unique_ptr<GradientSync> sync;
  std::unique_ptr<TrainStep> step;
};

}  // namespace xsagpt::test
