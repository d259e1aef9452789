// Causal self attention with RoPE and the switchable XSA step. Head count and
// head size are independent: the inner width n_head*head_dim need not equal
// d_model (the paper's 1.4B and 2.7B models use 24x128 heads on 2048/2560).
#pragma once

#include "config/model_config.h"

#include <torch/torch.h>

namespace xsagpt {

struct CausalSelfAttentionImpl : torch::nn::Module {
  CausalSelfAttentionImpl(const ModelConfig& cfg, int64_t layer);

  // x: (B, T, d_model); cos/sin: RoPE rows for positions 0..T-1.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

  torch::nn::Linear c_attn{nullptr};  // fused q, k, v projection
  torch::nn::Linear c_proj{nullptr};  // output projection
  torch::nn::Dropout resid_drop{nullptr};
  int64_t n_head, head_dim;
  bool xsa;  // apply the exclusive step in this layer
  double xsa_eps, attn_dropout;
};
TORCH_MODULE(CausalSelfAttention);

}  // namespace xsagpt
