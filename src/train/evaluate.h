// The validation loss: the mean over the fixed validation set (data/loader.h's
// ValidationSet, the same sequences at every evaluation and on resume) of the
// model's loss, averaged over ranks, without autograd, with the training run's
// kernels and precision.
#pragma once

#include "data/loader.h"
#include "distributed/context.h"
#include "model/gpt.h"

namespace xsagpt {

double evaluate(GPT& model, const ValidationSet& val, torch::Device device, DistContext& dist);

}  // namespace xsagpt
