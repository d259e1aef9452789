// Loss by position (analysis/position_loss.h) against the ordinary validation loss
// (train/evaluate.h, the path training logs) on the same model and batches, through
// each LM-head path a runtime picks: whole logits, chunks, the fused loss (its ATen
// twin here; the CUDA kernel on a GPU); and GPT::token_losses row by row against
// cross-entropy of forward's own logits.
#include "analysis/position_loss.h"
#include "distributed/context.h"
#include "helpers.h"
#include "train/evaluate.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>

using namespace xsagpt;
namespace fs = std::filesystem;

namespace {

class PositionLossTest : public test::TempDirTest {
 protected:
  // A raw uint16 shard of random tokens below `vocab`; a ValidationSet of `seqs`
  // sequences of T tokens over it, `batch` to a batch.
  ValidationSet val_set(int64_t vocab, int64_t T, int64_t batch, int64_t seqs) {
    std::mt19937 rng(5);
    std::vector<uint16_t> toks(static_cast<size_t>(seqs * T + 1));
    for (auto& t : toks) t = static_cast<uint16_t>(rng() % static_cast<uint32_t>(vocab));
    const auto path = tmp / "val_000000.bin";
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(toks.data()), static_cast<std::streamsize>(toks.size() * 2));
    LoaderOptions o;
    o.pattern = path.string();
    o.batch_size = batch;
    o.seq_len = T;
    o.vocab_size = vocab;
    return ValidationSet(o, seqs * T);
  }
};

TEST(PositionBuckets, AreLog2RangesCutAtTheSequenceLength) {
  using B = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(log2_position_buckets(1), (B{{1, 1}}));
  EXPECT_EQ(log2_position_buckets(7), (B{{1, 1}, {2, 3}, {4, 7}}));
  EXPECT_EQ(log2_position_buckets(8), (B{{1, 1}, {2, 3}, {4, 7}, {8, 8}}));
  EXPECT_EQ(log2_position_buckets(12), (B{{1, 1}, {2, 3}, {4, 7}, {8, 12}}));
}

// The buckets' token-weighted mean is evaluate()'s val loss within 1e-5, and each
// bucket counts sequences x its width, for every LM-head path.
TEST_F(PositionLossTest, MeanOverPositionsIsTheValidationLoss) {
  const int64_t T = 12, batch = 3;
  const auto set = val_set(64, T, batch, 9);
  ASSERT_EQ(set.num_batches(), 3);
  for (const std::string kind : {"sa", "xsa-gated"}) {
    auto cfg = test::small_model(kind == "sa" ? "sa" : "xsa");
    if (kind != "sa") cfg.set_attention("xsa", {{"xsa_gate", "sa"}, {"xsa_layers", "last 1"}});
    torch::manual_seed(3);
    GPT model(cfg);
    for (const auto& [name, rt] :
         std::vector<std::pair<std::string, Runtime>>{{"whole logits", test::runtime()},
                                                      {"chunks of 7", test::runtime("none", 7)},
                                                      {"fused loss", test::runtime("none", 0, "loss")},
                                                      {"fused loss, chunks of 5", test::runtime("none", 5, "loss")}}) {
      SCOPED_TRACE(kind + ", " + name);
      model->set_runtime(rt);
      DistContext single;
      const double val = evaluate(model, set, torch::kCPU, single);
      const auto r = loss_by_position(model, set, torch::kCPU);
      ASSERT_GT(val, 1.0);  // a real loss (ln 64 = 4.2 at the start), not an empty sum
      EXPECT_NEAR(r.mean_loss, val, 1e-5);
      EXPECT_EQ(r.tokens, 9 * T);
      ASSERT_EQ(r.buckets.size(), 4u);
      for (const auto& b : r.buckets) EXPECT_EQ(b.tokens, 9 * (b.last - b.first + 1));
      EXPECT_NE(r.buckets.front().mean_loss, r.buckets.back().mean_loss);  // positions differ: not one number
    }
  }
}

// Row by row, every path gives forward's own cross-entropy of each target; a target
// of -1 gives 0, as it counts nothing in the mean.
TEST(TokenLosses, EachPathGivesForwardsPerTokenCrossEntropy) {
  auto cfg = test::small_model("xsa");
  torch::manual_seed(4);
  GPT model(cfg);
  model->eval();
  auto idx = torch::randint(0, cfg.vocab_size, {2, 10});
  auto targets = torch::randint(0, cfg.vocab_size, {2, 10});
  targets.index_put_({1, 3}, -1);
  torch::Tensor want;
  {
    torch::NoGradGuard no_grad;
    namespace F = torch::nn::functional;
    auto logits = model->forward(idx).logits;
    want = F::cross_entropy(logits.reshape({-1, cfg.vocab_size}), targets.reshape(-1),
                            F::CrossEntropyFuncOptions().ignore_index(-1).reduction(torch::kNone))
               .view({2, 10});
  }
  ASSERT_GT(want.min().item<double>(), -1e-9);
  ASSERT_GT(want.max().item<double>(), 1.0);
  for (const auto& rt : {test::runtime(), test::runtime("none", 3), test::runtime("none", 0, "loss"),
                         test::runtime("none", 4, "loss")}) {
    model->set_runtime(rt);
    const auto got = model->token_losses(idx, targets);
    ASSERT_EQ(got.sizes(), targets.sizes());
    EXPECT_EQ(got.index({1, 3}).item<double>(), 0.0);
    EXPECT_TRUE(torch::allclose(got, want, 1e-5, 1e-6)) << (got - want).abs().max().item<double>();
    EXPECT_FALSE(got.requires_grad());
  }
}

// On a GPU: the CUDA loss kernel's rows and bf16, against the same model in float32 ATen.
TEST_F(PositionLossTest, CudaPathsMatchTheValidationLoss) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const torch::Device cuda(torch::kCUDA);
  const auto set = val_set(64, 12, 3, 9);
  auto cfg = test::small_model("xsa");
  torch::manual_seed(3);
  GPT model(cfg);
  model->to(cuda);
  for (const auto& rt : {test::runtime("none", 0, "loss", /*cuda=*/true), test::runtime("none", 0, "aten", true, true),
                         test::runtime("none", 5, "auto", true, true)}) {
    model->set_runtime(rt);
    DistContext single;
    const double val = evaluate(model, set, cuda, single);
    EXPECT_NEAR(loss_by_position(model, set, cuda).mean_loss, val, 1e-5);
  }
}

}  // namespace
