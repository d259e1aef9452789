// The "gated" kind (model/kind_gated.cpp): its step against the formula of output-gated
// attention evaluated element by element in float64, z = y * sigmoid(x . w) per head or
// per channel; its gradient against central differences; the paper's start; its
// parameters counted, grouped for AdamW under Muon, and its option refused elsewhere.
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

ModelConfig gated_model(const std::string& width) {
  auto c = test::small_model("gated");  // 3 heads of 20 on d_model 48
  if (!width.empty()) c.set_attention("gated", {{"out_gate", width}});
  c.validate();
  return c;
}

// y, v: (2, 3, 5, 20), x: (2, 5, 48), float64.
struct GatedInputs {
  torch::Tensor y, v, x;
};
GatedInputs gated_inputs() {
  torch::manual_seed(3);
  auto o = torch::TensorOptions().dtype(torch::kFloat64);
  return {torch::randn({2, 3, 5, 20}, o), torch::randn({2, 3, 5, 20}, o), torch::randn({2, 5, 48}, o)};
}

}  // namespace

TEST(GatedKind, StepIsTheSigmoidGateElementByElement) {
  for (const std::string width : {"headwise", "elementwise"}) {
    torch::manual_seed(0);
    GPT model(gated_model(width));
    model->to(torch::kFloat64);
    const auto& attn = *model->transformer->h[0]->as<Block>()->attn;
    auto w = test::own_param(attn, "out_gate");
    ASSERT_EQ(w.sizes(), (std::vector<int64_t>{width == "headwise" ? 3 : 60, 48}));
    {
      torch::NoGradGuard ng;
      w.normal_(0.0, 0.3);  // gates well away from 1/2, so the test sees them
    }
    const auto [y, v, x] = gated_inputs();
    const auto z = attn.apply_step(y, v, x).detach();
    auto ya = y.accessor<double, 4>(), za = z.accessor<double, 4>();
    auto xa = x.accessor<double, 3>();
    const auto wd = w.detach();
    auto wa = wd.accessor<double, 2>();
    double err = 0, moved = 0;
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t h = 0; h < 3; ++h)
        for (int64_t t = 0; t < 5; ++t)
          for (int64_t d = 0; d < 20; ++d) {
            const int64_t row = width == "headwise" ? h : h * 20 + d;
            double s = 0;
            for (int64_t k = 0; k < 48; ++k) s += xa[b][t][k] * wa[row][k];
            const double want = ya[b][h][t][d] / (1.0 + std::exp(-s));
            err = std::max(err, std::abs(za[b][h][t][d] - want));
            moved = std::max(moved, std::abs(za[b][h][t][d] - ya[b][h][t][d]));
          }
    EXPECT_LT(err, 1e-13) << width;
    EXPECT_GT(moved, 0.1) << width;  // the gate is not the identity
  }
}

TEST(GatedKind, GradientMatchesCentralDifferences) {
  for (const std::string width : {"headwise", "elementwise"}) {
    torch::manual_seed(1);
    GPT model(gated_model(width));
    model->to(torch::kFloat64);
    const auto& attn = *model->transformer->h[0]->as<Block>()->attn;
    auto w = test::own_param(attn, "out_gate");
    auto [y, v, x] = gated_inputs();
    y.requires_grad_(true);
    x.requires_grad_(true);
    const auto weights = torch::randn_like(y);
    auto loss = [&] { return (attn.apply_step(y, v, x) * weights).sum(); };
    w.mutable_grad() = torch::Tensor();
    loss().backward();
    for (auto* t : {&y, &x, &w}) {
      ASSERT_TRUE(t->grad().defined());
      for (int64_t i : {0L, 7L, t->numel() - 1}) {
        const double fd = test::central_difference([&] { return loss().item<double>(); }, *t, i);
        EXPECT_NEAR(t->grad().view(-1)[i].item<double>(), fd, 1e-7 * std::max(1.0, std::abs(fd))) << width;
      }
    }
  }
}

TEST(GatedKind, StartsAsThePaperWithItsParametersCountedAndGrouped) {
  torch::manual_seed(2);
  auto cfg = gated_model("elementwise");
  GPT model(cfg);
  const auto& attn = *model->transformer->h[1]->as<Block>()->attn;
  // W ~ N(0, 0.02) as the query projection the paper widens: gates near 1/2 at the start.
  EXPECT_NEAR(test::own_param(attn, "out_gate").std().item<double>(), 0.02, 0.002);
  EXPECT_EQ(attn.describe(), "gated, elementwise gate");
  int64_t params = 0;
  for (const auto& p : model->unique_parameters()) params += p.numel();
  EXPECT_EQ(count_params(cfg).total, params);
  EXPECT_EQ(count_params(cfg).non_embedding - count_params(test::small_model("sa")).non_embedding, 2 * 60 * 48);
  // Muon leaves the gate's matrix to AdamW (optim/muon.h); the projections stay Muon's.
  for (const auto& item : model->named_parameters()) {
    const auto& name = item.key();
    if (name.find(".attn.") != std::string::npos && item.value().dim() == 2) {
      EXPECT_EQ(muon_updates(name, item.value()), !name.ends_with("out_gate")) << name;
    }
  }
}

TEST(GatedKind, ItsOptionIsReadWrittenAndRefusedElsewhere) {
  const auto c = model_config_from_json({{"attention", "gated"}, {"out_gate", "elementwise"}});
  EXPECT_EQ(c.spec().option<OutGate>("out_gate"), OutGate::kElementwise);
  EXPECT_EQ(to_json(c)["out_gate"], "elementwise");
  EXPECT_EQ(to_json(model_config_from_json(to_json(c))), to_json(c));
  EXPECT_FALSE(to_json(gated_model("")).contains("out_gate"));          // written only where set
  EXPECT_EQ(to_json(gated_model("headwise"))["out_gate"], "headwise");  // as set, though its default
  EXPECT_EQ(gated_model("").spec().option<OutGate>("out_gate"), OutGate::kHeadwise);
  auto error_of = [](const json& m) { return test::error_of<ConfigError>([&] { model_config_from_json(m); }); };
  EXPECT_THAT(error_of({{"attention", "xsa"}, {"out_gate", "headwise"}}),
              HasSubstr("model.out_gate: a key of attention=\"gated\", so it needs attention=\"gated\" (attention is "
                        "\"xsa\")"));
  EXPECT_THAT(error_of({{"attention", "gated"}, {"out_gate", "rowwise"}}),
              HasSubstr("model.out_gate: expected \"headwise\" or \"elementwise\", got \"rowwise\""));
  EXPECT_THAT(error_of({{"attention", "gated"}, {"xsa_gate", "sa"}}), HasSubstr("model.xsa_gate: a key of"));
  EXPECT_THAT(error_of({{"attention", "gated"}, {"xsa_layers", "last 1"}}), HasSubstr("model.xsa_layers: a key of"));
}
