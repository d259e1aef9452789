// Small building blocks shared by the model: LayerNorm with optional bias
// (LibTorch's has no bias switch) and the GELU MLP.
#pragma once

#include <torch/torch.h>

namespace xsagpt {

struct LayerNormImpl : torch::nn::Module {
  LayerNormImpl(int64_t dim, bool bias, double eps);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight, bias;
  int64_t dim;
  double eps;
};
TORCH_MODULE(LayerNorm);

// d_model -> hidden -> d_model with exact GELU, as nanoGPT.
struct MLPImpl : torch::nn::Module {
  MLPImpl(int64_t d_model, int64_t hidden, bool bias, double dropout);
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Linear c_fc{nullptr}, c_proj{nullptr};
  torch::nn::Dropout drop{nullptr};
};
TORCH_MODULE(MLP);

}  // namespace xsagpt
