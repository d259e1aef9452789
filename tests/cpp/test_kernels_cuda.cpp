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
#include "model/gpt.h"
#include "model/rope.h"
#include "step_rig.h"
#include "train/precision.h"

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
      rope_qkv_backward_cuda(g, g * 2, g * 3, cos.contiguous(), sin.contiguous(), dqkv);
      auto rpart = [&](int64_t i) { return ref.narrow(-1, i * H * D, H * D).view({B, T, H, D}); };
      auto r0 = rpart(0), r1 = rpart(1), r2 = rpart(2);
      rope_qkv_aten(g, g * 2, g * 3, cos, sin, true, r0, r1, r2);
      EXPECT_LT(rel_err(dqkv, ref), tol_for(dtype));
    }
  }
}

TEST(KernelsCuda, AddNormForwardAndBackwardEqualTheAtenTwin) {
  SKIP_WITHOUT_CUDA();
  for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    for (int64_t d : {768, 1536, 2560, 130}) {
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
        add_norm_forward_cuda(x, branch, w, b, 1e-5, x_out, h, mean, rstd);
        auto rx = torch::empty_like(x), rh = torch::empty_like(h), rm = torch::empty_like(mean), rr = torch::empty_like(rstd);
        add_norm_forward_aten(x, branch, w, b, 1e-5, rx, rh, rm, rr);
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
        add_norm_backward_cuda(dh, dx_out, xo, mean, rstd, w, dx, dbranch, dw, db);
        auto rdx = torch::empty_like(x), rdb_ = branch_on ? torch::empty_like(h) : torch::Tensor();
        auto rdw = torch::empty_like(w), rdb = torch::empty_like(b);
        add_norm_backward_aten(dh, dx_out, xo, mean, rstd, w, rdx, rdb_, rdw, rdb);
        EXPECT_LT(rel_err(dx, rdx), 1e-5);
        if (branch_on) {
          EXPECT_LT(rel_err(dbranch, rdb_), tol_for(dtype));
        }
        EXPECT_LT(rel_err(dw, rdw), 1e-5);
        EXPECT_LT(rel_err(db, rdb), 1e-5);
        // Without the stream's gradient (the last norm, ln_f) and without a bias.
        auto undefined = torch::Tensor();
        add_norm_backward_cuda(dh, undefined, xo, mean, rstd, w, dx, dbranch, dw, undefined);
        add_norm_backward_aten(dh, undefined, xo, mean, rstd, w, rdx, rdb_, rdw, undefined);
        EXPECT_LT(rel_err(dx, rdx), 1e-5);
        EXPECT_LT(rel_err(dw, rdw), 1e-5);
      }
    }
  }
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
  add_norm_forward_cuda(x, none, w, none, 1e-5, x_out, h, mean, rstd);
  auto dh = torch::randn({N, d}, f32).to(torch::kBFloat16);
  auto dx = torch::empty_like(x), dw1 = torch::empty_like(w), dw2 = torch::empty_like(w);
  add_norm_backward_cuda(dh, none, x, mean, rstd, w, dx, none, dw1, none);
  add_norm_backward_cuda(dh, none, x, mean, rstd, w, dx, none, dw2, none);
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
  auto ref = torch::matmul(g.reshape({-1, 512}).t().to(torch::kFloat64), x.detach().reshape({-1, 256}).to(torch::kFloat64));
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
    auto idx = torch::randint(0, cfg.vocab_size, {4, 128}, torch::TensorOptions().device(kCuda).dtype(torch::kLong));
    auto run = [&](const std::string& kernels, int64_t chunk) {
      torch::manual_seed(6);
      GPT m(cfg);
      m->to(kCuda);
      auto rt = test::runtime("none", chunk, kernels, true, /*bf16=*/true);
      m->set_runtime(rt);
      torch::Tensor loss;
      {
        AutocastGuard ac(kCuda, rt.autocast());
        loss = m->forward(idx, idx).loss;
      }
      loss.backward();
      std::map<std::string, torch::Tensor> g;
      for (auto& [n, p] : m->unique_named_parameters()) g[n] = p.grad();
      return std::pair{loss.item<double>(), g};
    };
    auto [la, ga] = run("aten", 0);
    for (auto [kernels, chunk] : {std::pair<std::string, int64_t>{"fused", 0}, {"fused", 100}, {"weights", 0},
                                  {"norm", 0}, {"rope", 0}, {"loss", 0}, {"xsa", 0}}) {
      SCOPED_TRACE(kernels + " chunk " + std::to_string(chunk));
      auto [lf, gf] = run(kernels, chunk);
      EXPECT_NEAR(lf, la, 0.01);
      for (const auto& [name, g] : ga) {
        if (!g.defined()) continue;
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
