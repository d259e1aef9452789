// The "clip" kernel row: the global-norm clip's factor handed to the optimizer and
// applied inside AdamW's fused pass, against its twin, clipping the gradients first
// and then stepping (optim/grad_clip.h, optim/optimizer.h, train/step.h).
#include "config/run_config.h"
#include "helpers.h"
#include "live_head.h"
#include "model/gpt.h"
#include "step_rig.h"
#include "optim/grad_clip.h"
#include "optim/optimizer.h"
#include "optim/run_optimizer.h"
#include "train/parts.h"

#include <gtest/gtest.h>

#include <set>

using namespace xsagpt;

namespace {

// The loss of each step is scaled by these, so the gradient norm swings over four
// orders of magnitude and every step's clip factor differs. A factor that stays the
// same would hide a dropped clip: Adam's update does not see a constant scale.
constexpr double kLossScale[] = {1.0, 30.0, 0.2, 5.0, 50.0, 0.7};
constexpr double kMaxNorm = 0.05;

struct ClipRun {
  std::vector<torch::Tensor> params;
  std::vector<double> factors;  // the clip factor of each step
};

std::vector<std::pair<std::string, torch::Tensor>> clip_model_params(GPT& m, torch::ScalarType dtype,
                                                                    torch::Device device) {
  m->to(device, dtype);
  return m->unique_named_parameters();
}

// Trains a small model with AdamW (`impl`) or Muon, the clip either applied first
// (fold false) or folded into the optimizer's step. With fold, each step also checks
// that the gradients are left multiplied by the factor, as clipping leaves them.
ClipRun run_clipped(const std::string& impl, bool fold, bool clip, torch::ScalarType dtype = torch::kFloat32,
                    const std::string& optimizer = "adamw", torch::Device device = torch::kCPU) {
  torch::manual_seed(3);
  auto cfg = test::small_model("xsa");
  cfg.bias = true;
  GPT m(cfg);
  test::randomize_head(m);
  TrainConfig t;
  t.optimizer = schema::enum_from_name<Optimizer>(optimizer, "optimizer");
  t.adamw = schema::enum_from_name<AdamWImpl>(impl, "adamw");
  DistContext single;
  RunOptimizer opt(clip_model_params(m, dtype, device), t, adamw_config(t, *m), single);
  std::vector<torch::Tensor> params;
  for (auto& [n, p] : m->unique_named_parameters()) params.push_back(p);
  ClipRun out;
  torch::manual_seed(4);
  for (double scale : kLossScale) {
    auto idx = torch::randint(0, cfg.vocab_size, {2, 16}, torch::kLong).to(device);
    (m->forward(idx, idx).loss * scale).backward();
    if (!clip) {
      opt.step(1e-2);
    } else if (!fold) {
      const auto norm = clip_grad_norm(params, kMaxNorm);
      out.factors.push_back(clip_factor(norm, kMaxNorm).item<double>());
      opt.step(1e-2);
    } else {
      const auto factor = clip_factor(grad_norm(params), kMaxNorm);
      out.factors.push_back(factor.item<double>());
      std::vector<torch::Tensor> before;
      for (const auto& p : params) before.push_back(p.grad().clone());
      opt.step(1e-2, factor);
      for (size_t k = 0; k < params.size(); ++k)
        EXPECT_TRUE(torch::allclose(params[k].grad(), before[k] * factor.to(dtype), 1e-6, 1e-12))
            << "gradient " << k << " was not left multiplied by the clip factor";
    }
    for (auto& p : params) p.mutable_grad().reset();
  }
  for (const auto& p : params) out.params.push_back(p.detach().cpu());
  return out;
}

double max_diff(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double d = 0;
  for (size_t k = 0; k < a.size(); ++k) d = std::max(d, (a[k] - b[k]).abs().max().item<double>());
  return d;
}

// The comparison can see a clip go missing: every step clips, by factors that
// differ from step to step, and training without the clip ends elsewhere.
void expect_clipping_matters(const ClipRun& clipped, const ClipRun& unclipped) {
  std::set<double> distinct(clipped.factors.begin(), clipped.factors.end());
  ASSERT_EQ(clipped.factors.size(), std::size(kLossScale));
  for (double f : clipped.factors) ASSERT_LT(f, 0.5);
  ASSERT_EQ(distinct.size(), clipped.factors.size());
  ASSERT_GT(max_diff(clipped.params, unclipped.params), 1e-4);
}

}  // namespace

TEST(ClipFold, FusedAdamWAppliesTheFactorAsClippingFirstDoes) {
  const auto first = run_clipped("fused", /*fold=*/false, true);
  expect_clipping_matters(first, run_clipped("fused", false, /*clip=*/false));
  const auto folded = run_clipped("fused", /*fold=*/true, true);
  for (size_t s = 0; s < first.factors.size(); ++s) EXPECT_NEAR(folded.factors[s], first.factors[s], 1e-6 * first.factors[s]);
  // The kernel divides by the factor's float32 reciprocal where clipping multiplies
  // by the factor: a rounding apart, ~1e-7 of each gradient, which Adam's step
  // (lr * m / sqrt(v), lr 1e-2) turns into ~1e-9 of a parameter. A dropped or
  // misapplied factor moves parameters by 1e-4 and more (expect_clipping_matters).
  EXPECT_LT(max_diff(folded.params, first.params), 1e-6);
  // And both equal torch::optim::AdamW stepping on clipped gradients.
  EXPECT_LT(max_diff(folded.params, run_clipped("torch", false, true).params), 1e-5);
}

TEST(ClipFold, WithoutTheFusedKernelTheFactorIsMultipliedFirst) {
  // torch::optim::AdamW has no grad_scale: the factor is applied before it steps.
  const auto first = run_clipped("torch", false, true);
  expect_clipping_matters(first, run_clipped("torch", false, false));
  EXPECT_EQ(max_diff(run_clipped("torch", true, true).params, first.params), 0.0);
}

TEST(ClipFold, Float64GradientsTakeTheFactorAsTheClipDoes) {
  // The kernel's grad_scale is float32; float64 runs (the tests' precision) get the
  // factor multiplied in, as the clip does, so they stay exact against it.
  const auto first = run_clipped("fused", false, true, torch::kFloat64);
  expect_clipping_matters(first, run_clipped("fused", false, false, torch::kFloat64));
  EXPECT_EQ(max_diff(run_clipped("fused", true, true, torch::kFloat64).params, first.params), 0.0);
}

TEST(ClipFold, MuonGetsTheFactorToo) {
  // In float64, where AdamW's part takes the factor as the clip does too, so the two
  // runs are exact: in float32 the folded AdamW's rounding (above) reaches Muon's
  // matrices through the next forward, and Newton-Schulz magnifies it along their
  // small singular directions (5.6e-6 measured), which would blur this comparison.
  // Muon's update is normalised, but its momentum mixes steps whose factors differ,
  // so a factor Muon's gradients missed shows.
  const auto first = run_clipped("fused", false, true, torch::kFloat64, "muon");
  expect_clipping_matters(first, run_clipped("fused", false, false, torch::kFloat64, "muon"));
  EXPECT_EQ(max_diff(run_clipped("fused", true, true, torch::kFloat64, "muon").params, first.params), 0.0);
}

TEST(ClipFold, TrainingStepsWithTheClipRowMatchTheSeparateClip) {
  auto cfg = test::small_model("xsa");
  torch::manual_seed(5);
  std::vector<std::pair<torch::Tensor, torch::Tensor>> data;
  for (int i = 0; i < 8; ++i)
    data.emplace_back(torch::randint(0, cfg.vocab_size, {2, 16}, torch::kLong),
                      torch::randint(0, cfg.vocab_size, {2, 16}, torch::kLong));
  auto train = [&](const std::string& kernels, double grad_clip) {
    torch::manual_seed(12);
    GPT m(cfg);
    test::randomize_head(m);
    m->set_runtime(test::runtime("none", 0, kernels));
    test::StepRig step(m, /*accumulation=*/2, grad_clip);
    EXPECT_EQ(step.parts.optimizer->impl(), "fused");
    size_t i = 0;
    std::vector<double> losses, norms;
    for (int s = 0; s < 4; ++s) {
      const auto stats = step([&] { return data[i++]; }, 1e-2);
      losses.push_back(stats.loss.item<double>());
      norms.push_back(stats.grad_norm.item<double>());
    }
    std::vector<torch::Tensor> params;
    for (const auto& p : step.parts.params) params.push_back(p.detach().clone());
    return std::tuple{losses, norms, params};
  };
  const double clip = 0.05;
  auto [la, na, pa] = train("aten", clip);
  auto [lf, nf, pf] = train("clip", clip);
  for (double n : na) ASSERT_GT(n, 2 * clip);  // every step clips
  ASSERT_GT(max_diff(std::get<2>(train("aten", 0.0)), pa), 1e-4);  // and clipping shows in the parameters
  for (size_t s = 0; s < la.size(); ++s) {
    EXPECT_NEAR(lf[s], la[s], 1e-5) << "step " << s;
    EXPECT_NEAR(nf[s], na[s], 1e-5 * na[s]) << "step " << s;
  }
  EXPECT_LT(max_diff(pf, pa), 1e-6);
}

// On CUDA the fold runs ATen's CUDA kernel, whose grad_scale path is a separate
// code path from the CPU one above.
TEST(ClipFoldCuda, FusedAdamWAppliesTheFactorAsClippingFirstDoes) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const torch::Device cuda(torch::kCUDA);
  const auto first = run_clipped("fused", false, true, torch::kFloat32, "adamw", cuda);
  expect_clipping_matters(first, run_clipped("fused", false, false, torch::kFloat32, "adamw", cuda));
  EXPECT_LT(max_diff(run_clipped("fused", true, true, torch::kFloat32, "adamw", cuda).params, first.params), 1e-6);
}
