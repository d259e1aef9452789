#include "model/residual.h"

#include "kernels/add_norm.h"

namespace xsagpt {

torch::Tensor Residual::norm(const LayerNorm& ln, const torch::Tensor& reader) {
  if (!exec_->rt.kernels.norm) return ln->forward(flush());
  const auto amax = exec_->fp8_takes(reader) ? torch::zeros({}, x_.options().dtype(torch::kFloat)) : torch::Tensor();
  auto [x, h] = add_layer_norm(x_, pending_, ln->weight, ln->bias, ln->eps, exec_->dtype(x_), amax);
  x_ = std::move(x);
  pending_ = torch::Tensor();
  if (amax.defined()) exec_->offer_amax(h, amax);
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
