// The chunked LM-head cross-entropy equals F::cross_entropy on full logits, value
// and gradients, in float64, with ignored targets and a ragged last chunk.
#include "model/chunked_loss.h"

#include <gtest/gtest.h>

using namespace xsagpt;
namespace F = torch::nn::functional;

TEST(ChunkedLoss, MatchesFullCrossEntropyInFloat64) {
  torch::manual_seed(0);
  const int64_t N = 37, d = 8, V = 50;
  auto h0 = torch::randn({N, d}, torch::kFloat64), w0 = torch::randn({V, d}, torch::kFloat64);
  auto t = torch::randint(0, V, {N}, torch::kLong);
  t.index_put_({torch::tensor({3, 10, 36})}, -1);
  auto h1 = h0.clone().requires_grad_(true), w1 = w0.clone().requires_grad_(true);
  auto ref = F::cross_entropy(torch::matmul(h1, w1.t()), t, F::CrossEntropyFuncOptions().ignore_index(-1));
  (ref * 3.0).backward();
  for (int64_t chunk : {1, 5, 16, 37, 100}) {
    auto h2 = h0.clone().requires_grad_(true), w2 = w0.clone().requires_grad_(true);
    auto got = chunked_cross_entropy(h2, w2, t, chunk);
    (got * 3.0).backward();
    EXPECT_NEAR(got.item<double>(), ref.item<double>(), 1e-12) << "chunk " << chunk;
    EXPECT_TRUE(torch::allclose(h2.grad(), h1.grad(), 1e-10, 1e-12)) << "chunk " << chunk;
    EXPECT_TRUE(torch::allclose(w2.grad(), w1.grad(), 1e-10, 1e-12)) << "chunk " << chunk;
  }
}
