#include "model/attention.h"

#include "model/rope.h"
#include "model/xsa.h"

namespace xsagpt {

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const ModelConfig& cfg, int64_t layer)
    : n_head(cfg.n_head),
      head_dim(cfg.head_dim),
      xsa(cfg.uses_xsa(layer)),
      xsa_eps(cfg.xsa_eps),
      attn_dropout(cfg.dropout) {
  using torch::nn::LinearOptions;
  c_attn = register_module("c_attn", torch::nn::Linear(LinearOptions(cfg.d_model, 3 * cfg.inner_dim()).bias(cfg.bias)));
  c_proj = register_module("c_proj", torch::nn::Linear(LinearOptions(cfg.inner_dim(), cfg.d_model).bias(cfg.bias)));
  resid_drop = register_module("resid_drop", torch::nn::Dropout(cfg.dropout));
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& cos,
                                               const torch::Tensor& sin) {
  const auto B = x.size(0), T = x.size(1);
  auto heads = [&](const torch::Tensor& t) { return t.view({B, T, n_head, head_dim}).transpose(1, 2); };
  auto qkv = c_attn(x).chunk(3, -1);
  auto q = apply_rope(heads(qkv[0]), cos, sin);
  auto k = apply_rope(heads(qkv[1]), cos, sin);
  auto v = heads(qkv[2]);

  // y_i = sum_{j<=i} softmax(q_i.k_j / sqrt(d)) v_j  (flash kernels on CUDA)
  auto y = at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, is_training() ? attn_dropout : 0.0,
                                            /*is_causal=*/true);

  // XSA: z_i = y_i - (y_i . v^_i) v^_i, per head
  if (xsa) y = exclude_self_value(y, v, xsa_eps);

  y = y.transpose(1, 2).reshape({B, T, n_head * head_dim});
  return resid_drop(c_proj(y));
}

}  // namespace xsagpt
