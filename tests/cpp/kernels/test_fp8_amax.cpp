// The amax an FP8 product's input brings from the kernel that made it (the norm
// kernel, the exact GELU; kernels/fp8_linear.h's quantize_fp8 `amax`), on the CPU
// through the kernels' ATen twins: each producer's amax is max |h| of h as stored,
// after its rounding (an amax taken before the cast would differ, and is shown to);
// a quantization given that amax is bit for bit the one that reduces it itself; Exec
// hands it only to the product that reads that very tensor, unmodified; and the model
// routes it to every FP8 product a norm or the GELU feeds. (On CUDA: test_fp8_cuda.cpp.)
#include "helpers.h"
#include "kernels/add_norm.h"
#include "kernels/fp8_linear.h"
#include "kernels/gelu_amax.h"
#include "model/exec.h"
#include "model/gpt.h"

#include <gtest/gtest.h>

#include <limits>

using namespace xsagpt;

namespace {

torch::Tensor max_abs(const torch::Tensor& t) { return t.abs().max().to(torch::kFloat); }

bool same_fp8(const Fp8Tensor& a, const Fp8Tensor& b) {
  auto bits = [](const torch::Tensor& q) { return q.view(torch::kUInt8); };
  return torch::equal(bits(a.q), bits(b.q)) && torch::equal(a.inv, b.inv) &&
         (!a.qt.defined() || torch::equal(bits(a.qt), bits(b.qt)));
}

// An Exec whose fp8 kernel takes every block product, as a GPT's would.
std::shared_ptr<Exec> fp8_exec() {
  auto exec = std::make_shared<Exec>();
  exec->set_runtime(test::runtime("none", 0, "fused,fp8_all", false, /*bf16=*/true));
  return exec;
}

}  // namespace

TEST(Fp8Amax, AGivenAmaxQuantizesBitForBitAsTheReductionDoes) {
  torch::manual_seed(3);
  const auto t = (torch::randn({48, 64}) * 3).to(torch::kBFloat16);
  for (auto fmt : {kFp8Forward, kFp8Backward}) {
    const auto own = quantize_fp8(t, fmt, /*transposed=*/true);
    EXPECT_TRUE(same_fp8(quantize_fp8(t, fmt, /*transposed=*/true, max_abs(t)), own));
    // The amax is used, not recomputed: a larger one scales everything down.
    EXPECT_FALSE(same_fp8(quantize_fp8(t, fmt, /*transposed=*/true, 2 * max_abs(t)), own));
  }
  EXPECT_THROW(quantize_fp8(t, kFp8Forward, false, torch::zeros({2})), c10::Error);
  EXPECT_THROW(quantize_fp8(t, kFp8Forward, false, torch::zeros({}, torch::kDouble)), c10::Error);
}

TEST(Fp8Amax, TheNormsAmaxIsTheMaxOfItsOutputAsStored) {
  torch::manual_seed(4);
  const int64_t d = 96;
  const auto x = torch::randn({5, 7, d}) * 2, branch = torch::randn({5, 7, d}).to(torch::kBFloat16);
  const auto w = torch::rand({d}) + 0.5, b = torch::randn({d});
  for (bool with_branch : {true, false}) {
    SCOPED_TRACE(with_branch ? "with a branch" : "no branch");
    auto amax = torch::zeros({});
    const auto [x_out, h] = add_layer_norm(x, with_branch ? branch : torch::Tensor(), w, b, 1e-5,
                                           torch::kBFloat16, amax);
    EXPECT_TRUE(torch::equal(amax, max_abs(h)));
    // Before the rounding to bf16 the maximum is another number: an amax taken
    // there would not be the cast's.
    const auto xo = with_branch ? x + branch.to(torch::kFloat) : x;
    const auto exact = torch::layer_norm(xo, {d}, w, b, 1e-5);
    ASSERT_FALSE(torch::equal(max_abs(exact), max_abs(h)));
    // Without an amax asked for, the same h.
    EXPECT_TRUE(torch::equal(add_layer_norm(x, with_branch ? branch : torch::Tensor(), w, b, 1e-5,
                                            torch::kBFloat16).second, h));
  }
}

TEST(Fp8Amax, TheGeluIsAtensWithTheMaxOfItsOutputAndTheSameGradient) {
  torch::manual_seed(5);
  for (auto dtype : {torch::kBFloat16, torch::kFloat32}) {
    const auto x0 = (torch::randn({6, 40}) * 3).to(dtype);
    auto x = x0.clone().requires_grad_(true), xr = x0.clone().requires_grad_(true);
    auto [h, amax] = gelu_with_amax(x);
    const auto ref = torch::gelu(xr);
    EXPECT_TRUE(torch::equal(h, ref));
    EXPECT_TRUE(torch::equal(amax, max_abs(ref)));
    EXPECT_FALSE(amax.requires_grad());
    const auto g = torch::randn({6, 40}).to(dtype);
    h.backward(g);
    ref.backward(g);
    ASSERT_GT(xr.grad().abs().sum().item<double>(), 0);
    EXPECT_TRUE(torch::equal(x.grad(), xr.grad()));
  }
}

TEST(Fp8Amax, ExecHandsTheAmaxOnlyToTheTensorItWasTakenOf) {
  torch::manual_seed(6);
  auto exec = fp8_exec();
  const auto w = torch::randn({32, 64}) * 0.1;
  ASSERT_TRUE(exec->fp8_takes(w));
  const auto h = (torch::randn({16, 64}) * 2).to(torch::kBFloat16);
  const auto fresh = exec->block_linear(h, w);
  // A visible mistake (not a power of 2, which would shift every exponent alike and
  // round nothing differently).
  const auto wrong = 3 * max_abs(h);
  auto run = [&](const torch::Tensor& x) {
    const auto before = exec->amax_reused;
    auto y = exec->block_linear(x, w);
    return std::pair{y, exec->amax_reused - before};
  };
  // Taken: the offered amax is what the quantization used.
  exec->offer_amax(h, wrong);
  auto [y_wrong, n] = run(h);
  EXPECT_EQ(n, 1);
  EXPECT_FALSE(torch::equal(y_wrong, fresh));
  exec->offer_amax(h, max_abs(h));
  EXPECT_TRUE(torch::equal(run(h).first, fresh));
  // Once: the slot is empty after its product.
  exec->offer_amax(h, wrong);
  run(h);
  EXPECT_EQ(run(h).second, 0);
  // Not for a view of it, nor for another tensor of the same values.
  exec->offer_amax(h, wrong);
  auto [y_view, n_view] = run(h.view({4, 4, 64}));
  EXPECT_EQ(n_view, 0);
  EXPECT_TRUE(torch::equal(y_view.view({16, 32}), fresh));
  exec->offer_amax(h, wrong);
  EXPECT_EQ(run(h.clone()).second, 0);
  // Not once the tensor changed in place after the producer measured it.
  auto h2 = h.clone();
  exec->offer_amax(h2, max_abs(h2));
  h2.mul_(3);
  auto [y_changed, n_changed] = run(h2);
  EXPECT_EQ(n_changed, 0);
  EXPECT_TRUE(torch::equal(y_changed, exec->block_linear(h2.clone(), w)));
}

TEST(Fp8Amax, TheModelsNormsAndGeluHandTheirAmaxToEveryFp8ProductTheyFeed) {
  auto cfg = test::small_model("sa", 64);
  cfg.n_layer = 2;
  cfg.d_model = 1536;  // 0.7B's width: fp8's filter takes the qkv and MLP products, not the attention output
  cfg.n_head = 2;
  cfg.head_dim = 768;
  const auto idx = torch::randint(0, cfg.vocab_size, {1, 8}, torch::kLong);
  torch::manual_seed(9);
  GPT m(cfg);
  Exec& exec = *m->transformer->h[0]->as<Block>()->exec;
  auto reused = [&](const std::string& kernels, const std::string& recompute) {
    m->set_runtime(test::runtime(recompute, 0, kernels, false, /*bf16=*/true));
    const auto before = exec.amax_reused;
    m->forward(idx, idx).loss.backward();
    return exec.amax_reused - before;
  };
  // Per layer: qkv (from ln_1), MLP up (ln_2), MLP down (the GELU).
  EXPECT_EQ(reused("fused,fp8", "none"), 3 * cfg.n_layer);
  EXPECT_EQ(reused("fused,fp8_all", "none"), 3 * cfg.n_layer);  // the attention output comes from SDPA
  // The MLP's forward runs twice with its activations recomputed, and takes them both times.
  EXPECT_EQ(reused("fused,fp8", "mlp"), 5 * cfg.n_layer);
  EXPECT_EQ(reused("fused", "none"), 0);
  EXPECT_EQ(reused("weights,fp8", "none"), cfg.n_layer);  // no norm kernel: only the GELU's
}
