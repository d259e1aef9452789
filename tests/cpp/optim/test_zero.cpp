// Sharded optimizer state (ZeRO-1): the partition of parameters over ranks, and
// ShardedAdamW on Gloo ranks (threads of this process) against one unsharded
// AdamW given the same gradients: same parameters bit for bit, the same full
// state assembled on rank 0, and exact continuation from a full state.
#include "optim/zero.h"
#include "ranks.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

using namespace xsagpt;
using ::testing::HasSubstr;

TEST(Partition, LargestFirstToTheLeastLoadedRank) {
  // 10 -> r0; 7 -> r1; 5 -> r1 (7 < 10); 5 -> r0 (10 < 12); 3 -> r1 (12 < 15); 1 -> r0 (15 = 15: lowest rank).
  EXPECT_EQ(partition_by_size({10, 7, 5, 5, 3, 1}, 2), (std::vector<int64_t>{0, 1, 1, 0, 1, 0}));
  // 7 -> r0; the first 5 -> r1, the second -> r1 (5 < 7); 1 -> r0.
  EXPECT_EQ(partition_by_size({1, 5, 5, 7}, 2), (std::vector<int64_t>{0, 1, 1, 0}));
  EXPECT_EQ(partition_by_size({4, 4, 4}, 1), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(partition_by_size({4, 3}, 4), (std::vector<int64_t>{0, 1}));  // more ranks than tensors: some own none
  EXPECT_TRUE(partition_by_size({}, 3).empty());
}

TEST(Partition, ModelParametersAreOwnedOnceAndBalanced) {
  // The paper's 1.4B model's tensor sizes (configs/model/paper-1.4b.json), without
  // allocating it: every tensor has one owner in [0, W), the partition is the same
  // every time, and the ranks' loads differ by at most the largest tensor.
  const int64_t vocab = 50304, d = 2048, inner = 24 * 128, layers = 24;
  std::vector<int64_t> bytes{vocab * d * 4};  // wte (tied head)
  for (int64_t l = 0; l < layers; ++l)
    for (int64_t n : {d, 3 * inner * d, inner * d, d, 4 * d * d, 4 * d * d}) bytes.push_back(n * 4);
  bytes.push_back(d * 4);  // ln_f
  const int64_t largest = *std::max_element(bytes.begin(), bytes.end());
  for (int64_t world : {2, 3, 8, 64}) {
    const auto owner = partition_by_size(bytes, world);
    ASSERT_EQ(owner.size(), bytes.size());
    EXPECT_EQ(owner, partition_by_size(bytes, world));
    std::vector<int64_t> load(world, 0);
    for (size_t i = 0; i < owner.size(); ++i) {
      ASSERT_GE(owner[i], 0);
      ASSERT_LT(owner[i], world);
      load[owner[i]] += bytes[i];
    }
    const auto [lo, hi] = std::minmax_element(load.begin(), load.end());
    EXPECT_LE(*hi - *lo, largest) << "world " << world;
    EXPECT_EQ(owner[0], 0);  // the embedding, the largest tensor, goes first to rank 0
  }
}

namespace {

using Named = std::vector<std::pair<std::string, torch::Tensor>>;

// Matrices (weight decay) and vectors (none) of assorted sizes, the same on every call.
Named make_params() {
  auto g = at::make_generator<at::CPUGeneratorImpl>(7);
  Named p;
  const std::vector<std::vector<int64_t>> shapes{{64, 32}, {32}, {96, 32}, {32}, {32, 128}, {128}, {16, 32}};
  for (size_t i = 0; i < shapes.size(); ++i)
    p.emplace_back(fmt::format("p{}", i), torch::randn(shapes[i], g).requires_grad_());
  return p;
}

// Gradients as the all-reduce leaves them: the same on every rank.
void set_grads(const Named& params, int step) {
  for (size_t i = 0; i < params.size(); ++i) {
    auto g = at::make_generator<at::CPUGeneratorImpl>(1000 * step + i);
    params[i].second.mutable_grad() = torch::randn(params[i].second.sizes(), g);
  }
}

double lr_at(int step) { return 1e-2 / (1 + step); }

// Unsharded reference: parameters and full state after `steps` steps.
std::pair<Named, AdamWState> reference(AdamWImpl impl, int steps) {
  auto p = make_params();
  AdamW opt(p, AdamWConfig{0.9, 0.95, 1e-8, 0.1, impl});
  for (int s = 0; s < steps; ++s) {
    set_grads(p, s);
    opt.step(lr_at(s));
  }
  return {p, opt.state()};
}

void expect_equal_state(const AdamWState& a, const AdamWState& b) {
  for (auto [x, y, what] : {std::tuple{&a.exp_avg, &b.exp_avg, "exp_avg"},
                            {&a.exp_avg_sq, &b.exp_avg_sq, "exp_avg_sq"},
                            {&a.step, &b.step, "step"}}) {
    ASSERT_EQ(x->size(), y->size()) << what;
    for (const auto& [name, t] : *x) {
      ASSERT_TRUE(y->count(name)) << what << " " << name;
      EXPECT_TRUE(torch::equal(t.to(torch::kFloat32), y->at(name).to(torch::kFloat32))) << what << " " << name;
    }
  }
}

}  // namespace

class ShardedAdamWTest : public ::testing::TestWithParam<AdamWImpl> {};

TEST_P(ShardedAdamWTest, MatchesUnshardedAdamWBitForBit) {
  const AdamWImpl impl = GetParam();
  constexpr int kSteps = 4, kSplit = 2;
  const auto [want_p, want_state] = reference(impl, kSteps);
  const auto [mid_p, mid_state] = reference(impl, kSplit);
  for (int world : {2, 3}) {
    test::run_ranks(world, [&](int r, ProcessGroupContext& d) {
      // Straight through, with the full state assembled on rank 0 at the end.
      auto p = make_params();
      ShardedAdamW opt(p, AdamWConfig{0.9, 0.95, 1e-8, 0.1, impl}, d, /*shard=*/true);
      EXPECT_TRUE(opt.sharded());
      if (r == 0) {
        EXPECT_THAT(opt.summary(), HasSubstr("sharded over " + std::to_string(world) + " ranks"));
      }
      opt.state();  // before the first step (the torch impl has no state yet): no deadlock, nothing wrong
      for (int s = 0; s < kSteps; ++s) {
        set_grads(p, s);
        opt.step(lr_at(s));
      }
      for (size_t i = 0; i < p.size(); ++i)
        EXPECT_TRUE(torch::equal(p[i].second, want_p[i].second))
            << "world " << world << " rank " << r << " " << p[i].first;
      const auto full = opt.state();
      if (r == 0) expect_equal_state(full, want_state);

      // Resumed halfway from the unsharded state: each rank keeps its part.
      auto q = make_params();
      for (size_t i = 0; i < q.size(); ++i) {
        torch::NoGradGuard no_grad;
        q[i].second.copy_(mid_p[i].second);
      }
      ShardedAdamW resumed(q, AdamWConfig{0.9, 0.95, 1e-8, 0.1, impl}, d, /*shard=*/true);
      resumed.load_state(mid_state);
      for (int s = kSplit; s < kSteps; ++s) {
        set_grads(q, s);
        resumed.step(lr_at(s));
      }
      for (size_t i = 0; i < q.size(); ++i) EXPECT_TRUE(torch::equal(q[i].second, want_p[i].second)) << q[i].first;
    });
  }
}

INSTANTIATE_TEST_SUITE_P(Impl, ShardedAdamWTest, ::testing::Values(AdamWImpl::kFused, AdamWImpl::kTorch));

TEST(ShardedAdamW, StateIsAssembledOnRankZeroOnly) {
  test::run_ranks(2, [](int r, ProcessGroupContext& d) {
    auto p = make_params();
    ShardedAdamW opt(p, AdamWConfig{0.9, 0.95, 1e-8, 0.1, AdamWImpl::kFused}, d, true);
    set_grads(p, 0);
    opt.step(1e-3);
    const auto s = opt.state();
    EXPECT_EQ(s.exp_avg.size(), r == 0 ? p.size() : 0u);  // rank 1 sent its part and keeps no copy
    if (r == 0) {
      EXPECT_THAT(opt.summary(), HasSubstr("on ranks 0..1"));
    }
  });
}

TEST(ShardedAdamW, OneProcessIsPlainAdamW) {
  DistContext single;
  auto p = make_params();
  ShardedAdamW opt(p, AdamWConfig{0.9, 0.95, 1e-8, 0.1, AdamWImpl::kFused}, single, /*shard=*/true);
  EXPECT_FALSE(opt.sharded());
  EXPECT_THAT(opt.summary(), HasSubstr("one process, nothing to shard"));
  for (int s = 0; s < 3; ++s) {
    set_grads(p, s);
    opt.step(lr_at(s));
  }
  const auto [want_p, want_state] = reference(AdamWImpl::kFused, 3);
  for (size_t i = 0; i < p.size(); ++i) EXPECT_TRUE(torch::equal(p[i].second, want_p[i].second));
  expect_equal_state(opt.state(), want_state);
}

// A checkpoint holds the full state whatever the sharding, so one written by 2 ranks
// continues on 3 (each keeping its part of another partition) and on 1, as the
// unsharded run does, bit for bit.
TEST(ShardedAdamW, AStateSavedByTwoRanksContinuesOnThreeAndOnOne) {
  constexpr int kSteps = 4, kSplit = 2;
  const AdamWConfig cfg{0.9, 0.95, 1e-8, 0.1, AdamWImpl::kFused};
  const auto [want_p, want_state] = reference(AdamWImpl::kFused, kSteps);
  AdamWState saved;  // as rank 0 writes it into the checkpoint
  Named saved_p;
  test::run_ranks(2, [&](int r, ProcessGroupContext& d) {
    auto p = make_params();
    ShardedAdamW opt(p, cfg, d, /*shard=*/true);
    for (int s = 0; s < kSplit; ++s) {
      set_grads(p, s);
      opt.step(lr_at(s));
    }
    auto full = opt.state();
    if (r == 0) {
      saved = full;
      saved_p = p;
    }
  });
  ASSERT_EQ(saved.exp_avg.size(), saved_p.size());  // both ranks' parts, assembled
  std::vector<int64_t> bytes;
  for (const auto& [name, t] : saved_p) bytes.push_back(static_cast<int64_t>(t.nbytes()));
  EXPECT_NE(partition_by_size(bytes, 2), partition_by_size(bytes, 3));  // the parts change hands

  auto continue_on = [&](DistContext& d, int world) {
    auto q = make_params();
    for (size_t i = 0; i < q.size(); ++i) {
      torch::NoGradGuard no_grad;
      q[i].second.copy_(saved_p[i].second);
    }
    ShardedAdamW opt(q, cfg, d, /*shard=*/true);
    EXPECT_EQ(opt.sharded(), world > 1);
    opt.load_state(saved);
    for (int s = kSplit; s < kSteps; ++s) {
      set_grads(q, s);
      opt.step(lr_at(s));
    }
    for (size_t i = 0; i < q.size(); ++i)
      EXPECT_TRUE(torch::equal(q[i].second, want_p[i].second)) << "world " << world << " " << q[i].first;
    const auto full = opt.state();
    if (d.is_main()) expect_equal_state(full, want_state);
  };
  test::run_ranks(3, [&](int, ProcessGroupContext& d) { continue_on(d, 3); });
  DistContext single;
  continue_on(single, 1);
}
