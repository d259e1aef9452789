// Causal self attention with RoPE and its kind's step (model/attention_kinds.h) on
// the attention output before the output projection. Head count and head size are
// independent: the inner width n_head*head_dim need not equal d_model (the paper's
// 1.4B and 2.7B models use 24x128 heads on 2048/2560).
#pragma once

#include "config/model_config.h"
#include "model/attention_kinds.h"
#include "model/exec.h"
#include "model/kv_cache.h"

#include <torch/torch.h>

#include <memory>
#include <optional>

namespace xsagpt {

// What one attention layer computes, taken from the model's AttentionSpec when the
// layer is built: tools (analyze, bench) ask the layer rather than the config.
struct LayerAttention {
  std::string kind;    // the model's model.attention
  bool step = false;   // this layer applies its kind's step (AttentionSpec::uses_step)
  int64_t n_sink = 0;  // learned sinks in front of the tokens (the model's)

  static LayerAttention of(const ModelConfig& cfg, int64_t layer);
};

struct CausalSelfAttentionImpl : torch::nn::Module {
  CausalSelfAttentionImpl(const ModelConfig& cfg, int64_t layer, ExecPtr exec);

  // x: (B, T, d_model); cos/sin: RoPE rows for x's positions. With a cache, x's
  // positions follow the `past` cached ones and attend to them as well.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                        KVCache::Layer* cache = nullptr, int64_t past = 0);

  // The kind's step on attention output y and values v, (B, H, T, D), with x the
  // layer's input (B, T, d_model); y itself in a layer without a step.
  torch::Tensor apply_step(const torch::Tensor& y, const torch::Tensor& v, const torch::Tensor& x) const;
  // "sa", "xsa", "xsa, gated (starts as sa)", "sa (xsa model, step not in this layer)", ", 2 sinks".
  std::string describe() const;

  torch::nn::Linear c_attn{nullptr};  // fused q, k, v projection
  torch::nn::Linear c_proj{nullptr};  // output projection
  torch::nn::Dropout resid_drop{nullptr};
  int64_t n_head, head_dim;
  // What q.k is multiplied by (ModelConfig::attention_scale); SDPA is given it only
  // where it is not SDPA's own 1/sqrt(head_dim) (under μP away from the base head size).
  double scale;
  std::optional<double> sdpa_scale;
  LayerAttention computes;
  std::shared_ptr<const AttentionStep> step;  // null where the layer applies none
  double attn_dropout;
  ExecPtr exec;
};
TORCH_MODULE(CausalSelfAttention);

}  // namespace xsagpt
