#include "model/attention.h"

#include "model/rope.h"
#include "model/xsa.h"

namespace xsagpt {

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const ModelConfig& cfg, int64_t layer)
    : n_head(cfg.n_head),
      head_dim(cfg.head_dim),
      xsa(cfg.uses_xsa(layer)),
      xsa_eps(cfg.xsa_eps),
      attn_dropout(cfg.dropout),
      xsa_step(exclude_self_value) {
  using torch::nn::LinearOptions;
  c_attn = register_module("c_attn", torch::nn::Linear(LinearOptions(cfg.d_model, 3 * cfg.inner_dim()).bias(cfg.bias)));
  c_proj = register_module("c_proj", torch::nn::Linear(LinearOptions(cfg.inner_dim(), cfg.d_model).bias(cfg.bias)));
  resid_drop = register_module("resid_drop", torch::nn::Dropout(cfg.dropout));
  if (xsa && cfg.xsa_gate != "off") xsa_gate = register_parameter("xsa_gate", torch::zeros({n_head}));
}

torch::Tensor CausalSelfAttentionImpl::gate() const {
  if (!xsa_gate.defined()) return {};
  // tanh in float64: at the XSA end tanh(alpha) is 1 in float32, where float32's
  // backward (1 - tanh^2) would be exactly 0 and the gate could never move.
  return torch::tanh(xsa_gate.to(torch::kFloat64)).to(torch::kFloat32).view({n_head, 1, 1});
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& cos,
                                               const torch::Tensor& sin, KVCache::Layer* cache, int64_t past) {
  const auto B = x.size(0), T = x.size(1);
  auto heads = [&](const torch::Tensor& t) { return t.view({B, T, n_head, head_dim}).transpose(1, 2); };
  auto qkv = c_attn(x).chunk(3, -1);
  auto q = apply_rope(heads(qkv[0]), cos, sin);
  auto k = apply_rope(heads(qkv[1]), cos, sin);
  auto v = heads(qkv[2]);

  // y_i = sum_{j<=i} softmax(q_i.k_j / sqrt(d)) v_j  (flash kernels on CUDA)
  torch::Tensor y;
  if (!cache) {
    y = at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, is_training() ? attn_dropout : 0.0,
                                         /*is_causal=*/true);
  } else {  // generation: keys and values of all positions so far; query i sits at past+i
    auto [keys, values] = cache->append(k, v, past);
    std::optional<torch::Tensor> mask;  // one new position sees everything cached
    if (T > 1) mask = torch::ones({T, past + T}, x.options().dtype(torch::kBool)).tril(past);
    y = at::scaled_dot_product_attention(q, keys, values, mask);
  }

  // XSA: z_i = y_i - (y_i . v^_i) v^_i, per head  (gated: z_i = y_i - tanh(alpha) (y_i . v^_i) v^_i)
  if (xsa) y = xsa_step(y, v, xsa_eps, gate());

  y = y.transpose(1, 2).reshape({B, T, n_head * head_dim});
  return resid_drop(c_proj(y));
}

}  // namespace xsagpt
