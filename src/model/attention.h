// Causal self attention with RoPE and the switchable XSA step. Head count and
// head size are independent: the inner width n_head*head_dim need not equal
// d_model (the paper's 1.4B and 2.7B models use 24x128 heads on 2048/2560).
#pragma once

#include "config/model_config.h"
#include "model/exec.h"
#include "model/kv_cache.h"

#include <torch/torch.h>

namespace xsagpt {

// alpha at which a gated layer starts as XSA: tanh(alpha) rounds to exactly 1 in
// float32 for alpha > 13 ln 2 = 9.01 (1 - tanh < 2^-25); just past that point the
// gradient, sech^2(alpha) ~ 4e-8 taken in float64, is not yet zero.
inline constexpr double kXsaGateInitXsa = 9.25;

// What one attention layer computes, resolved from the model config once, when the
// layer is built: tools (analyze, bench, counts) ask the layer rather than re-reading
// model.attention and model.xsa_layers themselves.
struct AttentionVariant {
  AttentionKind kind = AttentionKind::kSa;  // the model's model.attention
  bool xsa = false;                         // this layer applies the exclusive step
  XsaGate gate = XsaGate::kOff;             // this layer's gate; off where the step is not applied
  int64_t n_sink = 0;                       // learned sinks in front of the tokens (the model's)
  double xsa_eps = 1e-6;                    // floor on ||v|| in the step

  static AttentionVariant of(const ModelConfig& cfg, int64_t layer);
  // "sa", "xsa", "xsa, gated (starts as sa)", "sa (xsa model, step not in this layer)", ", 2 sinks".
  std::string describe() const;
};

struct CausalSelfAttentionImpl : torch::nn::Module {
  CausalSelfAttentionImpl(const ModelConfig& cfg, int64_t layer, ExecPtr exec);

  // x: (B, T, d_model); cos/sin: RoPE rows for x's positions. With a cache, x's
  // positions follow the `past` cached ones and attend to them as well.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                        KVCache::Layer* cache = nullptr, int64_t past = 0);

  // The XSA gate tanh(alpha) as (n_head, 1, 1) float32; undefined without a gate.
  torch::Tensor gate() const;
  // XSA's step on attention output y and values v, (B, H, T, D), by the runtime's choice of implementation.
  torch::Tensor exclude_self(const torch::Tensor& y, const torch::Tensor& v) const;

  torch::nn::Linear c_attn{nullptr};  // fused q, k, v projection
  torch::nn::Linear c_proj{nullptr};  // output projection
  torch::nn::Dropout resid_drop{nullptr};
  torch::Tensor xsa_gate;  // alpha, (n_head); only where variant.gate is not off
  int64_t n_head, head_dim;
  AttentionVariant variant;
  double attn_dropout;
  ExecPtr exec;
};
TORCH_MODULE(CausalSelfAttention);

}  // namespace xsagpt
