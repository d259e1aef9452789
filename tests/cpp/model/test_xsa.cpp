// XSA against the paper's formula: orthogonality, an independent float64
// evaluation, and gradients against central finite differences.
#include "model/xsa.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

using namespace xsagpt;

TEST(XSA, OutputIsOrthogonalToOwnValueForEveryPositionAndHead) {
  torch::manual_seed(0);
  auto y = torch::randn({2, 3, 17, 16});
  auto v = torch::randn({2, 3, 17, 16});
  auto z = exclude_self_value(y, v, 1e-6);
  auto cos = (z * v).sum(-1) / (z.norm(2, -1) * v.norm(2, -1));
  EXPECT_LT(cos.abs().max().item<double>(), 1e-5);
  EXPECT_EQ(z.scalar_type(), torch::kFloat32);
}

TEST(XSA, MatchesPaperFormulaInFloat64) {
  torch::manual_seed(1);
  const int64_t N = 40, D = 8;
  auto y = torch::randn({N, D}, torch::kFloat64);
  auto v = torch::randn({N, D}, torch::kFloat64);
  auto z = exclude_self_value(y.to(torch::kFloat32), v.to(torch::kFloat32), 1e-6).to(torch::kFloat64);
  auto ya = y.accessor<double, 2>(), va = v.accessor<double, 2>(), za = z.accessor<double, 2>();
  for (int64_t i = 0; i < N; ++i) {
    double yv = 0, vv = 0;  // z = y - (y.v / v.v) v, the paper's form
    for (int64_t d = 0; d < D; ++d) yv += ya[i][d] * va[i][d], vv += va[i][d] * va[i][d];
    for (int64_t d = 0; d < D; ++d) EXPECT_NEAR(za[i][d], ya[i][d] - yv / vv * va[i][d], 1e-5);
  }
}

TEST(XSA, Float64StaysFloat64AndBf16IsComputedInFloat32) {
  auto y = torch::randn({4, 8}, torch::kFloat64), v = torch::randn({4, 8}, torch::kFloat64);
  EXPECT_EQ(exclude_self_value(y, v, 1e-6).scalar_type(), torch::kFloat64);
  // bf16 inputs: the result must equal the float32 computation rounded once.
  auto yb = y.to(torch::kBFloat16), vb = v.to(torch::kBFloat16);
  auto expect = exclude_self_value(yb.to(torch::kFloat32), vb.to(torch::kFloat32), 1e-6).to(torch::kBFloat16);
  EXPECT_TRUE(torch::equal(exclude_self_value(yb, vb, 1e-6), expect));
}

TEST(XSA, ZeroValueVectorLeavesOutputUnchangedAndFinite) {
  auto y = torch::randn({3, 8});
  auto v = torch::zeros({3, 8});
  auto z = exclude_self_value(y, v, 1e-6);
  EXPECT_TRUE(torch::allclose(z, y));
}

TEST(XSA, GradientsMatchFiniteDifferences) {
  torch::manual_seed(2);
  auto y = torch::randn({2, 3, 5}, torch::kFloat64).requires_grad_(true);
  auto v = torch::randn({2, 3, 5}, torch::kFloat64).requires_grad_(true);
  auto w = torch::randn({2, 3, 5}, torch::kFloat64);  // random cotangent
  auto f = [&](const torch::Tensor& a, const torch::Tensor& b) { return (exclude_self_value(a, b, 1e-6) * w).sum(); };
  f(y, v).backward();
  const double h = 1e-6;
  for (auto* t : {&y, &v}) {
    auto analytic = t->grad();
    auto flat = t->detach().clone().view(-1);
    for (int64_t i = 0; i < flat.numel(); ++i) {
      auto plus = flat.clone(), minus = flat.clone();
      plus[i] += h;
      minus[i] -= h;
      auto p = plus.view(t->sizes()), m = minus.view(t->sizes());
      double fp = (t == &y ? f(p, v.detach()) : f(y.detach(), p)).item<double>();
      double fm = (t == &y ? f(m, v.detach()) : f(y.detach(), m)).item<double>();
      EXPECT_NEAR(analytic.view(-1)[i].item<double>(), (fp - fm) / (2 * h), 1e-6) << "element " << i;
    }
  }
}

// The custom backward against autograd through the same map built from ordinary
// ops, including a zero value vector and one shorter than eps (the clamped branch).
TEST(XSA, CustomBackwardMatchesAutogradOfOrdinaryOps) {
  torch::manual_seed(3);
  for (auto dtype : {torch::kFloat64, torch::kFloat32, torch::kBFloat16}) {
    auto y0 = torch::randn({2, 3, 7, 8}, torch::kFloat64), v0 = torch::randn({2, 3, 7, 8}, torch::kFloat64);
    v0[0][0][0].zero_();
    v0[1][2][3].mul_(1e-9);  // ||v|| < eps = 1e-6
    auto w = torch::randn({2, 3, 7, 8}, torch::kFloat64).to(dtype);
    auto grads = [&](auto xsa) {
      auto y = y0.to(dtype).requires_grad_(true), v = v0.to(dtype).requires_grad_(true);
      auto z = xsa(y, v, 1e-6, torch::Tensor());
      auto g = torch::autograd::grad({(z * w).sum()}, {y, v});
      return std::vector<torch::Tensor>{z, g[0], g[1]};
    };
    auto mine = grads(exclude_self_value), ref = grads(exclude_self_value_autograd);
    const double tol = dtype == torch::kFloat64 ? 1e-12 : dtype == torch::kFloat32 ? 1e-5 : 2e-2;
    EXPECT_TRUE(torch::allclose(mine[0].to(torch::kFloat64), ref[0].to(torch::kFloat64), tol, tol))
        << "forward, " << dtype;
    for (int i = 1; i < 3; ++i) {
      EXPECT_EQ(mine[i].scalar_type(), dtype);
      auto a = mine[i].to(torch::kFloat64), b = ref[i].to(torch::kFloat64);
      // Below eps the gradient is scaled by 1/eps; compare relative to each tensor's size.
      EXPECT_LT((a - b).abs().max().item<double>(), tol * (1 + b.abs().max().item<double>()))
          << (i == 1 ? "dL/dy, " : "dL/dv, ") << dtype;
    }
  }
}
