#include "optim/grad_clip.h"

namespace xsagpt {

namespace {

std::vector<torch::Tensor> defined_grads(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  return grads;
}

}  // namespace

torch::Tensor grad_norm(const std::vector<torch::Tensor>& params) {
  const auto grads = defined_grads(params);
  TORCH_CHECK(!grads.empty(), "clip_grad_norm: no parameter has a gradient");
  auto norms = at::_foreach_norm(grads, 2.0);
  return torch::stack(norms).to(torch::kFloat32).norm(2);
}

torch::Tensor clip_factor(const torch::Tensor& norm, double max_norm) {
  TORCH_CHECK(max_norm > 0, "clip_factor: max_norm must be > 0");
  return (max_norm / (norm + 1e-6)).clamp_max(1.0);
}

void scale_grads(const std::vector<torch::Tensor>& params, const torch::Tensor& factor) {
  torch::NoGradGuard no_grad;
  if (auto grads = defined_grads(params); !grads.empty()) at::_foreach_mul_(grads, factor);
}

torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm) {
  auto total = grad_norm(params);
  if (max_norm > 0) scale_grads(params, clip_factor(total, max_norm));
  return total;
}

}  // namespace xsagpt
