#include "optim/grad_clip.h"

namespace xsagpt {

namespace {

std::vector<torch::Tensor> defined_grads(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  TORCH_CHECK(!grads.empty(), "clip_grad_norm: no parameter has a gradient");
  return grads;
}

}  // namespace

torch::Tensor grad_norm(const std::vector<torch::Tensor>& params) {
  auto norms = at::_foreach_norm(defined_grads(params), 2.0);
  return torch::stack(norms).to(torch::kFloat32).norm(2);
}

torch::Tensor clip_factor(const torch::Tensor& norm, double max_norm) {
  TORCH_CHECK(max_norm > 0, "clip_factor: max_norm must be > 0");
  return (max_norm / (norm + 1e-6)).clamp_max(1.0);
}

torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm) {
  auto total = grad_norm(params);
  if (max_norm > 0) at::_foreach_mul_(defined_grads(params), clip_factor(total, max_norm));
  return total;
}

}  // namespace xsagpt
