// Attention sinks: learned vectors in front of every sequence that behave exactly
// like extra tokens at positions 0..n_sink-1, and never reach the logits or loss.
#include "helpers.h"
#include "model/counts.h"
#include "model/gpt.h"

#include <gtest/gtest.h>

using namespace xsagpt;
using xsagpt::test::small_model;

class SinkKinds : public ::testing::TestWithParam<std::string> {};

// Reference: a sink-free model with the same weights, fed sink "tokens" whose
// embedding rows hold the sink vectors. Same positions, so logits must agree.
TEST_P(SinkKinds, SinksBehaveLikePrependedTokens) {
  torch::manual_seed(0);
  auto cfg = small_model(GetParam());
  cfg.n_sink = 2;
  GPT sinks(cfg);
  auto plain_cfg = cfg;
  plain_cfg.n_sink = 0;
  plain_cfg.block_size = cfg.block_size + 2;
  GPT plain(plain_cfg);
  {
    torch::NoGradGuard ng;
    auto mine = sinks->named_parameters();
    for (auto& p : plain->named_parameters()) p.value().copy_(mine[p.key()]);
    plain->transformer->wte->weight.narrow(0, 0, 2).copy_(sinks->transformer->sink);  // ids 0, 1 = the sinks
  }
  auto idx = torch::randint(2, 64, {3, cfg.block_size}, torch::kLong);
  auto got = sinks->forward(idx).logits;
  ASSERT_EQ(got.sizes(), torch::IntArrayRef({3, cfg.block_size, 64}));
  auto with_sink_ids = torch::cat({torch::tensor({0, 1}, torch::kLong).expand({3, 2}), idx}, 1);
  auto want = plain->forward(with_sink_ids).logits.narrow(1, 2, cfg.block_size);
  // The tied head's rows 0 and 1 now hold the sinks: compare the other columns.
  got = got.narrow(2, 2, 62), want = want.narrow(2, 2, 62);
  EXPECT_TRUE(torch::allclose(got, want, 1e-5, 1e-6)) << (got - want).abs().max().item<double>();
}

TEST_P(SinkKinds, LossCoversTokensOnlyAndSinksLearn) {
  torch::manual_seed(1);
  auto cfg = small_model(GetParam());
  cfg.n_sink = 1;
  cfg.tie_embeddings = true;  // a zero-initialised untied head passes no gradient back at the very first step
  GPT model(cfg);
  auto idx = torch::randint(0, 64, {2, 10}, torch::kLong), tgt = torch::randint(0, 64, {2, 10}, torch::kLong);
  auto out = model->forward(idx, tgt);
  auto want = torch::nn::functional::cross_entropy(out.logits.reshape({-1, 64}), tgt.reshape(-1));
  EXPECT_NEAR(out.loss.item<double>(), want.item<double>(), 1e-6);
  out.loss.backward();
  auto sink = model->named_parameters()["transformer.sink"];
  EXPECT_EQ(sink.sizes(), torch::IntArrayRef({1, cfg.d_model}));
  EXPECT_GT(sink.grad().abs().sum().item<double>(), 0.0);
}

TEST_P(SinkKinds, LaterTokensNeverChangeEarlierLogits) {
  torch::manual_seed(2);
  auto cfg = small_model(GetParam());
  cfg.n_sink = 3;
  GPT model(cfg);
  auto idx = torch::randint(0, 64, {1, 20}, torch::kLong);
  auto base = model->forward(idx).logits;
  auto changed = idx.clone();
  changed.narrow(1, 8, 12).random_(0, 64);
  EXPECT_TRUE(torch::allclose(model->forward(changed).logits.narrow(1, 0, 8), base.narrow(1, 0, 8), 1e-5, 1e-6));
}

INSTANTIATE_TEST_SUITE_P(Sinks, SinkKinds, ::testing::Values("sa", "xsa"));

TEST(Sinks, CountedInTheParameterTotalAndDefaultOff) {
  for (int64_t n : {0, 4}) {
    auto cfg = small_model("xsa");
    cfg.n_sink = n;
    cfg.set_attention("xsa", {{"xsa_gate", "sa"}});
    GPT model(cfg);
    int64_t total = 0;
    for (auto& [name, p] : model->unique_named_parameters()) total += p.numel();
    EXPECT_EQ(count_params(cfg).total, total) << "n_sink=" << n;
    EXPECT_EQ(model->named_parameters().contains("transformer.sink"), n > 0);
  }
}

TEST(Sinks, NegativeCountIsAConfigError) {
  auto c = small_model("sa");
  c.n_sink = -1;
  try {
    c.validate();
    FAIL() << "n_sink=-1 accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("model.n_sink"), std::string::npos) << e.what();
  }
}
