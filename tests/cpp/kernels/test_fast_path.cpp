// The whole model and training step with the fused kernels (train.kernels) against
// the ATen path, on the CPU, where the kernels' ATen twins run: the same losses,
// gradients and updates in float64 for every memory option and model variant, and
// within bf16 noise when computing in bf16 with the bf16 weight copies, through
// training steps and a resume from a checkpoint. Every comparison runs with a
// random LM head (live_head.h): under the default zero head every gradient below
// it is 0 on both paths. (On CUDA: test_kernels_cuda.cpp.)
#include "helpers.h"
#include "live_head.h"
#include "model/gpt.h"
#include "run/checkpoint.h"
#include "run/from_checkpoint.h"
#include "step_rig.h"

#include <ATen/autocast_mode.h>
#include <fmt/format.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

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
  test::randomize_head(m);
  m->to(dtype);
  m->set_runtime(rt);
  auto loss = m->forward(idx, targets).loss;
  loss.backward();
  return {loss.item<double>(), test::gradients(m)};
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
  cfg.set_attention("xsa", {{"xsa_gate", c.gate ? "sa" : "off"}, {"xsa_layers", {1}}});
  torch::manual_seed(3);
  auto idx = torch::randint(0, cfg.vocab_size, {2, 17}, torch::kLong);
  auto targets = torch::randint(0, cfg.vocab_size, {2, 17}, torch::kLong);
  targets[1][4] = -1;
  const auto ref = run(cfg, test::runtime(c.recompute, c.loss_chunk, "aten"), torch::kFloat64, idx, targets);
  const auto got = run(cfg, test::runtime(c.recompute, c.loss_chunk, "fused"), torch::kFloat64, idx, targets);
  EXPECT_NEAR(got.loss, ref.loss, 1e-12);
  test::assert_live(ref.grad);  // every parameter, the XSA gate and sinks included
  ASSERT_EQ(got.grad.size(), ref.grad.size());
  for (const auto& [name, g] : ref.grad) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(g.defined() && got.grad.at(name).defined());
    EXPECT_TRUE(torch::allclose(got.grad.at(name), g, 1e-9, 1e-12))
        << "max abs diff " << (got.grad.at(name) - g).abs().max().item<double>();
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, FastPath,
                         ::testing::Values(FastPathCase{"plain", "none", 0, false, false, false, 0},
                                           FastPathCase{"tied_bias", "none", 0, true, true, false, 0},
                                           FastPathCase{"chunked", "none", 7, false, false, false, 0},
                                           FastPathCase{"mlp_recompute", "mlp", 0, false, true, false, 0},
                                           FastPathCase{"block_recompute_chunked", "block", 5, true, false, false, 0},
                                           FastPathCase{"block_recompute_gate_sinks", "block", 0, false, true, true, 2},
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
    test::randomize_head(m);
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
  test::assert_live(fp32.grad);
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
    test::randomize_head(m);
    m->to(torch::kFloat64);
    m->set_runtime(test::runtime("none", 3, kernels));
    test::StepRig step(m, /*accumulation=*/2);
    size_t i = 0;
    std::vector<double> losses;
    for (int s = 0; s < 3; ++s) losses.push_back(step([&] { return data[i++]; }, 1e-2).loss.item<double>());
    return std::pair{losses, step.parts.params};
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

namespace {

// A few bf16 training steps of a small XSA model with gate and sinks, the loss of
// each and the parameters after the last.
struct Trained {
  std::vector<double> losses;
  std::vector<torch::Tensor> params;
};

ModelConfig bf16_model() {
  auto cfg = test::small_model("xsa");
  cfg.d_model = 64;
  cfg.set_attention("xsa", {{"xsa_gate", "sa"}});
  cfg.n_sink = 1;
  cfg.head_init = HeadInit::kZero;  // no draws for the head before randomize_head: the trajectory measured below
  return cfg;
}

std::vector<std::pair<torch::Tensor, torch::Tensor>> bf16_batches(const ModelConfig& cfg, int n) {
  torch::manual_seed(21);
  std::vector<std::pair<torch::Tensor, torch::Tensor>> data;
  for (int i = 0; i < n; ++i) {
    auto seq = torch::randint(0, 8, {2, 17}, torch::kLong);  // a small alphabet: learnable in a few steps
    data.emplace_back(seq.narrow(1, 0, 16), seq.narrow(1, 1, 16));
  }
  return data;
}

}  // namespace

// The weight cache in use: bf16 products from copies made once per optimizer step,
// the head's gradient scaled by 1/3 (three micro-batches), against ATen under
// autocast, which casts the float32 weights afresh at every use. Stale copies, a
// wrong scale or a broken backward would move the losses of later steps.
TEST(FastPath, Bf16TrainingStepsWithTheWeightCacheFollowAutocast) {
  const auto cfg = bf16_model();
  const auto data = bf16_batches(cfg, 18);
  auto train = [&](const std::string& kernels) {
    torch::manual_seed(22);
    GPT m(cfg);
    test::randomize_head(m, 0.1);
    m->set_runtime(test::runtime("none", 0, kernels, false, /*bf16=*/true));
    test::StepRig step(m, /*accumulation=*/3);
    size_t i = 0;
    Trained t;
    for (int s = 0; s < 6; ++s) t.losses.push_back(step([&] { return data[i++]; }, 3e-3).loss.item<double>());
    t.params = step.parts.params;
    for (auto& p : t.params) p = p.detach().clone();
    return t;
  };
  const auto aten = train("aten"), fused = train("fused");
  // It learns, each step moving the loss by 0.2 or more (measured: 0.23..0.41)...
  for (size_t s = 1; s < aten.losses.size(); ++s) ASSERT_LT(aten.losses[s], aten.losses[s - 1] - 0.1) << "step " << s;
  // ...and both paths take the same steps within bf16 rounding (measured: 0.0016 at
  // most; a step taken with stale weight copies is a whole step's 0.2 off).
  for (size_t s = 0; s < aten.losses.size(); ++s) EXPECT_NEAR(fused.losses[s], aten.losses[s], 0.01) << "step " << s;
  double diff = 0, moved = 0;
  for (size_t k = 0; k < aten.params.size(); ++k) {
    diff += (fused.params[k] - aten.params[k]).pow(2).sum().item<double>();
    moved += aten.params[k].pow(2).sum().item<double>();
  }
  EXPECT_LT(std::sqrt(diff / moved), 0.02);  // measured: 0.0036
}

// Resume with the weight cache on: a run saved after two steps and continued in a
// fresh process (whose model had already filled its cache from other weights)
// takes exactly the steps the uninterrupted run takes.
TEST(FastPath, ResumeFromACheckpointWithTheWeightCacheContinuesTheRun) {
  const auto cfg = bf16_model();
  const auto data = bf16_batches(cfg, 4);
  const auto rt = test::runtime("none", 0, "fused", false, /*bf16=*/true);
  auto make = [&](uint64_t seed) {
    torch::manual_seed(seed);
    GPT m(cfg);
    test::randomize_head(m);
    m->set_runtime(rt);
    return m;
  };
  auto run_steps = [&](GPT& m, test::StepRig& step, size_t first, size_t n) {
    std::vector<double> losses;
    for (size_t s = first; s < first + n; ++s)
      losses.push_back(step([&] { return data[s]; }, 1e-2).loss.item<double>());
    return losses;
  };

  GPT whole = make(23);
  test::StepRig whole_step(whole, 1);
  const auto want = run_steps(whole, whole_step, 0, 4);

  const auto file = std::filesystem::temp_directory_path() / fmt::format("xsagpt_fastpath_{}.pt", ::getpid());
  {
    GPT first = make(23);
    test::StepRig step(first, 1);
    run_steps(first, step, 0, 2);
    Checkpoint c;
    c.step = 2;
    for (const auto& item : first->named_parameters()) c.model[item.key()] = item.value();
    c.optimizer = step.parts.optimizer->state();
    save_checkpoint(c, file);
  }
  GPT resumed = make(99);  // other weights...
  {
    torch::NoGradGuard g;
    resumed->forward(data[0].first, data[0].second);  // ...already in its bf16 copies
  }
  test::StepRig step(resumed, 1);
  const auto c = load_checkpoint(file);
  std::filesystem::remove(file);
  load_weights(resumed, c.model, file.string());  // as TrainingState::restore does
  resumed->parameters_changed();
  step.parts.optimizer->load_state(c.optimizer, file.string());
  const auto got = run_steps(resumed, step, 2, 2);
  ASSERT_GT(std::abs(want[2] - want[0]), 0.05);  // the steps did move the weights
  EXPECT_DOUBLE_EQ(got[0], want[2]);
  EXPECT_DOUBLE_EQ(got[1], want[3]);
  for (size_t k = 0; k < step.parts.params.size(); ++k)
    EXPECT_TRUE(torch::equal(step.parts.params[k], whole_step.parts.params[k])) << k;
}
