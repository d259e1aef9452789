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
  const bool graphs = model_->runtime().kernels.graphs;
  if (!graphs) graphs_.reset();
  if (graphs && !graphs_) graphs_ = std::make_unique<GraphStep>(model_, params_, accumulation_, sync_);
  torch::Tensor loss_sum;
  for (int64_t micro = 0; micro < accumulation_; ++micro) {
    auto [x, y] = next_batch();
    torch::Tensor loss;
    if (graphs_) {
      loss = graphs_->micro_step(x, y);
    } else {
      loss = model_->forward(x, y).loss / static_cast<double>(accumulation_);  // in the runtime's precision
      sync_.backward(loss, /*last=*/micro + 1 == accumulation_);
      loss = loss.detach();
    }
    loss_sum = micro == 0 ? loss : loss_sum + loss;
  }
  StepStats stats{loss_sum, {}};
  if (model_->runtime().kernels.clip && grad_clip_ > 0) {
    stats.grad_norm = grad_norm(params_);
    optimizer_.step(lr, clip_factor(stats.grad_norm, grad_clip_));
  } else {
    stats.grad_norm = clip_grad_norm(params_, grad_clip_);
    optimizer_.step(lr);
  }
  if (graphs_)
    graphs_->zero_grad();  // in place: the graph adds into these gradients
  else
    sync_.zero_grad();
  model_->parameters_changed();
  return stats;
}

}  // namespace xsagpt
