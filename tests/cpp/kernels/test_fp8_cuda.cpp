// The fp8 kernel on a GPU (cuBLASLt's FP8 GEMMs through at::_scaled_mm): the
// linear layer's forward and backward against the float64 reference of the same
// arithmetic (fp8_reference.h), the refusal for this GPU's dimensions, and a
// short training run against bf16's. These run on a GPU of compute capability 8.9
// or newer and skip elsewhere; the same checks on the CPU are in test_fp8.cpp.
#include "fp8_reference.h"
#include "helpers.h"
#include "kernels/amax_handoff.h"
#include "kernels/fp8_linear.h"
#include "kernels/gelu_amax.h"
#include "model/gpt.h"
#include "step_rig.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#ifdef XSAGPT_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

using namespace xsagpt;

namespace {

const torch::Device kFp8Cuda(torch::kCUDA, 0);

bool no_fp8_gpu() { return !torch::cuda::is_available() || !fp8_refusal(kFp8Cuda, {}, "k").empty(); }
#define SKIP_WITHOUT_FP8_GPU() \
  if (no_fp8_gpu()) GTEST_SKIP() << "no CUDA device of compute capability 8.9 or newer"

}  // namespace

// The quantizer's CUDA kernel against its ATen twin on the CPU: the same FP8
// values bit for bit and the same scale, for both formats and the three input
// dtypes, at sizes that take the 8-wide path and the element-by-element one.
TEST(Fp8LinearCuda, QuantizeKernelEqualsTheAtenTwin) {
  SKIP_WITHOUT_FP8_GPU();
  for (const auto fmt : {kFp8Forward, kFp8Backward}) {
    for (const auto dtype : {torch::kFloat32, torch::kBFloat16, torch::kFloat16}) {
      for (const int64_t cols : {768, 37}) {
        SCOPED_TRACE(std::string(c10::toString(fmt)) + " from " + c10::toString(dtype) + ", " + std::to_string(cols) +
                     " columns");
        torch::manual_seed(5);
        const auto t = (torch::randn({33, cols}) * 3e-3).to(dtype);
        const auto got = quantize_fp8(t.to(kFp8Cuda), fmt);
        const auto want = quantize_fp8(t, fmt);
        ASSERT_TRUE(got.q.is_cuda());
        EXPECT_TRUE(torch::equal(got.q.cpu().to(torch::kFloat32), want.q.to(torch::kFloat32)));
        EXPECT_EQ(got.inv.item<float>(), want.inv.item<float>());
      }
    }
  }
}

// The cast-and-transpose kernel against its ATen twin (the cast, then a strided
// copy) on the CPU: q and qt the same bits, for both formats and the three input
// dtypes, at a shape whose rows and columns fill whole 64 x 64 tiles, one that
// leaves partial tiles on both edges, and the 0.7B model's MLP input (a micro-step's
// 8 x 2048 tokens would make it a long test; 2048 rows take every row of the grid's code).
TEST(Fp8LinearCuda, CastTransposeKernelEqualsTheAtenTwin) {
  SKIP_WITHOUT_FP8_GPU();
  struct Shape {
    int64_t rows, cols;
  };
  for (const auto fmt : {kFp8Forward, kFp8Backward}) {
    for (const auto dtype : {torch::kFloat32, torch::kBFloat16, torch::kFloat16}) {
      for (const auto s : {Shape{128, 192}, Shape{80, 37}, Shape{2048, 1536}}) {
        SCOPED_TRACE(std::string(c10::toString(fmt)) + " from " + c10::toString(dtype) + ", " + std::to_string(s.rows) +
                     " x " + std::to_string(s.cols));
        torch::manual_seed(6);
        const auto t = (torch::randn({s.rows, s.cols}) * 3e-3).to(dtype);
        const auto got = quantize_fp8(t.to(kFp8Cuda), fmt, /*transposed=*/true);
        const auto want = quantize_fp8(t, fmt, /*transposed=*/true);
        ASSERT_TRUE(got.qt.is_cuda());
        ASSERT_EQ(got.qt.sizes(), want.qt.sizes());
        ASSERT_TRUE(got.qt.is_contiguous());
        EXPECT_TRUE(torch::equal(got.q.cpu().to(torch::kFloat32), want.q.to(torch::kFloat32)));
        EXPECT_TRUE(torch::equal(got.qt.cpu().to(torch::kFloat32), want.qt.to(torch::kFloat32)));
        EXPECT_EQ(got.inv.item<float>(), want.inv.item<float>());
      }
    }
  }
}

// The scale computed inside the cast kernels from an amax handed in (the one a
// producer took): the same bits and inverse scale as the twin given that amax, and
// an all-zero tensor's amax of 0 lifted to the floor (finite scale, zeros).
TEST(Fp8LinearCuda, CastWithAGivenAmaxEqualsTheAtenTwin) {
  SKIP_WITHOUT_FP8_GPU();
  for (const auto fmt : {kFp8Forward, kFp8Backward}) {
    for (const bool zero : {false, true}) {
      SCOPED_TRACE(std::string(c10::toString(fmt)) + (zero ? ", all zero" : ""));
      torch::manual_seed(7);
      const auto t =
          zero ? torch::zeros({96, 80}, torch::kBFloat16) : (torch::randn({96, 80}) * 5).to(torch::kBFloat16);
      const auto amax = t.abs().max().to(torch::kFloat);
      for (const bool transposed : {false, true}) {
        const auto got = quantize_fp8(t.to(kFp8Cuda), fmt, transposed, amax.to(kFp8Cuda));
        const auto want = quantize_fp8(t, fmt, transposed, amax);
        EXPECT_TRUE(torch::equal(got.q.cpu().to(torch::kFloat32), want.q.to(torch::kFloat32)));
        if (transposed) EXPECT_TRUE(torch::equal(got.qt.cpu().to(torch::kFloat32), want.qt.to(torch::kFloat32)));
        EXPECT_EQ(got.inv.item<float>(), want.inv.item<float>());
        EXPECT_TRUE(std::isfinite(got.inv.item<float>()));
      }
    }
  }
}

// The exact GELU's kernels, which also raise the amax of what they write for the
// FP8 products around the MLP's activation: h and x's gradient as ATen's GELU and
// its backward compute them (the same float32 formulas) and each amax max |t| of t
// as stored, exactly, for the three dtypes, on the 8-wide path and the element by
// element one, with several blocks' warps raising one amax.
TEST(Fp8LinearCuda, GeluKernelsAreAtensGeluWithTheAmaxOfWhatTheyWrite) {
  SKIP_WITHOUT_FP8_GPU();
  for (const auto dtype : {torch::kFloat32, torch::kBFloat16, torch::kFloat16}) {
    for (const int64_t n : {4096 * 768, 1001}) {
      SCOPED_TRACE(std::string(c10::toString(dtype)) + ", " + std::to_string(n) + " elements");
      torch::manual_seed(8);
      auto opts = torch::TensorOptions().device(kFp8Cuda);
      auto x = (torch::randn({n}, opts) * 3).to(dtype).requires_grad_(true);
      auto xr = x.detach().clone().requires_grad_(true);
      const auto h = exact_gelu(x, {.output = true, .input_grad = true});
      const auto want = torch::gelu(xr);
      // ATen's formulas in float32: one rounding of bf16 or half apart at most (a few
      // float32 ulps in float32), equal when the compilers contract alike, which is not relied on.
      const double ulp = dtype == torch::kFloat32 ? 5e-7 : dtype == torch::kBFloat16 ? 7.9e-3 : 9.8e-4;
      const auto within = [&](const torch::Tensor& got, const torch::Tensor& ref) {
        const auto g = got.to(torch::kFloat), r = ref.to(torch::kFloat);
        return ((g - r).abs() <= r.abs() * ulp + 1e-30).all().item<bool>();
      };
      EXPECT_TRUE(within(h, want));
      EXPECT_TRUE(torch::equal(take_amax(h), h.abs().max().to(torch::kFloat)));
      const auto g = torch::randn({n}, opts).to(dtype);
      h.backward(g);
      want.backward(g);
      EXPECT_TRUE(within(x.grad(), xr.grad()));
      const auto slot = save_amax_slot();
      restore_amax_slot({});
      ASSERT_TRUE(slot.of.defined());
      EXPECT_TRUE(torch::equal(slot.amax, slot.of.abs().max().to(torch::kFloat)));
      EXPECT_TRUE(torch::equal(slot.of, x.grad()));
    }
  }
}

// On the GPU the norm, GELU and RoPE kernels hand their amaxes to every FP8 product
// they feed, forward and backward (at 0.7B's width: qkv, MLP up and down, 6 a layer),
// and a step with them trains: its loss and gradients finite.
TEST(Fp8LinearCuda, TheModelsKernelsHandTheirAmaxToTheFp8Products) {
  SKIP_WITHOUT_FP8_GPU();
  auto cfg = test::small_model("xsa", 64);
  cfg.n_layer = 2;
  cfg.d_model = 1536;
  cfg.n_head = 2;
  cfg.head_dim = 768;
  torch::manual_seed(10);
  GPT m(cfg);
  m->to(kFp8Cuda);
  m->set_runtime(test::runtime("none", 0, "fused,fp8", true, /*bf16=*/true));
  const auto idx =
      torch::randint(0, cfg.vocab_size, {2, 64}, torch::TensorOptions().device(kFp8Cuda).dtype(torch::kLong));
  const auto before = amax_handovers_taken();
  auto loss = m->forward(idx, idx).loss;
  loss.backward();
  EXPECT_EQ(amax_handovers_taken() - before, 6 * cfg.n_layer);
  EXPECT_TRUE(std::isfinite(loss.item<float>()));
  for (const auto& p : m->parameters())
    if (p.grad().defined()) ASSERT_TRUE(torch::isfinite(p.grad()).all().item<bool>());
}

// As on the CPU, with cuBLASLt's accumulation: FP8 products are exact in float32,
// but Hopper's tensor cores add them with fewer bits between promotions to
// float32, the forward GEMM with fast accumulation: hence 2e-3 of the largest
// element for float32 outputs (1e-2 for the forward, bf16 outputs), still below
// the FP8 rounding and a swap of the e4m3/e5m2 roles, both asserted.
TEST(Fp8LinearCuda, ForwardAndBackwardAreTheFloat64ReferenceOfTheSameArithmetic) {
  SKIP_WITHOUT_FP8_GPU();
  struct Shape {
    int64_t B, T, in, out;
  };
  for (const auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    for (const auto s : {Shape{4, 64, 256, 768}, Shape{2, 33, 128, 384}}) {  // 66 rows: padded to 80
      SCOPED_TRACE(std::string(c10::toString(dtype)) + " rows " + std::to_string(s.B * s.T));
      torch::manual_seed(2);
      const int64_t rows = s.B * s.T;
      const auto opts = torch::TensorOptions().device(kFp8Cuda);
      const auto x = (torch::randn({s.B, s.T, s.in}, opts) * 2).to(dtype).requires_grad_(true);
      const auto w = (torch::randn({s.out, s.in}, opts) * 0.05).requires_grad_(true);
      const auto b = (torch::randn({s.out}, opts) * 0.1).requires_grad_(true);
      const auto gy = (torch::randn({s.B, s.T, s.out}, opts) * 1e-4).to(dtype);
      auto y = fp8_linear(x, w, quantize_fp8(w.detach(), kFp8Forward, /*transposed=*/true), b, dtype);
      y.backward(gy);
      const auto x2 = x.detach().reshape({rows, s.in}), g2 = gy.reshape({rows, s.out});
      const auto ref = test::fp8_ref_linear(x2, w.detach(), g2);
      const auto y_ref = ref.y + b.detach().to(dtype).to(torch::kCPU, torch::kFloat64);
      const double tol = dtype == torch::kFloat32 ? 2e-3 : 1e-2;
      EXPECT_LT(test::fp8_rel_err(y.detach().reshape({rows, s.out}), y_ref), 1e-2);
      EXPECT_LT(test::fp8_rel_err(x.grad().reshape({rows, s.in}), ref.dx), tol);
      EXPECT_LT(test::fp8_rel_err(w.grad(), ref.dw), 2e-3);
      const auto swapped =
          test::fp8_ref_linear(x2, w.detach(), g2, c10::ScalarType::Float8_e5m2, c10::ScalarType::Float8_e4m3fn);
      EXPECT_GT(test::fp8_rel_err(swapped.y, ref.y), 2e-2);
      EXPECT_GT(test::fp8_rel_err(swapped.dx, ref.dx), 2 * tol);
      EXPECT_GT(test::fp8_rel_err(swapped.dw, ref.dw), 4e-3);
    }
  }
}

// The layer's forward and backward and the weight cache's refresh make no host
// synchronisation (an amax or scale read back, a synchronising copy): under c10's
// sync debug mode "error" any would throw. A read-back under the same mode does
// throw, so the mode is on.
TEST(Fp8LinearCuda, NoHostSynchronisation) {
  SKIP_WITHOUT_FP8_GPU();
#ifdef XSAGPT_CUDA
  torch::manual_seed(3);
  const auto opts = torch::TensorOptions().device(kFp8Cuda);
  const auto x = torch::randn({2, 64, 256}, opts).to(torch::kBFloat16).requires_grad_(true);
  const auto w = (torch::randn({768, 256}, opts) * 0.05).requires_grad_(true);
  const auto gy = (torch::randn({2, 64, 768}, opts) * 1e-3).to(torch::kBFloat16);
  Fp8WeightCache cache;
  cache.get(w);  // the first use asks the device's properties (fp8_refusal): not a sync, but outside anyway
  torch::cuda::synchronize();
  struct SyncErrors {
    SyncErrors() { c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_ERROR); }
    ~SyncErrors() { c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_DISABLED); }
  };
  {
    SyncErrors on;
    EXPECT_NO_THROW({
      auto y = fp8_linear(x, w, cache.get(w), {}, torch::kBFloat16);
      y.backward(gy);
      cache.refresh();
    });
    EXPECT_THROW(cache.get(w).inv.item<float>(), c10::Error);
  }
  torch::cuda::synchronize();
  EXPECT_TRUE(x.grad().defined() && w.grad().defined());
#else
  GTEST_SKIP() << "a build without CUDA";
#endif
}

TEST(Fp8LinearCuda, ThisGpuTakesWidthsOfMultiplesOf16Only) {
  SKIP_WITHOUT_FP8_GPU();
  EXPECT_EQ(fp8_refusal(kFp8Cuda, {768, 2304, 3072}, "train.kernels"), "");
  EXPECT_THAT(fp8_refusal(kFp8Cuda, {768, 60}, "train.kernels"), ::testing::HasSubstr("but one is 60"));
}

// A few bf16 steps of a small XSA model with fused,fp8_all against fused: the same
// learning within FP8 noise (the CPU's 30-step test states the bound's reasons).
TEST(Fp8LinearCuda, TrainingStepsStayNearBf16) {
  SKIP_WITHOUT_FP8_GPU();
  auto cfg = test::small_model("xsa", 512);
  cfg.d_model = 128;
  cfg.n_head = 2;
  cfg.head_dim = 64;
  cfg.block_size = 64;
  torch::manual_seed(31);
  std::vector<std::pair<torch::Tensor, torch::Tensor>> data;
  for (int i = 0; i < 30; ++i) {
    auto seq = torch::randint(0, 8, {8, 65}, torch::kLong).to(kFp8Cuda);
    data.emplace_back(seq.narrow(1, 0, 64), seq.narrow(1, 1, 64));
  }
  auto train = [&](const std::string& kernels) {
    torch::manual_seed(40);
    GPT m(cfg);
    m->to(kFp8Cuda);
    m->set_runtime(test::runtime("none", 0, kernels, /*cuda=*/true, /*bf16=*/true));
    test::StepRig step(m, 1);
    size_t i = 0;
    std::vector<double> losses;
    for (int s = 0; s < 30; ++s) losses.push_back(step([&] { return data[i++]; }, 3e-3).loss.item<double>());
    return losses;
  };
  const auto bf16 = train("fused"), fp8 = train("fused,fp8_all");
  ASSERT_LT(bf16.back(), bf16.front() - 1.0);  // it learns
  double most = 0;
  for (size_t s = 0; s < bf16.size(); ++s) most = std::max(most, std::abs(fp8[s] - bf16[s]));
  EXPECT_LT(most, 0.1);
  EXPECT_GT(most, 0.0);  // fp8 ran
}
