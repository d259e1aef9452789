#include "model/counts.h"

namespace xsagpt {

ParamCounts count_params(const ModelConfig& c) {
  const int64_t d = c.d_model, inner = c.inner_dim(), hidden = c.mlp_dim(), V = c.vocab_size;
  const int64_t b = c.bias ? 1 : 0;
  const int64_t norm = d * (1 + b);
  const int64_t attn = d * 3 * inner + b * 3 * inner + inner * d + b * d;
  const int64_t mlp = d * hidden + b * hidden + hidden * d + b * d;
  const int64_t per_layer = 2 * norm + attn + mlp;
  ParamCounts p;
  p.embedding = V * d * (c.tie_embeddings ? 1 : 2);
  int64_t gates = 0;  // one alpha per head in each gated XSA layer
  for (int64_t l = 0; l < c.n_layer; ++l) gates += c.xsa_gate != "off" && c.uses_xsa(l) ? c.n_head : 0;
  p.non_embedding = 2 * norm + c.n_layer * per_layer + c.n_sink * d + gates;  // ln_e, ln_f, blocks, sinks, gates
  p.total = p.embedding + p.non_embedding;
  p.matmul = c.n_layer * (attn + mlp) + V * d;  // the head is a matmul; the lookup is not
  return p;
}

double flops_per_token(const ModelConfig& c, int64_t seq_len) {
  const double n = static_cast<double>(count_params(c).matmul);
  return 6.0 * n + 12.0 * c.n_layer * c.inner_dim() * static_cast<double>(seq_len);
}

MemoryEstimate estimate_training_memory(const ModelConfig& c, int64_t micro_batch, int64_t seq_len, bool bf16) {
  MemoryEstimate m;
  const double P = static_cast<double>(count_params(c).total);
  m.params_bytes = 4 * P;
  m.grads_bytes = 4 * P;
  m.optimizer_bytes = 8 * P;  // AdamW exp_avg + exp_avg_sq
  const double tokens = static_cast<double>(micro_batch * seq_len);
  const double a = bf16 ? 2.0 : 4.0;  // bytes per saved activation element
  const double d = static_cast<double>(c.d_model), inner = static_cast<double>(c.inner_dim());
  const double hidden = static_cast<double>(c.mlp_dim());
  // Per token and layer, what backward needs: the float32 residual input to each
  // norm, the norm outputs, q/k/v before and after RoPE, the attention output, the
  // MLP's pre- and post-GELU activations. XSA's step keeps only y and v, which
  // attention keeps anyway (model/xsa.h), but the output projection then keeps z
  // besides y.
  double per_layer = 2 * 4 * d + 2 * a * d + a * 3 * inner + a * 2 * inner + a * inner + 2 * a * hidden;
  int64_t xsa_layers = 0;
  for (int64_t l = 0; l < c.n_layer; ++l) xsa_layers += c.uses_xsa(l);
  m.activations_bytes = tokens * (c.n_layer * per_layer + xsa_layers * a * inner);
  // Logits in the activation dtype, their float32 copy and its gradient.
  m.logits_bytes = tokens * static_cast<double>(c.vocab_size) * (a + 4 + 4);
  return m;
}

}  // namespace xsagpt
