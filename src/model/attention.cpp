#include "model/attention.h"

#include "kernels/rope_qkv.h"
#include "model/rope.h"

#include <fmt/format.h>

#include <cmath>

namespace xsagpt {

LayerAttention LayerAttention::of(const ModelConfig& cfg, int64_t layer) {
  return {cfg.attention, cfg.spec().uses_step(layer), cfg.n_sink};
}

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const ModelConfig& cfg, int64_t layer, ExecPtr exec_)
    : n_head(cfg.n_head),
      head_dim(cfg.head_dim),
      scale(cfg.attention_scale()),
      computes(LayerAttention::of(cfg, layer)),
      attn_dropout(cfg.dropout),
      exec(std::move(exec_)) {
  using torch::nn::LinearOptions;
  c_attn = register_module("c_attn", torch::nn::Linear(LinearOptions(cfg.d_model, 3 * cfg.inner_dim()).bias(cfg.bias)));
  c_proj = register_module("c_proj", torch::nn::Linear(LinearOptions(cfg.inner_dim(), cfg.d_model).bias(cfg.bias)));
  resid_drop = register_module("resid_drop", torch::nn::Dropout(cfg.dropout));
  if (scale != 1.0 / std::sqrt(static_cast<double>(head_dim))) sdpa_scale = scale;
  // The kind's parameters are registered after the projections, on this module: their
  // names and their place in the parameter order are part of checkpoints.
  if (computes.step) step = attention_kind_row(cfg.spec()).make({cfg, layer, *this, exec});
}

torch::Tensor CausalSelfAttentionImpl::apply_step(const torch::Tensor& y, const torch::Tensor& v,
                                                  const torch::Tensor& x) const {
  return step ? (*step)(y, v, x) : y;
}

std::string CausalSelfAttentionImpl::describe() const {
  // A layer without its kind's step computes the default kind's attention (the table's first row).
  const std::string plain = attention_kinds().front().name;
  std::string out = step ? computes.kind + step->describe() : plain;
  if (!step && computes.kind != plain) out += fmt::format(" ({} model, step not in this layer)", computes.kind);
  if (computes.n_sink > 0) out += fmt::format(", {} sink{}", computes.n_sink, computes.n_sink > 1 ? "s" : "");
  return out;
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& cos,
                                               const torch::Tensor& sin, KVCache::Layer* cache, int64_t past) {
  const auto B = x.size(0), T = x.size(1);
  auto qkv = exec->block_linear(x, c_attn->weight, c_attn->bias);
  torch::Tensor q, k, v;  // (B, H, T, D), q and k rotated by RoPE
  if (exec->rt.kernels.rope) {
    // Its backward takes the qkv gradient's amax when the qkv product is FP8.
    std::tie(q, k, v) = rope_qkv(qkv, n_head, head_dim, cos, sin, exec->fp8_takes(c_attn->weight));
  } else {  // q and k rotated together: one set of RoPE's ops for both
    auto heads = [&](const torch::Tensor& t, int64_t n) { return t.view({B, T, n, head_dim}).transpose(1, 2); };
    auto parts = qkv.split(2 * n_head * head_dim, -1);
    auto qk = apply_rope(heads(parts[0], 2 * n_head), cos, sin).chunk(2, 1);
    q = qk[0];
    k = qk[1];
    v = heads(parts[1], n_head);
  }

  // y_i = sum_{j<=i} softmax(q_i.k_j * scale) v_j, scale 1/sqrt(d) (1/d-like under μP)  (flash kernels on CUDA)
  torch::Tensor y;
  if (!cache) {
    y = at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, is_training() ? attn_dropout : 0.0,
                                         /*is_causal=*/true, sdpa_scale);
  } else {  // generation: keys and values of all positions so far; query i sits at past+i
    auto [keys, values] = cache->append(k, v, past);
    std::optional<torch::Tensor> mask;  // one new position sees everything cached
    if (T > 1) mask = torch::ones({T, past + T}, x.options().dtype(torch::kBool)).tril(past);
    y = at::scaled_dot_product_attention(q, keys, values, mask, 0.0, false, sdpa_scale);
  }

  // The kind's step, e.g. XSA: z_i = y_i - (y_i . v^_i) v^_i, per head (model/kind_xsa.cpp)
  if (step) y = (*step)(y, v, x);

  y = y.transpose(1, 2).reshape({B, T, n_head * head_dim});
  return resid_drop(exec->block_linear(y, c_proj->weight, c_proj->bias));
}

}  // namespace xsagpt
