// The learnable per-head XSA gate z = y - tanh(alpha) (y.v^) v^: exact at both
// ends, learnable from both, excluded from weight decay, gradients checked.
#include "helpers.h"
#include "live_head.h"
#include "model/counts.h"
#include "model/gpt.h"
#include "model/xsa.h"
#include "optim/optimizer.h"

#include <gtest/gtest.h>

using namespace xsagpt;
using xsagpt::test::small_model;

namespace {

// Copies b's parameters into a where both have them (by name).
void copy_shared(GPT& a, GPT& b) {
  torch::NoGradGuard no_grad;
  auto theirs = b->named_parameters();
  for (auto& p : a->named_parameters())
    if (auto* q = theirs.find(p.key())) p.value().copy_(*q);
}

ModelConfig gated(const std::string& start) {
  auto c = small_model("xsa");
  c.set_attention("xsa", {{"xsa_gate", start}});
  return c;
}

}  // namespace

TEST(Gate, XsaStartIsExactlyOneInFloat32) {
  GPT model(gated("xsa"));
  const auto& attn = *model->transformer->h[0]->as<Block>()->attn;
  ASSERT_TRUE(test::own_param(attn, "xsa_gate").defined());
  torch::manual_seed(0);
  auto y = torch::randn({2, 3, 5, 20}), v = torch::randn({2, 3, 5, 20}), x = torch::randn({2, 5, 48});
  EXPECT_TRUE(torch::equal(attn.apply_step(y, v, x), exclude_self_value(y, v, 1e-6)));  // the gate is 1 exactly
  EXPECT_EQ(static_cast<float>(std::tanh(kXsaGateInitXsa)), 1.0f);
}

TEST(Gate, AtTheXsaEndEqualsPlainXsaExactlyWithGradients) {
  torch::manual_seed(0);
  GPT plain(small_model("xsa"));
  GPT gate(gated("xsa"));
  test::randomize_head(plain);  // copied below; a zero head leaves every gradient below it 0
  copy_shared(gate, plain);
  auto idx = torch::randint(0, 64, {2, 20}, torch::kLong), tgt = torch::randint(0, 64, {2, 20}, torch::kLong);
  auto a = plain->forward(idx, tgt), b = gate->forward(idx, tgt);
  EXPECT_TRUE(torch::equal(a.logits, b.logits));
  a.loss.backward();
  b.loss.backward();
  test::assert_live(test::gradients(plain));
  auto gp = gate->named_parameters();
  for (const auto& p : plain->named_parameters())
    EXPECT_TRUE(torch::equal(p.value().grad(), gp[p.key()].grad())) << p.key();
}

TEST(Gate, AtTheSaEndEqualsPlainSaExactly) {
  torch::manual_seed(1);
  GPT sa(small_model("sa"));
  GPT gate(gated("sa"));
  copy_shared(gate, sa);
  auto idx = torch::randint(0, 64, {2, 20}, torch::kLong);
  EXPECT_TRUE(torch::equal(sa->forward(idx).logits, gate->forward(idx).logits));
}

TEST(Gate, LearnsFromBothEnds) {
  for (const char* start : {"sa", "xsa"}) {
    torch::manual_seed(2);
    auto cfg = gated(start);
    cfg.tie_embeddings = true;  // a zero-initialised untied head passes no gradient back at the very first step
    GPT model(cfg);
    auto idx = torch::randint(0, 64, {2, 16}, torch::kLong);
    model->forward(idx, idx).loss.backward();
    auto alpha = test::own_param(*model->transformer->h[0]->as<Block>()->attn, "xsa_gate");
    // At the XSA end sech^2(9.25) ~ 3.7e-8 scales the gradient, but it must not vanish.
    EXPECT_GT(alpha.grad().abs().min().item<double>(), 0.0) << start;
  }
}

TEST(Gate, OnlyInXsaLayersOneDimensionalAndNeverDecayed) {
  auto cfg = gated("sa");
  cfg.set_attention("xsa", {{"xsa_gate", "sa"}, {"xsa_layers", "last 1"}});
  GPT model(cfg);
  std::vector<std::string> gates;
  for (const auto& p : model->named_parameters())
    if (p.key().ends_with("xsa_gate")) gates.push_back(p.key());
  ASSERT_EQ(gates, std::vector<std::string>{"transformer.h.1.attn.xsa_gate"});
  auto alpha = model->named_parameters()["transformer.h.1.attn.xsa_gate"];
  EXPECT_EQ(alpha.sizes(), torch::IntArrayRef({cfg.n_head}));
  EXPECT_FALSE(decays(alpha));
  EXPECT_EQ(count_params(cfg).total, [&] {
    int64_t n = 0;
    for (auto& [name, p] : model->unique_named_parameters()) n += p.numel();
    return n;
  }());

  // Zero gradients: AdamW's update is 0, so only weight decay can move a parameter.
  for (const auto impl : {AdamWImpl::kFused, AdamWImpl::kTorch}) {
    GPT m(cfg);
    {
      torch::NoGradGuard ng;
      m->named_parameters()["transformer.h.1.attn.xsa_gate"].fill_(0.5);
    }
    auto before = m->named_parameters()["transformer.h.1.attn.xsa_gate"].clone();
    auto w_before = m->named_parameters()["transformer.h.1.attn.c_attn.weight"].clone();
    AdamW opt(m->unique_named_parameters(), AdamWConfig{0.9, 0.95, 1e-8, 0.5, impl});
    for (auto& p : m->parameters()) p.mutable_grad() = torch::zeros_like(p);
    opt.step(0.1);
    EXPECT_TRUE(torch::equal(m->named_parameters()["transformer.h.1.attn.xsa_gate"], before)) << name(impl);
    EXPECT_TRUE(
        torch::allclose(m->named_parameters()["transformer.h.1.attn.c_attn.weight"], w_before * (1 - 0.1 * 0.5)))
        << name(impl);
  }
}

TEST(Gate, GradientsMatchAutogradAndFiniteDifferencesInFloat64) {
  torch::manual_seed(3);
  auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  auto y = torch::randn({2, 3, 4, 6}, opts).requires_grad_(true);
  auto v = torch::randn({2, 3, 4, 6}, opts).requires_grad_(true);
  auto gate = torch::tanh(torch::randn({3, 1, 1}, opts)).requires_grad_(true);
  auto w = torch::randn({2, 3, 4, 6}, opts);
  auto gy = torch::autograd::grad({(exclude_self_value(y, v, 1e-6, gate) * w).sum()}, {y, v, gate});
  auto ry = torch::autograd::grad({(exclude_self_value_autograd(y, v, 1e-6, gate) * w).sum()}, {y, v, gate});
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(torch::allclose(gy[i], ry[i], 1e-12, 1e-12)) << "input " << i;

  const double h = 1e-6;
  auto f = [&](const torch::Tensor& g) { return (exclude_self_value(y, v, 1e-6, g) * w).sum().item<double>(); };
  for (int64_t k = 0; k < 3; ++k) {
    auto plus = gate.detach().clone(), minus = gate.detach().clone();
    plus.view(-1)[k] += h;
    minus.view(-1)[k] -= h;
    EXPECT_NEAR(gy[2].view(-1)[k].item<double>(), (f(plus) - f(minus)) / (2 * h), 1e-6) << "head " << k;
  }
}

TEST(Gate, ConfigIsValidated) {
  auto c = small_model("sa");
  EXPECT_THROW(c.set_attention("sa", {{"xsa_gate", "xsa"}}), ConfigError);
  try {
    model_config_from_json({{"attention", "xsa"}, {"xsa_gate", "on"}});
    FAIL() << "xsa_gate=on accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("model.xsa_gate"), std::string::npos) << e.what();
  }
}
