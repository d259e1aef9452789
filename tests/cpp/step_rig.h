// A model's training step in one process, built as the trainer builds it
// (train/parts.h: AdamW from the train.* defaults, gradient sync, TrainStep), for
// tests that train a few steps.
#pragma once

#include "distributed/context.h"
#include "model/gpt.h"
#include "train/parts.h"
#include "train/step.h"

#include <memory>

namespace xsagpt::test {

struct StepRig {
  StepRig(GPT model, int64_t accumulation, double grad_clip = 1.0)
      : parts(build_training(std::move(model), TrainConfig{}, single)),
        step(std::make_unique<TrainStep>(parts.model, *parts.optimizer, *parts.sync, parts.params, accumulation,
                                         grad_clip)) {}
  StepStats operator()(const NextBatch& next, double lr) { return (*step)(next, lr); }

  DistContext single;
  TrainingParts parts;
  std::unique_ptr<TrainStep> step;
};

}  // namespace xsagpt::test
