// Muon's pieces on their own: the batched Newton-Schulz iteration against the SVD
// and against one matrix at a time, and which parameters the run's optimizer gives
// to Muon. The whole update is tested against torch.optim.Muon in
// tests/python/train/test_muon.py.
#include "config/run_config.h"
#include "distributed/context.h"
#include "helpers.h"
#include "model/counts.h"
#include "model/gpt.h"
#include "optim/muon.h"
#include "train/parts.h"

#include <gtest/gtest.h>

using namespace xsagpt;

TEST(Muon, NewtonSchulzKeepsTheSingularVectorsAndPullsTheValuesTowardsOne) {
  torch::manual_seed(0);
  // Singular values spread over three decades: the iteration must lift the small ones.
  auto u = std::get<0>(torch::linalg_qr(torch::randn({8, 8}, torch::kFloat64)));
  auto v = std::get<0>(torch::linalg_qr(torch::randn({12, 8}, torch::kFloat64)));
  auto s = torch::logspace(-3, 0, 8, 10.0, torch::kFloat64) * 5.0;
  auto g = u.matmul(torch::diag(s)).matmul(v.t());  // 8 x 12
  auto o = newton_schulz(g.unsqueeze(0), 5)[0];
  auto d = u.t().matmul(o).matmul(v);  // diagonal iff O = U f(S) V^T
  auto off = d - torch::diag(torch::diagonal(d));
  EXPECT_LT(off.abs().max().item<double>(), 1e-10);
  auto f = torch::diagonal(d);
  EXPECT_GT(f.min().item<double>(), 0.2) << f;  // even 1e-3 of the largest, lifted
  EXPECT_LT(f.max().item<double>(), 1.3) << f;
  // Unlike the input, whose singular values span 1000x.
  EXPECT_LT((f.max() / f.min()).item<double>(), 5.0) << f;
}

TEST(Muon, BatchedNewtonSchulzEqualsOneMatrixAtATime) {
  torch::manual_seed(1);
  auto batch = torch::randn({5, 6, 10});
  auto together = newton_schulz(batch, 5);
  for (int64_t i = 0; i < 5; ++i) {
    auto alone = newton_schulz(batch[i].unsqueeze(0), 5)[0];
    EXPECT_TRUE(torch::allclose(together[i], alone, 1e-5, 1e-6)) << i;
  }
  // Scale does not matter: each matrix is normalised by its own norm first.
  EXPECT_TRUE(torch::allclose(newton_schulz(batch * 100.0, 5), together, 1e-4, 1e-5));
}

TEST(Muon, TakesTheBlockMatricesAndNothingElse) {
  auto cfg = test::small_model("xsa");
  cfg.bias = true;
  cfg.tie_embeddings = false;
  cfg.n_sink = 2;
  cfg.set_attention("xsa", {{"xsa_gate", "sa"}});
  GPT m(cfg);
  TrainConfig t;
  t.optimizer = Optimizer::kMuon;
  DistContext single;
  RunOptimizer opt(m->unique_named_parameters(), t, adamw_config(t, *m), single);
  const auto s = opt.state();
  int64_t muon_weights = 0;
  for (const auto& [name, p] : m->unique_named_parameters()) {
    const bool block_matrix = name.starts_with("transformer.h.") && name.ends_with(".weight") &&
                              (name.find("c_attn") != std::string::npos || name.find("c_proj") != std::string::npos ||
                               name.find("c_fc") != std::string::npos);
    EXPECT_EQ(s.muon_momentum.count(name), block_matrix ? 1u : 0u) << name;
    EXPECT_EQ(s.adamw.exp_avg.count(name), block_matrix ? 0u : 1u) << name;
    if (block_matrix) muon_weights += p.numel();
  }
  EXPECT_EQ(s.muon_momentum.size(), 4u * cfg.n_layer);
  EXPECT_EQ(muon_weights, count_params(cfg).block_matrices);  // what the memory estimate counts
}

TEST(Muon, AdjustedRatesAreTorchs) {
  EXPECT_DOUBLE_EQ(muon_adjusted_lr(0.02, MuonAdjustLr::kOriginal, 192, 48), 0.02 * 2.0);  // tall: sqrt(A / B)
  EXPECT_DOUBLE_EQ(muon_adjusted_lr(0.02, MuonAdjustLr::kOriginal, 48, 192), 0.02);        // wide: unchanged
  EXPECT_DOUBLE_EQ(muon_adjusted_lr(0.02, MuonAdjustLr::kMatchRmsAdamW, 48, 192), 0.02 * 0.2 * std::sqrt(192.0));
}
