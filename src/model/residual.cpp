#include "model/residual.h"

#include "kernels/add_norm.h"

namespace xsagpt {

torch::Tensor Residual::norm(const LayerNorm& ln, const torch::Tensor& reader) {
  if (!exec_->rt.kernels.norm) return ln->forward(flush());
  // Which amaxes the norm takes for FP8 products: h's for its reader, the pending
  // branch's gradient for the product that made the branch.
  auto amax = exec_->fp8_amax(pending_maker_, reader);
  auto [x, h] =
      add_layer_norm(x_, pending_, ln->weight, ln->bias, ln->eps, exec_->dtype(x_), amax, exec_->rt.kernels.norm_regs);
  x_ = std::move(x);
  pending_ = pending_maker_ = torch::Tensor();
  return h;
}

void Residual::add(torch::Tensor branch, const torch::Tensor& maker) {
  if (!exec_->rt.kernels.norm) {
    x_ = x_ + branch;
    return;
  }
  if (pending_.defined()) flush();
  pending_ = std::move(branch);
  pending_maker_ = maker;
}

torch::Tensor Residual::flush() {
  if (pending_.defined()) {
    x_ = x_ + pending_;
    pending_ = pending_maker_ = torch::Tensor();
  }
  return x_;
}

}  // namespace xsagpt
