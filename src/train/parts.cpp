#include "train/parts.h"

namespace xsagpt {

AdamWConfig adamw_config(const TrainConfig& t, const GPTImpl& model) {
  return {t.beta1, t.beta2, t.eps, t.weight_decay, t.adamw, model.rate_scales()};
}

TrainingParts build_training(const ModelConfig& model, const TrainConfig& train, const Runtime& rt,
                             torch::Device device, DistContext& dist) {
  torch::manual_seed(static_cast<uint64_t>(train.seed));  // the same initial weights on every rank
  GPT gpt(model);
  gpt->set_runtime(rt);
  gpt->to(device);
  gpt->train();
  auto params = gpt->unique_parameters();
  dist.broadcast(params);  // rank 0's weights, before anything copies them
  gpt->parameters_changed();
  return build_training(gpt, train, dist);
}

TrainingParts build_training(GPT model, const TrainConfig& train, DistContext& dist) {
  TrainingParts p;
  p.model = model;
  p.params = model->unique_parameters();
  p.sync = dist.gradient_sync(p.params);  // averages gradients over ranks
  p.optimizer =
      std::make_unique<RunOptimizer>(model->unique_named_parameters(), train, adamw_config(train, *model), dist);
  return p;
}

}  // namespace xsagpt
