#include "train/evaluate.h"

namespace xsagpt {

double evaluate(GPT& model, const ValidationSet& val, torch::Device device, DistContext& dist) {
  torch::NoGradGuard no_grad;
  model->eval();
  auto sum = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(device));
  for (int64_t i = 0; i < val.num_batches(); ++i) {
    auto [x, y] = val.batch(i);
    sum += model->forward(x.to(device, true), y.to(device, true)).loss.to(torch::kFloat64);
  }
  model->train();
  return dist.mean(sum / static_cast<double>(std::max<int64_t>(1, val.num_batches()))).item<double>();
}

}  // namespace xsagpt
