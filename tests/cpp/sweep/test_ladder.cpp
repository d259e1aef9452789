// Ladder sweeps (sweep/ladder.h): each rung sized, budgeted and given its rate by the
// stated rules, checked against the reference formulas written out here (a GPT's
// parameters: 2Vd for the untied embedding and head, 12d^2 + 2d per layer, 2d for the
// outer norms); and the specs a ladder refuses, each by the key it names.
#include "helpers.h"
#include "sweep/grid.h"
#include "sweep_files.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

using namespace xsagpt;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kVocab = 256, kStepTokens = 64 * 4;

// Parameters of the base's model at depth L and width d (n_head * head_dim = d, MLP 4d, no biases).
int64_t reference_params(int64_t L, int64_t d) { return 2 * kVocab * d + L * (12 * d * d + 2 * d) + 2 * d; }

}  // namespace

class Ladders : public test::SweepFiles {
 protected:
  void SetUp() override {
    SweepFiles::SetUp();
    write_base({{"model", {{"base", "tiny"}, {"vocab_size", kVocab}, {"block_size", 64}}},
                {"train", {{"max_steps", 100}, {"warmup_steps", 10}, {"eval_interval", 25}, {"ckpt_interval", 50}}}});
  }
  json ladder() const {
    return {{"rungs", {1, 2, 3}},
            {"aspect", 32},
            {"head_dim", 16},
            {"tokens", {{"per_param", 0.05}}},
            {"lr", {{"width_exponent", -1.0}, {"anchor", {{"d_model", 64}, {"lr", 1e-2}}}}}};
  }
  fs::path spec(const json& ladder_section, const json& extra = json::object()) const {
    json keys = {{"variants", {{"sa", json::object()}, {"xsa", {{"model.attention", "xsa"}}}}},
                 {"baseline", "sa"},
                 {"grid", {{"train.seed", {1, 2}}}},
                 {"ladder", ladder_section}};
    keys.update(extra);  // a null value leaves the key out
    return SweepFiles::spec(keys);
  }
  std::string error_of(const json& ladder_section, const json& extra = json::object()) const {
    return test::error_of<ConfigError>([&] { load_sweep(spec(ladder_section, extra).string(), 1); });
  }
};

TEST_F(Ladders, DepthRungsAreSizedBudgetedAndRatedByTheRules) {
  const auto s = load_sweep(spec(ladder()).string(), 1);
  ASSERT_TRUE(s.ladder.has_value());
  ASSERT_EQ(s.ladder->rungs.size(), 3u);
  ASSERT_EQ(s.points.size(), 3u * 2 * 2);  // rungs x seeds x variants
  EXPECT_EQ(s.keys, (std::vector<std::string>{"rung", "train.seed"}));
  for (int64_t L = 1; L <= 3; ++L) {
    const auto& r = s.ladder->rungs[L - 1];
    const int64_t d = 32 * L;
    EXPECT_EQ(r.name, "d" + std::to_string(L));
    EXPECT_EQ(r.config.model.n_layer, L);
    EXPECT_EQ(r.config.model.d_model, d);
    EXPECT_EQ(r.config.model.n_head, d / 16);
    EXPECT_EQ(r.params, reference_params(L, d));
    const int64_t steps = std::llround(0.05 * static_cast<double>(reference_params(L, d)) / kStepTokens);
    ASSERT_GE(steps, 5);  // a budget of several steps, so the stretched schedule is not all ones
    EXPECT_EQ(r.steps(), steps);
    EXPECT_EQ(r.tokens(), steps * kStepTokens);
    EXPECT_EQ(r.config.train.warmup_steps, std::max<int64_t>(1, std::llround(0.1 * static_cast<double>(steps))));
    EXPECT_EQ(r.config.train.eval_interval, std::max<int64_t>(1, std::llround(0.25 * static_cast<double>(steps))));
    EXPECT_DOUBLE_EQ(r.lr, 1e-2 * 64.0 / static_cast<double>(d));
    // 6 x matmul parameters (blocks and head) + 12 L d T for attention, per token
    const double fpt = 6.0 * static_cast<double>(L * 12 * d * d + kVocab * d) + 12.0 * L * d * 64;
    EXPECT_DOUBLE_EQ(r.flops_per_token, fpt);
  }
  // Every point of a rung trains it: its size, its steps, its rate.
  for (const auto& p : s.points) {
    const auto& r = s.ladder->rungs[p.rung];
    EXPECT_EQ(p.values["rung"], r.name);
    EXPECT_EQ(p.config.model.d_model, r.config.model.d_model);
    EXPECT_EQ(p.config.train.max_steps, r.steps());
    EXPECT_DOUBLE_EQ(p.config.train.lr, r.lr);
    EXPECT_EQ(p.config.model.attention, p.variant);
    EXPECT_EQ(p.name, fmt::format("{},rung={},train.seed={}", p.variant, r.name, p.config.train.seed));
  }
}

TEST_F(Ladders, RateMultipliersAreAnAxisOfTheirOwn) {
  auto l = ladder();
  l["lr_multipliers"] = {0.5, 2};
  const auto s = load_sweep(spec(l).string(), 1);
  ASSERT_EQ(s.points.size(), 3u * 2 * 2 * 2);
  EXPECT_EQ(s.keys, (std::vector<std::string>{"rung", "lr_mult", "train.seed"}));
  for (const auto& p : s.points) {
    EXPECT_TRUE(p.lr_mult == 0.5 || p.lr_mult == 2) << p.name;
    EXPECT_DOUBLE_EQ(p.config.train.lr, s.ladder->rungs[p.rung].lr * p.lr_mult) << p.name;
    EXPECT_THAT(p.name, HasSubstr(fmt::format("lr_mult={}", p.lr_mult == 0.5 ? "0.5" : "2.0")));
  }
}

TEST_F(Ladders, PresetRungsAndAFlopBudget) {
  auto l = ladder();
  l["rungs"] = {"tiny", json{{"preset", "gpt2-124m"}, {"set", {{"train.micro_batch", 2}}}}};
  l.erase("aspect");
  l.erase("head_dim");
  l["tokens"] = {{"flops", {1e12, 4e13}}};
  l["lr"] = {{"per_rung", {3e-3, 6e-4}}};
  const auto s = load_sweep(spec(l).string(), 1);
  const auto& big = s.ladder->rungs[1];
  EXPECT_EQ(big.config.model.n_layer, 12);
  EXPECT_EQ(big.config.model.d_model, 768);
  EXPECT_EQ(big.config.model.vocab_size, kVocab);  // the base's own model keys stay
  EXPECT_EQ(big.step_tokens, 64 * 2);              // the rung's own set
  for (size_t i = 0; i < 2; ++i) {
    const auto& r = s.ladder->rungs[i];
    const auto& m = r.config.model;
    const double fpt = 6.0 * static_cast<double>(m.n_layer * 12 * m.d_model * m.d_model + kVocab * m.d_model) +
                       12.0 * static_cast<double>(m.n_layer * m.d_model * 64);
    EXPECT_EQ(r.steps(), std::llround((i ? 4e13 : 1e12) / fpt / static_cast<double>(r.step_tokens)));
    EXPECT_DOUBLE_EQ(r.lr, i ? 6e-4 : 3e-3);
  }
  EXPECT_EQ(s.ladder->extrapolate_to.size(), 3u);  // the paper's three sizes, found beside the program
}

TEST_F(Ladders, BadSpecsAreRefusedByName) {
  auto with = [&](const char* key, const json& value) {
    auto l = ladder();
    if (value.is_null())
      l.erase(key);
    else
      l[key] = value;
    return error_of(l);
  };
  EXPECT_THAT(with("rungs", json::array({2})), HasSubstr("ladder.rungs: expected a list of at least 2 sizes"));
  auto wide_heads = ladder();
  wide_heads["rungs"] = {2, 3};
  wide_heads["head_dim"] = 64;
  EXPECT_THAT(error_of(wide_heads), HasSubstr("depth 3 gives d_model 3 x 32 = 96, not a multiple of head_dim 64"));
  EXPECT_THAT(with("tokens", {{"per_param", 1e-4}}), HasSubstr("less than one step of 256 tokens"));
  EXPECT_THAT(with("lr", {{"width_exponent", -1}}), HasSubstr("ladder.lr.anchor: required with width_exponent"));
  EXPECT_THAT(with("lr", nullptr), HasSubstr("ladder.lr: required"));
  EXPECT_THAT(with("lr", {{"per_rung", {1e-3, 2e-3}}}), HasSubstr("2 values for 3 rungs"));
  EXPECT_THAT(with("rungs", {2, 1}), HasSubstr("not more than rung d2 before it"));
  EXPECT_THAT(with("rungs", {1, 1}), HasSubstr("rung d1 is listed twice"));
  EXPECT_THAT(with("rungs", {1, "no-such-preset"}), HasSubstr("preset no-such-preset"));
  EXPECT_THAT(with("aspect", nullptr), HasSubstr("ladder.aspect: required with depth rungs"));
  EXPECT_THAT(with("tokens", {{"per_param", 20}, {"params", "most"}}), HasSubstr("ladder.tokens.params"));
  EXPECT_THAT(with("lr_multipliers", {1, 0}), HasSubstr("ladder.lr_multipliers"));
  EXPECT_THAT(with("widths", 3), HasSubstr("ladder: unknown key 'widths'"));
  EXPECT_THAT(with("estimate", {{"device", "H100"}}), HasSubstr("ladder.estimate.mfu: required with device"));
  EXPECT_THAT(with("estimate", {{"device", "Z80"}, {"mfu", 0.3}}), HasSubstr("ladder.estimate.device"));
  EXPECT_THAT(with("estimate", {{"bench", (tmp / "none.json").string()}}), HasSubstr("cannot read"));
  // What the ladder sets, nobody else may.
  EXPECT_THAT(error_of(ladder(), {{"variants", {{"sa", json::object()}, {"big", {{"model.n_layer", 8}}}}}}),
              HasSubstr("variants.big: model.n_layer is set by the ladder"));
  EXPECT_THAT(error_of(ladder(), {{"grid", {{"train.lr", {1e-3, 2e-3}}}}}),
              HasSubstr("grid: train.lr is set by the ladder"));
  EXPECT_THAT(error_of(ladder(), {{"set", {"model.d_model=64"}}}),
              HasSubstr("set: model.d_model is set by the ladder"));
  EXPECT_THAT(error_of(ladder(), {{"set", {"train.lr=1e-3"}}}), HasSubstr("set: train.lr is set by the ladder"));
  EXPECT_THAT(error_of(ladder(), {{"grid", {{"train.seq_len", {32, 64}}}}}), HasSubstr("sizes each rung's steps"));
  EXPECT_THAT(error_of(ladder(), {{"variants", nullptr}}), HasSubstr("ladder: needs \"variants\""));
}

// "set" may give the schedule's shape (its fractions of the base's max_steps), never the size or rate.
TEST_F(Ladders, SetGivesTheScheduleItsShape) {
  const auto s = load_sweep(
      spec(ladder(), {{"set", {"train.warmup_steps=50", "train.ckpt_interval=0", "train.eval_interval=0"}}}).string(),
      1);
  for (const auto& r : s.ladder->rungs) {
    ASSERT_GE(r.steps(), 5);
    EXPECT_EQ(r.config.train.warmup_steps, std::llround(0.5 * static_cast<double>(r.steps()))) << r.name;
    EXPECT_EQ(r.config.train.ckpt_interval, 0) << r.name;
    EXPECT_EQ(r.config.train.eval_interval, 0) << r.name;
  }
}
