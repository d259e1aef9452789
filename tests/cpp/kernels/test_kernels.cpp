// The fused ops of src/kernels/ as custom autograd functions, on the CPU where they
// run their ATen twins: outputs and every gradient against the plain ATen
// composition they replace, differentiated by autograd, in float64. (The CUDA
// kernels are checked against these twins in test_kernels_cuda.cpp.)
#include "helpers.h"
#include "kernels/add_norm.h"
#include "kernels/linear.h"
#include "kernels/lm_head_loss.h"
#include "kernels/rope_qkv.h"
#include "matmul_counter.h"
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

// A float32 branch meets a bf16 norm output: the add stays float32 (no rounding of
// the branch to the compute dtype first), and the branch's gradient is x's.
TEST(AddNorm, Float32BranchIsAddedInFloat32WhenTheOutputIsBf16) {
  torch::manual_seed(12);
  auto x = torch::randn({6, 32}).requires_grad_(true);
  auto branch = (torch::randn({6, 32}) * (1 + 1e-3)).requires_grad_(true);  // not representable in bf16
  ASSERT_FALSE(torch::equal(branch.to(torch::kBFloat16).to(torch::kFloat32), branch));
  auto w = (torch::rand({32}) + 0.5).requires_grad_(true);
  auto [x_out, h] = add_layer_norm(x, branch, w, {}, 1e-5, torch::kBFloat16);
  EXPECT_TRUE(torch::equal(x_out, x.detach() + branch.detach()));
  (h.to(torch::kFloat32) * torch::randn({6, 32})).sum().backward();
  EXPECT_EQ(branch.grad().scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::equal(branch.grad(), x.grad()));
}

// The backward at the sizes training runs (many rows per warp on a GPU: the CUDA
// test runs the kernel at these sizes) against autograd of layer_norm in float64,
// with a bf16 incoming gradient as the next matmul hands it over.
TEST(AddNorm, BackwardAtTrainingSizesMatchesFloat64Autograd) {
  const int64_t N = 8192;
  for (int64_t d : {768, 1536, 2560}) {
    SCOPED_TRACE("d " + std::to_string(d));
    torch::manual_seed(13);
    auto x = torch::randn({N, d}) * 2 + 0.5;
    auto branch = torch::randn({N, d}).to(torch::kBFloat16);
    auto w = torch::rand({d}) + 0.5, b = torch::randn({d});
    auto xa = x.clone().requires_grad_(true), ba = branch.clone().requires_grad_(true);
    auto wa = w.clone().requires_grad_(true), bb = b.clone().requires_grad_(true);
    auto [x_out, h] = add_layer_norm(xa, ba, wa, bb, 1e-5, torch::kBFloat16);
    auto dh = torch::randn({N, d}).to(torch::kBFloat16), dxo = torch::randn({N, d});
    torch::autograd::backward({h, x_out}, {dh, dxo});

    auto x64 = x.to(torch::kFloat64).requires_grad_(true), b64 = branch.to(torch::kFloat64).requires_grad_(true);
    auto w64 = w.to(torch::kFloat64).requires_grad_(true), bias64 = b.to(torch::kFloat64).requires_grad_(true);
    auto xo64 = x64 + b64;
    auto h64 = torch::layer_norm(xo64, {d}, w64, bias64, 1e-5);
    torch::autograd::backward({h64, xo64}, {dh.to(torch::kFloat64), dxo.to(torch::kFloat64)});
    ASSERT_GT(w64.grad().abs().max().item<double>(), 1.0);
    expect_close(xa.grad(), x64.grad(), 1e-5, "dx");
    expect_close(ba.grad(), b64.grad(), 1e-2, "dbranch (bf16)");
    expect_close(wa.grad(), w64.grad(), 1e-5, "dweight");
    expect_close(bb.grad(), bias64.grad(), 1e-5, "dbias");
  }
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
  (loss / 3.0).backward();  // the incoming gradient scales what forward made (1/3: not a power of two)
  (rloss / 3.0).backward();
  ASSERT_GT(h.grad().abs().max().item<double>(), 0.0);
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

// Evaluation runs the model under NoGradGuard, where a parameter still says
// requires_grad(): the op must see that no graph is recorded and make only the
// logits (one product per chunk), not the two gradient products and a V x d buffer.
TEST(LMHeadLoss, EvaluationOfParametersThatRequireGradComputesOnlyTheLogits) {
  torch::manual_seed(6);
  auto h = torch::randn({10, 4}, f64).requires_grad_(true), w = torch::randn({7, 4}, f64).requires_grad_(true);
  auto t = torch::randint(0, 7, {10}, torch::kLong);
  namespace F = torch::nn::functional;
  const auto ref = F::cross_entropy(torch::matmul(h.detach(), w.detach().t()), t).item<double>();
  {
    test::MatmulCounter count;  // with grad: logits, d hidden, d weight per chunk (the counter sees them)
    auto loss = lm_head_loss(h, w, w, t, 5);
    EXPECT_EQ(count.count(), 2 * 3);
    EXPECT_TRUE(loss.requires_grad());
  }
  torch::NoGradGuard no_grad;
  test::MatmulCounter count;
  auto loss = lm_head_loss(h, w, w, t, 5);
  EXPECT_EQ(count.count(), 2);  // two chunks, one product each
  EXPECT_FALSE(loss.requires_grad());
  EXPECT_NEAR(loss.item<double>(), ref, 1e-12);
}

// The step divides the loss by the accumulation steps, so the head's backward gets
// g = 1/A. In bf16 that scale must stay float32: rounded to bf16, 1/3 is 0.33398
// (0.2% high) for everything below the head. Both hidden dtypes the model hands
// over: float32 (then the scaled gradient is exact) and bf16 (one rounding).
TEST(LMHeadLoss, Bf16GradientsAreScaledByTheExactIncomingGradient) {
  for (auto hidden_dtype : {torch::kFloat32, torch::kBFloat16}) {
    SCOPED_TRACE(c10::toString(hidden_dtype));
    torch::manual_seed(9);
    const int64_t N = 64, d = 16, V = 40;
    auto h0 = torch::randn({N, d}).to(hidden_dtype);
    auto w = torch::randn({V, d}).requires_grad_(true);
    auto wc = w.detach().to(torch::kBFloat16);
    auto t = torch::randint(0, V, {N}, torch::kLong);
    t[3] = -1;
    t[40] = -1;
    auto grads = [&](double g) {
      auto h = h0.clone().requires_grad_(true);
      w.mutable_grad().reset();
      (lm_head_loss(h, w, wc, t, 24) * g).backward();
      return std::pair{h.grad(), w.grad().clone()};
    };
    const auto [dh1, dw1] = grads(1.0);
    const auto [dh3, dw3] = grads(1.0 / 3.0);
    ASSERT_GT(dh1.abs().max().item<float>(), 0.0f);
    EXPECT_EQ(dh3.scalar_type(), hidden_dtype);
    // The same product of the same bf16 gradient and float32 1/3, rounded once.
    const auto want_dh = (dh1.to(torch::kFloat32) * static_cast<float>(1.0 / 3.0)).to(hidden_dtype);
    EXPECT_TRUE(torch::equal(dh3, want_dh))
        << "max diff " << (dh3.to(torch::kFloat64) - want_dh.to(torch::kFloat64)).abs().max().item<double>();
    EXPECT_TRUE(torch::allclose(dw3, dw1 * static_cast<float>(1.0 / 3.0), 1e-6, 0.0));
    // Ignored rows get no gradient.
    EXPECT_EQ(dh3[3].abs().max().item<float>(), 0.0f);
    EXPECT_EQ(dh3[40].abs().max().item<float>(), 0.0f);
  }
}

// backward() scales what forward saved; a second backward through the same graph
// (retain_graph) must give the same gradient again, not one scaled twice.
TEST(LMHeadLoss, SecondBackwardThroughARetainedGraphGivesTheSameGradient) {
  torch::manual_seed(10);
  auto h = torch::randn({9, 5}, f64).requires_grad_(true), w = torch::randn({6, 5}, f64).requires_grad_(true);
  auto t = torch::randint(0, 6, {9}, torch::kLong);
  auto loss = lm_head_loss(h, w, w, t, 4) / 3.0;
  loss.backward({}, /*retain_graph=*/true);
  const auto dh = h.grad().clone(), dw = w.grad().clone();
  ASSERT_GT(dh.abs().max().item<double>(), 0.0);
  loss.backward();
  expect_close(h.grad(), 2 * dh, 1e-14, "d hidden after two backwards");
  expect_close(w.grad(), 2 * dw, 1e-14, "d weight after two backwards");
}

// ATen's cross_entropy(ignore_index=-1): -1 is skipped, anything else outside
// [0, V) is an error (not a row of someone else's logits, not silently ignored).
TEST(LMHeadLoss, TargetsOutsideTheVocabularyAreRejectedAndOnlyMinusOneIsIgnored) {
  torch::manual_seed(11);
  auto h = torch::randn({4, 3}, f64), w = torch::randn({5, 3}, f64);
  for (int64_t bad : {5, 6, -2}) {
    SCOPED_TRACE(bad);
    auto t = torch::tensor(std::vector<int64_t>{0, 1, bad, 2});
    EXPECT_THROW(lm_head_loss(h, w, w, t, 0), c10::Error);
  }
  auto t = torch::tensor({0, 1, -1, 2}, torch::kLong);
  namespace F = torch::nn::functional;
  EXPECT_NEAR(
      lm_head_loss(h, w, w, t, 0).item<double>(),
      F::cross_entropy(torch::matmul(h, w.t()), t, F::CrossEntropyFuncOptions().ignore_index(-1)).item<double>(),
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
  expect_close(
      y, torch::matmul(x.detach().to(torch::kFloat64), wc.to(torch::kFloat64).t()) + b.detach().to(torch::kFloat64),
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
