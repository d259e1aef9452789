// RoPE: relative-position property and norm preservation.
#include "model/rope.h"

#include <gtest/gtest.h>

using namespace xsagpt;

namespace {
// Places vector `x` (D) at position `pos` and rotates it.
torch::Tensor at_position(const torch::Tensor& x, int64_t pos, const torch::Tensor& cos, const torch::Tensor& sin) {
  return apply_rope(x.view({1, 1, 1, -1}), cos.narrow(0, pos, 1), sin.narrow(0, pos, 1)).view(-1);
}
}  // namespace

TEST(RoPE, DotProductDependsOnlyOnOffset) {
  torch::manual_seed(0);
  const int64_t D = 32;
  auto [cos, sin] = rope_tables(512, D, 10000.0);
  auto q = torch::randn({D}), k = torch::randn({D});
  for (int64_t offset : {0, 1, 7, 100}) {
    double first = at_position(q, offset, cos, sin).dot(at_position(k, 0, cos, sin)).item<double>();
    for (int64_t base : {3, 50, 400}) {
      double other = at_position(q, base + offset, cos, sin).dot(at_position(k, base, cos, sin)).item<double>();
      EXPECT_NEAR(first, other, 1e-4) << "offset " << offset << " base " << base;
    }
  }
  // ... and it does depend on the offset.
  double d0 = at_position(q, 5, cos, sin).dot(at_position(k, 5, cos, sin)).item<double>();
  double d3 = at_position(q, 8, cos, sin).dot(at_position(k, 5, cos, sin)).item<double>();
  EXPECT_GT(std::abs(d0 - d3), 1e-3);
}

TEST(RoPE, PreservesNorms) {
  auto [cos, sin] = rope_tables(64, 16, 10000.0);
  auto x = torch::randn({2, 3, 64, 16});
  auto r = apply_rope(x, cos, sin);
  EXPECT_TRUE(torch::allclose(r.norm(2, -1), x.norm(2, -1), 1e-5, 1e-5));
}

TEST(RoPE, RotateHalfConventionAtPositionOne) {
  // Pair i = (x[i], x[i + D/2]) rotates by angle theta^(-2i/D).
  const int64_t D = 8;
  auto [cos, sin] = rope_tables(4, D, 10000.0);
  auto x = torch::arange(1, D + 1, torch::kFloat32);
  auto r = at_position(x, 1, cos, sin);
  for (int64_t i = 0; i < D / 2; ++i) {
    double a = std::pow(10000.0, -2.0 * i / D);
    double x1 = x[i].item<double>(), x2 = x[i + D / 2].item<double>();
    EXPECT_NEAR(r[i].item<double>(), x1 * std::cos(a) - x2 * std::sin(a), 1e-5);
    EXPECT_NEAR(r[i + D / 2].item<double>(), x2 * std::cos(a) + x1 * std::sin(a), 1e-5);
  }
}

// RoPE as the model computes it, x [c, c] + [x2, x1] [-s, s], gives the rotation's own
// products and sums bit for bit in float32, and its gradient is the inverse rotation
// (float64: dx1 = g1 c + g2 s, dx2 = g2 c - g1 s).
TEST(RoPE, TheRotationExactlyAndItsTransposeAsGradient) {
  torch::manual_seed(3);
  const int64_t T = 6, D = 8, h = D / 2;
  auto [cos, sin] = rope_tables(T, D, 10000.0);
  auto x = torch::randn({2, 3, T, D});
  const auto x1 = x.narrow(-1, 0, h), x2 = x.narrow(-1, h, h);
  EXPECT_TRUE(torch::equal(apply_rope(x, cos, sin), torch::cat({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, -1)));

  const auto c = cos.to(torch::kFloat64), s = sin.to(torch::kFloat64);
  auto x64 = x.to(torch::kFloat64).requires_grad_(true);
  auto g = torch::randn({2, 3, T, D}, torch::kFloat64);
  apply_rope(x64, c, s).backward(g);
  const auto g1 = g.narrow(-1, 0, h), g2 = g.narrow(-1, h, h);
  const auto want = torch::cat({g1 * c + g2 * s, g2 * c - g1 * s}, -1);
  ASSERT_GT(want.abs().max().item<double>(), 0.1);
  EXPECT_LT((x64.grad() - want).abs().max().item<double>(), 1e-14);
}
