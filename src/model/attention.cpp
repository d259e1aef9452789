#include "model/attention.h"

#include "kernels/rope_qkv.h"
#include "model/rope.h"
#include "model/xsa.h"

#include <fmt/format.h>

namespace xsagpt {

AttentionVariant AttentionVariant::of(const ModelConfig& cfg, int64_t layer) {
  AttentionVariant v;
  v.kind = cfg.attention;
  v.xsa = cfg.uses_xsa(layer);
  v.gate = v.xsa ? cfg.xsa_gate : XsaGate::kOff;
  v.n_sink = cfg.n_sink;
  v.xsa_eps = cfg.xsa_eps;
  return v;
}

std::string AttentionVariant::describe() const {
  std::string out = name(xsa ? AttentionKind::kXsa : AttentionKind::kSa);
  if (!xsa && kind != AttentionKind::kSa) out += fmt::format(" ({} model, step not in this layer)", name(kind));
  if (gate != XsaGate::kOff) out += fmt::format(", gated (starts as {})", name(gate));
  if (n_sink > 0) out += fmt::format(", {} sink{}", n_sink, n_sink > 1 ? "s" : "");
  return out;
}

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const ModelConfig& cfg, int64_t layer, ExecPtr exec_)
    : n_head(cfg.n_head),
      head_dim(cfg.head_dim),
      variant(AttentionVariant::of(cfg, layer)),
      attn_dropout(cfg.dropout),
      exec(std::move(exec_)) {
  using torch::nn::LinearOptions;
  c_attn = register_module("c_attn", torch::nn::Linear(LinearOptions(cfg.d_model, 3 * cfg.inner_dim()).bias(cfg.bias)));
  c_proj = register_module("c_proj", torch::nn::Linear(LinearOptions(cfg.inner_dim(), cfg.d_model).bias(cfg.bias)));
  resid_drop = register_module("resid_drop", torch::nn::Dropout(cfg.dropout));
  if (variant.gate != XsaGate::kOff) xsa_gate = register_parameter("xsa_gate", torch::zeros({n_head}));
}

torch::Tensor CausalSelfAttentionImpl::gate() const {
  if (!xsa_gate.defined()) return {};
  // tanh in float64: at the XSA end tanh(alpha) is 1 in float32, where float32's
  // backward (1 - tanh^2) would be exactly 0 and the gate could never move.
  return torch::tanh(xsa_gate.to(torch::kFloat64)).to(torch::kFloat32).view({n_head, 1, 1});
}

torch::Tensor CausalSelfAttentionImpl::exclude_self(const torch::Tensor& y, const torch::Tensor& v) const {
  switch (exec->rt.kernels.xsa) {
    case XsaImpl::kFused: return exclude_self_value_fused(y, v, variant.xsa_eps, gate());
    case XsaImpl::kFusedWide: return exclude_self_value_fused(y, v, variant.xsa_eps, gate(), /*wide=*/true);
    case XsaImpl::kComposed: return exclude_self_value_autograd(y, v, variant.xsa_eps, gate());
    case XsaImpl::kOps: break;
  }
  return exclude_self_value(y, v, variant.xsa_eps, gate());
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& cos,
                                               const torch::Tensor& sin, KVCache::Layer* cache, int64_t past) {
  const auto B = x.size(0), T = x.size(1);
  auto qkv = exec->block_linear(x, c_attn->weight, c_attn->bias);
  torch::Tensor q, k, v;  // (B, H, T, D), q and k rotated by RoPE
  if (exec->rt.kernels.rope) {
    std::tie(q, k, v) = rope_qkv(qkv, n_head, head_dim, cos, sin);
  } else {
    auto heads = [&](const torch::Tensor& t) { return t.view({B, T, n_head, head_dim}).transpose(1, 2); };
    auto parts = qkv.chunk(3, -1);
    q = apply_rope(heads(parts[0]), cos, sin);
    k = apply_rope(heads(parts[1]), cos, sin);
    v = heads(parts[2]);
  }

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
  if (variant.xsa) y = exclude_self(y, v);

  y = y.transpose(1, 2).reshape({B, T, n_head * head_dim});
  return resid_drop(exec->block_linear(y, c_proj->weight, c_proj->bias));
}

}  // namespace xsagpt
