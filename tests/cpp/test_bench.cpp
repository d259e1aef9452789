// The benchmark's instruments: CPU peak memory counts tensor bytes exactly, the
// custom XSA autograd function keeps no more than its output alive between forward
// and backward, and a small block grid runs end to end.
#include "bench/block_bench.h"
#include "bench/peak_memory.h"
#include "model/xsa.h"

#include <gtest/gtest.h>

using namespace xsagpt;

TEST(PeakMemory, CountsCpuTensorBytesExactly) {
  auto before = torch::ones({1000});  // allocated outside: neither counted nor, when freed, subtracted
  PeakMemory pm(torch::kCPU);
  {
    auto a = torch::empty({1000, 1000});                    // 4,000,000 bytes
    auto b = torch::empty({250, 1000}, torch::kFloat64);    // 2,000,000 more: peak 6,000,000
  }
  auto c = torch::empty({500, 1000});                       // 2,000,000 after both were freed
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
  const int64_t slack = 64 * 1024;  // per-row norms and dot products: (4, 4, 256, 1) floats each
  EXPECT_EQ(held(exclude_self_value), full);  // saves y and v only, which already exist
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
