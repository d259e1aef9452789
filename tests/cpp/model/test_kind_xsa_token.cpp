// The "xsa_token" kind (model/kind_xsa_token.cpp): its step against XSA's formula with a
// gate per token and head, g = tanh(x . w_h + b_h), evaluated element by element in
// float64; its gradient against central differences; its start (exactly SA); its
// parameters counted and grouped; its layers and its keys.
#include "helpers.h"
#include "model/counts.h"
#include "model/gpt.h"
#include "optim/muon.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

using namespace xsagpt;
using ::testing::HasSubstr;

namespace {

struct TokenInputs {
  torch::Tensor y, v, x;
};
TokenInputs token_inputs() {
  torch::manual_seed(3);
  auto o = torch::TensorOptions().dtype(torch::kFloat64);
  return {torch::randn({2, 3, 5, 20}, o), torch::randn({2, 3, 5, 20}, o), torch::randn({2, 5, 48}, o)};
}

// A float64 model whose gates are away from 0, and its first layer.
GPT token_model() {
  torch::manual_seed(0);
  GPT model(test::small_model("xsa_token"));
  model->to(torch::kFloat64);
  torch::NoGradGuard ng;
  const auto& attn = *model->transformer->h[0]->as<Block>()->attn;
  test::own_param(attn, "xsa_token_gate").normal_(0.0, 0.3);
  test::own_param(attn, "xsa_token_gate_bias").normal_(0.0, 0.5);
  return model;
}

}  // namespace

TEST(XsaTokenKind, StepIsXsaScaledByEachTokensGate) {
  auto model = token_model();
  const auto& attn = *model->transformer->h[0]->as<Block>()->attn;
  const auto w = test::own_param(attn, "xsa_token_gate").detach(),
             b = test::own_param(attn, "xsa_token_gate_bias").detach();
  const auto [y, v, x] = token_inputs();
  const auto z = attn.apply_step(y, v, x).detach();
  auto ya = y.accessor<double, 4>(), va = v.accessor<double, 4>(), za = z.accessor<double, 4>();
  auto xa = x.accessor<double, 3>();
  auto wa = w.accessor<double, 2>();
  double err = 0, gmin = 1, gmax = -1;
  for (int64_t bi = 0; bi < 2; ++bi)
    for (int64_t h = 0; h < 3; ++h)
      for (int64_t t = 0; t < 5; ++t) {
        double a = b[h].item<double>(), yv = 0, vv = 0;
        for (int64_t k = 0; k < 48; ++k) a += xa[bi][t][k] * wa[h][k];
        for (int64_t d = 0; d < 20; ++d)
          yv += ya[bi][h][t][d] * va[bi][h][t][d], vv += va[bi][h][t][d] * va[bi][h][t][d];
        const double g = std::tanh(a);
        gmin = std::min(gmin, g), gmax = std::max(gmax, g);
        for (int64_t d = 0; d < 20; ++d)
          err = std::max(err, std::abs(za[bi][h][t][d] - (ya[bi][h][t][d] - g * yv / vv * va[bi][h][t][d])));
      }
  EXPECT_LT(err, 1e-13);
  EXPECT_GT(gmax - gmin, 0.5);  // the gates differ from token to token
}

TEST(XsaTokenKind, GradientMatchesCentralDifferences) {
  auto model = token_model();
  const auto& attn = *model->transformer->h[0]->as<Block>()->attn;
  auto w = test::own_param(attn, "xsa_token_gate"), b = test::own_param(attn, "xsa_token_gate_bias");
  auto [y, v, x] = token_inputs();
  for (auto* t : {&y, &v, &x}) t->requires_grad_(true);
  const auto weights = torch::randn_like(y);
  auto loss = [&] { return (attn.apply_step(y, v, x) * weights).sum(); };
  loss().backward();
  for (auto* t : {&y, &v, &x, &w, &b}) {
    ASSERT_TRUE(t->grad().defined());
    for (int64_t i : {int64_t{0}, t->numel() / 2, t->numel() - 1}) {
      const double fd = test::central_difference([&] { return loss().item<double>(); }, *t, i);
      EXPECT_NEAR(t->grad().view(-1)[i].item<double>(), fd, 1e-7 * std::max(1.0, std::abs(fd)));
    }
  }
}

TEST(XsaTokenKind, StartsAsSaWithItsParametersCountedAndGrouped) {
  auto cfg = test::small_model("xsa_token");
  cfg.n_layer = 3;
  cfg.set_attention("xsa_token", {{"xsa_layers", "last 2"}});
  GPT model(cfg);
  std::vector<std::string> layers;
  for (const auto& block : *model->transformer->h) layers.push_back(block->as<Block>()->attn->describe());
  EXPECT_EQ(layers, (std::vector<std::string>{"sa (xsa_token model, step not in this layer)",
                                              "xsa_token, gated per token", "xsa_token, gated per token"}));
  const auto& attn = *model->transformer->h[2]->as<Block>()->attn;
  auto y = torch::randn({2, 3, 5, 20}), v = torch::randn({2, 3, 5, 20}), x = torch::randn({2, 5, 48});
  EXPECT_TRUE(torch::equal(attn.apply_step(y, v, x), y));  // g = tanh(0) = 0: exactly SA
  int64_t params = 0;
  for (const auto& p : model->unique_parameters()) params += p.numel();
  EXPECT_EQ(count_params(cfg).total, params);
  auto plain = cfg;
  plain.set_attention("sa");
  EXPECT_EQ(count_params(cfg).non_embedding - count_params(plain).non_embedding, 2 * 3 * (48 + 1));  // two layers
  for (const auto& item : model->named_parameters()) {
    const auto& name = item.key();
    if (name.find(".attn.") != std::string::npos && item.value().dim() == 2) {
      EXPECT_EQ(muon_updates(name, item.value()), !name.ends_with("xsa_token_gate")) << name;
    }
  }
  auto error_of = [](const json& m) { return test::error_of<ConfigError>([&] { model_config_from_json(m); }); };
  EXPECT_THAT(error_of({{"attention", "xsa_token"}, {"xsa_gate", "sa"}}),
              HasSubstr("model.xsa_gate: a key of attention=\"xsa\", so it needs attention=\"xsa\" (attention is "
                        "\"xsa_token\")"));
  EXPECT_THAT(error_of({{"attention", "xsa_token"}, {"out_gate", "headwise"}}), HasSubstr("model.out_gate: a key of"));
}
