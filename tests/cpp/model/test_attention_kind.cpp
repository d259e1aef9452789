// model.attention as a name of the kinds' table and model.xsa_gate as an enum read by
// the schema (their JSON form stays the strings, so old configs and checkpoints read
// unchanged), the keys a kind owns refused on another kind, each layer's
// AttentionVariant resolved once from the config, and bench's variant names parsed
// through the same table.
#include "bench/block_bench.h"
#include "config/run_config.h"
#include "helpers.h"
#include "model/counts.h"
#include "model/gpt.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

using namespace xsagpt;
using ::testing::HasSubstr;

namespace {

TEST(AttentionKind, ReadAndWrittenAsTheNamesConfigsHold) {
  const auto c = model_config_from_json({{"attention", "xsa"}, {"xsa_gate", "sa"}, {"n_layer", 2}});
  EXPECT_EQ(c.attention, "xsa");
  EXPECT_EQ(c.xsa_gate, XsaGate::kSa);
  const auto j = to_json(c);
  EXPECT_EQ(j["attention"], "xsa");
  EXPECT_EQ(j["xsa_gate"], "sa");
  EXPECT_EQ(to_json(ModelConfig{})["attention"], "sa");  // the default, as docs/config-reference.md shows it
  EXPECT_EQ(to_json(model_config_from_json(j)), j);      // a saved config reads back as itself

  auto error_of = [](const json& m) { return test::error_of<ConfigError>([&] { model_config_from_json(m); }); };
  // The choices are the kinds' table's names, whatever kinds it has.
  EXPECT_THAT(attention_kind_choices(), HasSubstr("\"sa\""));
  EXPECT_THAT(attention_kind_choices(), HasSubstr("\"xsa\""));
  EXPECT_THAT(error_of({{"attention", "linear"}}),
              HasSubstr("model.attention: expected " + attention_kind_choices() + ", got \"linear\""));
  EXPECT_THAT(error_of({{"attention", 1}}), HasSubstr("model.attention: expected a string, got 1"));
  EXPECT_THAT(error_of({{"attention", "xsa"}, {"xsa_gate", "on"}}),
              HasSubstr("model.xsa_gate: expected \"off\", \"sa\" or \"xsa\", got \"on\""));
  EXPECT_THAT(error_of({{"xsa_gate", "sa"}}), HasSubstr("needs attention=\"xsa\" (attention is \"sa\")"));
}

TEST(AttentionVariant, EachLayerKnowsWhatItComputes) {
  auto cfg = test::small_model("xsa");
  cfg.n_layer = 3;
  cfg.xsa_layers = "last 1";
  cfg.xsa_gate = XsaGate::kSa;
  cfg.n_sink = 2;
  GPT model(cfg);
  std::vector<std::string> got;
  for (const auto& b : *model->transformer->h) {
    const auto& attn = b->as<Block>()->attn;
    got.push_back(attn->describe());
    EXPECT_EQ(attn->variant.kind, "xsa");
    EXPECT_EQ(test::own_param(*attn, "xsa_gate").defined(), attn->variant.step);  // the gate exists where it applies
  }
  EXPECT_EQ(got, (std::vector<std::string>{"sa (xsa model, step not in this layer), 2 sinks",
                                           "sa (xsa model, step not in this layer), 2 sinks",
                                           "xsa, gated (starts as sa), 2 sinks"}));
  EXPECT_EQ(cfg.describe_attention(), "xsa in layer 2, gated (starts as sa), 2 sinks");
  cfg.xsa_layers = json::array({0, 2});
  EXPECT_EQ(cfg.describe_attention(), "xsa in layers 0,2, gated (starts as sa), 2 sinks");
  EXPECT_EQ(test::small_model("sa").describe_attention(), "sa");
  EXPECT_EQ(test::small_model("xsa").describe_attention(), "xsa");
  // The variant name (eval's reports, config.json's "variant"): the keys as written.
  EXPECT_EQ(cfg.variant(), "xsa layers=[0,2] gate=sa sinks=2");
  EXPECT_EQ(to_json(RunConfig{.model = cfg})["variant"], cfg.variant());
  EXPECT_EQ(test::small_model("sa").variant(), "sa");
  auto last = cfg;
  last.xsa_layers = "last 1";
  EXPECT_EQ(last.variant(), "xsa layers=last 1 gate=sa sinks=2");

  // Counts ask the same resolution: one alpha per head in each gated layer, as the model holds.
  int64_t params = 0;
  for (const auto& p : GPT(cfg)->unique_parameters()) params += p.numel();
  EXPECT_EQ(count_params(cfg).total, params);
  auto plain = cfg;
  plain.xsa_gate = XsaGate::kOff;
  plain.n_sink = 0;
  EXPECT_EQ(count_params(cfg).non_embedding - count_params(plain).non_embedding,
            2 * cfg.n_head + cfg.n_sink * cfg.d_model);  // two gated layers, two sinks
}

TEST(AttentionKind, EveryKindsKeysAreRefusedOnAnotherKind) {
  // Each key a row owns, set on a model of a kind that does not own it, is an error
  // naming the key and the kinds it belongs to: the table itself drives the check.
  int checked = 0;
  for (const auto& owner : attention_kinds())
    for (const auto& other : attention_kinds()) {
      if (std::string(owner.name) == other.name) continue;
      for (const auto& o : owner.options) {
        if (std::find_if(other.options.begin(), other.options.end(), [&](const auto& x) {
              return std::string(x.name) == o.name;
            }) != other.options.end())
          continue;
        json m = {{"attention", other.name}, {o.name, o.choices.back()}};
        EXPECT_THAT(test::error_of<ConfigError>([&] { model_config_from_json(m); }),
                    HasSubstr(fmt::format("model.{}: a key of ", o.name)));
        ++checked;
      }
    }
  json xsa_layers_on_sa = {{"attention", attention_kinds().front().name}, {"xsa_layers", "last 1"}};
  EXPECT_THAT(test::error_of<ConfigError>([&] { model_config_from_json(xsa_layers_on_sa); }),
              HasSubstr("model.xsa_layers: a key of attention=\"xsa\""));
  EXPECT_EQ(attention_kinds().front().name, std::string("sa"));  // the default kind
  (void)checked;  // options exist only for kinds that declare them
}

TEST(BenchVariant, NamesAreAnAttentionKindAndAnXsaImplementation) {
  const auto v = parse_bench_variant("xsa-fused@weights+norm");
  EXPECT_EQ(v.kind, "xsa");
  EXPECT_EQ(v.xsa_impl, XsaImpl::kFused);
  EXPECT_EQ(v.kernels, "weights+norm");
  EXPECT_EQ(parse_bench_variant("sa").kind, "sa");
  EXPECT_FALSE(parse_bench_variant("xsa").xsa_impl.has_value());
  EXPECT_EQ(parse_bench_variant("xsa-autograd").xsa_impl, XsaImpl::kComposed);
  EXPECT_EQ(variant_config(test::small_model("sa"), "xsa-ops").attention, "xsa");
  // '+' joins kernel names and the sets a list may hold: xsa@fused+fp8 is fused with fp8.
  auto with_fp8 = parse_kernels("fused", false);
  with_fp8.fp8 = true;
  EXPECT_EQ(variant_runtime(Runtime{}, "xsa@fused+fp8", false).kernels, with_fp8);
  EXPECT_FALSE(variant_runtime(Runtime{}, "xsa@fused", false).kernels.fp8);
  for (const std::string bad : {"linear", "sa-ops", "xsa-fast", "xsa-", "-ops", ""})
    EXPECT_THAT(test::error_of<ConfigError>([&] { parse_bench_variant(bad); }),
                HasSubstr("bench variant \"" + bad + "\": expected an attention (" + attention_kind_choices() + ")"));
}

}  // namespace
