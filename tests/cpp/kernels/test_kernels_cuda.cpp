// The CUDA kernels of src/kernels/ against their ATen twins (the arithmetic the
// CPU runs and test_kernels.cpp checks against autograd in float64), and the whole
// model and training step with the fused kernels against the ATen path on a GPU.
// These run on a machine with CUDA and skip elsewhere.
#include "helpers.h"
#include "kernels/add_norm.h"
#include "kernels/add_norm_cuda.h"
#include "kernels/common.h"
#include "kernels/linear.h"
#include "kernels/lm_head_loss.h"
#include "kernels/lm_head_loss_cuda.h"
#include "kernels/rope_qkv.h"
#include "kernels/rope_qkv_cuda.h"
#include "live_head.h"
#include "matmul_counter.h"
#include "model/gpt.h"
#include "model/rope.h"
#include "run/from_checkpoint.h"
#include "step_rig.h"

#include <gtest/gtest.h>

using namespace xsagpt;

namespace {

bool skip() { return !torch::cuda::is_available() || !cuda_kernels_built(); }
#define SKIP_WITHOUT_CUDA() \
  if (skip()) GTEST_SKIP() << "no CUDA device or no CUDA kernels in this build"

const torch::Device kCuda(torch::kCUDA, 0);

// Largest error relative to the reference's largest magnitude.
double rel_err(const torch::Tensor& got, const torch::Tensor& want) {
  const auto g = got.to(torch::kCPU, torch::kFloat64), w = want.to(torch::kCPU, torch::kFloat64);
  return (g - w).abs().max().item<double>() / std::max(1e-30, w.abs().max().item<double>());
}

double tol_for(torch::ScalarType t) { return t == torch::kFloat32 ? 1e-5 : 1e-2; }

}  // namespace

TEST(KernelsCuda, RopeQkvForwardAndBackwardEqualTheAtenTwin) {
  SKIP_WITHOUT_CUDA();
  for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    for (int64_t D : {64, 80, 128, 256, 6}) {
      SCOPED_TRACE(std::string(c10::toString(dtype)) + " head_dim " + std::to_string(D));
      torch::manual_seed(0);
      const int64_t B = 2, T = 33, H = 3;
      auto [cos, sin] = rope_tables(T + 5, D, 10000.0, kCuda);
      cos = cos.narrow(0, 5, T);
      sin = sin.narrow(0, 5, T);
      auto opts = torch::TensorOptions().device(kCuda).dtype(dtype);
      auto qkv = torch::randn({B, T, 3 * H * D}, opts);
      auto q = torch::empty({B, T, H, D}, opts), k = torch::empty_like(q), v = torch::empty_like(q);
      rope_qkv_forward_cuda(qkv, cos.contiguous(), sin.contiguous(), q, k, v);
      auto rq = torch::empty_like(q), rk = torch::empty_like(q), rv = torch::empty_like(q);
      auto part = [&](int64_t i) { return qkv.narrow(-1, i * H * D, H * D).view({B, T, H, D}); };
      rope_qkv_aten(part(0), part(1), part(2), cos, sin, false, rq, rk, rv);
      EXPECT_LT(rel_err(q, rq), tol_for(dtype));
      EXPECT_LT(rel_err(k, rk), tol_for(dtype));
      EXPECT_TRUE(torch::equal(v, rv));
      // Backward from strided gradients, as the attention's backward hands them over.
      auto g = torch::randn({B, H, T, D}, opts).transpose(1, 2);  // (B, T, H, D), not contiguous
      auto dqkv = torch::empty({B, T, 3 * H * D}, opts), ref = torch::empty_like(dqkv);
      auto amax = torch::zeros({}, opts.dtype(torch::kFloat));
      rope_qkv_backward_cuda(g, g * 2, g * 3, cos.contiguous(), sin.contiguous(), dqkv, amax);
      // The qkv gradient's amax, for an FP8 qkv product: max |dqkv| as stored, exactly.
      EXPECT_TRUE(torch::equal(amax, dqkv.abs().max().to(torch::kFloat)));
      auto rpart = [&](int64_t i) { return ref.narrow(-1, i * H * D, H * D).view({B, T, H, D}); };
      auto r0 = rpart(0), r1 = rpart(1), r2 = rpart(2);
      rope_qkv_aten(g, g * 2, g * 3, cos, sin, true, r0, r1, r2);
      EXPECT_LT(rel_err(dqkv, ref), tol_for(dtype));
    }
  }
}

TEST(KernelsCuda, AddNormForwardAndBackwardEqualTheAtenTwin) {
  SKIP_WITHOUT_CUDA();
  for (auto dtype : {torch::kFloat32, torch::kBFloat16, torch::kHalf}) {
    // The backward's block shapes (add_norm_cuda.cu): 4 columns a vector with 1, 2
    // and 4 vectors a thread, with a last vector out of the row (1100) and at the
    // widest row (4096); 1 column a vector (d not a multiple of 4) with 1, 2 and 4.
    // The forward's: rows held in registers at each of their widths (768, 1536, 2048,
    // 2560; 1100 with masked vectors), read three times above them (4096) and where d
    // is not a multiple of 4.
    for (int64_t d : {768, 1536, 2048, 2560, 1100, 4096, 130, 1030, 3002}) {
      for (bool branch_on : {true, false}) {
        SCOPED_TRACE(std::string(c10::toString(dtype)) + " d " + std::to_string(d) + (branch_on ? " branch" : ""));
        torch::manual_seed(1);
        const int64_t N = 1000;
        auto f32 = torch::TensorOptions().device(kCuda);
        auto x = torch::randn({N, d}, f32) * 2 + 0.5;
        auto branch = branch_on ? torch::randn({N, d}, f32).to(dtype) : torch::Tensor();
        auto w = torch::rand({d}, f32) + 0.5, b = torch::randn({d}, f32);
        auto x_out = torch::empty_like(x), h = torch::empty({N, d}, f32.dtype(dtype));
        auto mean = torch::empty({N}, f32), rstd = torch::empty({N}, f32);
        auto amax = torch::zeros({}, f32), ramax = torch::zeros({}, f32);
        add_norm_forward_cuda(x, branch, w, b, 1e-5, x_out, h, mean, rstd, amax, /*rows_in_registers=*/false);
        {  // The register forward (norm_regs): the same arithmetic in the same order, bit for bit.
          auto x_out2 = torch::empty_like(x), h2 = torch::empty_like(h), mean2 = torch::empty_like(mean),
               rstd2 = torch::empty_like(rstd), amax2 = torch::zeros({}, f32);
          add_norm_forward_cuda(x, branch, w, b, 1e-5, x_out2, h2, mean2, rstd2, amax2, /*rows_in_registers=*/true);
          EXPECT_TRUE(torch::equal(h2, h));
          EXPECT_TRUE(torch::equal(mean2, mean));
          EXPECT_TRUE(torch::equal(rstd2, rstd));
          EXPECT_TRUE(torch::equal(amax2, amax));
          if (branch_on) EXPECT_TRUE(torch::equal(x_out2, x_out));
        }
        auto rx = torch::empty_like(x), rh = torch::empty_like(h), rm = torch::empty_like(mean),
             rr = torch::empty_like(rstd);
        add_norm_forward_aten(x, branch, w, b, 1e-5, rx, rh, rm, rr, ramax);
        // The amax an FP8 cast of h takes: max |h| of h as stored, exactly, on both paths.
        EXPECT_TRUE(torch::equal(amax, h.abs().max().to(torch::kFloat)));
        EXPECT_TRUE(torch::equal(ramax, rh.abs().max().to(torch::kFloat)));
        const auto xo = branch_on ? x_out : x;
        if (branch_on) {
          EXPECT_LT(rel_err(x_out, rx), 1e-6);
        }
        EXPECT_LT(rel_err(h, rh), tol_for(dtype));
        EXPECT_LT(rel_err(mean, rm), 1e-5);
        EXPECT_LT(rel_err(rstd, rr), 1e-5);

        auto dh = torch::randn({N, d}, f32).to(dtype), dx_out = torch::randn({N, d}, f32);
        auto dx = torch::empty_like(x), dbranch = branch_on ? torch::empty_like(h) : torch::Tensor();
        auto dw = torch::empty_like(w), db = torch::empty_like(b);
        auto dbranch_amax = branch_on ? torch::zeros({}, f32) : torch::Tensor();
        auto rdbranch_amax = branch_on ? torch::zeros({}, f32) : torch::Tensor();
        add_norm_backward_cuda(dh, dx_out, xo, mean, rstd, w, dx, dbranch, dw, db, dbranch_amax);
        auto rdx = torch::empty_like(x), rdb_ = branch_on ? torch::empty_like(h) : torch::Tensor();
        auto rdw = torch::empty_like(w), rdb = torch::empty_like(b);
        add_norm_backward_aten(dh, dx_out, xo, mean, rstd, w, rdx, rdb_, rdw, rdb, rdbranch_amax);
        EXPECT_LT(rel_err(dx, rdx), 1e-5);
        if (branch_on) {
          EXPECT_LT(rel_err(dbranch, rdb_), tol_for(dtype));
          // The branch gradient's amax, for the FP8 product that made the branch.
          EXPECT_TRUE(torch::equal(dbranch_amax, dbranch.abs().max().to(torch::kFloat)));
          EXPECT_TRUE(torch::equal(rdbranch_amax, rdb_.abs().max().to(torch::kFloat)));
        }
        EXPECT_LT(rel_err(dw, rdw), 1e-5);
        EXPECT_LT(rel_err(db, rdb), 1e-5);
        // Without the stream's gradient (the last norm, ln_f) and without a bias.
        auto undefined = torch::Tensor();
        add_norm_backward_cuda(dh, undefined, xo, mean, rstd, w, dx, dbranch, dw, undefined, undefined);
        add_norm_backward_aten(dh, undefined, xo, mean, rstd, w, rdx, rdb_, rdw, undefined, undefined);
        EXPECT_LT(rel_err(dx, rdx), 1e-5);
        EXPECT_LT(rel_err(dw, rdw), 1e-5);
      }
    }
  }
}

// The backward at training sizes, where each block walks many rows and adds up
// its columns' weight and bias gradients over them, against the float64 formula (autograd of
// layer_norm), not only against the twin. The CPU twin passes the same check
// (test_kernels.cpp, AddNorm.BackwardAtTrainingSizesMatchesFloat64Autograd).
TEST(KernelsCuda, AddNormBackwardAtTrainingSizesMatchesFloat64Autograd) {
  SKIP_WITHOUT_CUDA();
  for (int64_t N : {8192, 32768}) {
    for (int64_t d : {768, 1536, 2560}) {
      SCOPED_TRACE("N " + std::to_string(N) + " d " + std::to_string(d));
      torch::manual_seed(13);
      auto f32 = torch::TensorOptions().device(kCuda);
      auto x = torch::randn({N, d}, f32) * 2 + 0.5;
      auto branch = torch::randn({N, d}, f32).to(torch::kBFloat16);
      auto w = torch::rand({d}, f32) + 0.5, b = torch::randn({d}, f32);
      auto xa = x.clone().requires_grad_(true), ba = branch.clone().requires_grad_(true);
      auto wa = w.clone().requires_grad_(true), bb = b.clone().requires_grad_(true);
      auto [x_out, h] = add_layer_norm(xa, ba, wa, bb, 1e-5, torch::kBFloat16);
      auto dh = torch::randn({N, d}, f32).to(torch::kBFloat16), dxo = torch::randn({N, d}, f32);
      torch::autograd::backward({h, x_out}, {dh, dxo});

      auto c64 = [](const torch::Tensor& t) { return t.to(torch::kCPU, torch::kFloat64).requires_grad_(true); };
      auto x64 = c64(x), b64 = c64(branch), w64 = c64(w), bias64 = c64(b);
      auto xo64 = x64 + b64;
      auto h64 = torch::layer_norm(xo64, {d}, w64, bias64, 1e-5);
      torch::autograd::backward({h64, xo64},
                                {dh.to(torch::kCPU, torch::kFloat64), dxo.to(torch::kCPU, torch::kFloat64)});
      ASSERT_GT(w64.grad().abs().max().item<double>(), 1.0);
      EXPECT_LT(rel_err(h, h64), 1e-2);
      EXPECT_LT(rel_err(xa.grad(), x64.grad()), 1e-5);
      EXPECT_LT(rel_err(ba.grad(), b64.grad()), 1e-2);
      EXPECT_LT(rel_err(wa.grad(), w64.grad()), 1e-5);
      EXPECT_LT(rel_err(bb.grad(), bias64.grad()), 1e-5);
    }
  }
}

// A float32 branch with a bf16 output is added in float32 by the kernel too.
TEST(KernelsCuda, AddNormAddsAFloat32BranchInFloat32) {
  SKIP_WITHOUT_CUDA();
  torch::manual_seed(14);
  auto f32 = torch::TensorOptions().device(kCuda);
  auto x = torch::randn({64, 256}, f32).requires_grad_(true);
  auto branch = (torch::randn({64, 256}, f32) * (1 + 1e-3)).requires_grad_(true);
  auto w = (torch::rand({256}, f32) + 0.5).requires_grad_(true);
  auto [x_out, h] = add_layer_norm(x, branch, w, {}, 1e-5, torch::kBFloat16);
  EXPECT_TRUE(torch::equal(x_out, x.detach() + branch.detach()));
  (h.to(torch::kFloat32) * torch::randn({64, 256}, f32)).sum().backward();
  EXPECT_EQ(branch.grad().scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::equal(branch.grad(), x.grad()));
}

// The entry points read weight and bias as contiguous float32 arrays on x's device.
TEST(KernelsCuda, AddNormRejectsAWeightItCannotRead) {
  SKIP_WITHOUT_CUDA();
  auto f32 = torch::TensorOptions().device(kCuda);
  const int64_t N = 4, d = 64;
  auto x = torch::randn({N, d}, f32), h = torch::empty({N, d}, f32), none = torch::Tensor();
  auto mean = torch::empty({N}, f32), rstd = torch::empty({N}, f32), x_out = x;
  auto strided = torch::ones({d, 2}, f32).select(1, 0);  // (d), stride 2
  EXPECT_THROW(add_norm_forward_cuda(x, none, strided, none, 1e-5, x_out, h, mean, rstd, none, false), c10::Error);
  EXPECT_THROW(add_norm_forward_cuda(x, none, torch::ones({d}), none, 1e-5, x_out, h, mean, rstd, none, false),
               c10::Error);
  EXPECT_THROW(
      add_norm_forward_cuda(x, none, torch::ones({d}, f32), torch::zeros({d}), 1e-5, x_out, h, mean, rstd, none, false),
      c10::Error);
  add_norm_forward_cuda(x, none, torch::ones({d}, f32), none, 1e-5, x_out, h, mean, rstd, none, false);
  auto dx = torch::empty_like(x), dw = torch::empty({d}, f32);
  EXPECT_THROW(add_norm_backward_cuda(h, none, x, mean, rstd, strided, dx, none, dw, none, none), c10::Error);
}

// Rows too wide for the backward kernel's registers take the ATen twin instead
// of failing.
TEST(KernelsCuda, AddNormBackwardOfRowsTooWideForTheKernelFallsBackToTheTwin) {
  SKIP_WITHOUT_CUDA();
  const int64_t d = 32768;
  ASSERT_FALSE(add_norm_backward_cuda_fits(d));
  ASSERT_TRUE(add_norm_backward_cuda_fits(2560));
  torch::manual_seed(15);
  auto f32 = torch::TensorOptions().device(kCuda);
  auto x = torch::randn({8, d}, f32).requires_grad_(true), w = (torch::rand({d}, f32) + 0.5).requires_grad_(true);
  auto [x_out, h] = add_layer_norm(x, {}, w, {}, 1e-5, torch::kBFloat16);
  auto g = torch::randn({8, d}, f32).to(torch::kBFloat16);
  h.backward(g);
  auto x64 = x.detach().to(torch::kCPU, torch::kFloat64).requires_grad_(true);
  auto w64 = w.detach().to(torch::kCPU, torch::kFloat64).requires_grad_(true);
  torch::layer_norm(x64, {d}, w64, {}, 1e-5).backward(g.to(torch::kCPU, torch::kFloat64));
  EXPECT_LT(rel_err(x.grad(), x64.grad()), 1e-5);
  EXPECT_LT(rel_err(w.grad(), w64.grad()), 1e-5);
}

TEST(KernelsCuda, AddNormWeightGradientIsTheSameOnEveryRun) {
  SKIP_WITHOUT_CUDA();
  torch::manual_seed(2);
  auto f32 = torch::TensorOptions().device(kCuda);
  const int64_t N = 4096, d = 768;
  auto x = torch::randn({N, d}, f32), w = torch::rand({d}, f32);
  auto h = torch::empty({N, d}, f32.dtype(torch::kBFloat16));
  auto mean = torch::empty({N}, f32), rstd = torch::empty({N}, f32), none = torch::Tensor();
  auto x_out = x;
  add_norm_forward_cuda(x, none, w, none, 1e-5, x_out, h, mean, rstd, none, true);
  auto dh = torch::randn({N, d}, f32).to(torch::kBFloat16);
  auto dx = torch::empty_like(x), dw1 = torch::empty_like(w), dw2 = torch::empty_like(w);
  add_norm_backward_cuda(dh, none, x, mean, rstd, w, dx, none, dw1, none, none);
  add_norm_backward_cuda(dh, none, x, mean, rstd, w, dx, none, dw2, none, none);
  EXPECT_TRUE(torch::equal(dw1, dw2));
}

TEST(KernelsCuda, CrossEntropyRowsEqualTheAtenTwin) {
  SKIP_WITHOUT_CUDA();
  for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    for (int64_t V : {50304, 1003, 7}) {
      SCOPED_TRACE(std::string(c10::toString(dtype)) + " V " + std::to_string(V));
      torch::manual_seed(3);
      const int64_t n = 37;
      auto opts = torch::TensorOptions().device(kCuda);
      auto logits = (torch::randn({n, V}, opts) * 4).to(dtype);
      auto targets = torch::randint(0, V, {n}, opts.dtype(torch::kLong));
      targets[5] = -1;
      auto inv = torch::full({}, 1.0f / 36, opts);
      for (bool write_grad : {false, true}) {
        auto a = logits.clone(), b = logits.clone();
        auto la = torch::empty({n}, opts), lb = torch::empty({n}, opts);
        cross_entropy_rows_cuda(a, targets, inv, la, write_grad);
        cross_entropy_rows_aten(b, targets, inv, lb, write_grad);
        EXPECT_LT(rel_err(la, lb), 1e-5);
        EXPECT_EQ(la[5].item<float>(), 0.0f);
        if (write_grad) {
          EXPECT_LT(rel_err(a, b), tol_for(dtype));
          EXPECT_EQ(a[5].abs().max().item<float>(), 0.0f);
        } else {
          EXPECT_TRUE(torch::equal(a, logits));
        }
      }
    }
  }
}

TEST(KernelsCuda, LMHeadLossAgreesWithFloat64CrossEntropy) {
  SKIP_WITHOUT_CUDA();
  torch::manual_seed(4);
  const int64_t N = 300, d = 64, V = 50304;
  auto opts = torch::TensorOptions().device(kCuda);
  auto h = torch::randn({N, d}, opts).to(torch::kBFloat16).requires_grad_(true);
  auto w = (torch::randn({V, d}, opts) * 0.1).requires_grad_(true);
  auto wc = w.detach().to(torch::kBFloat16);
  auto t = torch::randint(0, V, {N}, opts.dtype(torch::kLong));
  auto loss = lm_head_loss(h, w, wc, t, 128);
  loss.backward();
  auto H = h.detach().to(torch::kFloat64).cpu().requires_grad_(true);
  auto W = wc.to(torch::kFloat64).cpu().requires_grad_(true);
  namespace F = torch::nn::functional;
  auto ref = F::cross_entropy(torch::matmul(H, W.t()), t.cpu());
  ref.backward();
  EXPECT_NEAR(loss.item<double>(), ref.item<double>(), 2e-3 * ref.item<double>());
  EXPECT_LT(rel_err(h.grad(), H.grad()), 2e-2);
  EXPECT_LT(rel_err(w.grad(), W.grad()), 2e-2);
  EXPECT_EQ(w.grad().scalar_type(), torch::kFloat32);
}

// The head's backward on CUDA with g = 1/3 (three micro-batches) and ignored
// targets: the scale is not rounded to bf16 on the way (a 0-dim CUDA tensor would
// be), ignored rows get nothing; without grad the op computes only the logits.
TEST(KernelsCuda, LMHeadLossScalesByTheExactIncomingGradientAndSkipsGradWithoutGradMode) {
  SKIP_WITHOUT_CUDA();
  torch::manual_seed(16);
  const int64_t N = 256, d = 64, V = 1000;
  auto opts = torch::TensorOptions().device(kCuda);
  auto h0 = torch::randn({N, d}, opts).to(torch::kBFloat16);
  auto w = (torch::randn({V, d}, opts) * 0.3).requires_grad_(true);
  auto wc = w.detach().to(torch::kBFloat16);
  auto t = torch::randint(0, V, {N}, opts.dtype(torch::kLong));
  t.narrow(0, 10, 5).fill_(-1);
  auto grads = [&](double g) {
    auto h = h0.clone().requires_grad_(true);
    w.mutable_grad().reset();
    (lm_head_loss(h, w, wc, t, 100) * g).backward();
    return std::pair{h.grad(), w.grad().clone()};
  };
  const auto [dh1, dw1] = grads(1.0);
  const auto [dh3, dw3] = grads(1.0 / 3.0);
  ASSERT_GT(dh1.abs().max().item<float>(), 0.0f);
  const auto want = (dh1.to(torch::kFloat32) * static_cast<float>(1.0 / 3.0)).to(torch::kBFloat16);
  EXPECT_TRUE(torch::equal(dh3, want));
  EXPECT_TRUE(torch::allclose(dw3, dw1 * static_cast<float>(1.0 / 3.0), 1e-6, 0.0));
  EXPECT_EQ(dh3.narrow(0, 10, 5).abs().max().item<float>(), 0.0f);

  torch::NoGradGuard no_grad;
  auto h = h0.clone().requires_grad_(true);
  test::MatmulCounter products;
  lm_head_loss(h, w, wc, t, 100);
  EXPECT_EQ(products.count(), 3);  // three chunks, the logits' product only
}

TEST(KernelsCuda, CachedLinearWeightGradientIsFloat32FromTheGemm) {
  SKIP_WITHOUT_CUDA();
  torch::manual_seed(5);
  auto opts = torch::TensorOptions().device(kCuda);
  auto x = torch::randn({4, 64, 256}, opts).to(torch::kBFloat16).requires_grad_(true);
  auto w = torch::randn({512, 256}, opts).requires_grad_(true);
  WeightCache cache;
  auto y = cached_linear(x, w, cache.get(w, torch::kBFloat16));
  auto g = torch::randn(y.sizes(), opts).to(torch::kBFloat16);
  y.backward(g);
  auto ref =
      torch::matmul(g.reshape({-1, 512}).t().to(torch::kFloat64), x.detach().reshape({-1, 256}).to(torch::kFloat64));
  EXPECT_EQ(w.grad().scalar_type(), torch::kFloat32);
  EXPECT_LT(rel_err(w.grad(), ref), 1e-4);  // float32 accumulation of bf16 products: no bf16 rounding of the result
}

TEST(KernelsCuda, WholeModelFusedMatchesAtenInBf16) {
  SKIP_WITHOUT_CUDA();
  for (const char* attention : {"sa", "xsa"}) {
    SCOPED_TRACE(attention);
    auto cfg = test::small_model(attention, 512);
    cfg.d_model = 128;
    cfg.n_head = 2;
    cfg.head_dim = 64;
    cfg.block_size = 128;
    cfg.n_sink = 2;
    if (std::string(attention) == "xsa") cfg.set_attention("xsa", {{"xsa_gate", "sa"}});
    auto idx = torch::randint(0, cfg.vocab_size, {4, 128}, torch::TensorOptions().device(kCuda).dtype(torch::kLong));
    auto run = [&](const std::string& kernels, int64_t chunk, const std::string& recompute = "none") {
      torch::manual_seed(6);
      GPT m(cfg);
      test::randomize_head(m);  // a zero head would leave every gradient below it 0 on both paths
      m->to(kCuda);
      auto rt = test::runtime(recompute, chunk, kernels, true, /*bf16=*/true);
      m->set_runtime(rt);
      auto loss = m->forward(idx, idx).loss;  // in bf16: the model opens its autocast scope
      (loss / 3.0).backward();                // g = 1/3, as three micro-batches give it
      return std::pair{loss.item<double>(), test::gradients(m)};
    };
    auto [la, ga] = run("aten", 0);
    test::assert_live(ga);  // the gate and sinks included
    struct Variant {
      std::string kernels;
      int64_t chunk;
      std::string recompute;
    };
    for (const auto& [kernels, chunk, recompute] :
         {Variant{"fused", 0, "none"}, Variant{"fused", 100, "none"}, Variant{"fused", 0, "block"},
          Variant{"fused", 0, "mlp"}, Variant{"weights", 0, "none"}, Variant{"norm", 0, "none"},
          Variant{"rope", 0, "none"}, Variant{"loss", 0, "none"}, Variant{"xsa", 0, "none"},
          Variant{"xsa_wide", 0, "none"}}) {
      SCOPED_TRACE(kernels + " chunk " + std::to_string(chunk) + " recompute " + recompute);
      auto [lf, gf] = run(kernels, chunk, recompute);
      EXPECT_NEAR(lf, la, 0.01);
      for (const auto& [name, g] : ga) {
        ASSERT_TRUE(gf.at(name).defined()) << name;
        const double rel = (gf.at(name) - g).norm().item<double>() / std::max(1e-12, g.norm().item<double>());
        EXPECT_LT(rel, 0.05) << name;
      }
    }
  }
}

TEST(KernelsCuda, TrainingStepsFusedStayWithTheAtenPath) {
  SKIP_WITHOUT_CUDA();
  auto cfg = test::small_model("xsa", 512);
  cfg.d_model = 128;
  cfg.n_head = 2;
  cfg.head_dim = 64;
  cfg.block_size = 64;
  torch::manual_seed(7);
  auto lopts = torch::TensorOptions().device(kCuda).dtype(torch::kLong);
  std::vector<std::pair<torch::Tensor, torch::Tensor>> data;
  for (int i = 0; i < 40; ++i) {
    auto seq = torch::randint(0, 64, {8, 65}, lopts);  // a small alphabet: learnable
    data.emplace_back(seq.narrow(1, 0, 64), seq.narrow(1, 1, 64));
  }
  auto train = [&](const std::string& kernels) {
    torch::manual_seed(8);
    GPT m(cfg);
    m->to(kCuda);
    m->set_runtime(test::runtime("none", 0, kernels, true, true));
    test::StepRig step(m, 2);
    size_t i = 0;
    double last = 0;
    for (int s = 0; s < 20; ++s) last = step([&] { return data[i++]; }, 3e-3).loss.item<double>();
    return last;
  };
  const double aten = train("aten"), fused = train("fused");
  EXPECT_NEAR(fused, aten, 0.05);
  EXPECT_LT(fused, std::log(512.0) - 1.0);  // it learned
}

// Resume with the weight cache on, on the GPU: two steps, a checkpoint, a fresh
// model whose bf16 copies hold other weights, two more steps; the same losses as
// the uninterrupted run (the CPU twin: FastPath.ResumeFromACheckpoint...).
TEST(KernelsCuda, ResumeWithTheWeightCacheContinuesTheRun) {
  SKIP_WITHOUT_CUDA();
  auto cfg = test::small_model("xsa", 512);
  cfg.d_model = 128;
  cfg.n_head = 2;
  cfg.head_dim = 64;
  cfg.block_size = 64;
  auto lopts = torch::TensorOptions().device(kCuda).dtype(torch::kLong);
  torch::manual_seed(9);
  std::vector<std::pair<torch::Tensor, torch::Tensor>> data;
  for (int i = 0; i < 4; ++i) {
    auto seq = torch::randint(0, 64, {8, 65}, lopts);
    data.emplace_back(seq.narrow(1, 0, 64), seq.narrow(1, 1, 64));
  }
  const auto rt = test::runtime("none", 0, "fused", true, true);
  auto make = [&](uint64_t seed) {
    torch::manual_seed(seed);
    GPT m(cfg);
    test::randomize_head(m);
    m->to(kCuda);
    m->set_runtime(rt);
    return m;
  };
  auto steps = [&](test::StepRig& step, size_t first, size_t n) {
    std::vector<double> l;
    for (size_t s = first; s < first + n; ++s) l.push_back(step([&] { return data[s]; }, 1e-2).loss.item<double>());
    return l;
  };
  GPT whole = make(10);
  test::StepRig whole_step(whole, 1);
  const auto want = steps(whole_step, 0, 4);
  GPT first = make(10);
  test::StepRig first_step(first, 1);
  steps(first_step, 0, 2);
  std::map<std::string, torch::Tensor> weights;
  for (const auto& item : first->named_parameters()) weights[item.key()] = item.value().detach().clone();
  const auto state = first_step.parts.optimizer->state();
  GPT resumed = make(11);
  {
    torch::NoGradGuard g;
    resumed->forward(data[0].first, data[0].second);  // fills the copies with other weights
  }
  test::StepRig step(resumed, 1);
  load_weights(resumed, weights, "test");
  resumed->parameters_changed();
  step.parts.optimizer->load_state(state, "the first step's state");
  const auto got = steps(step, 2, 2);
  ASSERT_GT(std::abs(want[2] - want[0]), 0.05);
  // Same GPU, same kernels, same order: equal up to cuBLAS's choice of algorithm.
  EXPECT_NEAR(got[0], want[2], 1e-3);
  EXPECT_NEAR(got[1], want[3], 1e-3);
}
