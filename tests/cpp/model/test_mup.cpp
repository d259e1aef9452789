// model.parametrization "mup" (config/model_config.h, model/mup.h): at its base width a
// μP model is the SP model bit for bit; away from it the hidden matrices start at SP's
// start over sqrt(m) and the rest as under SP; each parameter's role and rate factor;
// AdamW's rate factors against AdamW run at the factored rate and decay; the key read,
// written and refused. The multipliers of the forward pass are checked against the
// PyTorch reference (tests/python/model/test_reference_model.py), the rates against
// torch.optim.AdamW (tests/python/train/test_mup.py), the scaling with width by the
// coordinate check (test_coord_check.cpp).
#include "config/config_diff.h"
#include "config/resume_check.h"
#include "config/run_config.h"
#include "helpers.h"
#include "model/gpt.h"
#include "model/mup.h"
#include "optim/optimizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

using namespace xsagpt;
using ::testing::HasSubstr;

namespace {

// Every kind with the parameters of its step: the gated XSA, the output gate, the token gate.
std::vector<ModelConfig> mup_kinds(int64_t base_width) {
  std::vector<ModelConfig> out;
  for (const auto& kind : attention_kinds()) {
    auto c = test::small_model(kind.name);
    c.bias = true;
    c.n_sink = 1;
    if (std::string(kind.name) == "xsa") c.set_attention("xsa", {{"xsa_gate", "sa"}});
    c.parametrization = Parametrization::kMup;
    c.mup_base_width = base_width;
    out.push_back(c);
  }
  return out;
}

std::map<std::string, torch::Tensor> start_of(const ModelConfig& c) {
  torch::manual_seed(11);
  GPT m(c);
  std::map<std::string, torch::Tensor> out;
  for (const auto& [n, p] : m->unique_named_parameters()) out[n] = p.detach().clone();
  return out;
}

TEST(Mup, AtItsBaseWidthTheModelIsTheSpModelBitForBit) {
  for (auto mup : mup_kinds(/*base_width=*/48)) {
    SCOPED_TRACE(mup.attention);
    auto sp = mup;
    sp.parametrization = Parametrization::kSp;
    EXPECT_EQ(mup.width_multiplier(), 1.0);
    torch::manual_seed(5);
    GPT a(mup);
    torch::manual_seed(5);
    GPT b(sp);
    EXPECT_TRUE(a->rate_scales().empty());
    for (const auto& [n, p] : a->unique_named_parameters()) EXPECT_TRUE(torch::equal(p, b->named_parameters()[n])) << n;
    const auto idx = torch::randint(mup.vocab_size, {2, 16});
    EXPECT_TRUE(torch::equal(a->forward(idx).logits, b->forward(idx).logits));
  }
}

TEST(Mup, HiddenMatricesStartSmallerByTheRootOfTheMultiplier) {
  for (auto mup : mup_kinds(/*base_width=*/12)) {  // m = 4: starts at half SP's
    SCOPED_TRACE(mup.attention);
    auto sp = mup;
    sp.parametrization = Parametrization::kSp;
    const auto a = start_of(mup), b = start_of(sp);
    GPT shapes(mup);
    int hidden = 0;
    for (const auto& [n, p] : shapes->unique_named_parameters()) {
      const bool is_hidden = width_role(mup, n, p) == WidthRole::kHidden;
      hidden += is_hidden;
      if (n == "lm_head.weight") {  // the base width's start: min(0.02, 0.5/sqrt(12)) = 0.02, SP's 0.02 too here
        EXPECT_TRUE(torch::equal(a.at(n), b.at(n)));
      } else if (is_hidden) {
        EXPECT_TRUE(torch::allclose(a.at(n), b.at(n) * 0.5, 0, 0)) << n;  // a power of two: exact
      } else {
        EXPECT_TRUE(torch::equal(a.at(n), b.at(n))) << n;
      }
    }
    EXPECT_GE(hidden, 4 * mup.n_layer);
  }
  // A head whose SP start depends on width: under μP it is the base width's, whatever d_model.
  auto wide = test::small_model("sa", 64);
  wide.d_model = 2500;
  wide.mlp_ratio = 0.1;
  wide.n_layer = 1;
  wide.parametrization = Parametrization::kMup;
  wide.mup_base_width = 100;
  torch::manual_seed(1);
  const auto head = GPT(wide)->lm_head->weight;
  EXPECT_NEAR(head.std().item<double>(), 0.02, 0.001);  // SP's would be 0.5/sqrt(2500) = 0.01
}

TEST(Mup, EachParameterSaysItsRoleAndHiddenMatricesGetOneOverM) {
  for (auto c : mup_kinds(/*base_width=*/16)) {  // m = 3
    SCOPED_TRACE(c.attention);
    GPT m(c);
    const auto scales = m->rate_scales();
    std::set<std::string> want;
    for (const auto& [n, p] : m->unique_named_parameters()) {
      const bool block_matrix = n.starts_with("transformer.h.") && n.ends_with(".weight") &&
                                (n.find(".c_attn.") != std::string::npos || n.find(".c_proj.") != std::string::npos ||
                                 n.find(".c_fc.") != std::string::npos);
      const bool gate_matrix = n.ends_with(".out_gate") || n.ends_with(".xsa_token_gate");
      if (block_matrix || gate_matrix) want.insert(n);
    }
    std::set<std::string> got;
    for (const auto& [n, s] : scales) {
      got.insert(n);
      EXPECT_DOUBLE_EQ(s, 1.0 / 3.0) << n;
    }
    EXPECT_EQ(got, want);
  }
  auto sp = test::small_model("gated");
  EXPECT_TRUE(GPT(sp)->rate_scales().empty());
}

TEST(Mup, AParameterItsKindLeavesUnsaidIsRefusedByName) {
  auto c = mup_kinds(16)[2];
  ASSERT_EQ(c.attention, "gated");
  const auto t = torch::zeros({3, 48});
  EXPECT_EQ(width_role(c, "transformer.h.0.attn.mystery", t), WidthRole::kUnsaid);
  EXPECT_EQ(width_role(c, "transformer.h.0.attn.out_gate", t), WidthRole::kHidden);
  EXPECT_EQ(width_role(c, "transformer.h.0.attn.c_attn.bias", torch::zeros({3})), WidthRole::kVector);
  EXPECT_EQ(width_role(c, "transformer.wte.weight", t), WidthRole::kVector);
  EXPECT_EQ(width_role(c, "lm_head.weight", t), WidthRole::kVector);
  const std::vector<std::pair<std::string, torch::Tensor>> params{{"transformer.h.0.attn.mystery", t}};
  EXPECT_THAT(test::error_of<ConfigError>([&] { mup_init_scales(c, params); }),
              HasSubstr("whether transformer.h.0.attn.mystery is a hidden matrix, and attention \"gated\" does not say"));
  c.parametrization = Parametrization::kSp;  // under "sp" nothing asks
  EXPECT_TRUE(mup_init_scales(c, params).empty());
}

// AdamW with a rate factor s on one parameter steps it as AdamW at rate lr*s and weight
// decay wd/s would: the decay per step lr*wd is kept.
TEST(Mup, AdamWRateFactorIsTheRateAndDecayOfItsGroup) {
  for (const auto impl : {AdamWImpl::kTorch, AdamWImpl::kFused}) {
    torch::manual_seed(2);
    const auto w0 = torch::randn({6, 5}), v0 = torch::randn({5});
    std::vector<torch::Tensor> grads;
    for (int i = 0; i < 4; ++i) grads.push_back(torch::randn({6, 5}));
    auto run = [&](double lr, double wd, std::map<std::string, double> scales) {
      auto w = w0.clone(), v = v0.clone();
      AdamW opt({{"w", w}, {"v", v}}, AdamWConfig{0.9, 0.95, 1e-8, wd, impl, std::move(scales)});
      for (const auto& g : grads) {
        w.mutable_grad() = g.clone();
        v.mutable_grad() = g.sum(0);
        opt.step(lr);
      }
      return std::pair{w, v};
    };
    const auto [w, v] = run(0.01, 0.1, {{"w", 0.25}});
    const auto [w_ref, v_other] = run(0.01 * 0.25, 0.1 / 0.25, {});
    const auto [w_plain, v_ref] = run(0.01, 0.1, {});
    EXPECT_TRUE(torch::allclose(w, w_ref, 1e-6, 1e-7)) << name(impl);
    EXPECT_TRUE(torch::allclose(v, v_ref, 1e-6, 1e-7)) << name(impl);
    EXPECT_GT((w - w_plain).abs().max().item<double>(), 1e-3) << "the factor must matter";
  }
}

TEST(Mup, TheKeysAreReadWrittenAndChecked) {
  const auto c = model_config_from_json({{"parametrization", "mup"}, {"mup_base_width", 128}, {"d_model", 512}});
  EXPECT_TRUE(c.mup());
  EXPECT_EQ(c.width_multiplier(), 4.0);
  EXPECT_EQ(c.logit_scale(), 0.25);
  EXPECT_DOUBLE_EQ(c.attention_scale(), std::sqrt(64.0) / 64.0);  // its own head size: SP's value
  auto d = c;
  d.mup_base_head_dim = 16;  // heads grown from 16 to 64: 1/head_dim from there
  EXPECT_DOUBLE_EQ(d.attention_scale(), 4.0 / 64.0);
  EXPECT_EQ(to_json(c)["parametrization"], "mup");
  EXPECT_EQ(to_json(ModelConfig{})["parametrization"], "sp");
  EXPECT_EQ(ModelConfig{}.width_multiplier(), 1.0);
  auto error_of = [](const json& m) { return test::error_of<ConfigError>([&] { model_config_from_json(m); }); };
  EXPECT_THAT(error_of({{"parametrization", "ntk"}}), HasSubstr("model.parametrization: expected \"sp\" or \"mup\""));
  EXPECT_THAT(error_of({{"mup_base_width", 0}}), HasSubstr("model.mup_base_width: must be > 0"));
  EXPECT_THAT(error_of({{"mup_base_head_dim", -1}}), HasSubstr("model.mup_base_head_dim: must be >= 0"));
}

TEST(Mup, MuonIsRefusedByName) {
  RunConfig r;
  r.model.parametrization = Parametrization::kMup;
  r.train.optimizer = Optimizer::kMuon;
  r.data.train = r.data.val = "x";
  r.out_dir = "out";
  r.train.seq_len = 64;
  r.model.block_size = 64;
  EXPECT_THAT(test::error_of<ConfigError>([&] { r.validate(); }),
              HasSubstr("train.optimizer: muon with model.parametrization=\"mup\" is not supported"));
  r.model.parametrization = Parametrization::kSp;
  EXPECT_EQ(test::error_of<ConfigError>([&] { r.validate(); }), "(no error)");
}

TEST(Mup, AResumeKeepsTheParametrizationAndSpIgnoresTheBase) {
  RunConfig saved;
  saved.model.parametrization = Parametrization::kMup;
  RunConfig now;
  EXPECT_THAT(test::error_of<ConfigError>([&] { check_resume_compatible(now, to_json(saved), "ckpt.pt"); }),
              HasSubstr("ckpt.pt: model.parametrization is \"mup\" in the checkpoint but \"sp\" in this config"));
  // Under "sp" the μP keys mean nothing: a base that differs is the same model.
  RunConfig sp_other_base;
  sp_other_base.model.mup_base_width = 64;
  EXPECT_EQ(config_difference(to_json(sp_other_base), to_json(now)), std::nullopt);
  auto mup_other_base = saved;
  mup_other_base.model.mup_base_width = 64;
  EXPECT_THAT(config_difference(to_json(mup_other_base), to_json(saved)).value_or(""),
              HasSubstr("model.mup_base_width"));
  // A config written before the keys existed is "sp".
  auto old = to_json(now);
  for (const char* k : {"parametrization", "mup_base_width", "mup_base_head_dim"}) old["model"].erase(k);
  EXPECT_EQ(config_difference(old, to_json(now)), std::nullopt);
}

}  // namespace
