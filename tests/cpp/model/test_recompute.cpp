// Activation checkpointing gives the same output and gradients as the plain
// forward/backward, also with dropout (same random numbers replayed).
#include "helpers.h"
#include "live_head.h"
#include "model/gpt.h"
#include "model/recompute.h"
#include "model/rope.h"

#include <gtest/gtest.h>

using namespace xsagpt;

namespace {
struct Grads {
  torch::Tensor out, dx;
  std::map<std::string, torch::Tensor> params;
};

Grads run_block(Block& block, const torch::Tensor& x0, bool recompute, const torch::Tensor& cos,
                const torch::Tensor& sin) {
  block->zero_grad();
  auto x = x0.detach().clone().requires_grad_(true);
  torch::manual_seed(42);  // same dropout masks for both variants
  auto fn = [&](const torch::Tensor& t) {
    Residual r(t, *block->exec);
    block->forward(r, cos, sin);
    return r.flush();
  };
  auto y = recompute ? recompute_in_backward(fn, x) : fn(x);
  (y * y).sum().backward();
  Grads g{y.detach(), x.grad()};
  for (auto& p : block->named_parameters()) g.params[p.key()] = p.value().grad().clone();
  return g;
}
}  // namespace

class RecomputeKinds : public ::testing::TestWithParam<std::string> {};

TEST_P(RecomputeKinds, SameOutputAndGradientsAsPlainBackward) {
  auto cfg = test::small_model(GetParam());
  cfg.dropout = 0.2;
  torch::manual_seed(0);
  Block block(cfg, 0, std::make_shared<Exec>());
  block->train();
  auto [cos, sin] = rope_tables(16, cfg.head_dim, cfg.rope_theta);
  auto x = torch::randn({2, 16, cfg.d_model});
  auto plain = run_block(block, x, false, cos, sin);
  auto re = run_block(block, x, true, cos, sin);
  EXPECT_TRUE(torch::allclose(plain.out, re.out, 1e-6, 1e-6));
  EXPECT_TRUE(torch::allclose(plain.dx, re.dx, 1e-5, 1e-6));
  ASSERT_EQ(plain.params.size(), re.params.size());
  for (auto& [name, g] : plain.params) EXPECT_TRUE(torch::allclose(g, re.params[name], 1e-5, 1e-6)) << name;
  // The random numbers after backward are the ones the plain run leaves.
  EXPECT_GT(plain.dx.abs().sum().item<double>(), 0);
}

INSTANTIATE_TEST_SUITE_P(Recompute, RecomputeKinds, ::testing::Values("sa", "xsa"));

TEST(Recompute, ABlockWithoutARuntimeIsRefused) {
  // Not silently plain ATen: a Block runs in the runtime its GPT (or bench) gives it.
  EXPECT_THROW(Block(test::small_model("xsa"), 0, nullptr), c10::Error);
}

TEST(Recompute, NoGradModeJustRunsTheFunction) {
  torch::NoGradGuard g;
  auto y = recompute_in_backward([](const torch::Tensor& t) { return t * 2; }, torch::ones({3}));
  EXPECT_TRUE(torch::equal(y, torch::full({3}, 2.0)));
}

TEST(Recompute, WholeModelMemoryOptionsKeepLossAndGradients) {
  auto cfg = test::small_model("xsa");
  cfg.bias = true;
  auto idx = torch::randint(0, 64, {2, 20}, torch::kLong);
  auto targets = torch::randint(0, 64, {2, 20}, torch::kLong);
  targets[0][3] = -1;
  auto grads = [&](const std::string& recompute, int64_t chunk) {
    torch::manual_seed(7);
    GPT m(cfg);
    test::randomize_head(m);  // a zero head leaves every gradient below it 0 in every mode
    m->set_runtime(test::runtime(recompute, chunk));
    auto loss = m->forward(idx, targets).loss;
    loss.backward();
    if (recompute == "none" && chunk == 0) test::assert_live(test::gradients(m));
    std::vector<torch::Tensor> g{loss.detach()};
    for (auto& [n, p] : m->unique_named_parameters()) g.push_back(p.grad());
    return g;
  };
  const auto plain = grads("none", 0);
  for (auto [recompute, chunk] :
       {std::pair<std::string, int64_t>{"mlp", 0}, {"block", 0}, {"none", 7}, {"block", 16}}) {
    auto got = grads(recompute, chunk);
    ASSERT_EQ(got.size(), plain.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(torch::allclose(got[i], plain[i], 1e-5, 1e-6)) << recompute << " chunk " << chunk << " tensor " << i;
  }
}
