#include "train/step.h"

#include "optim/grad_clip.h"

namespace xsagpt {

TrainStep::TrainStep(GPT model, RunOptimizer& optimizer, GradientSync& sync, std::vector<torch::Tensor> params,
                     int64_t accumulation, double grad_clip)
    : model_(std::move(model)),
      optimizer_(optimizer),
      sync_(sync),
      params_(std::move(params)),
      accumulation_(accumulation),
      grad_clip_(grad_clip) {
  TORCH_CHECK(accumulation_ >= 1, "TrainStep: accumulation must be >= 1");
}

StepStats TrainStep::operator()(const NextBatch& next_batch, double lr) {
  torch::Tensor loss_sum;
  for (int64_t micro = 0; micro < accumulation_; ++micro) {
    auto [x, y] = next_batch();
    auto loss = model_->forward(x, y).loss / static_cast<double>(accumulation_);  // in the runtime's precision
    sync_.backward(loss, /*last=*/micro + 1 == accumulation_);
    loss_sum = micro == 0 ? loss.detach() : loss_sum + loss.detach();
  }
  StepStats stats{loss_sum, {}};
  if (model_->runtime().kernels.clip && grad_clip_ > 0) {
    stats.grad_norm = grad_norm(params_);
    optimizer_.step(lr, clip_factor(stats.grad_norm, grad_clip_));
  } else {
    stats.grad_norm = clip_grad_norm(params_, grad_clip_);
    optimizer_.step(lr);
  }
  sync_.zero_grad();
  model_->parameters_changed();
  return stats;
}

}  // namespace xsagpt
