// The graphs row of train.kernels (train/graph_step.h): the training micro-step on
// static buffers with gradients kept in place, captured as a CUDA graph on a GPU.
// On the CPU the same static-buffer step runs without capture (the row's ATen
// twin) and must take exactly the plain step's steps; on CUDA (GraphsCuda.*,
// skipped elsewhere) the replayed graph must follow the eager fused step, capture
// again when the batch's shape changes, free its memory pool with the step, and
// draw fresh dropout masks on every replay.
#include "helpers.h"
#include "kernels/built.h"
#include "kernels/fp8_linear.h"
#include "kernels/linear.h"
#include "live_head.h"
#include "model/gpt.h"
#include "step_rig.h"
#include "train/graph_step.h"
#include "util/error.h"

#include <gtest/gtest.h>

#include <cmath>

#ifdef XSAGPT_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

using namespace xsagpt;

namespace {

// XSA with its gate and a sink: every parameter gets a gradient, so the plain step
// (which skips a parameter without one) and the graphs step (every parameter has
// one) update the same parameters.
ModelConfig graphs_model() {
  auto cfg = test::small_model("xsa");
  cfg.xsa_gate = XsaGate::kSa;
  cfg.n_sink = 1;
  return cfg;
}

// n micro-batches (B, T) over a small alphabet: learnable in a few steps.
std::vector<std::pair<torch::Tensor, torch::Tensor>> graphs_batches(int n, int64_t B, int64_t T,
                                                                     torch::Device device = torch::kCPU,
                                                                     uint64_t seed = 31) {
  torch::manual_seed(seed);
  std::vector<std::pair<torch::Tensor, torch::Tensor>> data;
  for (int i = 0; i < n; ++i) {
    auto seq = torch::randint(0, 8, {B, T + 1}, torch::kLong).to(device);
    data.emplace_back(seq.narrow(1, 0, T).contiguous(), seq.narrow(1, 1, T).contiguous());
  }
  return data;
}

struct GraphsRun {
  std::vector<double> losses;
  std::vector<torch::Tensor> params;  // after the last step, on the CPU in float64
  int64_t captures = 0;
};

// `steps` optimizer steps of `accumulation` micro-batches each from `data` (in
// order), the model seeded alike every time and run as `rt` says.
GraphsRun graphs_train(const ModelConfig& cfg, const Runtime& rt, const std::vector<std::pair<torch::Tensor, torch::Tensor>>& data,
                       int steps, int64_t accumulation, torch::Device device = torch::kCPU) {
  torch::manual_seed(32);
  GPT m(cfg);
  test::randomize_head(m, 0.1);
  m->set_runtime(rt);
  m->to(device);
  m->parameters_changed();
  test::StepRig step(m, accumulation);
  GraphsRun r;
  size_t i = 0;
  for (int s = 0; s < steps; ++s)
    r.losses.push_back(step([&] { return data.at(i++); }, 3e-3).loss.item<double>());
  for (const auto& p : step.parts.params) r.params.push_back(p.detach().to(torch::kCPU, torch::kFloat64));
  if (step.step->graph_step()) r.captures = step.step->graph_step()->captures();
  return r;
}

// sqrt(sum |a - b|^2 / sum |b|^2) over all parameters.
double graphs_param_rel_diff(const GraphsRun& a, const GraphsRun& b) {
  double diff = 0, norm = 0;
  for (size_t k = 0; k < a.params.size(); ++k) {
    diff += (a.params[k] - b.params[k]).pow(2).sum().item<double>();
    norm += b.params[k].pow(2).sum().item<double>();
  }
  return std::sqrt(diff / norm);
}

// The run moved: the loss fell and every parameter left its initial value.
void graphs_assert_trained(const GraphsRun& r, const ModelConfig& cfg) {
  ASSERT_LT(r.losses.back(), r.losses.front() - 0.05) << "the steps did not train: nothing to compare";
  torch::manual_seed(32);
  GPT init(cfg);
  test::randomize_head(init, 0.1);
  const auto first = init->unique_parameters();
  ASSERT_EQ(first.size(), r.params.size());
  for (size_t k = 0; k < first.size(); ++k)
    ASSERT_FALSE(torch::equal(first[k].to(torch::kFloat64), r.params[k])) << "parameter " << k << " never moved";
}

}  // namespace

TEST(GraphsRow, IsItsOwnKernelRowOutsideFusedAndAuto) {
  const auto k = parse_kernels("graphs", /*cuda=*/true);
  EXPECT_TRUE(k.graphs);
  EXPECT_EQ(describe(k), "graphs");
  EXPECT_FALSE(parse_kernels("fused", true).graphs);
  EXPECT_FALSE(parse_kernels("auto", true).graphs);
  const auto both = parse_kernels("fused,graphs", true);
  EXPECT_TRUE(both.graphs && both.weights && both.loss);
  EXPECT_EQ(describe(both), describe(parse_kernels("fused", true)) + ",graphs");
  const auto names = kernel_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "graphs"), names.end());
  EXPECT_NE(std::string(kernels_help()).find("\"fused\" (all but fp8, fp8_all, graphs and gelu)"), std::string::npos)
      << kernels_help();
}

TEST(GraphsRow, RefusesSeveralProcessesAndActivationCheckpointing) {
  EXPECT_EQ(graphs_refusal(test::runtime("block", 0, "aten"), 4), "");  // without graphs nothing is refused
  EXPECT_EQ(graphs_refusal(test::runtime("none", 0, "fused,graphs"), 1), "");
  const auto world = graphs_refusal(test::runtime("none", 0, "graphs"), 2);
  EXPECT_EQ(world.rfind("train.kernels: ", 0), 0u) << world;
  EXPECT_NE(world.find("2 processes"), std::string::npos) << world;
  for (const std::string mode : {"mlp", "block"}) {
    const auto why = graphs_refusal(test::runtime(mode, 0, "graphs"), 1);
    EXPECT_EQ(why.rfind("train.kernels: ", 0), 0u) << why;
    EXPECT_NE(why.find("train.activation_checkpointing=\"" + mode + "\""), std::string::npos) << why;
  }
  // A launched process of one rank has DDP's reducer for a sync, which a step may not bypass.
  struct LaunchedSync : GradientSync {
    using GradientSync::GradientSync;
  };
  EXPECT_EQ(graphs_refusal(GradientSync(std::vector<torch::Tensor>{})), "");
  const auto launched = graphs_refusal(LaunchedSync(std::vector<torch::Tensor>{}));
  EXPECT_EQ(launched.rfind("train.kernels: ", 0), 0u) << launched;
  EXPECT_NE(launched.find("launched for a distributed run"), std::string::npos) << launched;
  // A step built around such a model refuses it too (bench builds steps without the trainer).
  GPT m(graphs_model());
  m->set_runtime(test::runtime("mlp", 0, "graphs"));
  test::StepRig step(m, 1);
  const auto data = graphs_batches(1, 2, 8);
  const auto err =
      test::error_of<ConfigError>([&] { step([&] { return data[0]; }, 1e-3); });
  EXPECT_NE(err.find("train.kernels: graphs cannot capture train.activation_checkpointing=\"mlp\""), std::string::npos)
      << err;
}

// The row's CPU twin: static buffers, gradients zeroed in place, every micro-step
// adding into them. Bitwise the plain step's arithmetic: a first micro-step's
// gradient added to zeros is that gradient, and every later one is added in both.
TEST(GraphsRow, StepsOnTheCpuAreThePlainStepsBitForBit) {
  const auto cfg = graphs_model();
  const auto data = graphs_batches(12, 2, 16);
  for (const auto& [kernels, bf16] : {std::pair{"aten", false}, std::pair{"fused", true}}) {
    SCOPED_TRACE(kernels);
    const auto rt_off = test::runtime("none", 0, kernels, false, bf16);
    const auto rt_on = test::runtime("none", 0, kernels == std::string("aten") ? "graphs" : std::string(kernels) + ",graphs",
                                     false, bf16);
    const auto off = graphs_train(cfg, rt_off, data, 4, /*accumulation=*/3);
    const auto on = graphs_train(cfg, rt_on, data, 4, 3);
    graphs_assert_trained(off, cfg);
    EXPECT_EQ(on.captures, 0);  // nothing is captured on a CPU
    EXPECT_EQ(on.losses, off.losses);
    for (size_t k = 0; k < off.params.size(); ++k) EXPECT_TRUE(torch::equal(on.params[k], off.params[k])) << k;
  }
}

// A batch of another shape gets new static buffers; the steps stay the plain ones.
TEST(GraphsRow, ANewBatchShapeOnTheCpuStillTakesThePlainSteps) {
  const auto cfg = graphs_model();
  auto data = graphs_batches(4, 2, 16);
  for (const auto& b : graphs_batches(4, 3, 8, torch::kCPU, 33)) data.push_back(b);
  const auto off = graphs_train(cfg, test::runtime(), data, 4, 2);
  const auto on = graphs_train(cfg, test::runtime("none", 0, "graphs"), data, 4, 2);
  ASSERT_NE(off.losses.front(), off.losses.back());
  EXPECT_EQ(on.losses, off.losses);
  for (size_t k = 0; k < off.params.size(); ++k) EXPECT_TRUE(torch::equal(on.params[k], off.params[k])) << k;
}

// With graphs the gradients outlive the step, zeroed where they are (a graph
// writes to their addresses); without, the step sets them to none.
TEST(GraphsRow, GradientsStayInPlaceAndAreZeroedAfterEachStep) {
  const auto data = graphs_batches(4, 2, 16);
  for (const bool graphs : {false, true}) {
    SCOPED_TRACE(graphs ? "graphs" : "plain");
    torch::manual_seed(34);
    GPT m(graphs_model());
    test::randomize_head(m, 0.1);
    m->set_runtime(test::runtime("none", 0, graphs ? "graphs" : "aten"));
    test::StepRig step(m, 2);
    size_t i = 0;
    step([&] { return data[i++]; }, 1e-3);
    std::vector<const void*> where;
    for (const auto& p : step.parts.params) {
      ASSERT_EQ(p.grad().defined(), graphs);
      if (!graphs) continue;
      EXPECT_EQ(p.grad().abs().max().item<double>(), 0.0);
      where.push_back(p.grad().data_ptr());
    }
    step([&] { return data[i++]; }, 1e-3);
    for (size_t k = 0; k < where.size(); ++k) EXPECT_EQ(step.parts.params[k].grad().data_ptr(), where[k]) << k;
  }
}

// The weight copies a graph reads are refreshed where they are: the bf16 copies
// always, the FP8 copies when asked to keep their addresses.
TEST(GraphsRow, WeightCopiesRefreshInPlace) {
  torch::manual_seed(35);
  auto w = torch::randn({32, 16});
  WeightCache bf16;
  const auto copy = bf16.get(w, torch::kBFloat16);
  const auto* at = copy.data_ptr();
  {
    torch::NoGradGuard g;
    w.mul_(2);
  }
  bf16.refresh();
  EXPECT_EQ(bf16.get(w, torch::kBFloat16).data_ptr(), at);
  EXPECT_TRUE(torch::equal(bf16.get(w, torch::kBFloat16), w.to(torch::kBFloat16)));

  Fp8WeightCache fp8;
  const auto q_at = fp8.get(w).q.data_ptr(), inv_at = fp8.get(w).inv.data_ptr();
  {
    torch::NoGradGuard g;
    w.mul_(-3);
  }
  fp8.refresh(/*keep_addresses=*/true);
  const auto want = quantize_fp8(w, kFp8Forward);
  EXPECT_EQ(fp8.get(w).q.data_ptr(), q_at);
  EXPECT_EQ(fp8.get(w).inv.data_ptr(), inv_at);
  EXPECT_TRUE(torch::equal(fp8.get(w).q.to(torch::kFloat32), want.q.to(torch::kFloat32)));
  EXPECT_TRUE(torch::equal(fp8.get(w).inv, want.inv));
}

// ---- CUDA ----------------------------------------------------------------------

namespace {

bool graphs_skip() { return !torch::cuda::is_available() || !cuda_kernels_built(); }
#define GRAPHS_SKIP_WITHOUT_CUDA() \
  if (graphs_skip()) GTEST_SKIP() << "no CUDA device or no CUDA kernels in this build"

const torch::Device kGraphsCuda(torch::kCUDA, 0);

// Widths that are multiples of 16, as the fp8 GEMMs need.
ModelConfig graphs_cuda_model() {
  auto cfg = graphs_model();
  cfg.d_model = 64;
  cfg.n_head = 4;
  cfg.head_dim = 16;
  cfg.vocab_size = 128;
  return cfg;
}

}  // namespace

// Replayed graphs against the eager step in bf16: 5 steps of 2 micro-batches,
// the third micro-batch captured (two warm-up micro-steps first), the rest replays.
// The arithmetic is the same kernels on the same inputs; only kernels whose
// reductions use atomics (attention's backward) may round differently from run to
// run, eager or not.
TEST(GraphsCuda, ReplayedStepsFollowTheEagerFusedSteps) {
  GRAPHS_SKIP_WITHOUT_CUDA();
  const auto cfg = graphs_cuda_model();
  const auto data = graphs_batches(10, 4, 32, kGraphsCuda);
  // "aten": ATen's ops under bf16 autocast, captured with autocast's cast cache off.
  for (const std::string kernels : {"fused", "fused,fp8", "aten"}) {
    SCOPED_TRACE(kernels);
    const auto with_graphs = kernels == "aten" ? std::string("graphs") : kernels + ",graphs";
    const auto eager = graphs_train(cfg, test::runtime("none", 0, kernels, true, true), data, 5, 2, kGraphsCuda);
    const auto graph = graphs_train(cfg, test::runtime("none", 0, with_graphs, true, true), data, 5, 2, kGraphsCuda);
    ASSERT_LT(eager.losses.back(), eager.losses.front() - 0.05) << "the steps did not train: nothing to compare";
    EXPECT_EQ(graph.captures, 1);
    double worst = 0;
    for (size_t s = 0; s < eager.losses.size(); ++s) {
      worst = std::max(worst, std::abs(graph.losses[s] - eager.losses[s]));
      EXPECT_NEAR(graph.losses[s], eager.losses[s], 1e-3) << "step " << s;
    }
    const double rel = graphs_param_rel_diff(graph, eager);
    std::cout << "[graphs] " << kernels << ": max |loss - eager| " << worst << ", parameters' relative L2 diff " << rel
              << "\n";
    EXPECT_LT(rel, 1e-3);
  }
}

// A batch of another shape drops the graph; the next micro-steps warm up and
// capture again, and the steps still follow the eager ones.
TEST(GraphsCuda, ANewBatchShapeCapturesAgain) {
  GRAPHS_SKIP_WITHOUT_CUDA();
  const auto cfg = graphs_cuda_model();
  auto data = graphs_batches(6, 4, 32, kGraphsCuda);
  for (const auto& b : graphs_batches(6, 2, 24, kGraphsCuda, 36)) data.push_back(b);
  const auto eager = graphs_train(cfg, test::runtime("none", 0, "fused", true, true), data, 6, 2, kGraphsCuda);
  const auto graph = graphs_train(cfg, test::runtime("none", 0, "fused,graphs", true, true), data, 6, 2, kGraphsCuda);
  EXPECT_EQ(graph.captures, 2);
  for (size_t s = 0; s < eager.losses.size(); ++s) EXPECT_NEAR(graph.losses[s], eager.losses[s], 1e-3) << "step " << s;
  EXPECT_LT(graphs_param_rel_diff(graph, eager), 1e-3);
}

#ifdef XSAGPT_CUDA
// The graph's private memory pool holds memory while the step lives and none after.
TEST(GraphsCuda, TheGraphsMemoryPoolGoesWithTheStep) {
  GRAPHS_SKIP_WITHOUT_CUDA();
  namespace alloc = c10::cuda::CUDACachingAllocator;
  auto pool_bytes = [](std::pair<uint64_t, uint64_t> id) {
    size_t n = 0;
    for (const auto& s : alloc::snapshot().segments)
      if (s.owner_private_pool_id.first == id.first && s.owner_private_pool_id.second == id.second) n += s.total_size;
    return n;
  };
  torch::manual_seed(37);
  GPT m(graphs_cuda_model());
  m->set_runtime(test::runtime("none", 0, "fused,graphs", true, true));
  m->to(kGraphsCuda);
  m->parameters_changed();
  test::StepRig step(m, 1);
  const auto data = graphs_batches(4, 4, 32, kGraphsCuda);
  for (int s = 0; s < 4; ++s) step([&] { return data[s]; }, 1e-3);
  ASSERT_EQ(step.step->graph_step()->captures(), 1);
  const auto pool = step.step->graph_step()->pool();
  ASSERT_NE(pool, (std::pair<uint64_t, uint64_t>{0, 0}));
  torch::cuda::synchronize();
  EXPECT_GT(pool_bytes(pool), 0u);
  step.step.reset();
  torch::cuda::synchronize();
  alloc::emptyCache();
  EXPECT_EQ(pool_bytes(pool), 0u);
}
#endif

// Dropout inside the graph: CUDAGraph moves the generator's offset on every
// replay, so replays of one batch on unchanged weights draw other masks (other
// losses), while without dropout they give the same loss.
TEST(GraphsCuda, ReplaysDrawFreshDropoutMasks) {
  GRAPHS_SKIP_WITHOUT_CUDA();
  const auto data = graphs_batches(1, 4, 32, kGraphsCuda);
  for (const double p : {0.0, 0.3}) {
    SCOPED_TRACE(p);
    auto cfg = graphs_cuda_model();
    cfg.dropout = p;
    torch::manual_seed(38);
    GPT m(cfg);
    test::randomize_head(m, 0.1);
    m->set_runtime(test::runtime("none", 0, "fused,graphs", true, true));
    m->to(kGraphsCuda);
    m->train();
    m->parameters_changed();
    GradientSync sync(m->unique_parameters());
    GraphStep g(m, m->unique_parameters(), 1, sync);
    std::vector<double> losses;
    for (int i = 0; i < GraphStep::kWarmup + 3; ++i) {
      losses.push_back(g.micro_step(data[0].first, data[0].second).item<double>());
      g.zero_grad();  // no optimizer step: the weights stay as they are
    }
    ASSERT_EQ(g.captures(), 1);
    const auto n = losses.size();
    if (p == 0.0) {
      EXPECT_EQ(losses[n - 1], losses[n - 2]);
      EXPECT_EQ(losses[n - 2], losses[n - 3]);
    } else {
      EXPECT_NE(losses[n - 1], losses[n - 2]);
      EXPECT_NE(losses[n - 2], losses[n - 3]);
    }
  }
}
