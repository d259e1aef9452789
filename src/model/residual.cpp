#include "model/residual.h"

#include "kernels/add_norm.h"

namespace xsagpt {

torch::Tensor Residual::norm(const LayerNorm& ln) {
  if (!exec_->rt.kernels.norm) return ln->forward(flush());
  auto [x, h] = add_layer_norm(x_, pending_, ln->weight, ln->bias, ln->eps, exec_->dtype(x_));
  x_ = std::move(x);
  pending_ = torch::Tensor();
  return h;
}

void Residual::add(torch::Tensor branch) {
  if (!exec_->rt.kernels.norm) {
    x_ = x_ + branch;
    return;
  }
  if (pending_.defined()) flush();
  pending_ = std::move(branch);
}

torch::Tensor Residual::flush() {
  if (pending_.defined()) {
    x_ = x_ + pending_;
    pending_ = torch::Tensor();
  }
  return x_;
}

}  // namespace xsagpt
