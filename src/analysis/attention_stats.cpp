#include "analysis/attention_stats.h"

#include "model/rope.h"

#include <cmath>

namespace xsagpt {

namespace F = torch::nn::functional;

HeadStats attention_head_stats(CausalSelfAttentionImpl& attn, const torch::Tensor& h, const torch::Tensor& cos,
                               const torch::Tensor& sin, int64_t n_sink) {
  const int64_t B = h.size(0), L = h.size(1), H = attn.n_head, D = attn.head_dim, T = L - n_sink;
  TORCH_CHECK(T >= 2, "analysis needs at least 2 tokens per sequence, got ", T);
  auto heads = [&](const torch::Tensor& t) { return t.view({B, L, H, D}).transpose(1, 2); };
  // q, k, v as the model computes them; from there on float64, so that the figures
  // (cos(z, v) above all) measure the model and not rounding.
  auto qkv = attn.c_attn(h).chunk(3, -1);
  auto q = apply_rope(heads(qkv[0]), cos, sin).to(torch::kFloat64);
  auto k = apply_rope(heads(qkv[1]), cos, sin).to(torch::kFloat64);
  auto v = heads(qkv[2]).to(torch::kFloat64);

  auto scores = torch::matmul(q, k.transpose(-1, -2)) * attn.scale;  // 1/sqrt(D), or μP's
  auto future = torch::ones({L, L}, h.options().dtype(torch::kBool)).triu(1);
  auto a = torch::softmax(scores.masked_fill(future, -INFINITY), -1);  // (B, H, L, L)
  auto y = torch::matmul(a, v);

  auto tokens = [&](const torch::Tensor& t) { return t.narrow(2, n_sink, T); };
  auto y_norm = tokens(y).norm(2, -1);
  // Mean over tokens of cos(x_i, v_i). Where x_i vanishes next to y_i (z_i when y_i
  // lies along v_i, as for a first token that sees only itself) it is orthogonal
  // to v_i by convention: its direction would be rounding noise. Only finite norms can
  // vanish: a model whose weights went NaN or infinite measured nothing, and its NaN
  // (null in metrics.jsonl, as its loss) must not read as "orthogonal".
  auto mean_cos_v = [&](const torch::Tensor& x) {
    auto xt = tokens(x), vt = tokens(v);
    auto x_norm = xt.norm(2, -1);
    auto c = (xt * vt).sum(-1) / (x_norm * vt.norm(2, -1)).clamp_min(1e-300);
    const auto vanishes = (x_norm <= 1e-9 * y_norm) & torch::isfinite(y_norm);  // false for NaN
    return torch::where(vanishes, torch::zeros_like(c), c).mean(-1);
  };
  HeadStats s;
  auto v_hat = F::normalize(tokens(v), F::NormalizeFuncOptions().dim(-1));
  auto gram = torch::matmul(v_hat, v_hat.transpose(-1, -2));  // (B, H, T, T)
  auto self = gram.diagonal(0, -2, -1).sum(-1);
  s.value_cos_sim = (gram.sum({-2, -1}) - self) / static_cast<double>(T * (T - 1));
  s.attn_diag = a.diagonal(0, -2, -1).narrow(2, n_sink, T).mean(-1);
  s.cos_y_v = mean_cos_v(y);
  if (attn.step) s.cos_z_v = mean_cos_v(attn.apply_step(y, v, h.to(torch::kFloat64)));
  return s;
}

std::vector<LayerStats> analyze_attention(GPT& model, const std::vector<torch::Tensor>& batches) {
  torch::NoGradGuard no_grad;
  model->eval();
  // float32 on ATen ops whatever the model runs in: a training model's bf16 runtime
  // would hand c_attn bf16 activations, and analyze's figures are float32's. Put back
  // on the way out, also on an exception, for the training run that asked.
  struct Float32Scope {
    GPT& m;
    Runtime saved;
    explicit Float32Scope(GPT& model) : m(model), saved(model->runtime()) { m->set_runtime(Runtime{}); }
    ~Float32Scope() { m->set_runtime(saved); }
  } fp32(model);
  const int64_t n_layer = model->cfg.n_layer, S = model->cfg.n_sink;
  std::vector<HeadStats> sum(n_layer);
  int64_t count = 0;  // (sequence, head) pairs per layer
  auto add = [](torch::Tensor& acc, const torch::Tensor& x) {
    if (!x.defined()) return;
    acc = acc.defined() ? acc + x.sum() : x.sum();
  };
  for (const auto& idx : batches) {
    const int64_t L = S + idx.size(1);
    auto cos = model->rope_cos.narrow(0, 0, L), sin = model->rope_sin.narrow(0, 0, L);
    auto x = model->embed(idx, /*with_sinks=*/true);
    for (int64_t i = 0; i < n_layer; ++i) {
      auto& block = *model->transformer->h[i]->as<Block>();
      auto st = attention_head_stats(*block.attn, block.ln_1(x), cos, sin, S);
      add(sum[i].value_cos_sim, st.value_cos_sim);
      add(sum[i].attn_diag, st.attn_diag);
      add(sum[i].cos_y_v, st.cos_y_v);
      add(sum[i].cos_z_v, st.cos_z_v);
      Residual r(x, *block.exec);
      block.forward(r, cos, sin);
      x = r.flush();
    }
    count += idx.size(0) * model->cfg.n_head;
  }
  TORCH_CHECK(count > 0, "analyze_attention: no sequences");
  std::vector<LayerStats> out;
  for (int64_t i = 0; i < n_layer; ++i) {
    auto mean = [&](const torch::Tensor& t) { return t.item<double>() / static_cast<double>(count); };
    LayerStats l{i, mean(sum[i].value_cos_sim), mean(sum[i].attn_diag), mean(sum[i].cos_y_v), std::nullopt};
    if (sum[i].cos_z_v.defined()) l.cos_z_v = mean(sum[i].cos_z_v);
    l.description = model->transformer->h[i]->as<Block>()->attn->describe();
    out.push_back(l);
  }
  return out;
}

}  // namespace xsagpt
