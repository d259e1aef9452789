// The whole model and training step with the fused kernels (train.kernels) against
// the ATen path, on the CPU, where the kernels' ATen twins run: the same losses,
// gradients and updates in float64 for every memory option and model variant, and
// within bf16 noise when computing in bf16. (On CUDA: test_kernels_cuda.cpp.)
#include "helpers.h"
#include "model/gpt.h"
#include "step_rig.h"

#include <ATen/autocast_mode.h>

#include <gtest/gtest.h>

using namespace xsagpt;

namespace {

struct Grads {
  double loss;
  std::map<std::string, torch::Tensor> grad;
};

Grads run(const ModelConfig& cfg, const Runtime& rt, torch::ScalarType dtype, const torch::Tensor& idx,
          const torch::Tensor& targets) {
  torch::manual_seed(11);
  GPT m(cfg);
  m->to(dtype);
  m->set_runtime(rt);
  auto loss = m->forward(idx, targets).loss;
  loss.backward();
  Grads g{loss.item<double>(), {}};
  for (auto& [n, p] : m->unique_named_parameters()) g.grad[n] = p.grad().defined() ? p.grad().clone() : torch::Tensor();
  return g;
}

}  // namespace

struct FastPathCase {
  std::string name, recompute;
  int64_t loss_chunk;
  bool tie, bias, gate;
  int64_t n_sink;
};

class FastPath : public ::testing::TestWithParam<FastPathCase> {};

TEST_P(FastPath, FusedKernelsGiveTheAtenLossAndGradientsInFloat64) {
  const auto c = GetParam();
  auto cfg = test::small_model("xsa");
  cfg.tie_embeddings = c.tie;
  cfg.bias = c.bias;
  cfg.n_sink = c.n_sink;
  if (c.gate) cfg.xsa_gate = "sa";
  cfg.xsa_layers = json::array({1});
  torch::manual_seed(3);
  auto idx = torch::randint(0, cfg.vocab_size, {2, 17}, torch::kLong);
  auto targets = torch::randint(0, cfg.vocab_size, {2, 17}, torch::kLong);
  targets[1][4] = -1;
  const auto ref = run(cfg, test::runtime(c.recompute, c.loss_chunk, "aten"), torch::kFloat64, idx, targets);
  const auto got = run(cfg, test::runtime(c.recompute, c.loss_chunk, "fused"), torch::kFloat64, idx, targets);
  EXPECT_NEAR(got.loss, ref.loss, 1e-12);
  ASSERT_EQ(got.grad.size(), ref.grad.size());
  for (const auto& [name, g] : ref.grad) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(g.defined() && got.grad.at(name).defined());
    EXPECT_TRUE(torch::allclose(got.grad.at(name), g, 1e-9, 1e-12))
        << "max abs diff " << (got.grad.at(name) - g).abs().max().item<double>();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Kernels, FastPath,
    ::testing::Values(FastPathCase{"plain", "none", 0, false, false, false, 0},
                      FastPathCase{"tied_bias", "none", 0, true, true, false, 0},
                      FastPathCase{"chunked", "none", 7, false, false, false, 0},
                      FastPathCase{"mlp_recompute", "mlp", 0, false, true, false, 0},
                      FastPathCase{"block_recompute_chunked", "block", 5, true, false, false, 0},
                      FastPathCase{"gate_and_sinks", "none", 0, false, false, true, 2}),
    [](const auto& info) { return info.param.name; });

TEST(FastPath, Bf16WithCopiedWeightsStaysWithinBf16NoiseOfAutocast) {
  auto cfg = test::small_model("xsa");
  cfg.d_model = 64;
  torch::manual_seed(4);
  auto idx = torch::randint(0, cfg.vocab_size, {2, 24}, torch::kLong);
  const auto fp32 = run(cfg, test::runtime("none", 0, "aten"), torch::kFloat32, idx, idx);
  const auto autocast = [&] {
    auto rt = test::runtime("none", 0, "aten", false, /*bf16=*/true);
    torch::manual_seed(11);
    GPT m(cfg);
    m->set_runtime(rt);
    at::autocast::set_autocast_enabled(torch::kCPU, true);
    at::autocast::set_autocast_dtype(torch::kCPU, torch::kBFloat16);
    auto loss = m->forward(idx, idx).loss.item<double>();
    at::autocast::set_autocast_enabled(torch::kCPU, false);
    at::autocast::clear_cache();
    return loss;
  }();
  const auto fused = run(cfg, test::runtime("none", 4, "fused", false, /*bf16=*/true), torch::kFloat32, idx, idx);
  // bf16 rounding moves the loss by a few 1e-3 either way; both paths land there.
  EXPECT_NEAR(fused.loss, fp32.loss, 0.02);
  EXPECT_NEAR(autocast, fp32.loss, 0.02);
  for (const auto& [name, g] : fp32.grad) {
    SCOPED_TRACE(name);
    const auto& f = fused.grad.at(name);
    ASSERT_EQ(f.scalar_type(), torch::kFloat32);  // master gradients stay float32
    const double rel = (f - g).norm().item<double>() / std::max(1e-12, g.norm().item<double>());
    EXPECT_LT(rel, 0.05);
  }
}

TEST(FastPath, TrainingStepsMatchTheAtenPathAndRefreshTheWeightCopies) {
  auto cfg = test::small_model("xsa");
  torch::manual_seed(5);
  std::vector<std::pair<torch::Tensor, torch::Tensor>> data;
  for (int i = 0; i < 6; ++i)
    data.emplace_back(torch::randint(0, cfg.vocab_size, {2, 16}, torch::kLong),
                      torch::randint(0, cfg.vocab_size, {2, 16}, torch::kLong));
  auto train = [&](const std::string& kernels) {
    torch::manual_seed(12);
    GPT m(cfg);
    m->to(torch::kFloat64);
    m->set_runtime(test::runtime("none", 3, kernels));
    test::StepRig step(m, /*accumulation=*/2);
    size_t i = 0;
    std::vector<double> losses;
    for (int s = 0; s < 3; ++s) losses.push_back(step([&] { return data[i++]; }, 1e-2).loss.item<double>());
    return std::pair{losses, step.params};
  };
  auto [la, pa] = train("aten");
  auto [lf, pf] = train("fused");
  for (size_t s = 0; s < la.size(); ++s) EXPECT_NEAR(lf[s], la[s], 1e-10) << "step " << s;
  for (size_t k = 0; k < pa.size(); ++k) EXPECT_TRUE(torch::allclose(pf[k], pa[k], 1e-9, 1e-12)) << "parameter " << k;
}

TEST(FastPath, WeightCopiesFollowTheOptimizer) {
  // bf16 copies: after each step the next forward must see the updated weights.
  auto cfg = test::small_model("sa");
  torch::manual_seed(6);
  GPT m(cfg);
  m->set_runtime(test::runtime("none", 0, "weights", false, /*bf16=*/true));
  auto idx = torch::randint(0, cfg.vocab_size, {2, 8}, torch::kLong);
  test::StepRig step(m, 1);
  std::vector<double> losses;
  for (int s = 0; s < 4; ++s) losses.push_back(step([&] { return std::pair{idx, idx}; }, 3e-2).loss.item<double>());
  EXPECT_LT(losses.back(), losses.front() - 0.1);
  // The copies the next forward uses are the updated weights: the loss through
  // them equals the float32 loss of the same weights within bf16 rounding (stale
  // copies would give a loss near the first step's).
  torch::NoGradGuard g;
  const auto through_copies = m->forward(idx, idx).loss.item<double>();
  m->set_runtime(test::runtime());
  const auto fp32 = m->forward(idx, idx).loss.item<double>();
  EXPECT_NEAR(through_copies, fp32, 0.05);
  EXPECT_LT(fp32, losses.front() - 0.1);
}
