// What `xsagpt analyze` measures in each attention layer (the paper's figure 1):
// how much a token's attention output is made of its own value.
//
// For one layer, sequence b and head h, over the token positions i (sinks are
// attended to but not measured):
//   value_cos_sim  mean over pairs i != j of cos(v_i, v_j)
//   attn_diag      mean of a_ii, the weight position i gives itself
//   cos_y_v        mean of cos(y_i, v_i), y_i = sum_j a_ij v_j
//   cos_z_v        mean of cos(z_i, v_i), z_i the output of the XSA step (XSA layers;
//                  0 by construction, or tanh(alpha)-dependent with a gate). Where
//                  z_i vanishes (y_i along v_i: a first token sees only itself) it
//                  counts as orthogonal; its direction would be rounding noise.
// The attention weights a_ij are computed explicitly, softmax over j <= i of
// q_i.k_j times the layer's scale (1/sqrt(d), or μP's) with RoPE, since fused
// attention kernels never form them: q, k, v as the model computes them, everything
// after in float64. Memory is B*n_head*(n_sink+T)^2 float64 per layer; lower the
// batch for long sequences.
// The layer's figure is the mean over sequences and heads.
#pragma once

#include "model/gpt.h"

#include <optional>
#include <vector>

namespace xsagpt {

// Per (sequence, head) values, float64 tensors of shape (B, H); cos_z_v undefined
// for a layer without the XSA step.
struct HeadStats {
  torch::Tensor value_cos_sim, attn_diag, cos_y_v, cos_z_v;
};

// h: the attention's input, ln_1 of the residual stream, (B, S+T, d_model) with the
// first n_sink rows sinks; cos/sin: RoPE rows for its positions. T >= 2.
HeadStats attention_head_stats(CausalSelfAttentionImpl& attn, const torch::Tensor& h, const torch::Tensor& cos,
                               const torch::Tensor& sin, int64_t n_sink);

struct LayerStats {
  int64_t layer = 0;
  double value_cos_sim = 0, attn_diag = 0, cos_y_v = 0;
  std::optional<double> cos_z_v;  // XSA layers only
  std::string description;        // what the layer computes, in words (CausalSelfAttentionImpl::describe)
};

// Runs the model over `batches` (int64 (B, T) token ids each, on the model's
// device) in float32 on ATen ops without gradients and averages each layer's
// HeadStats over all sequences and heads. The model's own runtime is set aside
// meanwhile and put back (training calls it on its bf16 model at each evaluation,
// train/eval_diagnostics.h); the model is left in eval mode.
std::vector<LayerStats> analyze_attention(GPT& model, const std::vector<torch::Tensor>& batches);

}  // namespace xsagpt
