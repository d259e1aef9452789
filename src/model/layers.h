// Small building blocks shared by the model: LayerNorm with optional bias
// (LibTorch's has no bias switch) and the GELU MLP.
#pragma once

#include "config/model_config.h"

#include <torch/torch.h>

#include <memory>

namespace xsagpt {

struct LayerNormImpl : torch::nn::Module {
  LayerNormImpl(int64_t dim, bool bias, double eps);
  torch::Tensor forward(const torch::Tensor& x) const;
  torch::Tensor weight, bias;
  int64_t dim;
  double eps;
};
TORCH_MODULE(LayerNorm);

struct Exec;  // model/exec.h

// d_model -> hidden -> d_model with GELU: exact, as nanoGPT, or GPT-2's tanh
// approximation (model.gelu). With the gelu kernel (a tanh model) the three steps
// run as one function whose GEMMs carry the GELU (kernels/gelu_mlp.h).
struct MLPImpl : torch::nn::Module {
  MLPImpl(int64_t d_model, int64_t hidden, bool bias, double dropout, std::shared_ptr<Exec> exec,
          GeluKind gelu = GeluKind::kExact);
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Linear c_fc{nullptr}, c_proj{nullptr};
  torch::nn::Dropout drop{nullptr};
  std::shared_ptr<Exec> exec;
  GeluKind gelu;
};
TORCH_MODULE(MLP);

}  // namespace xsagpt
