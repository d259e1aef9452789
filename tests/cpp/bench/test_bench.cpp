// The benchmark's instruments: CPU peak memory counts tensor bytes exactly, the
// custom XSA autograd function keeps no more than its output alive between forward
// and backward, and a small block grid runs end to end.
#include "bench/block_bench.h"
#include "bench/peak_memory.h"
#include "helpers.h"
#include "model/xsa.h"
#include "train/parts.h"

#include <gtest/gtest.h>

using namespace xsagpt;

TEST(PeakMemory, CountsCpuTensorBytesExactly) {
  auto before = torch::ones({1000});  // allocated outside: neither counted nor, when freed, subtracted
  PeakMemory pm(torch::kCPU);
  {
    auto a = torch::empty({1000, 1000});                  // 4,000,000 bytes
    auto b = torch::empty({250, 1000}, torch::kFloat64);  // 2,000,000 more: peak 6,000,000
  }
  auto c = torch::empty({500, 1000});  // 2,000,000 after both were freed
  before = torch::Tensor();
  EXPECT_EQ(pm.peak_bytes(), 6'000'000);
}

TEST(PeakMemory, CustomXsaFunctionKeepsOnlyItsOutputUntilBackward) {
  torch::manual_seed(0);
  auto y = torch::randn({4, 4, 256, 64}).requires_grad_(true), v = torch::randn_like(y).requires_grad_(true);
  const int64_t full = y.numel() * 4;
  // Bytes still allocated after forward: z and whatever autograd saved besides the inputs.
  auto held = [&](auto xsa) {
    PeakMemory pm(torch::kCPU);
    auto z = xsa(y, v, 1e-6, torch::Tensor());
    return pm.current_bytes();
  };
  const int64_t slack = 64 * 1024;                         // per-row norms and dot products: (4, 4, 256, 1) floats each
  EXPECT_EQ(held(exclude_self_value), full);               // saves y and v only, which already exist
  EXPECT_GE(held(exclude_self_value_autograd), 2 * full);  // also v^ (and small per-row tensors)
  EXPECT_LE(held(exclude_self_value_autograd), 2 * full + slack);
}

TEST(Bench, TinyBlockGridRunsAndXsaFunctionUsesLessMemory) {
  BenchOptions o;
  o.batch = 2;
  o.head_dim = 16;
  o.warmup = 0;
  o.iters = 2;
  auto r = bench_block(o, 32, 32);
  ASSERT_EQ(r.size(), 3u);
  for (const auto& [v, t] : r) {
    EXPECT_GT(t.median_ms, 0) << v;
    EXPECT_GE(t.median_ms, t.min_ms) << v;
    EXPECT_GT(t.peak_bytes, 0) << v;
  }
  // Deterministic CPU byte counts: the custom function's block peaks below the
  // ordinary-ops one, and XSA costs SA at most the transient float32 temporaries.
  EXPECT_LT(r["xsa"].peak_bytes, r["xsa-autograd"].peak_bytes);
  EXPECT_GE(r["xsa"].peak_bytes, r["sa"].peak_bytes);
}

// bench times the step train runs: its model, AdamW and gradient sync come from the
// function TrainingState builds its own with (train/parts.h), with train's AdamW
// settings, seed and runtime. On the CPU; the runtimes are compared as on CUDA too.
TEST(Bench, TrainingStepIsBuiltAsTrainBuildsIt) {
  const auto cfg = test::small_model("xsa");
  BenchOptions o;  // the train.* values bench's flags leave at their defaults
  o.train.precision = "fp32";
  o.runtime = runtime_of(o.train, /*cuda=*/false);
  DistContext single;
  auto bench = bench_training_parts(o, cfg, "xsa", single);
  RunConfig run;
  run.model = variant_config(cfg, "xsa");
  run.train.precision = "fp32";
  auto train = build_training(run.model, run.train, run.runtime(/*cuda=*/false), torch::kCPU, single);

  const auto &a = bench.optimizer->config(), &b = train.optimizer->config();
  EXPECT_GT(a.eps, 0);  // the settings compared are real ones, not zeros
  EXPECT_GT(a.weight_decay, 0);
  EXPECT_EQ(a.beta1, b.beta1);
  EXPECT_EQ(a.beta2, b.beta2);
  EXPECT_EQ(a.eps, b.eps);
  EXPECT_EQ(a.weight_decay, b.weight_decay);
  EXPECT_EQ(a.impl, b.impl);
  EXPECT_EQ(bench.optimizer->impl(), train.optimizer->impl());
  EXPECT_TRUE(bench.model->runtime() == train.model->runtime());
  ASSERT_GT(bench.params.size(), 4u);
  ASSERT_EQ(bench.params.size(), train.params.size());
  for (size_t k = 0; k < bench.params.size(); ++k)
    EXPECT_TRUE(torch::equal(bench.params[k], train.params[k])) << k;  // one seed, one initialisation

  // bench --dtype fp32 on CUDA runs train's fp32 step: TF32 matmuls, set when the
  // model takes the runtime (a process-wide ATen switch, put back after).
  const auto cuda = runtime_of(o.train, /*cuda=*/true);
  EXPECT_TRUE(cuda == run.runtime(/*cuda=*/true));
  EXPECT_TRUE(cuda.tf32);
  EXPECT_FALSE(cuda.bf16);
  GPT m(cfg);
  m->set_runtime(cuda);
  EXPECT_TRUE(at::globalContext().allowTF32CuBLAS());
  m->set_runtime(run.runtime(/*cuda=*/false));
  EXPECT_FALSE(at::globalContext().allowTF32CuBLAS());
}
