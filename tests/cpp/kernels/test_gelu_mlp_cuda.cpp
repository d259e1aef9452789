// The MLP's cuBLASLt GEMMs with the GELU in their epilogues (kernels/gelu_mlp_cuda.h)
// on a GPU: the epilogue's GELU and GELU derivative element by element against the
// float64 tanh formula (and not erf's), the two fused GEMMs against their ATen twins
// and the whole function against the float64 formula at the widths of 124M and
// 0.7B, and the model with the gelu kernel against the model without it. Skipped
// without CUDA; the CPU side is test_gelu_mlp.cpp.
#include "gelu_reference.h"
#include "helpers.h"
#include "kernels/common.h"
#include "kernels/gelu_mlp.h"
#include "kernels/gelu_mlp_cuda.h"
#include "live_head.h"
#include "model/gpt.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace xsagpt;

namespace {

bool no_gelu_gpu() { return !torch::cuda::is_available() || !cuda_kernels_built(); }
#define SKIP_WITHOUT_GELU_GPU() \
  if (no_gelu_gpu()) GTEST_SKIP() << "no CUDA device or no CUDA kernels in this build"

const torch::Device kGeluGpu(torch::kCUDA, 0);
const auto kBf16Gpu = torch::TensorOptions().device(kGeluGpu).dtype(torch::kBFloat16);

// Largest error relative to the reference's largest magnitude.
double gelu_rel_err(const torch::Tensor& got, const torch::Tensor& want) {
  const auto g = got.to(torch::kCPU, torch::kFloat64), w = want.to(torch::kCPU, torch::kFloat64);
  EXPECT_EQ(g.sizes(), w.sizes());
  return (g - w).abs().max().item<double>() / std::max(1e-30, w.abs().max().item<double>());
}

}  // namespace

// One-hot rows make each pre-activation a single bf16 weight, exact in float32
// accumulation, so the epilogue's GELU is seen alone, over [-4, 4]. Element by
// element it is the float64 tanh formula to bf16's rounding (2^-8 relative) plus
// 1e-3 absolute: a hardware tanh good to about 2^-11, times |x|/2 <= 2, where
// 1 + tanh(u) cancels in the negative tail. That bound cannot tell erf's GELU from
// tanh's (they differ by at most 5e-4), so the mean distance over the tail
// [-4, -2], where erf's is 1e-4 to 4e-4 away, must be far nearer tanh's.
// Backward the same with one-hot incoming gradients: dpre = w2 * gelu'(pre).
TEST(GeluMlpCuda, EpilogueIsTheTanhGeluAndItsDerivativeElementByElement) {
  SKIP_WITHOUT_GELU_GPU();
  const int64_t N = 64, d = 64, H = 256;
  torch::manual_seed(31);
  auto values = torch::linspace(-4.0, 4.0, H * d).to(torch::kBFloat16).view({H, d});
  auto w1c = values.index({torch::randperm(H)}).to(kGeluGpu);  // rows shuffled: no structure to lean on
  auto idx = torch::randint(0, d, {N}, torch::kLong);
  auto x2 = torch::nn::functional::one_hot(idx, d).to(kBf16Gpu);
  auto pre = torch::empty({N, H}, kBf16Gpu), h = torch::empty({N, H}, kBf16Gpu);
  gelu_up_cuda(x2, w1c, {}, pre, h);
  const auto p64 = w1c.cpu().index({torch::indexing::Slice(), idx}).t().to(torch::kFloat64);  // (N, H)
  ASSERT_TRUE(torch::equal(pre.to(torch::kFloat64).cpu(), p64));                              // one product each: exact
  const auto want_h = test::tanh_gelu_f64(p64), erf_h = torch::gelu(p64);
  const auto h64 = h.to(torch::kFloat64).cpu();
  EXPECT_TRUE(((h64 - want_h).abs() <= want_h.abs() * std::ldexp(1.0, -8) + 1e-3).all().item<bool>())
      << "max |h - tanh formula| " << (h64 - want_h).abs().max().item<double>();
  const auto tail = (p64 >= -4.0) & (p64 <= -2.0);
  ASSERT_GT(tail.sum().item<int64_t>(), 100);
  const double to_tanh = (h64 - want_h).abs().masked_select(tail).mean().item<double>();
  const double to_erf = (h64 - erf_h).abs().masked_select(tail).mean().item<double>();
  ASSERT_GT((erf_h - want_h).abs().masked_select(tail).mean().item<double>(), 1e-4);
  EXPECT_LT(to_tanh, 0.25 * to_erf) << "mean distance over [-4, -2]: to tanh's GELU " << to_tanh << ", to erf's "
                                    << to_erf;

  // Backward: g2 one-hot over d, w2c (d, H) random bf16: dh = w2c[j, :] exactly.
  auto jdx = torch::randint(0, d, {N}, torch::kLong);
  auto g2 = torch::nn::functional::one_hot(jdx, d).to(kBf16Gpu);
  auto w2c = torch::randn({d, H}, kBf16Gpu);
  auto dpre = torch::empty({N, H}, kBf16Gpu), db1 = torch::empty({H}, kBf16Gpu);
  dgelu_down_cuda(g2, w2c, pre, dpre, db1);
  const auto dh64 = w2c.to(torch::kFloat64).cpu().index({jdx});
  const auto want_dpre = dh64 * test::tanh_gelu_grad_f64(p64);
  const auto dpre64 = dpre.to(torch::kFloat64).cpu();
  const auto bound = want_dpre.abs() * std::ldexp(1.0, -8) + 2e-3 * dh64.abs() + 1e-6;
  EXPECT_TRUE(((dpre64 - want_dpre).abs() <= bound).all().item<bool>())
      << "max |dpre - formula| " << (dpre64 - want_dpre).abs().max().item<double>();
  // The bias gradient is the sum of dpre over the rows (one bf16 rounding of it).
  EXPECT_LT(gelu_rel_err(db1, dpre64.sum(0)), 1e-2);
}

class GeluMlpCudaWidths : public ::testing::TestWithParam<std::tuple<int64_t, bool>> {};  // d_model, bias

// The two fused GEMMs against their ATen twins on the GPU (the same bf16 operands,
// float32 accumulation in both; they differ by the GEMMs' summation order and by
// where the GELU's input is rounded to bf16: at most a few bf16 roundings, 2^-9
// relative each, of the largest element), then the whole function, every gradient,
// against the float64 formula on the same bf16 operands. 384 tokens.
TEST_P(GeluMlpCudaWidths, FusedGemmsEqualTheTwinAndTheFunctionTheFloat64Formula) {
  SKIP_WITHOUT_GELU_GPU();
  const auto [d, bias] = GetParam();
  const int64_t H = 4 * d, N = 384;
  torch::manual_seed(32);
  auto x2 = torch::randn({N, d}, kBf16Gpu);
  auto w1c = (torch::randn({H, d}, kBf16Gpu.dtype(torch::kFloat32)) * (2.0 / std::sqrt(d))).to(torch::kBFloat16);
  auto w2c = (torch::randn({d, H}, kBf16Gpu.dtype(torch::kFloat32)) / std::sqrt(H)).to(torch::kBFloat16);
  auto b1c = bias ? (torch::randn({H}, kBf16Gpu) * 0.5) : torch::Tensor();
  ASSERT_TRUE(gelu_mlp_cuda_fits(x2, w1c, w2c));

  auto pre = torch::empty({N, H}, kBf16Gpu), h = torch::empty({N, H}, kBf16Gpu);
  gelu_up_cuda(x2, w1c, b1c, pre, h);
  auto [rpre, rh] = gelu_up_aten(x2, w1c, b1c);
  ASSERT_GT(rpre.abs().max().item<float>(), 2.0f);  // GELU's curved part is reached
  EXPECT_LT(gelu_rel_err(pre, rpre), 1e-2);
  EXPECT_LT(gelu_rel_err(h, rh), 1e-2);

  auto g2 = torch::randn({N, d}, kBf16Gpu);
  auto dpre = torch::empty({N, H}, kBf16Gpu), db1 = bias ? torch::empty({H}, kBf16Gpu) : torch::Tensor();
  dgelu_down_cuda(g2, w2c, rpre, dpre, db1);
  auto rdpre = dgelu_down_aten(g2, w2c, rpre);
  EXPECT_LT(gelu_rel_err(dpre, rdpre), 1e-2);
  if (bias) EXPECT_LT(gelu_rel_err(db1, rdpre.sum(0, false, torch::kFloat32)), 1e-2);

  // The autograd function: float32 master weights and biases, bf16 copies.
  auto x = x2.view({2, N / 2, d}).clone().requires_grad_(true);
  auto w1 = w1c.to(torch::kFloat32).requires_grad_(true), w2 = w2c.to(torch::kFloat32).requires_grad_(true);
  auto b1 = bias ? b1c.to(torch::kFloat32).requires_grad_(true) : torch::Tensor();
  auto b2 = bias ? torch::randn({d}, kBf16Gpu.dtype(torch::kFloat32)).requires_grad_(true) : torch::Tensor();
  auto y = gelu_mlp(x, w1, w1c, b1, w2, w2c, b2);
  auto g = g2.view({2, N / 2, d});
  y.backward(g);
  const auto ref = test::mlp_formula(x.detach().cpu(), w1c.cpu(), bias ? b1c.cpu() : torch::Tensor(), w2c.cpu(),
                                     bias ? b2.detach().to(torch::kBFloat16).cpu() : torch::Tensor(), g.cpu());
  EXPECT_LT(gelu_rel_err(y, ref.y), 1e-2) << "y";
  EXPECT_LT(gelu_rel_err(x.grad(), ref.dx), 1e-2) << "dx";
  EXPECT_EQ(w1.grad().scalar_type(), torch::kFloat32);
  EXPECT_LT(gelu_rel_err(w1.grad(), ref.dw1), 1e-2) << "dW1";
  EXPECT_LT(gelu_rel_err(w2.grad(), ref.dw2), 1e-2) << "dW2";
  if (bias) {
    EXPECT_LT(gelu_rel_err(b1.grad(), ref.db1), 1e-2) << "db1";
    EXPECT_LT(gelu_rel_err(b2.grad(), ref.db2), 1e-2) << "db2";
  }
}

INSTANTIATE_TEST_SUITE_P(GeluMlpCuda, GeluMlpCudaWidths,
                         ::testing::Combine(::testing::Values(int64_t{768}, int64_t{1536}), ::testing::Bool()));

// The model on a GPU in bf16, a tanh model: "fused,gelu" against "fused" (the same
// function, the MLP's GELU moved into its GEMMs), as the whole-model test compares
// "fused" with "aten"; with and without biases.
TEST(GeluMlpCuda, ModelWithTheGeluKernelMatchesFusedInBf16) {
  SKIP_WITHOUT_GELU_GPU();
  for (bool bias : {false, true}) {
    SCOPED_TRACE(bias ? "bias" : "no bias");
    auto cfg = test::small_model("xsa", 512);
    cfg.d_model = 128;
    cfg.n_head = 2;
    cfg.head_dim = 64;
    cfg.block_size = 128;
    cfg.bias = bias;
    cfg.gelu = GeluKind::kTanh;
    auto idx = torch::randint(0, cfg.vocab_size, {4, 128}, torch::TensorOptions().device(kGeluGpu).dtype(torch::kLong));
    auto run = [&](const std::string& kernels) {
      torch::manual_seed(33);
      GPT m(cfg);
      test::randomize_head(m);
      m->to(kGeluGpu);
      m->set_runtime(test::runtime("none", 0, kernels, true, /*bf16=*/true));
      auto loss = m->forward(idx, idx).loss;
      (loss / 3.0).backward();
      return std::pair{loss.item<double>(), test::gradients(m)};
    };
    auto [lf, gf] = run("fused");
    test::assert_live(gf);
    for (const char* kernels : {"fused,gelu", "gelu"}) {
      SCOPED_TRACE(kernels);
      auto [lg, gg] = run(kernels);
      EXPECT_NEAR(lg, lf, 0.01);
      for (const auto& [name, g] : gf) {
        ASSERT_TRUE(gg.at(name).defined()) << name;
        const double rel = (gg.at(name) - g).norm().item<double>() / std::max(1e-12, g.norm().item<double>());
        EXPECT_LT(rel, 0.05) << name;
      }
    }
  }
}
