#include "model/counts.h"

#include "kernels/fp8_linear.h"
#include "model/attention.h"

#include <algorithm>
#include <map>
#include <utility>

namespace xsagpt {

namespace {

int64_t step_layers(const ModelConfig& c) {
  int64_t n = 0;
  for (int64_t l = 0; l < c.n_layer; ++l) n += c.spec().uses_step(l) ? 1 : 0;
  return n;
}

// The parameters of the kind's step (XSA's gate) in every layer that applies it.
int64_t step_params(const ModelConfig& c) {
  const auto params = attention_kind_row(c.spec()).params;
  return params ? step_layers(c) * params(c) : 0;
}

}  // namespace

ParamCounts count_params(const ModelConfig& c) {
  const int64_t d = c.d_model, inner = c.inner_dim(), hidden = c.mlp_dim(), V = c.vocab_size;
  const int64_t b = c.bias ? 1 : 0;
  const int64_t norm = d * (1 + b);
  const int64_t attn = d * 3 * inner + b * 3 * inner + inner * d + b * d;
  const int64_t mlp = d * hidden + b * hidden + hidden * d + b * d;
  const int64_t per_layer = 2 * norm + attn + mlp;
  ParamCounts p;
  p.embedding = V * d * (c.tie_embeddings ? 1 : 2);
  const int64_t steps = step_params(c);
  p.non_embedding = 2 * norm + c.n_layer * per_layer + c.n_sink * d + steps;  // ln_e, ln_f, blocks, sinks, steps
  p.total = p.embedding + p.non_embedding;
  p.matmul = c.n_layer * (attn + mlp) + V * d;  // the head is a matmul; the lookup is not
  p.block_matrices = c.n_layer * (d * 3 * inner + inner * d + 2 * d * hidden);
  return p;
}

std::array<BlockProduct, 4> block_products(const ModelConfig& c, const Kernels& k) {
  const int64_t d = c.d_model, inner = c.inner_dim(), hidden = c.mlp_dim();
  std::array<BlockProduct, 4> p{{{"qkv", d, 3 * inner, false},
                                 {"attention output", inner, d, false},
                                 {"MLP up", d, hidden, false},
                                 {"MLP down", hidden, d, false}}};
  for (auto& b : p) b.fp8 = k.fp8 && (k.fp8_all || fp8_pays(b.in, b.out));
  return p;
}

double flops_per_token(const ModelConfig& c, int64_t seq_len) {
  const double n = static_cast<double>(count_params(c).matmul);
  const auto flops = attention_kind_row(c.spec()).work.flops;
  const double steps = flops ? static_cast<double>(step_layers(c)) * flops(c, seq_len) : 0.0;
  return 6.0 * n + 12.0 * c.n_layer * c.inner_dim() * static_cast<double>(seq_len) + steps;
}

namespace {

// Muon's step (optim/muon.cpp) orthogonalises one group of same-shape matrices at a
// time, each matrix as (r, c) with r <= c, stacked N deep in the Newton-Schulz
// dtype: the stack, the iterate and the next one (3 N r c) and the r x r products
// A = X X^T and b A + c A^2 (2 N r^2). The largest group sets the peak: the MLP's
// two matrices in every layer at the paper's shapes.
double muon_step_bytes(const ModelConfig& c, double ns_bytes) {
  const int64_t d = c.d_model, inner = c.inner_dim(), hidden = c.mlp_dim();
  std::map<std::pair<int64_t, int64_t>, int64_t> groups;  // (r, c) -> matrices per layer
  auto add = [&](int64_t rows, int64_t cols, int64_t n) { groups[{std::min(rows, cols), std::max(rows, cols)}] += n; };
  add(inner, d, 3);  // q, k, v: three matrices to Muon (optim/muon.h)
  add(d, inner, 1);
  add(hidden, d, 1);
  add(d, hidden, 1);
  double most = 0;
  for (const auto& [shape, per_layer] : groups) {
    const double n = static_cast<double>(per_layer * c.n_layer), r = static_cast<double>(shape.first);
    most = std::max(most, ns_bytes * n * (3 * r * static_cast<double>(shape.second) + 2 * r * r));
  }
  return most;
}

}  // namespace

namespace {

// Per token, what autograd keeps through forward (`kept`) and re-makes for one layer at
// a time in backward (`replay`), for the blocks. What backward needs of each half of a
// block: the float32 residual entering its norm and the norm's output; for attention,
// q/k/v before and after RoPE, the attention output and its (B, T, inner) copy that
// the output projection reads, and in a layer with its kind's step what the step
// keeps beyond those (its row's activations: XSA's nothing, a gate's gate); for the
// MLP, the pre- and post-GELU activations.
struct BlockActivations {
  double kept = 0, replay = 0;
};
BlockActivations block_activations(const ModelConfig& c, const Runtime& rt, double a) {
  const double d = static_cast<double>(c.d_model), inner = static_cast<double>(c.inner_dim());
  const double hidden = static_cast<double>(c.mlp_dim());
  const double resid = 4 * d;
  const double attn = resid + a * d + a * 3 * inner + a * 2 * inner + 2 * a * inner;
  const double mlp = resid + a * d + 2 * a * hidden;
  const auto step_work = attention_kind_row(c.spec()).work.activations;
  const double step = step_work ? step_work(c, a) : 0.0;
  const double L = static_cast<double>(c.n_layer), S = static_cast<double>(step_layers(c));
  if (rt.recompute == Recompute::kBlock) return {L * resid, attn + (S > 0 ? step : 0.0) + mlp};  // each block's input
  if (rt.recompute == Recompute::kMlp) return {L * (attn + resid) + S * step, mlp - resid};  // the MLP keeps its input
  return {L * (attn + mlp) + S * step, 0.0};
}

}  // namespace

MemoryEstimate estimate_training_memory(const ModelConfig& c, int64_t micro_batch, int64_t seq_len,
                                        const MemoryOptions& o) {
  MemoryEstimate m;
  const double P = static_cast<double>(count_params(c).total);
  m.params_bytes = 4 * P;
  m.grads_bytes = 4 * P;
  // AdamW: exp_avg + exp_avg_sq; Muon: its momentum buffer (Muon is never sharded).
  const double muon = o.muon ? static_cast<double>(count_params(c).block_matrices) : 0.0;
  m.optimizer_bytes = 8 * (P - muon) / static_cast<double>(std::max<int64_t>(1, o.optimizer_shards)) + 4 * muon;
  const double tokens = static_cast<double>(micro_batch * seq_len);
  const Runtime& rt = o.rt;
  const double a = rt.bf16 ? 2.0 : 4.0;  // bytes per saved activation element
  const double d = static_cast<double>(c.d_model), resid = 4 * d;
  const double L = static_cast<double>(c.n_layer);
  const auto [kept, replay] = block_activations(c, rt, a);
  // Around the blocks: ln_e's input and output (float32), ln_f's input and output.
  m.activations_bytes = tokens * (kept + 2 * 4 * d + resid + a * d);
  m.recompute_bytes = tokens * replay;
  const double rows = rt.loss_chunk > 0 ? std::min(tokens, static_cast<double>(rt.loss_chunk)) : tokens;
  const double V = static_cast<double>(c.vocab_size);
  if (rt.kernels.loss) {
    // One chunk of logits, overwritten by its gradient in place; the hidden
    // states' gradient and the head's float32 gradient wait from forward to backward.
    m.logits_bytes = rows * V * a;
    m.activations_bytes += tokens * d * a + 4 * V * d;
  } else {
    // Logits in the activation dtype, their float32 copy and its gradient, for the
    // rows that exist at once.
    m.logits_bytes = rows * V * (a + 4 + 4);
  }
  // bf16 copies (weights kernel) of every matrix a product reads, the step's too
  // (a gate's matrix; XSA's n_head gates, copied too, are a rounding), but for the
  // blocks' matrices fp8 takes, which read e4m3 copies and their transposes (a
  // byte each) and one float32 inverse scale per matrix instead (kernels/fp8_linear.h).
  const double matrices = static_cast<double>(count_params(c).matmul + step_params(c));
  double fp8_matrices = 0, fp8_scales = 0;
  for (const auto& b : block_products(c, rt.kernels))
    if (b.fp8) fp8_matrices += static_cast<double>(L * b.in * b.out), fp8_scales += 4.0 * L;
  if (rt.bf16 && rt.kernels.weights) m.weight_copies_bytes = 2 * (matrices - fp8_matrices);
  m.weight_copies_bytes += 2 * fp8_matrices + fp8_scales;
  if (o.muon) m.optimizer_step_bytes = muon_step_bytes(c, o.cuda ? 2 : 4);
  // cos and sin, each (n_sink + block_size) x head_dim/2 in float32: every position the
  // model accepts, whatever the sequences trained on (model/gpt.h).
  m.rope_tables_bytes = 4.0 * static_cast<double>(c.n_sink + c.block_size) * static_cast<double>(c.head_dim);
  return m;
}

}  // namespace xsagpt
