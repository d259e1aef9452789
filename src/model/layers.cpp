#include "model/layers.h"

#include "model/exec.h"

namespace xsagpt {

LayerNormImpl::LayerNormImpl(int64_t dim, bool with_bias, double eps) : dim(dim), eps(eps) {
  weight = register_parameter("weight", torch::ones({dim}));
  if (with_bias) bias = register_parameter("bias", torch::zeros({dim}));
}

torch::Tensor LayerNormImpl::forward(const torch::Tensor& x) const {
  return torch::layer_norm(x, {dim}, weight, bias, eps);
}

MLPImpl::MLPImpl(int64_t d_model, int64_t hidden, bool bias, double dropout, std::shared_ptr<Exec> exec_,
                 GeluKind gelu)
    : exec(std::move(exec_)), gelu(gelu) {
  c_fc = register_module("c_fc", torch::nn::Linear(torch::nn::LinearOptions(d_model, hidden).bias(bias)));
  c_proj = register_module("c_proj", torch::nn::Linear(torch::nn::LinearOptions(hidden, d_model).bias(bias)));
  drop = register_module("drop", torch::nn::Dropout(dropout));
}

torch::Tensor MLPImpl::forward(const torch::Tensor& x) {
  auto pre = exec->block_linear(x, c_fc->weight, c_fc->bias);
  auto h = gelu == GeluKind::kTanh ? torch::gelu(pre, "tanh") : torch::gelu(pre);
  return drop(exec->block_linear(h, c_proj->weight, c_proj->bias));
}

}  // namespace xsagpt
