// The fused CUDA kernels of kernels/xsa_cuda.cu against XSA's formula evaluated in
// float64 on the CPU (forward, and backward through autograd of ordinary ops), on
// inputs laid out as the model hands them over: y a transposed view of a
// (B, T, H, D) buffer, v a strided view into the fused qkv projection. Head sizes
// that are and are not multiples of a warp, a zero value vector, a per-head gate,
// float32 and bf16. Skipped without a CUDA device.
#include "config/model_config.h"
#include "helpers.h"
#include "kernels/common.h"
#include "kernels/xsa_cuda.h"
#include "live_head.h"
#include "model/gpt.h"
#include "model/xsa.h"

#include <gtest/gtest.h>
#include <torch/cuda.h>

using namespace xsagpt;

namespace {

bool no_cuda_kernels() { return !torch::cuda::is_available() || !cuda_kernels_built(); }

double rel_norm_err(const torch::Tensor& got, const torch::Tensor& ref) {
  return ((got.cpu().to(torch::kFloat64) - ref).norm() / ref.norm()).item<double>();
}

struct Inputs {
  torch::Tensor y, v;  // (B, H, T, D) views on the GPU
};

// y: transposed view of a contiguous (B, T, H, D) tensor, as flash attention returns
// it; v: the third chunk of a (B, T, 3 H D) projection, viewed as heads. Misaligned:
// both start one element into their buffers, so no row is 16-byte aligned and the
// kernels take their element-by-element layout instead of 16-byte accesses.
Inputs model_layout(int64_t B, int64_t H, int64_t T, int64_t D, torch::ScalarType dtype, bool misaligned = false) {
  auto opts = torch::TensorOptions().device(torch::kCUDA).dtype(dtype);
  const int64_t o = misaligned ? 1 : 0;
  auto y = torch::randn({B, T, H * D + o}, opts).narrow(-1, o, H * D).view({B, T, H, D}).transpose(1, 2);
  auto qkv = torch::randn({B, T, 3 * H * D + o}, opts).narrow(-1, o, 3 * H * D);
  auto v = qkv.chunk(3, -1)[2].view({B, T, H, D}).transpose(1, 2);
  v.select(2, 1).select(1, 0).zero_();  // one zero value vector: z = y there, gradients finite
  return {y, v};
}

torch::Tensor reference_z(const torch::Tensor& y, const torch::Tensor& v, const torch::Tensor& gate, double eps) {
  auto y64 = y.cpu().to(torch::kFloat64), v64 = v.cpu().to(torch::kFloat64);
  auto p = (y64 * v64).sum(-1, true) / (v64 * v64).sum(-1, true).clamp_min(eps * eps);
  if (gate.defined()) p = p * gate.cpu().to(torch::kFloat64).view({-1, 1, 1});
  return y64 - p * v64;
}

}  // namespace

TEST(XsaCuda, ForwardMatchesFloat64FormulaInEveryLayout) {
  if (no_cuda_kernels()) GTEST_SKIP() << "no CUDA device or no CUDA kernels in this build";
  torch::manual_seed(0);
  for (bool wide : {false, true})  // "xsa" (element by element) and "xsa_wide" (16-byte vectors)
    for (auto dtype : {torch::kFloat32, torch::kBFloat16})
      for (int64_t D : {64, 80, 128, 256})
        for (int variant = 0; variant < 3; ++variant) {  // plain, gated, misaligned
          const bool gated = variant == 1, misaligned = variant == 2;
          SCOPED_TRACE(fmt::format("wide {}, dtype {}, D {}, gated {}, misaligned {}", wide, c10::toString(dtype), D,
                                   gated, misaligned));
          auto [y, v] = model_layout(2, 3, 37, D, dtype, misaligned);
          torch::Tensor gate;
          if (gated) gate = torch::tanh(torch::randn({3}, torch::kCUDA)).view({3, 1, 1});
          auto z = exclude_self_value_fused(y, v, 1e-6, gate, wide);
          EXPECT_EQ(z.scalar_type(), dtype);
          EXPECT_TRUE(z.isfinite().all().item<bool>());
          EXPECT_LT(rel_norm_err(z, reference_z(y, v, gate, 1e-6)), dtype == torch::kFloat32 ? 1e-6 : 1e-2);
          // z is laid out like y: back to (B, T, H*D) without a copy.
          if (!misaligned) {
            EXPECT_TRUE(z.transpose(1, 2).is_contiguous());
          }
        }
}

TEST(XsaCuda, BackwardMatchesFloat64Autograd) {
  if (no_cuda_kernels()) GTEST_SKIP() << "no CUDA device or no CUDA kernels in this build";
  torch::manual_seed(1);
  for (bool wide : {false, true})
    for (auto dtype : {torch::kFloat32, torch::kBFloat16})
      for (int64_t D : {64, 80, 128, 256})
        for (int variant = 0; variant < 3; ++variant) {  // plain, gated, misaligned
          const bool gated = variant == 1, misaligned = variant == 2;
          SCOPED_TRACE(fmt::format("wide {}, dtype {}, D {}, gated {}, misaligned {}", wide, c10::toString(dtype), D,
                                   gated, misaligned));
          auto [y0, v0] = model_layout(2, 3, 29, D, dtype, misaligned);
          auto y = y0.detach().requires_grad_(true), v = v0.detach().requires_grad_(true);
          torch::Tensor gate;
          if (gated) gate = (0.5 * torch::randn({3, 1, 1}, torch::kCUDA)).requires_grad_(true);
          auto g = torch::randn(y.sizes(), y.options());
          exclude_self_value_fused(y, v, 1e-6, gated ? torch::tanh(gate) : torch::Tensor(), wide).backward(g);

          auto y64 = y0.detach().cpu().to(torch::kFloat64).requires_grad_(true);
          auto v64 = v0.detach().cpu().to(torch::kFloat64).requires_grad_(true);
          torch::Tensor gate64;
          if (gated) gate64 = gate.detach().cpu().to(torch::kFloat64).requires_grad_(true);
          exclude_self_value_autograd(y64, v64, 1e-6, gated ? torch::tanh(gate64) : torch::Tensor())
              .backward(g.cpu().to(torch::kFloat64));
          const double tol = dtype == torch::kFloat32 ? 1e-5 : 2e-2;
          EXPECT_LT(rel_norm_err(y.grad(), y64.grad()), tol);
          EXPECT_LT(rel_norm_err(v.grad(), v64.grad()), tol);
          if (gated) {
            EXPECT_LT(rel_norm_err(gate.grad(), gate64.grad()), tol);
          }
        }
}

// The whole model with train.kernels "xsa" and "xsa_wide" against ATen's ops on the same GPU.
TEST(XsaCuda, ModelWithFusedKernelsMatchesOps) {
  if (no_cuda_kernels()) GTEST_SKIP() << "no CUDA device or no CUDA kernels in this build";
  for (const char* kernels : {"xsa", "xsa_wide"}) {
    SCOPED_TRACE(kernels);
    auto cfg = test::small_model("xsa");
    cfg.dropout = 0.0;
    cfg.set_attention("xsa", {{"xsa_gate", "xsa"}});
    cfg.n_sink = 2;
    torch::manual_seed(2);
    GPT ops(cfg), fused(cfg);
    test::randomize_head(ops);  // copied below; a zero head leaves every gradient below it 0
    {
      torch::NoGradGuard g;
      auto src = ops->named_parameters();
      for (auto& p : fused->named_parameters()) p.value().copy_(src[p.key()]);
    }
    ops->to(torch::kCUDA);
    fused->to(torch::kCUDA);
    fused->set_runtime(test::runtime("none", 0, kernels, /*cuda=*/true));
    auto idx = torch::randint(0, cfg.vocab_size, {3, cfg.block_size},
                              torch::TensorOptions().device(torch::kCUDA).dtype(torch::kLong));
    auto lo = ops->forward(idx, idx).loss, lf = fused->forward(idx, idx).loss;
    lo.backward();
    lf.backward();
    EXPECT_NEAR(lo.item<double>(), lf.item<double>(), 1e-5);
    test::assert_live(test::gradients(ops));  // the gate and sinks included
    auto po = ops->named_parameters();
    for (const auto& p : fused->named_parameters()) {
      SCOPED_TRACE(p.key());
      ASSERT_TRUE(p.value().grad().defined());
      EXPECT_TRUE(torch::allclose(p.value().grad(), po[p.key()].grad(), 1e-4, 1e-6));
    }
  }
}

// Without CUDA the fused entry point is exactly the ops one (what CPU runs use).
TEST(XsaCuda, FusedEntryPointOnCpuIsTheOpsFunction) {
  torch::manual_seed(3);
  auto y = torch::randn({2, 3, 8, 16}).requires_grad_(true), v = torch::randn({2, 3, 8, 16}).requires_grad_(true);
  auto g = torch::randn({2, 3, 8, 16});
  auto z1 = exclude_self_value_fused(y, v, 1e-6);
  z1.backward(g);
  auto dy1 = y.grad().clone(), dv1 = v.grad().clone();
  y.mutable_grad().reset(), v.mutable_grad().reset();
  auto z2 = exclude_self_value(y, v, 1e-6);
  z2.backward(g);
  EXPECT_TRUE(torch::equal(z1, z2));
  EXPECT_TRUE(torch::equal(dy1, y.grad()));
  EXPECT_TRUE(torch::equal(dv1, v.grad()));
}
