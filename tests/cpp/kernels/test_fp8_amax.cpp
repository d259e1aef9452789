// The amaxes FP8 products take from the kernels that made their operands
// (kernels/amax_handoff.h), on the CPU through the kernels' ATen twins: each
// producer's amax (the norm's output and its branch's gradient, the exact GELU's
// output and its input's gradient, RoPE's qkv gradient) is max |t| of t as stored,
// after its rounding (an amax taken before the rounding differs, and is shown to); a
// quantization given that amax is bit for bit the one that reduces it itself; the
// handoff gives it only to that very tensor, unmodified, once; and the model routes
// one to every FP8 product's input and output gradient that a norm, the GELU or
// RoPE makes, forward and backward, with and without recomputation.
// (On CUDA: test_fp8_cuda.cpp.)
#include "helpers.h"
#include "kernels/add_norm.h"
#include "kernels/amax_handoff.h"
#include "kernels/fp8_linear.h"
#include "kernels/gelu_amax.h"
#include "kernels/rope_qkv.h"
#include "model/gpt.h"
#include "model/rope.h"

#include <gtest/gtest.h>

using namespace xsagpt;

namespace {

torch::Tensor amax_of(const torch::Tensor& t) { return t.abs().max().to(torch::kFloat); }

bool same_fp8(const Fp8Tensor& a, const Fp8Tensor& b) {
  auto bits = [](const torch::Tensor& q) { return q.view(torch::kUInt8); };
  return torch::equal(bits(a.q), bits(b.q)) && torch::equal(a.inv, b.inv) &&
         (!a.qt.defined() || torch::equal(bits(a.qt), bits(b.qt)));
}

// What a backward left handed over and not taken (the product that would take it
// is not there), emptying the slot.
AmaxSlot left_over() {
  auto s = save_amax_slot();
  restore_amax_slot({});
  return s;
}

}  // namespace

TEST(Fp8Amax, AGivenAmaxQuantizesBitForBitAsTheReductionDoes) {
  torch::manual_seed(3);
  const auto t = (torch::randn({48, 64}) * 3).to(torch::kBFloat16);
  for (auto fmt : {kFp8Forward, kFp8Backward}) {
    const auto own = quantize_fp8(t, fmt, /*transposed=*/true);
    EXPECT_TRUE(same_fp8(quantize_fp8(t, fmt, /*transposed=*/true, amax_of(t)), own));
    // The amax is used, not recomputed: a larger one scales everything down.
    EXPECT_FALSE(same_fp8(quantize_fp8(t, fmt, /*transposed=*/true, 2 * amax_of(t)), own));
  }
  EXPECT_THROW(quantize_fp8(t, kFp8Forward, false, torch::zeros({2})), c10::Error);
  EXPECT_THROW(quantize_fp8(t, kFp8Forward, false, torch::zeros({}, torch::kDouble)), c10::Error);
}

TEST(Fp8Amax, TheNormHandsOverItsOutputsAndItsBranchGradientsAmax) {
  torch::manual_seed(4);
  const int64_t d = 96;
  const auto x = torch::randn({5, 7, d}) * 2, w = torch::rand({d}) + 0.5, b = torch::randn({d});
  for (bool with_branch : {true, false}) {
    SCOPED_TRACE(with_branch ? "with a branch" : "no branch");
    auto branch = with_branch ? torch::randn({5, 7, d}).to(torch::kBFloat16).requires_grad_(true) : torch::Tensor();
    const auto [x_out, h] =
        add_layer_norm(x, branch, w, b, 1e-5, torch::kBFloat16, {.output = true, .input_grad = true});
    const auto before = amax_handovers_taken();
    const auto amax = take_amax(h);
    ASSERT_TRUE(amax.defined());
    EXPECT_EQ(amax_handovers_taken(), before + 1);
    EXPECT_TRUE(torch::equal(amax, amax_of(h)));
    // Before the rounding to bf16 the maximum is another number: an amax taken
    // there would not be the cast's.
    const auto xo = with_branch ? x + branch.detach().to(torch::kFloat) : x;
    ASSERT_FALSE(torch::equal(amax_of(torch::layer_norm(xo, {d}, w, b, 1e-5)), amax_of(h)));
    // Without an amax asked for, the same h, and nothing handed over.
    EXPECT_TRUE(torch::equal(add_layer_norm(x, branch, w, b, 1e-5, torch::kBFloat16).second, h));
    EXPECT_FALSE(take_amax(h).defined());
    if (!with_branch) continue;
    // Backward: the branch's gradient (in bf16, as the branch) and its amax.
    h.backward(torch::randn({5, 7, d}).to(torch::kBFloat16));
    const auto slot = left_over();
    ASSERT_TRUE(slot.of.defined());
    EXPECT_TRUE(torch::equal(slot.of, branch.grad()));
    EXPECT_TRUE(torch::equal(slot.amax, amax_of(branch.grad())));
  }
}

TEST(Fp8Amax, TheExactGeluIsAtensWithItsOutputsAndItsGradientsAmax) {
  torch::manual_seed(5);
  for (auto dtype : {torch::kBFloat16, torch::kFloat32}) {
    const auto x0 = (torch::randn({6, 40}) * 3).to(dtype);
    auto x = x0.clone().requires_grad_(true), xr = x0.clone().requires_grad_(true);
    const auto h = exact_gelu(x, {.output = true, .input_grad = true});
    const auto ref = torch::gelu(xr);
    EXPECT_TRUE(torch::equal(h, ref));
    EXPECT_TRUE(torch::equal(take_amax(h), amax_of(ref)));
    const auto g = torch::randn({6, 40}).to(dtype);
    h.backward(g);
    ref.backward(g);
    ASSERT_GT(xr.grad().abs().sum().item<double>(), 0);
    EXPECT_TRUE(torch::equal(x.grad(), xr.grad()));
    const auto slot = left_over();
    EXPECT_TRUE(torch::equal(slot.of, x.grad()));
    EXPECT_TRUE(torch::equal(slot.amax, amax_of(x.grad())));
  }
}

TEST(Fp8Amax, RopesBackwardHandsOverTheQkvGradientsAmax) {
  torch::manual_seed(6);
  const int64_t B = 2, T = 5, H = 3, D = 8;
  auto qkv = (torch::randn({B, T, 3 * H * D}) * 2).to(torch::kBFloat16).requires_grad_(true);
  auto [cos, sin] = rope_tables(T, D, 10000.0);
  auto [q, k, v] = rope_qkv(qkv, H, D, cos, sin, /*qkv_grad_amax=*/true);
  (q.to(torch::kFloat).pow(2).sum() + k.to(torch::kFloat).sum() * 3 + v.to(torch::kFloat).pow(3).sum()).backward();
  const auto slot = left_over();
  ASSERT_TRUE(slot.of.defined());
  EXPECT_TRUE(torch::equal(slot.of, qkv.grad()));
  EXPECT_TRUE(torch::equal(slot.amax, amax_of(qkv.grad())));
}

TEST(Fp8Amax, TheHandoffGivesTheAmaxOnlyToTheTensorItWasTakenOf) {
  torch::manual_seed(7);
  const auto w = torch::randn({32, 64}) * 0.1;
  const auto w8 = quantize_fp8(w, kFp8Forward, /*transposed=*/true);
  const auto h = (torch::randn({16, 64}) * 2).to(torch::kBFloat16);
  auto product = [&](const torch::Tensor& x) {
    const auto before = amax_handovers_taken();
    auto y = fp8_linear(x, w, w8, {}, torch::kBFloat16);
    return std::pair{y, amax_handovers_taken() - before};
  };
  const auto fresh = product(h).first;
  // A visible mistake (not a power of 2, which would shift every exponent alike and
  // round nothing differently).
  const auto wrong = 3 * amax_of(h);
  // Taken: the handed-over amax is what the quantization used.
  hand_over_amax(h, wrong);
  auto [y_wrong, n] = product(h);
  EXPECT_EQ(n, 1);
  EXPECT_FALSE(torch::equal(y_wrong, fresh));
  hand_over_amax(h, amax_of(h));
  EXPECT_TRUE(torch::equal(product(h).first, fresh));
  // Once: the slot is empty after its product.
  hand_over_amax(h, wrong);
  product(h);
  EXPECT_EQ(product(h).second, 0);
  // Not for a view of it, nor for another tensor of the same values.
  hand_over_amax(h, wrong);
  auto [y_view, n_view] = product(h.view({4, 4, 64}));
  EXPECT_EQ(n_view, 0);
  EXPECT_TRUE(torch::equal(y_view.view({16, 32}), fresh));
  hand_over_amax(h, wrong);
  EXPECT_EQ(product(h.clone()).second, 0);
  // Not once the tensor changed in place after its producer measured it.
  auto h2 = h.clone();
  hand_over_amax(h2, amax_of(h2));
  h2.mul_(3);
  auto [y_changed, n_changed] = product(h2);
  EXPECT_EQ(n_changed, 0);
  EXPECT_TRUE(torch::equal(y_changed, product(h2.clone()).first));
  // The backward takes the output gradient's amax the same way.
  auto x = h.clone().requires_grad_(true);
  auto y = fp8_linear(x, w, w8, {}, torch::kBFloat16);
  const auto gy = torch::randn({16, 32}).to(torch::kBFloat16);
  const auto before = amax_handovers_taken();
  hand_over_amax(gy, amax_of(gy));
  y.backward(gy);
  EXPECT_EQ(amax_handovers_taken(), before + 1);
}

TEST(Fp8Amax, TheModelHandsAnAmaxToEveryFp8OperandANormTheGeluOrRopeMakes) {
  auto cfg = test::small_model("sa", 64);
  cfg.n_layer = 2;
  cfg.d_model = 1536;  // 0.7B's width: fp8's filter takes the qkv and MLP products, not the attention output
  cfg.n_head = 2;
  cfg.head_dim = 768;
  const auto idx = torch::randint(0, cfg.vocab_size, {1, 8}, torch::kLong);
  torch::manual_seed(9);
  GPT m(cfg);
  auto taken = [&](const std::string& kernels, const std::string& recompute) {
    m->set_runtime(test::runtime(recompute, 0, kernels, false, /*bf16=*/true));
    m->zero_grad();
    const auto before = amax_handovers_taken();
    m->forward(idx, idx).loss.backward();
    return (amax_handovers_taken() - before) / cfg.n_layer;
  };
  // Per layer, forward: qkv's input (ln_1), MLP up's (ln_2), MLP down's (the GELU);
  // backward: MLP down's output gradient (the next norm's backward), MLP up's (the
  // GELU's), qkv's (RoPE's).
  EXPECT_EQ(taken("fused,fp8", "none"), 6);
  // fp8_all adds the attention output's gradient (ln_2's backward); its input comes from SDPA.
  EXPECT_EQ(taken("fused,fp8_all", "none"), 7);
  // Recomputing the MLP replays its two forward products in the backward, and the
  // gradient handed over for the MLP's output waits through the replay.
  EXPECT_EQ(taken("fused,fp8", "mlp"), 8);
  // Without the norm and RoPE kernels only the GELU's two remain.
  EXPECT_EQ(taken("weights,fp8", "none"), 2);
  EXPECT_EQ(taken("fused", "none"), 0);
}
