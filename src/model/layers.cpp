#include "model/layers.h"

#include "kernels/gelu_mlp.h"
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
  if (exec->rt.kernels.gelu) {  // a tanh model (config/kernel_fit.h), fp8 off
    TORCH_CHECK(gelu == GeluKind::kTanh && !exec->rt.kernels.fp8, "MLP: the gelu kernel needs model.gelu=\"tanh\"",
                " and no fp8");
    const auto dt = exec->dtype(x);
    // The compute copies: the weights kernel's cached bf16 ones, else the parameter
    // in the compute dtype (autocast's cast); either way no graph of their own, the
    // gradient reaches the parameter through gelu_mlp.
    auto copy = [&](const torch::Tensor& w) {
      auto c = exec->weight(w).detach();
      return c.scalar_type() == dt ? c : c.to(dt);
    };
    return drop(gelu_mlp(x.to(dt), c_fc->weight, copy(c_fc->weight), c_fc->bias, c_proj->weight,
                         copy(c_proj->weight), c_proj->bias));
  }
  auto pre = exec->block_linear(x, c_fc->weight, c_fc->bias);
  auto h = exec->gelu(pre, gelu, /*maker=*/c_fc->weight, /*reader=*/c_proj->weight);
  return drop(exec->block_linear(h, c_proj->weight, c_proj->bias));
}

}  // namespace xsagpt
