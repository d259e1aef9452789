// The LM-head loss as a CPU runs it by default ("auto" takes the loss kernel there):
// its ATen twin in float32, a chunk of rows at a time when no chunk is set, against
// cross-entropy of the full logits in float64.
#include "kernels/lm_head_loss.h"
#include "matmul_counter.h"

#include <gtest/gtest.h>

using namespace xsagpt;

namespace {

namespace F = torch::nn::functional;

double max_rel_error(const torch::Tensor& got, const torch::Tensor& want) {
  return ((got.to(torch::kFloat64) - want).abs().max() / want.abs().max()).item<double>();
}

}  // namespace

// The CPU ladder's head (vocabulary 2,048, d_model 32) over 300 rows: more than one
// default chunk, the last one short, with ignored targets.
TEST(LMHeadLossCpu, Float32InDefaultChunksMatchesFloat64CrossEntropy) {
  torch::manual_seed(21);
  const int64_t N = 300, d = 32, V = 2048;
  auto h = torch::randn({N, d}).requires_grad_(true);
  auto w = (torch::randn({V, d}) * 0.3).requires_grad_(true);
  auto t = torch::randint(0, V, {N}, torch::kLong);
  t[5] = -1;
  t[299] = -1;
  torch::Tensor loss;
  {
    test::MatmulCounter count;
    loss = lm_head_loss(h, w, w, t, /*chunk=*/0);
    EXPECT_EQ(count.count(), 3 * 3);  // chunks of 128, 128 and 44 rows: logits, d hidden, d weight each
  }
  (loss / 3.0).backward();

  auto rh = h.detach().to(torch::kFloat64).requires_grad_(true);
  auto rw = w.detach().to(torch::kFloat64).requires_grad_(true);
  auto rloss = F::cross_entropy(torch::matmul(rh, rw.t()), t, F::CrossEntropyFuncOptions().ignore_index(-1));
  (rloss / 3.0).backward();
  ASSERT_GT(rloss.item<double>(), 1.0);
  ASSERT_GT(rh.grad().abs().max().item<double>(), 1e-4);
  EXPECT_NEAR(loss.item<double>(), rloss.item<double>(), 1e-5 * rloss.item<double>());
  EXPECT_LT(max_rel_error(h.grad(), rh.grad()), 1e-5);
  EXPECT_LT(max_rel_error(w.grad(), rw.grad()), 1e-5);
  EXPECT_EQ(h.grad()[5].abs().max().item<float>(), 0.0f);  // an ignored row gets no gradient
}

// A target 200 nats below the best logit: its probability underflows float32 (e^-200),
// so a loss taken as -log p[target] would be infinite. The loss is log-sum-exp minus
// the target's logit, both finite, with and without grad.
TEST(LMHeadLossCpu, AnUnlikelyTargetHasAFiniteExactLossInFloat32) {
  auto h = torch::ones({1, 1});
  auto w = torch::tensor({{100.0f}, {-100.0f}, {0.0f}}).requires_grad_(true);
  auto t = torch::tensor(std::vector<int64_t>{1});
  // log(e^100 + e^-100 + e^0) + 100, in float64: 200 to well within float32's rounding.
  const double want = 100.0 + std::log1p(std::exp(-200.0) + std::exp(-100.0)) + 100.0;
  auto loss = lm_head_loss(h, w, w, t, 0);
  EXPECT_NEAR(loss.item<double>(), want, 1e-4);
  loss.backward();
  EXPECT_TRUE(torch::isfinite(w.grad()).all().item<bool>());
  EXPECT_NEAR(w.grad()[1][0].item<double>(), -1.0, 1e-6);  // (p - 1) h for the target's row, p ~ 0
  EXPECT_NEAR(w.grad()[0][0].item<double>(), 1.0, 1e-6);   // p h for the likeliest row, p ~ 1
  torch::NoGradGuard no_grad;
  EXPECT_NEAR(lm_head_token_losses(h, w, t, 0)[0].item<double>(), want, 1e-4);
}
