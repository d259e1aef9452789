// The fused ops of src/kernels/ as custom autograd functions, on the CPU where they
// run their ATen twins: outputs and every gradient against the plain ATen
// composition they replace, differentiated by autograd, in float64. (The CUDA
// kernels are checked against these twins in test_kernels_cuda.cpp.)
#include "helpers.h"
#include "kernels/add_norm.h"
#include "kernels/linear.h"
#include "kernels/lm_head_loss.h"
#include "kernels/rope_qkv.h"
#include "model/rope.h"

#include <gtest/gtest.h>

using namespace xsagpt;

namespace {

const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);

void expect_close(const torch::Tensor& got, const torch::Tensor& want, double tol, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what;
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const double err = (got.to(torch::kFloat64) - want.to(torch::kFloat64)).abs().max().item<double>();
  const double scale = want.abs().max().item<double>();
  EXPECT_LE(err, tol * std::max(1.0, scale)) << what << ": max abs error " << err;
}

}  // namespace

TEST(RopeQkv, MatchesSplitHeadsAndApplyRopeWithGradients) {
  for (int64_t D : {8, 20}) {
    SCOPED_TRACE("head_dim " + std::to_string(D));
    torch::manual_seed(0);
    const int64_t B = 2, T = 7, H = 3;
    auto [cos, sin] = rope_tables(T + 3, D, 10000.0);
    cos = cos.narrow(0, 3, T);  // rows of positions 3.. (a KV-cache continuation or sinks in front)
    sin = sin.narrow(0, 3, T);
    auto qkv = torch::randn({B, T, 3 * H * D}, f64).requires_grad_(true);
    auto [q, k, v] = rope_qkv(qkv, H, D, cos, sin);

    auto ref_in = qkv.detach().clone().requires_grad_(true);
    auto heads = [&](const torch::Tensor& t) { return t.view({B, T, H, D}).transpose(1, 2); };
    auto parts = ref_in.chunk(3, -1);
    auto rq = apply_rope(heads(parts[0]), cos.to(torch::kFloat64), sin.to(torch::kFloat64));
    auto rk = apply_rope(heads(parts[1]), cos.to(torch::kFloat64), sin.to(torch::kFloat64));
    auto rv = heads(parts[2]);
    expect_close(q, rq, 1e-12, "q");
    expect_close(k, rk, 1e-12, "k");
    expect_close(v, rv, 0, "v");
    EXPECT_EQ(q.sizes(), (std::vector<int64_t>{B, H, T, D}));
    EXPECT_EQ(q.transpose(1, 2).stride(-1), 1);
    EXPECT_TRUE(q.transpose(1, 2).is_contiguous());  // (B, T, H, D) buffers, as flash attention reads them

    auto gq = torch::randn_like(rq), gk = torch::randn_like(rk), gv = torch::randn_like(rv);
    ((q * gq).sum() + (k * gk).sum() + (v * gv).sum()).backward();
    ((rq * gq).sum() + (rk * gk).sum() + (rv * gv).sum()).backward();
    expect_close(qkv.grad(), ref_in.grad(), 1e-12, "d qkv");
  }
}

TEST(RopeQkv, UnusedOutputsGetZeroGradient) {
  torch::manual_seed(1);
  auto [cos, sin] = rope_tables(5, 4, 10000.0);
  auto qkv = torch::randn({1, 5, 3 * 2 * 4}, f64).requires_grad_(true);
  auto [q, k, v] = rope_qkv(qkv, 2, 4, cos, sin);
  q.sum().backward();
  EXPECT_EQ(qkv.grad().narrow(-1, 8, 16).abs().max().item<double>(), 0.0);
  EXPECT_GT(qkv.grad().narrow(-1, 0, 8).abs().max().item<double>(), 0.0);
}

class AddNormCases : public ::testing::TestWithParam<std::tuple<bool, bool, bool>> {};  // branch, bias, x_out used

TEST_P(AddNormCases, MatchesAddThenLayerNormWithGradients) {
  const auto [with_branch, with_bias, use_x_out] = GetParam();
  torch::manual_seed(2);
  const int64_t d = 12;
  auto x = (torch::randn({2, 5, d}, f64) * 3 + 1).requires_grad_(true);
  auto branch = torch::randn({2, 5, d}, f64).requires_grad_(true);
  auto w = (torch::rand({d}, f64) + 0.5).requires_grad_(true);
  auto b = with_bias ? torch::randn({d}, f64).requires_grad_(true) : torch::Tensor();
  auto [x_out, h] = add_layer_norm(x, with_branch ? branch : torch::Tensor(), w, b, 1e-5, torch::kFloat64);

  auto rx = x.detach().clone().requires_grad_(true), rb = branch.detach().clone().requires_grad_(true);
  auto rw = w.detach().clone().requires_grad_(true);
  auto rbias = with_bias ? b.detach().clone().requires_grad_(true) : torch::Tensor();
  auto rx_out = with_branch ? rx + rb : rx;
  auto rh = torch::layer_norm(rx_out, {d}, rw, rbias, 1e-5);
  expect_close(x_out, rx_out, 1e-14, "x_out");
  expect_close(h, rh, 1e-12, "h");

  auto gh = torch::randn_like(rh), gx = torch::randn_like(rh);
  auto loss = (h * gh).sum(), rloss = (rh * gh).sum();
  if (use_x_out && with_branch) {
    loss = loss + (x_out * gx).sum();
    rloss = rloss + (rx_out * gx).sum();
  }
  loss.backward();
  rloss.backward();
  expect_close(x.grad(), rx.grad(), 1e-12, "dx");
  if (with_branch) expect_close(branch.grad(), rb.grad(), 1e-12, "dbranch");
  expect_close(w.grad(), rw.grad(), 1e-12, "dweight");
  if (with_bias) expect_close(b.grad(), rbias.grad(), 1e-12, "dbias");
}

INSTANTIATE_TEST_SUITE_P(Kernels, AddNormCases,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool(), ::testing::Bool()));

TEST(AddNorm, OutputInTheComputeDtypeAndBranchGradientInItsOwn) {
  torch::manual_seed(3);
  auto x = torch::randn({4, 16}).requires_grad_(true);
  auto branch = torch::randn({4, 16}, torch::kBFloat16).requires_grad_(true);
  auto w = torch::ones({16}).requires_grad_(true);
  auto [x_out, h] = add_layer_norm(x, branch, w, {}, 1e-5, torch::kBFloat16);
  EXPECT_EQ(x_out.scalar_type(), torch::kFloat32);
  EXPECT_EQ(h.scalar_type(), torch::kBFloat16);
  (h.to(torch::kFloat32).sum() + x_out.sum()).backward();
  EXPECT_EQ(branch.grad().scalar_type(), torch::kBFloat16);
  EXPECT_EQ(x.grad().scalar_type(), torch::kFloat32);
}

class LMHeadLossCases : public ::testing::TestWithParam<int64_t> {};  // chunk

TEST_P(LMHeadLossCases, MatchesCrossEntropyOfTheFullLogitsWithGradients) {
  const int64_t chunk = GetParam();
  torch::manual_seed(4);
  const int64_t N = 11, d = 6, V = 13;
  auto h = torch::randn({N, d}, f64).requires_grad_(true);
  auto w = torch::randn({V, d}, f64).requires_grad_(true);
  auto t = torch::randint(0, V, {N}, torch::kLong);
  t[2] = -1;
  t[7] = -1;
  auto loss = lm_head_loss(h, w, w, t, chunk);

  auto rh = h.detach().clone().requires_grad_(true), rw = w.detach().clone().requires_grad_(true);
  namespace F = torch::nn::functional;
  auto rloss = F::cross_entropy(torch::matmul(rh, rw.t()), t, F::CrossEntropyFuncOptions().ignore_index(-1));
  EXPECT_NEAR(loss.item<double>(), rloss.item<double>(), 1e-12);
  (loss * 0.25).backward();  // the incoming gradient scales what forward made
  (rloss * 0.25).backward();
  expect_close(h.grad(), rh.grad(), 1e-12, "d hidden");
  expect_close(w.grad(), rw.grad(), 1e-12, "d weight");
}

INSTANTIATE_TEST_SUITE_P(Kernels, LMHeadLossCases, ::testing::Values(0, 1, 4, 11, 100));

TEST(LMHeadLoss, CachedCopyGetsNoGradientAndTheParameterGetsItsOwnDtype) {
  torch::manual_seed(5);
  auto h = torch::randn({6, 8}).requires_grad_(true);
  auto w = torch::randn({10, 8}).requires_grad_(true);
  auto wc = w.detach().to(torch::kFloat64);  // a "compute dtype" copy; the parameter stays float32
  auto t = torch::randint(0, 10, {6}, torch::kLong);
  auto loss = lm_head_loss(h, w, wc, t, 4);
  EXPECT_EQ(loss.scalar_type(), torch::kFloat64);
  loss.backward();
  EXPECT_EQ(w.grad().scalar_type(), torch::kFloat32);
  EXPECT_EQ(h.grad().scalar_type(), torch::kFloat32);
  namespace F = torch::nn::functional;
  auto rw = w.detach().to(torch::kFloat64).requires_grad_(true);
  auto rloss = F::cross_entropy(torch::matmul(h.detach().to(torch::kFloat64), rw.t()), t);
  rloss.backward();
  expect_close(w.grad(), rw.grad(), 1e-6, "d weight");
}

TEST(LMHeadLoss, WithoutGradOnlyTheLoss) {
  torch::manual_seed(6);
  auto h = torch::randn({5, 4}, f64), w = torch::randn({7, 4}, f64);
  auto t = torch::randint(0, 7, {5}, torch::kLong);
  torch::NoGradGuard g;
  namespace F = torch::nn::functional;
  EXPECT_NEAR(lm_head_loss(h, w, w, t, 2).item<double>(), F::cross_entropy(torch::matmul(h, w.t()), t).item<double>(),
              1e-12);
}

TEST(CachedLinear, Bf16FromTheCopyAndFloat32GradientForTheParameter) {
  torch::manual_seed(7);
  auto x = torch::randn({3, 5, 16}).to(torch::kBFloat16).requires_grad_(true);
  auto w = torch::randn({8, 16}).requires_grad_(true), b = torch::randn({8}).requires_grad_(true);
  WeightCache cache;
  auto wc = cache.get(w, torch::kBFloat16);
  EXPECT_FALSE(wc.requires_grad());
  auto y = cached_linear(x, w, wc, b);
  EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
  auto g = torch::randn(y.sizes()).to(torch::kBFloat16);
  y.backward(g);
  ASSERT_EQ(w.grad().scalar_type(), torch::kFloat32);
  ASSERT_EQ(b.grad().scalar_type(), torch::kFloat32);
  // The same products in float64 from the same bf16 operands.
  auto X = x.detach().to(torch::kFloat64).reshape({-1, 16}), G = g.to(torch::kFloat64).reshape({-1, 8});
  expect_close(w.grad(), torch::matmul(G.t(), X), 2e-2, "d weight");
  expect_close(b.grad(), G.sum(0), 2e-2, "d bias");
  expect_close(x.grad(), torch::matmul(g.to(torch::kFloat64), wc.to(torch::kFloat64)), 2e-2, "d x");
  expect_close(y, torch::matmul(x.detach().to(torch::kFloat64), wc.to(torch::kFloat64).t()) + b.detach().to(torch::kFloat64),
               2e-2, "y");
}

TEST(WeightCache, CopiesOnceAndAgainOnlyWhenTheParameterChanged) {
  auto w = torch::ones({4, 4}).requires_grad_(true);
  WeightCache cache;
  auto a = cache.get(w, torch::kBFloat16);
  EXPECT_TRUE(cache.get(w, torch::kBFloat16).is_same(a));  // no new copy
  EXPECT_TRUE(cache.get(w, torch::kFloat32).is_same(w));   // its own dtype: the parameter itself
  EXPECT_EQ(cache.bytes(), 16 * 2);
  {
    torch::NoGradGuard g;
    w.mul_(3);  // moves the version counter, as an optimizer step does
  }
  EXPECT_EQ(cache.get(w, torch::kBFloat16).to(torch::kFloat32).max().item<float>(), 3.0f);
  {
    torch::NoGradGuard g;
    // A write that bypasses the version counter (as a collective may): refresh() is the way to say so.
    std::memcpy(w.data_ptr<float>(), torch::full({4, 4}, 5.0f).data_ptr<float>(), 16 * sizeof(float));
  }
  EXPECT_EQ(cache.get(w, torch::kBFloat16).to(torch::kFloat32).max().item<float>(), 3.0f);
  cache.refresh();
  EXPECT_EQ(cache.get(w, torch::kBFloat16).to(torch::kFloat32).max().item<float>(), 5.0f);
}

TEST(MatmulInto, WritesAndAccumulatesInTheOutputsDtype) {
  torch::manual_seed(8);
  auto a = torch::randn({5, 3}).to(torch::kBFloat16), b = torch::randn({3, 4}).to(torch::kBFloat16);
  auto out = torch::empty({5, 4});
  matmul_into(out, a, b, false);
  auto want = torch::matmul(a.to(torch::kFloat64), b.to(torch::kFloat64));
  expect_close(out, want, 2e-2, "write");
  matmul_into(out, a, b, true);
  expect_close(out, 2 * want, 2e-2, "accumulate");
}
