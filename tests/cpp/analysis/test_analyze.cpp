// `xsagpt analyze`'s statistics against a direct float64 evaluation written with
// loops from the layer's weights: projections, RoPE rotations, causal softmax,
// the XSA formula, and the four per-head averages.
#include "analysis/attention_stats.h"
#include "helpers.h"
#include "model/gpt.h"
#include "model/rope.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace xsagpt;
using xsagpt::test::small_model;

namespace {

using Mat = std::vector<std::vector<double>>;  // [position][dim]

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}
double cosine(const std::vector<double>& a, const std::vector<double>& b) {
  return dot(a, b) / std::sqrt(dot(a, a) * dot(b, b));
}

struct Expected {
  double value_cos_sim, attn_diag, cos_y_v, cos_z_v;
};

// One (sequence, head) of the layer, everything in float64 loops.
Expected direct(CausalSelfAttentionImpl& attn, const torch::Tensor& h, int64_t b, int64_t head, int64_t n_sink,
                double gate) {
  const int64_t L = h.size(1), D = attn.head_dim, d_model = h.size(2), inner = attn.n_head * D;
  auto W = attn.c_attn->weight.to(torch::kFloat64).contiguous();
  auto X = h.to(torch::kFloat64).contiguous();
  auto w = W.accessor<double, 2>();
  auto x = X.accessor<double, 3>();
  Mat q(L, std::vector<double>(D)), k = q, v = q;
  for (int64_t t = 0; t < L; ++t)
    for (int64_t e = 0; e < D; ++e)
      for (int64_t c = 0; c < d_model; ++c) {
        q[t][e] += w[head * D + e][c] * x[b][t][c];
        k[t][e] += w[inner + head * D + e][c] * x[b][t][c];
        v[t][e] += w[2 * inner + head * D + e][c] * x[b][t][c];
      }
  for (auto* m : {&q, &k})  // RoPE: pair (e, e + D/2) rotated by t * theta^(-2e/D)
    for (int64_t t = 0; t < L; ++t)
      for (int64_t e = 0; e < D / 2; ++e) {
        const double ang = t * std::pow(10000.0, -2.0 * e / D);
        const double a = (*m)[t][e], c = (*m)[t][e + D / 2];
        (*m)[t][e] = a * std::cos(ang) - c * std::sin(ang);
        (*m)[t][e + D / 2] = c * std::cos(ang) + a * std::sin(ang);
      }
  Expected out{0, 0, 0, 0};
  const int64_t T = L - n_sink;
  for (int64_t i = n_sink; i < L; ++i) {
    std::vector<double> s(i + 1);
    double mx = -INFINITY, z = 0;
    for (int64_t j = 0; j <= i; ++j) mx = std::max(mx, s[j] = dot(q[i], k[j]) / std::sqrt(double(D)));
    for (int64_t j = 0; j <= i; ++j) z += (s[j] = std::exp(s[j] - mx));
    std::vector<double> y(D, 0.0);
    for (int64_t j = 0; j <= i; ++j)
      for (int64_t e = 0; e < D; ++e) y[e] += s[j] / z * v[j][e];
    out.attn_diag += s[i] / z / T;
    out.cos_y_v += cosine(y, v[i]) / T;
    std::vector<double> zz(D);
    const double coef = gate * dot(y, v[i]) / dot(v[i], v[i]);  // the paper's form
    for (int64_t e = 0; e < D; ++e) zz[e] = y[e] - coef * v[i][e];
    // z vanishes where y lies along v (the first token sees only itself): orthogonal by convention
    out.cos_z_v += (std::sqrt(dot(zz, zz)) > 1e-9 * std::sqrt(dot(y, y)) ? cosine(zz, v[i]) : 0.0) / T;
    for (int64_t j = n_sink; j < L; ++j)
      if (j != i) out.value_cos_sim += cosine(v[i], v[j]) / double(T * (T - 1));
  }
  return out;
}

void check_layer(const ModelConfig& cfg, double gate_alpha) {
  torch::manual_seed(0);
  GPT model(cfg);
  auto& attn = *model->transformer->h[0]->as<Block>()->attn;
  auto alpha = test::own_param(attn, "xsa_gate");
  if (alpha.defined()) {
    torch::NoGradGuard ng;
    alpha.fill_(gate_alpha);
  }
  const int64_t L = cfg.n_sink + 12;
  auto h = torch::randn({2, L, cfg.d_model});
  auto [cos, sin] = rope_tables(L, cfg.head_dim, cfg.rope_theta);
  torch::NoGradGuard ng;
  auto got = attention_head_stats(attn, h, cos, sin, cfg.n_sink);
  const double gate = alpha.defined() ? std::tanh(gate_alpha) : 1.0;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t hd = 0; hd < cfg.n_head; ++hd) {
      auto e = direct(attn, h, b, hd, cfg.n_sink, gate);
      EXPECT_NEAR(got.value_cos_sim[b][hd].item<double>(), e.value_cos_sim, 1e-5);
      EXPECT_NEAR(got.attn_diag[b][hd].item<double>(), e.attn_diag, 1e-5);
      EXPECT_NEAR(got.cos_y_v[b][hd].item<double>(), e.cos_y_v, 1e-5);
      if (attn.computes.step) {
        EXPECT_NEAR(got.cos_z_v[b][hd].item<double>(), e.cos_z_v, 1e-5);
      }
    }
  EXPECT_EQ(got.cos_z_v.defined(), attn.computes.step);
}

}  // namespace

TEST(Analyze, SaStatisticsMatchADirectComputation) { check_layer(small_model("sa"), 0); }

TEST(Analyze, XsaStatisticsMatchADirectComputationAndCosZvIsZero) {
  auto cfg = small_model("xsa");
  check_layer(cfg, 0);
  torch::manual_seed(0);
  GPT model(cfg);
  auto idx = torch::randint(0, 64, {3, 16}, torch::kLong);
  for (const auto& l : analyze_attention(model, {idx})) {
    ASSERT_TRUE(l.cos_z_v.has_value());
    EXPECT_LT(std::abs(*l.cos_z_v), 1e-6) << "layer " << l.layer;
    EXPECT_GT(l.cos_y_v, 0.05) << "SA's output leans towards its own value";
  }
}

TEST(Analyze, SinksAreAttendedButNotMeasured) {
  auto cfg = small_model("xsa");
  cfg.n_sink = 2;
  check_layer(cfg, 0);
}

TEST(Analyze, GatedLayersUseTheirGate) {
  auto cfg = small_model("xsa");
  cfg.set_attention("xsa", {{"xsa_gate", "sa"}});
  check_layer(cfg, 0.7);
}

TEST(Analyze, AveragesOverAllSequencesAndHeads) {
  torch::manual_seed(4);
  auto cfg = small_model("sa");
  cfg.n_sink = 1;
  GPT model(cfg);
  auto idx = torch::randint(0, 64, {4, 16}, torch::kLong);
  auto whole = analyze_attention(model, {idx});
  auto split = analyze_attention(model, {idx.narrow(0, 0, 1), idx.narrow(0, 1, 3)});
  // Layer 1 from its own input: the residual stream after block 0, run by hand.
  torch::NoGradGuard ng;
  auto cos = model->rope_cos.narrow(0, 0, 17), sin = model->rope_sin.narrow(0, 0, 17);
  auto& b0 = *model->transformer->h[0]->as<Block>();
  Residual r(model->embed(idx, true), *b0.exec);
  b0.forward(r, cos, sin);
  auto x = r.flush();
  auto& b1 = *model->transformer->h[1]->as<Block>();
  auto st = attention_head_stats(*b1.attn, b1.ln_1(x), cos, sin, 1);
  ASSERT_EQ(whole.size(), 2u);
  EXPECT_NEAR(whole[1].attn_diag, st.attn_diag.mean().item<double>(), 1e-9);
  EXPECT_NEAR(whole[1].value_cos_sim, st.value_cos_sim.mean().item<double>(), 1e-9);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_NEAR(whole[i].attn_diag, split[i].attn_diag, 1e-9);
    EXPECT_NEAR(whole[i].cos_y_v, split[i].cos_y_v, 1e-9);
    EXPECT_FALSE(whole[i].cos_z_v.has_value());
  }
}

// A model whose weights went NaN (a diverged run, evaluated before the trainer stops)
// measured nothing: NaN, which metrics.jsonl writes as null, as it does the loss. Before,
// the guard for a vanishing x_i was false for NaN and logged 0.0, "orthogonal", in every layer.
TEST(Analyze, AModelWhoseWeightsWentNanMeasuresNothingRatherThanOrthogonal) {
  torch::manual_seed(0);
  GPT model(small_model("xsa"));
  auto idx = torch::randint(0, 64, {2, 16}, torch::kLong);
  for (const auto& l : analyze_attention(model, {idx})) ASSERT_TRUE(std::isfinite(l.cos_y_v));  // finite first
  {
    torch::NoGradGuard ng;
    for (auto& p : model->parameters()) p.fill_(NAN);
  }
  const auto layers = analyze_attention(model, {idx});
  ASSERT_EQ(layers.size(), 2u);
  for (const auto& l : layers) {
    EXPECT_TRUE(std::isnan(l.cos_y_v)) << "layer " << l.layer << ": " << l.cos_y_v;
    ASSERT_TRUE(l.cos_z_v.has_value());
    EXPECT_TRUE(std::isnan(*l.cos_z_v)) << "layer " << l.layer << ": " << *l.cos_z_v;
  }
}
