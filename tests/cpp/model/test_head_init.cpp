// model.head_init: where each way of starting the LM head puts the step-0
// loss, checked at every shipped config's width (two layers of it), because the tied
// head's excess grows with d_model (LN(e).e ~ std * d_model) and a tiny width hides it.
// On the CPU, also where a GPU is present.
#include "helpers.h"
#include "model/gpt.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace xsagpt;

namespace {

double step0_loss(ModelConfig cfg, bool tie, const std::string& init, const torch::Tensor& idx,
                  const torch::Tensor& targets) {
  cfg.tie_embeddings = tie;
  cfg.head_init = schema::enum_from_name<HeadInit>(init, "model.head_init");
  torch::manual_seed(3);
  GPT m(cfg);
  torch::NoGradGuard g;
  return m->forward(idx, targets).loss.item<double>();
}

}  // namespace

TEST(HeadInit, EachModeStartsWhereItsConstructionSaysAtEveryShippedWidth) {
  for (const char* name : {"tiny", "gpt2-124m", "paper-0.7b", "paper-1.4b", "paper-2.7b"}) {
    SCOPED_TRACE(name);
    auto cfg = load_model_config(test::source_path(std::string("configs/model/") + name + ".json"));
    cfg.n_layer = 2;
    torch::manual_seed(8);
    // 256 tokens: the mean target logit's sampling noise (std 0.5/16) stays well inside the bounds.
    auto idx = torch::randint(0, 50257, {4, 64}, torch::kLong);
    auto targets = torch::randint(0, 50257, {4, 64}, torch::kLong);
    const double log_v = std::log(static_cast<double>(cfg.vocab_size));
    const double d = static_cast<double>(cfg.d_model);
    // Zero logits: exactly uniform, whatever the width.
    EXPECT_NEAR(step0_loss(cfg, false, "zero", idx, targets), log_v, 1e-4);
    EXPECT_NEAR(step0_loss(cfg, true, "zero_norm", idx, targets), log_v, 1e-4);
    EXPECT_NEAR(step0_loss(cfg, false, "zero_norm", idx, targets), log_v, 1e-4);
    // Small logits: the tied "scaled" self-logit is 0.5 nats; the default untied "normal"
    // head's logits have std <= 0.5 (excess ~std^2/2 <= 0.13), where an uncapped 0.02
    // would start 0.51 nats high at d_model 2560.
    EXPECT_NEAR(step0_loss(cfg, true, "scaled", idx, targets), log_v, 0.5);
    EXPECT_NEAR(step0_loss(cfg, false, "normal", idx, targets), log_v, 0.3);
    // nanoGPT's tied head: each token's self-logit ~0.012-0.02 d_model dominates once it
    // passes ln V; below that (tiny) it barely shows.
    const double tied = step0_loss(cfg, true, "normal", idx, targets);
    if (0.012 * d > log_v + 1)
      EXPECT_GT(tied, 0.012 * d) << "d_model " << d;
    else
      EXPECT_GT(tied, log_v - 0.5);
  }
}

TEST(HeadInit, ScaledPassesGradientsEverywhereAndZeroNormToTheFinalGain) {
  // A calibrated start must not freeze the model: at step 0 every parameter of a
  // "scaled" tied model has a gradient, and a "zero_norm" model's final gain has one
  // (everything below it waits for the gain to grow, as below a zero head).
  auto cfg = test::small_model("xsa", 64);
  torch::manual_seed(1);
  auto idx = torch::randint(0, 64, {2, 16}, torch::kLong);
  for (const std::string init : {"scaled", "zero_norm"}) {
    SCOPED_TRACE(init);
    cfg.tie_embeddings = true;
    cfg.head_init = schema::enum_from_name<HeadInit>(init, "model.head_init");
    torch::manual_seed(2);
    GPT m(cfg);
    auto loss = m->forward(idx, idx).loss;
    loss.backward();
    for (auto& [n, p] : m->unique_named_parameters()) {
      ASSERT_TRUE(p.grad().defined()) << n;
      if (init == "scaled" || n == "transformer.ln_f.weight") EXPECT_GT(p.grad().abs().max().item<double>(), 0.0) << n;
    }
  }
}

TEST(HeadInit, ImpossibleCombinationsAreRefusedNamingTheKey) {
  auto expect_error = [](bool tie, const std::string& init, const std::string& needle) {
    try {
      model_config_from_json({{"tie_embeddings", tie}, {"head_init", init}});
      ADD_FAILURE() << "no error for tie=" << tie << " head_init=" << init;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("model.head_init"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error(true, "zero", "tie_embeddings=false");
  expect_error(false, "scaled", "tie_embeddings=true");
  expect_error(false, "uniform", "expected");
  ModelConfig ok;
  for (bool tie : {false, true}) {
    ok.tie_embeddings = tie;
    for (const char* init : {"normal", "zero_norm"}) {
      ok.head_init = schema::enum_from_name<HeadInit>(init, "model.head_init");
      EXPECT_NO_THROW(ok.validate()) << tie << " " << init;
    }
  }
}
