#include "optim/grad_clip.h"

namespace xsagpt {

torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  TORCH_CHECK(!grads.empty(), "clip_grad_norm: no parameter has a gradient");
  auto norms = at::_foreach_norm(grads, 2.0);
  auto total = torch::stack(norms).to(torch::kFloat32).norm(2);
  if (max_norm > 0) {
    auto scale = (max_norm / (total + 1e-6)).clamp_max(1.0);
    at::_foreach_mul_(grads, scale);
  }
  return total;
}

}  // namespace xsagpt
